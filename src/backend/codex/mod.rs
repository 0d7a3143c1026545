//! `codex[:<model>]`: OpenAI's codex CLI driven through `codex app-server`, JSON-RPC over
//! stdio. One codex thread per corral session (`thread/start`, or `thread/resume` with the
//! recorded thread id); one `turn/start` per turn, its `item/*` notifications turned into
//! corral's envelopes; codex's approval requests answered by corral's gate; a cancel is a
//! `turn/interrupt`. A codex that dies is started again on its thread (`thread/resume`) when
//! the next message needs it; the manager counts such crashes and gives up after a few.

mod approve;
mod restart;
mod rpc;
mod setup;
mod turn;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::agent_process::{AgentProcess, Launch};
use super::external::{ExternalContext, voucher};
use super::{Backend, BackendInfo, BoxFuture};
use crate::error::Error;
use crate::event::{ContentBlock, Payload, StopReason, Usage, UserTextData};
use crate::policy::{Approval, Approver, Decision};
use crate::session::{Session, Turn, TurnEnd, TurnOutcome};
use rpc::{Incoming, Rpc, RpcError};
pub(super) use setup::find_program;
use setup::{
    codex_home, codex_model, codex_policy, private_home, private_tmp, sandbox_helper_path,
};
use turn::TurnState;

/// Each handshake request; codex answers in well under a second.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long an interrupted turn may take to say it stopped before it is given up on.
const INTERRUPT_GRACE: Duration = Duration::from_secs(10);
/// How often a running turn checks that codex is still alive: its stdout can outlive it when a
/// wrapper (the npm launcher) dies and leaves the binary behind.
const LIVENESS_TICK: Duration = Duration::from_millis(250);

pub async fn start(context: ExternalContext) -> Result<Box<dyn Backend>, Error> {
    let program = find_program()?;
    let mut env = match &context.home {
        Some(home) => private_home(home)?,
        None => Vec::new(),
    };
    let codex_home = codex_home(context.home.as_deref());
    let key = voucher::agents::codex(context.session.id(), &codex_home)
        .await
        .map_err(|e| Error::Runtime(e.to_string()))?;
    // In corral's cache directory, beside the session logs.
    if let Some(cache) = dirs::cache_dir().map(|d| d.join("corral"))
        && let Some(path) = sandbox_helper_path(&cache, &program)
    {
        env.push(("PATH".into(), path));
    }
    env.push(("TMPDIR".into(), private_tmp(&context.tmpdir)?));
    env.extend(key.env);
    // `-c` overrides go before the subcommand: codex reads them as its own options.
    let mut args = key.args;
    args.push("app-server".into());
    let launch = Launch {
        program,
        args,
        cwd: context.root.clone(),
        env,
        env_remove: key.remove,
        env_clear: false,
        stderr_log: context.stderr_log.clone(),
        kind: "codex",
        display_name: None,
    };
    let (process, pipes) =
        AgentProcess::spawn(&launch).map_err(|e| Error::Runtime(e.to_string()))?;
    let (steer_tx, steer_rx) = mpsc::unbounded_channel();
    let mut backend = CodexBackend {
        launch,
        thread_params: thread_params(&context),
        crashed: false,
        crash_untold: false,
        steer_tx,
        steer_rx,
        session: context.session.clone(),
        approver: context.approver.clone(),
        root: context.root.clone(),
        rpc: Rpc::new(pipes.stdin, pipes.stdout),
        process,
        thread_id: String::new(),
        next_model: None,
        effort: None,
        sent_effort: None,
        thread_total: Usage::default(),
        _voucher: key.voucher,
    };
    match backend.handshake(context.resume.as_deref()).await {
        Ok(thread_id) => {
            (context.record_external_id)(&thread_id);
            backend.thread_id = thread_id;
            Ok(Box::new(backend))
        }
        Err(e) => {
            let message = match e {
                RpcError::Closed => format!(
                    "codex stopped while starting: {}",
                    backend.process.crash_report().await
                ),
                other => format!("codex did not start: {other}"),
            };
            backend.rpc.close();
            backend.process.stop(None).await;
            Err(Error::Runtime(message))
        }
    }
}

/// `thread/start`'s (and `thread/resume`'s) parameters for the session.
fn thread_params(context: &ExternalContext) -> Value {
    let (approval, sandbox) = codex_policy(&context.policy);
    // codex's workspace-write lets its commands write all of `/tmp` (and leaves the mount
    // points it makes there, `/tmp/.git` among them, when it is killed mid-command).
    // corral's own tools get the root and a private TMPDIR; so does codex.
    let mut config = json!({"sandbox_workspace_write": {"exclude_slash_tmp": true}});
    if !context.project_settings {
        // codex trusts the directory a thread starts in (and saves that), and a trusted
        // project's `.codex/config.toml` brings MCP servers and hooks that run outside
        // corral's sandbox. Marked untrusted for this thread, the project's config is not
        // read; nothing is saved.
        config["projects"] = json!({
            context.root.display().to_string(): {"trust_level": "untrusted"}});
    }
    let mut params = json!({
        "cwd": context.root.display().to_string(),
        "approvalPolicy": approval,
        "sandbox": sandbox,
        "config": config,
    });
    if let Some(model) = &context.spec.model {
        params["model"] = Value::String(model.clone());
    }
    if let Some(system) = &context.system {
        // Added to codex's own instructions, as the developer's.
        params["developerInstructions"] = Value::String(system.clone());
    }
    params
}

