//! `acp:<agent>[:<model>]`: corral as the client of an Agent Client Protocol agent on stdio
//! (`opencode acp`, `gemini --acp`, `claude-agent-acp`, or `acp:cmd=<command line>`).
//!
//! initialize → `session/new` (or `session/load` to resume) → a `session/prompt` per turn.
//! The agent's `session/update`s become corral events; its permission requests and `fs/*`
//! calls are answered by corral's gate, with paths confined to the session root.
//!
//! The JSON-RPC side is a small line transport of its own ([`rpc`]) rather than the
//! `agent-client-protocol` SDK's client: agents differ in what they leave out or add (gemini's
//! permission requests carry no `rawInput`, opencode's `session/load` answer may lack fields,
//! claude-agent-acp adds `name`), so messages are read as plain JSON and merged leniently, and
//! an update's order against the prompt's answer is kept by construction.

mod callbacks;
mod effort;
mod launch;
pub(crate) mod probe;
mod restart;
mod rpc;
mod tool_events;
mod turn;
mod words;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::agent_process::AgentProcess;
use super::external::ExternalContext;
use super::{Backend, BackendInfo, BoxFuture};
use crate::error::Error;
use crate::session::{Session, TurnOutcome};
use callbacks::Shared;
use rpc::{Incoming, Rpc, RpcError};

/// Agents take seconds to start (gemini about 7 s, opencode 13 s on two cores); a handshake
/// step that takes longer than this is stuck.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(120);

/// ACP's "authentication required".
const AUTH_REQUIRED: i64 = -32000;

pub(crate) struct AcpBackend {
    session: Arc<Session>,
    shared: Arc<Shared>,
    process: AgentProcess,
    updates: mpsc::UnboundedReceiver<Value>,
    session_id: String,
    agent_name: String,
    queues_prompts: bool,
    /// The legacy `models` block of `session/new` (gemini): `{availableModels, currentModelId}`.
    models: Value,
    dead: bool,
    /// The request's instructions, sent ahead of the first prompt (ACP has no system prompt).
    system: Option<String>,
    /// The effort last applied, and the agent's own value from before, to return to.
    effort: effort::Applied,
    /// The agent's key, as a voucher (claude-agent-acp, gemini); revoked with the backend.
    _voucher: Option<crate::backend::external::voucher::Voucher>,
    /// What starting the agent again after a crash takes.
    relaunch: restart::Relaunch,
    can_load: bool,
    /// The process died and is started again (on `session/load`) before the next turn.
    crashed: bool,
    /// A crash the manager has not been told of ([`Backend::take_crash`]).
    crash_untold: bool,
}

pub async fn start(context: ExternalContext) -> Result<Box<dyn Backend>, Error> {
    let mut launch = launch::launch_for(&context)?;
    let key = launch::agent_key(&context)
        .await
        .map_err(|e| Error::Runtime(e.to_string()))?;
    launch.env_remove.extend(key.remove);
    launch.env.extend(key.env);
    let agent_name = launch::agent_name(&context.spec);
    let relaunch = restart::Relaunch {
        launch,
        root: context.root.clone(),
        meta: launch::session_meta(&context),
        approver: context.approver.clone(),
        missing_reads_empty: context.spec.agent.as_deref() == Some("gemini"),
        request_timeout: context.acp_permission_timeout,
        agent_name: agent_name.clone(),
    };
    let connected = restart::connect(&relaunch, &context.session, context.resume.as_deref())
        .await
        .map_err(Error::Runtime)?;
    let ready = connected.ready;
    (context.record_external_id)(&ready.session_id);
    if let Some(warning) =
        launch::advisory(&context.policy, context.spec.agent.as_deref(), &agent_name)
    {
        context
            .session
            .emit_error(warning, json!({"agent": agent_name, "advisory": true}));
    }
    let mut backend = AcpBackend {
        session: context.session.clone(),
        shared: connected.shared,
        process: connected.process,
        updates: connected.updates,
        session_id: ready.session_id,
        agent_name,
        queues_prompts: ready.queues_prompts,
        models: ready.models,
        dead: false,
        system: context.system.clone(),
        effort: effort::Applied::default(),
        _voucher: key.voucher,
        relaunch,
        can_load: ready.can_load,
        crashed: false,
        crash_untold: false,
    };
    if let Some(model) = &context.spec.model
        && let Err(e) = backend.switch(model).await
    {
        backend.process.stop(None).await;
        return Err(Error::Usage(e));
    }
    Ok(Box::new(backend))
}

struct Ready {
    session_id: String,
    /// The agent can `session/load`: after a crash it is started again on its session.
    can_load: bool,
    config_options: Value,
    /// The legacy `models` block (gemini): `{availableModels, currentModelId}`.
    models: Value,
    queues_prompts: bool,
}

