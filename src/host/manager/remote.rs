//! Sessions another process runs (a `corral node`), hosted here as handles like local ones so
//! every surface drives them the same way. The session is a mirror fed with the node's own
//! envelopes from outside (`Session::ingest`); what a surface asks of it — a turn, a model, an
//! answer, a cancel, close — is forwarded to the node by the [`Forward`] the caller supplies,
//! and its effect comes back as envelopes, never decided here.

use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use super::{Command, Handle, HandleParts, SessionManager, TurnMode, lock};
use crate::backend::BackendInfo;
use crate::error::Error;
use crate::event::Status;
use crate::policy::Decision;
use crate::session::{Session, SessionMeta};

/// What a surface asks of a session another process runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum RemoteCall {
    Send {
        text: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<crate::model::Image>,
        #[serde(default)]
        mode: TurnMode,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        effort: Option<crate::model::Effort>,
        #[serde(default)]
        queue: bool,
    },
    Approve {
        request_id: String,
        decision: Decision,
    },
    Cancel,
    SetModel {
        model: String,
    },
    Close,
}

type Reply = Pin<Box<dyn std::future::Future<Output = Result<serde_json::Value, String>> + Send>>;

/// Delivers a call to the process that runs session `id` and waits for its reply.
pub type Forward = Arc<dyn Fn(&str, RemoteCall) -> Reply + Send + Sync>;

/// Where a remote session runs and how to reach it.
#[derive(Clone)]
pub struct Remote {
    /// The node that runs it.
    pub node: String,
    forward: Forward,
}

impl Remote {
    fn call(&self, id: &str, call: RemoteCall) -> Reply {
        (self.forward)(id, call)
    }
}

/// What a remote session is opened here with.
pub struct RemoteSpec {
    pub meta: SessionMeta,
    pub owner: String,
    pub node: String,
    /// The backend's kind as the node reported it (`native`, `claude`, …).
    pub backend: String,
    pub queues_prompts: bool,
    pub steers: bool,
    /// Where the mirror logs what it takes in (`None`: memory only).
    pub log_dir: Option<PathBuf>,
    pub forward: Forward,
}

/// How long close waits for the node's `dead` to arrive before giving up on it.
const CLOSE_WAIT: Duration = Duration::from_secs(15);

/// A backend kind from the wire, as one of the kinds corral knows (`remote` otherwise).
fn known_kind(kind: &str) -> &'static str {
    const KINDS: &[&str] = &[
        "native",
        "claude",
        "acp",
        "codex",
        "gemini",
        "qwen",
        "copilot",
        "opencode",
        "cursor",
        "antigravity",
        "pi",
        "kimi",
    ];
    KINDS
        .iter()
        .find(|k| **k == kind)
        .copied()
        .unwrap_or("remote")
}

impl SessionManager {
    /// Hosts a session another process runs. Attaching an id already hosted returns that
    /// handle; a dead one is replaced.
    pub fn attach_remote(&self, spec: RemoteSpec) -> Result<Arc<Handle>, Error> {
        let id = spec.meta.id.clone();
        if let Some(existing) = self.get(&id)
            && existing.remote.is_some()
        {
            return Ok(existing);
        }
        let session = Session::mirror(&id, spec.log_dir.as_deref())
            .map_err(|e| Error::Runtime(e.to_string()))?;
        let (commands, receiver) = mpsc::unbounded_channel();
        let remote = Remote {
            node: spec.node,
            forward: spec.forward,
        };
        let handle = Handle::build(
            HandleParts {
                session,
                owner: spec.owner,
                posture: crate::host::open::Posture {
                    preset: spec.meta.permission.clone().unwrap_or_default(),
                    sandbox: crate::sandbox::SandboxMode::default(),
                    network: crate::sandbox::NetworkMode::default(),
                },
                backend: BackendInfo {
                    kind: known_kind(&spec.backend),
                    queues_prompts: spec.queues_prompts,
                },
                // Steering is the node's to do: a queued message is forwarded as it is.
                steers: spec.steers,
                title: String::new(),
                meta: spec.meta,
                remote: Some(remote.clone()),
            },
            commands,
        );
        self.forward_events(&handle);
        tokio::spawn(keep_stats(handle.session.tap(0), Arc::downgrade(&handle)));
        let task = tokio::spawn(drive(receiver, Arc::downgrade(&handle), remote));
        *lock(&handle.task) = Some(task);
        let mut sessions = lock(&self.inner.sessions);
        sessions.insert(id, handle.clone());
        Ok(handle)
    }
}

