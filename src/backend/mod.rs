//! What runs a session's turns: corral's own loop ([`native`]) or an external agent process
//! (claude, an ACP agent, codex). Every backend writes the same envelopes into its
//! [`Session`](crate::session::Session), so every surface drives all of them alike. A turn's
//! frame is the session's [`Turn`](crate::session::Turn): `Turn::begin` (`turn_started`, the
//! prompt as `user_text`), then the backend's own events (text, tool calls, permission
//! requests answered through the session's approvals), then `Turn::finish` with a
//! [`TurnEnd`](crate::session::TurnEnd) (`result`, the session idle) or `Turn::crashed` when
//! the agent's process died (`result`, the session dead).

mod acp_client;
pub use crate::sandbox::agent_process;
pub(crate) use acp_client::probe as acp_probe;
mod claude;
mod codex;
pub mod external;
mod jsonrpc;
pub mod native;
pub mod per_turn;
mod pi;

/// An agent runtime as `corral doctor` lists it.
pub(crate) struct AgentCli {
    pub name: &'static str,
    /// The program, or how to install it.
    pub found: Result<std::path::PathBuf, String>,
    /// Its lifecycle and steering mode, and where its key comes from.
    pub how: String,
}

/// Every runtime corral drives itself (ACP agents are `acp_probe`'s), found the way its
/// backend finds it.
pub(crate) fn agent_clis() -> Vec<AgentCli> {
    use per_turn::runtimes;
    let persistent = |name: &'static str, found: Result<std::path::PathBuf, String>| {
        let (lifecycle, steering) = runtimes::PERSISTENT_RUNTIMES
            .iter()
            .find(|(n, _, _)| *n == name)
            .map(|(_, lifecycle, steering)| (lifecycle.describe(), steering.name()))
            .unwrap_or_default();
        AgentCli {
            name,
            found,
            how: format!("{lifecycle}, steering {steering}; {}", key_source(name)),
        }
    };
    let mut clis = vec![
        persistent(
            "claude",
            crate::sandbox::programs::find_installed(claude::launch::PROGRAM)
                .map_err(|e| e.to_string()),
        ),
        persistent("codex", codex::find_program().map_err(|e| e.to_string())),
        persistent(
            "pi",
            crate::sandbox::programs::find_installed(runtimes::PI).map_err(|e| e.to_string()),
        ),
        persistent(
            "kimi",
            crate::sandbox::programs::find_installed(runtimes::KIMI).map_err(|e| e.to_string()),
        ),
    ];
    for runtime in runtimes::PER_TURN_RUNTIMES {
        let found = crate::sandbox::programs::find_installed(runtime.program).map_err(|e| {
            match runtime.not_on_registries {
                Some(why) => format!("{e} ({why})"),
                None => e.to_string(),
            }
        });
        clis.push(AgentCli {
            name: runtime.name,
            found,
            how: format!(
                "{}, steering {}; {}",
                runtime.lifecycle.describe(),
                runtime.steering.name(),
                key_source(runtime.name)
            ),
        });
    }
    clis
}

