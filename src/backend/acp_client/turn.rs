//! One turn: `session/prompt`, the agent's `session/update`s as corral events, and its
//! answer as the `result`.

use std::pin::Pin;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::AcpBackend;
use super::rpc::RpcError;
use crate::event::{ContentBlock, Payload, PlanData, StopReason, TextData, Usage, UsageData};
use crate::session::{Turn, TurnEnd, TurnOutcome};

/// How long an agent has to answer the prompt after `session/cancel` before corral stops
/// waiting and reports the turn cancelled anyway.
const CANCEL_GRACE: Duration = Duration::from_secs(30);

/// JSON-RPC "request cancelled".
const REQUEST_CANCELLED: i64 = -32800;

/// Text and thought of the current message, sent as deltas and then as one block.
#[derive(Default)]
struct Pending {
    text: String,
    thought: String,
    /// The turn's last complete message: its final text.
    last_text: String,
    usage: Usage,
}

/// How waiting for the answer to `session/prompt` ended.
enum PromptReply {
    Answered(Result<Value, RpcError>),
    /// The pipe closed: the agent is gone.
    Crashed,
    /// `session/cancel` went unanswered for [`CANCEL_GRACE`].
    CancelIgnored,
}

impl AcpBackend {
    pub(super) async fn turn(&mut self, prompt: &str, cancel: CancellationToken) -> TurnOutcome {
        if self.dead {
            return TurnOutcome::refused("the ACP agent is no longer running");
        }
        // The manager starts a crashed agent again before its turn, counting the crashes; a
        // caller that did not (`corral run`, where the person decides) still gets one.
        if !self.crashed && self.can_load && self.process.try_status().is_some() {
            let report = self.process.crash_report().await;
            self.note_crash(format!("the ACP agent stopped between turns: {report}"));
        }
        if let Err(e) = self.start_again().await {
            return TurnOutcome::refused(format!(
                "{} could not be started again: {e}",
                self.agent_name
            ));
        }
        let turn = match Turn::begin(&self.session, prompt, &[]) {
            Ok(turn) => turn,
            Err(refused) => return refused,
        };
        if self.process.try_status().is_some() {
            // It died between turns: the turn ends as a crash.
            return self.crashed(turn, Pending::default()).await;
        }
        let turn_cancel = cancel.child_token();
        self.shared.begin_turn(turn_cancel.clone());
        let mut blocks = Vec::new();
        if let Some(system) = self.system.take() {
            // An ACP agent has no system prompt: the instructions come first, once, as the
            // first block of the first prompt.
            blocks.push(json!({"type": "text", "text": format!(
                "Instructions for this session (from the person who started it):\n{system}")}));
        }
        blocks.push(json!({"type": "text", "text": prompt}));
        let mut reply = self.shared.rpc.start_request(
            "session/prompt",
            json!({"sessionId": self.session_id, "prompt": blocks}),
        );
        let mut pending = Pending::default();
        let mut grace: Option<Pin<Box<tokio::time::Sleep>>> = None;
        let replied = loop {
            tokio::select! {
                biased;
                update = self.updates.recv() => match update {
                    Some(update) => self.apply(&update, &mut pending),
                    // The reader settles every request before it lets go of the updates, so
                    // an answer sent just before the agent exited is already here.
                    None => break match reply.try_recv() {
                        Ok(Err(RpcError::Closed)) | Err(_) => PromptReply::Crashed,
                        Ok(answer) => PromptReply::Answered(answer),
                    },
                },
                answer = &mut reply => {
                    // Updates sent before the answer are already queued: take them first.
                    while let Ok(update) = self.updates.try_recv() {
                        self.apply(&update, &mut pending);
                    }
                    break match answer {
                        Ok(Err(RpcError::Closed)) | Err(_) => PromptReply::Crashed,
                        Ok(answer) => PromptReply::Answered(answer),
                    };
                }
                () = turn_cancel.cancelled(), if grace.is_none() => {
                    self.shared.rpc.notify("session/cancel", json!({"sessionId": self.session_id}));
                    grace = Some(Box::pin(tokio::time::sleep(CANCEL_GRACE)));
                }
                () = async { if let Some(g) = grace.as_mut() { g.await } }, if grace.is_some() => {
                    break PromptReply::CancelIgnored;
                }
            }
        };
        self.flush(&mut pending);
        let cancelled = turn_cancel.is_cancelled();
        let end = match replied {
            PromptReply::Crashed => return self.crashed(turn, pending).await,
            PromptReply::CancelIgnored => {
                tracing::warn!("the ACP agent did not answer session/cancel");
                TurnEnd::Stop(StopReason::Cancelled)
            }
            PromptReply::Answered(Err(RpcError::Remote { code, .. }))
                if cancelled || code == REQUEST_CANCELLED =>
            {
                TurnEnd::Stop(StopReason::Cancelled)
            }
            PromptReply::Answered(Err(e)) => {
                TurnEnd::Error(format!("the agent failed the turn: {e}"))
            }
            PromptReply::Answered(Ok(answer)) => {
                add_usage(&answer["usage"], &mut pending.usage);
                self.stop_reason(&answer, cancelled)
            }
        };
        if pending.usage != Usage::default() {
            self.session.emit(Payload::Usage(UsageData {
                usage: pending.usage,
                context_tokens: None,
                context_window: None,
            }));
        }
        turn.finish(end, pending.usage, pending.last_text).await
    }

