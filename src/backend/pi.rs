//! `pi[:<provider/model>]`: pi (`@mariozechner/pi-coding-agent`) kept alive in its RPC mode
//! (`pi --mode rpc`), many turns per process, like claude. A turn is a `prompt` command; its
//! events (`message_update`, `tool_execution_*`, `agent_end`) become corral's through the same
//! vocabulary as the per-turn runtimes'. Steering is direct: a message sent while a turn runs
//! is a `steer` command at once, and pi itself holds it until its tool calls are done. A
//! cancel is `abort`.
//!
//! pi has no permission prompts of its own: it runs every tool it is given. So corral gives it
//! only what the preset runs without asking (`--tools`: reads always, `edit`/`write` when edits
//! are unasked, `bash` when commands are), the same up-front decision as for the per-turn
//! runtimes, and loads no extensions, skills or prompt templates from the project (extensions
//! are code) unless the person opted in. The conversation is pi's session, recorded for
//! `--resume` (`--session=<id>`).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::agent_process::{AgentProcess, Launch};
use super::external::ExternalContext;
use super::per_turn::emit::Emitter;
use super::per_turn::parse::{self, Step};
use super::per_turn::runtimes::{self, Format, Unasked};
use super::per_turn::{advisory, notifications};
use super::{Backend, BackendInfo, BoxFuture};
use crate::error::Error;
use crate::event::{ContentBlock, Payload, StopReason, UserTextData};
use crate::session::{Session, Turn, TurnEnd, TurnOutcome};

/// How long pi may take to answer `get_state` after starting.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long pi may take to end a turn after `abort`.
const ABORT_GRACE: Duration = Duration::from_secs(20);
const MAX_LINE: usize = 8 * 1024 * 1024;

enum Line {
    Json(Value),
    Malformed(String),
}

pub async fn start(context: ExternalContext) -> Result<Box<dyn Backend>, Error> {
    let program = crate::sandbox::programs::find_installed(runtimes::PI)
        .map_err(|e| Error::Usage(e.to_string()))?;
    let unasked = Unasked::of(&context.policy);
    if let Some(warning) = advisory(&context.policy, unasked, "pi") {
        context
            .session
            .emit_error(warning, json!({"agent": "pi", "advisory": true}));
    }
    // pi's parser takes no `--flag=value` forms: a value that starts with `-` could be read
    // as a flag of its own (a model named `--extension`, say).
    for value in [context.spec.model.as_deref(), context.resume.as_deref()]
        .into_iter()
        .flatten()
    {
        if value.starts_with('-') {
            return Err(Error::Usage(format!(
                "pi: {value:?} cannot start with '-': pi would read it as an option"
            )));
        }
    }
    let launch = launch(&context, program, unasked);
    let (mut process, pipes) =
        AgentProcess::spawn(&launch).map_err(|e| Error::Runtime(e.to_string()))?;
    let (tx, mut lines) = mpsc::unbounded_channel();
    tokio::spawn(read_lines(pipes.stdout, tx));
    let mut stdin = pipes.stdin;
    let asked = write(
        &mut stdin,
        &json!({"id": "corral-state", "type": "get_state"}),
    )
    .await;
    let state = match asked {
        Ok(()) => tokio::time::timeout(START_TIMEOUT, async {
            while let Some(line) = lines.recv().await {
                if let Line::Json(value) = line
                    && value["type"] == "response"
                    && value["id"] == "corral-state"
                {
                    return Some(value);
                }
            }
            None
        })
        .await
        .ok()
        .flatten(),
        Err(_) => None,
    };
    let Some(state) = state.filter(|s| s["success"] == true) else {
        let report = process.crash_report().await;
        process.stop(Some(stdin)).await;
        return Err(Error::Runtime(format!("pi did not start: {report}")));
    };
    let external_id = state["data"]["sessionId"].as_str().map(str::to_string);
    if let Some(id) = &external_id {
        (context.record_external_id)(id);
    }
    let (steer_tx, steer_rx) = mpsc::unbounded_channel();
    Ok(Box::new(PiBackend {
        process,
        stdin: Some(stdin),
        lines,
        steer_tx,
        steer_rx,
        session: context.session,
        dead: false,
    }))
}

