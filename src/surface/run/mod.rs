//! `corral run`: one task (or, with `-i`, a conversation) in the terminal.
//!
//! Order of business: the request is planned (usage errors exit 2 before anything starts),
//! the session is started and its renderer attached, then turns. Ctrl-C once cancels the
//! running turn (the tool is killed, the turn ends `cancelled`); twice exits at once.
//! SIGTERM and SIGHUP end the run the orderly way — the turn is dropped, the agent's process
//! group (an external agent, a model server) stopped, the session closed — and a watchdog
//! kills every child corral tracks if that takes too long.

mod converse;
mod signals;

use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::sync::Arc;

use crate::backend::Backend;
use crate::config::Config;
use crate::error::{Error, usage};
use crate::event::StopReason;
use crate::host::open::{self, OpenSpec};
use crate::model::Progress;
use crate::session::{Session, TurnOutcome};

use super::approve;
use super::safe_text::{self, SafeWriter};
use super::tty::{self, Detail, Drawn, Style};

use signals::Interrupts;
pub(crate) use signals::{Stops, watchdog};

pub use crate::host::open::user_policy_dir;

/// `corral run`: the session it opens, and how the terminal takes part.
#[derive(Debug, Clone, Default)]
pub struct RunArgs {
    pub prompt: Option<String>,
    /// The session's flags: model, directory, preset, sandbox, `--worktree`, `--resume` …
    pub open: OpenSpec,
    pub json: bool,
    pub interactive: bool,
    pub config_path: Option<PathBuf>,
    /// Permission decisions arrive as NDJSON lines on stdin.
    pub approve_stdin: bool,
    /// `--no-instructions`: no project instructions (AGENTS.md) in the system prompt.
    pub no_instructions: bool,
    /// `-v`: every tool's output whole, not a preview.
    pub verbose: bool,
}

/// How `corral run` ends, as a process exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Ok = 0,
    Failure = 1,
    Usage = 2,
    Cancelled = 130,
    /// Stopped by SIGHUP (128 + 1).
    HungUp = 129,
    /// Stopped by SIGTERM (128 + 15).
    Terminated = 143,
}

impl Error {
    pub fn exit(&self) -> Exit {
        match self {
            Error::Usage(_) | Error::Forbidden(_) => Exit::Usage,
            Error::InUse(_) | Error::Runtime(_) => Exit::Failure,
        }
    }
}

/// The config file: `--config` (which must exist), else the default location (a missing
/// file there is the empty config).
pub fn load_config(path: Option<&PathBuf>) -> Result<Config, Error> {
    match (path, Config::default_path()) {
        (Some(named), _) => Config::load_named(named).map_err(usage),
        (None, Some(default)) => Config::load(&default).map_err(usage),
        (None, None) => Ok(Config::default()),
    }
}

/// The config sessions are opened with: the file's, without project instructions when the
/// command was given `--no-instructions`.
pub fn load_session_config(path: Option<&PathBuf>, no_instructions: bool) -> Result<Config, Error> {
    let config = load_config(path)?;
    Ok(if no_instructions {
        config.without_instructions()
    } else {
        config
    })
}

/// Start-up lines of a local model server go to the terminal (stderr), escaped: they quote
/// what the server printed.
pub fn stderr_progress() -> Progress {
    Arc::new(|line: &str| {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "{}", safe_text::escape(line));
    })
}

fn open_spec(args: &RunArgs) -> OpenSpec {
    // Not a managed session (no owner): nobody else lists or reopens it. No limits: the
    // person at the terminal is the host's owner.
    OpenSpec {
        attended: args.approve_stdin || (!args.json && approve::terminal_available()),
        ..args.open.clone()
    }
}

/// Reads the prompt from the argument, else from a piped stdin.
fn initial_prompt(args: &RunArgs) -> Result<Option<String>, Error> {
    if let Some(prompt) = &args.prompt {
        return Ok(Some(prompt.clone()));
    }
    if args.interactive {
        return Ok(None);
    }
    if std::io::stdin().is_terminal() {
        return Err(usage(
            "no prompt: pass it as an argument, pipe it on stdin, or use -i for a conversation",
        ));
    }
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| usage(format!("cannot read the prompt from stdin: {e}")))?;
    if text.trim().is_empty() {
        return Err(usage("the prompt on stdin is empty"));
    }
    Ok(Some(text))
}

/// Attaches the renderer to a session: every envelope it has had so far, then live ones.
fn render(args: &RunArgs, session: &Arc<Session>, drawn: &Drawn) -> tokio::task::JoinHandle<()> {
    let events = session.tap(0);
    if args.json {
        return tokio::spawn(tty::render_json(events, drawn.clone()));
    }
    let terminal = std::io::stderr().is_terminal();
    let style = Style {
        terminal,
        colour: terminal && std::env::var_os("NO_COLOR").is_none(),
        answer_streams: std::io::stdout().is_terminal(),
        detail: if args.verbose {
            Detail::Whole
        } else {
            Detail::Preview
        },
    };
    let terminal_approvals = !args.approve_stdin && approve::terminal_available();
    let prompter = terminal_approvals.then(|| session.clone());
    tokio::spawn(tty::render_terminal(events, style, prompter, drawn.clone()))
}

