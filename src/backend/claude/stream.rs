//! claude's stdout lines within a turn, as corral's events: partial messages become the
//! `delta` chunks, finished blocks the authoritative copies, tool results are matched to their
//! calls by id, and the `result` line ends the turn.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use serde_json::{Value, json};

use super::launch;
use crate::event::{
    ContentBlock, Payload, PlanData, StopReason, TextData, ToolCallInfo, ToolCallStatus,
    ToolInputDeltaData, ToolResultData, ToolUseData, Usage, UsageData,
};
use crate::session::{Session, TurnEnd};

/// What a turn has seen so far.
#[derive(Default)]
pub(super) struct TurnState {
    /// Blocks of the message being streamed, by index.
    blocks: HashMap<u64, Block>,
    /// Between a streamed message's start and its stop: nothing may be written to claude.
    streaming: bool,
    /// Tool calls of the turn: claude's tool name, and when the authoritative call came.
    tools: HashMap<String, (String, Instant)>,
    /// `TodoWrite` calls waiting for their result: the plan each would make.
    todo_plans: HashMap<String, PlanData>,
    /// Authoritative blocks already emitted (claude may repeat a message's blocks).
    emitted: HashSet<String>,
    /// The last authoritative text.
    text: String,
    /// Prompt tokens of the latest request.
    context_tokens: Option<u64>,
    /// An interrupt was sent; the deadline for claude's `result`.
    pub(super) interrupted: Option<tokio::time::Instant>,
    /// claude's `total_cost_usd` is the process's running total: what it was before this turn.
    cost_before: f64,
    /// The running total after this turn.
    pub(super) cost_total: Option<f64>,
}

enum Block {
    Text,
    Thinking,
    Tool(String),
    Other,
}

/// claude's `result` line, read: how the turn ended, its usage and its answer.
pub(super) struct ResultLine {
    pub end: TurnEnd,
    pub usage: Usage,
    pub text: String,
}

/// Sub-agent traffic (`parent_tool_use_id` set) stays inside claude's own tool call.
fn is_subagent(value: &Value) -> bool {
    !value["parent_tool_use_id"].is_null()
}

fn text_event(delta: bool, text: &str) -> TextData {
    TextData {
        delta,
        content: ContentBlock::text(text),
    }
}

fn tool_call(id: &str, name: &str, input: Option<&Value>, status: ToolCallStatus) -> ToolCallInfo {
    let mapped = launch::map_tool(name, input.unwrap_or(&Value::Null));
    ToolCallInfo {
        tool_call_id: id.to_string(),
        title: if input.is_some() {
            mapped.title
        } else {
            name.to_string()
        },
        kind: mapped.kind.to_string(),
        status,
        content: Vec::new(),
        locations: Vec::new(),
        raw_input: input.cloned(),
    }
}

impl TurnState {
    pub(super) fn new(cost_before: f64) -> TurnState {
        TurnState {
            cost_before,
            ..TurnState::default()
        }
    }

