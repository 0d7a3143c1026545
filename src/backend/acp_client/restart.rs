//! Starting an ACP agent: its process, the JSON-RPC line transport, the handshake; and
//! starting it again after it died, on its own session (`session/load`), when the next message
//! needs it. The manager counts such crashes and gives up after a few in a row, as for claude.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::callbacks::{self, Shared};
use super::rpc::{Rpc, RpcError};
use super::{AUTH_REQUIRED, AcpBackend, Ready, handshake, tool_events};
use crate::backend::agent_process::{AgentProcess, Launch};
use crate::policy::Approver;
use crate::session::Session;

/// What starting the agent (again) takes.
pub(super) struct Relaunch {
    pub launch: Launch,
    pub root: PathBuf,
    /// `session/new`'s and `session/load`'s `_meta`.
    pub meta: Value,
    pub approver: Arc<Approver>,
    pub missing_reads_empty: bool,
    pub request_timeout: Duration,
    pub agent_name: String,
}

pub(super) struct Connected {
    pub process: AgentProcess,
    pub shared: Arc<Shared>,
    pub updates: mpsc::UnboundedReceiver<Value>,
    pub ready: Ready,
}

/// Starts the agent and its ACP session (`session/load` of `resume` when given and the agent
/// can). `Err`: what went wrong, for the person.
pub(super) async fn connect(
    relaunch: &Relaunch,
    session: &Arc<Session>,
    resume: Option<&str>,
) -> Result<Connected, String> {
    let agent_name = &relaunch.agent_name;
    let (mut process, pipes) = AgentProcess::spawn(&relaunch.launch).map_err(|e| e.to_string())?;
    let (rpc, mut incoming) = Rpc::start(pipes.stdin, pipes.stdout);
    let ready = match handshake(session, relaunch, resume, &rpc, &mut incoming).await {
        Ok(ready) => ready,
        Err(e) => {
            let report = match e {
                RpcError::Closed => format!(": {}", process.crash_report().await),
                RpcError::Remote {
                    code: AUTH_REQUIRED,
                    ..
                } => format!(
                    "; {agent_name} wants to be logged in: log in with its own command line \
                     once, or give it an API key in its environment"
                ),
                RpcError::Remote { .. } => String::new(),
            };
            process.stop(None).await;
            return Err(format!(
                "{agent_name} did not start an ACP session: {e}{report}"
            ));
        }
    };
    let tools = crate::tool::ToolRegistry::builtin().map_err(|e| format!("corral's tools: {e}"))?;
    let mut shared = Shared::new(
        rpc,
        relaunch.approver.clone(),
        relaunch.root.clone(),
        tool_events::Calls::new(session.clone()),
        tools,
    );
    shared.missing_reads_empty = relaunch.missing_reads_empty;
    shared.request_timeout = relaunch.request_timeout;
    let shared = Arc::new(shared);
    shared.set_config_options(&ready.config_options);
    let (updates_tx, updates) = mpsc::unbounded_channel();
    tokio::spawn(callbacks::dispatch(shared.clone(), incoming, updates_tx));
    Ok(Connected {
        process,
        shared,
        updates,
        ready,
    })
}

impl AcpBackend {
    /// The agent died (`what` says how): the session stays, and the agent is started again on
    /// its session before the next turn.
    pub(super) fn note_crash(&mut self, what: String) {
        self.session.emit_error(
            format!("{what}; it is started again on its session when the next message comes"),
            json!({"agent": self.agent_name}),
        );
        self.crashed = true;
        self.crash_untold = true;
    }

    /// Starts the agent again after a crash, loading its session.
    pub(super) async fn start_again(&mut self) -> Result<(), String> {
        if !self.crashed {
            return Ok(());
        }
        self.process.stop(None).await;
        let session = self.session.clone();
        let connected = connect(&self.relaunch, &session, Some(&self.session_id)).await?;
        self.process = connected.process;
        self.shared = connected.shared;
        self.updates = connected.updates;
        self.session_id = connected.ready.session_id;
        self.queues_prompts = connected.ready.queues_prompts;
        self.models = connected.ready.models;
        self.can_load = connected.ready.can_load;
        // The new process starts at its own defaults: the next turn applies the effort anew.
        self.effort = super::effort::Applied::default();
        self.crashed = false;
        tracing::info!(agent = %self.agent_name, "ACP agent started again on its session");
        Ok(())
    }
}
