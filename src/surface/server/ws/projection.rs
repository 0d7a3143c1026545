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
//! - `memory_update.tokens_used` is an estimate (summary length / 4): the compaction event
//!   carries the size before, not after.

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
                if !self.wrote {
                    self.wrote = true;
                    let phase = match mode {
                        TurnMode::Think => "deep_thinking",
                        _ => "writing",
                    };
                    self.set(&mut out, phase);
                }
                if let crate::event::ContentBlock::Text { text } = &t.content {
                    out.push(msg(
                        "token",
                        json!({ "text": text, "final": self.answering() }),
                    ));
                }
            }
            Payload::Thought(t) if t.delta => {
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
                out.push(msg(
                    "tool_end",
                    json!({ "tool": name, "tool_call_id": record.tool_call_id,
                            "duration_ms": record.duration_ms, "error": error }),
                ));
            }
            Payload::Permission(PermissionData::Request(request)) => {
                let input = &request.tool_call.raw_input;
                out.push(msg(
                    "tool_confirm_request",
                    json!({
                        "confirmation_id": request.request_id,
                        "tool": request.tool,
                        "parameters": sorted_parameters(input),
                        "message": describe(&request.tool, input),
                        "always": request.always,
                    }),
                ));
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
                json!({ "mode": "conversation", "tokens_used": c.summary.len() / 4,
                        "summarized": true }),
            )),
            Payload::Error(e) => {
                self.errored = true;
                out.push(error("AGENT_ERROR", &e.message));
            }
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
            }),
        ));
        self.in_turn = false;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::event::*;

    fn env(payload: Payload) -> Envelope {
        Envelope {
            seq: 1,
            ts: Timestamp::now(),
            session: Arc::from("a1"),
            turn: 1,
            payload,
        }
    }

    fn kinds(p: &mut Projector, payloads: Vec<Payload>, mode: TurnMode) -> Vec<Message> {
        payloads
            .into_iter()
            .flat_map(|pl| p.project(&env(pl), mode))
            .collect()
    }

    fn text(delta: bool, t: &str) -> Payload {
        Payload::AssistantText(TextData {
            delta,
            content: ContentBlock::text(t),
        })
    }

    fn result(stop: StopReason) -> Payload {
        Payload::Result(ResultData {
            stop_reason: stop,
            usage: Usage {
                input_tokens: 10,
                output_tokens: 5,
                ..Usage::default()
            },
            error: None,
        })
    }

    fn working() -> Payload {
        Payload::Status(StatusData {
            status: Status::Working,
        })
    }

    #[test]
    fn a_plain_turn_is_thinking_writing_tokens_done() {
        let mut p = Projector::new(false);
        let out = kinds(
            &mut p,
            vec![
                working(),
                text(true, "Hi"),
                text(false, "Hi"),
                result(StopReason::EndTurn),
            ],
            TurnMode::Normal,
        );
        let types: Vec<&str> = out.iter().map(|m| m.kind).collect();
        assert_eq!(
            types,
            ["agent_state", "agent_state", "token", "agent_state", "done"]
        );
        assert_eq!(out[1].payload["state"], "writing");
        // No tool call in the turn: nothing is "the answer after the tools".
        assert_eq!(out[2].payload, json!({"text": "Hi", "final": false}));
        assert_eq!(out[4].payload["total_tokens"], 15);
        assert_eq!(p.state, "idle");
    }

    #[test]
    fn tools_start_and_end_and_tokens_in_a_tool_step_are_not_final() {
        let mut p = Projector::new(false);
        let call = ToolCallInfo {
            tool_call_id: "c1".into(),
            title: "x".into(),
            kind: "other".into(),
            status: ToolCallStatus::Pending,
            content: vec![],
            locations: vec![],
            raw_input: None,
        };
        let mut full = call.clone();
        full.raw_input = Some(json!({"path": "a"}));
        let out = kinds(
            &mut p,
            vec![
                working(),
                Payload::ToolUse(ToolUseData::new("read_file", call)),
                Payload::ToolUse(ToolUseData::new("read_file", full)),
                text(true, "mid"),
                Payload::ToolResult(ToolResultData {
                    update: ToolUpdate {
                        tool_call_id: "c1".into(),
                        status: ToolCallStatus::Failed,
                        content: vec![],
                    },
                    result: ToolResultRecord {
                        tool_call_id: "c1".into(),
                        tool: "read_file".into(),
                        success: false,
                        output: None,
                        error: Some("nope".into()),
                        duration_ms: 3,
                    },
                }),
                text(true, "end"),
                result(StopReason::EndTurn),
            ],
            TurnMode::Normal,
        );
        let start = out.iter().find(|m| m.kind == "tool_start").unwrap();
        assert_eq!(start.payload["input"], json!({"path": "a"}));
        // The announce's own name, not its display title ("x").
        assert_eq!(start.payload["tool"], "read_file");
        let end = out.iter().find(|m| m.kind == "tool_end").unwrap();
        assert_eq!(end.payload["error"], "nope");
        assert_eq!(end.payload["tool"], "read_file");
        let finals: Vec<bool> = out
            .iter()
            .filter(|m| m.kind == "token")
            .map(|m| m.payload["final"].as_bool().unwrap())
            .collect();
        assert_eq!(finals, [false, true]);
        assert_eq!(out.last().unwrap().payload["tool_calls"], 1);
    }

    fn announce(id: &str, tool: &str, title: &str) -> Payload {
        Payload::ToolUse(ToolUseData::new(
            tool,
            ToolCallInfo {
                tool_call_id: id.into(),
                title: title.into(),
                kind: "other".into(),
                status: ToolCallStatus::InProgress,
                content: vec![],
                locations: vec![],
                raw_input: Some(json!({})),
            },
        ))
    }

    fn finished(id: &str, tool: &str) -> Payload {
        Payload::ToolResult(ToolResultData::finished(
            id,
            tool,
            Ok("ok".into()),
            1,
            vec![],
        ))
    }

    #[test]
    fn tokens_are_final_only_once_every_started_call_has_its_result() {
        let mut p = Projector::new(false);
        let out = kinds(
            &mut p,
            vec![
                working(),
                text(true, "pre"),
                announce("a", "shell", "Run ls"),
                announce("b", "read_file", "Read x"),
                finished("a", "shell"),
                text(true, "between"),
                finished("b", "read_file"),
                text(true, "answer"),
                result(StopReason::EndTurn),
            ],
            TurnMode::Normal,
        );
        let finals: Vec<(String, bool)> = out
            .iter()
            .filter(|m| m.kind == "token")
            .map(|m| {
                let t = m.payload["text"].as_str().unwrap().to_string();
                (t, m.payload["final"].as_bool().unwrap())
            })
            .collect();
        let expected = [("pre", false), ("between", false), ("answer", true)];
        let expected: Vec<(String, bool)> =
            expected.iter().map(|(t, f)| (t.to_string(), *f)).collect();
        assert_eq!(finals, expected);
    }

    #[test]
    fn tool_end_names_the_tool_its_start_named() {
        let mut p = Projector::new(false);
        // An agent whose result record holds a title that changed since the announce.
        let out = kinds(
            &mut p,
            vec![
                working(),
                announce("c", "Read", "Read /a"),
                finished("c", "Read /a (3 lines)"),
                result(StopReason::EndTurn),
            ],
            TurnMode::Normal,
        );
        let start = out.iter().find(|m| m.kind == "tool_start").unwrap();
        let end = out.iter().find(|m| m.kind == "tool_end").unwrap();
        assert_eq!(start.payload["tool"], "Read");
        assert_eq!(end.payload["tool"], "Read");
    }

    #[test]
    fn done_message_ids_are_uuids_and_differ_per_turn() {
        let mut p = Projector::new(false);
        let mut ids = Vec::new();
        for _ in 0..2 {
            let out = kinds(
                &mut p,
                vec![working(), result(StopReason::EndTurn)],
                TurnMode::Normal,
            );
            let id = out.last().unwrap().payload["message_id"]
                .as_str()
                .unwrap()
                .to_string();
            let groups: Vec<usize> = id.split('-').map(str::len).collect();
            assert_eq!(groups, [8, 4, 4, 4, 12], "{id}");
            assert!(
                id.chars().all(|c| c == '-' || c.is_ascii_hexdigit()),
                "{id}"
            );
            ids.push(id);
        }
        assert_ne!(ids[0], ids[1]);
    }

    #[test]
    fn cancel_is_idle_then_cancelled_without_done() {
        let mut p = Projector::new(false);
        let out = kinds(
            &mut p,
            vec![working(), result(StopReason::Cancelled)],
            TurnMode::Normal,
        );
        let tail: Vec<(&str, Value)> = out[1..]
            .iter()
            .map(|m| (m.kind, m.payload.clone()))
            .collect();
        assert_eq!(tail[0], ("agent_state", json!({"state": "idle"})));
        assert_eq!(tail[1].1["code"], "CANCELLED");
        assert!(out.iter().all(|m| m.kind != "done"));
    }

    #[test]
    fn a_failed_turn_is_error_then_error_idle_states_then_done() {
        let mut p = Projector::new(false);
        let out = kinds(
            &mut p,
            vec![working(), result(StopReason::Error)],
            TurnMode::Think,
        );
        let seen: Vec<String> = out
            .iter()
            .map(|m| match m.kind {
                "agent_state" => m.payload["state"].as_str().unwrap().to_string(),
                other => other.to_string(),
            })
            .collect();
        assert_eq!(
            seen,
            ["thinking", "analyzing", "error", "error", "idle", "done"]
        );
    }

    #[test]
    fn confirm_requests_sort_large_values_last_and_describe_the_action() {
        let mut p = Projector::new(true);
        let mut request = PermissionRequest::sample(
            "write_file",
            json!({"content": "x".repeat(2048), "path": "/tmp/r.md"}),
        );
        request.request_id = "perm_1".into();
        let out = p.project(
            &env(Payload::Permission(PermissionData::Request(Box::new(
                request,
            )))),
            TurnMode::Normal,
        );
        assert_eq!(out[0].kind, "tool_confirm_request");
        assert_eq!(out[0].payload["confirmation_id"], "perm_1");
        assert_eq!(out[0].payload["message"], "Write 2 KB to /tmp/r.md");
        let keys: Vec<&String> = out[0].payload["parameters"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(keys, ["path", "content"]);
        let resolved = PermissionResolution::new("perm_1", "allow", None);
        assert!(
            p.project(
                &env(Payload::Permission(PermissionData::Resolution(resolved))),
                TurnMode::Normal
            )
            .is_empty()
        );
    }
}
