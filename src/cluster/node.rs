//! `corral node --nats URL`: runs sessions on this host for the control plane. Sessions are
//! hosted by a [`SessionManager`] exactly as `corral serve` hosts them (every backend, the
//! sandbox, worktrees); this module only connects it to NATS: the heartbeat, the command
//! subject, and a publisher per session.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{Value, json};

use super::publish::{Fenced, publish_session};
use super::wire::{Announce, Assignment, NodeCall, NodeReply, NodeRequest, OpenRequest, Opened};
use super::{Deployment, Stores, connect, stores, valid_node_name};
use crate::error::{Error, usage};
use crate::event::Status;
use crate::host::manager::{Handle, RemoteCall, SendError, SessionManager, TurnRequest};
use crate::host::open::agents_dir;

#[derive(Debug, Clone, Default)]
pub struct NodeArgs {
    pub nats: String,
    pub name: Option<String>,
    pub labels: Vec<String>,
    pub capacity: Option<usize>,
    /// Read by the surface that starts the node.
    pub config_path: Option<PathBuf>,
    pub no_instructions: bool,
}

/// Sessions a node runs at once unless `--capacity` says otherwise.
const DEFAULT_CAPACITY: usize = 8;

struct Node {
    name: String,
    /// This machine's host name, as announced.
    host: String,
    instance: String,
    labels: BTreeMap<String, String>,
    capacity: usize,
    deployment: Deployment,
    manager: SessionManager,
    stores: Stores,
    max_payload: usize,
    publishers: tokio_util::task::TaskTracker,
    /// Serializes opens, so two at once cannot both take the last place.
    opening: tokio::sync::Mutex<()>,
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

/// Runs the node until `shutdown` completes (a signal); then its sessions are closed, their last
/// envelopes published, and its heartbeat withdrawn.
pub async fn run(
    config: crate::config::Config,
    args: NodeArgs,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), Error> {
    let deployment = Deployment::from_config(&config.nats)?;
    let host = host_name();
    let name = args.name.clone().unwrap_or_else(|| host.clone());
    if !valid_node_name(&name) {
        return Err(usage(format!(
            "node name {name:?}: use letters, digits, '-' and '_' (at most 64), or pass --name"
        )));
    }
    let labels = super::wire::parse_labels(&args.labels).map_err(usage)?;
    let capacity = args.capacity.unwrap_or(DEFAULT_CAPACITY);
    if capacity == 0 {
        return Err(usage("--capacity must be at least 1"));
    }
    let client = connect(&args.nats, &config.nats, &format!("corral-node-{name}")).await?;
    let stores = stores(&client, &deployment).await?;
    let log_dir = agents_dir()?;
    // What a crashed run of this node left running ends before anything new starts.
    crate::host::open::clean_up_after_crashes(&log_dir);
    let node = Arc::new(Node {
        instance: crate::session::ids::secret_hex()[..16].to_string(),
        host,
        name,
        labels,
        capacity,
        manager: SessionManager::new(config.clone(), log_dir),
        max_payload: client.server_info().max_payload,
        deployment,
        stores,
        publishers: tokio_util::task::TaskTracker::new(),
        opening: tokio::sync::Mutex::new(()),
    });
    let mut commands = client
        .subscribe(node.deployment.node_subject(&node.name))
        .await
        .map_err(|e| Error::Runtime(format!("NATS subscribe: {e}")))?;
    // The first heartbeat before the announcement: a control plane may use the node as soon
    // as it is listed.
    node.heartbeat().await?;
    {
        use std::io::Write;
        let _ = writeln!(
            std::io::stdout(),
            "corral node: {} ({}) on {}, capacity {}",
            node.name,
            node.instance,
            args.nats,
            node.capacity
        );
        let _ = std::io::stdout().flush();
    }
    let stop = tokio_util::sync::CancellationToken::new();
    let beating = tokio::spawn(node.clone().beat(stop.clone()));
    let signal = shutdown;
    tokio::pin!(signal);
    loop {
        tokio::select! {
            () = &mut signal => break,
            () = stop.cancelled() => break,
            message = commands.next() => {
                let Some(message) = message else { break };
                let node = node.clone();
                let client = client.clone();
                tokio::spawn(async move {
                    let reply = node.handle(&message.payload).await;
                    if let Some(to) = message.reply {
                        let body = serde_json::to_vec(&reply).unwrap_or_default();
                        if let Err(e) = client.publish(to, body.into()).await {
                            tracing::warn!(target: "corral::node", error = %e, "replying to a command");
                        }
                    }
                });
            }
        }
    }
    stop.cancel();
    let _ = beating.await;
    drop(commands);
    node.manager.shutdown().await;
    crate::sandbox::process::wait_for_tool_processes(crate::sandbox::process::EXIT_WAIT).await;
    node.publishers.close();
    if tokio::time::timeout(Duration::from_secs(10), node.publishers.wait())
        .await
        .is_err()
    {
        tracing::warn!(target: "corral::node", "some sessions' last envelopes were not published");
    }
    // Gone on purpose: the control plane ends what is left of ours at once.
    let _ = node.stores.nodes.delete(&node.name).await;
    let _ = client.flush().await;
    Ok(())
}

impl Node {
    fn running(&self) -> usize {
        self.manager
            .list()
            .iter()
            .filter(|h| h.session.status() != Status::Dead)
            .count()
    }

