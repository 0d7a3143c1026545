//! The projection of corral's envelopes onto the seed's WebSocket message types.
//!
//! Decisions the seed leaves open, made here once:
//! - `token.final`, as the seed defines it: false until the turn's first tool call is seen
//!   (so a turn without tools is all `false`: the flag only means something once tools ran),
//!   false while a step's tool calls are announced and not all answered, true for text once
//!   every call so far has its result. The future is unknown when a token is sent: text
//!   after a tool result that turns out to be the preamble of a further tool call is `true`
//!   (the seed's "after all tool calls complete" cannot be known before the turn ends).
//! - `done.message_id`: a fresh UUID v4 per turn (the seed's "UUID of the AI message");
//!   replays repeat the buffered message, so a reconnecting client sees the same id.
//! - `tool_start.tool` / `tool_end.tool`: the name the `tool_use` announce carried (its
//!   `tool`, not the display `call.title`); `tool_end` repeats the name its `tool_start`
//!   sent, so the two agree whatever name the backend's result record holds.
//! - Only `delta: true` chunks become `token`/`thought`; the authoritative `delta: false`
//!   block repeats text the client already has.
//! - A failed turn sends `error`, `agent_state error`, `agent_state idle`, then `done`: the
//!   seed calls `done` "always the last message for a turn (successfully or after an error
//!   recovery)". A cancelled turn sends `agent_state idle` and `error CANCELLED`, no `done`.
//! - The phases follow what the turn does: `thinking` when it starts, `writing` at its first
//!   text. A think-mode turn (run at high effort) adds `analyzing` until the model's first
//!   output, `researching` while a search or web tool runs, `deep_thinking` while the model
//!   reasons, and `writing` when it answers; each is sent when it changes, so a turn that
//!   reasons again after a tool goes back to `deep_thinking`.
//! - An `error` event that carries a `code` (a note such as EFFORT_NOT_APPLIED) keeps it.
//! - Beyond the seed (extra fields older clients ignore): `tool_end.output` is the result's
//!   text, at most [`OUTPUT_PREVIEW`] bytes (its head and tail), so a page shows what every
//!   tool returned, not only the streamed shell and python output; `tool_end.diff` is the
//!   change a person approved for that call (`tool_confirm_request` carries it too, with
//!   the call's `tool_call_id`); `done.stop_reason` says how the turn ended (`end_turn`,
//!   `max_steps`, `error`), so a failed turn is not drawn as finished.
//! - `memory_update.tokens_used` is the context after summarizing (`tokensAfter` of the
//!   compaction event; for a log written before it was recorded, the summary's size).

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use serde_json::{Map, Value, json};

use crate::event::{Envelope, Payload, PermissionData, Status, StopReason};
use crate::host::manager::TurnMode;

/// One protocol message before it gets its `seq` and `ts`.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub kind: &'static str,
    pub payload: Value,
}

fn msg(kind: &'static str, payload: Value) -> Message {
    Message { kind, payload }
}

pub fn agent_state(state: &str) -> Message {
    msg("agent_state", json!({ "state": state }))
}

/// The project instructions a session loaded: `{files: [{path, bytes, truncated}]}`.
pub fn instructions(data: &crate::event::InstructionsData) -> Message {
    msg("instructions", json!({ "files": data.files }))
}

pub fn error(code: &str, message: &str) -> Message {
    msg("error", json!({ "code": code, "message": message }))
}

/// The projection's memory of the running turn.
#[derive(Debug, Default)]
pub struct Projector {
    /// The `agent_state` clients last saw; a reconnecting client is told this.
    pub state: &'static str,
    in_turn: bool,
    /// Calls started (`tool_start` sent) and not answered yet.
    pending: HashSet<String>,
    wrote: bool,
    errored: bool,
    tool_calls: u64,
    started: Option<Instant>,
    /// The name each `tool_start` of this turn sent, by call id, for its `tool_end`.
    names: HashMap<String, String>,
    /// The diff each approval request of this turn showed, by call id, for its `tool_end`.
    diffs: HashMap<String, String>,
}

/// The most of a tool's result `tool_end` carries; the session's history has all of it.
pub const OUTPUT_PREVIEW: usize = 16 * 1024;

/// `text` whole when it fits in `limit` bytes, else its head and tail around a line saying
/// how much was left out (cut on character boundaries).
fn preview(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_string();
    }
    let half = limit / 2;
    let mut head = half;
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = text.len() - half;
    while !text.is_char_boundary(tail) {
        tail += 1;
    }
    let omitted = tail - head;
    format!(
        "{}\n[… {omitted} bytes omitted …]\n{}",
        &text[..head],
        &text[tail..]
    )
}

/// A tool that looks things up (the phase `researching`): corral's `search_files` and
/// `open_url`, an MCP server's search or fetch tools, an external agent's WebSearch/WebFetch.
fn is_research(tool: &str) -> bool {
    let tool = tool.to_ascii_lowercase();
    tool == "open_url"
        || ["search", "fetch", "web", "browse"]
            .iter()
            .any(|w| tool.contains(w))
}

