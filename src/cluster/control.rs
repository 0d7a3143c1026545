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

use async_nats::jetstream::consumer::{DeliverPolicy, pull};
use async_nats::jetstream::kv::Operation;
use futures_util::StreamExt;
use serde_json::Value;

use super::publish::{Joiner, PART_HEADER};
use super::wire::{Announce, Assignment, NodeCall, NodeReply, NodeRequest, OpenRequest, Opened};
use super::{Deployment, Stores, connect, stores};
use crate::config::Config;
use crate::error::Error;
use crate::event::{Envelope, Status};
use crate::host::manager::{Forward, Handle, RemoteCall, RemoteSpec, SessionManager};

/// How long a node may take to open a session (a local model may have to load first).
const OPEN_TIMEOUT: Duration = Duration::from_secs(180);
/// How long any other command may take (close and set_model wait for a running turn).
const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Envelopes held for a session not known yet (its assignment is on its way), at most.
const MAX_PENDING: usize = 50_000;

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
    revision: u64,
}

#[derive(Default)]
pub(super) struct State {
    pub nodes: HashMap<String, NodeState>,
    pub assignments: HashMap<String, Assignment>,
    pending: HashMap<String, Vec<(Envelope, Box<str>)>>,
    /// Each session's last stream sequence taken in, to write after it.
    pub last_sequence: HashMap<String, u64>,
    /// The stream sequence taken in last, to follow on from after a reconnect.
    followed: u64,
    /// Sessions being ended by `liveness` right now.
    pub ending: HashSet<String>,
    /// Sessions hosted here once: one no longer listed (an old dead one) takes nothing more.
    attached: HashSet<String>,
}

pub struct Cluster {
    pub(super) client: async_nats::Client,
    pub(super) deployment: Deployment,
    pub(super) stores: Stores,
    pub(super) manager: SessionManager,
    pub(super) state: Mutex<State>,
    pub(super) started: Instant,
    /// The mirrors' logs, this process's own; removed when it ends.
    mirror_dir: tempfile::TempDir,
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

    /// Follows a bucket's keys: the last value of each, then every change. A watch that
    /// fails (NATS restarted) is made again; replaying values already seen is harmless.
    async fn follow_bucket(
        self: Arc<Self>,
        mut watch: async_nats::jetstream::kv::Watch,
        nodes: bool,
    ) {
        loop {
            while let Some(entry) = watch.next().await {
                match entry {
                    Ok(entry) if nodes => self.node_entry(entry),
                    Ok(entry) => self.session_entry(entry),
                    Err(e) => {
                        tracing::warn!(target: "corral::cluster", error = %e, "watching a bucket; watching it again");
                        break;
                    }
                }
            }
            loop {
                tokio::time::sleep(Duration::from_millis(500)).await;
                let store = if nodes {
                    &self.stores.nodes
                } else {
                    &self.stores.sessions
                };
                match store.watch_with_history(">").await {
                    Ok(again) => {
                        watch = again;
                        break;
                    }
                    Err(e) => {
                        tracing::debug!(target: "corral::cluster", error = %e, "watching a bucket again")
                    }
                }
            }
        }
    }

    /// Takes a heartbeat read directly; whether it was newer than the last one seen.
    pub(super) fn node_entry_seen(&self, entry: async_nats::jetstream::kv::Entry) -> bool {
        let newer = lock(&self.state)
            .nodes
            .get(&entry.key)
            .is_none_or(|n| n.revision < entry.revision);
        self.node_entry(entry);
        newer
    }

    fn node_entry(&self, entry: async_nats::jetstream::kv::Entry) {
        let mut state = lock(&self.state);
        match entry.operation {
            Operation::Put => match serde_json::from_slice::<Announce>(&entry.value) {
                // A heartbeat seen again (a watch made again) is no sign of life.
                Ok(_)
                    if state
                        .nodes
                        .get(&entry.key)
                        .is_some_and(|n| n.revision >= entry.revision) => {}
                // Its name becomes a subject: only the key it is stored under, and a plain one.
                Ok(announce)
                    if announce.name != entry.key || !super::valid_node_name(&announce.name) =>
                {
                    tracing::warn!(target: "corral::cluster", node = %entry.key, "a heartbeat under another name than its key; ignored");
                }
                Ok(announce) => {
                    state.nodes.insert(
                        entry.key,
                        NodeState {
                            announce,
                            seen: Instant::now(),
                            withdrawn: false,
                            revision: entry.revision,
                        },
                    );
                }
                Err(e) => {
                    tracing::warn!(target: "corral::cluster", node = %entry.key, error = %e, "a heartbeat that is not a node's")
                }
            },
            Operation::Delete | Operation::Purge => {
                if let Some(node) = state.nodes.get_mut(&entry.key) {
                    node.withdrawn = true;
                    node.revision = entry.revision;
                }
            }
        }
    }

    fn session_entry(&self, entry: async_nats::jetstream::kv::Entry) {
        match entry.operation {
            Operation::Put => match serde_json::from_slice::<Assignment>(&entry.value) {
                Ok(assignment) => {
                    self.assigned(assignment);
                }
                Err(e) => {
                    tracing::warn!(target: "corral::cluster", session = %entry.key, error = %e, "an assignment that does not parse")
                }
            },
            Operation::Delete | Operation::Purge => {
                let mut state = lock(&self.state);
                state.assignments.remove(&entry.key);
                state.pending.remove(&entry.key);
            }
        }
    }

