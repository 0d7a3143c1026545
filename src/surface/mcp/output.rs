//! `agent_output`: an agent's text, rendered from the envelopes it has emitted so far, so a
//! client can dispatch a turn and poll instead of blocking on `agent_run`.

use std::sync::Mutex;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::event::{ContentBlock, Envelope, Payload, Status, Usage};

/// Unless the caller says otherwise, at most this much text comes back: a poll must not
/// flood the caller's context.
const DEFAULT_MAX_CHARS: usize = 20_000;

/// A tool result's output is cut to this much in `include_tools` renderings.
const TOOL_OUTPUT_CHARS: usize = 2_000;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct OutputRequest {
    pub agent_id: String,
    /// Which turn (default: the latest).
    pub turn: Option<u32>,
    /// last_message (default), full_turn or all.
    pub which: Option<String>,
    /// Include tool calls and their results in the text.
    pub include_tools: Option<bool>,
    /// Keep at most this many characters (the end); default 20000.
    pub max_chars: Option<usize>,
}

/// How long a read waits for the buffer to hold what the session had emitted when it was
/// asked: the tap task is microseconds behind, a loaded machine more.
const CATCH_UP: Duration = Duration::from_secs(2);

/// Every envelope of one session but the token-by-token tool input, in order. Text deltas
/// are kept so a turn still streaming shows its partial message.
#[derive(Default)]
pub struct Buffer {
    events: Mutex<Vec<Envelope>>,
    /// The last seq pushed (kept or not), so a read can wait until it has all up to a point.
    seen: tokio::sync::watch::Sender<u64>,
}

enum Which {
    LastMessage,
    FullTurn,
    All,
}

impl Buffer {
    pub fn push(&self, envelope: &Envelope) {
        if !matches!(envelope.payload, Payload::ToolInputDelta(_)) {
            self.events
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(envelope.clone());
        }
        self.seen.send_replace(envelope.seq);
    }

    /// Waits (a bounded while) until every envelope up to `seq` is in: a status read after the
    /// session died must not show an output missing the error that came before it.
    pub async fn caught_up(&self, seq: u64) {
        let mut seen = self.seen.subscribe();
        let _ = tokio::time::timeout(CATCH_UP, seen.wait_for(|last| *last >= seq)).await;
    }

    pub fn render(
        &self,
        request: &OutputRequest,
        status: Status,
        session_usage: Usage,
    ) -> Result<Value, String> {
        let which = match request.which.as_deref().unwrap_or("last_message") {
            "last_message" => Which::LastMessage,
            "full_turn" => Which::FullTurn,
            "all" => Which::All,
            other => {
                return Err(format!(
                    "which must be last_message, full_turn or all, not {other:?}"
                ));
            }
        };
        let tools = request.include_tools.unwrap_or(false);
        let events = self.events.lock().unwrap_or_else(|p| p.into_inner());
        let latest = events.iter().map(|e| e.turn).max().unwrap_or(0);
        let turn = request.turn.unwrap_or(latest);
        if turn > latest {
            return Err(format!("no turn {turn} yet (latest: {latest})"));
        }
        let done_turn = |n: u32| {
            events
                .iter()
                .any(|e| e.turn == n && matches!(e.payload, Payload::Result(_)))
        };
        let (text, done, usage) = match which {
            Which::All => {
                let mut parts = Vec::new();
                for n in 1..=latest {
                    let body = render_turn(events.iter().filter(|e| e.turn == n), tools, true);
                    parts.push(format!("## turn {n}\n{body}"));
                }
                let done = latest == 0 || done_turn(latest);
                (parts.join("\n\n"), done, session_usage)
            }
            Which::FullTurn | Which::LastMessage => {
                let of_turn = || events.iter().filter(move |e| e.turn == turn);
                let text = match which {
                    Which::FullTurn => render_turn(of_turn(), tools, false),
                    _ => messages(of_turn()).pop().unwrap_or_default(),
                };
                let usage = of_turn()
                    .filter_map(|e| match &e.payload {
                        Payload::Result(r) => Some(r.usage),
                        Payload::Usage(u) => Some(u.usage),
                        _ => None,
                    })
                    .next_back()
                    .unwrap_or_default();
                (text, turn == 0 || done_turn(turn), usage)
            }
        };
        let max = request.max_chars.unwrap_or(DEFAULT_MAX_CHARS);
        let (text, dropped) = keep_tail(&text, max);
        let instructions = events.iter().rev().find_map(|e| match &e.payload {
            Payload::Instructions(data) => Some(json!(data.files)),
            _ => None,
        });
        let mut output = json!({
            "agent_id": request.agent_id,
            "turn": turn,
            "status": status,
            "done": done,
            "text": text,
            "truncated": dropped > 0,
            "dropped_chars": dropped,
            "usage": usage,
        });
        // The project instructions the agent's prompt holds (its loop's own, not an external
        // agent's), so a caller knows what the agent was told besides the task.
        if let Some(files) = instructions {
            output["instructions"] = files;
        }
        Ok(output)
    }
}

