//! `corral serve --nats`: the control plane. It keeps no state of its own beyond what NATS
//! holds, so any number of `serve` processes can front one deployment and a restarted one
//! loses nothing:
//! - the nodes bucket says which nodes are up and how full (their heartbeats);
//! - the sessions bucket says which node runs each session and who owns it;
//! - the events stream holds every envelope, which this process follows from the start into
//!   a mirror per session ([`SessionManager::attach_remote`]) that REST, WebSocket replay and
//!   the SSE bus serve exactly as they serve a local session.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::wire::{Announce, Assignment, NodeCall, NodeReply, NodeRequest, OpenRequest, Opened};
use super::{Deployment, Stores, connect, stores};
use crate::config::Config;
use crate::error::Error;
use crate::event::{Envelope, Status};
use crate::host::manager::{Forward, Handle, RemoteCall, SessionManager};

/// How long a node may take to open a session (a local model may have to load first).
const OPEN_TIMEOUT: Duration = Duration::from_secs(180);
/// How long any other command may take (close and set_model wait for a running turn).
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// Why an open or a call failed, in the API's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterError {
    pub code: String,
    pub message: String,
}

impl ClusterError {
    fn new(code: &str, message: impl Into<String>) -> ClusterError {
        ClusterError {
            code: code.to_string(),
            message: message.into(),
        }
    }
}

pub(super) struct NodeState {
    pub announce: Announce,
    pub seen: Instant,
    /// Its heartbeat was withdrawn (the node stopped on purpose).
    pub withdrawn: bool,
    /// The bucket revision last seen for it.
    pub revision: u64,
}

#[derive(Default)]
pub(super) struct State {
    pub nodes: HashMap<String, NodeState>,
    pub assignments: HashMap<String, Assignment>,
    pub pending: HashMap<String, Vec<(Envelope, Box<str>)>>,
    /// Each session's last stream sequence taken in, to write after it.
    pub last_sequence: HashMap<String, u64>,
    /// The stream sequence taken in last, to follow on from after a reconnect.
    pub followed: u64,
    /// Sessions being ended by `liveness` right now.
    pub ending: HashSet<String>,
    /// Sessions hosted here once: one no longer listed (an old dead one) takes nothing more.
    pub attached: HashSet<String>,
}

pub struct Cluster {
    pub(super) client: async_nats::Client,
    pub(super) deployment: Deployment,
    pub(super) stores: Stores,
    pub(super) manager: SessionManager,
    pub(super) state: Mutex<State>,
    pub(super) started: Instant,
    /// The mirrors' logs, this process's own; removed when it ends.
    pub(super) mirror_dir: tempfile::TempDir,
    me: Weak<Cluster>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub(super) fn lock_state(cluster: &Cluster) -> MutexGuard<'_, State> {
    lock(&cluster.state)
}

fn mirrors_parent() -> Result<PathBuf, Error> {
    let base = dirs::cache_dir()
        .ok_or_else(|| crate::error::usage("no cache directory: set XDG_CACHE_HOME or HOME"))?;
    let dir = base.join("corral").join("mirrors");
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::Runtime(format!("cannot create {}: {e}", dir.display())))?;
    Ok(dir)
}

impl Cluster {
    /// Connects, makes the deployment's stream and buckets if missing, and starts following
    /// nodes, sessions and events.
    pub async fn start(
        url: &str,
        config: &Config,
        manager: SessionManager,
    ) -> Result<Arc<Cluster>, Error> {
        let deployment = Deployment::from_config(&config.nats)?;
        let client = connect(url, &config.nats, "corral-serve").await?;
        let stores = stores(&client, &deployment).await?;
        let mirror_dir = tempfile::Builder::new()
            .prefix("serve-")
            .tempdir_in(mirrors_parent()?)
            .map_err(|e| Error::Runtime(format!("a directory for session mirrors: {e}")))?;
        let cluster = Arc::new_cyclic(|me| Cluster {
            client,
            deployment,
            stores,
            manager,
            state: Mutex::new(State::default()),
            started: Instant::now(),
            mirror_dir,
            me: me.clone(),
        });
        let nodes = cluster
            .stores
            .nodes
            .watch_with_history(">")
            .await
            .map_err(|e| Error::Runtime(format!("NATS: watching nodes: {e}")))?;
        let sessions = cluster
            .stores
            .sessions
            .watch_with_history(">")
            .await
            .map_err(|e| Error::Runtime(format!("NATS: watching sessions: {e}")))?;
        tokio::spawn(cluster.clone().follow_bucket(nodes, true));
        tokio::spawn(cluster.clone().follow_bucket(sessions, false));
        tokio::spawn(cluster.clone().follow_events());
        tokio::spawn(super::liveness::watch(Arc::downgrade(&cluster)));
        Ok(cluster)
    }

