//! `corral mcp`: an MCP server over stdio (rmcp) that owns agents, one corral session each,
//! so another agent (Claude Code, an editor, a script) can open, drive, approve and close
//! them. Every tool returns one JSON text block (`agent_pending` adds the image blocks of
//! desktop actions' screenshots).
//!
//! Errors the caller can fix (no such agent, a bad directory, a turn already running) come
//! back as tool results with `isError: true`; unknown tools and malformed arguments are
//! protocol errors, as rmcp produces them.
//!
//! Recursion guard: corral's own sessions have no `agent_*` tools (their registry holds the
//! file, shell, search and desktop tools only), so an agent opened here cannot open agents
//! in turn; the guard holds without a deny list (unless the caller's own `mcp_config` names
//! `corral mcp` as a server: the caller is the person's tool, and that is its choice).
//!
//! Sessions opened here are attended (the manager marks them so): a tool call that needs
//! approval waits in `agent_pending` until `agent_approve` answers it, or is denied when the
//! approval timeout (config `approval_timeout_secs`, else [`DEFAULT_APPROVAL_TIMEOUT`])
//! runs out, with a note saying so.

mod open;
mod output;
mod pending;
mod status;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock};
use rmcp::{ErrorData, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use serde::Deserialize;
use serde_json::{Value, json};

pub use self::open::OpenParams;
use self::output::{Buffer, OutputRequest};
use super::run::{Exit, load_session_config};
use crate::error::Error;
use crate::event::Payload;
use crate::host::manager::{SessionManager, TurnRequest};
use crate::host::open::{OpenSpec, agents_dir, parse_model_and_effort};
use crate::policy::Decision;

/// A permission request nobody answers is denied after this long: an MCP client may never
/// look at `agent_pending`, and a turn must not hang forever on it.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(600);

/// `agent_run` gives up waiting (the turn goes on) after this long unless told otherwise.
const DEFAULT_RUN_TIMEOUT: Duration = Duration::from_secs(600);

/// The owner recorded on every session opened here.
const OWNER: &str = "mcp";

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct AgentParams {
    pub agent_id: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SendParams {
    pub agent_id: String,
    /// The user message.
    pub text: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct RunParams {
    pub agent_id: String,
    /// The user message.
    pub text: String,
    /// Seconds to wait for the turn to end (default 600); the turn goes on after it.
    pub timeout: Option<f64>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SetModelParams {
    pub agent_id: String,
    pub model: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ApproveParams {
    pub agent_id: String,
    /// The `requestId` of an entry of `agent_pending`.
    pub request_id: String,
    /// allow, allow_all, deny, disable, forbid_all or cancel.
    pub decision: String,
}

#[derive(Default)]
struct Buffers(Mutex<HashMap<String, Arc<Buffer>>>);

impl Buffers {
    fn get(&self, id: &str) -> Option<Arc<Buffer>> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned()
    }

    /// Adds a session's buffer and drops those of sessions the manager no longer lists (closed
    /// ones beyond the retained dead), so a long-running server's memory stays bounded.
    fn insert(&self, id: &str, buffer: Arc<Buffer>, listed: impl Fn(&str) -> bool) {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|known, _| listed(known));
        map.insert(id.to_string(), buffer);
    }
}

#[derive(Clone)]
pub struct McpServer {
    manager: SessionManager,
    /// Each agent's envelopes, for the non-blocking `agent_output`.
    buffers: Arc<Buffers>,
}

fn ok(value: Value) -> Result<CallToolResult, ErrorData> {
    Ok(CallToolResult::success(vec![ContentBlock::text(
        value.to_string(),
    )]))
}

/// A failure the caller should read: a tool result with `isError: true`.
fn fail(message: impl ToString) -> Result<CallToolResult, ErrorData> {
    Ok(CallToolResult::error(vec![ContentBlock::text(
        json!({"error": message.to_string()}).to_string(),
    )]))
}

#[tool_router]
impl McpServer {
    pub fn new(manager: SessionManager) -> McpServer {
        McpServer {
            manager,
            buffers: Arc::new(Buffers::default()),
        }
    }

    #[tool(
        description = "Open an agent (a corral session) working in cwd. Returns {\"agent_id\"}. \
        Reopening the id of a closed agent reuses its slot. mcp_config gives the agent MCP \
        servers (their tools appear as SERVER__TOOL, behind the same approvals): \
        {\"mcpServers\": {\"NAME\": {\"command\", \"args\", \"env\"} | {\"url\", \"headers\"}}}, \
        the map itself, or the path of such a file."
    )]
    async fn agent_open(
        &self,
        Parameters(p): Parameters<OpenParams>,
    ) -> Result<CallToolResult, ErrorData> {
        if let Some(refusal) = open::unknown_fields(&p) {
            return fail(refusal);
        }
        let cwd = PathBuf::from(&p.cwd);
        if !cwd.is_dir() {
            return fail(format!("cwd {:?} is not an existing directory", p.cwd));
        }
        let approval_timeout = self
            .manager
            .config()
            .approval_timeout_secs
            .map_or(DEFAULT_APPROVAL_TIMEOUT, Duration::from_secs);
        let mut mcp_servers = match open::mcp_servers(p.mcp_config.as_ref(), &cwd) {
            Ok(servers) => servers,
            Err(e) => return fail(e),
        };
        let only = p.only_tools();
        // As Kaimon's agent_open: absent, the recursion guard; `[]`, the caller deliberately
        // allows nested agents; a list, the guard plus those tools.
        let nested_agents = p.disallowed_tools.as_ref().is_some_and(Vec::is_empty);
        let mut deny = p.disallowed_tools.unwrap_or_default();
        if let Some(only) = &only {
            let tools = match crate::tool::ToolRegistry::builtin() {
                Ok(tools) => tools,
                Err(e) => return fail(e),
            };
            let unknown = only
                .iter()
                .find(|name| tools.get(name).is_none() && !crate::tool::is_mcp_name(name));
            if let Some(unknown) = unknown {
                let known: Vec<&str> = tools.names().collect();
                return fail(format!(
                    "unknown tool {unknown:?} in only; tools: {}",
                    known.join(", ")
                ));
            }
            deny.extend(
                tools
                    .names()
                    .filter(|name| !only.iter().any(|o| o == name))
                    .map(str::to_string),
            );
            let mut every = self.manager.config().mcp_servers.clone();
            every.extend(mcp_servers);
            mcp_servers = match open::narrow_to_only(only, &every) {
                Ok(servers) => servers,
                Err(e) => return fail(e),
            };
        }
        let mode = match p.permission_mode.as_deref().map(open::permission_mode) {
            Some(Err(e)) => return fail(e),
            Some(Ok(mode)) => mode,
            None => open::ModeOverride::default(),
        };
        let effort = match p.effort.as_deref().map(str::parse::<crate::model::Effort>) {
            Some(Err(e)) => return fail(e),
            Some(Ok(effort)) => Some(effort),
            None => None,
        };
        let (model, effort) = match p.model.as_deref() {
            Some(text) => match parse_model_and_effort(text, effort, None) {
                Err(e) => return fail(e),
                Ok((model, effort)) => (Some(model), effort),
            },
            None => (None, effort),
        };
        let spec = OpenSpec {
            id: p.id,
            cwd: Some(cwd),
            model,
            base_url: p.base_url,
            system: p.system_prompt,
            // An explicit permission_mode overrides the preset's mode.
            permission: mode.preset.map(str::to_string).or(p.permission),
            auto_approve: mode.auto_approve,
            allow: p.allowed_tools.unwrap_or_default(),
            deny,
            nested_agents,
            worktree: p.worktree.unwrap_or(false),
            effort,
            hermetic: p.hermetic.unwrap_or(false),
            approval_timeout: Some(approval_timeout),
            mcp_servers,
            ..OpenSpec::default()
        };
        let handle = match self.manager.open(spec, OWNER).await {
            Ok(handle) => handle,
            Err(e) => return fail(e),
        };
        // Tapped from the first envelope, so the buffer misses nothing of this session.
        let buffer = Arc::new(Buffer::default());
        let manager = self.manager.clone();
        self.buffers
            .insert(handle.id(), buffer.clone(), |id| manager.get(id).is_some());
        let mut events = handle.session.tap(0);
        tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                let dead = matches!(&event.envelope.payload,
                    Payload::Status(s) if s.status == crate::event::Status::Dead);
                buffer.push(&event.envelope);
                if dead {
                    break;
                }
            }
        });
        // What opening could not honour (an effort the model cannot take) is said here too,
        // not only in the agent's events.
        let mut notes = Vec::new();
        let mut early = handle.session.tap(0);
        while let Ok(event) = early.try_recv() {
            if let Payload::Error(e) = &event.envelope.payload
                && e.data["code"] == "EFFORT_NOT_APPLIED"
            {
                notes.push(e.message.clone());
            }
        }
        let mut opened = json!({"agent_id": handle.id()});
        if !notes.is_empty() {
            opened["notes"] = json!(notes);
        }
        ok(opened)
    }

    #[tool(
        description = "Send a user turn to an agent without waiting. Returns {\"turn\": n}; \
        poll agent_output for its progress."
    )]
    async fn agent_send(
        &self,
        Parameters(p): Parameters<SendParams>,
    ) -> Result<CallToolResult, ErrorData> {
        // Kaimon's agent_send: a message while a turn runs steers it where the agent can,
        // else waits for the next turn.
        let request = TurnRequest {
            queue: true,
            ..TurnRequest::default()
        };
        match self.manager.send(&p.agent_id, &p.text, request) {
            Ok(turn) => ok(json!({"turn": turn})),
            Err(e) => fail(e),
        }
    }

    #[tool(
        description = "Send a user turn and wait until it ends (or timeout seconds pass). \
        Returns {\"text\"}: the final assistant message. Tool calls that need approval still \
        wait for agent_approve."
    )]
    async fn agent_run(
        &self,
        Parameters(p): Parameters<RunParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let Some(handle) = self.manager.get(&p.agent_id) else {
            return fail(format!("no agent {}", p.agent_id));
        };
        let limit = match p
            .timeout
            .map(|secs| crate::config::seconds("timeout", secs))
        {
            Some(Ok(limit)) => limit,
            Some(Err(e)) => return fail(e),
            None => DEFAULT_RUN_TIMEOUT,
        };
        // Tapped before the turn is sent, so its result cannot slip past.
        let mut events = handle.session.tap(handle.session.last_seq());
        let turn = match self
            .manager
            .send(&p.agent_id, &p.text, TurnRequest::default())
        {
            Ok(turn) => turn,
            Err(e) => return fail(e),
        };
        let waited = tokio::time::timeout(limit, crate::session::turn_end(&mut events, turn)).await;
        match waited {
            Ok(Some((result, _))) if result.error.is_some() => fail(format!(
                "turn {turn} ended with an error: {}",
                result.error.unwrap_or_default()
            )),
            Ok(Some((_, text))) => ok(json!({"text": text})),
            Ok(None) => fail(format!("agent {} closed during turn {turn}", p.agent_id)),
            Err(_) => fail(format!(
                "turn {turn} still running after {:.0} s; it goes on: poll agent_output, \
                 or agent_interrupt it",
                limit.as_secs_f64()
            )),
        }
    }

    #[tool(
        description = "Read an agent's output without blocking (partial while it works). \
        which: last_message (default) | full_turn | all; turn defaults to the latest; \
        include_tools adds tool calls and results; max_chars (default 20000) keeps the end. \
        Returns {agent_id, turn, status, done, text, truncated, dropped_chars, usage}, and \
        instructions [{path, bytes, truncated}] when the agent loaded project instructions."
    )]
    async fn agent_output(
        &self,
        Parameters(p): Parameters<OutputRequest>,
    ) -> Result<CallToolResult, ErrorData> {
        let Some(handle) = self.manager.get(&p.agent_id) else {
            return fail(format!("no agent {}", p.agent_id));
        };
        let Some(buffer) = self.buffers.get(&p.agent_id) else {
            return fail(format!("agent {} was not opened here", p.agent_id));
        };
        // The status is read first: the output then holds at least what led up to it.
        let status = handle.session.status();
        buffer.caught_up(handle.session.last_seq()).await;
        match buffer.render(&p, status, handle.info().usage) {
            Ok(value) => ok(value),
            Err(message) => fail(message),
        }
    }

    #[tool(
        description = "An agent's state: status, model, cwd, turn, usage, event_log, \
        pending_permissions …"
    )]
    async fn agent_status(
        &self,
        Parameters(p): Parameters<AgentParams>,
    ) -> Result<CallToolResult, ErrorData> {
        match self.manager.get(&p.agent_id) {
            Some(handle) => ok(status::status(&handle)),
            None => fail(format!("no agent {}", p.agent_id)),
        }
    }

    #[tool(description = "Every agent, live and recently closed. Returns {\"agents\": [...]}.")]
    async fn agent_list(&self) -> Result<CallToolResult, ErrorData> {
        let agents: Vec<Value> = self
            .manager
            .list()
            .iter()
            .map(|h| status::status(h))
            .collect();
        ok(json!({"agents": agents}))
    }

    #[tool(
        description = "Cancel the agent's running turn, if any. Returns {\"interrupted\": bool}."
    )]
    async fn agent_interrupt(
        &self,
        Parameters(p): Parameters<AgentParams>,
    ) -> Result<CallToolResult, ErrorData> {
        match self.manager.cancel(&p.agent_id) {
            Ok(interrupted) => ok(json!({"interrupted": interrupted})),
            Err(e) => fail(e),
        }
    }

    #[tool(
        description = "Close an agent: its turn is cancelled and its processes stopped; it \
        stays listed as dead for review. Returns {\"closed\": bool}."
    )]
    async fn agent_close(
        &self,
        Parameters(p): Parameters<AgentParams>,
    ) -> Result<CallToolResult, ErrorData> {
        match self.manager.close(&p.agent_id).await {
            Ok(closed) => ok(json!({"closed": closed})),
            Err(e) => fail(e),
        }
    }

    #[tool(
        description = "Switch an agent's model keeping its history (waits for a running turn \
        to end). Returns {\"switched\": true|false, \"model\"}; false where the agent's \
        backend cannot switch (close and reopen it instead)."
    )]
    async fn agent_set_model(
        &self,
        Parameters(p): Parameters<SetModelParams>,
    ) -> Result<CallToolResult, ErrorData> {
        match self.manager.set_model(&p.agent_id, &p.model).await {
            Ok(switched) => {
                let model = self
                    .manager
                    .get(&p.agent_id)
                    .map(|h| h.info().model)
                    .unwrap_or_default();
                ok(json!({"switched": switched, "model": model}))
            }
            Err(e) => fail(e),
        }
    }

    #[tool(
        description = "The agent's open permission requests (tool calls waiting for \
        approval). Returns {\"agent_id\", \"pending\": [{requestId, ...}]}; a desktop \
        action's marked screenshot follows as an image block, named in its desktop.image."
    )]
    async fn agent_pending(
        &self,
        Parameters(p): Parameters<AgentParams>,
    ) -> Result<CallToolResult, ErrorData> {
        match self.manager.get(&p.agent_id) {
            Some(handle) => Ok(pending::pending_result(
                &p.agent_id,
                &handle.session.pending_permissions(),
            )),
            None => fail(format!("no agent {}", p.agent_id)),
        }
    }

    #[tool(
        description = "Answer a permission request from agent_pending. decision: allow, \
        allow_all, deny, disable, forbid_all or cancel. Returns {\"answered\": true}."
    )]
    async fn agent_approve(
        &self,
        Parameters(p): Parameters<ApproveParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let decision: Decision = match p.decision.parse() {
            Ok(decision) => decision,
            Err(e) => return fail(e),
        };
        if self.manager.get(&p.agent_id).is_none() {
            return fail(format!("no agent {}", p.agent_id));
        }
        match self.manager.answer(&p.agent_id, &p.request_id, decision) {
            Ok(()) => ok(json!({"answered": true, "decision": decision.as_str()})),
            Err(e) => fail(e),
        }
    }
}

