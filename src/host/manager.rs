//! Many sessions in one process: each runs its agent in its own task and takes commands
//! (a turn, a cancel, an answer, close) from any surface — the server, MCP, ACP.
//!
//! One turn at a time per session: a second message while one runs is refused
//! (`TurnInProgress`), never queued behind the user's back, unless the client opted in to
//! queueing. When a session's agent runs, sleeps, wakes or is stopped is decided by the
//! lifecycle reducer its task executes (`executor`). Every session's envelopes are
//! also published on one global stream (with a global id for `Last-Event-ID` resume) so a
//! monitor can follow all agents without polling. Dead sessions (closed, or ended by
//! themselves) stay listed for review, the most recent [`KEEP_DEAD`] of them on every surface
//! (oldest dropped first, as Kaimon's agents do); their logs stay on disk regardless.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use tokio::sync::{broadcast, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

mod dormant;
mod executor;
mod remote;
mod turn_request;
pub use remote::{Forward, Remote, RemoteCall, RemoteSpec};
pub use turn_request::{TurnMode, TurnRequest};

use super::open::{self, OpenSpec};
use crate::backend::BackendInfo;
use crate::config::Config;
use crate::error::Error;
use crate::event::{Payload, SharedEvent, Status, Timestamp, Usage};
use crate::policy::Decision;
use crate::session::{AnswerError, Session, SessionMeta};

/// An envelope on the global stream, with its global id.
pub type GlobalEvent = (u64, SharedEvent);

/// How many envelopes of all sessions the global stream keeps for resuming.
const GLOBAL_RING: usize = 8192;
/// And at most this many bytes of them (serialized) beyond the newest: one huge answer
/// block is not held here after it went out.
const GLOBAL_RING_BYTES: usize = 16 << 20;

/// Dead sessions kept listed, on every surface alike.
pub const KEEP_DEAD: usize = 10;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SendError {
    #[error("no session {0}")]
    NotFound(String),
    #[error("session {0} is closed")]
    Dead(String),
    #[error("a turn is already running in session {0}")]
    TurnInProgress(String),
}

enum Command {
    Turn {
        text: String,
        images: Vec<crate::model::Image>,
        /// This turn's own effort, if it asks for one.
        effort: Option<crate::model::Effort>,
        mode: TurnMode,
        /// Sent while a turn ran, by a client that lets it wait or be steered in.
        queued: bool,
    },
    SetModel {
        model: String,
        reply: oneshot::Sender<Result<bool, String>>,
    },
    SetPolicy {
        policy: Box<crate::policy::Policy>,
        reply: oneshot::Sender<Result<bool, String>>,
    },
    /// The session's own effort from the next turn on; whether the agent took it.
    SetEffort {
        effort: Option<crate::model::Effort>,
        reply: oneshot::Sender<bool>,
    },
    Compact {
        reply: oneshot::Sender<Result<bool, String>>,
    },
    Close,
}

