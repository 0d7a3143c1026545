//! Mistral's `[TOOL_CALLS]` calls, in the three shapes its tokenizer versions write (and
//! llama.cpp's and vLLM's mistral parsers read):
//! - `[TOOL_CALLS] [{"name": …, "arguments": {…}}, …]` (Mistral 7B v0.3, Nemo);
//! - `[TOOL_CALLS]NAME[ARGS]{…}` (Magistral, Devstral, Ministral 3);
//! - `[TOOL_CALLS]NAME{…}` (tokenizer v11 in vLLM).
//!
//! The calls end the reply: from the first `[TOOL_CALLS]` that begins a line outside code
//! to the end, the text must be calls and whitespace only. They are one batch: if any of them
//! cannot be taken, none is.

use serde_json::Value;

use super::lines;
use super::{Catalog, Extracted, Shape, TextToolCall, call_object, json_prefix, skip_space};

const MARKER: &str = "[TOOL_CALLS]";
const ARGS: &str = "[ARGS]";

pub(super) fn extract(text: &str, catalog: &dyn Catalog) -> Option<Extracted> {
    lines::take_tail(text, MARKER, &|tail| calls(tail, catalog))
}

/// Every call of a tail that begins with the marker, or `None` if any part of it is not one.
fn calls(tail: &str, catalog: &dyn Catalog) -> Option<Vec<TextToolCall>> {
    let mut calls = Vec::new();
    let mut at = 0;
    while at < tail.len() {
        at = tail[at..].starts_with(MARKER).then_some(at)? + MARKER.len();
        at = skip_space(tail, at);
        let rest = &tail[at..];
        if rest.starts_with('[') {
            let (Value::Array(objects), len) = json_prefix(rest)? else {
                return None;
            };
            if objects.is_empty() {
                return None;
            }
            for object in objects {
                calls.push(call_object(object, Shape::Marked, catalog)?);
            }
            at += len;
        } else {
            let (call, len) = named_call(rest, catalog)?;
            calls.push(call);
            at += len;
        }
        at = skip_space(tail, at);
    }
    Some(calls)
}

/// `NAME[ARGS]{…}` or `NAME{…}` at the start of `text`, and its length.
fn named_call(text: &str, catalog: &dyn Catalog) -> Option<(TextToolCall, usize)> {
    let name_len = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
        .unwrap_or(text.len());
    let name = &text[..name_len];
    let mut at = name_len;
    if text[at..].starts_with(ARGS) {
        at += ARGS.len();
    }
    if name.is_empty() || !text[at..].starts_with('{') {
        return None;
    }
    let (arguments, len) = json_prefix(&text[at..])?;
    let arguments = catalog.accept(name, arguments)?;
    let call = TextToolCall {
        name: name.to_owned(),
        arguments,
    };
    Some((call, at + len))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a clear test failure
mod tests {
    use serde_json::json;

    use super::super::testing::tools;
    use super::*;

    fn paths(text: &str) -> Vec<Value> {
        let got = extract(text, &tools()).unwrap_or_else(|| panic!("{text}"));
        got.calls
            .into_iter()
            .map(|c| c.arguments["path"].clone())
            .collect()
    }

    #[test]
    fn takes_the_array_shape() {
        let text = "Reading both.\n[TOOL_CALLS] [{\"name\": \"read_file\", \"arguments\": \
            {\"path\": \"a\"}}, {\"name\": \"read_file\", \"arguments\": {\"path\": \"b\"}}]\n";
        assert_eq!(paths(text), [json!("a"), json!("b")]);
        assert_eq!(extract(text, &tools()).unwrap().text, "Reading both.");
    }

    #[test]
    fn takes_the_named_shapes() {
        let text = "[TOOL_CALLS]read_file[ARGS]{\"path\": \"a\"}[TOOL_CALLS]read_file[ARGS]\
            {\"path\": \"b\", \"startLine\": \"2\"}";
        assert_eq!(paths(text), [json!("a"), json!("b")]);
        assert_eq!(
            extract(text, &tools()).unwrap().calls[1].arguments["startLine"],
            2
        );
        let text = "Sure.\n  [TOOL_CALLS]read_file{\"path\": \"c\"}\n";
        assert_eq!(paths(text), [json!("c")]);
        assert_eq!(extract(text, &tools()).unwrap().text, "Sure.");
    }

    #[test]
    fn refuses_quoted_calls() {
        let call = "[TOOL_CALLS]read_file[ARGS]{\"path\": \"a\"}";
        for text in [
            format!("Mistral writes {call}"),
            format!("Mistral writes `{call}` at the end."),
            format!("```\n{call}\n```"),
            format!("Write `\n{call}\n` like that."),
            format!("> {call}"),
        ] {
            assert_eq!(extract(&text, &tools()), None, "{text}");
        }
    }

    #[test]
    fn refuses_the_whole_batch_when_any_part_is_wrong() {
        let good = "[TOOL_CALLS]read_file[ARGS]{\"path\": \"a\"}";
        for text in [
            format!("{good}[TOOL_CALLS]rm[ARGS]{{\"path\": \"/\"}}"),
            format!("{good}[TOOL_CALLS]read_file[ARGS]{{\"path\": 1, \"x\": 2}}"),
            format!("{good}\nand then I will summarize."),
            "[TOOL_CALLS] [{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}, \
                {\"name\": \"rm\", \"arguments\": {}}]"
                .to_owned(),
            "[TOOL_CALLS] []".to_owned(),
            "[TOOL_CALLS]".to_owned(),
            "[TOOL_CALLS] is the token Mistral models use.".to_owned(),
            "[TOOL_CALLS]read_file[ARGS][\"a\"]".to_owned(),
            "[TOOL_CALLS]read_file [ARGS]{\"path\": \"a\"}".to_owned(),
            "[TOOL_CALLS]read_file[ARGS]{\"path\": \"a\"".to_owned(),
            // A refused first tail is not retried from a later marker.
            format!("[TOOL_CALLS]rm[ARGS]{{}}\n{good}"),
        ] {
            assert_eq!(extract(&text, &tools()), None, "{text}");
        }
    }
}
