//! `claude[:<model>]`: the Claude Code CLI kept alive in stream-json mode, many turns per
//! process (wire-formats.md §5, external-clis.md §1).
//!
//! One line per turn goes to its stdin; its stdout lines become corral's events: partial
//! messages the `delta` chunks, finished blocks the authoritative copies, `tool_use` /
//! `tool_result` matched by id, `result` the turn's end with usage. Whatever claude would ask
//! a person comes as a `can_use_tool` control request (`--permission-prompt-tool stdio`) and
//! is answered by corral's gate ([`Approver`]), so a claude tool call is approved exactly like
//! a native one. A cancel is claude's `interrupt` control request.
//!
//! Steering: a message sent while a turn runs comes through [`Backend::steering`] and is held
//! until a safe boundary — no message being streamed and no tool use without its result — so
//! nothing is ever written into claude's stdin mid-block. claude answers such a line after the
//! running request with a `result` of its own; the corral turn goes on until the last written
//! message has its result (usage summed).
//!
//! The process lives in its own process group, tracked for reaping; its stderr goes to the
//! session's stderr log. When it dies — mid-turn or between turns — the session gets an
//! `error` with the exit status and the last stderr lines, and goes `dead`.

pub(crate) mod launch;
mod stream;
mod turn;

pub(crate) use launch::recursion_guard;

#[cfg(test)]
mod tests;

use std::os::unix::process::ExitStatusExt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::agent_process::AgentProcess;
use super::external::ExternalContext;
use super::{Backend, BackendInfo, BoxFuture};
use crate::error::Error;
use crate::policy::Approver;
use crate::session::{Session, TurnOutcome};

/// How long a `set_model` control request may take.
const CONTROL_TIMEOUT: Duration = Duration::from_secs(15);

/// Starts claude for a session. Nothing is exchanged yet: claude prints nothing before its
/// first user line.
pub async fn start(context: ExternalContext) -> Result<Box<dyn Backend>, Error> {
    let program = crate::sandbox::programs::find_installed(launch::PROGRAM)
        .map_err(|e| Error::Runtime(e.to_string()))?;
    start_program(context, program).await
}

async fn start_program(
    context: ExternalContext,
    program: std::path::PathBuf,
) -> Result<Box<dyn Backend>, Error> {
    let key = crate::backend::external::voucher::agents::claude(context.session.id())
        .await
        .map_err(|e| Error::Runtime(e.to_string()))?;
    let mut launch = launch::launch(&context, program);
    launch.env_remove.extend(key.remove);
    launch.env.extend(key.env);
    tracing::debug!(args = ?launch.args, "starting claude");
    let (process, pipes) =
        AgentProcess::spawn(&launch).map_err(|e| Error::Runtime(e.to_string()))?;
    let shared = Arc::new(Shared {
        phase: Mutex::new(Phase::Idle),
        died: tokio::sync::Notify::new(),
        process: tokio::sync::Mutex::new(process),
        session: context.session.clone(),
    });
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(read_stdout(pipes.stdout, tx, shared.clone()));
    let (steer_tx, steer_rx) = mpsc::unbounded_channel();
    Ok(Box::new(ClaudeBackend {
        steer_tx,
        steer_rx,
        shared,
        approver: context.approver,
        record_external_id: context.record_external_id,
        external_id: context.resume,
        effort: context.effort,
        stdin: Some(pipes.stdin),
        lines: rx,
        held: std::collections::VecDeque::new(),
        next_request: 0,
        cost_so_far: 0.0,
        launch,
        model: context.spec.model,
        asleep: false,
        _voucher: key.voucher,
        crash_untold: false,
    }))
}

/// Who is reading claude's stdout right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Nobody: an end of stdout is a crash the reader reports itself.
    Idle,
    /// A turn or a control request: the end of stdout is passed on as [`Line::Eof`].
    Busy,
    /// Shutting down: the end is expected.
    Closing,
    /// The process died and the session is (being) closed.
    Dead,
}

struct Shared {
    phase: Mutex<Phase>,
    /// Told when claude dies between turns.
    died: tokio::sync::Notify,
    process: tokio::sync::Mutex<AgentProcess>,
    session: Arc<Session>,
}

