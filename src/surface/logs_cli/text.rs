//! An envelope as text for a person: `12:00:01  t1    kind           summary`, a block when the
//! summary has more lines (an answer, a plan), its lines under the summary's first. A line
//! with the date (UTC, as the log's times are) goes before the first envelope of each day.
//! Answers, thoughts, prompts, tool output and errors are shown whole; tool arguments and
//! results by their head. Every piece of them is escaped.

use std::fmt::Write as _;

use crate::event::{
    ContentBlock, Envelope, OutputStream, Payload, PermissionData, PermissionRequest,
    ToolCallStatus, ToolUseData,
};
use crate::surface::safe_text::{escape, escape_head, escape_line};

/// How much of a tool call's arguments, a tool result and a permission preview is shown.
const HEAD_CHARS: usize = 200;

/// The kind column is as wide as the longest kind (`assistant_text`).
const KIND_WIDTH: usize = 14;

#[derive(Default)]
pub struct View {
    day: Option<time::Date>,
}

impl View {
    /// Appends the envelope's text to `out`; nothing for what only streams (chunks, a tool
    /// call's announce before its arguments).
    pub fn render(&mut self, envelope: &Envelope, out: &mut Vec<u8>) {
        let Some(summary) = summary(&envelope.payload) else {
            return;
        };
        let at = envelope.ts.0.to_offset(time::UtcOffset::UTC);
        let mut text = String::new();
        if self.day != Some(at.date()) {
            self.day = Some(at.date());
            let _ = writeln!(text, "── {} (UTC) ──", at.date());
        }
        let head = format!(
            "{:02}:{:02}:{:02}  t{:<4} {:<KIND_WIDTH$} ",
            at.hour(),
            at.minute(),
            at.second(),
            envelope.turn,
            envelope.payload.kind_name(),
        );
        let indent = " ".repeat(head.chars().count());
        let mut lines = summary.split('\n');
        let first = lines.next().unwrap_or_default();
        let _ = writeln!(text, "{}", format!("{head}{first}").trim_end());
        for line in lines {
            let _ = writeln!(text, "{}", format!("{indent}{line}").trim_end());
        }
        out.extend_from_slice(text.as_bytes());
    }
}

/// The envelope's summary, escaped; `None` for what is not shown.
fn summary(payload: &Payload) -> Option<String> {
    let text = match payload {
        Payload::AssistantText(data) | Payload::Thought(data) if data.delta => return None,
        Payload::AssistantText(data) | Payload::Thought(data) => content(&data.content),
        Payload::UserText(data) => content(&data.content),
        Payload::ToolUse(data) => tool_use(data)?,
        Payload::ToolInputDelta(_) => return None,
        Payload::ToolOutput(data) => {
            let stream = match data.stream {
                OutputStream::Stdout => "stdout",
                OutputStream::Stderr => "stderr",
            };
            format!("[{stream}] {}", escape(data.text.trim_end_matches('\n')))
        }
        Payload::ToolResult(data) => {
            let record = &data.result;
            let (word, said) = match record.success {
                true => ("ok", record.output.as_deref()),
                false => ("failed", record.error.as_deref()),
            };
            let mut text = format!(
                "{word} · {} · {} ms",
                escape_line(&record.tool),
                record.duration_ms
            );
            if let Some(said) = said.filter(|s| !s.trim().is_empty()) {
                let _ = write!(text, " · {}", head_of(said));
            }
            text
        }
        Payload::Permission(PermissionData::Request(request)) => asked(request),
        Payload::Permission(PermissionData::Resolution(resolution)) => {
            let mut text = format!("resolved: {}", escape_line(&resolution.decision));
            if let Some(note) = &resolution.note {
                let _ = write!(text, " ({})", escape_line(note));
            }
            text
        }
        Payload::Plan(plan) => {
            let mut lines: Vec<String> = plan.explanation.iter().map(|e| escape_line(e)).collect();
            lines.extend(plan.checklist().map(|line| escape_line(&line)));
            lines.join("\n")
        }
        Payload::Instructions(data) => escape_line(&data.listing()),
        Payload::Usage(data) => {
            let mut text = format!(
                "{} in · {} out tokens",
                data.usage.input_tokens, data.usage.output_tokens
            );
            if let (Some(used), Some(window)) = (data.context_tokens, data.context_window) {
                let _ = write!(text, " · context {used} of {window}");
            }
            text
        }
        Payload::TurnStarted(_) => String::new(),
        Payload::Result(data) => {
            let usage = &data.usage;
            let mut text = format!(
                "{} · {} in · {} out tokens",
                data.stop_reason.as_str(),
                usage.input_tokens,
                usage.output_tokens
            );
            if usage.cost_usd > 0.0 {
                let _ = write!(text, " · ${:.4}", usage.cost_usd);
            }
            if let Some(error) = &data.error {
                let _ = write!(text, " · {}", escape_line(error));
            }
            text
        }
        Payload::Status(data) => data.status.as_str().to_string(),
        Payload::Error(data) => escape(&data.message).into_owned(),
        Payload::Compaction(data) => format!(
            "{} older messages summarized · {} → {} tokens",
            data.messages_compacted, data.tokens_before, data.tokens_after
        ),
    };
    Some(text)
}

fn content(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text { text } => escape(text.trim_end_matches('\n')).into_owned(),
        ContentBlock::Image { mime_type, .. } => format!("[image {}]", escape_line(mime_type)),
    }
}

/// The start of `text` on one line, its line breaks and escapes shown as `\n`, `\x1b`.
fn head_of(text: &str) -> String {
    escape_head(text.trim(), HEAD_CHARS)
}

