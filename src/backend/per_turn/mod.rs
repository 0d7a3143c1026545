//! Per-turn runtimes (`gemini[:model]`, `qwen[:model]`, `copilot[:model]`,
//! `opencode[:model]`, `cursor[:model]`, `antigravity`): a process for each turn, which exits
//! when the turn is done. The conversation goes on through the runtime's own session id (its
//! resume flag); nothing runs between turns, so a session of this kind costs nothing while it
//! waits, and no process of it outlives its turn (the whole process group is ended when the
//! turn is, however it ended).
//!
//! Such a runtime's headless mode cannot ask anyone anything mid-turn. So corral decides up
//! front, from the session's preset ([`runtimes::Unasked`]): what the preset runs without
//! asking is allowed by the runtime's own flags, what it would ask about is refused, what it
//! does not offer is taken away where the runtime can be told. The preset's finer rules
//! (patterns, `.git`) are not seen by the runtime, which the session is told once at its
//! start.
//!
//! Messages sent while a turn runs cannot reach it (steering `none`): the manager queues them
//! and they become the next turn. The agent is told so in a generated "## Message
//! Notifications" section ([`notifications`]).

pub(super) mod emit;
pub mod notifications;
pub(super) mod parse;
pub mod runtimes;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio_util::sync::CancellationToken;

use self::emit::Emitter;
use self::runtimes::{Invocation, Runtime, Unasked};
use super::agent_process::{AgentProcess, Launch};
use super::external::ExternalContext;
use super::external::voucher::agents::{self, AgentKey};
use super::{Backend, BackendInfo, BoxFuture};
use crate::error::Error;
use crate::event::{StopReason, Usage};
use crate::policy::Policy;
use crate::session::{Session, Turn, TurnEnd, TurnOutcome};

/// A stdout line longer than this is cut (and then reads as malformed).
const MAX_LINE: usize = 8 * 1024 * 1024;
/// How long a runtime may take to exit after its stdout closed.
const EXIT_GRACE: Duration = Duration::from_secs(10);

pub async fn start(context: ExternalContext) -> Result<Box<dyn Backend>, Error> {
    let name = context.spec.kind.name();
    let runtime = runtimes::per_turn(name)
        .ok_or_else(|| Error::Usage(format!("{name} is not a per-turn runtime")))?;
    let program = crate::sandbox::programs::find_installed(runtime.program)
        .map_err(|e| Error::Usage(e.to_string()))?;
    let key = agent_key(runtime, context.session.id())
        .await
        .map_err(|e| Error::Runtime(e.to_string()))?;
    let unasked = Unasked::of(&context.policy);
    if let Some(warning) = advisory(&context.policy, unasked, runtime.name) {
        context
            .session
            .emit_error(warning, json!({"agent": runtime.name, "advisory": true}));
    }
    let mut instructions = context.system.clone().unwrap_or_default();
    if !instructions.is_empty() {
        instructions.push_str("\n\n");
    }
    instructions.push_str(&notifications::section(runtime.lifecycle, runtime.steering));
    Ok(Box::new(PerTurnBackend {
        runtime,
        program,
        session: context.session,
        root: context.root,
        home: context.home,
        stderr_log: context.stderr_log,
        record_external_id: context.record_external_id,
        project_settings: context.project_settings,
        model: context.spec.model,
        // A resumed session has had its instructions.
        introduced: context.resume.is_some(),
        external_id: context.resume,
        unasked,
        instructions,
        key,
    }))
}

/// The key a runtime gets, as a voucher where corral knows which variable it reads.
async fn agent_key(
    runtime: &Runtime,
    session: &str,
) -> Result<AgentKey, crate::backend::external::voucher::VoucherError> {
    match runtime.name {
        "gemini" => agents::gemini(session).await,
        "qwen" => {
            agents::openai_compatible(session, "OPENAI_API_KEY", "OPENAI_BASE_URL", None).await
        }
        "copilot" => agents::copilot(session).await,
        // opencode has a provider per key and cursor/antigravity their own logins: their
        // environment stays as it is.
        _ => Ok(AgentKey::default()),
    }
}

/// What of the preset the runtime is not held to, said once when the session starts.
pub(super) fn advisory(policy: &Policy, unasked: Unasked, agent: &str) -> Option<String> {
    let mut free = Vec::new();
    if unasked.edits {
        free.push("edits");
    }
    if unasked.shell {
        free.push("commands");
    }
    if unasked.fetch {
        free.push("fetches");
    }
    if free.is_empty() {
        return None;
    }
    Some(format!(
        "{agent} runs a turn at a time and cannot ask corral mid-turn: under the '{}' preset it \
         makes {} without asking, with its own tools, which corral's rules (patterns, the \
         .git guard) do not see",
        policy.name,
        free.join(" and ")
    ))
}