/// Parameters with large values last, so a dialog shows the short ones first.
fn sorted_parameters(input: &Value) -> Value {
    let Value::Object(map) = input else {
        return input.clone();
    };
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_by_key(|(_, v)| v.to_string().len());
    let mut out = Map::new();
    for (k, v) in entries {
        out.insert(k.clone(), v.clone());
    }
    Value::Object(out)
}

fn human_size(bytes: usize) -> String {
    if bytes < 1024 {
        format!("{bytes} B")
    } else if bytes < 1024 * 1024 {
        format!("{} KB", bytes.div_ceil(1024))
    } else {
        format!("{} MB", bytes.div_ceil(1024 * 1024))
    }
}

/// A sentence for the confirmation dialog.
pub fn describe(tool: &str, input: &Value) -> String {
    let text = |key: &str| input.get(key).and_then(Value::as_str);
    match tool {
        "write_file" => format!(
            "Write {} to {}",
            human_size(text("content").map_or(0, str::len)),
            text("path").unwrap_or("a file")
        ),
        "shell" => format!("Run `{}`", text("command").unwrap_or("a command")),
        "python" => "Run a Python script".to_string(),
        "open_url" => format!("Open {}", text("url").unwrap_or("a URL")),
        "clipboard_read" => "Read the clipboard".to_string(),
        "clipboard_write" => "Write to the clipboard".to_string(),
        "screenshot" => "Take a screenshot".to_string(),
        other => format!("Use {other}"),
    }
}

impl Projector {
    pub fn new(working: bool) -> Self {
        Projector {
            state: if working { "thinking" } else { "idle" },
            in_turn: working,
            ..Projector::default()
        }
    }

    /// Whether text now is the answer: tools ran this turn and none is waiting for its
    /// result.
    fn answering(&self) -> bool {
        self.tool_calls > 0 && self.pending.is_empty()
    }

    fn set(&mut self, out: &mut Vec<Message>, state: &'static str) {
        self.state = state;
        out.push(agent_state(state));
    }

    /// A phase within the turn, sent only when it changes.
    fn phase(&mut self, out: &mut Vec<Message>, state: &'static str) {
        if self.in_turn && self.state != state {
            self.set(out, state);
        }
    }

    fn start_turn(&mut self, out: &mut Vec<Message>, mode: TurnMode) {
        *self = Projector {
            in_turn: true,
            started: Some(Instant::now()),
            ..Projector::default()
        };
        self.set(out, "thinking");
        match mode {
            TurnMode::Think => self.set(out, "analyzing"),
            TurnMode::Delegate => self.set(out, "delegating"),
            TurnMode::Normal => {}
        }
    }