/// Waits for one handshake answer. Nothing else runs yet, so whatever the agent sends
/// meanwhile is dealt with here: updates (a resumed session's replayed history) are not
/// shown again, and requests are refused.
async fn call(
    rpc: &Rpc,
    incoming: &mut mpsc::UnboundedReceiver<Incoming>,
    method: &str,
    params: Value,
) -> Result<Value, RpcError> {
    let mut reply = rpc.start_request(method, params);
    let refuse = |message: Incoming| match message {
        Incoming::Request { id, method, .. } => rpc.respond(
            id,
            Err(RpcError::remote(
                -32603,
                format!("{method} before the session started"),
            )),
        ),
        Incoming::Response(answer) => answer.settle(),
        Incoming::Notification { .. } => {}
    };
    let wait = async {
        loop {
            tokio::select! {
                answer = &mut reply => {
                    // What came before the answer is queued already: it belongs here too.
                    while let Ok(message) = incoming.try_recv() {
                        refuse(message);
                    }
                    return answer.unwrap_or(Err(RpcError::Closed));
                }
                message = incoming.recv() => match message {
                    Some(message) => refuse(message),
                    None => return (&mut reply).await.unwrap_or(Err(RpcError::Closed)),
                },
            }
        }
    };
    tokio::time::timeout(HANDSHAKE_TIMEOUT, wait)
        .await
        .unwrap_or_else(|_| {
            Err(RpcError::remote(
                -32603,
                format!(
                    "no answer to {method} within {} s",
                    HANDSHAKE_TIMEOUT.as_secs()
                ),
            ))
        })
}

async fn handshake(
    session: &Session,
    relaunch: &restart::Relaunch,
    resume: Option<&str>,
    rpc: &Rpc,
    incoming: &mut mpsc::UnboundedReceiver<Incoming>,
) -> Result<Ready, RpcError> {
    let init = call(rpc, incoming, "initialize", initialize_params()).await?;
    let capabilities = &init["agentCapabilities"];
    let cwd = relaunch.root.to_string_lossy().into_owned();
    // claude-agent-acp takes the tools the preset does not offer as a deny list, so its model
    // is never offered them (the seed's second route), and which settings it loads.
    let meta = &relaunch.meta;
    let mut answer = Value::Null;
    let mut session_id = None;
    if let Some(resume) = resume {
        if capabilities["loadSession"].as_bool().unwrap_or(false) {
            match call(
                rpc,
                incoming,
                "session/load",
                json!({"sessionId": resume, "cwd": cwd, "mcpServers": [], "_meta": meta}),
            )
            .await
            {
                Ok(loaded) => {
                    answer = loaded;
                    session_id = Some(resume.to_string());
                }
                // Gone: nothing would answer `session/new` either.
                Err(RpcError::Closed) => return Err(RpcError::Closed),
                Err(e) => session.emit_error(
                    format!(
                        "the agent could not resume its session {resume}: {e}; starting a new one"
                    ),
                    Value::Null,
                ),
            }
        } else {
            session.emit_error(
                format!("the agent cannot resume sessions (no loadSession); starting a new one instead of {resume}"),
                Value::Null,
            );
        }
    }
    let session_id = match session_id {
        Some(id) => id,
        None => {
            answer = call(
                rpc,
                incoming,
                "session/new",
                json!({"cwd": cwd, "mcpServers": [], "_meta": meta}),
            )
            .await?;
            match answer["sessionId"].as_str() {
                Some(id) if !id.is_empty() => id.to_owned(),
                _ => {
                    return Err(RpcError::remote(
                        -32603,
                        "session/new answered without a sessionId",
                    ));
                }
            }
        }
    };
    // Agents that start in a mode that never asks (claude-agent-acp's "auto") would take
    // corral's gate out of the loop; "default" is the mode that asks.
    let modes = &answer["modes"];
    let has_default = modes["availableModes"]
        .as_array()
        .is_some_and(|m| m.iter().any(|m| m["id"] == "default"));
    if has_default && modes["currentModeId"] != "default" {
        call(
            rpc,
            incoming,
            "session/set_mode",
            json!({"sessionId": session_id, "modeId": "default"}),
        )
        .await?;
    }
    Ok(Ready {
        session_id,
        can_load: capabilities["loadSession"].as_bool().unwrap_or(false),
        config_options: answer["configOptions"].clone(),
        models: answer["models"].clone(),
        queues_prompts: queues_prompts(capabilities),
    })
}

/// What corral tells an agent about itself at `initialize`.
fn initialize_params() -> Value {
    json!({
        "protocolVersion": 1,
        "clientInfo": {"name": "corral", "version": env!("CARGO_PKG_VERSION")},
        "clientCapabilities": {
            "fs": {"readTextFile": true, "writeTextFile": true},
            "terminal": false,
        },
    })
}

/// ACP has no standard field for it; agents that queue say so in their capabilities' `_meta`.
fn queues_prompts(capabilities: &Value) -> bool {
    ["queuesPrompts", "queues_prompts"].iter().any(|key| {
        capabilities[key].as_bool().unwrap_or(false)
            || capabilities["_meta"][key].as_bool().unwrap_or(false)
    })
}

