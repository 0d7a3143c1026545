//! `codex[:<model>]`: OpenAI's codex CLI driven through `codex app-server`, JSON-RPC over
//! stdio. One codex thread per corral session (`thread/start`, or `thread/resume` with the
//! recorded thread id); one `turn/start` per turn, its `item/*` notifications turned into
//! corral's envelopes; codex's approval requests answered by corral's gate; a cancel is a
//! `turn/interrupt`. A codex that dies takes the session with it (status `dead`).

mod approve;
mod rpc;
mod turn;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::external::{Answer, Approver, ExternalContext, ExternalKind, ExternalSpec};
use super::process::{AgentProcess, Launch};
use super::{Backend, BackendInfo, BoxFuture, TurnOutcome};
use crate::event::{ContentBlock, Payload, ResultData, Status, StopReason, Usage, UserTextData};
use crate::policy::Policy;
use crate::session::Session;
use crate::session::open::OpenError;
use rpc::{Incoming, Rpc, RpcError};
use turn::{Ended, TurnState};

/// Each handshake request; codex answers in well under a second.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long an interrupted turn may take to say it stopped before it is given up on.
const INTERRUPT_GRACE: Duration = Duration::from_secs(10);
/// How often a running turn checks that codex is still alive: its stdout can outlive it when a
/// wrapper (the npm launcher) dies and leaves the binary behind.
const LIVENESS_TICK: Duration = Duration::from_millis(250);
/// Where `scripts/install-agent-clis` puts the CLIs, under `$HOME`.
const CI_INSTALL: &str = ".cache/corral-ci/agent-clis/node_modules/.bin/codex";

pub async fn start(context: ExternalContext) -> Result<Box<dyn Backend>, OpenError> {
    let program = find_program()?;
    let env = match &context.home {
        Some(home) => private_home(home)?,
        None => Vec::new(),
    };
    let launch = Launch {
        program,
        args: vec!["app-server".into()],
        cwd: context.root.clone(),
        env,
        env_remove: Vec::new(),
        stderr_log: context.stderr_log.clone(),
        kind: "codex",
    };
    let (process, pipes) =
        AgentProcess::spawn(&launch).map_err(|e| OpenError::Runtime(e.to_string()))?;
    let mut backend = CodexBackend {
        session: context.session.clone(),
        approver: context.approver.clone(),
        root: context.root.clone(),
        rpc: Rpc::new(pipes.stdin, pipes.stdout),
        process,
        thread_id: String::new(),
        next_model: None,
        thread_total: Usage::default(),
    };
    match backend.handshake(&context).await {
        Ok(thread_id) => {
            (context.record_external_id)(&thread_id);
            backend.thread_id = thread_id;
            Ok(Box::new(backend))
        }
        Err(e) => {
            let message = match e {
                RpcError::Closed | RpcError::Write(_) => format!(
                    "codex stopped while starting: {}",
                    backend.process.crash_report().await
                ),
                other => format!("codex did not start: {other}"),
            };
            let stdin = backend.rpc.take_stdin();
            backend.process.stop(stdin).await;
            Err(OpenError::Runtime(message))
        }
    }
}

/// `$CORRAL_CODEX`, else `codex` on PATH, else the CI install under `$HOME`.
fn find_program() -> Result<PathBuf, OpenError> {
    if let Some(program) = std::env::var_os("CORRAL_CODEX").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(program));
    }
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("codex"))
            .find(|candidate| candidate.is_file())
    });
    if let Some(program) = on_path {
        return Ok(program);
    }
    if let Some(program) = std::env::var_os("HOME")
        .map(|home| Path::new(&home).join(CI_INSTALL))
        .filter(|p| p.is_file())
    {
        return Ok(program);
    }
    Err(OpenError::Runtime(
        "codex is not installed: install it with `npm install -g @openai/codex` (or run \
         scripts/install-agent-clis), or point CORRAL_CODEX at the program"
            .into(),
    ))
}