impl Command {
    fn turn(
        text: &str,
        images: Vec<crate::model::Image>,
        request: TurnRequest,
        queued: bool,
    ) -> Command {
        Command::Turn {
            text: text.to_string(),
            images,
            effort: request.turn_effort(),
            mode: request.mode,
            queued,
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SetModelError {
    #[error(transparent)]
    Send(#[from] SendError),
    #[error("cannot switch to {model}: {reason}")]
    Failed { model: String, reason: String },
}

/// What a surface shows about a session.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SessionInfo {
    pub id: String,
    pub owner: String,
    pub status: Status,
    pub model: String,
    pub cwd: String,
    pub turn: u32,
    pub created_at: String,
    pub last_activity: String,
    pub usage: Usage,
    /// `native`, `claude`, `acp`, `codex`.
    pub backend: &'static str,
    /// The backend queues prompts sent while a turn runs.
    pub queues_prompts: bool,
    pub event_log: Option<String>,
    pub worktree: Option<String>,
    /// Open permission requests.
    pub pending_permissions: usize,
    /// The first prompt, shortened (`session::catalog::title_of`); empty before any.
    pub title: String,
    /// The session that delegated this one (`delegate`); its requests are asked there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// The `corral node` that runs it (`corral serve --nats`); absent for a local session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

struct Stats {
    usage: Usage,
    /// The session's title: set by its first turn, or read from the log it resumes.
    title: String,
    last_activity: Timestamp,
    last_mode: TurnMode,
    turn_started: Option<Instant>,
}

/// One managed session.
pub struct Handle {
    pub session: Arc<Session>,
    pub owner: String,
    pub meta: SessionMeta,
    pub posture: open::Posture,
    backend: BackendInfo,
    /// Its backend takes messages into a running turn (the session's task hands them over).
    steers: bool,
    /// The model in use: the opening one until `set_model` switches it.
    model: Mutex<String>,
    /// The preset `set_preset` switched to, if it did.
    preset: Mutex<Option<String>>,
    created_at: Timestamp,
    commands: mpsc::UnboundedSender<Command>,
    /// The number the last sent turn gets: it is in progress until its result is out.
    sent_turn: AtomicU32,
    cancel: Mutex<Option<CancellationToken>>,
    stats: Mutex<Stats>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Set for a session another process runs (see `remote`).
    remote: Option<Remote>,
}

/// What a handle is made of besides its command channel.
struct HandleParts {
    session: Arc<Session>,
    owner: String,
    meta: SessionMeta,
    posture: open::Posture,
    backend: BackendInfo,
    steers: bool,
    title: String,
    remote: Option<Remote>,
}

impl Handle {
    fn build(parts: HandleParts, commands: mpsc::UnboundedSender<Command>) -> Arc<Handle> {
        Arc::new(Handle {
            session: parts.session,
            owner: parts.owner,
            model: Mutex::new(parts.meta.model.clone()),
            meta: parts.meta,
            posture: parts.posture,
            backend: parts.backend,
            steers: parts.steers,
            preset: Mutex::new(None),
            created_at: Timestamp::now(),
            commands,
            sent_turn: AtomicU32::new(0),
            cancel: Mutex::new(None),
            stats: Mutex::new(Stats {
                usage: Usage::default(),
                title: parts.title,
                last_activity: Timestamp::now(),
                last_mode: TurnMode::Normal,
                turn_started: None,
            }),
            task: Mutex::new(None),
            remote: parts.remote,
        })
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Handle {
    pub fn id(&self) -> &str {
        self.session.id()
    }

    /// A turn is queued or running and its result is not out yet.
    pub fn is_busy(&self) -> bool {
        self.session.turn_in_progress()
            || self.sent_turn.load(Ordering::SeqCst) > self.session.finished_turn()
    }

    /// The preset `set_preset` switched the session to, if it did.
    pub fn current_preset(&self) -> Option<String> {
        lock(&self.preset).clone()
    }

    pub fn last_mode(&self) -> TurnMode {
        lock(&self.stats).last_mode
    }

    /// When the running turn started, for durations.
    pub fn turn_started(&self) -> Option<Instant> {
        lock(&self.stats).turn_started
    }

    /// Status and turn as one snapshot, a turn accepted but not begun counting as working.
    pub fn snapshot(&self) -> crate::session::Snapshot {
        let now = self.session.snapshot();
        // Read after: a turn accepted meanwhile shows as working, as a send would find it.
        now.with_accepted(self.sent_turn.load(Ordering::SeqCst))
    }

    /// Its backend takes messages into a running turn.
    pub fn steers(&self) -> bool {
        self.steers
    }

    /// The node that runs it, when another process does.
    pub fn node(&self) -> Option<&str> {
        self.remote.as_ref().map(|r| r.node.as_str())
    }

    pub fn info(&self) -> SessionInfo {
        let now = self.snapshot();
        let stats = lock(&self.stats);
        SessionInfo {
            id: self.id().to_string(),
            owner: self.owner.clone(),
            status: now.status,
            model: lock(&self.model).clone(),
            cwd: self.meta.cwd.display().to_string(),
            turn: now.turn,
            created_at: self.created_at.to_string(),
            last_activity: stats.last_activity.to_string(),
            usage: stats.usage,
            backend: self.backend.kind,
            queues_prompts: self.backend.queues_prompts,
            event_log: self.session.log_path().map(|p| p.display().to_string()),
            worktree: self
                .meta
                .worktree
                .as_ref()
                .map(|w| w.path.display().to_string()),
            pending_permissions: self.session.pending_permissions().len(),
            title: stats.title.clone(),
            parent: self.meta.parent.clone(),
            node: self.node().map(str::to_string),
        }
    }
}

/// Counts `session` among the dead (once), dropping the oldest beyond [`KEEP_DEAD`]. Only
/// the slot still holding that very session counts: a late notice of a session whose id was
/// reopened since must not retire the live one, nor may dropping an old entry.
fn retire(inner: &Inner, session: &Arc<Session>) {
    let id = session.id();
    let sessions = lock(&inner.sessions);
    if !sessions
        .get(id)
        .is_some_and(|h| Arc::ptr_eq(&h.session, session))
    {
        return;
    }
    drop(sessions);
    let mut dead = lock(&inner.dead);
    dead.retain(|d| d != id);
    dead.push_back(id.to_string());
    while dead.len() > KEEP_DEAD {
        if let Some(old) = dead.pop_front() {
            let mut sessions = lock(&inner.sessions);
            if sessions
                .get(&old)
                .is_some_and(|h| h.session.status() == Status::Dead)
            {
                sessions.remove(&old);
            }
        }
    }
}

struct Global {
    next_id: u64,
    ring: VecDeque<(u64, SharedEvent)>,
    ring_bytes: usize,
    sender: broadcast::Sender<(u64, SharedEvent)>,
}

struct Inner {
    config: Config,
    log_dir: std::path::PathBuf,
    sessions: Mutex<HashMap<String, Arc<Handle>>>,
    dead: Mutex<VecDeque<String>>,
    /// Sessions a previous process left open (see `dormant`), until reopened.
    dormant: Mutex<dormant::Table>,
    global: Mutex<Global>,
}

impl std::fmt::Debug for SessionManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionManager(..)")
    }
}

#[derive(Clone)]
pub struct SessionManager {
    inner: Arc<Inner>,
}

impl SessionManager {
    pub fn new(config: Config, log_dir: std::path::PathBuf) -> Self {
        let (sender, _) = broadcast::channel(GLOBAL_RING);
        SessionManager {
            inner: Arc::new(Inner {
                config,
                log_dir,
                sessions: Mutex::new(HashMap::new()),
                dead: Mutex::new(VecDeque::new()),
                dormant: Mutex::new(dormant::Table::default()),
                global: Mutex::new(Global {
                    next_id: 0,
                    ring: VecDeque::with_capacity(1024),
                    ring_bytes: 0,
                    sender,
                }),
            }),
        }
    }

    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// Opens a session owned by `owner`. Reopening the id of a dead session reuses its slot
    /// (and its event log); reopening a live id is refused.
    pub async fn open(&self, spec: OpenSpec, owner: &str) -> Result<Arc<Handle>, Error> {
        let (handle, notes) = self.open_noted(spec, owner).await?;
        log_notes(&notes);
        Ok(handle)
    }

    /// [`SessionManager::open`], returning the lines opening said for a person (the
    /// worktree it made) instead of logging them.
    pub async fn open_noted(
        &self,
        mut spec: OpenSpec,
        owner: &str,
    ) -> Result<(Arc<Handle>, Vec<u8>), Error> {
        if let Some(id) = &spec.id
            && let Some(existing) = self.get(id)
        {
            if existing.session.status() != Status::Dead {
                return Err(Error::InUse(format!(
                    "session {id} is already open in this process"
                )));
            }
            lock(&self.inner.sessions).remove(id);
            lock(&self.inner.dead).retain(|d| d != id);
        }
        // A sub-session asks through its parent's desk, attended as its parent is.
        if spec.parent.is_none() {
            spec.attended = true;
        }
        spec.owner.get_or_insert_with(|| owner.to_string());
        // Sessions this one delegates to are hosted (and listed) here.
        spec.delegate_host.get_or_insert_with(|| self.clone());
        let progress: crate::model::Progress =
            Arc::new(|line: &str| tracing::info!(target: "corral::llama_server", "{line}"));
        let plan = open::plan(spec, self.inner.config.clone(), progress).await?;
        let mut notes = Vec::new();
        let opened = open::start(plan, &self.inner.log_dir, &mut notes)
            .await
            .map_err(|failed| failed.error)?;
        let (commands, receiver) = mpsc::unbounded_channel();
        let handle = Handle::build(
            HandleParts {
                session: opened.session.clone(),
                owner: owner.to_string(),
                meta: opened.meta.clone(),
                posture: opened.posture.clone(),
                backend: opened.backend.info(),
                steers: opened.backend.steering().is_some(),
                // A resumed session is named by the first prompt its log holds.
                title: crate::session::catalog::summarize(&self.inner.log_dir, opened.session.id())
                    .title,
                remote: None,
            },
            commands,
        );
        self.forward_events(&handle);
        let runtime = executor::runtime_of(opened.backend.as_ref(), &self.inner.config);
        let task = tokio::spawn(executor::run_session(
            opened,
            receiver,
            Arc::downgrade(&handle),
            runtime,
        ));
        *lock(&handle.task) = Some(task);
        lock(&self.inner.sessions).insert(handle.id().to_string(), handle.clone());
        Ok((handle, notes))
    }

    /// Republishes a session's envelopes on the global stream.
    /// A session that dies by itself (a crashed agent) is retired like a closed one.
    fn forward_events(&self, handle: &Arc<Handle>) {
        let mut events = handle.session.tap(0);
        let inner = self.inner.clone();
        let session = Arc::downgrade(&handle.session);
        tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                let dead = matches!(&event.envelope.payload,
                    Payload::Status(s) if s.status == Status::Dead);
                let mut global = lock(&inner.global);
                global.next_id += 1;
                let id = global.next_id;
                global.ring_bytes += event.json.len();
                global.ring.push_back((id, event.clone()));
                while global.ring.len() > GLOBAL_RING
                    || (global.ring_bytes > GLOBAL_RING_BYTES && global.ring.len() > 1)
                {
                    if let Some((_, old)) = global.ring.pop_front() {
                        global.ring_bytes -= old.json.len();
                    }
                }
                let _ = global.sender.send((id, event));
                drop(global);
                if dead {
                    if let Some(session) = session.upgrade() {
                        retire(&inner, &session);
                    }
                    break;
                }
            }
        });
    }

    /// All sessions' envelopes: those after `after` still in the ring, then live ones.
    pub fn subscribe_all(
        &self,
        after: Option<u64>,
    ) -> (Vec<GlobalEvent>, broadcast::Receiver<GlobalEvent>) {
        let global = lock(&self.inner.global);
        let live = global.sender.subscribe();
        let replay = match after {
            Some(after) => global
                .ring
                .iter()
                .filter(|(id, _)| *id > after)
                .cloned()
                .collect(),
            None => Vec::new(),
        };
        (replay, live)
    }

    pub fn get(&self, id: &str) -> Option<Arc<Handle>> {
        lock(&self.inner.sessions).get(id).cloned()
    }

    /// Every session, live and dead, oldest first.
    pub fn list(&self) -> Vec<Arc<Handle>> {
        let mut all: Vec<Arc<Handle>> = lock(&self.inner.sessions).values().cloned().collect();
        all.sort_by_key(|h| h.created_at.0);
        all
    }

    /// Starts a turn; returns its number. While another turn runs: refused
    /// (`TurnInProgress`) unless the request queues; then steered into the running turn where
    /// the backend steers (its number), else delivered as the next turn, coalesced with
    /// whatever else waits (that number).
    pub fn send(&self, id: &str, text: &str, request: TurnRequest) -> Result<u32, SendError> {
        self.send_with_images(id, text, Vec::new(), request)
    }

    /// A turn whose prompt carries images.
    pub fn send_with_images(
        &self,
        id: &str,
        text: &str,
        images: Vec<crate::model::Image>,
        request: TurnRequest,
    ) -> Result<u32, SendError> {
        let handle = self
            .get(id)
            .ok_or_else(|| SendError::NotFound(id.to_string()))?;
        // A session whose log failed is closing: its error has gone out already.
        if handle.session.status() == Status::Dead || handle.session.log_failure().is_some() {
            return Err(SendError::Dead(id.to_string()));
        }
        // A turn is over once its result is out: a client that has it may send at once,
        // even before the session's task has wound that turn down (the command waits in the
        // queue). Until then, and until the turn it sends has its result, it is refused.
        let sent = handle.sent_turn.load(Ordering::SeqCst);
        // A client that opted in to queueing (MCP `agent_send`, `queue: true`) has a message
        // sent while a turn runs steered into it where the backend steers, else delivered
        // with whatever else waits as the next turn. Images only start turns of their own.
        if handle.is_busy() && request.queue && images.is_empty() {
            let turn = if handle.steers {
                sent.max(handle.session.turn())
            } else {
                let next = sent.max(handle.session.turn() + 1);
                handle.sent_turn.fetch_max(next, Ordering::SeqCst);
                next
            };
            lock(&handle.stats).last_activity = Timestamp::now();
            handle
                .commands
                .send(Command::turn(text, images, request, true))
                .map_err(|_| SendError::Dead(id.to_string()))?;
            return Ok(turn);
        }
        let next = handle.session.turn().max(sent) + 1;
        if handle.is_busy()
            || handle
                .sent_turn
                .compare_exchange(sent, next, Ordering::SeqCst, Ordering::SeqCst)
                .is_err()
        {
            return Err(SendError::TurnInProgress(id.to_string()));
        }
        {
            let mut stats = lock(&handle.stats);
            if stats.title.is_empty() {
                stats.title = crate::session::catalog::title_of(text);
            }
            stats.last_mode = request.mode;
            stats.last_activity = Timestamp::now();
            stats.turn_started = Some(Instant::now());
        }
        let turn = next;
        if handle
            .commands
            .send(Command::turn(text, images, request, false))
            .is_err()
        {
            handle.sent_turn.store(sent, Ordering::SeqCst);
            return Err(SendError::Dead(id.to_string()));
        }
        Ok(turn)
    }

    /// Sends `id`'s task a command that answers, and waits for the answer (after a running
    /// turn, which the task finishes first).
    async fn ask<T>(
        &self,
        id: &str,
        command: impl FnOnce(oneshot::Sender<T>) -> Command,
    ) -> Result<(Arc<Handle>, T), SendError> {
        let handle = self
            .get(id)
            .ok_or_else(|| SendError::NotFound(id.to_string()))?;
        if handle.session.status() == Status::Dead {
            return Err(SendError::Dead(id.to_string()));
        }
        let (reply, answer) = oneshot::channel();
        handle
            .commands
            .send(command(reply))
            .map_err(|_| SendError::Dead(id.to_string()))?;
        let answer = answer.await.map_err(|_| SendError::Dead(id.to_string()))?;
        Ok((handle, answer))
    }

    /// Switches a session's model between turns, keeping its conversation. `Ok(false)`: its
    /// backend cannot switch. Waits for a running turn to end first.
    pub async fn set_model(&self, id: &str, model: &str) -> Result<bool, SetModelError> {
        let (handle, answer) = self
            .ask(id, |reply| Command::SetModel {
                model: model.to_string(),
                reply,
            })
            .await?;
        let switched = answer.map_err(|reason| SetModelError::Failed {
            model: model.to_string(),
            reason,
        })?;
        if switched {
            *lock(&handle.model) = model.to_string();
        }
        Ok(switched)
    }

    /// Applies another permission preset to a session between turns. `Ok(false)`: its
    /// backend cannot.
    pub async fn set_preset(&self, id: &str, preset: &str) -> Result<bool, SetModelError> {
        if self.get(id).is_none() {
            return Err(SendError::NotFound(id.to_string()).into());
        }
        let failed = |reason: String| SetModelError::Failed {
            model: preset.to_string(),
            reason,
        };
        let policy = crate::policy::Policy::load(
            preset,
            open::user_policy_dir().as_deref(),
            &crate::policy::PolicyOverrides::default(),
        )
        .map_err(|e| failed(e.to_string()))?;
        let (handle, answer) = self
            .ask(id, |reply| Command::SetPolicy {
                policy: Box::new(policy),
                reply,
            })
            .await?;
        let switched = answer.map_err(failed)?;
        if switched {
            *lock(&handle.preset) = Some(preset.to_string());
        }
        Ok(switched)
    }

    /// Sets the effort a session's turns run at (`None`: the model's own), from its next turn
    /// on. Whether the agent took it (where not, the session says why in an `error`).
    pub async fn set_effort(
        &self,
        id: &str,
        effort: Option<crate::model::Effort>,
    ) -> Result<bool, SendError> {
        let (_, took) = self
            .ask(id, |reply| Command::SetEffort { effort, reply })
            .await?;
        Ok(took)
    }

    /// Summarizes a session's conversation to free context, between turns (after a running
    /// one). `Ok(false)`: its backend cannot, or there was too little to summarize.
    pub async fn compact(&self, id: &str) -> Result<bool, SetModelError> {
        let (_, answer) = self.ask(id, |reply| Command::Compact { reply }).await?;
        answer.map_err(|reason| SetModelError::Failed {
            model: "compaction".into(),
            reason,
        })
    }

    /// Cancels the running turn, if any.
    pub fn cancel(&self, id: &str) -> Result<bool, SendError> {
        let handle = self
            .get(id)
            .ok_or_else(|| SendError::NotFound(id.to_string()))?;
        if handle.remote.is_some() {
            let busy = handle.is_busy();
            return Ok(busy && remote::forward_detached(&handle, RemoteCall::Cancel));
        }
        let token = lock(&handle.cancel).clone();
        Ok(match token {
            Some(token) if !token.is_cancelled() => {
                token.cancel();
                true
            }
            _ => false,
        })
    }

    pub fn answer(
        &self,
        id: &str,
        request_id: &str,
        decision: Decision,
    ) -> Result<(), AnswerError> {
        match self.get(id) {
            Some(handle) if handle.remote.is_some() => {
                if !handle.session.has_open_request(request_id) {
                    return Err(AnswerError::UnknownRequest(request_id.to_string()));
                }
                let call = RemoteCall::Approve {
                    request_id: request_id.to_string(),
                    decision,
                };
                remote::forward_detached(&handle, call);
                Ok(())
            }
            Some(handle) => handle.session.answer(request_id, decision),
            None => Err(AnswerError::UnknownRequest(request_id.to_string())),
        }
    }

    /// Closes a session: the running turn is cancelled, its processes stopped; it stays
    /// listed as dead. Returns false when it was not open.
    pub async fn close(&self, id: &str) -> Result<bool, SendError> {
        let handle = self
            .get(id)
            .ok_or_else(|| SendError::NotFound(id.to_string()))?;
        if handle.session.status() == Status::Dead {
            return Ok(false);
        }
        if let Some(token) = lock(&handle.cancel).clone() {
            token.cancel();
        }
        let _ = handle.commands.send(Command::Close);
        let task = lock(&handle.task).take();
        if let Some(task) = task
            && let Err(e) = task.await
        {
            tracing::error!(error = %e, "session task failed");
        }
        retire(&self.inner, &handle.session);
        Ok(true)
    }

    /// Closes every live session (and so every child process).
    pub async fn shutdown(&self) {
        let ids: Vec<String> = self
            .list()
            .iter()
            .filter(|h| h.session.status() != Status::Dead)
            .map(|h| h.id().to_string())
            .collect();
        for id in ids {
            let _ = self.close(&id).await;
        }
    }
}

fn log_notes(notes: &[u8]) {
    for line in String::from_utf8_lossy(notes).lines() {
        tracing::info!("{line}");
    }
}