impl Shared {
    fn phase(&self) -> MutexGuard<'_, Phase> {
        self.phase.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The process is gone: one `error` with its exit status and stderr tail. Returns the
    /// report for the turn's `result`.
    async fn report_crash(&self) -> String {
        *self.phase() = Phase::Dead;
        let mut process = self.process.lock().await;
        let report = process.crash_report().await;
        let status = process.try_status();
        let data = json!({
            "exitCode": status.and_then(|s| s.code()),
            "signal": status.and_then(|s| s.signal()),
            "stderr": process.stderr_tail(),
        });
        self.session.emit_error(report.clone(), data);
        report
    }
}

/// One line of claude's stdout.
#[derive(Debug)]
enum Line {
    Json(Value),
    /// Not a JSON object: shown as an error, never fatal.
    Malformed(String),
    Eof,
}

async fn read_stdout(stdout: ChildStdout, tx: mpsc::UnboundedSender<Line>, shared: Arc<Shared>) {
    let mut reader = BufReader::new(stdout);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let text = String::from_utf8_lossy(&buf);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let line = match serde_json::from_str::<Value>(text) {
            Ok(value) if value.is_object() => Line::Json(value),
            _ => Line::Malformed(text.to_string()),
        };
        if tx.send(line).is_err() {
            return;
        }
    }
    // Checked and claimed in one step: a turn starting now must see `Dead`, not race the report.
    let phase = {
        let mut phase = shared.phase();
        let was = *phase;
        if was == Phase::Idle {
            *phase = Phase::Dead;
        }
        was
    };
    match phase {
        Phase::Idle => {
            // Between turns: reported now; the session's executor restarts claude when the
            // next message needs it ([`Backend::take_crash`]).
            shared.report_crash().await;
            shared.died.notify_one();
        }
        Phase::Busy => {
            let _ = tx.send(Line::Eof);
        }
        Phase::Closing | Phase::Dead => {}
    }
}

pub struct ClaudeBackend {
    shared: Arc<Shared>,
    approver: Arc<Approver>,
    record_external_id: Box<dyn Fn(&str) + Send + Sync>,
    /// claude's own session id, as last recorded.
    external_id: Option<String>,
    /// The effort claude runs at: `--effort` at start, `apply_flag_settings` since.
    effort: Option<crate::model::Effort>,
    stdin: Option<ChildStdin>,
    lines: mpsc::UnboundedReceiver<Line>,
    /// Lines read while a permission question was open, not yet handled.
    held: std::collections::VecDeque<Line>,
    next_request: u64,
    /// claude's running `total_cost_usd` at the end of the last turn.
    cost_so_far: f64,
    /// Messages sent while a turn runs ([`Backend::steering`]).
    steer_tx: mpsc::UnboundedSender<String>,
    steer_rx: mpsc::UnboundedReceiver<String>,
    /// How claude was started, for starting it again after [`Backend::sleep`].
    launch: crate::sandbox::agent_process::Launch,
    /// The model claude runs, as last switched to.
    model: Option<String>,
    /// The process was stopped while idle; the next turn starts it again.
    asleep: bool,
    /// claude's key, as a voucher; revoked when the session's backend goes.
    _voucher: Option<crate::backend::external::voucher::Voucher>,
    /// A crash a turn found and restarted from itself, not yet reported by
    /// [`Backend::take_crash`].
    crash_untold: bool,
}

impl ClaudeBackend {
    fn session(&self) -> &Arc<Session> {
        &self.shared.session
    }

    async fn write_line(&mut self, value: &Value) -> std::io::Result<()> {
        let Some(stdin) = self.stdin.as_mut() else {
            return Err(std::io::Error::other("claude's stdin is closed"));
        };
        let mut line = value.to_string();
        line.push('\n');
        stdin.write_all(line.as_bytes()).await?;
        stdin.flush().await
    }

    fn request_id(&mut self) -> String {
        self.next_request += 1;
        format!("corral_{}", self.next_request)
    }

