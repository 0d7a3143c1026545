//! Hermes blocks, the shape Hermes, Qwen 2.5 and many fine-tunes write:
//! `<tool_call>{"name": …, "arguments": {…}}</tool_call>`, one strict-JSON call per block,
//! several blocks in a reply. A block that cannot be taken stays text and the others are
//! still taken, each on its own.

use super::lines::{self, Verdict};
use super::{Catalog, Extracted, Shape, call_object};

const OPEN: &str = "<tool_call>";
const CLOSE: &str = "</tool_call>";

pub(super) fn extract(text: &str, catalog: &dyn Catalog) -> Option<Extracted> {
    if !text.contains(OPEN) {
        return None;
    }
    lines::take_blocks(text, &|at| block_at(text, at, catalog))
}

fn block_at(text: &str, at: usize, catalog: &dyn Catalog) -> Verdict {
    if !text[at..].starts_with(OPEN) {
        return Verdict::NotHere;
    }
    let taken = block_end(text, at).and_then(|(content, end)| {
        // Small models write the JSON inside the tags loosely (single quotes, trailing
        // commas, Python literals): repaired as tool arguments are. The tags, the lines they
        // stand on and the schema check still decide whether it is a call.
        let value = crate::llm_loop::repair::parse_arguments(content.trim()).ok()?;
        Some((call_object(value, Shape::Marked, catalog)?, end))
    });
    match taken {
        Some((call, end)) => Verdict::Take {
            calls: vec![call],
            end,
        },
        None => Verdict::NotHere,
    }
}

/// For a block opening at `open_at`, the content between the tags and the end of the closing
/// line (past its newline), provided the closing tag ends its line.
fn block_end(text: &str, open_at: usize) -> Option<(&str, usize)> {
    let content_start = open_at + OPEN.len();
    let close_at = content_start + text[content_start..].find(CLOSE)?;
    let end = lines::rest_of_line_blank(text, close_at + CLOSE.len())?;
    Some((&text[content_start..close_at], end))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a clear test failure
mod tests {
    use super::super::TextToolCall;
    use super::*;
    use serde_json::{Value, json};

    /// Knows `read_file` (needs a string `path`) and `list` (any arguments).
    struct Tools;

    impl Catalog for Tools {
        fn parameters(&self, _: &str) -> Option<&Value> {
            None
        }

        fn accept(&self, name: &str, args: Value) -> Option<Value> {
            match name {
                "read_file" => args
                    .get("path")
                    .filter(|p| p.is_string())
                    .map(|_| args.clone()),
                "list" => Some(args),
                _ => None,
            }
        }
    }

    fn extract(text: &str) -> Option<Extracted> {
        super::extract(text, &Tools)
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
        let invalid = "<tool_call>\n{name list\n</tool_call>";
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
    fn repairs_loose_json_inside_a_block() {
        let text =
            "<tool_call>\n{'name': 'read_file', 'arguments': {'path': 'a.txt',},}\n</tool_call>";
        assert_eq!(
            extract(text).unwrap().calls,
            vec![call("read_file", json!({"path": "a.txt"}))]
        );
        // Repaired or not, a call the schema refuses stays text.
        let refused = "<tool_call>\n{'name': 'read_file', 'arguments': {'path': 3,}}\n</tool_call>";
        assert_eq!(extract(refused), None);
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