#[tool_handler(
    name = "corral",
    instructions = "corral agents: agent_open an agent in a directory, agent_send a turn and \
    poll agent_output (or agent_run and wait), answer tool approvals with agent_pending and \
    agent_approve, agent_close when done."
)]
impl ServerHandler for McpServer {}

/// Serves MCP on stdin/stdout until the client closes stdin; then closes every session
/// (and so every process they started). Logs go to stderr only: stdout is the protocol.
pub async fn mcp(config_path: Option<PathBuf>, no_instructions: bool) -> Result<Exit, Error> {
    let config = load_session_config(config_path.as_ref(), no_instructions)?;
    let log_dir = agents_dir()?;
    crate::host::open::clean_up_after_crashes(&log_dir);
    let manager = SessionManager::new(config, log_dir);
    let server = McpServer::new(manager.clone());
    let served = match server.serve(rmcp::transport::stdio()).await {
        Ok(running) => running
            .waiting()
            .await
            .map(|_| ())
            .map_err(|e| Error::Runtime(format!("MCP server task failed: {e}"))),
        Err(e) => Err(Error::Runtime(format!("MCP initialization failed: {e}"))),
    };
    manager.shutdown().await;
    crate::sandbox::process::wait_for_tool_processes(crate::sandbox::process::EXIT_WAIT).await;
    served.map(|()| Exit::Ok)
}