    /// Zero or more protocol messages for one envelope; `mode` is the running turn's.
    pub fn project(&mut self, envelope: &Envelope, mode: TurnMode) -> Vec<Message> {
        let mut out = Vec::new();
        match &envelope.payload {
            Payload::Status(s) if s.status == Status::Working && !self.in_turn => {
                self.start_turn(&mut out, mode);
            }
            Payload::AssistantText(t) if t.delta => {
                // A delegate turn stays `delegating` to its end, as the seed draws it.
                if mode == TurnMode::Think || (mode == TurnMode::Normal && !self.wrote) {
                    self.phase(&mut out, "writing");
                }
                self.wrote = true;
                if let crate::event::ContentBlock::Text { text } = &t.content {
                    out.push(msg(
                        "token",
                        json!({ "text": text, "final": self.answering() }),
                    ));
                }
            }
            Payload::Thought(t) if t.delta => {
                if mode == TurnMode::Think {
                    self.phase(&mut out, "deep_thinking");
                }
                if let crate::event::ContentBlock::Text { text } = &t.content {
                    out.push(msg(
                        "thought",
                        json!({ "text": text, "final": self.answering() }),
                    ));
                }
            }
            Payload::ToolUse(u) => {
                if let Some(input) = &u.call.raw_input {
                    // A log written before `tool_use` named its tool shows the title.
                    let name = if u.tool.is_empty() {
                        &u.call.title
                    } else {
                        &u.tool
                    };
                    if mode == TurnMode::Think && is_research(name) {
                        self.phase(&mut out, "researching");
                    }
                    self.pending.insert(u.call.tool_call_id.clone());
                    self.tool_calls += 1;
                    self.names.insert(u.call.tool_call_id.clone(), name.clone());
                    out.push(msg(
                        "tool_start",
                        json!({ "tool": name, "tool_call_id": u.call.tool_call_id,
                                "input": input }),
                    ));
                }
            }
            Payload::ToolOutput(o) => out.push(msg(
                "tool_output",
                json!({ "tool_call_id": o.tool_call_id, "stream": o.stream, "text": o.text }),
            )),
            Payload::ToolResult(r) => {
                let record = &r.result;
                self.pending.remove(&record.tool_call_id);
                let error = if record.success {
                    Value::Null
                } else {
                    json!(record.error.clone().unwrap_or_else(|| "failed".to_string()))
                };
                let name = self.names.get(&record.tool_call_id).unwrap_or(&record.tool);
                let mut end = json!({ "tool": name, "tool_call_id": record.tool_call_id,
                                      "duration_ms": record.duration_ms, "error": error });
                if let Some(output) = record.output.as_deref().filter(|o| !o.is_empty()) {
                    end["output"] = json!(preview(output, OUTPUT_PREVIEW));
                }
                // The change as approved, kept where the call shows once the dialog is gone.
                if let Some(diff) = self.diffs.remove(&record.tool_call_id)
                    && record.success
                {
                    end["diff"] = json!(diff);
                }
                out.push(msg("tool_end", end));
            }
            Payload::Permission(PermissionData::Request(request)) => {
                let input = &request.tool_call.raw_input;
                let mut payload = json!({
                    "confirmation_id": request.request_id,
                    "tool_call_id": request.tool_call.tool_call_id,
                    "tool": request.tool,
                    "parameters": sorted_parameters(input),
                    "message": describe(&request.tool, input),
                    "always": request.always,
                    "danger": request.danger,
                });
                if let Some(diff) = &request.preview.diff {
                    payload["diff"] = json!(diff);
                    self.diffs
                        .insert(request.tool_call.tool_call_id.clone(), diff.clone());
                }
                // A desktop action: its point, window, text and marked screenshot, whole (the
                // page checks the image before it shows it).
                if let Some(desktop) = &request.preview.desktop {
                    payload["desktop"] = json!(desktop);
                }
                // A delegated sub-session asks here: the dialog says which one.
                if let Some(sub) = &request.sub_session {
                    payload["message"] =
                        json!(format!("[{sub}] {}", describe(&request.tool, input)));
                    payload["sub_session"] = json!(sub);
                }
                out.push(msg("tool_confirm_request", payload));
            }
            Payload::Plan(p) => {
                let mut plan = json!({ "entries": p.entries });
                if let Some(why) = &p.explanation {
                    plan["explanation"] = json!(why);
                }
                out.push(msg("plan", plan));
            }
            Payload::Instructions(i) => out.push(instructions(i)),
            Payload::Usage(u) => out.push(msg(
                "usage",
                json!({ "input_tokens": u.usage.input_tokens,
                        "output_tokens": u.usage.output_tokens,
                        "context_tokens": u.context_tokens,
                        "context_window": u.context_window }),
            )),
            Payload::Compaction(c) => out.push(msg(
                "memory_update",
                json!({ "mode": "conversation", "tokens_used": tokens_after(c),
                        "summarized": true }),
            )),
            Payload::Error(e) => match e.data.get("code").and_then(Value::as_str) {
                // A note (an effort not applied) is not the turn failing.
                Some(code) => out.push(error(code, &e.message)),
                None => {
                    self.errored = true;
                    out.push(error("AGENT_ERROR", &e.message));
                }
            },
            Payload::Result(r) => self.finish(&mut out, r),
            _ => {}
        }
        out
    }

    fn finish(&mut self, out: &mut Vec<Message>, r: &crate::event::ResultData) {
        match r.stop_reason {
            StopReason::Cancelled => {
                self.set(out, "idle");
                out.push(error("CANCELLED", "the turn was cancelled"));
                self.in_turn = false;
                return;
            }
            StopReason::Error => {
                if !self.errored {
                    let message = r.error.as_deref().unwrap_or("the turn failed");
                    out.push(error("AGENT_ERROR", message));
                }
                self.set(out, "error");
                self.set(out, "idle");
            }
            StopReason::EndTurn | StopReason::MaxSteps => {
                self.set(out, "done");
                // The next connection starts from a resting session.
                self.state = "idle";
            }
        }
        let duration = self.started.map_or(0, |s| s.elapsed().as_millis() as u64);
        out.push(msg(
            "done",
            json!({
                "message_id": crate::session::ids::uuid_v4(),
                "total_tokens": r.usage.input_tokens + r.usage.output_tokens,
                "input_tokens": r.usage.input_tokens,
                "output_tokens": r.usage.output_tokens,
                "duration_ms": duration,
                "tool_calls": self.tool_calls,
                "stop_reason": r.stop_reason,
            }),
        ));
        self.in_turn = false;
    }
}

#[cfg(test)]
#[path = "projection_tests.rs"]
mod tests;

/// The context size after a compaction; a log from before `tokensAfter` was recorded gives
/// the summary's size (a quarter of its bytes).
fn tokens_after(c: &crate::event::CompactionData) -> u64 {
    if c.tokens_after > 0 {
        c.tokens_after
    } else {
        (c.summary.len() / 4) as u64
    }
}
