//! Tool calls written into the reply text (Hermes / Qwen style) by models whose server returned
//! no native tool calls. Taking a quoted example from prose as a real call would run a tool the
//! model never asked for, so a block counts only when it stands on its own lines, outside code
//! and quotes, holds exactly one strict-JSON call, and names a tool that accepts the arguments.

use serde_json::{Map, Value};

const OPEN: &str = "<tool_call>";
const CLOSE: &str = "</tool_call>";

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TextToolCall {
    pub(crate) name: String,
    pub(crate) arguments: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Extracted {
    /// The reply text with the accepted blocks removed, trimmed.
    pub(crate) text: String,
    pub(crate) calls: Vec<TextToolCall>,
}

/// Find `<tool_call>` blocks in `text`. `accept(name, arguments)` returns the coerced arguments
/// when `name` is a known tool and the arguments are valid for it. `None` when nothing is taken.
pub(crate) fn extract_tool_calls(
    text: &str,
    accept: &dyn Fn(&str, Value) -> Option<Value>,
) -> Option<Extracted> {
    let lines = line_starts(text);
    let mut calls = Vec::new();
    let mut kept = String::with_capacity(text.len());
    let mut copied_to = 0;
    let mut fence: Option<(char, usize)> = None;
    // Odd means an inline code span opened earlier in this paragraph is still open.
    let mut backticks = 0usize;
    let mut i = 0;
    while i < lines.len() {
        let start = lines[i];
        let line = &text[start..lines.get(i + 1).copied().unwrap_or(text.len())];
        let body = line.trim_start();
        i += 1;
        if let Some(marker) = fence_marker(body) {
            fence = match fence {
                None => Some(marker),
                Some(open) if closes(open, marker, body) => None,
                still_open => still_open,
            };
            backticks = 0;
            continue;
        }
        if fence.is_some() {
            continue;
        }
        if body.trim().is_empty() {
            backticks = 0;
            continue;
        }
        let block = (body.starts_with(OPEN) && backticks.is_multiple_of(2))
            .then(|| block_end(text, start + (line.len() - body.len())))
            .flatten()
            .and_then(|(content, end)| Some((parse_call(content, accept)?, end)));
        match block {
            Some((call, end)) => {
                calls.push(call);
                kept.push_str(&text[copied_to..start]);
                copied_to = end;
                while lines.get(i).is_some_and(|&next| next < end) {
                    i += 1;
                }
            }
            None => backticks += line.matches('`').count(),
        }
    }
    if calls.is_empty() {
        return None;
    }
    kept.push_str(&text[copied_to..]);
    Some(Extracted {
        text: kept.trim().to_owned(),
        calls,
    })
}

fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(text.match_indices('\n').map(|(at, _)| at + 1))
        .filter(|&at| at < text.len())
        .collect()
}

/// The fence character and its run length when `body` opens or closes a fenced code block.
fn fence_marker(body: &str) -> Option<(char, usize)> {
    let c = body.chars().next().filter(|c| matches!(c, '`' | '~'))?;
    let run = body.chars().take_while(|&x| x == c).count();
    (run >= 3).then_some((c, run))
}

fn closes(open: (char, usize), marker: (char, usize), body: &str) -> bool {
    marker.0 == open.0 && marker.1 >= open.1 && body[marker.1..].trim().is_empty()
}

/// For a block opening at `open_at`, the content between the tags and the end of the closing
/// line (past its newline), provided the closing tag ends its line.
fn block_end(text: &str, open_at: usize) -> Option<(&str, usize)> {
    let content_start = open_at + OPEN.len();
    let close_at = content_start + text[content_start..].find(CLOSE)?;
    let after = close_at + CLOSE.len();
    let line_end = text[after..]
        .find('\n')
        .map_or(text.len(), |at| after + at + 1);
    text[after..line_end]
        .trim()
        .is_empty()
        .then_some((&text[content_start..close_at], line_end))
}