fn text_of(content: &ContentBlock) -> &str {
    match content {
        ContentBlock::Text { text } => text,
        ContentBlock::Image { .. } => "[image]",
    }
}

/// The assistant messages of a turn: each authoritative text, and the streamed deltas of a
/// message whose authoritative text has not come yet.
fn messages<'a>(events: impl Iterator<Item = &'a Envelope>) -> Vec<String> {
    let mut done = Vec::new();
    let mut streaming = String::new();
    for e in events {
        if let Payload::AssistantText(t) = &e.payload {
            if t.delta {
                streaming.push_str(text_of(&t.content));
            } else {
                streaming.clear();
                done.push(text_of(&t.content).to_string());
            }
        }
    }
    if !streaming.is_empty() {
        done.push(streaming);
    }
    done
}

/// A turn as text: assistant messages in order, optionally the user's message and the tool
/// calls between them.
fn render_turn<'a>(events: impl Iterator<Item = &'a Envelope>, tools: bool, user: bool) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut streaming = String::new();
    let flush = |streaming: &mut String, parts: &mut Vec<String>| {
        if !streaming.is_empty() {
            parts.push(std::mem::take(streaming));
        }
    };
    for e in events {
        match &e.payload {
            Payload::UserText(u) if user => parts.push(format!("> {}", text_of(&u.content))),
            Payload::AssistantText(t) if t.delta => streaming.push_str(text_of(&t.content)),
            Payload::AssistantText(t) => {
                streaming.clear();
                parts.push(text_of(&t.content).to_string());
            }
            Payload::ToolUse(u) if tools => {
                flush(&mut streaming, &mut parts);
                let input = u
                    .call
                    .raw_input
                    .as_ref()
                    .map(|v| v.to_string())
                    .unwrap_or_default();
                parts.push(format!("[tool call {}] {input}", u.call.title));
            }
            Payload::ToolResult(r) if tools => {
                flush(&mut streaming, &mut parts);
                let record = &r.result;
                let body = if record.success {
                    record.output.clone().unwrap_or_default()
                } else {
                    record.error.clone().unwrap_or_default()
                };
                let (body, _) = keep_head(&body, TOOL_OUTPUT_CHARS);
                let outcome = if record.success { "ok" } else { "failed" };
                parts.push(format!("[tool result {} {outcome}] {body}", record.tool));
            }
            Payload::Plan(plan) if tools => {
                flush(&mut streaming, &mut parts);
                let lines: Vec<String> = plan.checklist().collect();
                parts.push(format!("[plan]\n{}", lines.join("\n")));
            }
            // Shown with the tools: what went wrong (a crashed agent, a refused call) is
            // part of the full story, not of the answer.
            Payload::Error(error) if tools => {
                flush(&mut streaming, &mut parts);
                parts.push(format!("[error] {}", error.message));
            }
            _ => {}
        }
    }
    flush(&mut streaming, &mut parts);
    parts.join("\n\n")
}

/// The last `max` characters of `text` and how many were dropped: the end of an agent's
/// output is what a caller polls for.
fn keep_tail(text: &str, max: usize) -> (String, usize) {
    let count = text.chars().count();
    if count <= max {
        return (text.to_string(), 0);
    }
    let dropped = count - max;
    (text.chars().skip(dropped).collect(), dropped)
}

fn keep_head(text: &str, max: usize) -> (String, usize) {
    let count = text.chars().count();
    if count <= max {
        return (text.to_string(), 0);
    }
    (text.chars().take(max).collect(), count - max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_is_kept_by_characters() {
        assert_eq!(keep_tail("héllo", 3), ("llo".to_string(), 2));
        assert_eq!(keep_tail("abc", 3), ("abc".to_string(), 0));
        assert_eq!(keep_head("héllo", 2), ("hé".to_string(), 3));
    }

    #[tokio::test]
    async fn a_read_waits_for_what_the_session_had_emitted() {
        let buffer = std::sync::Arc::new(Buffer::default());
        let tap = buffer.clone();
        // The tap task runs only once the reader yields: a read that did not wait sees nothing.
        tokio::spawn(async move {
            tap.push(&Envelope {
                seq: 7,
                ts: crate::event::Timestamp::now(),
                session: "a".into(),
                turn: 1,
                payload: Payload::Error(crate::event::ErrorData {
                    message: "codex stopped between turns".into(),
                    data: Value::Null,
                }),
            });
        });
        buffer.caught_up(7).await;
        assert_eq!(buffer.events.lock().unwrap().len(), 1);
    }
}
