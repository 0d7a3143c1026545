//! A session: its identity, status machine, event stream and event log.
//!
//! Every envelope goes through [`Session::emit`], which stamps `seq` and `ts`, serializes once,
//! and hands the same `Arc` to the replay ring, live subscribers and the log writer. The lock
//! makes seq order, ring order and log order one order.

mod approvals;
mod bus;
pub mod ids;
mod log;
pub mod manager;
mod meta;
pub mod open;
mod status;

pub use approvals::AnswerError;
pub use bus::Subscription;
pub use log::{log_path, read_log};
pub use meta::{SessionMeta, WorktreeMeta};
pub use status::{IllegalTransition, Snapshot, check_transition};

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::event::{
    Envelope, ErrorData, Event, Payload, SharedEvent, Status, StatusData, Timestamp,
};
use approvals::Approvals;
use bus::EventBus;
use log::LogWriter;

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("cannot write the event log {path}: {source}")]
    Log {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no session {0} in {1}")]
    NotFound(String, PathBuf),
    #[error("session id {0:?} is not valid: use letters, digits, '-' and '_' only")]
    BadId(String),
    #[error(transparent)]
    Transition(#[from] IllegalTransition),
}

struct State {
    seq: u64,
    turn: u32,
    /// The last turn whose `result` went out: a turn is over the moment its result is
    /// published, before its task has wound down.
    finished_turn: u32,
    status: Status,
    bus: EventBus,
}

pub struct Session {
    id: Arc<str>,
    state: Mutex<State>,
    log: Mutex<Option<LogWriter>>,
    log_path: Option<PathBuf>,
    approvals: Approvals,
}

impl Session {
    /// A new session writing its log under `log_dir` (none: in memory only).
    pub fn create(log_dir: Option<&Path>) -> Result<Arc<Session>, SessionError> {
        let id = loop {
            let candidate = ids::short_id();
            let taken = log_dir.is_some_and(|dir| log_path(dir, &candidate).exists());
            if !taken {
                break candidate;
            }
        };
        Self::open(id, log_dir, 0, 0)
    }

    /// A session with a caller-chosen id. If a log with that id exists (a dead session's slot
    /// reused), seq and turn continue from it.
    pub fn create_with_id(id: &str, log_dir: Option<&Path>) -> Result<Arc<Session>, SessionError> {
        validate_id(id)?;
        match log_dir {
            Some(dir) if log_path(dir, id).exists() => Self::resume(id, dir).map(|(s, _)| s),
            _ => Self::open(id.to_string(), log_dir, 0, 0),
        }
    }

    /// Continue a session from its event log: seq and turn pick up where it stopped.
    pub fn resume(id: &str, log_dir: &Path) -> Result<(Arc<Session>, Vec<Envelope>), SessionError> {
        validate_id(id)?;
        let path = log_path(log_dir, id);
        if !path.exists() {
            return Err(SessionError::NotFound(
                id.to_string(),
                log_dir.to_path_buf(),
            ));
        }
        let history = read_log(&path).map_err(|source| SessionError::Log {
            path: path.clone(),
            source,
        })?;
        let seq = history.iter().map(|e| e.seq).max().unwrap_or(0);
        let turn = history.iter().map(|e| e.turn).max().unwrap_or(0);
        let session = Self::open(id.to_string(), Some(log_dir), seq, turn)?;
        Ok((session, history))
    }

    fn open(
        id: String,
        log_dir: Option<&Path>,
        seq: u64,
        turn: u32,
    ) -> Result<Arc<Session>, SessionError> {
        validate_id(&id)?;
        let (writer, log_path) = match log_dir {
            Some(dir) => {
                let path = log_path(dir, &id);
                let writer = LogWriter::open(path.clone()).map_err(|source| SessionError::Log {
                    path: path.clone(),
                    source,
                })?;
                (Some(writer), Some(path))
            }
            None => (None, None),
        };
        let session = Arc::new(Session {
            id: Arc::from(id),
            state: Mutex::new(State {
                seq,
                turn,
                finished_turn: turn,
                status: Status::Starting,
                bus: EventBus::default(),
            }),
            log: Mutex::new(writer),
            log_path,
            approvals: Approvals::default(),
        });
        session.emit(Payload::Status(StatusData {
            status: Status::Starting,
        }));
        Ok(session)
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn log_path(&self) -> Option<&Path> {
        self.log_path.as_deref()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A poisoned lock means a panic while emitting; the state itself is still consistent
        // (seq is bumped before anything can panic), so keep going.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn status(&self) -> Status {
        self.state().status
    }

    pub fn turn(&self) -> u32 {
        self.state().turn
    }

    /// Status and turn under one lock.
    pub fn snapshot(&self) -> Snapshot {
        let state = self.state();
        Snapshot {
            status: state.status,
            turn: state.turn,
            finished_turn: state.finished_turn,
        }
    }

    /// The last turn whose `result` has been published.
    pub fn finished_turn(&self) -> u32 {
        self.state().finished_turn
    }

    /// A turn has begun and its `result` has not been published yet.
    pub fn turn_in_progress(&self) -> bool {
        let state = self.state();
        state.finished_turn != state.turn
    }

    pub fn last_seq(&self) -> u64 {
        self.state().seq
    }

    /// Stamp, serialize once, publish, and queue for the log.
    pub fn emit(&self, payload: Payload) -> SharedEvent {
        let mut state = self.state();
        Self::emit_locked(&self.id, &mut state, &self.log, payload)
    }

    fn emit_locked(
        id: &Arc<str>,
        state: &mut State,
        log: &Mutex<Option<LogWriter>>,
        payload: Payload,
    ) -> SharedEvent {
        state.seq += 1;
        if matches!(payload, Payload::Result(_)) {
            state.finished_turn = state.turn;
        }
        let envelope = Envelope {
            seq: state.seq,
            ts: Timestamp::now(),
            agent: id.clone(),
            turn: state.turn,
            payload,
        };
        let json = match serde_json::to_string(&envelope) {
            Ok(json) => json.into_boxed_str(),
            Err(e) => {
                // Payloads are plain data; this cannot happen short of a serde bug.
                tracing::error!(error = %e, "serializing an envelope");
                String::from("{}").into_boxed_str()
            }
        };
        let event = Arc::new(Event { envelope, json });
        if !event.envelope.payload.is_liveness_only()
            && let Some(writer) = log.lock().unwrap_or_else(|p| p.into_inner()).as_ref()
        {
            writer.append(event.clone());
        }
        state.bus.publish(event.clone());
        event
    }

    /// Move the status machine and announce it; illegal moves are refused.
    pub fn transition(&self, to: Status) -> Result<(), IllegalTransition> {
        let mut state = self.state();
        check_transition(state.status, to)?;
        state.status = to;
        Self::emit_locked(
            &self.id,
            &mut state,
            &self.log,
            Payload::Status(StatusData { status: to }),
        );
        Ok(())
    }

    /// Starts the next turn: bumps the turn counter and moves idle → working.
    pub fn begin_turn(&self) -> Result<u32, IllegalTransition> {
        let mut state = self.state();
        check_transition(state.status, Status::Working)?;
        state.turn += 1;
        state.status = Status::Working;
        Self::emit_locked(
            &self.id,
            &mut state,
            &self.log,
            Payload::Status(StatusData {
                status: Status::Working,
            }),
        );
        Ok(state.turn)
    }

    pub fn subscribe(&self, after_seq: Option<u64>) -> Subscription {
        self.state().bus.subscribe(after_seq)
    }

    /// A lossless, unbounded receiver for in-process consumers: buffered envelopes with
    /// `seq > after`, then every new one.
    pub fn tap(&self, after: u64) -> tokio::sync::mpsc::UnboundedReceiver<SharedEvent> {
        self.state().bus.tap(after)
    }

    pub fn emit_error(&self, message: impl Into<String>, data: serde_json::Value) {
        self.emit(Payload::Error(ErrorData {
            message: message.into(),
            data,
        }));
    }

    /// Opens a permission request: the session moves to `waiting_approval` and a `permission`
    /// envelope carrying `request` plus a fresh `requestId` goes out. The receiver yields the
    /// answer given through [`Session::answer`].
    pub fn request_permission(
        &self,
        mut request: serde_json::Value,
    ) -> Result<
        (
            String,
            tokio::sync::oneshot::Receiver<crate::policy::Decision>,
        ),
        IllegalTransition,
    > {
        let id = ids::request_id();
        request["requestId"] = serde_json::Value::String(id.clone());
        self.transition(Status::WaitingApproval)?;
        let receiver = self.approvals.open(id.clone(), request.clone());
        self.emit(Payload::Permission(request));
        Ok((id, receiver))
    }

    /// Answers an open permission request.
    pub fn answer(
        &self,
        request_id: &str,
        decision: crate::policy::Decision,
    ) -> Result<(), AnswerError> {
        self.approvals.answer(request_id, decision)
    }

    /// Closes a request (answered, or given up on): announces the outcome and moves the
    /// session back to `working`.
    pub fn resolve_permission(&self, request_id: &str, decision: &str, note: Option<String>) {
        self.approvals.withdraw(request_id);
        let mut data = serde_json::json!({
            "requestId": request_id, "resolved": true, "decision": decision});
        if let Some(note) = note {
            data["note"] = serde_json::Value::String(note);
        }
        self.emit(Payload::Permission(data));
        if let Err(e) = self.transition(Status::Working) {
            tracing::error!(error = %e, "leaving waiting_approval");
        }
    }

    /// The permission requests waiting for an answer.
    pub fn pending_permissions(&self) -> Vec<serde_json::Value> {
        self.approvals.open_requests()
    }

    /// Ends the session: status dead, log flushed and closed. Safe to call twice.
    pub fn close(&self) {
        if self.status() != Status::Dead
            && let Err(e) = self.transition(Status::Dead)
        {
            tracing::error!(error = %e, "closing session");
        }
        if let Some(mut writer) = self.log.lock().unwrap_or_else(|p| p.into_inner()).take()
            && let Err(e) = writer.close()
        {
            tracing::error!(path = %writer.path().display(), error = %e, "flushing the event log");
        }
    }
}

/// Session ids become file names, worktree directories and branch names: nothing but
/// `[A-Za-z0-9_-]`, at most 64 characters.
pub fn is_valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn validate_id(id: &str) -> Result<(), SessionError> {
    if is_valid_id(id) {
        Ok(())
    } else {
        Err(SessionError::BadId(id.to_string()))
    }
}

#[cfg(test)]
mod tests;
