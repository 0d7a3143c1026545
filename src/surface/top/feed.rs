//! What one session did, as lines for the feed and the history overlay. [`feed_lines`] is the
//! one place envelopes become lines, so the conversation model of the full-screen session
//! view can replace it in one step.
//!
//! Every text here came from a session (model output, tool output, titles, errors) and goes
//! through [`safe`] before it becomes a span: ratatui writes a cell's symbol to the terminal
//! as it is, so a raw ESC would reach the terminal and act.

use std::collections::HashSet;

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use serde_json::Value;

use crate::event::{ContentBlock, Envelope, OutputStream, Payload, PermissionData};
use crate::surface::safe_text;

/// Lines of a tool's output or result shown under its call; the history has the rest.
const OUTPUT_LINES: usize = 8;

/// Characters of a call's input shown on its line.
const INPUT_CHARS: usize = 300;

/// One line of untrusted text, safe for a cell: tabs as spaces, every other control and
/// invisible character shown as an escape.
pub(super) fn safe(text: &str) -> String {
    safe_text::escape_line(&text.replace('\t', "    "))
}

fn dim() -> Style {
    Style::new().add_modifier(Modifier::DIM)
}

fn block_text(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text { text } => text.clone(),
        ContentBlock::Image { mime_type, .. } => format!("[image {mime_type}]"),
    }
}

/// At most `n` characters of `text`, marked when cut.
fn excerpt(text: &str, n: usize) -> String {
    match text.char_indices().nth(n) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

/// Lines of one session's envelopes (oldest first), wrapped to `width` columns. Streamed
/// chunks show until their whole block arrives, which replaces them.
pub(super) fn feed_lines(events: &[Envelope], width: u16) -> Vec<Line<'static>> {
    let mut out = Lines::new(width);
    // A call's announce is shown only if its authoritative copy (with the input) never came.
    let complete: HashSet<&str> = events
        .iter()
        .filter_map(|e| match &e.payload {
            Payload::ToolUse(u) if u.call.raw_input.is_some() => Some(&*u.call.tool_call_id),
            _ => None,
        })
        .collect();
    let mut text = String::new();
    let mut thought = String::new();
    for envelope in events {
        match &envelope.payload {
            Payload::AssistantText(t) if t.delta => text.push_str(&block_text(&t.content)),
            Payload::AssistantText(t) => {
                text.clear();
                out.text("", &block_text(&t.content), Style::new());
            }
            Payload::Thought(t) if t.delta => thought.push_str(&block_text(&t.content)),
            Payload::Thought(t) => {
                thought.clear();
                out.text(
                    "✻ ",
                    &block_text(&t.content),
                    dim().add_modifier(Modifier::ITALIC),
                );
            }
            Payload::UserText(u) => {
                out.text(
                    "› ",
                    &block_text(&u.content),
                    Style::new().add_modifier(Modifier::BOLD),
                );
            }
            Payload::TurnStarted(_) => {
                out.own(format!("── turn {} ──", envelope.turn), dim());
            }
            Payload::ToolUse(u) => {
                let call = &u.call;
                if call.raw_input.is_none() && complete.contains(&*call.tool_call_id) {
                    continue;
                }
                let input = call
                    .raw_input
                    .as_ref()
                    .map(|v| excerpt(&v.to_string(), INPUT_CHARS))
                    .unwrap_or_default();
                out.pair(("⚙ ", Style::new().fg(Color::Cyan)), &call.title, &input);
            }
            Payload::ToolOutput(o) => {
                let style = match o.stream {
                    OutputStream::Stdout => dim(),
                    OutputStream::Stderr => dim().fg(Color::Red),
                };
                out.text("  │ ", o.text.trim_end_matches('\n'), style);
            }
            Payload::ToolResult(r) => {
                let r = &r.result;
                let (mark, style, body) = if r.success {
                    ("  ✓ ", Style::new().fg(Color::Green), r.output.as_deref())
                } else {
                    ("  ✗ ", Style::new().fg(Color::Red), r.error.as_deref())
                };
                out.pair((mark, style), &r.tool, &format!("{} ms", r.duration_ms));
                out.excerpt(body.unwrap_or_default());
            }
            Payload::Permission(PermissionData::Request(request)) => {
                let what = format!("{} ({}): {}", request.tool, request.danger, request.reason);
                let style = Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD);
                out.text("⚠ approval asked: ", &what, style);
            }
            Payload::Permission(PermissionData::Resolution(resolution)) => {
                let note = resolution.note.as_deref().unwrap_or_default();
                out.pair(
                    ("  → ", Style::new().fg(Color::Yellow)),
                    &resolution.decision,
                    note,
                );
            }
            Payload::Plan(plan) => {
                for item in plan.checklist() {
                    out.text("  ", &item, dim());
                }
            }
            Payload::Error(e) => out.text("error: ", &e.message, Style::new().fg(Color::Red)),
            Payload::Result(result) => {
                flush(&mut out, &mut thought, &mut text);
                let usage = &result.usage;
                out.own(
                    format!(
                        "■ {} · {} in / {} out tokens",
                        result.stop_reason.as_str(),
                        usage.input_tokens,
                        usage.output_tokens
                    ),
                    dim(),
                );
                if let Some(error) = &result.error {
                    out.text("  ", error, Style::new().fg(Color::Red));
                }
            }
            Payload::Compaction(c) => out.own(
                format!(
                    "… {} messages compacted ({} → {} tokens)",
                    c.messages_compacted, c.tokens_before, c.tokens_after
                ),
                dim(),
            ),
            Payload::Status(_)
            | Payload::Usage(_)
            | Payload::Instructions(_)
            | Payload::ToolInputDelta(_) => {}
        }
    }
    // A block still streaming.
    flush(&mut out, &mut thought, &mut text);
    out.lines
}

