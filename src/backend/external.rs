//! External agent backends: the model spec names an agent program instead of a model
//! (`claude[:<model>]`, `acp:<agent>[:<model>]`, `acp:cmd=<command line>`, `codex[:<model>]`).
//! [`ExternalContext`] is what every such backend starts from. Its tool calls, described as
//! a [`ToolAsk`], go through corral's one approver once [`confine`] has checked that every
//! path the call names stays beneath the session root.

pub mod confine;
pub mod voucher;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::event::PermissionToolCall;
use crate::model::ExternalSpec;
use crate::policy::{Approval, Approver, Call, Caller, Policy};
use crate::session::Session;

/// Everything an external backend starts from.
pub struct ExternalContext {
    pub session: Arc<Session>,
    pub spec: ExternalSpec,
    /// The canonical session root (the worktree when there is one): the agent's cwd.
    pub root: PathBuf,
    pub policy: Policy,
    pub approver: Arc<Approver>,
    /// The agent's own session/thread id to continue (`--resume`, `session/load`).
    pub resume: Option<String>,
    /// A private HOME/config dir for the agent (hermetic mode), else `None`.
    pub home: Option<PathBuf>,
    /// The session's private temp dir, removed with the session: an agent that sandboxes its
    /// own commands gets a directory in it as `TMPDIR` instead of the shared `/tmp`.
    pub tmpdir: PathBuf,
    /// `<log_dir>/<session>.stderr.log`.
    pub stderr_log: Option<PathBuf>,
    /// Saves the agent's own session id in the session's metadata, for resuming.
    pub record_external_id: Box<dyn Fn(&str) + Send + Sync>,
    /// Let the agent load the project's own settings (`.claude/settings.json`, `.mcp.json`,
    /// `opencode.json`, `.gemini/settings.json`, `.codex/config.toml`): their hooks and MCP
    /// commands run outside corral's sandbox, so only the person opts in
    /// (`[agents] project_settings = true`).
    pub project_settings: bool,
    /// The request's `system` text (`--system`, `system_prompt`): instructions added to the
    /// agent's own (claude `--append-system-prompt`, codex `developerInstructions`, an ACP
    /// agent's first prompt).
    pub system: Option<String>,
    /// The effort the agent starts at (claude `--effort`; others take it through
    /// [`Backend::set_effort`](super::Backend::set_effort)); `None`: its own default.
    pub effort: Option<crate::model::Effort>,
    /// How long an ACP agent's request (`session/request_permission`, `fs/*`) may wait for a
    /// person before corral answers it with a refusal ([`DEFAULT_ACP_PERMISSION_TIMEOUT`],
    /// `[agents] acp_permission_timeout_secs`).
    pub acp_permission_timeout: Duration,
}

/// The longest an ACP agent's request waits for a person, unless configured. Agents that
/// bound their requests to the client do so at 60 s (hermes-agent, MCP-style JSON-RPC
/// clients); corral answers before that, with a refusal, so the agent goes on knowing the
/// call was not allowed instead of timing out on its side with the question still open here.
/// claude-agent-acp, gemini and opencode wait without a limit; for them this is what keeps a
/// question nobody sees from holding the turn forever.
pub const DEFAULT_ACP_PERMISSION_TIMEOUT: Duration = Duration::from_secs(50);

/// A tool call an external agent wants to make, described in corral's terms.
#[derive(Debug, Clone)]
pub struct ToolAsk {
    /// The agent's id for the call.
    pub tool_call_id: String,
    /// The agent's tool name (`Bash`, `run_shell_command`, `commandExecution`).
    pub agent_tool: String,
    /// The corral tool it amounts to (`shell`, `read_file`, `write_file`, `search_files`,
    /// `list_directory`, `open_url`), whose rules and danger apply; `None`: none does.
    pub corral_tool: Option<&'static str>,
    /// Arguments in the corral tool's shape (`{"command"}`, `{"path","content"}`, …).
    pub args: Value,
    /// A short title for the person asked.
    pub title: String,
    /// ACP tool kind: read, edit, search, execute, fetch, other.
    pub kind: &'static str,
    /// The agent's own input, shown as is.
    pub raw_input: Value,
    /// Every other path the call names (files besides `args.path`, a command's working
    /// directory, a search's base), as the agent gave them: each must resolve beneath the root.
    pub paths: Vec<String>,
}

/// How an agent's call reached corral: it asked permission for its own tool, or corral does
/// the file I/O itself (ACP `fs/*`), which a preset may let run unasked (`allow_acp_fs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Asked,
    AcpFs,
}

impl ToolAsk {
    /// Decides the call with corral's approver, once every path it names is confined.
    pub async fn decide(&self, approver: &Approver, cancel: &CancellationToken) -> Approval {
        self.decide_until(approver, cancel, Route::Asked, None)
            .await
    }

    /// [`decide`](Self::decide) for a call that reached corral by `route`, from an agent that
    /// waits for the answer only until `until` (its request times out): a person who has not
    /// answered by then is not waited for.
    pub async fn decide_until(
        &self,
        approver: &Approver,
        cancel: &CancellationToken,
        route: Route,
        until: Option<tokio::time::Instant>,
    ) -> Approval {
        // Before any rule: the agent does the write itself once allowed, so no preset (not
        // even bypass) may let it touch a path outside the root.
        let ask = match confine::confine(self, approver.root()) {
            Ok(ask) => ask,
            Err(message) => {
                tracing::warn!(tool = %self.agent_tool, %message, "an external agent's call leads out of the root");
                return Approval::Deny { message };
            }
        };
        let tool = ask.agent_tool.as_str();
        let call = Call {
            caller: match route {
                Route::Asked => Caller::Agent { tool },
                Route::AcpFs => Caller::AgentFiles { tool },
            },
            tool: ask.corral_tool,
            args: &ask.args,
            tool_call: PermissionToolCall::pending(
                &ask.tool_call_id,
                &ask.title,
                ask.kind,
                ask.raw_input.clone(),
            ),
            target: None,
        };
        approver.decide_until(call, cancel, until).await
    }
}

#[cfg(test)]
mod tests;
