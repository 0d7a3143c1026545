//! External agent backends: the model spec names an agent program instead of a model
//! (`claude[:<model>]`, `acp:<agent>[:<model>]`, `acp:cmd=<command line>`, `codex[:<model>]`).
//! [`ExternalContext`] is what every such backend starts from; [`Approver`] answers its
//! permission questions with corral's gate and, when the gate asks, a person, after
//! [`confine`] has checked that every path the call names stays beneath the session root.

pub mod confine;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::model::ExternalSpec;
use crate::policy::{Decision, Gate, Policy, Verdict};
use crate::session::Session;
use crate::tool::{Danger, Guard, ToolRegistry};

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

/// The outcome of asking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Allow {
        always: bool,
    },
    Deny {
        message: String,
    },
    /// The person cancelled the turn.
    Cancel,
}

/// corral's gate for an external agent: the preset's rules, the session's grants, and a
/// person through the session's permission requests.
pub struct Approver {
    session: Arc<Session>,
    gate: Mutex<Gate>,
    tools: ToolRegistry,
    root: PathBuf,
    attended: bool,
    timeout: Option<Duration>,
}

impl Approver {
    pub fn new(
        session: Arc<Session>,
        policy: Policy,
        tools: ToolRegistry,
        root: PathBuf,
        attended: bool,
        timeout: Option<Duration>,
    ) -> Approver {
        Approver {
            session,
            gate: Mutex::new(Gate::new(policy)),
            tools,
            root,
            attended,
            timeout,
        }
    }

    fn gate(&self) -> std::sync::MutexGuard<'_, Gate> {
        self.gate.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new turn lifts a `forbid_all`.
    pub fn begin_turn(&self) {
        self.gate().begin_turn();
    }

    fn verdict(&self, ask: &ToolAsk) -> (Verdict, Danger) {
        match ask.corral_tool.and_then(|name| self.tools.get(name)) {
            Some(tool) => {
                let name = tool.manifest.name.as_str();
                let gate = self.gate();
                let danger = gate.policy().danger_of(name, tool.manifest.danger);
                if !gate.offers(name) {
                    let reason = format!("{name} is not available in this session");
                    return (Verdict::Deny { reason }, danger);
                }
                let verdict = gate.check(name, tool.manifest.danger, &ask.args, &self.root);
                // As in the native loop: git's files never, agent config only with a person.
                match crate::tool::write_guard(name, &ask.args, &self.root) {
                    Some(Guard::Never(reason)) => (Verdict::Deny { reason }, danger),
                    Some(Guard::Person(reason)) if matches!(verdict, Verdict::Allow { .. }) => {
                        (Verdict::Ask { reason }, danger)
                    }
                    _ => (verdict, danger),
                }
            }
            None => (
                Verdict::Ask {
                    reason: format!(
                        "{} is the agent's own tool; corral has no rule for it",
                        ask.agent_tool
                    ),
                },
                Danger::Dangerous,
            ),
        }
    }

    /// Decides one call: the gate's verdict, and a person's answer when it asks.
    pub async fn decide(&self, ask: &ToolAsk, cancel: &CancellationToken) -> Answer {
        // Before any rule: the agent does the write itself once allowed, so no preset (not
        // even bypass) may let it touch a path outside the root.
        let ask = match confine::confine(ask, &self.root) {
            Ok(ask) => ask,
            Err(message) => {
                tracing::warn!(tool = %ask.agent_tool, %message, "an external agent's call leads out of the root");
                return Answer::Deny { message };
            }
        };
        let ask = &ask;
        let (verdict, danger) = self.verdict(ask);
        let reason = match verdict {
            Verdict::Allow { .. } => return Answer::Allow { always: false },
            Verdict::Deny { reason } => {
                return Answer::Deny {
                    message: format!("refused by corral's policy: {reason}"),
                };
            }
            Verdict::Ask { reason } => reason,
        };
        if !self.attended {
            return Answer::Deny {
                message: format!(
                    "refused: this call needs a person's approval ({reason}) and nobody can \
                     answer here"
                ),
            };
        }
        let tool_name = ask.corral_tool.unwrap_or(ask.agent_tool.as_str());
        let always = self.gate().always(tool_name, &ask.args, &self.root);
        let request = json!({
            "toolCall": {
                "toolCallId": ask.tool_call_id,
                "title": ask.title,
                "kind": ask.kind,
                "status": "pending",
                "rawInput": ask.raw_input,
            },
            "tool": ask.corral_tool.unwrap_or(ask.agent_tool.as_str()),
            "agentTool": ask.agent_tool,
            "danger": danger,
            "reason": reason,
            "always": always.to_json(),
            "options": always.options(),
        });
        let request = match (
            request,
            crate::policy::approval_preview(
                ask.corral_tool.unwrap_or_default(),
                &ask.args,
                &self.root,
            ),
        ) {
            (Value::Object(mut target), Value::Object(preview)) => {
                target.extend(preview);
                Value::Object(target)
            }
            (request, _) => request,
        };
        let (id, answer) = match self.session.request_permission(request) {
            Ok(opened) => opened,
            Err(e) => {
                return Answer::Deny {
                    message: format!("cannot ask for approval: {e}"),
                };
            }
        };
        let (decision, timed_out) = tokio::select! {
            answer = answer => (answer.unwrap_or(Decision::Deny), false),
            _ = cancel.cancelled() => (Decision::Cancel, false),
            _ = sleep_or_forever(self.timeout) => (Decision::Deny, true),
        };
        let note = if timed_out {
            Some(format!(
                "nobody answered within {} s; denied",
                self.timeout.map(|t| t.as_secs()).unwrap_or_default()
            ))
        } else {
            let tool = ask.corral_tool.unwrap_or(ask.agent_tool.as_str());
            self.gate().record(tool, &ask.args, &self.root, decision)
        };
        self.session
            .resolve_permission(&id, decision.as_str(), note.clone());
        match decision {
            Decision::Allow => Answer::Allow { always: false },
            // The agent remembers an "always" by its own rules, so it is passed on only where
            // corral's gate offered one.
            Decision::AllowAll => Answer::Allow {
                always: always.offered,
            },
            Decision::Deny if timed_out => Answer::Deny {
                message: format!("denied: {}", note.unwrap_or_default()),
            },
            Decision::Deny => Answer::Deny {
                message: "the user denied this call".into(),
            },
            Decision::Disable => Answer::Deny {
                message: format!(
                    "the user disabled {} for the rest of this session",
                    ask.corral_tool.unwrap_or(ask.agent_tool.as_str())
                ),
            },
            Decision::ForbidAll => Answer::Deny {
                message: "the user forbade tool calls for the rest of this turn".into(),
            },
            Decision::Cancel => Answer::Cancel,
        }
    }
}

async fn sleep_or_forever(timeout: Option<Duration>) {
    match timeout {
        Some(t) => tokio::time::sleep(t).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests;