/// Shows chunks whose whole block never came (a turn cut short) or has not come yet.
fn flush(out: &mut Lines, thought: &mut String, text: &mut String) {
    if !thought.is_empty() {
        out.text("✻ ", thought, dim().add_modifier(Modifier::ITALIC));
        thought.clear();
    }
    if !text.is_empty() {
        out.text("", text, Style::new());
        text.clear();
    }
}

/// Lines of a conversation as `GET …/messages` gives it (the server's history).
pub(super) fn message_lines(messages: &[Value], width: u16) -> Vec<Line<'static>> {
    let mut out = Lines::new(width);
    let text = |m: &Value| m["text"].as_str().unwrap_or_default().to_string();
    for message in messages {
        match message["role"].as_str() {
            Some("user") => {
                out.text(
                    "› ",
                    &text(message),
                    Style::new().add_modifier(Modifier::BOLD),
                );
            }
            Some("tool") => {
                let tool = &message["tool"];
                let title = tool["title"].as_str().or(tool["name"].as_str());
                let input = excerpt(&tool["input"].to_string(), INPUT_CHARS);
                let cyan = Style::new().fg(Color::Cyan);
                out.pair(("⚙ ", cyan), title.unwrap_or("tool"), &input);
                match tool["success"].as_bool() {
                    Some(true) => out.own("  ✓".into(), Style::new().fg(Color::Green)),
                    Some(false) => out.own("  ✗".into(), Style::new().fg(Color::Red)),
                    None => {}
                }
                out.excerpt(&text(message));
            }
            _ => out.text("", &text(message), Style::new()),
        }
    }
    out.lines
}

/// Lines being built, each wrapped to the width as it is added.
struct Lines {
    width: usize,
    lines: Vec<Line<'static>>,
}

impl Lines {
    fn new(width: u16) -> Self {
        Lines {
            width: usize::from(width.max(8)),
            lines: Vec::new(),
        }
    }

    /// Untrusted `text`, each of its lines behind `lead` (the first) or as much blank.
    fn text(&mut self, lead: &'static str, text: &str, style: Style) {
        let indent = " ".repeat(Span::raw(lead).width());
        for (i, line) in text.split('\n').enumerate() {
            let lead = if i == 0 {
                lead.to_string()
            } else {
                indent.clone()
            };
            let spans = vec![Span::styled(lead, style), Span::styled(safe(line), style)];
            self.lines.extend(wrap(spans, self.width));
        }
    }

    /// A line of corral's own words and numbers (no session text in it).
    fn own(&mut self, text: String, style: Style) {
        self.lines
            .extend(wrap(vec![Span::styled(text, style)], self.width));
    }

    /// `lead` `name` and, dimmed, `detail`: one line, both untrusted.
    fn pair(&mut self, lead: (&'static str, Style), name: &str, detail: &str) {
        let spans = vec![
            Span::styled(lead.0, lead.1),
            Span::styled(safe(name), lead.1.add_modifier(Modifier::BOLD)),
            Span::raw(" "),
            Span::styled(safe(detail), dim()),
        ];
        self.lines.extend(wrap(spans, self.width));
    }

    /// The first lines of a tool's output, framed.
    fn excerpt(&mut self, body: &str) {
        let body = body.trim_end_matches('\n');
        if body.is_empty() {
            return;
        }
        let all: Vec<&str> = body.split('\n').collect();
        for line in all.iter().take(OUTPUT_LINES) {
            self.text("    │ ", line, dim());
        }
        if all.len() > OUTPUT_LINES {
            let more = all.len() - OUTPUT_LINES;
            self.own(format!("    │ … {more} more lines (h: history)"), dim());
        }
    }
}

/// Columns a character takes (0 for none that [`safe`] lets through but combining marks).
fn char_width(c: char) -> usize {
    let mut buf = [0u8; 4];
    Span::raw(&*c.encode_utf8(&mut buf)).width()
}

/// Spans of one line (no `\n` in them) broken into lines of at most `width` columns, at a
/// space where one is near, else anywhere.
pub(super) fn wrap(spans: Vec<Span<'static>>, width: usize) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    let mut current: Vec<Span<'static>> = Vec::new();
    let mut used = 0;
    for span in spans {
        let style = span.style;
        let mut piece = String::new();
        for word in span.content.split_inclusive(' ') {
            let word_width: usize = word.chars().map(char_width).sum();
            // A word that fits on a fresh line moves there whole.
            if used + word_width > width && used > 0 && word_width <= width {
                current.push(Span::styled(std::mem::take(&mut piece), style));
                lines.push(Line::from(std::mem::take(&mut current)));
                used = 0;
            }
            for c in word.chars() {
                let w = char_width(c);
                if used + w > width && used > 0 {
                    current.push(Span::styled(std::mem::take(&mut piece), style));
                    lines.push(Line::from(std::mem::take(&mut current)));
                    used = 0;
                }
                piece.push(c);
                used += w;
            }
        }
        if !piece.is_empty() {
            current.push(Span::styled(piece, style));
        }
    }
    lines.push(Line::from(current));
    lines
}

#[cfg(test)]
#[path = "feed_tests.rs"]
mod tests;
