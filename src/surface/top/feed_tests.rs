use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::event::*;

fn env(seq: u64, payload: Payload) -> Envelope {
    Envelope {
        seq,
        ts: Timestamp::now(),
        session: Arc::from("s"),
        turn: 1,
        payload,
    }
}

fn text(delta: bool, t: &str) -> Payload {
    Payload::AssistantText(TextData {
        delta,
        content: ContentBlock::text(t),
    })
}

fn plain(lines: &[Line<'static>]) -> Vec<String> {
    lines.iter().map(|l| l.to_string()).collect()
}

fn call(input: Option<Value>) -> Payload {
    Payload::ToolUse(ToolUseData::new(
        "shell",
        ToolCallInfo {
            tool_call_id: "c1".into(),
            title: "run ls".into(),
            kind: "execute".into(),
            status: ToolCallStatus::Pending,
            content: vec![],
            locations: vec![],
            raw_input: input,
        },
    ))
}

#[test]
fn streamed_chunks_show_until_their_block_replaces_them() {
    let streaming = [env(1, text(true, "Hel")), env(2, text(true, "lo"))];
    assert_eq!(plain(&feed_lines(&streaming, 80)), ["Hello"]);
    let done = [
        env(1, text(true, "Hel")),
        env(2, text(true, "lo")),
        env(3, text(false, "Hello.")),
    ];
    assert_eq!(plain(&feed_lines(&done, 80)), ["Hello."]);
}

#[test]
fn a_tool_call_shows_once_with_its_input_and_result() {
    let events = [
        env(1, call(None)),
        env(2, call(Some(json!({"command": "ls"})))),
        env(
            3,
            Payload::ToolResult(ToolResultData::sample("c1", "shell", "a.txt\nb.txt\n")),
        ),
    ];
    assert_eq!(
        plain(&feed_lines(&events, 80)),
        [
            r#"⚙ run ls {"command":"ls"}"#,
            "  ✓ shell 3 ms",
            "    │ a.txt",
            "    │ b.txt"
        ]
    );
    // Only the announce arrived so far: it shows.
    assert_eq!(plain(&feed_lines(&events[..1], 80)), ["⚙ run ls "]);
}

#[test]
fn session_text_reaches_no_cell_raw() {
    let hostile = "x\u{1b}]52;c;aGk=\u{7}\u{1b}[2J\r\u{202e}\u{9b}1A\ty";
    let events = [
        env(1, text(false, hostile)),
        env(
            2,
            Payload::Thought(TextData {
                delta: false,
                content: ContentBlock::text(hostile),
            }),
        ),
        env(
            3,
            Payload::Error(ErrorData {
                message: hostile.into(),
                data: Value::Null,
            }),
        ),
        env(
            4,
            Payload::Permission(PermissionData::Request(Box::new(PermissionRequest {
                reason: hostile.into(),
                ..PermissionRequest::sample(hostile, json!({"command": hostile}))
            }))),
        ),
    ];
    let messages = [json!({"role": "tool", "text": hostile, "tool": {"title": hostile}})];
    for lines in [feed_lines(&events, 30), message_lines(&messages, 30)] {
        for line in &lines {
            for span in &line.spans {
                assert!(
                    !span
                        .content
                        .chars()
                        .any(|c| safe_text::is_unsafe(c) || c == '\t'),
                    "{:?}",
                    span.content
                );
            }
        }
    }
    let shown = plain(&feed_lines(&events[..1], 200)).join("");
    assert_eq!(shown, r"x\x1b]52;c;aGk=\x07\x1b[2J\r\u{202e}\u{9b}1A    y");
}

#[test]
fn lines_wrap_at_spaces_within_the_width() {
    let lines = wrap(vec![Span::raw("alpha beta gamma deltaepsilon")], 11);
    assert_eq!(plain(&lines), ["alpha beta ", "gamma delta", "epsilon"]);
    let wide = wrap(vec![Span::raw("日本語テキスト")], 6);
    assert_eq!(plain(&wide), ["日本語", "テキス", "ト"]);
    assert!(wide.iter().all(|l| l.width() <= 6));
}