    /// How remote handles reach their node.
    pub(super) fn forward(&self) -> Forward {
        let me = self.me.clone();
        Arc::new(move |id: &str, call: RemoteCall| {
            let me = me.clone();
            let id = id.to_string();
            Box::pin(async move {
                let cluster = me.upgrade().ok_or("the control plane is stopping")?;
                let node = lock(&cluster.state)
                    .assignments
                    .get(&id)
                    .map(|a| a.node.clone())
                    .ok_or_else(|| format!("session {id} has no node"))?;
                let request = NodeRequest {
                    session: id,
                    call: NodeCall::Session(call),
                };
                cluster
                    .call(&node, &request, CALL_TIMEOUT)
                    .await
                    .map_err(|e| e.message)
            })
        })
    }

    async fn call(
        &self,
        node: &str,
        request: &NodeRequest,
        timeout: Duration,
    ) -> Result<Value, ClusterError> {
        let body = serde_json::to_vec(request).unwrap_or_default();
        let subject = self.deployment.node_subject(node);
        // The request's own timeout, not the client's default: an open may wait for a
        // local model to load.
        let request = async_nats::Request::new()
            .payload(body.into())
            .timeout(Some(timeout));
        let reply = self
            .client
            .send_request(subject, request)
            .await
            .map_err(|e| {
                let message = match e.kind() {
                    async_nats::RequestErrorKind::TimedOut => {
                        format!("node {node} did not answer within {} s", timeout.as_secs())
                    }
                    async_nats::RequestErrorKind::NoResponders => {
                        format!("node {node} is not listening")
                    }
                    _ => format!("node {node}: {e}"),
                };
                ClusterError::new("NODE_UNAVAILABLE", message)
            })?;
        match serde_json::from_slice::<NodeReply>(&reply.payload) {
            Ok(NodeReply::Ok(value)) => Ok(value),
            Ok(NodeReply::Error { code, message }) => Err(ClusterError { code, message }),
            Err(e) => Err(ClusterError::new(
                "NODE_UNAVAILABLE",
                format!("node {node} answered something else: {e}"),
            )),
        }
    }

    /// Opens a session on the node named, else on the connected node with `labels` that
    /// has the most room.
    pub async fn open(
        &self,
        request: OpenRequest,
        node: Option<&str>,
        labels: &[String],
    ) -> Result<Arc<Handle>, ClusterError> {
        let (name, instance) = self.choose(node, labels)?;
        let owner = request.owner.clone();
        let mut assignment = Assignment {
            session: String::new(),
            node: name.clone(),
            instance,
            owner,
            opened: None,
        };
        // An id no session of the deployment has: the bucket's create refuses a taken one.
        let mut tries = 0;
        loop {
            tries += 1;
            assignment.session = crate::session::ids::short_id();
            let value = serde_json::to_vec(&assignment).unwrap_or_default();
            match self
                .stores
                .sessions
                .create(&assignment.session, value.into())
                .await
            {
                Ok(_) => break,
                Err(e)
                    if e.kind() == async_nats::jetstream::kv::CreateErrorKind::AlreadyExists
                        && tries < 16 => {}
                Err(e) => return Err(ClusterError::new("UNAVAILABLE", format!("NATS: {e}"))),
            }
        }
        let id = assignment.session.clone();
        lock(&self.state)
            .assignments
            .insert(id.clone(), assignment.clone());
        let request = NodeRequest {
            session: id.clone(),
            call: NodeCall::Open(Box::new(request)),
        };
        let opened = self
            .call(&name, &request, OPEN_TIMEOUT)
            .await
            .and_then(|value| {
                serde_json::from_value::<Opened>(value.get("opened").cloned().unwrap_or_default())
                    .map_err(|e| ClusterError::new("NODE_UNAVAILABLE", format!("node {name}: {e}")))
            });
        let opened = match opened {
            Ok(opened) => opened,
            Err(e) => {
                lock(&self.state).assignments.remove(&id);
                if let Err(e) = self.stores.sessions.delete(&id).await {
                    tracing::warn!(target: "corral::cluster", session = %id, error = %e, "withdrawing a failed assignment");
                }
                return Err(e);
            }
        };
        assignment.opened = Some(opened.clone());
        lock(&self.state)
            .assignments
            .insert(id.clone(), assignment.clone());
        self.attach(&assignment, opened)
            .ok_or_else(|| ClusterError::new("INTERNAL", format!("session {id}: no mirror")))
    }

