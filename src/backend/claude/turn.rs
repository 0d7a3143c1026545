//! One turn: the user line goes in, claude's stdout lines become corral's events until its
//! `result`, a cancel, or the end of the process.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{ClaudeBackend, Line, Phase, launch};
use crate::backend::TurnOutcome;
use crate::backend::external::{Answer, ToolAsk};
use crate::event::{
    ContentBlock, Payload, ResultData, Status, StopReason, TextData, ToolCallInfo, ToolCallStatus,
    ToolInputDeltaData, ToolResultData, ToolResultRecord, ToolUpdate, ToolUseData, Usage,
    UsageData, UserTextData,
};
use crate::session::Session;

/// How long claude may take to end a turn after an interrupt before it is stopped.
const INTERRUPT_GRACE: Duration = Duration::from_secs(20);

/// What a turn has seen so far.
#[derive(Default)]
pub(super) struct TurnState {
    /// Blocks of the message being streamed, by index.
    blocks: HashMap<u64, Block>,
    /// Tool calls of the turn: claude's tool name, and when the authoritative call came.
    tools: HashMap<String, (String, Instant)>,
    /// Authoritative blocks already emitted (claude may repeat a message's blocks).
    emitted: HashSet<String>,
    /// The last authoritative text.
    text: String,
    /// Prompt tokens of the latest request.
    context_tokens: Option<u64>,
    /// An interrupt was sent; the deadline for claude's `result`.
    interrupted: Option<tokio::time::Instant>,
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

/// How a turn ended.
pub(super) enum End {
    Result {
        stop_reason: StopReason,
        usage: Usage,
        error: Option<String>,
        text: String,
    },
    /// The process died (or would not stop): the report.
    Died(String),
}

enum Next {
    Line(Line),
    Cancel,
    Stuck,
}

impl ClaudeBackend {
    pub(super) async fn turn(&mut self, prompt: &str, cancel: CancellationToken) -> TurnOutcome {
        let refused = |error: String| TurnOutcome {
            stop_reason: StopReason::Error,
            usage: Usage::default(),
            error: Some(error),
            text: String::new(),
        };
        {
            let mut phase = self.shared.phase();
            if *phase != Phase::Idle {
                return refused(format!("claude cannot start a turn: it is {phase:?}"));
            }
            *phase = Phase::Busy;
        }
        if let Err(e) = self.session().begin_turn() {
            self.set_idle();
            return refused(format!("cannot start a turn: {e}"));
        }
        self.approver.begin_turn();
        let session = self.session().clone();
        session.emit(Payload::TurnStarted(Default::default()));
        session.emit(Payload::UserText(UserTextData {
            content: ContentBlock::text(prompt),
        }));
        let end = self.turn_body(prompt, &cancel).await;
        let (stop_reason, usage, error, text) = match end {
            End::Result {
                stop_reason,
                usage,
                error,
                text,
            } => {
                if let Some(message) = &error {
                    session.emit_error(message.clone(), Value::Null);
                }
                (stop_reason, usage, error, text)
            }
            End::Died(report) => (
                StopReason::Error,
                Usage::default(),
                Some(report),
                String::new(),
            ),
        };
        session.emit(Payload::Result(ResultData {
            stop_reason,
            usage,
            error: error.clone(),
        }));
        if *self.shared.phase() == Phase::Dead {
            session.close();
        } else {
            if let Err(e) = session.transition(Status::Idle) {
                tracing::error!(error = %e, "ending a claude turn");
            }
            self.set_idle();
        }
        TurnOutcome {
            stop_reason,
            usage,
            error,
            text,
        }
    }

    fn set_idle(&self) {
        let mut phase = self.shared.phase();
        if *phase == Phase::Busy {
            *phase = Phase::Idle;
        }
    }