    /// Records an assignment; once its node opened the session, hosts its mirror.
    fn assigned(&self, assignment: Assignment) -> Option<Arc<Handle>> {
        lock(&self.state)
            .assignments
            .insert(assignment.session.clone(), assignment.clone());
        let opened = assignment.opened.clone()?;
        self.attach(&assignment, opened)
    }

    fn attach(&self, assignment: &Assignment, opened: Opened) -> Option<Arc<Handle>> {
        let id = assignment.session.clone();
        // Under the lock the consumer routes envelopes under: the pending ones go in first,
        // and nothing newer reaches the mirror before them.
        let mut state = lock(&self.state);
        if let Some(handle) = self.manager.get(&id)
            && handle.node().is_some()
        {
            return Some(handle);
        }
        let spec = RemoteSpec {
            meta: opened.meta,
            owner: assignment.owner.clone(),
            node: assignment.node.clone(),
            backend: opened.backend,
            queues_prompts: opened.queues_prompts,
            steers: opened.steers,
            log_dir: Some(self.mirror_dir.path().to_path_buf()),
            forward: self.forward(),
        };
        let handle = match self.manager.attach_remote(spec) {
            Ok(handle) => handle,
            Err(e) => {
                tracing::error!(target: "corral::cluster", session = %id, error = %e, "hosting a mirror");
                return None;
            }
        };
        for (envelope, json) in state.pending.remove(&id).unwrap_or_default() {
            handle.session.ingest(envelope, json);
        }
        state.attached.insert(id);
        Some(handle)
    }

    /// Follows the events stream from the start (after a reconnect: from where it was).
    async fn follow_events(self: Arc<Self>) {
        let filter = format!("{}.events.>", self.deployment.prefix);
        // Kept across reconnects: reading again starts at the first part of an envelope
        // not yet whole, so none is cut in two.
        let mut joiner = Joiner::default();
        loop {
            let after = lock(&self.state).followed;
            let start = joiner.oldest_partial().unwrap_or(after + 1);
            let deliver_policy = if start <= 1 {
                DeliverPolicy::All
            } else {
                DeliverPolicy::ByStartSequence {
                    start_sequence: start,
                }
            };
            let consumer = self
                .stores
                .stream
                .create_consumer(pull::OrderedConfig {
                    filter_subject: filter.clone(),
                    deliver_policy,
                    ..Default::default()
                })
                .await;
            let messages = match consumer {
                Ok(consumer) => consumer.messages().await,
                Err(e) => {
                    tracing::warn!(target: "corral::cluster", error = %e, "following the events stream");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            let mut messages = match messages {
                Ok(messages) => messages,
                Err(e) => {
                    tracing::warn!(target: "corral::cluster", error = %e, "following the events stream");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            while let Some(message) = messages.next().await {
                match message {
                    Ok(message) => self.take(&mut joiner, &message),
                    Err(e) => {
                        tracing::warn!(target: "corral::cluster", error = %e, "the events stream; following on");
                        break;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    fn take(&self, joiner: &mut Joiner, message: &async_nats::jetstream::Message) {
        let sequence = message.info().map(|i| i.stream_sequence).unwrap_or(0);
        let subject = message.subject.as_str();
        let Some(id) = subject.strip_prefix(&format!("{}.events.", self.deployment.prefix)) else {
            return;
        };
        let part = message
            .headers
            .as_ref()
            .and_then(|h| h.get(PART_HEADER))
            .map(|v| v.as_str().to_string());
        let whole = joiner.take(id, part.as_deref(), &message.payload, sequence);
        let mut state = lock(&self.state);
        state.followed = state.followed.max(sequence);
        let last = state.last_sequence.entry(id.to_string()).or_insert(0);
        *last = (*last).max(sequence);
        let Some(bytes) = whole else { return };
        let parsed = String::from_utf8(bytes)
            .map_err(|e| e.to_string())
            .and_then(|json| {
                serde_json::from_str::<Envelope>(&json)
                    .map(|envelope| (envelope, json.into_boxed_str()))
                    .map_err(|e| e.to_string())
            });
        let (envelope, json) = match parsed {
            // An envelope is taken only for the session its subject names.
            Ok((envelope, _)) if *envelope.session != *id => {
                tracing::warn!(target: "corral::cluster", session = %id, sequence, "an envelope of another session on this one's subject; dropped");
                return;
            }
            Ok(parsed) => parsed,
            Err(e) => {
                tracing::warn!(target: "corral::cluster", session = %id, sequence, error = %e, "an envelope that does not parse");
                return;
            }
        };
        match self.manager.get(id).filter(|h| h.node().is_some()) {
            Some(handle) => {
                handle.session.ingest(envelope, json);
            }
            None if state.attached.contains(id) => {}
            None => {
                let waiting = state.pending.entry(id.to_string()).or_default();
                if waiting.len() < MAX_PENDING {
                    waiting.push((envelope, json));
                }
            }
        }
    }

    /// How remote handles reach their node.
    fn forward(&self) -> Forward {
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
