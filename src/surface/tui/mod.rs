//! The full-screen session view: `corral` with no subcommand, and `corral chat [PROMPT]`.
//!
//! One session of an in-process [`SessionManager`], the same one the server and MCP use: the
//! same backends, gate, sandbox and events. The view is built from the session's envelopes
//! ([`transcript`]), drawn with ratatui ([`ui`]), and takes keys for the input ([`editor`]),
//! the approval modal, scrolling and slash commands ([`commands`]).
//!
//! The terminal is restored however the view ends: normally, on an error, on SIGTERM/SIGHUP,
//! and on a panic (a hook restores it before the message is printed).

use std::io::IsTerminal;
use std::path::PathBuf;

use crossterm::ExecutableCommand;

use crate::error::{Error, usage};
use crate::host::manager::SessionManager;
use crate::host::open::{self, OpenSpec};

use super::run::{Exit, load_session_config};

mod app;
mod approval;
pub(crate) mod commands;
mod editor;
mod highlight;
mod history;
mod markdown;
mod mention;
mod notifier;
mod render;
pub mod theme;
pub mod transcript;
mod ui;
mod view;
pub mod wrap;

pub(crate) use approval::Modal as ApprovalModal;
#[cfg(test)]
pub(crate) use approval::SETTLE as APPROVAL_SETTLE;
pub use view::Conversation;

/// The owner recorded for sessions opened here: the person at this terminal.
const LOCAL_OWNER: &str = "local";

/// `corral chat`: the flags `corral run` takes, and the first prompt if any.
#[derive(Debug, Clone, Default)]
pub struct ChatArgs {
    pub prompt: Option<String>,
    pub open: OpenSpec,
    pub config_path: Option<PathBuf>,
    pub no_instructions: bool,
}

/// Runs the session view until the person quits; returns the exit code.
pub async fn chat(args: ChatArgs) -> Result<Exit, Error> {
    if !std::io::stdout().is_terminal() || std::fs::File::open("/dev/tty").is_err() {
        return Err(usage(
            "the session view needs a terminal; in scripts and pipes use `corral run \"…\"` \
             (or `corral run -i` for a line-at-a-time conversation)",
        ));
    }
    let config = load_session_config(args.config_path.as_ref(), args.no_instructions)?;
    let manager = SessionManager::new(config.clone(), open::agents_dir()?);
    let mut stops = super::run::Stops::install();
    {
        // A local model server can take a while to load: say what is happening until the
        // view takes the screen.
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "corral: starting the session…");
    }
    let opened = tokio::select! {
        opened = manager.open_noted(args.open.clone(), LOCAL_OWNER) => opened,
        exit = stops.next() => {
            crate::sandbox::reaper::end_own_children(crate::sandbox::reaper::EXIT_GRACE);
            return Ok(exit);
        }
        // Before the view takes the terminal, Ctrl-C is a signal: what was started so far
        // (a model server loading) is stopped, not left behind.
        _ = tokio::signal::ctrl_c() => {
            crate::sandbox::reaper::end_own_children(crate::sandbox::reaper::EXIT_GRACE);
            return Ok(Exit::Cancelled);
        }
    };
    let (handle, notes) = opened?;
    let mut app = app::App::new(manager.clone(), handle, config.tui.clone(), args);
    app.note_lines(&notes);
    let outcome = {
        let mut terminal = TerminalGuard::enter()
            .map_err(|e| Error::Runtime(format!("cannot take over the terminal: {e}")))?;
        app.run(&mut terminal.terminal, &mut stops).await
    };
    let id = app.session_id();
    let session = app.session();
    if let Ok(exit @ (Exit::Terminated | Exit::HungUp)) = &outcome {
        // Stopping what the sessions own must not hang a terminal that is going away.
        super::run::watchdog(*exit);
    }
    manager.shutdown().await;
    crate::sandbox::process::wait_for_tool_processes(crate::sandbox::process::EXIT_WAIT).await;
    let exit = outcome?;
    // A view left before any model was reached left no session (see `discard_if_unheard`).
    if !session.discarded() {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "session {id} · continue it with `corral chat --resume {id}`"
        );
    }
    Ok(exit)
}

type Backend = ratatui::backend::CrosstermBackend<std::io::Stdout>;
pub type Term = ratatui::Terminal<Backend>;

/// The terminal in raw mode on the alternate screen, with mouse, paste and focus reports;
/// put back as it was when dropped (and by the panic hook).
pub struct TerminalGuard {
    pub terminal: Term,
}

impl TerminalGuard {
    pub fn enter() -> std::io::Result<TerminalGuard> {
        install_panic_hook();
        crossterm::terminal::enable_raw_mode()?;
        let mut out = std::io::stdout();
        let entered = out
            .execute(crossterm::terminal::EnterAlternateScreen)
            .and_then(|o| o.execute(crossterm::event::EnableMouseCapture))
            .and_then(|o| o.execute(crossterm::event::EnableBracketedPaste))
            .and_then(|o| o.execute(crossterm::event::EnableFocusChange))
            .map(|_| ());
        if let Err(e) = entered {
            restore_terminal();
            return Err(e);
        }
        match ratatui::Terminal::new(ratatui::backend::CrosstermBackend::new(std::io::stdout())) {
            Ok(terminal) => Ok(TerminalGuard { terminal }),
            Err(e) => {
                restore_terminal();
                Err(e)
            }
        }
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore_terminal();
    }
}

/// Leaves raw mode and the alternate screen; harmless when they were not entered.
pub fn restore_terminal() {
    let mut out = std::io::stdout();
    let _ = out.execute(crossterm::event::DisableFocusChange);
    let _ = out.execute(crossterm::event::DisableBracketedPaste);
    let _ = out.execute(crossterm::event::DisableMouseCapture);
    let _ = out.execute(crossterm::terminal::LeaveAlternateScreen);
    let _ = out.execute(crossterm::cursor::Show);
    let _ = crossterm::terminal::disable_raw_mode();
}

/// Restores the terminal when the thread drawing it panics (before the message is printed).
/// A panic elsewhere (a task whose panic is caught) leaves the view as it is.
fn install_panic_hook() {
    static UI_THREAD: std::sync::OnceLock<std::thread::ThreadId> = std::sync::OnceLock::new();
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    let _ = UI_THREAD.set(std::thread::current().id());
    INSTALLED.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if UI_THREAD.get() == Some(&std::thread::current().id()) {
                restore_terminal();
            }
            previous(info);
        }));
    });
}