    async fn turn_body(&mut self, prompt: &str, cancel: &CancellationToken) -> End {
        // Lines left from an earlier turn (a late control response) mean nothing now.
        while let Ok(line) = self.lines.try_recv() {
            if matches!(line, Line::Eof) {
                return End::Died(self.shared.report_crash().await);
            }
        }
        let user = json!({
            "type": "user",
            "message": {"role": "user", "content": [{"type": "text", "text": prompt}]},
            "parent_tool_use_id": null,
            "session_id": self.external_id.clone().unwrap_or_default(),
        });
        if let Err(e) = self.write_line(&user).await {
            tracing::debug!(error = %e, "writing the prompt to claude");
            return End::Died(self.shared.report_crash().await);
        }
        let mut state = TurnState {
            cost_before: self.cost_so_far,
            ..TurnState::default()
        };
        loop {
            let next = tokio::select! {
                line = self.lines.recv() => Next::Line(line.unwrap_or(Line::Eof)),
                () = cancel.cancelled(), if state.interrupted.is_none() => Next::Cancel,
                () = sleep_until(state.interrupted) => Next::Stuck,
            };
            let value = match next {
                Next::Cancel => {
                    self.interrupt(&mut state).await;
                    continue;
                }
                Next::Stuck => {
                    self.shared
                        .process
                        .lock()
                        .await
                        .stop(self.stdin.take())
                        .await;
                    let report = self.shared.report_crash().await;
                    return End::Died(format!(
                        "claude did not end the turn within {} s of the interrupt; stopped it. \
                         {report}",
                        INTERRUPT_GRACE.as_secs()
                    ));
                }
                Next::Line(Line::Eof) => return End::Died(self.shared.report_crash().await),
                Next::Line(Line::Malformed(text)) => {
                    let shown: String = text.chars().take(500).collect();
                    self.session().emit_error(
                        format!("claude wrote a line that is not a JSON object: {shown}"),
                        Value::Null,
                    );
                    continue;
                }
                Next::Line(Line::Json(value)) => value,
            };
            let session = self.session().clone();
            match value["type"].as_str().unwrap_or_default() {
                "system" if value["subtype"] == "init" => self.record_session_id(&value),
                "stream_event" => state.on_stream_event(&session, &value),
                "assistant" => state.on_assistant(&session, &value),
                "user" => state.on_user(&session, &value),
                "control_request" => self.on_control_request(&value, cancel, &mut state).await,
                "result" => {
                    self.record_session_id(&value);
                    let end = state.on_result(&session, &value);
                    self.cost_so_far = state.cost_total.unwrap_or(self.cost_so_far);
                    return end;
                }
                // control_response to an interrupt, status, rate limits, hooks, and
                // whatever newer versions add.
                _ => {}
            }
        }
    }

    async fn interrupt(&mut self, state: &mut TurnState) {
        state.interrupted = Some(tokio::time::Instant::now() + INTERRUPT_GRACE);
        if let Err(e) = self.control(json!({"subtype": "interrupt"})).await {
            // The process is going away: its end of stdout finishes the turn.
            tracing::debug!(error = %e, "sending claude an interrupt");
        }
    }

