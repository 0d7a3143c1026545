//! [`OpenSpec`]: what a session is opened with.

use std::path::PathBuf;
use std::time::Duration;

use super::Limits;
use crate::model::{ModelChoice, ToolChoiceMode};
use crate::sandbox::{NetworkMode, SandboxMode};
use crate::tool::Danger;

/// What a session is opened with, whoever asks: `corral run`'s flags, a REST, MCP or ACP
/// request. Unset fields fall back to the config, then to defaults (resolved once into `Settings`).
#[derive(Debug, Clone, Default)]
pub struct OpenSpec {
    /// A caller-chosen id (a dormant session reopened, a delegate's); `None`: a fresh 8-hex id.
    pub id: Option<String>,
    /// Continue the session with this id from its event log. An unbounded caller may give a
    /// unique prefix of it.
    pub resume: Option<String>,
    /// `--continue`: resume the most recently active session of this directory.
    pub continue_last: bool,
    /// A person's one run (`corral run`, the session view): if no model is ever reached, the
    /// session leaves no files behind.
    pub discard_unused: bool,
    pub cwd: Option<PathBuf>,
    pub model: Option<ModelChoice>,
    pub base_url: Option<String>,
    pub system: Option<String>,
    pub permission: Option<String>,
    pub auto_approve: Option<Danger>,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    /// Lifts the recursion guard: the agent may open and drive agents (MCP `agent_open`'s
    /// `disallowed_tools: []`). Default: the guard holds.
    pub nested_agents: bool,
    pub max_steps: Option<u32>,
    pub tool_choice: Option<ToolChoiceMode>,
    /// Compact or full prompt (`--prompt`).
    pub prompt: Option<crate::model::PromptMode>,
    /// How hard the model reasons (`--effort`, a request's `effort`, a `/high` model suffix).
    pub effort: Option<crate::model::Effort>,
    pub worktree: bool,
    pub sandbox: Option<SandboxMode>,
    pub network: Option<NetworkMode>,
    /// Someone can answer permission requests.
    pub attended: bool,
    /// An external agent gets a private HOME instead of the user's.
    pub hermetic: bool,
    /// An editor serving file reads/writes for the tools (an ACP client's `fs/*`).
    pub editor: Option<crate::tool::EditorLink>,
    pub approval_timeout: Option<Duration>,
    /// The owner recorded in a new session's metadata. With `resume` and `limits`: the owner
    /// the resumed session must have been recorded with.
    pub owner: Option<String>,
    /// Bounds of a caller who is not the host's owner (a server `user` token); `None`: the
    /// person at the terminal or an admin, unbounded.
    pub limits: Option<Limits>,
    /// MCP servers of this session on top of the config's (same name: this one wins):
    /// `--mcp-config`, `agent_open`'s `mcp_config`, an ACP client's `mcpServers`, an admin's
    /// REST `mcp_servers`. Trusted callers only ([`Limits`] refuses them).
    pub mcp_servers: crate::config::McpServers,
    /// Only these of the config's servers (and every one of `mcp_servers`); `None`: all.
    pub mcp_select: Option<Vec<String>>,
    /// The session that delegated this one (a sub-session does not delegate again).
    pub parent: Option<String>,
    /// Where permission requests go instead of this session (a sub-session's: its parent's).
    pub desk: Option<crate::policy::DeskLink>,
    /// The manager that hosts delegated sub-sessions (listed there with their parent);
    /// `None`: a private one (`corral run`).
    pub delegate_host: Option<crate::host::manager::SessionManager>,
}