/// The environment for a private HOME: codex keeps its config, logins and threads under
/// `CODEX_HOME`. The user's model-provider config is copied in, since without it codex could
/// not reach a model at all; logins are not.
fn private_home(home: &Path) -> Result<Vec<(String, String)>, OpenError> {
    let codex_home = home.join(".codex");
    std::fs::create_dir_all(&codex_home)
        .map_err(|e| OpenError::Runtime(format!("cannot create {}: {e}", codex_home.display())))?;
    let user_config = std::env::var_os("CODEX_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".codex")))
        .map(|dir| dir.join("config.toml"))
        .filter(|p| p.is_file());
    if let Some(config) = user_config
        && let Err(e) = std::fs::copy(&config, codex_home.join("config.toml"))
    {
        tracing::warn!(path = %config.display(), error = %e, "cannot copy codex's config");
    }
    Ok(vec![
        ("HOME".into(), home.display().to_string()),
        ("CODEX_HOME".into(), codex_home.display().to_string()),
    ])
}

/// codex's own approval policy and sandbox for a corral preset. codex asks about anything it
/// does not know to be safe (`untrusted`) and corral's gate answers, so the preset's rules
/// decide; only `bypass`, where nothing asks, lets codex run everything unasked.
fn codex_policy(policy: &Policy) -> (&'static str, &'static str) {
    if policy.bypass {
        ("never", "workspace-write")
    } else if !policy.offers("shell") && !policy.offers("write_file") {
        ("untrusted", "read-only")
    } else {
        ("untrusted", "workspace-write")
    }
}

struct CodexBackend {
    session: Arc<Session>,
    approver: Arc<Approver>,
    root: PathBuf,
    rpc: Rpc,
    process: AgentProcess,
    thread_id: String,
    /// A model switched to, sent with the next `turn/start` (codex keeps it from then on).
    next_model: Option<String>,
    /// codex reports token usage as thread totals; a turn's usage is the difference.
    thread_total: Usage,
}

/// How driving a turn ended.
enum Drive {
    Ended(Ended),
    /// codex is gone (its output closed, it exited, or it stopped reading).
    Crashed,
}

/// What woke the turn loop.
enum Wake {
    Cancel,
    Tick,
    Message(Option<Incoming>),
}

impl CodexBackend {
    async fn handshake(&mut self, context: &ExternalContext) -> Result<String, RpcError> {
        let client = json!({"clientInfo": {
            "name": "corral", "title": "corral", "version": env!("CARGO_PKG_VERSION")}});
        self.rpc
            .call("initialize", client, HANDSHAKE_TIMEOUT)
            .await?;
        self.rpc.notify("initialized", None).await?;
        let (approval, sandbox) = codex_policy(&context.policy);
        let mut params = json!({
            "cwd": context.root.display().to_string(),
            "approvalPolicy": approval,
            "sandbox": sandbox,
        });
        if let Some(model) = &context.spec.model {
            params["model"] = Value::String(model.clone());
        }
        let method = match &context.resume {
            Some(thread_id) => {
                params["threadId"] = Value::String(thread_id.clone());
                "thread/resume"
            }
            None => "thread/start",
        };
        let result = self.rpc.call(method, params, HANDSHAKE_TIMEOUT).await?;
        result["thread"]["id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| RpcError::Remote {
                method: method.to_string(),
                code: 0,
                message: format!("its answer names no thread: {result}"),
            })
    }

    async fn turn(&mut self, prompt: &str, cancel: CancellationToken) -> TurnOutcome {
        if let Err(e) = self.session.begin_turn() {
            return TurnOutcome {
                stop_reason: StopReason::Error,
                usage: Usage::default(),
                error: Some(format!("cannot start a turn: {e}")),
                text: String::new(),
            };
        }
        self.approver.begin_turn();
        let session = self.session.clone();
        session.emit(Payload::TurnStarted(Default::default()));
        session.emit(Payload::UserText(UserTextData {
            content: ContentBlock::text(prompt),
        }));
        let root = self.root.clone();
        let mut state = TurnState::new(&session, &root, self.thread_total);
        let drive = self.drive(prompt, &cancel, &mut state).await;
        self.thread_total = state.thread_total;
        let (stop_reason, error, crashed) = match drive {
            Drive::Ended(Ended::Stop(reason)) => (reason, None, false),
            Drive::Ended(Ended::Error(message)) => {
                session.emit_error(message.clone(), Value::Null);
                (StopReason::Error, Some(message), false)
            }
            Drive::Crashed => {
                // A question codex can no longer take an answer to is closed first.
                for request in session.pending_permissions() {
                    if let Some(id) = request["requestId"].as_str() {
                        session.resolve_permission(
                            id,
                            "cancel",
                            Some("codex exited before the answer".into()),
                        );
                    }
                }
                let report = self.process.crash_report().await;
                let status = self.process.try_status().map(|s| s.to_string());
                session.emit_error(
                    report.clone(),
                    json!({"exitStatus": status, "stderr": self.process.stderr_tail()}),
                );
                (StopReason::Error, Some(report), true)
            }
        };
        session.emit(Payload::Result(ResultData {
            stop_reason,
            usage: state.usage,
            error: error.clone(),
        }));
        if crashed {
            let stdin = self.rpc.take_stdin();
            self.process.stop(stdin).await;
            session.close();
        } else if let Err(e) = session.transition(Status::Idle) {
            tracing::error!(error = %e, "ending a codex turn");
        }
        TurnOutcome {
            stop_reason,
            usage: state.usage,
            error,
            text: state.text,
        }
    }

    async fn drive(
        &mut self,
        prompt: &str,
        cancel: &CancellationToken,
        state: &mut TurnState<'_>,
    ) -> Drive {
        let mut params = json!({
            "threadId": self.thread_id,
            "input": [{"type": "text", "text": prompt}],
        });
        if let Some(model) = self.next_model.take() {
            params["model"] = Value::String(model);
        }
        let Ok(start_id) = self.rpc.send_request("turn/start", params).await else {
            return Drive::Crashed;
        };
        let mut tick = tokio::time::interval(LIVENESS_TICK);
        let mut interrupted: Option<tokio::time::Instant> = None;
        let mut interrupt_sent = false;
        loop {
            if interrupted.is_some()
                && !interrupt_sent
                && let Some(turn_id) = state.turn_id.clone()
            {
                interrupt_sent = true;
                let params = json!({"threadId": self.thread_id, "turnId": turn_id});
                if self
                    .rpc
                    .send_request("turn/interrupt", params)
                    .await
                    .is_err()
                {
                    return Drive::Crashed;
                }
            }
            // What codex said before it exited is handled before its exit is noticed.
            let wake = tokio::select! {
                biased;
                _ = cancel.cancelled(), if interrupted.is_none() => Wake::Cancel,
                message = self.rpc.next() => Wake::Message(message),
                _ = tick.tick() => Wake::Tick,
            };
            let message = match wake {
                Wake::Cancel => {
                    interrupted = Some(tokio::time::Instant::now());
                    continue;
                }
                Wake::Tick => {
                    if self.process.try_status().is_some() {
                        return Drive::Crashed;
                    }
                    if interrupted.is_some_and(|at| at.elapsed() > INTERRUPT_GRACE) {
                        tracing::warn!("codex did not confirm the interrupt; ending the turn");
                        return Drive::Ended(Ended::Stop(StopReason::Cancelled));
                    }
                    continue;
                }
                Wake::Message(None) => return Drive::Crashed,
                Wake::Message(Some(message)) => message,
            };
            match message {
                Incoming::Response { id, result } if id == json!(start_id) => match result {
                    Ok(value) => {
                        if state.turn_id.is_none() {
                            state.turn_id = value["turn"]["id"].as_str().map(str::to_string);
                        }
                    }
                    Err(e) => {
                        return Drive::Ended(Ended::Error(format!(
                            "codex refused the turn: {} (code {})",
                            e.message, e.code
                        )));
                    }
                },
                Incoming::Response { id, result } => {
                    tracing::debug!(%id, ?result, "codex answered an earlier request");
                }
                Incoming::Notification { method, params } => {
                    if let Some(ended) = state.notification(&method, &params) {
                        return Drive::Ended(ended);
                    }
                }
                Incoming::Request { id, method, params } => {
                    match self.answer(id, &method, &params, cancel, state).await {
                        Ok(Some(Answer::Cancel)) if interrupted.is_none() => {
                            interrupted = Some(tokio::time::Instant::now());
                        }
                        Ok(_) => {}
                        Err(e) => {
                            tracing::debug!(error = %e, "answering codex");
                            return Drive::Crashed;
                        }
                    }
                }
                Incoming::Malformed(line) => {
                    let shown: String = line.chars().take(300).collect();
                    self.session.emit_error(
                        format!("codex sent a line that is not JSON-RPC: {shown}"),
                        Value::Null,
                    );
                }
            }
        }
    }

    /// Answers one of codex's requests: approvals through corral's gate, anything else
    /// refused as unsupported.
    async fn answer(
        &mut self,
        id: Value,
        method: &str,
        params: &Value,
        cancel: &CancellationToken,
        state: &mut TurnState<'_>,
    ) -> Result<Option<Answer>, RpcError> {
        let item_id = params["itemId"].as_str().unwrap_or_default().to_string();
        let item = state.items.get(&item_id);
        let asks = match method {
            "item/commandExecution/requestApproval" => vec![approve::command_ask(params, item)],
            "item/fileChange/requestApproval" => approve::file_asks(params, item, &self.root),
            other => {
                tracing::debug!(
                    method = other,
                    "codex asked for something corral does not do"
                );
                self.rpc
                    .respond_error(id, -32601, &format!("corral does not handle {other}"))
                    .await?;
                return Ok(None);
            }
        };
        // Every path of a change must be allowed; the first refusal decides.
        let mut answer = Answer::Allow { always: true };
        let approver = self.approver.clone();
        for ask in &asks {
            // A person may take their time; codex dying meanwhile still ends the turn.
            let decided = tokio::select! {
                decided = approver.decide(ask, cancel) => decided,
                () = exited(&mut self.process) => return Err(RpcError::Closed),
            };
            match decided {
                Answer::Allow { always } => {
                    if let Answer::Allow { always: all } = &mut answer {
                        *all &= always;
                    }
                }
                refused => {
                    answer = refused;
                    break;
                }
            }
        }
        if let Answer::Deny { message } = &answer {
            state.denials.insert(item_id, message.clone());
        }
        self.rpc
            .respond(id, json!({"decision": approve::decision(&answer)}))
            .await?;
        Ok(Some(answer))
    }
}

