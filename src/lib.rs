//! corral: a sandboxed, tool-executing agent runtime with its own LLM loop.
//!
//! Modules are private; this file is the crate's public face.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod backend;
mod cluster;
mod config;
mod error;
mod event;
mod host;
mod llm_loop;
mod model;
mod policy;
mod sandbox;
mod session;
mod surface;
mod tool;
mod worktree;

pub use cluster::NodeArgs;
pub use config::{Config, ConfigError, McpServer, McpServers, McpTransport};

/// `--mcp-config FILE`: the MCP servers it defines (JSON `{"mcpServers": …}` or TOML
/// `[mcp_servers.NAME]`), checked.
pub fn load_mcp_config(path: &std::path::Path) -> Result<McpServers, Error> {
    config::mcp::load_file(path).map_err(error::usage)
}
pub use error::Error;
pub use event::*;
pub use host::lifecycle;
pub use host::manager::{SessionInfo, SessionManager, TurnMode, TurnRequest};
pub use host::open::OpenSpec;
/// For the fuzz targets in `fuzz/`: not part of the API.
#[doc(hidden)]
pub use llm_loop::recover::fuzz_recover;
pub use llm_loop::{LlmLoop, LoopConfig, PromptMode};
pub use model::{
    BaseUrlSource, ChatRequest, ChoiceError, Effort, HttpSettings, Image, Message, ModelChoice,
    ModelClient, ModelError, ModelEvent, ModelInfo, ModelSpec, OllamaClient, OpenAiClient,
    Provider, RetryPolicy, Role, SpecError, TokenCounts, ToolCall, ToolChoice, ToolChoiceMode,
    ToolSchema, Wire, capabilities_of, resolve_base_url, split_effort_suffix,
};
pub use policy::{Decision, Policy, PolicyError, PolicyOverrides};
pub use sandbox::{
    HELPER_COMMAND as SANDBOX_HELPER_COMMAND, NetworkMode, SandboxMode, SandboxSpec,
    SandboxSupport, close_inherited_fds, end_own_children, sandbox_exec_main,
};
pub use session::{
    Session, SessionError, SessionMeta, Subscription, TurnOutcome, log_path, read_log,
};
pub use surface::acp::{AcpArgs, acp};
pub use surface::cli_docs::{write_completions, write_man_page};
pub use surface::doctor::doctor;
pub use surface::eval::{EvalArgs, TaskResult, eval};
pub use surface::init::{InitArgs, init};
pub use surface::logs_cli::{LogsArgs, logs_main};
pub use surface::mcp::{DEFAULT_APPROVAL_TIMEOUT, mcp};
pub use surface::mcp_servers::{McpServersArgs, McpServersCommand, McpServersOutput, mcp_servers};
pub use surface::node::node;
pub use surface::policies::{list_policies, show_policy};
pub use surface::run::load_config;
pub use surface::run::{Exit, RunArgs, run};
pub use surface::safe_text::{SafeWriter, escape as escape_for_terminal};
pub use surface::server::auth::{
    Auth, AuthError, Role as ServerRole, default_secret_path, load_secret, parse_ttl,
};
pub use surface::server::{LogHub, ServeArgs, serve};
pub use surface::sessions_cli::sessions_main;
pub use surface::top::{TopArgs, top};
pub use surface::tui::theme::Theme as TuiTheme;
pub use surface::tui::{ChatArgs, Conversation, chat};
pub use surface::worktree_cli::{WorktreeCommand, worktree_main};
pub use tool::clipboard_helper_main;
pub use tool::{
    Danger, Tool, ToolContext, ToolError, ToolManifest, ToolOutput, ToolRegistry, manifests,
};