struct PerTurnBackend {
    runtime: &'static Runtime,
    program: PathBuf,
    session: Arc<Session>,
    root: PathBuf,
    home: Option<PathBuf>,
    stderr_log: Option<PathBuf>,
    record_external_id: Box<dyn Fn(&str) + Send + Sync>,
    project_settings: bool,
    model: Option<String>,
    /// The runtime's own session id, once its first turn gave one.
    external_id: Option<String>,
    /// The conversation has had its standing instructions.
    introduced: bool,
    unasked: Unasked,
    /// The request's `system` text and the generated notifications section.
    instructions: String,
    /// Held for the session's life: dropped, the voucher is revoked.
    key: AgentKey,
}

impl PerTurnBackend {
    fn launch(&self, prompt: &str) -> (Launch, Option<String>) {
        let takes_instructions = self.runtime.takes_instructions;
        let prompt = if self.introduced || takes_instructions {
            prompt.to_string()
        } else {
            notifications::first_prompt(&self.instructions, prompt)
        };
        let command = self.runtime.command(&Invocation {
            prompt: &prompt,
            model: self.model.as_deref(),
            resume: self.external_id.as_deref(),
            unasked: self.unasked,
            system: takes_instructions.then_some(self.instructions.as_str()),
            project_settings: self.project_settings,
        });
        let mut env = project_env(self.project_settings);
        if let Some(home) = &self.home {
            let dir = |rel: &str| home.join(rel).to_string_lossy().into_owned();
            env.push(("HOME".into(), home.to_string_lossy().into_owned()));
            env.push(("XDG_CONFIG_HOME".into(), dir(".config")));
            env.push(("XDG_DATA_HOME".into(), dir(".local/share")));
            env.push(("XDG_STATE_HOME".into(), dir(".local/state")));
            env.push(("XDG_CACHE_HOME".into(), dir(".cache")));
        }
        env.extend(self.key.env.iter().cloned());
        env.extend(command.env);
        let mut args = self.key.args.clone();
        args.extend(command.args);
        let launch = Launch {
            program: self.program.clone(),
            args,
            cwd: self.root.clone(),
            env,
            env_remove: self.key.remove.clone(),
            env_clear: false,
            stderr_log: self.stderr_log.clone(),
            kind: self.runtime.name,
            display_name: Some(self.runtime.name.to_string()),
        };
        (launch, command.stdin)
    }

    async fn turn(&mut self, prompt: &str, cancel: CancellationToken) -> TurnOutcome {
        let turn = match Turn::begin(&self.session, prompt, &[]) {
            Ok(turn) => turn,
            Err(refused) => return refused,
        };
        if let Err(message) = planted_settings(self.runtime.name, &self.root, self.project_settings)
        {
            return turn
                .finish(TurnEnd::Error(message), Usage::default(), String::new())
                .await;
        }
        let (launch, stdin) = self.launch(prompt);
        let (mut process, pipes) = match AgentProcess::spawn(&launch) {
            Ok(spawned) => spawned,
            Err(e) => {
                return turn
                    .finish(
                        TurnEnd::Error(e.to_string()),
                        Usage::default(),
                        String::new(),
                    )
                    .await;
            }
        };
        let mut emitter = Emitter::new(self.session.clone(), self.runtime.name);
        let cancelled = self
            .read_turn(&mut process, pipes, stdin, &mut emitter, &cancel)
            .await;
        // The group goes, whatever is left of it: nothing of a turn outlives it.
        let ended_early = emitter.end.is_some() && self.runtime.lifecycle.terminate_on_end;
        let status = if cancelled || ended_early {
            None
        } else {
            process.wait_exit(EXIT_GRACE).await
        };
        let report = if emitter.end.is_none() && !cancelled {
            Some(process.crash_report().await)
        } else {
            None
        };
        process.stop(None).await;
        if let Some(id) = emitter.session_id.clone()
            && self.external_id.as_deref() != Some(id.as_str())
        {
            (self.record_external_id)(&id);
            self.external_id = Some(id);
        }
        if emitter.session_id.is_some() || emitter.end.is_some() {
            self.introduced = true;
        }
        let text = emitter.finish();
        let plain_ok = self.runtime.format == runtimes::Format::PlainText
            && status.is_some_and(|s| s.success());
        let (end, usage) = match emitter.end.take() {
            _ if cancelled => (TurnEnd::Stop(StopReason::Cancelled), Usage::default()),
            Some((None, usage)) => (TurnEnd::Stop(StopReason::EndTurn), usage),
            Some((Some(error), usage)) => (TurnEnd::Error(error), usage),
            None if plain_ok => {
                self.introduced = true;
                (TurnEnd::Stop(StopReason::EndTurn), Usage::default())
            }
            None => (
                TurnEnd::Error(format!(
                    "{} ended before its turn did: {}",
                    self.runtime.name,
                    report.unwrap_or_default()
                )),
                Usage::default(),
            ),
        };
        turn.finish(end, usage, text).await
    }