fn launch(context: &ExternalContext, program: std::path::PathBuf, unasked: Unasked) -> Launch {
    let mut tools = vec!["read", "grep", "find", "ls"];
    if unasked.edits {
        tools.extend(["edit", "write"]);
    }
    if unasked.shell {
        tools.push("bash");
    }
    let mut args: Vec<String> = vec![
        "--mode".into(),
        "rpc".into(),
        "--offline".into(),
        "--tools".into(),
        tools.join(","),
    ];
    if !context.project_settings {
        args.extend(
            ["--no-extensions", "--no-skills", "--no-prompt-templates"].map(str::to_string),
        );
    }
    let mut instructions = context.system.clone().unwrap_or_default();
    if !instructions.is_empty() {
        instructions.push_str("\n\n");
    }
    instructions.push_str(&notifications::section(
        runtimes::PERSISTENT,
        runtimes::Steering::Direct,
    ));
    // Never read as a flag: the request's `system` text could start with `-`.
    if instructions.starts_with('-') {
        instructions.insert(0, ' ');
    }
    args.extend(["--append-system-prompt".into(), instructions]);
    if let Some(model) = &context.spec.model {
        args.extend(["--model".into(), model.clone()]);
    }
    if let Some(id) = &context.resume {
        args.extend(["--session".into(), id.clone()]);
    }
    let mut env = vec![("PI_OFFLINE".to_string(), "1".to_string())];
    if let Some(home) = &context.home {
        env.push(("HOME".into(), home.to_string_lossy().into_owned()));
    }
    Launch {
        program,
        args,
        cwd: context.root.clone(),
        env,
        env_remove: Vec::new(),
        env_clear: false,
        stderr_log: context.stderr_log.clone(),
        kind: "pi",
        display_name: Some("pi".into()),
    }
}

async fn write(stdin: &mut ChildStdin, value: &Value) -> std::io::Result<()> {
    let mut line = value.to_string();
    line.push('\n');
    stdin.write_all(line.as_bytes()).await?;
    stdin.flush().await
}

async fn read_lines(stdout: ChildStdout, tx: mpsc::UnboundedSender<Line>) {
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        match crate::sandbox::agent_process::read_capped_line(&mut reader, &mut line, MAX_LINE)
            .await
        {
            Ok(true) => {}
            Ok(false) | Err(_) => return,
        }
        let text = String::from_utf8_lossy(&line);
        let parsed = match serde_json::from_str::<Value>(text.trim()) {
            Ok(value @ Value::Object(_)) => Line::Json(value),
            _ if text.trim().is_empty() => continue,
            _ => Line::Malformed(text.chars().take(300).collect()),
        };
        if tx.send(parsed).is_err() {
            return;
        }
    }
}

struct PiBackend {
    process: AgentProcess,
    stdin: Option<ChildStdin>,
    lines: mpsc::UnboundedReceiver<Line>,
    steer_tx: mpsc::UnboundedSender<String>,
    steer_rx: mpsc::UnboundedReceiver<String>,
    session: Arc<Session>,
    dead: bool,
}

enum Next {
    Line(Option<Line>),
    Steer(String),
    Cancel,
    Stuck,
}

impl PiBackend {
    async fn send(&mut self, value: &Value) -> std::io::Result<()> {
        match self.stdin.as_mut() {
            Some(stdin) => write(stdin, value).await,
            None => Err(std::io::Error::other("pi's stdin is closed")),
        }
    }