    async fn heartbeat(&self) -> Result<(), Error> {
        let announce = Announce {
            name: self.name.clone(),
            instance: self.instance.clone(),
            labels: self.labels.clone(),
            capacity: self.capacity,
            running: self.running(),
            host: self.host.clone(),
            version: env!("CARGO_PKG_VERSION").to_string(),
        };
        let value = serde_json::to_vec(&announce).unwrap_or_default();
        self.stores
            .nodes
            .put(&self.name, value.into())
            .await
            .map(|_| ())
            .map_err(|e| Error::Runtime(format!("NATS heartbeat: {e}")))
    }

    /// Heartbeats until stopped. A node that cannot heartbeat for `dead_after` has been
    /// given up on by the control plane: it ends its sessions itself (their processes must
    /// not run on for nobody) and goes on as an empty node.
    async fn beat(self: Arc<Self>, stop: tokio_util::sync::CancellationToken) {
        let mut last_ok = Instant::now();
        let mut fenced = false;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(self.deployment.heartbeat) => {}
            }
            match tokio::time::timeout(self.deployment.heartbeat, self.heartbeat()).await {
                Ok(Ok(())) => {
                    last_ok = Instant::now();
                    fenced = false;
                }
                Ok(Err(e)) => tracing::warn!(target: "corral::node", error = %e, "heartbeat"),
                Err(_) => tracing::warn!(target: "corral::node", "heartbeat timed out"),
            }
            if !fenced && last_ok.elapsed() >= self.deployment.dead_after {
                fenced = true;
                tracing::error!(target: "corral::node", "no heartbeat for {} s: the control plane has ended this node's sessions; closing them", self.deployment.dead_after.as_secs());
                self.manager.shutdown().await;
            }
        }
    }

    async fn handle(&self, body: &[u8]) -> NodeReply {
        let request: NodeRequest = match serde_json::from_slice(body) {
            Ok(request) => request,
            Err(e) => return NodeReply::error("INVALID", format!("not a node command: {e}")),
        };
        match request.call {
            NodeCall::Open(open) => match self.open(&request.session, *open).await {
                Ok(value) => NodeReply::Ok(value),
                Err(reply) => reply,
            },
            NodeCall::Session(call) => self.session_call(&request.session, call).await,
        }
    }

    async fn open(&self, id: &str, request: OpenRequest) -> Result<Value, NodeReply> {
        let _one_at_a_time = self.opening.lock().await;
        // Only what the control plane recorded for this very node and start is opened.
        let entry = self
            .stores
            .sessions
            .entry(id)
            .await
            .map_err(|e| NodeReply::error("UNAVAILABLE", format!("NATS: {e}")))?
            .filter(|e| e.operation == async_nats::jetstream::kv::Operation::Put);
        let revision = entry.as_ref().map_or(0, |e| e.revision);
        let assignment: Option<Assignment> =
            entry.and_then(|e| serde_json::from_slice(&e.value).ok());
        match &assignment {
            Some(a)
                if a.node == self.name
                    && a.instance == self.instance
                    && a.owner == request.owner => {}
            _ => {
                return Err(NodeReply::error(
                    "FORBIDDEN",
                    format!("session {id} is not assigned to node {}", self.name),
                ));
            }
        }
        if self.running() >= self.capacity {
            return Err(NodeReply::error(
                "NODE_FULL",
                format!(
                    "node {} runs {} sessions, its capacity",
                    self.name, self.capacity
                ),
            ));
        }
        let spec = request
            .spec(Some(id.to_string()), &self.manager.config().mcp_servers)
            .map_err(|e| open_error(&e))?;
        let handle = self
            .manager
            .open(spec, &request.owner)
            .await
            .map_err(|e| open_error(&e))?;
        self.publish(&handle);
        let opened = Opened {
            meta: handle.meta.clone(),
            backend: handle.info().backend.to_string(),
            queues_prompts: handle.info().queues_prompts,
            steers: handle.steers(),
        };
        if let Some(mut assignment) = assignment {
            assignment.opened = Some(opened.clone());
            let value = serde_json::to_vec(&assignment).unwrap_or_default();
            // Only over the assignment it was given: one the control plane withdrew
            // meanwhile (it stopped waiting) is not brought back, and the session ends.
            if let Err(e) = self
                .stores
                .sessions
                .update(id, value.into(), revision)
                .await
            {
                tracing::warn!(target: "corral::node", session = id, error = %e, "the assignment changed while the session opened; closing it");
                let _ = self.manager.close(id).await;
                return Err(NodeReply::error(
                    "UNAVAILABLE",
                    format!("session {id}: its assignment was withdrawn while it opened"),
                ));
            }
        }
        Ok(json!({ "opened": opened, "info": handle.info() }))
    }

    /// Publishes the session's envelopes from its first; a session the control plane ended
    /// first (this node was given up on) is closed here too.
    fn publish(&self, handle: &Arc<Handle>) {
        let events = handle.session.tap(0);
        let subject = self.deployment.events_subject(handle.id());
        let js = self.stores.js.clone();
        let max_payload = self.max_payload;
        let manager = self.manager.clone();
        let id = handle.id().to_string();
        self.publishers.spawn(async move {
            if let Err(Fenced) = publish_session(js, subject, events, max_payload).await {
                tracing::warn!(target: "corral::node", session = %id, "the control plane ended this session: closing it");
                let _ = manager.close(&id).await;
            }
        });
    }

    async fn session_call(&self, id: &str, call: RemoteCall) -> NodeReply {
        let manager = &self.manager;
        let Some(handle) = manager.get(id) else {
            return NodeReply::error(
                "NOT_FOUND",
                format!("no session {id} on node {}", self.name),
            );
        };
        let outcome = match call {
            RemoteCall::Send {
                text,
                images,
                mode,
                effort,
                queue,
            } => {
                let request = TurnRequest {
                    mode,
                    effort,
                    queue,
                };
                match manager.send_with_images(id, &text, images, request) {
                    Ok(turn) => Ok(json!(turn)),
                    Err(e) => {
                        // The control plane accepted it: every client must see it was not run.
                        handle.session.emit_error(
                            format!("a message was not delivered: {e}"),
                            json!({"code": send_code(&e)}),
                        );
                        Err(send_reply(e))
                    }
                }
            }
            RemoteCall::Approve {
                request_id,
                decision,
            } => manager
                .answer(id, &request_id, decision)
                .map(|()| json!(true))
                .map_err(|e| NodeReply::error("NOT_FOUND", e.to_string())),
            RemoteCall::Cancel => manager.cancel(id).map(|c| json!(c)).map_err(send_reply),
            RemoteCall::SetModel { model } => match manager.set_model(id, &model).await {
                Ok(switched) => Ok(json!(switched)),
                Err(crate::host::manager::SetModelError::Send(e)) => Err(send_reply(e)),
                Err(e) => Err(NodeReply::error("INVALID", e.to_string())),
            },
            RemoteCall::Close => manager
                .close(id)
                .await
                .map(|c| json!(c))
                .map_err(send_reply),
        };
        match outcome {
            Ok(value) => NodeReply::Ok(value),
            Err(reply) => reply,
        }
    }
}

fn send_code(e: &SendError) -> &'static str {
    match e {
        SendError::NotFound(_) => "NOT_FOUND",
        SendError::Dead(_) => "SESSION_CLOSED",
        SendError::TurnInProgress(_) => "TURN_IN_PROGRESS",
    }
}

fn send_reply(e: SendError) -> NodeReply {
    NodeReply::error(send_code(&e), e.to_string())
}

/// The REST API's codes for a failed open.
fn open_error(e: &Error) -> NodeReply {
    let (code, message) = match e {
        Error::Usage(m) => ("INVALID", m),
        Error::Forbidden(m) => ("FORBIDDEN", m),
        Error::InUse(m) => ("SESSION_IN_USE", m),
        Error::Runtime(m) => ("MODEL_UNAVAILABLE", m),
    };
    NodeReply::error(code, message.clone())
}