    /// Sessions assigned to `node` that are not over, by this process's count.
    fn load_of(&self, state: &State, node: &str) -> usize {
        state
            .assignments
            .values()
            .filter(|a| a.node == node)
            .filter(|a| {
                self.manager
                    .get(&a.session)
                    .is_none_or(|h| h.session.status() != Status::Dead)
            })
            .count()
    }

    fn choose(
        &self,
        named: Option<&str>,
        labels: &[String],
    ) -> Result<(String, String), ClusterError> {
        let state = lock(&self.state);
        let dead_after = self.deployment.dead_after;
        let mut candidates: Vec<(usize, usize, &NodeState)> = state
            .nodes
            .values()
            .filter(|n| !n.withdrawn && n.seen.elapsed() < dead_after)
            .filter(|n| named.is_none_or(|name| n.announce.name == name))
            .map(|n| {
                let load = n
                    .announce
                    .running
                    .max(self.load_of(&state, &n.announce.name));
                (n.announce.capacity.saturating_sub(load), load, n)
            })
            .collect();
        if candidates.is_empty() {
            return Err(ClusterError::new(
                "NO_NODE",
                match named {
                    Some(name) => format!("node {name} is not connected"),
                    None => "no node is connected".to_string(),
                },
            ));
        }
        candidates.retain(|(_, _, n)| n.announce.matches(labels));
        if candidates.is_empty() {
            return Err(ClusterError::new(
                "NO_NODE",
                format!("no connected node has the labels {}", labels.join(",")),
            ));
        }
        candidates.retain(|(free, _, _)| *free > 0);
        candidates.sort_by(|a, b| {
            b.0.cmp(&a.0)
                .then(a.1.cmp(&b.1))
                .then(a.2.announce.name.cmp(&b.2.announce.name))
        });
        let Some((_, _, node)) = candidates.first() else {
            return Err(ClusterError::new(
                "NODE_FULL",
                "every node that could take it runs as many sessions as its capacity",
            ));
        };
        Ok((node.announce.name.clone(), node.announce.instance.clone()))
    }

    /// The connected nodes, for `GET /api/v1/nodes`.
    pub fn nodes(&self) -> Vec<Value> {
        let state = lock(&self.state);
        let mut nodes: Vec<Value> = state
            .nodes
            .values()
            .map(|n| {
                let alive = !n.withdrawn && n.seen.elapsed() < self.deployment.dead_after;
                serde_json::json!({
                    "name": n.announce.name,
                    "instance": n.announce.instance,
                    "labels": n.announce.labels,
                    "capacity": n.announce.capacity,
                    "running": n.announce.running.max(self.load_of(&state, &n.announce.name)),
                    "host": n.announce.host,
                    "version": n.announce.version,
                    "alive": alive,
                    "last_heartbeat_ms_ago": n.seen.elapsed().as_millis() as u64,
                })
            })
            .collect();
        nodes.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
        nodes
    }
}
