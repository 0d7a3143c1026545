//! A reply that is nothing but one JSON call object, the shape Llama 3 and many small models
//! write when their template asks for "a JSON function call": bare, or alone in a ```json
//! fence. With no marker to go by, the object must be exactly a call: `name`, `arguments` or
//! `parameters`, and at most `"type": "function"` besides.

use super::lines::fence_marker;
use super::{Catalog, Extracted, Shape, call_object};

pub(super) fn extract(text: &str, catalog: &dyn Catalog) -> Option<Extracted> {
    let body = text.trim();
    let object = unfenced(body).unwrap_or(body);
    if !object.starts_with('{') {
        return None;
    }
    let value = serde_json::from_str(object).ok()?;
    let call = call_object(value, Shape::Bare, catalog)?;
    Some(Extracted {
        text: String::new(),
        calls: vec![call],
    })
}

/// What a fence holding the whole reply holds, when its info string is `json` or empty.
fn unfenced(body: &str) -> Option<&str> {
    let (opening, rest) = body.split_once('\n')?;
    let (fence, run) = fence_marker(opening)?;
    let info = opening[run..].trim();
    if !(info.is_empty() || info.eq_ignore_ascii_case("json")) {
        return None;
    }
    let (inner, closing) = rest.rsplit_once('\n')?;
    let closing = closing.trim();
    let closes = closing.len() >= run && closing.chars().all(|c| c == fence);
    closes.then_some(inner)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a clear test failure
mod tests {
    use serde_json::json;

    use super::super::testing::tools;
    use super::*;

    #[test]
    fn takes_a_bare_or_fenced_call_object() {
        for text in [
            r#"{"name": "read_file", "arguments": {"path": "a.txt"}}"#,
            "\n  {\"name\": \"read_file\", \"parameters\": {\"path\": \"a.txt\"}}  \n",
            r#"{"type": "function", "name": "read_file", "parameters": {"path": "a.txt"}}"#,
            r#"{"name": "read_file", "arguments": "{\"path\": \"a.txt\"}"}"#,
            "```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.txt\"}}\n```",
            "````JSON\n{\"name\": \"read_file\",\n \"arguments\": {\"path\": \"a.txt\"}}\n````\n",
            "```\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.txt\"}}\n```",
        ] {
            let got = extract(text, &tools()).unwrap_or_else(|| panic!("{text}"));
            assert_eq!(got.text, "");
            assert_eq!(got.calls.len(), 1);
            assert_eq!(got.calls[0].name, "read_file");
            assert_eq!(got.calls[0].arguments, json!({"path": "a.txt"}));
        }
    }

    #[test]
    fn refuses_a_call_that_is_not_the_whole_reply() {
        let call = r#"{"name": "read_file", "arguments": {"path": "a.txt"}}"#;
        for text in [
            format!("Here is how: {call}"),
            format!("{call}\nThat reads the file."),
            format!("Call it like this:\n```json\n{call}\n```"),
            format!("```json\n{call}\n```\nThat is all."),
            format!("```json\n// the call\n{call}\n```"),
            format!("```json\n{call}\n{call}\n```"),
            format!("```python\n{call}\n```"),
            format!("```json\n{call}\n~~~"),
            format!("`{call}`"),
            format!("> {call}"),
            format!("\"{call}\""),
            format!("[{call}]"),
            format!("{call}{call}"),
        ] {
            assert_eq!(extract(&text, &tools()), None, "{text}");
        }
    }

    #[test]
    fn refuses_objects_that_are_not_exactly_a_call() {
        for text in [
            r#"{"name": "read_file"}"#,
            r#"{"name": "read_file", "arguments": {"path": "a"}, "why": "to look"}"#,
            r#"{"type": "person", "name": "read_file", "arguments": {"path": "a"}}"#,
            r#"{"name": "read_file", "arguments": {"path": "a"}, "parameters": {"path": "b"}}"#,
            r#"{"name": "read_file", "arguments": ["a"]}"#,
            r#"{"name": "read_file", "arguments": {"path": 3, "mode": "x"}}"#,
            r#"{"name": "rm", "arguments": {"path": "/"}}"#,
            r#"{"name": ["read_file"], "arguments": {"path": "a"}}"#,
            r#"{'name': 'read_file', 'arguments': {'path': 'a'}}"#,
            r#"{"name": "read_file", "arguments": {"path": "a"},}"#,
        ] {
            assert_eq!(extract(text, &tools()), None, "{text}");
        }
    }
}
