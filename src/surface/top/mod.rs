//! `corral top`: every agent at a glance (Kaimon's Agents tab). The sessions of a running
//! `corral serve` (REST and its event bus) or, without a server, this machine's local ones
//! (their event logs, read-only): a list with status, tokens and activity; Enter for one
//! session's live feed, `h` for its history, `a` to answer its approval, `i` to interrupt,
//! `x` to close, `d` to dismiss a dead one.
//!
//! The terminal is taken only once the source answered, and given back (raw mode off, the
//! main screen back, the mouse released) on every way out: a return, an error, a panic.

mod app;
mod board;
mod client;
mod feed;
mod keys;
mod local;
mod render;
mod source;

use std::time::{Duration, Instant};

use crossterm::event::{Event, EventStream};
use futures_util::StreamExt;
use tokio::sync::mpsc;

use self::app::{App, Command};
use self::source::Source;
use crate::error::Error;
use crate::surface::run::{Exit, Stops};

/// Frames drawn at most this often while updates stream in.
const FRAME: Duration = Duration::from_millis(33);

/// Ages and the footer's notices move even when nothing arrives.
const TICK: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Default)]
pub struct TopArgs {
    /// A running `corral serve` (`http://127.0.0.1:7777`); none for the local sessions.
    pub server: Option<String>,
    /// Its bearer token.
    pub token: Option<String>,
}

pub async fn top(args: TopArgs) -> Result<Exit, Error> {
    let source = match &args.server {
        Some(server) => Source::server(client::Client::new(server, args.token)?),
        None => Source::local(crate::host::open::agents_dir()?),
    };
    let read_only = matches!(source, Source::Local { .. });
    let rows = source.first_list().await?;
    if !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        return Err(Error::Usage("corral top needs a terminal on stdout".into()));
    }
    let mut app = App::new(source.label(), read_only, rows);
    let (updates, mut incoming) = mpsc::unbounded_channel();
    source.start(&updates);
    // A SIGTERM or SIGHUP ends the loop like q does, so the terminal is given back.
    let mut stops = Stops::install();
    let mut exit = Exit::Ok;
    // The session view's terminal handling: raw, alternate screen, mouse and paste, given
    // back when dropped and by its panic hook.
    let mut screen = crate::surface::tui::TerminalGuard::enter()
        .map_err(|e| Error::Runtime(format!("cannot set up the terminal: {e}")))?;
    let mut keys = EventStream::new();
    let mut tick = tokio::time::interval(TICK);
    let mut drawn = Instant::now()
        .checked_sub(FRAME)
        .unwrap_or_else(Instant::now);
    let mut dirty = true;
    while !app.quit {
        if dirty && drawn.elapsed() >= FRAME {
            screen
                .terminal
                .draw(|frame| render::draw(frame, &mut app))
                .map_err(|e| Error::Runtime(format!("cannot draw on the terminal: {e}")))?;
            drawn = Instant::now();
            dirty = false;
        }
        let wait = if dirty {
            FRAME.saturating_sub(drawn.elapsed())
        } else {
            TICK
        };
        let commands: Vec<Command> = tokio::select! {
            key = keys.next() => match key {
                Some(Ok(Event::Key(key))) => app.key(key),
                Some(Ok(Event::Mouse(mouse))) => {
                    app.mouse(mouse);
                    Vec::new()
                }
                Some(Ok(Event::Paste(text))) => {
                    app.paste(&text);
                    Vec::new()
                }
                Some(Ok(_)) => Vec::new(),
                Some(Err(e)) => return Err(Error::Runtime(format!("cannot read the terminal: {e}"))),
                None => break,
            },
            Some(update) = incoming.recv() => {
                let mut commands = app.update(update);
                // Take what else is queued before drawing: one frame for a burst.
                while let Ok(update) = incoming.try_recv() {
                    commands.extend(app.update(update));
                }
                commands
            },
            stop = stops.next() => {
                exit = stop;
                break;
            }
            _ = tick.tick() => Vec::new(),
            () = tokio::time::sleep(wait) => Vec::new(),
        };
        dirty = true;
        for command in commands {
            source.run(command, &updates);
        }
    }
    drop(screen);
    Ok(exit)
}