/// Every selectable value of a `select` config option; groups are flattened.
fn option_values(option: &Value) -> Vec<String> {
    let mut values = Vec::new();
    for entry in option["options"].as_array().into_iter().flatten() {
        if let Some(value) = entry["value"].as_str() {
            values.push(value.to_owned());
        }
        for inner in entry["options"].as_array().into_iter().flatten() {
            if let Some(value) = inner["value"].as_str() {
                values.push(value.to_owned());
            }
        }
    }
    values
}

fn shorten(values: &[String]) -> String {
    let shown: Vec<&str> = values.iter().take(12).map(String::as_str).collect();
    let more = values.len().saturating_sub(shown.len());
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

impl AcpBackend {
    /// `session/set_config_option`; the options the agent answers with are kept.
    async fn set_config_option(&self, id: &Value, value: Value) -> Result<(), RpcError> {
        let answer = self
            .shared
            .rpc
            .request(
                "session/set_config_option",
                json!({"sessionId": self.session_id, "configId": id, "value": value}),
            )
            .await?;
        if answer["configOptions"].is_array() {
            self.shared.set_config_options(&answer["configOptions"]);
        }
        Ok(())
    }

    /// Switches the agent's model over the wire: the `configOptions` entry of category
    /// `model`, else the older `session/set_model` for agents that list `models` (gemini).
    async fn switch(&mut self, model: &str) -> Result<bool, String> {
        if self.dead {
            return Err("the agent is not running".into());
        }
        let options = self
            .shared
            .config_options
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let entry = options.as_array().and_then(|all| {
            all.iter()
                .find(|o| o["category"] == "model")
                .or_else(|| all.iter().find(|o| o["id"] == "model"))
                .cloned()
        });
        if let Some(entry) = entry {
            let values = option_values(&entry);
            if !values.iter().any(|v| v == model) {
                return Err(format!(
                    "{} has no model {model:?}; it offers: {}",
                    self.agent_name,
                    shorten(&values)
                ));
            }
            self.set_config_option(&entry["id"], json!(model))
                .await
                .map_err(|e| format!("{} refused the model {model:?}: {e}", self.agent_name))?;
            return Ok(true);
        }
        let available: Vec<String> = self.models["availableModels"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["modelId"].as_str().map(str::to_owned))
            .collect();
        if available.is_empty() {
            return Err(format!(
                "{} offers no model choice over ACP (no configOptions entry of category model)",
                self.agent_name
            ));
        }
        // This older list is a curated subset (gemini takes any model id its API serves),
        // so a model not in it is tried, and only the agent's refusal is an error.
        self.shared
            .rpc
            .request(
                "session/set_model",
                json!({"sessionId": self.session_id, "modelId": model}),
            )
            .await
            .map_err(|e| {
                format!(
                    "{} refused the model {model:?}: {e}; it lists: {}",
                    self.agent_name,
                    shorten(&available)
                )
            })?;
        self.models["currentModelId"] = Value::String(model.to_owned());
        Ok(true)
    }
}

impl Backend for AcpBackend {
    fn run_turn<'a>(
        &'a mut self,
        prompt: &'a str,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, TurnOutcome> {
        Box::pin(self.turn(prompt, cancel))
    }

    fn set_model<'a>(&'a mut self, model: &'a str) -> BoxFuture<'a, Result<bool, String>> {
        Box::pin(self.switch(model))
    }

    fn set_effort(
        &mut self,
        effort: Option<crate::model::Effort>,
    ) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(self.apply_effort(effort))
    }

    fn watch_idle(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if self.dead || self.crashed {
                return std::future::pending().await;
            }
            self.process.exited().await;
            let report = self.process.crash_report().await;
            if self.can_load {
                self.note_crash(format!("the ACP agent stopped between turns: {report}"));
                return;
            }
            self.session.emit_error(
                format!("the ACP agent stopped between turns: {report}"),
                serde_json::json!({"agent": self.agent_name}),
            );
            self.dead = true;
            self.session.close();
        })
    }

    fn take_crash(&mut self) -> BoxFuture<'_, bool> {
        let untold = std::mem::take(&mut self.crash_untold);
        Box::pin(async move { untold })
    }

    fn wake(&mut self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(self.start_again())
    }

    fn shutdown(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.process.stop(None).await;
        })
    }

    fn info(&self) -> BackendInfo {
        BackendInfo {
            kind: "acp",
            queues_prompts: self.queues_prompts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouped_model_options_are_flattened() {
        let option = json!({"id": "model", "category": "model", "options": [
            {"value": "a", "name": "A"},
            {"group": "g", "name": "G", "options": [{"value": "b", "name": "B"}]}]});
        assert_eq!(option_values(&option), ["a", "b"]);
    }

    #[test]
    fn queueing_is_read_from_the_capabilities() {
        assert!(!queues_prompts(&json!({"loadSession": true})));
        assert!(queues_prompts(&json!({"_meta": {"queuesPrompts": true}})));
    }
}
