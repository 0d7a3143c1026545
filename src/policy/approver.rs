//! The one approval path, for corral's own loop and for every external agent: the gate's
//! verdict with the write guard over it; when it asks, whether anyone can answer; then a
//! permission request, the wait for an answer, a cancel or the timeout, the answer recorded
//! in the gate, the request resolved, and the outcome for the caller.
//!
//! Requests go out through a [`PermissionDesk`], which the session (a layer above) is.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Answer, Decision, Gate, Policy, Verdict, approval_preview};
use crate::event::{PermissionRequest, PermissionToolCall};
pub use crate::tool::CallTarget;
use crate::tool::{Danger, Guard, ToolManifest, ToolRegistry, write_guard};

/// Where a request waits for a person: it is announced, any surface may answer it, and it is
/// closed with the outcome.
pub trait PermissionDesk: Send + Sync {
    /// Opens `request` under a fresh id; the receiver yields the answer. `Err`: why it
    /// cannot be asked now.
    fn open(
        &self,
        request: PermissionRequest,
    ) -> Result<(String, oneshot::Receiver<Answer>), String>;

    /// Closes the request with the decision that counted and what it did.
    fn resolve(&self, request_id: &str, decision: Decision, note: Option<String>);
}

/// A desk to ask through instead of the session's own (a delegated sub-session asks the
/// person watching its parent).
#[derive(Clone)]
pub struct DeskLink(pub Arc<dyn PermissionDesk>);

impl std::fmt::Debug for DeskLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DeskLink(..)")
    }
}

/// Who makes the call, which decides the words of a refusal and one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller<'a> {
    /// corral's own loop. Its model is offered only the tools the gate offers, and a refusal
    /// tells it how a person could allow the call.
    Model,
    /// An external agent, which names the tool its own way and calls tools corral did not
    /// offer; a refusal says it was corral's policy.
    Agent { tool: &'a str },
    /// An ACP agent reading or writing a file through corral (`fs/*`): corral does the I/O
    /// itself, beneath the root, so a preset may let these run unasked (`allow_acp_fs`).
    AgentFiles { tool: &'a str },
}

impl Caller<'_> {
    fn agent_tool(&self) -> Option<&str> {
        match self {
            Caller::Model => None,
            Caller::Agent { tool } | Caller::AgentFiles { tool } => Some(tool),
        }
    }

    fn refused(&self, reason: &str) -> String {
        match self {
            Caller::Model => format!("refused: {reason}"),
            Caller::Agent { .. } | Caller::AgentFiles { .. } => {
                format!("refused by corral's policy: {reason}")
            }
        }
    }

    fn unattended(&self, reason: &str, tool: &str) -> String {
        let refusal = format!(
            "refused: this call needs a person's approval ({reason}) and nobody can answer here"
        );
        match self {
            Caller::Model => format!(
                "{refusal}. Allow it with a policy rule, `--allow {tool}`, another preset (-p), \
                 or answer requests with --approve-stdin"
            ),
            Caller::Agent { .. } | Caller::AgentFiles { .. } => refusal,
        }
    }

    fn forbidden(&self) -> String {
        let refusal = "the user forbade tool calls for the rest of this turn";
        match self {
            Caller::Model => format!("{refusal}; answer without tools"),
            Caller::Agent { .. } | Caller::AgentFiles { .. } => refusal.to_string(),
        }
    }
}

/// One tool call to decide.
pub struct Call<'a> {
    pub caller: Caller<'a>,
    /// The corral tool whose rules and danger apply; `None`, or a name corral has no tool
    /// for: an agent's own tool, which always asks.
    pub tool: Option<&'a str>,
    /// Arguments in that tool's shape, paths relative to the root.
    pub args: &'a Value,
    /// The call as the person is shown it.
    pub tool_call: PermissionToolCall,
    /// What a desktop action reaches, found before it is judged (see [`CallTarget`]).
    pub target: Option<&'a CallTarget>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    /// Run the call. `by_person`: a person said yes to it; `always`: they chose "allow
    /// always" where the gate offered it.
    Allow { by_person: bool, always: bool },
    /// Do not run it; `message` is what the model or agent is told.
    Deny { message: String },
    /// A person cancelled the turn.
    Cancel,
}

/// The gate of one session (its preset, and what a person granted, disabled or forbade),
/// and a person through the desk when it asks.
pub struct Approver {
    gate: Mutex<Gate>,
    /// Replaced when an MCP server's tools come, change or go.
    tools: Mutex<ToolRegistry>,
    root: PathBuf,
    /// Someone can answer requests (a terminal, `--approve-stdin`, a client); without that a
    /// call that needs approval is refused, visibly.
    attended: bool,
    /// A request nobody answers within this time is denied.
    timeout: Option<Duration>,
    desk: Arc<dyn PermissionDesk>,
    /// One question at a time: the session shows one open request, and a call that needs a
    /// person while another is asked waits here. Only the asking is serialized: a call the
    /// gate decides by itself never waits behind a person.
    asking: tokio::sync::Mutex<()>,
}