/// Runs `corral run` to its end and returns the exit code.
pub async fn run(args: RunArgs) -> Result<Exit, Error> {
    // Before anything is started: a SIGTERM from here on must not leave children behind.
    let mut stops = Stops::install();
    let config = load_session_config(args.config_path.as_ref(), args.no_instructions)?;
    if args.approve_stdin && (args.prompt.is_none() || args.interactive) {
        return Err(usage(
            "with --approve-stdin, stdin carries decisions: give the prompt as an argument (and no -i)",
        ));
    }
    let plan = open::plan(open_spec(&args), config, stderr_progress()).await?;
    let first_prompt = initial_prompt(&args)?;
    let warning = plan.policy().warning.clone();
    let log_dir = open::agents_dir()?;
    let mut start_lines = SafeWriter::new(std::io::stderr());
    let started = tokio::select! {
        started = open::start(plan, &log_dir, &mut start_lines) => started,
        exit = stops.next() => {
            // Mid-start (a model server loading, an agent's handshake): what was spawned so
            // far is dropped with the start, and anything tracked is killed.
            crate::sandbox::reaper::end_own_children(crate::sandbox::reaper::EXIT_GRACE);
            return Ok(exit);
        }
    };
    let drawn = Drawn::default();
    let mut opened = match started {
        Ok(opened) => opened,
        Err(failed) => {
            // What the session said before it failed (the model's error, say) is shown.
            if let Some(session) = &failed.session
                && let Err(e) = render(&args, session, &drawn).await
            {
                tracing::error!(error = %e, "renderer task failed");
            }
            // Shown already as the session's error: said once, with its exit code.
            if !args.json && drawn.showed_error(&failed.error.to_string()) {
                return Ok(failed.error.exit());
            }
            return Err(failed.error);
        }
    };
    // After the worktree's line, which is the first one.
    if let Some(warning) = warning {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "warning: {}",
            safe_text::escape(&warning)
        );
    }
    let session = opened.session.clone();
    let renderer = render(&args, &session, &drawn);
    let mut about = converse::About {
        model: opened.meta.model.clone(),
        root: opened.meta.cwd.clone(),
        posture: opened.posture.clone(),
    };
    if args.approve_stdin {
        tokio::spawn(approve::answer_from_stdin(session.clone()));
    }
    let result = tokio::select! {
        result = drive(&args, opened.backend.as_mut(), &session, first_prompt, &mut about, &drawn) => result,
        exit = stops.next() => {
            tracing::info!(?exit, "stopped by a signal; stopping the agent");
            watchdog(exit);
            Ok(exit)
        }
    };
    let mut notes = Vec::new();
    opened.finish(&mut notes).await;
    if let Err(e) = renderer.await {
        tracing::error!(error = %e, "renderer task failed");
    }
    {
        use std::io::Write;
        let mut err = SafeWriter::new(std::io::stderr());
        let _ = err.write_all(&notes);
        // A run that never reached a model left no session to continue.
        if !args.json && !session.discarded() {
            let _ = writeln!(err, "{}", continue_line(&args, session.id()));
        }
    }
    // A turn stopped mid-call ends its tool process in a background task: wait for it.
    crate::sandbox::process::wait_for_tool_processes(crate::sandbox::process::EXIT_WAIT).await;
    // Whatever the turn said, a session whose log could not be written did not succeed.
    match (result, session.log_failure()) {
        (Ok(_), Some(failure)) => Err(Error::Runtime(format!(
            "{failure}; the session was stopped. Free space (or raise the file size limit), \
             then continue it with `corral run --resume {}`",
            session.id()
        ))),
        (result, _) => result,
    }
}

/// The line text mode ends with: the session's id and the command that continues it.
fn continue_line(args: &RunArgs, id: &str) -> String {
    let mut command = format!("corral run --resume {id}");
    // `-C` only when the root is not where the person is now.
    if let Some(dir) = &args.open.cwd {
        let here = std::env::current_dir().and_then(|d| d.canonicalize()).ok();
        let root = dir.canonicalize().unwrap_or_else(|_| dir.clone());
        if here.as_ref() != Some(&root) {
            command.push_str(" -C ");
            command.push_str(&safe_text::shell_quote(&root.to_string_lossy()));
        }
    }
    format!("session {id} · continue it with: {command}")
}

async fn drive(
    args: &RunArgs,
    agent: &mut dyn Backend,
    session: &Arc<Session>,
    first_prompt: Option<String>,
    about: &mut converse::About,
    drawn: &Drawn,
) -> Result<Exit, Error> {
    let interrupts = Interrupts::install(session.clone());
    let mut last: Option<TurnOutcome> = None;
    if let Some(prompt) = first_prompt {
        last = Some(interrupts.run_turn(agent, &prompt).await);
    }
    if args.interactive {
        let first_turns = u64::from(last.is_some());
        return converse::converse(&interrupts, agent, about, drawn, first_turns).await;
    }
    Ok(match last.map(|o| o.stop_reason) {
        Some(StopReason::EndTurn) | None => Exit::Ok,
        Some(StopReason::Cancelled) => Exit::Cancelled,
        Some(StopReason::MaxSteps) | Some(StopReason::Error) => Exit::Failure,
    })
}