    pub(super) fn on_stream_event(&mut self, session: &Session, value: &Value) {
        if is_subagent(value) {
            return;
        }
        let event = &value["event"];
        let index = event["index"].as_u64().unwrap_or_default();
        match event["type"].as_str().unwrap_or_default() {
            "message_start" => {
                self.blocks.clear();
                self.streaming = true;
            }
            "message_stop" => self.streaming = false,
            "content_block_start" => {
                let block = &event["content_block"];
                let kind = match block["type"].as_str().unwrap_or_default() {
                    "text" => Block::Text,
                    "thinking" => Block::Thinking,
                    "tool_use" | "server_tool_use" => {
                        let id = block["id"].as_str().unwrap_or_default().to_string();
                        let name = block["name"].as_str().unwrap_or_default();
                        session.emit(Payload::ToolUse(ToolUseData::new(
                            name,
                            tool_call(&id, name, None, ToolCallStatus::Pending),
                        )));
                        Block::Tool(id)
                    }
                    _ => Block::Other,
                };
                self.blocks.insert(index, kind);
            }
            "content_block_delta" => {
                let delta = &event["delta"];
                let piece = |key: &str| delta[key].as_str().unwrap_or_default().to_string();
                match (self.blocks.get(&index), delta["type"].as_str()) {
                    (_, Some("text_delta")) if !piece("text").is_empty() => {
                        session.emit(Payload::AssistantText(text_event(true, &piece("text"))));
                    }
                    (_, Some("thinking_delta")) if !piece("thinking").is_empty() => {
                        session.emit(Payload::Thought(text_event(true, &piece("thinking"))));
                    }
                    (Some(Block::Tool(id)), Some("input_json_delta"))
                        if !piece("partial_json").is_empty() =>
                    {
                        session.emit(Payload::ToolInputDelta(ToolInputDeltaData {
                            tool_call_id: id.clone(),
                            partial_json: piece("partial_json"),
                        }));
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }

    /// A line may be written to claude now: no message is being streamed and every tool use
    /// has its result.
    pub(super) fn at_safe_boundary(&self) -> bool {
        !self.streaming && self.tools.is_empty()
    }

    pub(super) fn on_assistant(&mut self, session: &Session, value: &Value) {
        if is_subagent(value) {
            return;
        }
        let message = &value["message"];
        let message_id = message["id"].as_str().unwrap_or_default();
        let usage = &message["usage"];
        if usage.is_object() {
            let count = |key: &str| usage[key].as_u64().unwrap_or_default();
            self.context_tokens = Some(
                count("input_tokens")
                    + count("cache_read_input_tokens")
                    + count("cache_creation_input_tokens"),
            );
        }
        let Some(blocks) = message["content"].as_array() else {
            return;
        };
        for block in blocks {
            if !self.emitted.insert(format!("{message_id}\u{0}{block}")) {
                continue;
            }
            let text = |key: &str| block[key].as_str().unwrap_or_default();
            match block["type"].as_str().unwrap_or_default() {
                "text" if !text("text").is_empty() => {
                    self.text = text("text").to_string();
                    session.emit(Payload::AssistantText(text_event(false, text("text"))));
                }
                "thinking" if !text("thinking").is_empty() => {
                    session.emit(Payload::Thought(text_event(false, text("thinking"))));
                }
                "tool_use" | "server_tool_use" => {
                    let id = text("id");
                    let name = text("name");
                    let input = block.get("input").cloned().unwrap_or_else(|| json!({}));
                    self.tools
                        .insert(id.to_string(), (name.to_string(), Instant::now()));
                    session.emit(Payload::ToolUse(ToolUseData::new(
                        name,
                        tool_call(id, name, Some(&input), ToolCallStatus::InProgress),
                    )));
                    if name == TODO_TOOL
                        && let Some(plan) = todo_plan(&input)
                    {
                        self.todo_plans.insert(id.to_string(), plan);
                    }
                }
                _ => {}
            }
        }
    }

    pub(super) fn on_user(&mut self, session: &Session, value: &Value) {
        if is_subagent(value) {
            return;
        }
        let Some(blocks) = value["message"]["content"].as_array() else {
            return;
        };
        for block in blocks.iter().filter(|b| b["type"] == "tool_result") {
            let id = block["tool_use_id"].as_str().unwrap_or_default();
            let (tool, started) = self
                .tools
                .remove(id)
                .unwrap_or_else(|| ("unknown".to_string(), Instant::now()));
            let shown = result_text(&block["content"]);
            let failed = block["is_error"] == true;
            // The plan is what claude took: a TodoWrite it refused (a tool this session does
            // not have, bad input) changes nothing.
            if let Some(plan) = self.todo_plans.remove(id)
                && !failed
            {
                session.emit(Payload::Plan(plan));
            }
            let outcome = if failed { Err(shown) } else { Ok(shown) };
            let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            session.emit(Payload::ToolResult(ToolResultData::finished(
                id,
                &tool,
                outcome,
                duration_ms,
                result_images(&block["content"]),
            )));
        }
    }

    /// The turn's end: usage (as a `usage` event too) and the stop reason. `is_error` wins
    /// over a `success` subtype: claude reports API failures that way.
    pub(super) fn on_result(&mut self, session: &Session, value: &Value) -> ResultLine {
        let raw = &value["usage"];
        let count = |key: &str| raw[key].as_u64().unwrap_or_default();
        let usage = Usage {
            input_tokens: count("input_tokens"),
            output_tokens: count("output_tokens"),
            cache_read_tokens: count("cache_read_input_tokens"),
            cache_creation_tokens: count("cache_creation_input_tokens"),
            cost_usd: match value["total_cost_usd"].as_f64() {
                Some(total) => {
                    self.cost_total = Some(total);
                    (total - self.cost_before).max(0.0)
                }
                None => 0.0,
            },
        };
        let context_window = value["modelUsage"]
            .as_object()
            .and_then(|models| models.values().find_map(|m| m["contextWindow"].as_u64()));
        session.emit(Payload::Usage(UsageData {
            usage,
            context_tokens: self.context_tokens,
            context_window,
        }));
        let is_error = value["is_error"] == true;
        let subtype = value["subtype"].as_str().unwrap_or_default();
        let result_text = value["result"].as_str().unwrap_or_default().to_string();
        let end = if self.interrupted.is_some() {
            TurnEnd::Stop(StopReason::Cancelled)
        } else if subtype == "error_max_turns" {
            TurnEnd::Stop(StopReason::MaxSteps)
        } else if is_error || subtype.starts_with("error") {
            let errors: Vec<&str> = value["errors"]
                .as_array()
                .map(|e| e.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            TurnEnd::Error(if !result_text.is_empty() {
                result_text.clone()
            } else if !errors.is_empty() {
                errors.join("; ")
            } else {
                format!("claude ended the turn with {subtype:?}")
            })
        } else {
            TurnEnd::Stop(StopReason::EndTurn)
        };
        let text = if end == TurnEnd::Stop(StopReason::EndTurn) && !result_text.is_empty() {
            result_text
        } else {
            std::mem::take(&mut self.text)
        };
        ResultLine { end, usage, text }
    }
}

/// claude's own checklist tool: each call carries the whole list.
const TODO_TOOL: &str = "TodoWrite";

/// A `TodoWrite` call's `todos` (`{content, status, activeForm}`, older versions with a
/// `priority`) as the plan every surface reads. `None`: no list, nothing to show.
pub(super) fn todo_plan(input: &Value) -> Option<PlanData> {
    let todos = input["todos"].as_array()?;
    let entries = todos
        .iter()
        .map(|todo| {
            let text = |key: &str| todo[key].as_str().unwrap_or_default();
            let status = match text("status") {
                "" => "pending",
                status => status,
            };
            let mut entry = PlanData::entry(text("content"), status);
            if let priority @ ("high" | "medium" | "low") = text("priority") {
                entry["priority"] = json!(priority);
            }
            entry
        })
        .collect();
    Some(PlanData::new(entries))
}

/// The images among a tool result's blocks (`{"type":"image","source":{"type":"base64",
/// "media_type","data"}}`), as the image content a native tool's result carries. Other
/// sources (a URL) are not carried: a surface shows only what it has.
pub(super) fn result_images(content: &Value) -> Vec<Value> {
    let Some(blocks) = content.as_array() else {
        return Vec::new();
    };
    blocks
        .iter()
        .filter(|b| b["type"] == "image" && b["source"]["type"] == "base64")
        .filter_map(|b| {
            let data = b["source"]["data"].as_str()?;
            let mime = b["source"]["media_type"].as_str().unwrap_or("image/png");
            Some(crate::event::image_content(data, mime))
        })
        .collect()
}

/// A tool result's content: a string, or blocks of which the text ones are kept.
fn result_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::TurnState;
    use crate::event::{Payload, SharedEvent};
    use crate::session::Session;

    fn drain(events: &mut tokio::sync::mpsc::UnboundedReceiver<SharedEvent>) -> Vec<Payload> {
        let mut out = Vec::new();
        while let Ok(event) = events.try_recv() {
            out.push(event.envelope.payload.clone());
        }
        out
    }

    fn tool_result(id: &str, is_error: bool) -> serde_json::Value {
        json!({"type": "user", "parent_tool_use_id": null, "message": {"content": [
            {"type": "tool_result", "tool_use_id": id, "is_error": is_error,
             "content": "ok"}]}})
    }

    #[test]
    fn a_todo_write_call_that_went_through_is_the_plan() {
        let session = Session::create(None).unwrap();
        let mut events = session.tap(session.last_seq());
        let mut state = TurnState::default();
        let todos = json!({"todos": [
            {"content": "read the code", "status": "completed", "activeForm": "Reading"},
            {"content": "fix the bug", "status": "in_progress", "activeForm": "Fixing"},
            {"content": "run the tests", "status": "pending", "priority": "high"},
        ]});
        state.on_assistant(
            &session,
            &json!({"type": "assistant", "parent_tool_use_id": null, "message": {
                "id": "msg_1", "content": [{"type": "tool_use", "id": "toolu_t",
                "name": "TodoWrite", "input": todos}]}}),
        );
        // Nothing until claude says the call went through.
        assert!(
            !drain(&mut events)
                .iter()
                .any(|p| matches!(p, Payload::Plan(_)))
        );
        state.on_user(&session, &tool_result("toolu_t", false));
        let payloads = drain(&mut events);
        let plans: Vec<_> = payloads
            .iter()
            .filter_map(|p| match p {
                Payload::Plan(plan) => Some(plan.entries.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(
            plans,
            [vec![
                json!({"content": "read the code", "priority": "medium", "status": "completed"}),
                json!({"content": "fix the bug", "priority": "medium", "status": "in_progress"}),
                json!({"content": "run the tests", "priority": "high", "status": "pending"}),
            ]],
            "{payloads:?}"
        );
        // A refused TodoWrite, and a Bash call with the same input, make no plan.
        state.on_assistant(
            &session,
            &json!({"type": "assistant", "parent_tool_use_id": null, "message": {
                "id": "msg_3", "content": [{"type": "tool_use", "id": "toolu_r",
                "name": "TodoWrite", "input": todos}]}}),
        );
        state.on_user(&session, &tool_result("toolu_r", true));
        state.on_assistant(
            &session,
            &json!({"type": "assistant", "parent_tool_use_id": null, "message": {
                "id": "msg_2", "content": [{"type": "tool_use", "id": "toolu_b",
                "name": "Bash", "input": {"todos": []}}]}}),
        );
        state.on_user(&session, &tool_result("toolu_b", false));
        assert!(
            !drain(&mut events)
                .iter()
                .any(|p| matches!(p, Payload::Plan(_)))
        );
    }

    #[test]
    fn a_tool_results_images_are_kept_after_its_text() {
        let session = Session::create(None).unwrap();
        let mut events = session.tap(session.last_seq());
        let mut state = TurnState::default();
        state.on_user(
            &session,
            &json!({"type": "user", "parent_tool_use_id": null, "message": {"content": [
            {"type": "tool_result", "tool_use_id": "toolu_s", "is_error": false,
             "content": [
                {"type": "text", "text": "the screen"},
                {"type": "image", "source": {"type": "base64",
                    "media_type": "image/jpeg", "data": "/9j/AAAA"}},
                {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
             ]}]}}),
        );
        let payloads = drain(&mut events);
        let [Payload::ToolResult(result)] = payloads.as_slice() else {
            panic!("{payloads:?}");
        };
        assert_eq!(result.result.output.as_deref(), Some("the screen"));
        assert_eq!(
            result.update.content,
            [
                json!({"type": "content", "content": {"type": "text", "text": "the screen"}}),
                json!({"type": "content", "content": {"type": "image", "data": "/9j/AAAA",
                    "mimeType": "image/jpeg"}}),
            ]
        );
    }
}