    async fn turn(&mut self, prompt: &str, cancel: CancellationToken) -> TurnOutcome {
        if self.dead {
            return TurnOutcome::refused("pi has exited; open a new session");
        }
        let turn = match Turn::begin(&self.session, prompt, &[]) {
            Ok(turn) => turn,
            Err(refused) => return refused,
        };
        let mut emitter = Emitter::new(self.session.clone(), "pi");
        if self
            .send(&json!({"type": "prompt", "message": prompt}))
            .await
            .is_err()
        {
            return self.died(turn, &mut emitter).await;
        }
        let mut aborted: Option<tokio::time::Instant> = None;
        loop {
            let next = tokio::select! {
                line = self.lines.recv() => Next::Line(line),
                Some(text) = self.steer_rx.recv() => Next::Steer(text),
                () = cancel.cancelled(), if aborted.is_none() => Next::Cancel,
                () = sleep_until(aborted) => Next::Stuck,
            };
            match next {
                Next::Line(None) | Next::Stuck => return self.died(turn, &mut emitter).await,
                Next::Steer(text) => {
                    if aborted.is_some() {
                        self.session.emit_error(
                            "the turn is being cancelled; the message sent meanwhile is dropped",
                            json!({"text": text}),
                        );
                        continue;
                    }
                    if self
                        .send(&json!({"type": "steer", "message": text}))
                        .await
                        .is_err()
                    {
                        return self.died(turn, &mut emitter).await;
                    }
                    self.session.emit(Payload::UserText(UserTextData {
                        content: ContentBlock::text(text),
                    }));
                }
                Next::Cancel => {
                    aborted = Some(tokio::time::Instant::now() + ABORT_GRACE);
                    if self.send(&json!({"type": "abort"})).await.is_err() {
                        return self.died(turn, &mut emitter).await;
                    }
                }
                Next::Line(Some(Line::Malformed(text))) => emitter.apply(Step::Error(format!(
                    "pi wrote a line that is not a JSON object: {text}"
                ))),
                Next::Line(Some(Line::Json(value))) => {
                    if value["type"] == "response"
                        && value["command"] == "prompt"
                        && value["success"] == false
                    {
                        let text = emitter.finish();
                        let why = value["error"].as_str().unwrap_or("pi refused the prompt");
                        return turn
                            .finish(TurnEnd::Error(why.to_string()), Default::default(), text)
                            .await;
                    }
                    for step in parse::object(Format::PiRpc, &value) {
                        emitter.apply(step);
                    }
                    if let Some((error, usage)) = emitter.end.take() {
                        let text = emitter.finish();
                        let end = match error {
                            _ if aborted.is_some() => TurnEnd::Stop(StopReason::Cancelled),
                            Some(error) => TurnEnd::Error(error),
                            None => TurnEnd::Stop(StopReason::EndTurn),
                        };
                        return turn.finish(end, usage, text).await;
                    }
                }
            }
        }
    }

    /// pi died (or would not stop after `abort`): the session ends with its report.
    async fn died(&mut self, turn: Turn, emitter: &mut Emitter) -> TurnOutcome {
        self.dead = true;
        let report = self.process.crash_report().await;
        self.process.stop(self.stdin.take()).await;
        let text = emitter.finish();
        turn.crashed(report, Default::default(), text).await
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

impl Backend for PiBackend {
    fn run_turn<'a>(
        &'a mut self,
        prompt: &'a str,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, TurnOutcome> {
        Box::pin(self.turn(prompt, cancel))
    }

    fn steering(&self) -> Option<mpsc::UnboundedSender<String>> {
        Some(self.steer_tx.clone())
    }

    fn set_model<'a>(&'a mut self, model: &'a str) -> BoxFuture<'a, Result<bool, String>> {
        Box::pin(async move {
            let (provider, id) = model.split_once('/').unwrap_or(("", model));
            let mut command = json!({"type": "set_model", "modelId": id});
            if !provider.is_empty() {
                command["provider"] = json!(provider);
            }
            self.send(&command).await.map_err(|e| e.to_string())?;
            Ok(true)
        })
    }

    fn shutdown(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let stdin = self.stdin.take();
            self.process.stop(stdin).await;
        })
    }

    fn info(&self) -> BackendInfo {
        BackendInfo {
            kind: "pi",
            queues_prompts: false,
        }
    }
}
