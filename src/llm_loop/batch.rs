//! One reply's tool calls as a batch: validated, announced, put to the approver, run, and
//! their results joined to the history; and the verdict on a turn whose every call the
//! sandbox stopped.

use tokio_util::sync::CancellationToken;

use super::step::{self, StepOutput};
use super::{LlmLoop, execute, non_empty};
use crate::model::{Message, ToolCall};
use crate::policy::Approval;

impl LlmLoop {
    pub(super) async fn run_calls(
        &mut self,
        text: String,
        output: &StepOutput,
        raw_calls: Vec<step::RawCall>,
        cancel: &CancellationToken,
        malformed_streak: &mut u32,
    ) -> BatchEnd {
        let mut prepared = Vec::with_capacity(raw_calls.len());
        let mut assistant = Message::assistant(text);
        assistant.thinking = non_empty(&output.thinking);
        for raw in &raw_calls {
            let checked = execute::validate(&self.tools, raw).and_then(|valid| {
                self.check_offered(&valid.call.name)?;
                Ok(valid)
            });
            let arguments = match &checked {
                Ok(valid) => valid.call.arguments.clone(),
                Err(_) => execute::raw_arguments(raw),
            };
            execute::emit_authoritative_use(
                &self.session,
                &self.tools,
                raw,
                &arguments,
                &self.root,
            );
            assistant.tool_calls.push(ToolCall {
                id: raw.id.clone(),
                name: raw.name.clone(),
                arguments: if arguments.is_object() {
                    arguments
                } else {
                    serde_json::json!({})
                },
            });
            prepared.push(checked);
        }
        self.history.push(assistant);

        let mut cancelled = false;
        for (raw, checked) in raw_calls.iter().zip(prepared) {
            let stub = ToolCall {
                id: raw.id.clone(),
                name: raw.name.clone(),
                arguments: serde_json::json!({}),
            };
            let finished =
                if cancelled || cancel.is_cancelled() {
                    cancelled = true;
                    execute::reject(&self.session, &stub, "cancelled before it ran".into())
                } else {
                    match checked {
                        // The streak counts calls, in order: one well-formed call ends it,
                        // whether in the same reply or a later one.
                        Err(message) => {
                            *malformed_streak += 1;
                            execute::reject(&self.session, &stub, message)
                        }
                        Ok(valid) => {
                            *malformed_streak = 0;
                            // A desktop action is judged on where it lands: found first.
                            let target =
                                match execute::desktop_target(&valid, &self.tool_settings, cancel)
                                    .await
                                {
                                    Ok(target) => target,
                                    Err(message) => {
                                        let finished =
                                            execute::reject(&self.session, &stub, message);
                                        cancelled |= finished.cancelled;
                                        self.history.push(finished.message);
                                        continue;
                                    }
                                };
                            let call_target = target.as_ref().map(|t| &t.call);
                            let approval = self
                                .approver
                                .decide(valid.to_approve(call_target), cancel)
                                .await;
                            match approval {
                                Approval::Allow { by_person, .. } => {
                                    if valid.call.name == "delegate" {
                                        self.narrow_delegation();
                                    }
                                    execute::execute(
                                        &self.session,
                                        valid,
                                        &self.root,
                                        &self.tool_settings,
                                        self.config.tool_output_cap,
                                        cancel,
                                        execute::Approved {
                                            by_person,
                                            desktop_target: target,
                                        },
                                    )
                                    .await
                                }
                                Approval::Deny { message } => {
                                    execute::reject(&self.session, &stub, message)
                                }
                                Approval::Cancel => {
                                    cancelled = true;
                                    execute::reject(
                                        &self.session,
                                        &stub,
                                        "the user cancelled the turn".into(),
                                    )
                                }
                            }
                        }
                    }
                };
            cancelled |= finished.cancelled;
            if finished.executed {
                self.tally.executed += 1;
                if let Some(reason) = finished.blocked {
                    self.tally.blocked += 1;
                    self.tally.last_block = Some(reason);
                }
            }
            self.history.push(finished.message);
        }
        if cancelled {
            BatchEnd::Cancelled
        } else {
            BatchEnd::Continue
        }
    }

    /// A turn whose tool calls all ran into the sandbox did not do its work, whatever the model
    /// says at the end: it is reported as an error that says how to widen the policy.
    pub(super) fn all_blocked(&self) -> Option<String> {
        let tally = &self.tally;
        if tally.executed == 0 || tally.blocked < tally.executed {
            return None;
        }
        let last = tally.last_block.as_deref().unwrap_or_default();
        let last: String = last
            .lines()
            .last()
            .unwrap_or_default()
            .chars()
            .take(300)
            .collect();
        Some(format!(
            "the sandbox blocked every tool call of this turn ({} of {}); the last: {last}. \
             Tools may write only under the session root and $TMPDIR: widen the preset with \
             `writable = [\"…\"]`, allow the network with --network on, or run with \
             --sandbox off (git's own files and agent config stay out of reach in every \
             preset and sandbox mode)",
            tally.blocked, tally.executed
        ))
    }
}

/// How a batch of one reply's tool calls ended: the loop goes on, or the turn was cancelled.
pub(super) enum BatchEnd {
    Continue,
    Cancelled,
}
