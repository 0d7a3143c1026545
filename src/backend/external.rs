//! External agent backends: the model spec names an agent program instead of a model
//! (`claude[:<model>]`, `acp:<agent>[:<model>]`, `acp:cmd=<command line>`, `codex[:<model>]`).
//! [`ExternalContext`] is what every such backend starts from. Its tool calls, described as
//! a [`ToolAsk`], go through corral's one approver once [`confine`] has checked that every
//! path the call names stays beneath the session root.

pub mod confine;

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::event::PermissionToolCall;
use crate::policy::{Approval, Approver, Call, Caller, Policy};
use crate::session::Session;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExternalKind {
    Claude,
    Acp,
    Codex,
}

/// A parsed external model spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalSpec {
    pub kind: ExternalKind,
    /// For `acp:`: `opencode`, `gemini`, `claude` (claude-agent-acp), or `cmd=<command line>`.
    pub agent: Option<String>,
    pub model: Option<String>,
}

impl ExternalSpec {
    /// Whether `text` names an external agent rather than a model.
    pub fn is_external(text: &str) -> bool {
        let head = text.split(':').next().unwrap_or_default();
        matches!(head, "claude" | "acp" | "codex")
    }
}

impl std::fmt::Display for ExternalSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let head = match self.kind {
            ExternalKind::Claude => "claude",
            ExternalKind::Acp => "acp",
            ExternalKind::Codex => "codex",
        };
        f.write_str(head)?;
        if let Some(agent) = &self.agent {
            write!(f, ":{agent}")?;
        }
        if let Some(model) = &self.model {
            write!(f, ":{model}")?;
        }
        Ok(())
    }
}

impl FromStr for ExternalSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (head, rest) = text.split_once(':').unwrap_or((text, ""));
        let model = |s: &str| (!s.is_empty()).then(|| s.to_string());
        match head {
            "claude" => Ok(ExternalSpec {
                kind: ExternalKind::Claude,
                agent: None,
                model: model(rest),
            }),
            "codex" => Ok(ExternalSpec {
                kind: ExternalKind::Codex,
                agent: None,
                model: model(rest),
            }),
            "acp" => {
                if let Some(command) = rest.strip_prefix("cmd=") {
                    if command.trim().is_empty() {
                        return Err("acp:cmd= needs a command line".into());
                    }
                    return Ok(ExternalSpec {
                        kind: ExternalKind::Acp,
                        agent: Some(format!("cmd={command}")),
                        model: None,
                    });
                }
                let (agent, model_name) = rest.split_once(':').unwrap_or((rest, ""));
                match agent {
                    "opencode" | "gemini" | "claude" => Ok(ExternalSpec {
                        kind: ExternalKind::Acp,
                        agent: Some(agent.to_string()),
                        model: model(model_name),
                    }),
                    "" => Err(
                        "acp: needs an agent: acp:opencode, acp:gemini, acp:claude or \
                               acp:cmd=<command line>"
                            .into(),
                    ),
                    other => Err(format!(
                        "unknown ACP agent {other:?}: use opencode, gemini, claude or \
                         cmd=<command line>"
                    )),
                }
            }
            other => Err(format!("{other:?} is not an external agent")),
        }
    }
}

/// Where `scripts/install-agent-clis` puts the agent programs, under `$HOME`.
pub const AGENT_CLIS: &str = ".cache/corral-ci/agent-clis/node_modules/.bin";

/// An agent program to find: its command name, the npm package that has it, and the
/// variable that may point at it.
#[derive(Debug, Clone, Copy)]
pub struct Program {
    pub name: &'static str,
    pub package: &'static str,
    pub override_var: Option<&'static str>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FindError {
    #[error("{var}={path} is not an executable file; point it at {name} (npm package {package})")]
    BadOverride {
        var: &'static str,
        path: String,
        name: &'static str,
        package: &'static str,
    },
    #[error(
        "{name} is not installed: it is neither on PATH nor in ~/{AGENT_CLIS}; install it with \
         `npm install -g {package}` (or run scripts/install-agent-clis){hint}"
    )]
    NotFound {
        name: &'static str,
        package: &'static str,
        hint: String,
    },
}

/// The override variable when set, else `name` on PATH, else the copy
/// scripts/install-agent-clis installs. `var` reads the environment.
pub fn find_program(
    program: Program,
    var: impl Fn(&str) -> Option<String>,
) -> Result<PathBuf, FindError> {
    if let Some(override_var) = program.override_var
        && let Some(path) = var(override_var).filter(|p| !p.is_empty())
    {
        let candidate = PathBuf::from(&path);
        return if is_executable(&candidate) {
            Ok(candidate)
        } else {
            Err(FindError::BadOverride {
                var: override_var,
                path,
                name: program.name,
                package: program.package,
            })
        };
    }
    let installed = || {
        var("HOME")
            .map(|home| {
                std::path::Path::new(&home)
                    .join(AGENT_CLIS)
                    .join(program.name)
            })
            .filter(|candidate| is_executable(candidate))
    };
    on_path(program.name, &var)
        .or_else(installed)
        .ok_or_else(|| FindError::NotFound {
            name: program.name,
            package: program.package,
            hint: program
                .override_var
                .map(|v| format!(", or set {v} to its path"))
                .unwrap_or_default(),
        })
}

/// The first executable `name` on `$PATH`.
pub fn on_path(name: &str, var: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let path = var("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

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
    /// `<log_dir>/<session>.stderr.log`.
    pub stderr_log: Option<PathBuf>,
    /// Saves the agent's own session id in the session's metadata, for resuming.
    pub record_external_id: Box<dyn Fn(&str) + Send + Sync>,
    /// Let the agent load the project's own settings (`.claude/settings.json`, `.mcp.json`,
    /// `opencode.json`, `.gemini/settings.json`, `.codex/config.toml`): their hooks and MCP
    /// commands run outside corral's sandbox, so only the person opts in
    /// (`[agents] project_settings = true`).
    pub project_settings: bool,
}

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

impl ToolAsk {
    /// Decides the call with corral's approver, once every path it names is confined.
    pub async fn decide(&self, approver: &Approver, cancel: &CancellationToken) -> Approval {
        // Before any rule: the agent does the write itself once allowed, so no preset (not
        // even bypass) may let it touch a path outside the root.
        let ask = match confine::confine(self, approver.root()) {
            Ok(ask) => ask,
            Err(message) => {
                tracing::warn!(tool = %self.agent_tool, %message, "an external agent's call leads out of the root");
                return Approval::Deny { message };
            }
        };
        let call = Call {
            caller: Caller::Agent {
                tool: &ask.agent_tool,
            },
            tool: ask.corral_tool,
            args: &ask.args,
            tool_call: PermissionToolCall::pending(
                &ask.tool_call_id,
                &ask.title,
                ask.kind,
                ask.raw_input.clone(),
            ),
        };
        approver.decide(call, cancel).await
    }
}

#[cfg(test)]
mod tests;