impl Approver {
    /// `root` must be canonical.
    pub fn new(
        policy: Policy,
        tools: ToolRegistry,
        root: PathBuf,
        attended: bool,
        timeout: Option<Duration>,
        desk: Arc<dyn PermissionDesk>,
    ) -> Approver {
        Approver {
            gate: Mutex::new(Gate::new(policy)),
            tools: Mutex::new(tools),
            root,
            attended,
            timeout,
            desk,
            asking: tokio::sync::Mutex::new(()),
        }
    }

    /// Asks through `desk` from now on.
    pub fn set_desk(&mut self, desk: Arc<dyn PermissionDesk>) {
        self.desk = desk;
    }

    fn gate(&self) -> MutexGuard<'_, Gate> {
        self.gate.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether the tool is offered at all right now.
    pub fn offers(&self, tool: &str) -> bool {
        self.gate().offers(tool)
    }

    /// Whether the preset (or `--allow`) names `tool` in its allow list.
    pub fn lists_allowed(&self, tool: &str) -> bool {
        self.gate().policy().allowed.iter().any(|a| a == tool)
    }

    /// The tools calls are judged against from now on (MCP servers' came, changed or went).
    pub fn set_tools(&self, tools: ToolRegistry) {
        *self.tools.lock().unwrap_or_else(|p| p.into_inner()) = tools;
    }

    /// A new turn lifts a `forbid_all`.
    pub fn begin_turn(&self) {
        self.gate().begin_turn();
    }

    /// Another preset from the next call on; the session's earlier grants go with the old one.
    pub fn set_policy(&self, policy: Policy) {
        *self.gate() = Gate::new(policy);
    }

    /// Decides one call: the gate's verdict, and a person's answer when it asks.
    pub async fn decide(&self, call: Call<'_>, cancel: &CancellationToken) -> Approval {
        self.decide_until(call, cancel, None).await
    }

    /// [`decide`](Self::decide), for a caller that cannot wait past `until` (an agent whose
    /// own request times out): the wait for a person — and for an earlier question to be
    /// answered first — ends there, or at the session's approval timeout if that comes
    /// first, with a refusal that says so.
    pub async fn decide_until(
        &self,
        call: Call<'_>,
        cancel: &CancellationToken,
        until: Option<Instant>,
    ) -> Approval {
        let manifest = call.tool.and_then(|name| {
            let tools = self.tools.lock().unwrap_or_else(|p| p.into_inner());
            tools.get(name).map(|tool| tool.manifest.clone())
        });
        let name = call.tool.or(call.caller.agent_tool()).unwrap_or_default();
        let first = match self.judge(&call, manifest.as_deref(), name) {
            Ok(asks) => asks,
            Err(decided) => return decided,
        };
        let (_asking, waited) = match self.asking.try_lock() {
            Ok(guard) => (guard, false),
            Err(_) => tokio::select! {
                guard = self.asking.lock() => (guard, true),
                () = cancel.cancelled() => return Approval::Cancel,
                () = sleep_until_or_forever(until) => {
                    return Approval::Deny {
                        message: "denied: nobody could be asked in time (another question \
                                  was open until the agent's deadline)"
                            .into(),
                    };
                }
            },
        };
        // After a wait, judged again: the question answered meanwhile may have granted,
        // disabled or forbidden what this call needs.
        let (reason, danger) = if waited {
            match self.judge(&call, manifest.as_deref(), name) {
                Ok(asks) => asks,
                Err(decided) => return decided,
            }
        } else {
            first
        };
        let always = self.gate().always(name, call.args, &self.root, call.target);
        let request = PermissionRequest {
            tool_call: call.tool_call,
            tool: name.to_string(),
            agent_tool: call.caller.agent_tool().map(str::to_string),
            danger: danger.as_str().to_string(),
            reason,
            always: Some(always.offer()),
            options: always.options(),
            preview: {
                let mut preview =
                    approval_preview(call.tool.unwrap_or_default(), call.args, &self.root);
                preview.desktop = call.target.map(|t| Box::new(t.preview.clone()));
                preview
            },
            sub_session: None,
            request_id: String::new(),
        };
        let (id, answer) = match self.desk.open(request) {
            Ok(opened) => opened,
            Err(e) => {
                return Approval::Deny {
                    message: format!("cannot ask for approval: {e}"),
                };
            }
        };
        let opened = Instant::now();
        let (limit, by_caller) = match (self.timeout.map(|t| opened + t), until) {
            (Some(own), Some(caller)) if caller < own => (Some(caller), true),
            (Some(own), _) => (Some(own), false),
            (None, caller) => (caller, caller.is_some()),
        };
        let (answer, timed_out) = tokio::select! {
            answer = answer => (answer.unwrap_or_else(|_| Decision::Deny.into()), false),
            _ = cancel.cancelled() => (Decision::Cancel.into(), false),
            _ = sleep_until_or_forever(limit) => (Decision::Deny.into(), true),
        };
        let Answer { decision, reason } = answer;
        // The person's words: one line of theirs, kept short, for the model and the record.
        let reason = reason
            .map(|r| r.split_whitespace().collect::<Vec<_>>().join(" "))
            .map(|r| r.chars().take(MAX_REASON_CHARS).collect::<String>())
            .filter(|r| !r.is_empty() && decision == Decision::Deny);
        let note = if timed_out {
            let waited = limit.map_or(0, |l| (l - opened).as_secs_f64().round() as u64);
            Some(if by_caller {
                format!("nobody answered within {waited} s, as long as the agent waits; denied")
            } else {
                format!("nobody answered within {waited} s; denied")
            })
        } else if let Some(reason) = &reason {
            Some(format!("reason: {reason}"))
        } else {
            self.gate()
                .record(name, call.args, &self.root, call.target, decision)
        };
        self.desk.resolve(&id, decision, note.clone());
        let deny = |message: String| Approval::Deny { message };
        match decision {
            Decision::Allow => Approval::Allow {
                by_person: true,
                always: false,
            },
            // An agent remembers an "always" by its own rules, so it is passed on only where
            // corral's gate offered one.
            Decision::AllowAll => Approval::Allow {
                by_person: true,
                always: always.offered,
            },
            Decision::Deny if timed_out => deny(format!("denied: {}", note.unwrap_or_default())),
            Decision::Deny => deny(match reason {
                Some(reason) => format!("the user denied this call: {reason}"),
                None => "the user denied this call".into(),
            }),
            Decision::Disable => deny(format!(
                "the user disabled {name} for the rest of this session"
            )),
            Decision::ForbidAll => deny(call.caller.forbidden()),
            Decision::Cancel => Approval::Cancel,
        }
    }