    /// Sends a control request; returns its id.
    async fn control(&mut self, request: Value) -> std::io::Result<String> {
        let id = self.request_id();
        let line = json!({"type": "control_request", "request_id": id, "request": request});
        self.write_line(&line).await?;
        Ok(id)
    }

    fn record_session_id(&mut self, value: &Value) {
        if let Some(id) = value.get("session_id").and_then(Value::as_str)
            && !id.is_empty()
            && self.external_id.as_deref() != Some(id)
        {
            (self.record_external_id)(id);
            self.external_id = Some(id.to_string());
        }
    }

    /// `set_model` control request; claude keeps the conversation. Takes `claude:<model>` or
    /// a bare claude model name.
    async fn switch_model(&mut self, model: &str) -> Result<bool, String> {
        let model = model.strip_prefix("claude:").unwrap_or(model);
        if model.is_empty() || model.contains(':') {
            return Err(format!(
                "{model:?} is not a claude model: a claude session switches to claude:<model>"
            ));
        }
        {
            let mut phase = self.shared.phase();
            if *phase != Phase::Idle {
                return Err(format!("cannot switch models while the agent is {phase:?}"));
            }
            *phase = Phase::Busy;
        }
        let result = self
            .await_control(json!({"subtype": "set_model", "model": model}))
            .await;
        {
            let mut phase = self.shared.phase();
            if *phase == Phase::Busy {
                *phase = Phase::Idle;
            }
        }
        result.map(|_| {
            self.model = Some(model.to_string());
            true
        })
    }

    /// Stops claude between turns; its conversation stays in its own session files.
    async fn put_to_sleep(&mut self) -> Result<(), String> {
        if self.asleep {
            return Ok(());
        }
        {
            let mut phase = self.shared.phase();
            if *phase != Phase::Idle {
                return Err(format!("claude cannot sleep while it is {phase:?}"));
            }
            *phase = Phase::Closing;
        }
        let stdin = self.stdin.take();
        self.shared.process.lock().await.stop(stdin).await;
        self.held.clear();
        self.asleep = true;
        Ok(())
    }

    /// A claude that died unasked: what is left of it is reaped and it counts as asleep, so
    /// the next turn starts it on its own session. Whether it had died.
    async fn reap_crashed(&mut self) -> bool {
        if self.asleep || *self.shared.phase() != Phase::Dead {
            return false;
        }
        let stdin = self.stdin.take();
        self.shared.process.lock().await.stop(stdin).await;
        self.held.clear();
        self.asleep = true;
        true
    }

    /// Starts claude again on its own session (`--resume=<id>`), with the model and effort
    /// the session has now.
    async fn wake_up(&mut self) -> Result<(), String> {
        if !self.asleep {
            return Ok(());
        }
        let mut launch = self.launch.clone();
        launch.args = relaunch_args(
            &self.launch.args,
            self.model.as_deref(),
            self.effort,
            self.external_id.as_deref(),
        );
        tracing::debug!(args = ?launch.args, "waking claude");
        let (process, pipes) = AgentProcess::spawn(&launch).map_err(|e| e.to_string())?;
        *self.shared.process.lock().await = process;
        let (tx, rx) = mpsc::unbounded_channel();
        *self.shared.phase() = Phase::Idle;
        tokio::spawn(read_stdout(pipes.stdout, tx, self.shared.clone()));
        self.lines = rx;
        self.stdin = Some(pipes.stdin);
        // A new process counts its cost from nothing.
        self.cost_so_far = 0.0;
        self.asleep = false;
        Ok(())
    }

    /// Changes claude's effort for the turns from now on, keeping the conversation: the
    /// `apply_flag_settings` control request (the setting `--effort` starts it with; `null`
    /// returns to claude's own default).
    async fn apply_effort(&mut self, effort: Option<crate::model::Effort>) -> Result<(), String> {
        if effort == self.effort {
            return Ok(());
        }
        let shown = effort.map_or("default", |e| e.as_str());
        {
            let mut phase = self.shared.phase();
            if *phase != Phase::Idle {
                return Err(format!(
                    "effort {shown} is not applied: the agent is {phase:?}"
                ));
            }
            *phase = Phase::Busy;
        }
        let level = effort.map_or(Value::Null, |e| json!(e.as_str()));
        let result = self
            .await_control(json!({"subtype": "apply_flag_settings",
                                  "settings": {"effortLevel": level}}))
            .await;
        {
            let mut phase = self.shared.phase();
            if *phase == Phase::Busy {
                *phase = Phase::Idle;
            }
        }
        match result {
            Ok(_) => {
                self.effort = effort;
                Ok(())
            }
            Err(e) => Err(format!("effort {shown} is not applied: claude said {e}")),
        }
    }