fn parse_call(
    content: &str,
    accept: &dyn Fn(&str, Value) -> Option<Value>,
) -> Option<TextToolCall> {
    let Value::Object(mut call) = serde_json::from_str(content.trim()).ok()? else {
        return None;
    };
    let Some(Value::String(name)) = call.remove("name") else {
        return None;
    };
    let arguments = match call
        .remove("arguments")
        .or_else(|| call.remove("parameters"))
    {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(Value::Object(args)) => Value::Object(args),
        // Some models JSON-encode the arguments, as the OpenAI wire format does.
        Some(Value::String(encoded)) => match serde_json::from_str(&encoded).ok()? {
            Value::Object(args) => Value::Object(args),
            _ => return None,
        },
        Some(_) => return None,
    };
    let arguments = accept(&name, arguments)?;
    Some(TextToolCall { name, arguments })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a clear test failure
mod tests {
    use super::*;
    use serde_json::json;

    /// Knows `read_file` (needs a string `path`) and `list` (any arguments).
    fn accept(name: &str, args: Value) -> Option<Value> {
        match name {
            "read_file" => args
                .get("path")
                .filter(|p| p.is_string())
                .map(|_| args.clone()),
            "list" => Some(args),
            _ => None,
        }
    }

    fn extract(text: &str) -> Option<Extracted> {
        extract_tool_calls(text, &accept)
    }

    fn call(name: &str, arguments: Value) -> TextToolCall {
        TextToolCall {
            name: name.to_owned(),
            arguments,
        }
    }

    const READ: &str = r#"{"name": "read_file", "arguments": {"path": "a.txt"}}"#;

    #[test]
    fn takes_a_block_and_keeps_the_surrounding_text() {
        let text = format!("  Let me look.\n<tool_call>\n{READ}\n</tool_call>\nThen decide.\n\n");
        assert_eq!(
            extract(&text),
            Some(Extracted {
                text: "Let me look.\nThen decide.".to_owned(),
                calls: vec![call("read_file", json!({"path": "a.txt"}))],
            })
        );
    }

    #[test]
    fn takes_several_blocks_in_order() {
        let text = format!(
            "<tool_call>{READ}</tool_call>\n  <tool_call>\n{{\"name\": \"list\"}}\n</tool_call>  \r\n\
             <tool_call>{{\"name\": \"list\", \"parameters\": {{\"d\": 1}}}}</tool_call>"
        );
        let got = extract(&text).unwrap();
        assert_eq!(got.text, "");
        assert_eq!(
            got.calls,
            vec![
                call("read_file", json!({"path": "a.txt"})),
                call("list", json!({})),
                call("list", json!({"d": 1})),
            ]
        );
    }

    #[test]
    fn accepts_arguments_encoded_as_a_string() {
        let text = r#"<tool_call>{"name": "list", "arguments": "{\"d\": 2}"}</tool_call>"#;
        assert_eq!(
            extract(text).unwrap().calls,
            vec![call("list", json!({"d": 2}))]
        );
    }

    #[test]
    fn ignores_blocks_in_code_fences() {
        for fence in ["```", "~~~", "````"] {
            let text =
                format!("Example:\n{fence}xml\n<tool_call>\n{READ}\n</tool_call>\n{fence}\n");
            assert_eq!(extract(&text), None, "{fence}");
        }
        // A shorter or different fence does not close the block, so the call stays quoted.
        let text = format!("````\n```\n<tool_call>{READ}</tool_call>\n~~~~\n````\n");
        assert_eq!(extract(&text), None);
        let after = format!("```\nx\n```\n<tool_call>{READ}</tool_call>\n");
        assert_eq!(extract(&after).unwrap().text, "```\nx\n```");
    }

    #[test]
    fn ignores_inline_quoted_and_code_span_blocks() {
        let inline = format!("Use <tool_call>{READ}</tool_call> like this.");
        let trailing = format!("<tool_call>{READ}</tool_call> like this.");
        let quoted = format!("> <tool_call>\n> {READ}\n> </tool_call>\n");
        let span = format!("Write `\n<tool_call>{READ}</tool_call>\n` to call.");
        for text in [inline, trailing, quoted, span] {
            assert_eq!(extract(&text), None, "{text}");
        }
    }

    #[test]
    fn ignores_unknown_tools_and_bad_json_but_takes_the_rest() {
        let unknown = r#"<tool_call>{"name": "rm", "arguments": {}}</tool_call>"#;
        let invalid = "<tool_call>\n{'name': 'list',}\n</tool_call>";
        let bad_args = r#"<tool_call>{"name": "read_file", "arguments": {"path": 3}}</tool_call>"#;
        let shapes = [
            r#"<tool_call>{"name": "list"} extra</tool_call>"#,
            r#"<tool_call>{"name": 7}</tool_call>"#,
            r#"<tool_call>{"name": "list", "arguments": [1]}</tool_call>"#,
            r#"<tool_call>["list"]</tool_call>"#,
        ];
        for text in [unknown, invalid, bad_args].into_iter().chain(shapes) {
            assert_eq!(extract(text), None, "{text}");
        }
        let text = format!("A\n{unknown}\n{invalid}\n<tool_call>{READ}</tool_call>\nB");
        let got = extract(&text).unwrap();
        assert_eq!(got.text, format!("A\n{unknown}\n{invalid}\nB"));
        assert_eq!(got.calls.len(), 1);
    }

    #[test]
    fn ignores_an_unterminated_block() {
        assert_eq!(extract(&format!("Calling:\n<tool_call>\n{READ}\n")), None);
        let text = format!("<tool_call>\nhmm\n<tool_call>{READ}</tool_call>\n");
        let got = extract(&text).unwrap();
        assert_eq!(
            (got.text.as_str(), got.calls.len()),
            ("<tool_call>\nhmm", 1)
        );
    }

    #[test]
    fn plain_text_yields_nothing() {
        assert_eq!(extract("Just an answer."), None);
        assert_eq!(extract(""), None);
    }
}