    async fn on_control_request(
        &mut self,
        value: &Value,
        cancel: &CancellationToken,
        state: &mut TurnState,
    ) {
        let id = value["request_id"].as_str().unwrap_or_default().to_string();
        let request = &value["request"];
        let subtype = request["subtype"].as_str().unwrap_or_default();
        let response = if subtype == "can_use_tool" {
            let answer = if state.interrupted.is_some() {
                Answer::Deny {
                    message: "the turn was cancelled".into(),
                }
            } else {
                let ask = tool_ask(request, &id);
                self.approver.decide(&ask, cancel).await
            };
            let input = request.get("input").cloned().unwrap_or_else(|| json!({}));
            let behavior = match &answer {
                Answer::Allow { .. } => json!({"behavior": "allow", "updatedInput": input}),
                Answer::Deny { message } => json!({"behavior": "deny", "message": message}),
                Answer::Cancel => json!({"behavior": "deny",
                    "message": "the user cancelled the turn", "interrupt": true}),
            };
            json!({"subtype": "success", "request_id": id, "response": behavior})
        } else {
            json!({"subtype": "error", "request_id": id,
                "error": format!("corral does not handle {subtype:?} requests")})
        };
        let line = json!({"type": "control_response", "response": response});
        if let Err(e) = self.write_line(&line).await {
            tracing::debug!(error = %e, "answering claude's control request");
        }
        if response["response"]["interrupt"] == true && state.interrupted.is_none() {
            self.interrupt(state).await;
        }
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// A `can_use_tool` request in corral's terms.
pub(super) fn tool_ask(request: &Value, request_id: &str) -> ToolAsk {
    let name = request["tool_name"].as_str().unwrap_or("unknown");
    let input = request.get("input").cloned().unwrap_or_else(|| json!({}));
    let mapped = launch::map_tool(name, &input);
    ToolAsk {
        tool_call_id: request["tool_use_id"]
            .as_str()
            .unwrap_or(request_id)
            .to_string(),
        agent_tool: name.to_string(),
        corral_tool: mapped.corral_tool,
        args: mapped.args,
        title: mapped.title,
        kind: mapped.kind,
        raw_input: input,
    }
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
    pub(super) fn on_stream_event(&mut self, session: &Session, value: &Value) {
        if is_subagent(value) {
            return;
        }
        let event = &value["event"];
        let index = event["index"].as_u64().unwrap_or_default();
        match event["type"].as_str().unwrap_or_default() {
            "message_start" => self.blocks.clear(),
            "content_block_start" => {
                let block = &event["content_block"];
                let kind = match block["type"].as_str().unwrap_or_default() {
                    "text" => Block::Text,
                    "thinking" => Block::Thinking,
                    "tool_use" | "server_tool_use" => {
                        let id = block["id"].as_str().unwrap_or_default().to_string();
                        let name = block["name"].as_str().unwrap_or_default();
                        session.emit(Payload::ToolUse(ToolUseData {
                            call: tool_call(&id, name, None, ToolCallStatus::Pending),
                        }));
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
                    session.emit(Payload::ToolUse(ToolUseData {
                        call: tool_call(id, name, Some(&input), ToolCallStatus::InProgress),
                    }));
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
            let (status, output, error) = if failed {
                (ToolCallStatus::Failed, None, Some(shown.clone()))
            } else {
                (ToolCallStatus::Completed, Some(shown.clone()), None)
            };
            session.emit(Payload::ToolResult(ToolResultData {
                update: ToolUpdate {
                    tool_call_id: id.to_string(),
                    status,
                    content: vec![
                        json!({"type": "content", "content": {"type": "text", "text": shown}}),
                    ],
                },
                result: ToolResultRecord {
                    tool_call_id: id.to_string(),
                    tool,
                    success: !failed,
                    output,
                    error,
                    duration_ms: started.elapsed().as_millis() as u64,
                },
            }));
        }
    }

    /// The turn's end: usage (as a `usage` event too) and the stop reason. `is_error` wins
    /// over a `success` subtype: claude reports API failures that way.
    pub(super) fn on_result(&mut self, session: &Session, value: &Value) -> End {
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
        let (stop_reason, error) = if self.interrupted.is_some() {
            (StopReason::Cancelled, None)
        } else if subtype == "error_max_turns" {
            (StopReason::MaxSteps, None)
        } else if is_error || subtype.starts_with("error") {
            let errors: Vec<&str> = value["errors"]
                .as_array()
                .map(|e| e.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let message = if !result_text.is_empty() {
                result_text.clone()
            } else if !errors.is_empty() {
                errors.join("; ")
            } else {
                format!("claude ended the turn with {subtype:?}")
            };
            (StopReason::Error, Some(message))
        } else {
            (StopReason::EndTurn, None)
        };
        let text = if stop_reason == StopReason::EndTurn && !result_text.is_empty() {
            result_text
        } else {
            std::mem::take(&mut self.text)
        };
        End::Result {
            stop_reason,
            usage,
            error,
            text,
        }
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
