//! A session: its identity, status machine, event stream and event log, and the lifecycle of
//! one turn ([`Turn`], in `turn`).
//!
//! Every envelope goes through [`Session::emit`], which stamps `seq` and `ts`, serializes once,
//! and hands the same `Arc` to the replay ring, live subscribers and the log writer. The lock
//! makes seq order, ring order and log order one order.
//!
//! A session with a log is run by one process at a time (see `lock`). When its log cannot be
//! written (a full disk, the file size limit, an I/O error) the session stops: an `error`
//! envelope goes to every live subscriber (it cannot be logged, and says so), the running
//! turn is cancelled through [`Session::halted`], no turn starts again, and whoever runs it
//! closes it (status `dead`). Nothing is then queued for the log: what a subscriber saw after
//! the failure is not on disk, and a later resume continues from the last logged seq.

mod approvals;
mod bus;
pub mod catalog;
mod discard;
pub mod ids;
mod lock;
mod log;
mod meta;
mod mirror;
mod status;
mod tail;
mod turn;

pub use approvals::AnswerError;
pub use bus::Subscription;
pub use lock::{LockError, is_held};
pub use log::{LogFailure, log_path, read_log};
pub use meta::{SessionMeta, WorktreeMeta};
pub use status::{IllegalTransition, Snapshot, check_transition};
pub use tail::LogTail;
pub use turn::{Turn, TurnEnd, TurnOutcome, turn_end};

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::event::{
    Envelope, ErrorData, Event, Payload, PermissionData, PermissionRequest, PermissionResolution,
    SharedEvent, Status, StatusData, Timestamp,
};
use crate::policy::{Answer, Decision, PermissionDesk};
use approvals::Approvals;
use bus::EventBus;
use lock::SessionLock;
use log::LogWriter;

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("cannot write the event log {path}: {source}")]
    Log {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Another process runs the session.
    #[error(transparent)]
    InUse(#[from] LockError),
    #[error("no session {0} in {1}")]
    NotFound(String, PathBuf),
    #[error("session id {0:?} is not valid: use letters, digits, '-' and '_' only")]
    BadId(String),
    #[error(transparent)]
    Transition(#[from] IllegalTransition),
}

/// Why a turn cannot begin.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TurnRefused {
    #[error(transparent)]
    Transition(#[from] IllegalTransition),
    #[error("{0}; the session takes no more turns")]
    LogFailed(LogFailure),
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
    /// Set once, at the log's first failed write.
    log_failure: OnceLock<LogFailure>,
    /// Cancelled when the session must stop (its log failed): running turns end.
    halt: CancellationToken,
    /// Held while this process runs the session; released at close.
    lock: Mutex<Option<SessionLock>>,
    approvals: Approvals,
    /// Set once a model (or an external agent) has said anything: text, a thought, a tool
    /// call, usage. A session where nothing ever did was never a conversation.
    heard_model: AtomicBool,
    /// A new session a person started for one run: removed at close if it was never heard
    /// from (see [`Session::discard_if_unheard`]).
    discard_unheard: AtomicBool,
    /// Its files were removed at close.
    discarded: AtomicBool,
    /// Created here rather than continued from a log.
    fresh: bool,
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
        let lock = log_dir
            .map(|dir| SessionLock::acquire(dir, &id))
            .transpose()?;
        Self::open(id, log_dir, 0, 0, lock, true)
    }

    /// A session with a caller-chosen id. If a log with that id exists (a dead session's slot
    /// reused), seq and turn continue from it.
    pub fn create_with_id(id: &str, log_dir: Option<&Path>) -> Result<Arc<Session>, SessionError> {
        validate_id(id)?;
        match log_dir {
            Some(dir) if log_path(dir, id).exists() => Self::resume(id, dir).map(|(s, _)| s),
            Some(dir) => {
                let lock = SessionLock::acquire(dir, id)?;
                Self::open(id.to_string(), log_dir, 0, 0, Some(lock), true)
            }
            None => Self::open(id.to_string(), None, 0, 0, None, true),
        }
    }

    /// Continue a session from its event log: seq and turn pick up where it stopped. Refused
    /// while another process runs it.
    pub fn resume(id: &str, log_dir: &Path) -> Result<(Arc<Session>, Vec<Envelope>), SessionError> {
        validate_id(id)?;
        let path = log_path(log_dir, id);
        if !path.exists() {
            return Err(SessionError::NotFound(
                id.to_string(),
                log_dir.to_path_buf(),
            ));
        }
        // Before reading: the history must be the one this process goes on from.
        let lock = SessionLock::acquire(log_dir, id)?;
        let history = read_log(&path).map_err(|source| SessionError::Log {
            path: path.clone(),
            source,
        })?;
        let seq = history.iter().map(|e| e.seq).max().unwrap_or(0);
        let turn = history.iter().map(|e| e.turn).max().unwrap_or(0);
        let session = Self::open(id.to_string(), Some(log_dir), seq, turn, Some(lock), true)?;
        Ok((session, history))
    }

    fn open(
        id: String,
        log_dir: Option<&Path>,
        seq: u64,
        turn: u32,
        lock: Option<SessionLock>,
        announce: bool,
    ) -> Result<Arc<Session>, SessionError> {
        validate_id(&id)?;
        // The writer reports a failure to the session it is part of, which exists only later.
        let owner: Arc<OnceLock<Weak<Session>>> = Arc::default();
        let (writer, log_path) = match log_dir {
            Some(dir) => {
                let path = log_path(dir, &id);
                let owner = owner.clone();
                let on_failure = Box::new(move |failure: &log::LogFailure| {
                    if let Some(session) = owner.get().and_then(Weak::upgrade) {
                        session.log_failed(failure.clone());
                    }
                });
                let writer = LogWriter::open(path.clone(), on_failure).map_err(|source| {
                    SessionError::Log {
                        path: path.clone(),
                        source,
                    }
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
            log_failure: OnceLock::new(),
            halt: CancellationToken::new(),
            lock: Mutex::new(lock),
            approvals: Approvals::default(),
            heard_model: AtomicBool::new(false),
            discard_unheard: AtomicBool::new(false),
            discarded: AtomicBool::new(false),
            fresh: seq == 0,
        });
        let _ = owner.set(Arc::downgrade(&session));
        if announce {
            session.emit(Payload::Status(StatusData {
                status: Status::Starting,
            }));
        }
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

    /// Why the event log stopped, if it did: the session then takes no more turns.
    pub fn log_failure(&self) -> Option<&LogFailure> {
        self.log_failure.get()
    }

    /// Cancelled when the session must stop (its log failed). A turn's token should be a
    /// child of it.
    pub fn halted(&self) -> &CancellationToken {
        &self.halt
    }

    /// Waits until everything emitted so far is written to the log. `Err`: the log failed.
    pub async fn flush_log(&self) -> Result<(), LogFailure> {
        let done = self
            .log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(LogWriter::flush);
        if let Some(done) = done {
            // Dropped unanswered only when the writer stopped, which the failure explains.
            let _ = done.await;
        }
        match self.log_failure() {
            Some(failure) => Err(failure.clone()),
            None => Ok(()),
        }
    }

    /// The writer's report of its first failed write.
    fn log_failed(&self, failure: LogFailure) {
        if self.log_failure.set(failure.clone()).is_err() {
            return;
        }
        // Recorded first, so this envelope is not queued for the log that just failed.
        self.emit(Payload::Error(ErrorData {
            message: format!(
                "{failure}. This error, and everything after it, is not in the event log; \
                 the session takes no more turns (resume it once the log can be written)"
            ),
            data: serde_json::json!({
                "eventLog": failure.path,
                "logged": false,
                "keptBytes": failure.kept_bytes,
            }),
        }));
        self.halt.cancel();
    }

    /// Stamp, serialize once, publish, and queue for the log.
    pub fn emit(&self, payload: Payload) -> SharedEvent {
        let mut state = self.state();
        self.emit_locked(&mut state, payload)
    }

    fn emit_locked(&self, state: &mut State, payload: Payload) -> SharedEvent {
        state.seq += 1;
        if payload.is_from_model() {
            self.heard_model.store(true, Ordering::Relaxed);
        }
        if matches!(payload, Payload::Result(_)) {
            state.finished_turn = state.turn;
        }
        let envelope = Envelope {
            seq: state.seq,
            ts: Timestamp::now(),
            session: self.id.clone(),
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
            && self.log_failure.get().is_none()
            && let Some(writer) = self.log.lock().unwrap_or_else(|p| p.into_inner()).as_ref()
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
        self.emit_locked(&mut state, Payload::Status(StatusData { status: to }));
        Ok(())
    }

    /// Starts the next turn: bumps the turn counter and moves idle → working. Refused once
    /// the log has failed. Backends begin turns through [`Turn::begin`], which owns the rest
    /// of the lifecycle.
    fn begin_turn(&self) -> Result<u32, TurnRefused> {
        if let Some(failure) = self.log_failure() {
            return Err(TurnRefused::LogFailed(failure.clone()));
        }
        let mut state = self.state();
        check_transition(state.status, Status::Working)?;
        state.turn += 1;
        state.status = Status::Working;
        self.emit_locked(
            &mut state,
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
    /// envelope carrying `request` under a fresh `requestId` goes out. The receiver yields the
    /// answer given through [`Session::answer`].
    pub fn request_permission(
        &self,
        mut request: PermissionRequest,
    ) -> Result<(String, oneshot::Receiver<Answer>), IllegalTransition> {
        let id = ids::request_id();
        request.request_id = id.clone();
        self.transition(Status::WaitingApproval)?;
        let receiver = self.approvals.open(id.clone(), request.clone());
        self.emit(Payload::Permission(PermissionData::Request(Box::new(
            request,
        ))));
        Ok((id, receiver))
    }

    /// Answers an open permission request.
    pub fn answer(&self, request_id: &str, decision: Decision) -> Result<(), AnswerError> {
        self.approvals.answer(request_id, decision.into())
    }

    /// Answers an open permission request with the person's reason (a denial's, which the
    /// model is told).
    pub fn answer_with(&self, request_id: &str, answer: Answer) -> Result<(), AnswerError> {
        self.approvals.answer(request_id, answer)
    }

    /// Closes a request (answered, or given up on): announces the outcome and moves the
    /// session back to `working`.
    pub fn resolve_permission(&self, request_id: &str, decision: Decision, note: Option<String>) {
        self.approvals.withdraw(request_id);
        self.emit(Payload::Permission(PermissionData::Resolution(
            PermissionResolution::new(request_id, decision.as_str(), note),
        )));
        if let Err(e) = self.transition(Status::Working) {
            tracing::error!(error = %e, "leaving waiting_approval");
        }
    }

    /// Closes every open request with `decision` and the same note: nobody is left to act
    /// on an answer (the turn or the agent process ended).
    pub fn resolve_all_permissions(&self, decision: Decision, note: &str) {
        for request in self.pending_permissions() {
            self.resolve_permission(&request.request_id, decision, Some(note.to_string()));
        }
    }

    /// The permission requests waiting for an answer.
    pub fn pending_permissions(&self) -> Vec<PermissionRequest> {
        self.approvals.open_requests()
    }

    /// Ends the session: status dead, log flushed and closed, the session's lock released
    /// (another process may run it from then on). Safe to call twice.
    pub fn close(&self) {
        if self.status() != Status::Dead
            && let Err(e) = self.transition(Status::Dead)
        {
            tracing::error!(error = %e, "closing session");
        }
        // Taken out first: a write failing while it closes reports back through `emit`,
        // which needs this lock.
        let writer = self.log.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(mut writer) = writer
            && let Err(e) = writer.close()
        {
            tracing::error!(path = %writer.path().display(), error = %e, "flushing the event log");
        }
        // Removed while still held: nobody else can have opened a session only this
        // process knew the id of.
        if self.fresh
            && self.discard_unheard.load(Ordering::Relaxed)
            && !self.heard_model.load(Ordering::Relaxed)
            && let Some(path) = &self.log_path
            && discard::remove_files(path, &self.id)
        {
            self.discarded.store(true, Ordering::Relaxed);
        }
        // Only once everything is written: the next holder reads the whole log.
        self.lock.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    /// Asks that this session's files be removed when it closes if no model was ever heard
    /// from in it (a run that failed before reaching one, a view left without a message):
    /// `corral sessions` then lists conversations, not attempts. Only for a session created
    /// by this process; a resumed one is always kept.
    pub fn discard_if_unheard(&self) {
        self.discard_unheard.store(true, Ordering::Relaxed);
    }

    /// Whether closing removed the session's files (nothing left to resume).
    pub fn discarded(&self) -> bool {
        self.discarded.load(Ordering::Relaxed)
    }
}

/// The approver's requests are the session's: announced as events, answered from any surface.
impl PermissionDesk for Session {
    fn open(
        &self,
        request: PermissionRequest,
    ) -> Result<(String, oneshot::Receiver<Answer>), String> {
        self.request_permission(request).map_err(|e| e.to_string())
    }

    fn resolve(&self, request_id: &str, decision: Decision, note: Option<String>) {
        self.resolve_permission(request_id, decision, note);
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
