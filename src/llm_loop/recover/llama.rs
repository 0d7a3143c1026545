//! Llama 3's `<|python_tag|>` calls, as its template writes them (and llama.cpp's and vLLM's
//! llama3 parsers read them):
//! - `<|python_tag|>{"name": …, "parameters": {…}}`, several joined by `;`;
//! - `<|python_tag|>NAME.call(key=value, …)`, the built-in tool form, read strictly: the
//!   name an identifier, each value a JSON literal (`"text"`, `3`, `true`, `[…]`, `{…}`).
//!   Python's own literals (`'text'`, `True`, `None`) are refused rather than guessed at:
//!   reading Python faithfully needs a Python parser, and a half-right one runs the wrong call.
//!
//! The calls end the reply: from the first tag that begins a line outside code to the end,
//! the text must be calls and whitespace only, and they are taken all or none.

use serde_json::{Map, Value};

use super::lines;
use super::{Catalog, Extracted, Shape, TextToolCall, call_object, json_prefix, skip_space};

const TAG: &str = "<|python_tag|>";

pub(super) fn extract(text: &str, catalog: &dyn Catalog) -> Option<Extracted> {
    lines::take_tail(text, TAG, &|tail| {
        let tail = &tail[TAG.len()..];
        if tail.trim_start().starts_with('{') {
            json_calls(tail, catalog)
        } else {
            python_call(tail, catalog).map(|call| vec![call])
        }
    })
}

/// `{…}; {…}` to the end of `tail`.
fn json_calls(tail: &str, catalog: &dyn Catalog) -> Option<Vec<TextToolCall>> {
    let mut calls = Vec::new();
    let mut at = skip_space(tail, 0);
    loop {
        if !tail[at..].starts_with('{') {
            return None;
        }
        let (object, len) = json_prefix(&tail[at..])?;
        calls.push(call_object(object, Shape::Marked, catalog)?);
        at = skip_space(tail, at + len);
        match tail[at..].strip_prefix(';') {
            Some(_) => at = skip_space(tail, at + 1),
            None if at == tail.len() => return Some(calls),
            None => return None,
        }
    }
}

/// `NAME.call(key=value, …)` and nothing after it.
fn python_call(tail: &str, catalog: &dyn Catalog) -> Option<TextToolCall> {
    let at = skip_space(tail, 0);
    let name_len = identifier(&tail[at..])?;
    let name = &tail[at..at + name_len];
    let mut at = token(tail, at + name_len, ".")?;
    at = token(tail, at, "call")?;
    at = token(tail, at, "(")?;
    let mut arguments = Map::new();
    if let Some(after) = token(tail, at, ")") {
        return finish(name, arguments, &tail[after..], catalog);
    }
    loop {
        at = skip_space(tail, at);
        let key_len = identifier(&tail[at..])?;
        let key = &tail[at..at + key_len];
        at = skip_space(tail, token(tail, at + key_len, "=")?);
        let (value, len) = json_prefix(&tail[at..])?;
        if arguments.insert(key.to_owned(), value).is_some() {
            return None;
        }
        at += len;
        if let Some(after) = token(tail, at, ")") {
            return finish(name, arguments, &tail[after..], catalog);
        }
        at = token(tail, at, ",")?;
    }
}

/// The offset past `literal` when it follows `at` after any whitespace.
fn token(text: &str, at: usize, literal: &str) -> Option<usize> {
    let at = skip_space(text, at);
    text[at..]
        .starts_with(literal)
        .then_some(at + literal.len())
}

fn finish(
    name: &str,
    arguments: Map<String, Value>,
    after: &str,
    catalog: &dyn Catalog,
) -> Option<TextToolCall> {
    if !after.trim().is_empty() {
        return None;
    }
    let arguments = catalog.accept(name, Value::Object(arguments))?;
    Some(TextToolCall {
        name: name.to_owned(),
        arguments,
    })
}

/// The length of the identifier at the start of `text` (ASCII letters, digits, `_`, not
/// starting with a digit).
fn identifier(text: &str) -> Option<usize> {
    let len = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    let starts_well = text.chars().next().is_some_and(|c| !c.is_ascii_digit());
    (len > 0 && starts_well).then_some(len)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a clear test failure
mod tests {
    use serde_json::json;

    use super::super::testing::tools;
    use super::*;

    #[test]
    fn takes_json_calls_after_the_tag() {
        let text = "Looking.\n<|python_tag|>{\"name\": \"read_file\", \"parameters\": \
            {\"path\": \"a\"}}; {\"type\": \"function\", \"name\": \"read_file\", \
            \"parameters\": {\"path\": \"b\", \"endLine\": \"4\"}}\n";
        let got = extract(text, &tools()).unwrap();
        assert_eq!(got.text, "Looking.");
        let args: Vec<&Value> = got.calls.iter().map(|c| &c.arguments).collect();
        assert_eq!(
            args,
            [&json!({"path": "a"}), &json!({"path": "b", "endLine": 4})]
        );
    }

    #[test]
    fn takes_the_call_form_with_json_values() {
        let text = "<|python_tag|>search_files.call(query=\"a, b)\", limit=3, \
            globs=[\"*.rs\"], literal=true)";
        let got = extract(text, &tools()).unwrap();
        assert_eq!(got.calls[0].name, "search_files");
        assert_eq!(
            got.calls[0].arguments,
            json!({"query": "a, b)", "limit": 3, "globs": ["*.rs"], "literal": true})
        );
        let none = extract("<|python_tag|> search_files . call ( ) ", &tools()).unwrap();
        assert_eq!(none.calls[0].arguments, json!({}));
    }

    #[test]
    fn refuses_quoted_and_malformed_calls() {
        let good = "<|python_tag|>{\"name\": \"read_file\", \"parameters\": {\"path\": \"a\"}}";
        for text in [
            format!("Llama writes {good}"),
            format!("Llama writes `{good}`."),
            format!("```\n{good}\n```"),
            format!("> {good}"),
            format!("{good}\nThen I answer."),
            format!("{good};"),
            format!("{good}; {{\"name\": \"rm\", \"parameters\": {{}}}}"),
            "<|python_tag|>{\"name\": \"read_file\", \"parameters\": {\"path\": 1, \"q\": 1}}"
                .to_owned(),
            "<|python_tag|>print('hello')".to_owned(),
            "<|python_tag|>read_file.call(path='a')".to_owned(),
            "<|python_tag|>search_files.call(literal=True)".to_owned(),
            "<|python_tag|>read_file.call(path=\"a\", path=\"b\")".to_owned(),
            "<|python_tag|>read_file.call(\"a\")".to_owned(),
            "<|python_tag|>read_file.call(path=\"a\"".to_owned(),
            "<|python_tag|>read_file.call(path=\"a\") and more".to_owned(),
            "<|python_tag|>functions.read_file.call(path=\"a\")".to_owned(),
            "<|python_tag|>rm.call(path=\"/\")".to_owned(),
            "<|python_tag|>".to_owned(),
        ] {
            assert_eq!(extract(&text, &tools()), None, "{text}");
        }
    }
}