/// Where a runtime's model key comes from, as far as the environment tells.
fn key_source(name: &str) -> String {
    let set = |var: &str| std::env::var(var).is_ok_and(|v| !v.trim().is_empty());
    let first = |vars: &[&'static str]| vars.iter().copied().find(|v| set(v));
    let vouched = |var: &str| format!("key from {var}, given to it as a voucher");
    match name {
        "claude" => first(&["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"])
            .map_or_else(|| "its own login".to_string(), vouched),
        "codex" => "the provider its config.toml selects (a voucher for its key)".to_string(),
        "gemini" => first(&["GEMINI_API_KEY", "GOOGLE_API_KEY"])
            .map_or_else(|| "its own login".to_string(), vouched),
        "kimi" => {
            first(&["KIMI_API_KEY"]).map_or_else(|| "its own login or config".to_string(), vouched)
        }
        "qwen" => first(&["OPENAI_API_KEY"]).map_or_else(
            || "its own settings (no OPENAI_API_KEY)".to_string(),
            vouched,
        ),
        "copilot" if set("COPILOT_PROVIDER_BASE_URL") => {
            first(&["COPILOT_PROVIDER_BEARER_TOKEN", "COPILOT_PROVIDER_API_KEY"])
                .map_or_else(|| "its own provider, with no key".to_string(), vouched)
        }
        "copilot" => "its GitHub login (set COPILOT_PROVIDER_BASE_URL for a provider of your own)"
            .to_string(),
        "opencode" | "pi" => "the providers in its own config".to_string(),
        _ => "its own login".to_string(),
    }
}

use std::future::Future;
use std::pin::Pin;

use tokio_util::sync::CancellationToken;

use crate::session::TurnOutcome;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a surface may show about a backend.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BackendInfo {
    /// `native`, `claude`, `acp`, `codex`.
    pub kind: &'static str,
    /// The backend accepts a prompt while a turn runs and queues it itself.
    pub queues_prompts: bool,
}

/// One session's turn runner. Each turn is a [`Turn`](crate::session::Turn): it emits
/// `turn_started` … `result` on the session and ends with the session idle (or dead, when the
/// backend's process died).
pub trait Backend: Send {
    fn run_turn<'a>(
        &'a mut self,
        prompt: &'a str,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, TurnOutcome>;

    /// A turn whose prompt carries images. Backends that take text only say so in an `error`
    /// event and run the text.
    fn run_turn_with_images<'a>(
        &'a mut self,
        prompt: &'a str,
        images: Vec<crate::model::Image>,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, TurnOutcome> {
        if !images.is_empty() {
            tracing::warn!(count = images.len(), "this backend takes text prompts only");
        }
        self.run_turn(prompt, cancel)
    }

    /// Where messages sent while a turn runs go (steering): the backend writes them to its
    /// agent at a safe boundary and they belong to the running turn. `None`: a second
    /// message while a turn runs is refused.
    fn steering(&self) -> Option<tokio::sync::mpsc::UnboundedSender<String>> {
        None
    }

    /// Resolves when the backend's process dies between turns, after the backend has said so
    /// (an `error` with the exit status and last stderr lines) and closed the session. Must
    /// be cancel-safe: it is dropped whenever a command arrives. Default: never.
    fn watch_idle(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(std::future::pending())
    }

    /// Switches the model, keeping the conversation. `Ok(false)`: this backend cannot.
    fn set_model<'a>(&'a mut self, model: &'a str) -> BoxFuture<'a, Result<bool, String>>;

    /// Summarizes the conversation so far to free context, between turns (a person's
    /// `/compact`). `Ok(false)`: this backend cannot, or there was too little to summarize.
    fn compact(&mut self, cancel: CancellationToken) -> BoxFuture<'_, Result<bool, String>> {
        let _ = cancel;
        Box::pin(async { Ok(false) })
    }

    /// Applies another permission preset from the next tool call on. `Ok(false)`: this
    /// backend cannot.
    fn set_policy(&mut self, policy: crate::policy::Policy) -> BoxFuture<'_, Result<bool, String>> {
        let _ = policy;
        Box::pin(async { Ok(false) })
    }

    /// How hard the agent reasons from the next turn on (`None`: its own default). Called
    /// before every turn with that turn's effort. `Err`: a note for the session saying why it
    /// is not applied (the turn runs anyway, at the agent's default).
    fn set_effort(
        &mut self,
        effort: Option<crate::model::Effort>,
    ) -> BoxFuture<'_, Result<(), String>> {
        let kind = self.info().kind;
        Box::pin(async move {
            match effort {
                None => Ok(()),
                Some(effort) => Err(format!(
                    "effort {effort} is not applied: the {kind} backend has no effort setting"
                )),
            }
        })
    }

    /// Whether the next turn is in delegate mode (its model gets the `delegate` tool and must
    /// split the task first). `Err`: why not; the turn runs normally. Only corral's own loop
    /// delegates.
    fn set_delegating(&mut self, on: bool) -> Result<(), String> {
        if on {
            Err(format!(
                "delegate mode needs corral's own loop; the {} backend runs this turn normally",
                self.info().kind
            ))
        } else {
            Ok(())
        }
    }

    /// Whether [`sleep`](Self::sleep) can stop the agent's process while the session is
    /// idle and [`wake`](Self::wake) start it again on its own session. Default: no.
    fn sleeps(&self) -> bool {
        false
    }

    /// Stops the agent's process between turns, keeping what resumes its conversation (its
    /// own session id). The next turn needs [`wake`](Self::wake) first.
    fn sleep(&mut self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async { Err("this backend cannot sleep".to_string()) })
    }

    /// Starts the agent's process again after [`sleep`](Self::sleep), resuming its own
    /// session; `Err`: why it could not.
    fn wake(&mut self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async { Ok(()) })
    }

    /// Whether the agent's process died unasked since the last call (mid-turn or between
    /// turns) and can be started again with [`wake`](Self::wake). A backend that restarts
    /// has reported the death and left the session idle; one that cannot (the default) has
    /// closed the session itself.
    fn take_crash(&mut self) -> BoxFuture<'_, bool> {
        Box::pin(async { false })
    }

    /// Stops what the backend owns (a model server, an agent process). Called once.
    fn shutdown(&mut self) -> BoxFuture<'_, ()>;

    fn info(&self) -> BackendInfo;
}

/// Starts the external agent a session was opened with.
pub async fn start_external(
    context: external::ExternalContext,
) -> Result<Box<dyn Backend>, crate::error::Error> {
    match context.spec.kind {
        crate::model::ExternalKind::Claude => claude::start(context).await,
        crate::model::ExternalKind::Acp => acp_client::start(context).await,
        crate::model::ExternalKind::Codex => codex::start(context).await,
        crate::model::ExternalKind::Pi => pi::start(context).await,
        crate::model::ExternalKind::Kimi => {
            // Kimi CLI speaks ACP (`kimi acp`): the ACP client drives it.
            let mut context = context;
            context.spec = crate::model::ExternalSpec {
                kind: crate::model::ExternalKind::Acp,
                agent: Some("kimi".into()),
                model: context.spec.model,
            };
            acp_client::start(context).await
        }
        _ => per_turn::start(context).await,
    }
}