    /// The gate's verdict when it needs no person (`Err`: the outcome), else why it asks and
    /// the call's danger.
    fn judge(
        &self,
        call: &Call<'_>,
        manifest: Option<&ToolManifest>,
        name: &str,
    ) -> Result<(String, Danger), Approval> {
        let (verdict, danger) = self.verdict(call, manifest);
        match verdict {
            Verdict::Allow { .. } => Err(Approval::Allow {
                by_person: false,
                always: false,
            }),
            Verdict::Deny { reason } => Err(Approval::Deny {
                message: call.caller.refused(&reason),
            }),
            Verdict::Ask { reason } if !self.attended => Err(Approval::Deny {
                message: call.caller.unattended(&reason, name),
            }),
            Verdict::Ask { reason } => Ok((reason, danger)),
        }
    }

    fn verdict(&self, call: &Call<'_>, manifest: Option<&ToolManifest>) -> (Verdict, Danger) {
        let Some(manifest) = manifest else {
            let reason = format!(
                "{} is the agent's own tool; corral has no rule for it",
                call.caller.agent_tool().unwrap_or_default()
            );
            return (Verdict::Ask { reason }, Danger::Dangerous);
        };
        let name = manifest.name.as_str();
        let gate = self.gate();
        let base = call
            .target
            .and_then(|t| t.danger)
            .unwrap_or(manifest.danger);
        let danger = gate.policy().danger_of(name, base);
        if call.caller != Caller::Model && !gate.offers(name) {
            let reason = format!("{name} is not available in this session");
            return (Verdict::Deny { reason }, danger);
        }
        let verdict = match call.caller {
            Caller::AgentFiles { .. } => gate.check_acp_fs(name, base, call.args, &self.root),
            Caller::Model | Caller::Agent { .. } => {
                gate.check_target(name, base, call.args, &self.root, call.target)
            }
        };
        // git's files are never a tool's to write, and agent config is a person's, in every
        // preset: that overrides the gate's "allow" (bypass, a rule, a grant).
        let verdict = match write_guard(name, call.args, &self.root) {
            Some(Guard::Never(reason)) => Verdict::Deny { reason },
            Some(Guard::Person(reason)) if matches!(verdict, Verdict::Allow { .. }) => {
                Verdict::Ask { reason }
            }
            _ => verdict,
        };
        (verdict, danger)
    }
}

/// A denial's reason is one line a person typed; longer text is cut to this.
const MAX_REASON_CHARS: usize = 500;

async fn sleep_until_or_forever(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests;
