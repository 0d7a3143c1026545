//! `corral run`: one task (or, with `-i`, a conversation) in the terminal.
//!
//! Order of business: the request is planned (usage errors exit 2 before anything starts),
//! the session is started and its renderer attached, then turns. Ctrl-C once cancels the
//! running turn (the tool is killed, the turn ends `cancelled`); twice exits at once.
//! SIGTERM and SIGHUP end the run the orderly way — the turn is dropped, the agent's process
//! group (an external agent, a model server) stopped, the session closed — and a watchdog
//! kills every child corral tracks if that takes too long.

use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tokio::io::AsyncBufReadExt;
use tokio_util::sync::CancellationToken;

use crate::backend::Backend;
use crate::config::Config;
use crate::error::{Error, usage};
use crate::event::StopReason;
use crate::host::open::{self, OpenSpec};
use crate::model::Progress;
use crate::session::Session;
use crate::session::TurnOutcome;

use super::approve;
use super::safe_text::{self, SafeWriter};
use super::tty::{self, Style};

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
fn render(args: &RunArgs, session: &Arc<Session>) -> tokio::task::JoinHandle<()> {
    let events = session.tap(0);
    if args.json {
        return tokio::spawn(tty::render_json(events));
    }
    let style = Style {
        interactive: std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
    };
    let terminal_approvals = !args.approve_stdin && approve::terminal_available();
    let prompter = terminal_approvals.then(|| session.clone());
    tokio::spawn(tty::render_terminal(events, style, prompter))
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
    let mut opened = match started {
        Ok(opened) => opened,
        Err(failed) => {
            // What the session said before it failed (the model's error, say) is shown.
            if let Some(session) = &failed.session
                && let Err(e) = render(&args, session).await
            {
                tracing::error!(error = %e, "renderer task failed");
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
    let renderer = render(&args, &session);
    if args.approve_stdin {
        tokio::spawn(approve::answer_from_stdin(session.clone()));
    }
    let result = tokio::select! {
        result = drive(&args, opened.backend.as_mut(), &session, first_prompt) => result,
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
        let _ = SafeWriter::new(std::io::stderr()).write_all(&notes);
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

async fn drive(
    args: &RunArgs,
    agent: &mut dyn Backend,
    session: &Arc<Session>,
    first_prompt: Option<String>,
) -> Result<Exit, Error> {
    let interrupts = Interrupts::install(session.clone());
    let mut last: Option<TurnOutcome> = None;
    if let Some(prompt) = first_prompt {
        last = Some(interrupts.run_turn(agent, &prompt).await);
    }
    if args.interactive {
        return converse(&interrupts, agent).await;
    }
    Ok(match last.map(|o| o.stop_reason) {
        Some(StopReason::EndTurn) | None => Exit::Ok,
        Some(StopReason::Cancelled) => Exit::Cancelled,
        Some(StopReason::MaxSteps) | Some(StopReason::Error) => Exit::Failure,
    })
}

/// `-i`: one turn per line of stdin until EOF or `/exit`.
async fn converse(interrupts: &Interrupts, agent: &mut dyn Backend) -> Result<Exit, Error> {
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let show_prompt = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    loop {
        if show_prompt {
            use std::io::Write;
            let mut err = std::io::stderr();
            let _ = write!(err, "› ");
            let _ = err.flush();
        }
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(e) => return Err(Error::Runtime(format!("reading stdin: {e}"))),
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if line == "/exit" || line == "/quit" {
            break;
        }
        interrupts.run_turn(agent, line).await;
        if interrupts.session.log_failure().is_some() {
            // The session takes no more turns; `run` says why.
            break;
        }
    }
    // A conversation that ended at the person's request ended normally.
    Ok(Exit::Ok)
}

/// How long stopping what the session owns may take after SIGTERM or SIGHUP before every
/// tracked child is killed and corral exits anyway.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// SIGTERM and SIGHUP, caught from the start of the run so the default action (exit at once,
/// the agent's process group left running) never applies.
pub(super) struct Stops {
    term: Option<tokio::signal::unix::Signal>,
    hup: Option<tokio::signal::unix::Signal>,
}

impl Stops {
    pub(super) fn install() -> Stops {
        use tokio::signal::unix::{SignalKind, signal};
        let catch = |kind: SignalKind, name: &str| {
            signal(kind)
                .inspect_err(|e| tracing::warn!(error = %e, "cannot catch {name}"))
                .ok()
        };
        Stops {
            term: catch(SignalKind::terminate(), "SIGTERM"),
            hup: catch(SignalKind::hangup(), "SIGHUP"),
        }
    }

    pub(super) async fn next(&mut self) -> Exit {
        async fn recv(signal: &mut Option<tokio::signal::unix::Signal>) {
            match signal {
                Some(signal) => {
                    signal.recv().await;
                }
                None => std::future::pending().await,
            }
        }
        tokio::select! {
            () = recv(&mut self.term) => Exit::Terminated,
            () = recv(&mut self.hup) => Exit::HungUp,
        }
    }
}

/// A thread, not a task: it must fire even when the orderly stop blocks the runtime.
pub(super) fn watchdog(exit: Exit) {
    std::thread::spawn(move || {
        std::thread::sleep(STOP_GRACE);
        crate::sandbox::reaper::end_own_children(std::time::Duration::ZERO);
        std::process::exit(exit as i32);
    });
}

/// Ctrl-C handling: the first press cancels the running turn, a second press while it is
/// still winding down exits at once (after flushing the event log).
struct Interrupts {
    current: Arc<Mutex<Option<CancellationToken>>>,
    session: Arc<Session>,
}

impl Interrupts {
    fn install(session: Arc<Session>) -> Interrupts {
        let current: Arc<Mutex<Option<CancellationToken>>> = Arc::new(Mutex::new(None));
        let watched = current.clone();
        let closing = session.clone();
        tokio::spawn(async move {
            while tokio::signal::ctrl_c().await.is_ok() {
                let token = watched.lock().unwrap_or_else(|p| p.into_inner()).clone();
                match token {
                    Some(token) if !token.is_cancelled() => token.cancel(),
                    // A second press, or one with no turn running: leave now.
                    _ => {
                        // Leaving without unwinding: children in their own process groups
                        // (tools, a local model server) would outlive us otherwise.
                        crate::sandbox::reaper::end_own_children(std::time::Duration::ZERO);
                        closing.close();
                        std::process::exit(Exit::Cancelled as i32);
                    }
                }
            }
        });
        Interrupts { current, session }
    }

    async fn run_turn(&self, agent: &mut dyn Backend, prompt: &str) -> TurnOutcome {
        // A failed event log stops the turn as Ctrl-C would.
        let token = self.session.halted().child_token();
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Some(token.clone());
        let outcome = agent.run_turn(prompt, token).await;
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = None;
        outcome
    }
}
