//! claude's stdout lines within a turn, as corral's events: partial messages become the
//! `delta` chunks, finished blocks the authoritative copies, tool results are matched to their
//! calls by id, and the `result` line ends the turn.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use serde_json::{Value, json};

use super::launch;
use crate::event::{
    ContentBlock, Payload, StopReason, TextData, ToolCallInfo, ToolCallStatus, ToolInputDeltaData,
    ToolResultData, ToolUseData, Usage, UsageData,
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
            let outcome = if failed { Err(shown) } else { Ok(shown) };
            let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            session.emit(Payload::ToolResult(ToolResultData::finished(
                id,
                &tool,
                outcome,
                duration_ms,
                Vec::new(),
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