struct CodexBackend {
    /// What starting codex again after a crash takes: the process, and `thread/resume`'s
    /// parameters (the thread's id aside).
    launch: Launch,
    thread_params: Value,
    /// codex died; it is started again on its thread before the next turn.
    crashed: bool,
    /// A crash the manager has not been told of ([`Backend::take_crash`]).
    crash_untold: bool,
    session: Arc<Session>,
    approver: Arc<Approver>,
    root: PathBuf,
    rpc: Rpc,
    process: AgentProcess,
    thread_id: String,
    /// A model switched to, sent with the next `turn/start` (codex keeps it from then on).
    next_model: Option<String>,
    /// The effort the next turns run at ([`Backend::set_effort`]); `None`: codex's default.
    effort: Option<crate::model::Effort>,
    /// The effort last sent with `turn/start` (codex keeps it from then on).
    sent_effort: Option<crate::model::Effort>,
    /// codex reports token usage as thread totals; a turn's usage is the difference.
    thread_total: Usage,
    /// Messages sent while a turn runs, passed on with `turn/steer` ([`Backend::steering`]).
    steer_tx: mpsc::UnboundedSender<String>,
    steer_rx: mpsc::UnboundedReceiver<String>,
    /// codex's key, as a voucher; revoked when the session's backend goes.
    _voucher: Option<voucher::Voucher>,
}

/// How driving a turn ended.
enum Drive {
    Ended(TurnEnd),
    /// codex is gone (its output closed, it exited, or it stopped reading).
    Crashed,
}

/// What woke the turn loop.
enum Wake {
    Cancel,
    Tick,
    Steer(String),
    Message(Option<Incoming>),
}

