//! One turn's lifecycle, the same for every backend. [`Turn::begin`] moves the session to
//! `working` and announces the prompt (`turn_started`, then `user_text` for its text and one
//! per image). [`Turn::finish`] says why a failed turn failed (`error`), waits until the turn's
//! events are on disk, publishes `result` and moves the session back to `idle`;
//! [`Turn::crashed`] does the same for a turn whose agent process died, and closes the session
//! instead. What happens in between is the backend's.
//!
//! A `Turn` must be finished. One dropped unfinished (a panic, an early return, a future
//! dropped mid-turn) still publishes an error `result` and leaves the session idle: whoever
//! waits for the turn's result gets one.

use std::sync::Arc;

use super::Session;
use crate::event::{ContentBlock, Payload, ResultData, Status, StopReason, Usage, UserTextData};
use crate::model::Image;
use crate::policy::Decision;

/// The error of a turn dropped before it finished.
pub const UNFINISHED: &str = "the turn ended without a result: corral stopped running it";

/// How a turn ended, as its backend saw it.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnEnd {
    /// The model or agent was done, ran out of steps, or was cancelled.
    Stop(StopReason),
    /// The turn failed; [`Turn::finish`] says why in an `error` event.
    Error(String),
    /// The turn failed, and the backend has said why already in an `error` event carrying
    /// details only it has (the agent's own stop reason, a process's exit status and stderr).
    ErrorReported(String),
}

impl TurnEnd {
    pub fn stop_reason(&self) -> StopReason {
        match self {
            TurnEnd::Stop(reason) => *reason,
            TurnEnd::Error(_) | TurnEnd::ErrorReported(_) => StopReason::Error,
        }
    }

    pub fn error(&self) -> Option<&str> {
        match self {
            TurnEnd::Stop(_) => None,
            TurnEnd::Error(message) | TurnEnd::ErrorReported(message) => Some(message),
        }
    }
}

/// What a turn came to, for whoever ran it.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    pub stop_reason: StopReason,
    pub usage: Usage,
    pub error: Option<String>,
    /// The final assistant text of the turn.
    pub text: String,
}

impl TurnOutcome {
    /// A turn that could not begin: nothing was emitted for it.
    pub fn refused(error: impl Into<String>) -> TurnOutcome {
        TurnOutcome {
            stop_reason: StopReason::Error,
            usage: Usage::default(),
            error: Some(error.into()),
            text: String::new(),
        }
    }
}

/// Where the session goes once the turn's result is out.
enum After {
    Idle,
    /// The agent process is gone: the session takes no more turns.
    Dead,
}

/// A running turn of a session. Finish it with [`Turn::finish`] or [`Turn::crashed`].
#[must_use = "a turn must be finished: dropped, it reports an error result"]
pub struct Turn {
    session: Arc<Session>,
    /// The `result` is out: dropping the turn has nothing left to report.
    published: bool,
}

impl Turn {
    /// Begins the session's next turn and announces its prompt. `Err`: the session takes no
    /// turn now (it is not idle, or its log failed); the outcome says why.
    pub fn begin(
        session: &Arc<Session>,
        prompt: &str,
        images: &[Image],
    ) -> Result<Turn, TurnOutcome> {
        if let Err(e) = session.begin_turn() {
            return Err(TurnOutcome::refused(format!("cannot start a turn: {e}")));
        }
        session.emit(Payload::TurnStarted(Default::default()));
        session.emit(Payload::UserText(UserTextData {
            content: ContentBlock::text(prompt),
        }));
        for image in images {
            session.emit(Payload::UserText(UserTextData {
                content: ContentBlock::Image {
                    data: image.data_base64.clone(),
                    mime_type: image.mime_type.clone(),
                },
            }));
        }
        Ok(Turn {
            session: session.clone(),
            published: false,
        })
    }

    /// Ends the turn: the `error` of an [`TurnEnd::Error`], the log flushed, `result`, idle.
    pub async fn finish(self, end: TurnEnd, usage: Usage, text: String) -> TurnOutcome {
        self.end(end, usage, text, After::Idle).await
    }

    /// Ends a turn whose agent process died, and with it the session (`dead`). The backend
    /// has reported the death in an `error` with the exit status and stderr; `report` is the
    /// result's error.
    pub async fn crashed(self, report: String, usage: Usage, text: String) -> TurnOutcome {
        self.end(TurnEnd::ErrorReported(report), usage, text, After::Dead)
            .await
    }

    /// Ends a turn whose agent process died, leaving the session idle: the agent is started
    /// again (on its own session) by the next message. The backend has reported the death.
    pub async fn died(self, report: String, usage: Usage, text: String) -> TurnOutcome {
        self.end(TurnEnd::ErrorReported(report), usage, text, After::Idle)
            .await
    }

    async fn end(mut self, end: TurnEnd, usage: Usage, text: String, after: After) -> TurnOutcome {
        if let TurnEnd::Error(message) = &end {
            self.session
                .emit_error(message.clone(), serde_json::Value::Null);
        }
        let (mut stop_reason, mut error) = (end.stop_reason(), end.error().map(str::to_string));
        // A turn whose events are not all on disk did not end well, whatever the model did;
        // the session has said why already (an `error` that could not be logged).
        if let Err(failure) = self.session.flush_log().await {
            stop_reason = StopReason::Error;
            error = Some(failure.to_string());
        }
        self.publish(stop_reason, usage, error.clone());
        match after {
            After::Idle => self.go_idle(),
            After::Dead => self.session.close(),
        }
        TurnOutcome {
            stop_reason,
            usage,
            error,
            text,
        }
    }

    fn publish(&mut self, stop_reason: StopReason, usage: Usage, error: Option<String>) {
        self.published = true;
        self.session.emit(Payload::Result(ResultData {
            stop_reason,
            usage,
            error,
        }));
    }

    fn go_idle(&self) {
        if let Err(e) = self.session.transition(Status::Idle) {
            tracing::error!(error = %e, "ending a turn");
        }
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        if self.published {
            return;
        }
        tracing::error!(
            session = self.session.id(),
            "a turn was dropped before its result"
        );
        // Nobody is left to act on an answer; `idle` cannot be reached from waiting_approval.
        self.session
            .resolve_all_permissions(Decision::Cancel, UNFINISHED);
        self.session.emit_error(UNFINISHED, serde_json::Value::Null);
        self.publish(StopReason::Error, Usage::default(), Some(UNFINISHED.into()));
        if self.session.status() == Status::Working {
            self.go_idle();
        }
    }
}

#[cfg(test)]
mod tests;

/// Waits on a session's tapped events for the end of turn `turn`: its `result` and its final
/// assistant text (the last authoritative block). `None`: the events ended first.
pub async fn turn_end(
    events: &mut tokio::sync::mpsc::UnboundedReceiver<crate::event::SharedEvent>,
    turn: u32,
) -> Option<(ResultData, String)> {
    let mut text = String::new();
    while let Some(event) = events.recv().await {
        let envelope = &event.envelope;
        if envelope.turn != turn {
            continue;
        }
        match &envelope.payload {
            Payload::AssistantText(t) if !t.delta => {
                if let ContentBlock::Text { text: block } = &t.content {
                    text = block.clone();
                }
            }
            Payload::Result(r) => return Some((r.clone(), text)),
            _ => {}
        }
    }
    None
}