    /// Feeds the prompt and reads stdout to its end (or the turn's, for a runtime that is
    /// ended then). `true`: cancelled.
    async fn read_turn(
        &self,
        process: &mut AgentProcess,
        pipes: crate::sandbox::agent_process::Pipes,
        stdin: Option<String>,
        emitter: &mut Emitter,
        cancel: &CancellationToken,
    ) -> bool {
        let mut input = pipes.stdin;
        // Written beside the reading: a long prompt must not block on a full pipe while the
        // agent waits for us to read its output.
        let writer = tokio::spawn(async move {
            if let Some(text) = stdin {
                let _ = input.write_all(text.as_bytes()).await;
            }
            let _ = input.shutdown().await;
        });
        let mut reader = BufReader::new(pipes.stdout);
        let mut line = Vec::new();
        let cancelled = loop {
            line.clear();
            let read = tokio::select! {
                read = crate::sandbox::agent_process::read_capped_line(&mut reader, &mut line, MAX_LINE) => read,
                () = cancel.cancelled() => break true,
            };
            match read {
                Ok(true) => {}
                Ok(false) | Err(_) => break false,
            }
            let text = String::from_utf8_lossy(&line);
            for step in parse::line(self.runtime.format, &text) {
                emitter.apply(step);
            }
            if emitter.end.is_some() && self.runtime.lifecycle.terminate_on_end {
                break false;
            }
        };
        writer.abort();
        if cancelled {
            process.stop(None).await;
        }
        cancelled
    }
}

/// What keeps each runtime from the settings planted in the project, unless the person opted
/// in: opencode's project config and AGENTS.md.
fn project_env(project_settings: bool) -> Vec<(String, String)> {
    if project_settings {
        Vec::new()
    } else {
        vec![("OPENCODE_DISABLE_PROJECT_CONFIG".into(), "1".into())]
    }
}

/// Project settings files a runtime loads on its own whenever it runs in the root, whose
/// hooks and MCP server commands would run outside corral's sandbox. The agent itself (or an
/// earlier session) could have written them, and the next turn would run them; unless the
/// person opted in, a turn does not start while one is there.
const PLANTED: &[(&str, &[&str])] = &[
    ("gemini", &[".gemini/settings.json", ".gemini/.env"]),
    ("qwen", &[".qwen/settings.json"]),
    ("cursor", &[".cursor/cli.json", ".cursor/mcp.json"]),
    (
        "copilot",
        &[".mcp.json", ".vscode/mcp.json", ".github/mcp.json"],
    ),
];

fn planted_settings(
    runtime: &str,
    root: &std::path::Path,
    project_settings: bool,
) -> Result<(), String> {
    if project_settings {
        return Ok(());
    }
    let files = PLANTED
        .iter()
        .find(|(name, _)| *name == runtime)
        .map_or(&[][..], |(_, files)| *files);
    for file in files {
        let path = root.join(file);
        if path.symlink_metadata().is_ok() {
            return Err(format!(
                "{} would load {} from the project, whose hooks and MCP commands run outside \
                 corral's sandbox: remove it, or let agents load project settings with \
                 `[agents] project_settings = true`",
                runtime,
                path.display()
            ));
        }
    }
    Ok(())
}

impl Backend for PerTurnBackend {
    fn run_turn<'a>(
        &'a mut self,
        prompt: &'a str,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, TurnOutcome> {
        Box::pin(self.turn(prompt, cancel))
    }

    fn set_model<'a>(&'a mut self, model: &'a str) -> BoxFuture<'a, Result<bool, String>> {
        Box::pin(async move {
            if !self.runtime.takes_model {
                return Ok(false);
            }
            // The next turn's process starts with it; the conversation is the runtime's own.
            self.model = Some(model.to_string());
            Ok(true)
        })
    }

    fn shutdown(&mut self) -> BoxFuture<'_, ()> {
        // No process runs between turns; the voucher is revoked when the backend drops.
        Box::pin(async {})
    }

    fn info(&self) -> BackendInfo {
        BackendInfo {
            kind: self.runtime.name,
            queues_prompts: false,
        }
    }
}

#[cfg(test)]
mod tests;