/// What the listing shows beyond status (tokens, title, activity), from the node's
/// envelopes as the local executor keeps it from its turns.
async fn keep_stats(
    mut events: mpsc::UnboundedReceiver<crate::event::SharedEvent>,
    handle: Weak<Handle>,
) {
    use crate::event::{ContentBlock, Payload};
    while let Some(event) = events.recv().await {
        let Some(handle) = handle.upgrade() else {
            return;
        };
        let mut stats = lock(&handle.stats);
        stats.last_activity = event.envelope.ts;
        match &event.envelope.payload {
            Payload::Result(result) => {
                stats.usage.add(&result.usage);
                stats.turn_started = None;
            }
            Payload::TurnStarted(_) => stats.turn_started = Some(std::time::Instant::now()),
            Payload::UserText(text) if stats.title.is_empty() => {
                if let ContentBlock::Text { text } = &text.content {
                    stats.title = crate::session::catalog::title_of(text);
                }
            }
            Payload::Status(s) if s.status == Status::Dead => return,
            _ => {}
        }
    }
}

/// The remote session's task: forwards each command in order, as the local executor runs
/// them in order.
async fn drive(
    mut commands: mpsc::UnboundedReceiver<Command>,
    handle: Weak<Handle>,
    remote: Remote,
) {
    while let Some(command) = commands.recv().await {
        let Some(this) = handle.upgrade() else { return };
        let id = this.id().to_string();
        match command {
            Command::Turn {
                text,
                images,
                effort,
                mode,
                queued,
            } => {
                let call = RemoteCall::Send {
                    text,
                    images,
                    mode,
                    effort,
                    queue: queued,
                };
                if let Err(e) = remote.call(&id, call).await {
                    // The node said why in the session's own stream where it could; the
                    // turn this process counted on is not coming.
                    tracing::warn!(target: "corral::cluster", session = %id, error = %e, "a turn was not delivered");
                    this.sent_turn
                        .store(this.session.finished_turn(), Ordering::SeqCst);
                }
            }
            Command::SetModel { model, reply } => {
                let answer = remote
                    .call(&id, RemoteCall::SetModel { model })
                    .await
                    .map(|v| v.as_bool().unwrap_or(true));
                let _ = reply.send(answer);
            }
            Command::SetPolicy { reply, .. } | Command::Compact { reply } => {
                let _ = reply.send(Err(format!(
                    "session {id} runs on node {}: presets and compaction are switched there",
                    remote.node
                )));
            }
            Command::SetEffort { reply, .. } => {
                let _ = reply.send(false);
            }
            Command::Close => {
                let mut events = this.session.tap(this.session.last_seq());
                drop(this);
                if let Err(e) = remote.call(&id, RemoteCall::Close).await {
                    tracing::warn!(target: "corral::cluster", session = %id, error = %e, "close was not delivered");
                    return;
                }
                let dead = async {
                    while let Some(event) = events.recv().await {
                        if matches!(&event.envelope.payload,
                            crate::event::Payload::Status(s) if s.status == Status::Dead)
                        {
                            return;
                        }
                    }
                };
                let _ = tokio::time::timeout(CLOSE_WAIT, dead).await;
                return;
            }
        }
    }
}

/// What [`SessionManager::cancel`] and [`SessionManager::answer`] do for a remote session:
/// forwarded without waiting (the node's envelopes tell the outcome).
pub(super) fn forward_detached(handle: &Handle, call: RemoteCall) -> bool {
    let Some(remote) = handle.remote.clone() else {
        return false;
    };
    let id = handle.id().to_string();
    tokio::spawn(async move {
        if let Err(e) = remote.call(&id, call).await {
            tracing::warn!(target: "corral::cluster", session = %id, error = %e, "a call to the node failed");
        }
    });
    true
}