/// The codex model a `set_model` names: `codex:<model>` or a bare model name. `None`: it
/// names another agent or a model of corral's own, which a codex thread cannot switch to.
fn codex_model(text: &str) -> Result<Option<String>, String> {
    let text = text.trim();
    if ExternalSpec::is_external(text) {
        return match text.parse::<ExternalSpec>() {
            Ok(ExternalSpec {
                kind: ExternalKind::Codex,
                model: Some(model),
                ..
            }) => Ok(Some(model)),
            Ok(ExternalSpec {
                kind: ExternalKind::Codex,
                ..
            }) => Err("name the model to switch to: codex:<model>".into()),
            Ok(_) => Ok(None),
            Err(e) => Err(e),
        };
    }
    if text.is_empty() {
        return Err("name the model to switch to: codex:<model>".into());
    }
    // `ollama:…`, `openai:…`: a model corral would talk to itself.
    Ok((!text.contains(':')).then(|| text.to_string()))
}

/// Resolves once the process has exited.
async fn exited(process: &mut AgentProcess) {
    while process.try_status().is_none() {
        tokio::time::sleep(LIVENESS_TICK).await;
    }
}

impl Backend for CodexBackend {
    fn run_turn<'a>(
        &'a mut self,
        prompt: &'a str,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, TurnOutcome> {
        Box::pin(self.turn(prompt, cancel))
    }

    fn set_model<'a>(&'a mut self, model: &'a str) -> BoxFuture<'a, Result<bool, String>> {
        let switched = match codex_model(model) {
            Ok(Some(name)) => {
                // turn/start takes a model that holds for that turn and the ones after it.
                self.next_model = Some(name);
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(e) => Err(e),
        };
        Box::pin(async move { switched })
    }

    fn shutdown(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let stdin = self.rpc.take_stdin();
            self.process.stop(stdin).await;
        })
    }

    fn info(&self) -> BackendInfo {
        BackendInfo {
            kind: "codex",
            queues_prompts: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_switch_names_a_codex_model() {
        assert_eq!(codex_model("codex:gpt-5"), Ok(Some("gpt-5".into())));
        assert_eq!(codex_model("o4-mini"), Ok(Some("o4-mini".into())));
        assert_eq!(codex_model("claude:sonnet"), Ok(None));
        assert_eq!(codex_model("ollama:qwen3"), Ok(None));
        assert!(codex_model("codex").is_err());
        assert!(codex_model(" ").is_err());
    }

    #[test]
    fn presets_map_to_codex_policies() {
        let load = |name: &str| {
            Policy::load(name, None, &Default::default()).unwrap_or_else(|e| panic!("{name}: {e}"))
        };
        assert_eq!(
            codex_policy(&load("default")),
            ("untrusted", "workspace-write")
        );
        assert_eq!(codex_policy(&load("readonly")), ("untrusted", "read-only"));
        assert_eq!(codex_policy(&load("bypass")), ("never", "workspace-write"));
    }
}