impl CodexBackend {
    /// `initialize`, then `thread/start`, or `thread/resume` of `resume`: the thread's id.
    async fn handshake(&mut self, resume: Option<&str>) -> Result<String, RpcError> {
        let client = json!({"clientInfo": {
            "name": "corral", "title": "corral", "version": env!("CARGO_PKG_VERSION")}});
        self.rpc
            .call("initialize", client, HANDSHAKE_TIMEOUT)
            .await?;
        self.rpc.notify("initialized", None)?;
        let mut params = self.thread_params.clone();
        let method = match resume {
            Some(thread_id) => {
                params["threadId"] = Value::String(thread_id.to_string());
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
        // The manager starts a crashed codex again before its turn, counting the crashes; a
        // caller that did not (`corral run`, where the person decides) still gets one.
        if !self.crashed && self.process.try_status().is_some() {
            let report = self.process.crash_report().await;
            self.note_crash(
                format!("codex stopped between turns: {report}"),
                Value::Null,
            );
        }
        if let Err(e) = self.start_again().await {
            return TurnOutcome::refused(format!("codex could not be started again: {e}"));
        }
        let turn = match Turn::begin(&self.session, prompt, &[]) {
            Ok(turn) => turn,
            Err(refused) => return refused,
        };
        self.approver.begin_turn();
        let session = self.session.clone();
        let root = self.root.clone();
        let mut state = TurnState::new(&session, &root, self.thread_total);
        let drive = self.drive(prompt, &cancel, &mut state).await;
        self.thread_total = state.thread_total;
        let (usage, text) = (state.usage, std::mem::take(&mut state.text));
        match drive {
            Drive::Ended(end) => turn.finish(end, usage, text).await,
            Drive::Crashed => {
                // A question codex can no longer take an answer to is closed first.
                session.resolve_all_permissions(Decision::Cancel, "codex exited before the answer");
                let report = self.process.crash_report().await;
                let status = self.process.try_status().map(|s| s.to_string());
                self.rpc.close();
                self.process.stop(None).await;
                // The thread is codex's own, on disk: the next turn resumes it.
                self.note_crash(
                    report.clone(),
                    json!({"exitStatus": status, "stderr": self.process.stderr_tail()}),
                );
                turn.died(report, usage, text).await
            }
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
        if self.effort != self.sent_effort {
            // `effort` holds for this turn and the ones after it, so it is sent when it
            // changes; back to no effort is codex's own default level, medium.
            let level = self.effort.unwrap_or(crate::model::Effort::Medium);
            params["effort"] = Value::String(level.as_str().to_string());
            self.sent_effort = self.effort;
        }
        let Ok(start_id) = self.rpc.send_request("turn/start", params) else {
            return Drive::Crashed;
        };
        let mut tick = tokio::time::interval(LIVENESS_TICK);
        let mut interrupted: Option<tokio::time::Instant> = None;
        let mut interrupt_sent = false;
        // Messages that came in as the last turn ended belong to this one; `turn/steer`
        // needs the turn's id, so they wait for it.
        let mut steers: Vec<String> =
            std::iter::from_fn(|| self.steer_rx.try_recv().ok()).collect();
        let mut steer_ids: Vec<Value> = Vec::new();
        loop {
            if interrupted.is_none()
                && !steers.is_empty()
                && let Some(turn_id) = state.turn_id.clone()
            {
                for text in std::mem::take(&mut steers) {
                    let params = json!({"threadId": self.thread_id, "expectedTurnId": turn_id,
                        "input": [{"type": "text", "text": text, "text_elements": []}]});
                    let Ok(id) = self.rpc.send_request("turn/steer", params) else {
                        return Drive::Crashed;
                    };
                    steer_ids.push(json!(id));
                    self.session.emit(Payload::UserText(UserTextData {
                        content: ContentBlock::text(text),
                    }));
                }
            }
            if interrupted.is_some()
                && !interrupt_sent
                && let Some(turn_id) = state.turn_id.clone()
            {
                interrupt_sent = true;
                let params = json!({"threadId": self.thread_id, "turnId": turn_id});
                if self.rpc.send_request("turn/interrupt", params).is_err() {
                    return Drive::Crashed;
                }
            }
            // What codex said before it exited is handled before its exit is noticed.
            let wake = tokio::select! {
                biased;
                _ = cancel.cancelled(), if interrupted.is_none() => Wake::Cancel,
                message = self.rpc.next() => Wake::Message(message),
                Some(text) = self.steer_rx.recv() => Wake::Steer(text),
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
                        return Drive::Ended(TurnEnd::Stop(StopReason::Cancelled));
                    }
                    continue;
                }
                Wake::Steer(text) => {
                    if interrupted.is_some() {
                        self.session.emit_error(
                            "the turn is being cancelled; the message sent meanwhile is dropped",
                            json!({"text": text}),
                        );
                    } else {
                        steers.push(text);
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
                        return Drive::Ended(TurnEnd::Error(format!(
                            "codex refused the turn: {} (code {})",
                            e.message, e.code
                        )));
                    }
                },
                Incoming::Response { id, result: Err(e) } if steer_ids.contains(&id) => {
                    // A refused steer (the turn ended meanwhile, say): said, not swallowed.
                    self.session.emit_error(
                        format!("codex did not take a message into the turn: {}", e.message),
                        Value::Null,
                    );
                }
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
                        Ok(Some(Approval::Cancel)) if interrupted.is_none() => {
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
    ) -> Result<Option<Approval>, RpcError> {
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
                    .respond_error(id, -32601, &format!("corral does not handle {other}"))?;
                return Ok(None);
            }
        };
        // Every path of a change must be allowed; the first refusal decides.
        let mut answer = Approval::Allow {
            by_person: false,
            always: true,
        };
        let approver = self.approver.clone();
        for ask in &asks {
            // A person may take their time; codex dying meanwhile still ends the turn.
            let decided = tokio::select! {
                decided = ask.decide(&approver, cancel) => decided,
                () = exited(&mut self.process) => return Err(RpcError::Closed),
            };
            match decided {
                Approval::Allow { always, .. } => {
                    if let Approval::Allow { always: all, .. } = &mut answer {
                        *all &= always;
                    }
                }
                refused => {
                    answer = refused;
                    break;
                }
            }
        }
        if let Approval::Deny { message } = &answer {
            state.denials.insert(item_id, message.clone());
        }
        self.rpc
            .respond(id, json!({"decision": approve::decision(&answer)}))?;
        Ok(Some(answer))
    }
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

    fn set_effort(
        &mut self,
        effort: Option<crate::model::Effort>,
    ) -> BoxFuture<'_, Result<(), String>> {
        self.effort = effort;
        Box::pin(async { Ok(()) })
    }

    fn shutdown(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.rpc.close();
            self.process.stop(None).await;
        })
    }

    fn steering(&self) -> Option<mpsc::UnboundedSender<String>> {
        Some(self.steer_tx.clone())
    }

    fn watch_idle(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if self.crashed {
                return std::future::pending().await;
            }
            self.process.exited().await;
            let report = self.process.crash_report().await;
            let status = self.process.try_status().map(|s| s.to_string());
            self.note_crash(
                format!("codex stopped between turns: {report}"),
                json!({"exitStatus": status, "stderr": self.process.stderr_tail()}),
            );
        })
    }

    fn take_crash(&mut self) -> BoxFuture<'_, bool> {
        let untold = std::mem::take(&mut self.crash_untold);
        Box::pin(async move { untold })
    }

    fn wake(&mut self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(self.start_again())
    }

    fn info(&self) -> BackendInfo {
        BackendInfo {
            kind: "codex",
            queues_prompts: false,
        }
    }
}