/// A call with its arguments (compact JSON); an announce that has none yet is left out,
/// its authoritative copy follows.
fn tool_use(data: &ToolUseData) -> Option<String> {
    let call = &data.call;
    if call.raw_input.is_none() && call.status == ToolCallStatus::Pending {
        return None;
    }
    let mut text = escape_line(&call.title);
    if !data.tool.is_empty() && data.tool != call.title {
        let _ = write!(text, " [{}]", escape_line(&data.tool));
    }
    if let Some(input) = &call.raw_input {
        let _ = write!(text, " {}", head_of(&input.to_string()));
    }
    Some(text)
}

fn asked(request: &PermissionRequest) -> String {
    let mut text = format!(
        "asked: {} ({})",
        escape_line(&request.tool),
        escape_line(&request.danger)
    );
    if !request.reason.is_empty() {
        let _ = write!(text, ": {}", escape_line(&request.reason));
    }
    let preview = &request.preview;
    let shown = [
        preview.command.as_deref(),
        preview.code.as_deref(),
        preview.url.as_deref(),
        preview.path.as_deref(),
        preview.desktop.as_ref().map(|d| d.description.as_str()),
    ];
    if let Some(what) = shown.into_iter().flatten().next() {
        let _ = write!(text, " · {}", head_of(what));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(lines: &[&str]) -> String {
        let mut view = View::default();
        let mut out = Vec::new();
        for line in lines {
            let envelope: Envelope = serde_json::from_str(line).unwrap();
            view.render(&envelope, &mut out);
        }
        String::from_utf8(out).unwrap()
    }

    fn env(seq: u64, kind: &str, data: &str) -> String {
        format!(
            r#"{{"seq":{seq},"ts":"2026-12-01T12:00:0{seq}.000Z","agent":"a","turn":1,"kind":"{kind}","data":{data}}}"#
        )
    }

    #[test]
    fn a_turn_reads_as_lines_with_answers_whole() {
        let lines = [
            env(
                1,
                "user_text",
                r#"{"content":{"type":"text","text":"read a.txt"}}"#,
            ),
            env(
                2,
                "tool_use",
                r#"{"call":{"toolCallId":"c","title":"Read a.txt","kind":"read","status":"pending"},"tool":"read_file"}"#,
            ),
            env(
                3,
                "tool_use",
                r#"{"call":{"toolCallId":"c","title":"Read a.txt","kind":"read","status":"in_progress","rawInput":{"path":"a.txt"}},"tool":"read_file"}"#,
            ),
            env(
                4,
                "tool_result",
                r#"{"update":{"toolCallId":"c","status":"completed","content":[]},"result":{"toolCallId":"c","tool":"read_file","success":true,"output":"apple\npie","error":null,"durationMs":3}}"#,
            ),
            env(
                5,
                "assistant_text",
                r#"{"delta":false,"content":{"type":"text","text":"It says\napple."}}"#,
            ),
            env(
                6,
                "result",
                r#"{"stopReason":"end_turn","usage":{"inputTokens":10,"outputTokens":2,"cacheReadTokens":0,"cacheCreationTokens":0,"costUsd":0.0}}"#,
            ),
            env(7, "status", r#"{"status":"dead"}"#),
        ];
        let text = rendered(&lines.iter().map(String::as_str).collect::<Vec<_>>());
        let expected = "\
── 2026-12-01 (UTC) ──
12:00:01  t1    user_text      read a.txt
12:00:03  t1    tool_use       Read a.txt [read_file] {\"path\":\"a.txt\"}
12:00:04  t1    tool_result    ok · read_file · 3 ms · apple\\npie
12:00:05  t1    assistant_text It says
                               apple.
12:00:06  t1    result         end_turn · 10 in · 2 out tokens
12:00:07  t1    status         dead
";
        assert_eq!(text, expected);
    }

    #[test]
    fn escape_sequences_in_any_field_are_shown_not_obeyed() {
        let lines = [
            env(
                1,
                "assistant_text",
                r#"{"delta":false,"content":{"type":"text","text":"hi \u001b]52;c;aGk=\u0007\u001b[2J\u009b2J\u202e"}}"#,
            ),
            env(
                2,
                "tool_output",
                r#"{"toolCallId":"c","stream":"stderr","text":"\u001b[1A\r over"}"#,
            ),
            env(3, "error", r#"{"message":"bad \u001b[31m","data":null}"#),
            env(
                4,
                "permission",
                r#"{"toolCall":{"toolCallId":"d","title":"computer","kind":"other","status":"pending","rawInput":{}},"tool":"computer","danger":"dangerous","reason":"r","options":[],"desktop":{"action":"left_click","description":"left click in \u001b]0;Calc\u0007","point":[1,2]},"requestId":"q"}"#,
            ),
            env(
                5,
                "permission",
                r#"{"toolCall":{"toolCallId":"c","title":"t\u001b[2J","kind":"execute","status":"pending","rawInput":{}},"tool":"shell","danger":"dangerous","reason":"r\u001b[0m","options":[],"command":"rm \u001b[8m-rf","requestId":"p"}"#,
            ),
        ];
        let text = rendered(&lines.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(
            !text.chars().any(crate::surface::safe_text::is_unsafe),
            "{text:?}"
        );
        assert!(
            text.contains(r"hi \x1b]52;c;aGk=\x07\x1b[2J\u{9b}2J\u{202e}"),
            "{text}"
        );
        assert!(text.contains(r"[stderr] \x1b[1A\r over"), "{text}");
        assert!(text.contains(r"bad \x1b[31m"), "{text}");
        assert!(
            text.contains(r"asked: shell (dangerous): r\x1b[0m · rm \x1b[8m-rf"),
            "{text}"
        );
        assert!(
            text.contains(r"asked: computer (dangerous): r · left click in \x1b]0;Calc\x07"),
            "{text}"
        );
    }
}