    async fn await_control(&mut self, request: Value) -> Result<Value, String> {
        let id = match self.control(request).await {
            Ok(id) => id,
            Err(e) => return Err(format!("cannot write to claude: {e}")),
        };
        let deadline = tokio::time::Instant::now() + CONTROL_TIMEOUT;
        loop {
            let line = match tokio::time::timeout_at(deadline, self.lines.recv()).await {
                Err(_) => return Err("claude did not answer the control request".into()),
                Ok(line) => line.unwrap_or(Line::Eof),
            };
            match line {
                Line::Eof => return Err(self.shared.report_crash().await),
                Line::Json(value) if value["type"] == "control_response" => {
                    let response = &value["response"];
                    if response["request_id"].as_str() != Some(id.as_str()) {
                        continue;
                    }
                    if response["subtype"] == "success" {
                        return Ok(response["response"].clone());
                    }
                    return Err(response["error"]
                        .as_str()
                        .unwrap_or("claude refused the request")
                        .to_string());
                }
                _ => {}
            }
        }
    }
}

/// The first launch's arguments with the model, effort and resumed session a woken process
/// takes (each replaced, never added twice).
fn relaunch_args(
    first: &[String],
    model: Option<&str>,
    effort: Option<crate::model::Effort>,
    resume: Option<&str>,
) -> Vec<String> {
    let mut args: Vec<String> = first
        .iter()
        .filter(|arg| {
            !["--model=", "--effort=", "--resume="]
                .iter()
                .any(|f| arg.starts_with(f))
        })
        .cloned()
        .collect();
    // Each in the `=` form: a model name switched to by a client can never be read as
    // another flag of claude's.
    if let Some(model) = model {
        args.push(format!("--model={model}"));
    }
    if let Some(effort) = effort {
        args.push(format!("--effort={effort}"));
    }
    if let Some(id) = resume {
        args.push(format!("--resume={id}"));
    }
    args
}

impl Backend for ClaudeBackend {
    fn run_turn<'a>(
        &'a mut self,
        prompt: &'a str,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, TurnOutcome> {
        Box::pin(self.turn(prompt, cancel))
    }

    fn set_model<'a>(&'a mut self, model: &'a str) -> BoxFuture<'a, Result<bool, String>> {
        Box::pin(self.switch_model(model))
    }

    fn set_effort(
        &mut self,
        effort: Option<crate::model::Effort>,
    ) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(self.apply_effort(effort))
    }

    fn shutdown(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if self.asleep {
                return;
            }
            {
                let mut phase = self.shared.phase();
                if *phase != Phase::Dead {
                    *phase = Phase::Closing;
                }
            }
            let stdin = self.stdin.take();
            self.shared.process.lock().await.stop(stdin).await;
        })
    }

    fn steering(&self) -> Option<mpsc::UnboundedSender<String>> {
        Some(self.steer_tx.clone())
    }

    fn sleeps(&self) -> bool {
        true
    }

    fn watch_idle(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            loop {
                let died = self.shared.died.notified();
                if *self.shared.phase() == Phase::Dead && !self.asleep {
                    return;
                }
                died.await;
            }
        })
    }

    fn take_crash(&mut self) -> BoxFuture<'_, bool> {
        Box::pin(async move {
            let reaped_now = self.reap_crashed().await;
            std::mem::take(&mut self.crash_untold) || reaped_now
        })
    }

    fn sleep(&mut self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(self.put_to_sleep())
    }

    fn wake(&mut self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(self.wake_up())
    }

    fn info(&self) -> BackendInfo {
        BackendInfo {
            kind: "claude",
            queues_prompts: false,
        }
    }
}