    fn stop_reason(&self, answer: &Value, cancelled: bool) -> TurnEnd {
        match answer["stopReason"].as_str().unwrap_or("end_turn") {
            "cancelled" => TurnEnd::Stop(StopReason::Cancelled),
            _ if cancelled => TurnEnd::Stop(StopReason::Cancelled),
            "end_turn" => TurnEnd::Stop(StopReason::EndTurn),
            "max_turn_requests" => TurnEnd::Stop(StopReason::MaxSteps),
            "max_tokens" => {
                // The text so far stands; the cut is worth saying, not failing the turn for.
                self.session.emit_error(
                    "the agent's reply was cut at its output token limit (max_tokens)",
                    json!({"stopReason": "max_tokens"}),
                );
                TurnEnd::Stop(StopReason::EndTurn)
            }
            "refusal" => {
                let message = "the agent's model refused to continue (refusal)".to_owned();
                self.session
                    .emit_error(message.clone(), json!({"stopReason": "refusal"}));
                TurnEnd::ErrorReported(message)
            }
            other => {
                tracing::warn!(stop_reason = other, "an unknown ACP stopReason");
                TurnEnd::Stop(StopReason::EndTurn)
            }
        }
    }

    /// The agent died mid-turn: say how and end the turn. One that can load its session is
    /// started again before the next turn; another closes the session.
    async fn crashed(&mut self, turn: Turn, pending: Pending) -> TurnOutcome {
        // A question still open for a person is moot: withdraw it before the session dies.
        self.shared.cancel_turn();
        let report = self.process.crash_report().await;
        let message = format!("the ACP agent stopped mid-turn: {report}");
        if self.can_load {
            self.note_crash(message.clone());
            return turn.died(message, pending.usage, pending.last_text).await;
        }
        self.session
            .emit_error(message.clone(), json!({"agent": self.agent_name}));
        self.dead = true;
        turn.crashed(message, pending.usage, pending.last_text)
            .await
    }

    fn apply(&mut self, update: &Value, pending: &mut Pending) {
        let session = &self.session;
        match update["sessionUpdate"].as_str().unwrap_or_default() {
            kind @ ("agent_message_chunk" | "agent_thought_chunk") => {
                let Some(text) = update["content"]["text"].as_str() else {
                    return;
                };
                let content = ContentBlock::text(text);
                if kind == "agent_message_chunk" {
                    if !pending.thought.is_empty() {
                        flush_thought(session, pending);
                    }
                    pending.text.push_str(text);
                    session.emit(Payload::AssistantText(TextData {
                        delta: true,
                        content,
                    }));
                } else {
                    pending.thought.push_str(text);
                    session.emit(Payload::Thought(TextData {
                        delta: true,
                        content,
                    }));
                }
            }
            "tool_call" | "tool_call_update" => {
                self.flush(pending);
                let Some(id) = update["toolCallId"].as_str() else {
                    return;
                };
                match update["status"].as_str() {
                    Some("completed") => self.shared.calls.finish(id, true, None),
                    Some("failed") => self.shared.calls.finish(id, false, None),
                    _ => self.shared.calls.announce(id),
                }
            }
            "plan" => {
                let entries = update["entries"].as_array().cloned().unwrap_or_default();
                session.emit(Payload::Plan(PlanData::new(entries)));
            }
            "usage_update" => {
                if let Some(cost) = update["cost"]["amount"].as_f64()
                    && update["cost"]["currency"].as_str().unwrap_or("USD") == "USD"
                {
                    // The agent's cost is cumulative for its session.
                    pending.usage.cost_usd = cost;
                }
                session.emit(Payload::Usage(UsageData {
                    usage: pending.usage,
                    context_tokens: update["used"].as_u64(),
                    context_window: update["size"].as_u64(),
                }));
            }
            other => tracing::trace!(kind = other, "an ACP session update corral does not show"),
        }
    }

    /// Ends the current message: its authoritative text and thought blocks.
    fn flush(&self, pending: &mut Pending) {
        flush_thought(&self.session, pending);
        if !pending.text.is_empty() {
            let text = std::mem::take(&mut pending.text);
            self.session.emit(Payload::AssistantText(TextData {
                delta: false,
                content: ContentBlock::text(text.clone()),
            }));
            pending.last_text = text;
        }
    }
}

fn flush_thought(session: &crate::session::Session, pending: &mut Pending) {
    if !pending.thought.is_empty() {
        let thought = std::mem::take(&mut pending.thought);
        session.emit(Payload::Thought(TextData {
            delta: false,
            content: ContentBlock::text(thought),
        }));
    }
}

/// The prompt answer's `usage` (unstable in ACP; claude-agent-acp and opencode send it).
fn add_usage(usage: &Value, total: &mut Usage) {
    let count = |key: &str| usage[key].as_u64().unwrap_or(0);
    total.add(&Usage {
        input_tokens: count("inputTokens"),
        output_tokens: count("outputTokens"),
        cache_read_tokens: count("cachedReadTokens"),
        cache_creation_tokens: count("cachedWriteTokens"),
        cost_usd: 0.0,
    });
}
