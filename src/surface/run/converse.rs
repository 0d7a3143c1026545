//! `corral run -i`: a conversation, one turn per line. At a terminal the line is read with
//! rustyline (editing, a private history file under `$XDG_DATA_HOME/corral/`), after a banner
//! and after each turn's summary line; one Ctrl-C at the prompt clears the line, a second
//! within two seconds leaves. Without a terminal, lines are read plainly, as scripts send
//! them. Either way a line starting with `/` is a command for corral, never sent to the
//! model.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::AsyncBufReadExt;

use crate::backend::Backend;
use crate::error::Error;
use crate::host::open::{self, Posture};
use crate::session::Session;

use super::super::safe_text;
use super::super::tty::Drawn;
use super::Exit;
use super::signals::Interrupts;

/// A second Ctrl-C within this long of the first leaves the conversation.
const SECOND_INTERRUPT: Duration = Duration::from_secs(2);
/// How long the prompt waits for a turn's summary line (a turn that ended without one).
const SUMMARY_WAIT: Duration = Duration::from_secs(5);
const HISTORY_ENTRIES: usize = 1000;

/// The commands `-i` answers itself, by their entry in the session view's help.
const COMMANDS: &[&str] = &[
    "/model",
    "/preset",
    "/effort",
    "/compact",
    "/sessions",
    "/help",
    "/quit",
];

/// What the banner and `/model` show about the session.
pub(super) struct About {
    pub model: String,
    pub root: PathBuf,
    pub posture: Posture,
}

/// Runs turns until EOF, `/exit`, or a second Ctrl-C at the prompt.
pub(super) async fn converse(
    interrupts: &Interrupts,
    agent: &mut dyn Backend,
    about: &mut About,
    drawn: &Drawn,
    first_turns: u64,
) -> Result<Exit, Error> {
    let session = interrupts.session.clone();
    let at_terminal = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let mut lines = if at_terminal {
        Lines::Editor(Editor::open()?)
    } else {
        Lines::Plain(tokio::io::BufReader::new(tokio::io::stdin()).lines())
    };
    // The banner and the first prompt come after the first prompt's turn, if there was one.
    let _ = tokio::time::timeout(SUMMARY_WAIT, drawn.turns_drawn(first_turns)).await;
    if at_terminal {
        say(&banner(about));
    }
    let mut interrupted: Option<Instant> = None;
    loop {
        let line = match lines.next().await? {
            Line::Text(line) => {
                interrupted = None;
                line
            }
            Line::End => break,
            Line::Interrupted => {
                if interrupted.is_some_and(|at| at.elapsed() < SECOND_INTERRUPT) {
                    break;
                }
                interrupted = Some(Instant::now());
                say("(Ctrl-C again to leave)");
                continue;
            }
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if crate::surface::tui::commands::is_command(line) {
            match command(line, agent, about, &session).await {
                Command::Done => continue,
                Command::Leave => break,
            }
        }
        let before = drawn.count();
        interrupts.run_turn(agent, line).await;
        // The next prompt comes after the turn's summary line.
        let _ = tokio::time::timeout(SUMMARY_WAIT, drawn.turns_drawn(before + 1)).await;
        if session.log_failure().is_some() {
            // The session takes no more turns; `run` says why.
            break;
        }
    }
    // A conversation that ended at the person's request ended normally.
    Ok(Exit::Ok)
}

/// A line for the person, on stderr, escaped (it may quote model or server text).
fn say(text: &str) {
    let _ = writeln!(std::io::stderr(), "{}", safe_text::escape(text));
}

fn banner(about: &About) -> String {
    let posture = &about.posture;
    format!(
        "corral · {} · {}\npreset {} · sandbox {} · network {}\n/help lists the commands · Ctrl-C twice leaves",
        about.model,
        about.root.display(),
        posture.preset,
        posture.sandbox,
        posture.network.as_str(),
    )
}

enum Command {
    Done,
    Leave,
}

/// Runs a `/name args` line. Nothing of it reaches the model.
async fn command(
    line: &str,
    agent: &mut dyn Backend,
    about: &mut About,
    session: &Arc<Session>,
) -> Command {
    let (name, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let rest = rest.trim();
    match name {
        "/exit" | "/quit" | "/q" => return Command::Leave,
        "/help" | "/?" => say(&help()),
        "/model" if rest.is_empty() => {
            say(&format!("model: {} (switch with /model SPEC)", about.model))
        }
        "/model" => match agent.set_model(rest).await {
            Ok(true) => {
                about.model = rest.to_string();
                say(&format!("model: {rest}"));
            }
            Ok(false) => say("error: this session's agent cannot switch models"),
            Err(e) => say(&format!("error: cannot switch to {rest}: {e}")),
        },
        "/preset" | "/permission" if rest.is_empty() => say(&format!(
            "preset: {} (switch with /preset NAME; `corral policies` lists them)",
            about.posture.preset
        )),
        "/preset" | "/permission" => {
            let loaded = crate::policy::Policy::load(
                rest,
                open::user_policy_dir().as_deref(),
                &crate::policy::PolicyOverrides::default(),
            );
            match loaded {
                Err(e) => say(&format!("error: {e}")),
                Ok(policy) => match agent.set_policy(policy).await {
                    Ok(true) => {
                        about.posture.preset = rest.to_string();
                        say(&format!("preset: {rest}"));
                    }
                    Ok(false) => say("error: this session's agent cannot change presets"),
                    Err(e) => say(&format!("error: {e}")),
                },
            }
        }
        "/effort" => effort(rest, agent, session).await,
        "/compact" => {
            say("compacting…");
            match agent.compact(session.halted().child_token()).await {
                Ok(true) => say("compacted"),
                Ok(false) => {
                    say("nothing compacted: too little history, or this agent compacts by itself")
                }
                Err(e) => say(&format!("error: {e}")),
            }
        }
        "/sessions" => {
            let (mut out, mut err) = (Vec::new(), Vec::new());
            // Every log is read: off the runtime's thread.
            let listed = tokio::task::spawn_blocking(move || {
                crate::surface::sessions_cli::sessions_main(false, &mut out, &mut err);
                (out, err)
            })
            .await;
            if let Ok((out, err)) = listed {
                say(String::from_utf8_lossy(&out).trim_end());
                say(String::from_utf8_lossy(&err).trim_end());
            }
        }
        other => say(&format!(
            "error: unknown command {}: /help lists them (nothing was sent to the model)",
            safe_text::escape_line(other)
        )),
    }
    Command::Done
}

async fn effort(rest: &str, agent: &mut dyn Backend, session: &Session) {
    if rest.is_empty() {
        return say("set the effort with /effort low|medium|high|default");
    }
    let effort = match rest {
        "default" | "none" => None,
        text => match text.parse::<crate::model::Effort>() {
            Ok(effort) => Some(effort),
            Err(e) => return say(&format!("error: {e}")),
        },
    };
    let shown = effort.map_or("default", crate::model::Effort::as_str);
    // Where it is not applied the session says why in an error event.
    if open::apply_effort(agent, effort, session).await {
        say(&format!("effort: {shown}"));
    }
}

/// The commands this mode answers, as the session view's help words them.
fn help() -> String {
    let mut text = String::from("commands (handled here, never sent to the model):\n");
    for (usage, what) in crate::surface::tui::commands::HELP {
        let name = usage.split_whitespace().next().unwrap_or_default();
        if COMMANDS.contains(&name) {
            text.push_str(&format!("  {usage:<36}{what}\n"));
        }
    }
    text.push_str("  /exit                               leave (same as /quit)\n");
    text.push_str(
        "keys: Ctrl-C cancels a running turn; at the prompt it clears the line, twice leaves",
    );
    text
}

enum Line {
    Text(String),
    Interrupted,
    End,
}

enum Lines {
    Editor(Editor),
    Plain(tokio::io::Lines<tokio::io::BufReader<tokio::io::Stdin>>),
}

impl Lines {
    async fn next(&mut self) -> Result<Line, Error> {
        match self {
            Lines::Plain(lines) => match lines.next_line().await {
                Ok(Some(line)) => Ok(Line::Text(line)),
                Ok(None) => Ok(Line::End),
                Err(e) => Err(Error::Runtime(format!("reading stdin: {e}"))),
            },
            Lines::Editor(editor) => editor.read().await,
        }
    }
}

type Readline = rustyline::Editor<(), rustyline::history::FileHistory>;

/// rustyline, on the terminal itself (stdout may be a file), with the history file.
struct Editor {
    /// Moved to a blocking thread while a line is read.
    editor: Option<Readline>,
    history: Option<PathBuf>,
}

impl Editor {
    fn open() -> Result<Editor, Error> {
        let config = rustyline::Config::builder()
            .behavior(rustyline::config::Behavior::PreferTerm)
            .auto_add_history(false)
            .max_history_size(HISTORY_ENTRIES)
            .map_err(|e| Error::Runtime(format!("line editor: {e}")))?
            .build();
        let mut editor = Readline::with_config(config)
            .map_err(|e| Error::Runtime(format!("cannot open the line editor: {e}")))?;
        let history = history_file();
        if let Some(path) = &history
            && path.exists()
            && let Err(e) = editor.load_history(path)
        {
            tracing::warn!(error = %e, path = %path.display(), "cannot read the history");
        }
        Ok(Editor {
            editor: Some(editor),
            history,
        })
    }

    async fn read(&mut self) -> Result<Line, Error> {
        let Some(mut editor) = self.editor.take() else {
            return Ok(Line::End);
        };
        let (editor, read) = tokio::task::spawn_blocking(move || {
            let read = editor.readline("› ");
            (editor, read)
        })
        .await
        .map_err(|e| Error::Runtime(format!("line editor: {e}")))?;
        let mut editor = editor;
        let line = match read {
            Ok(line) => {
                if !line.trim().is_empty() {
                    let _ = editor.add_history_entry(line.as_str());
                    if let Some(path) = &self.history
                        && let Err(e) = editor.append_history(path)
                    {
                        tracing::warn!(error = %e, "cannot write the history");
                    }
                }
                Line::Text(line)
            }
            Err(rustyline::error::ReadlineError::Interrupted) => Line::Interrupted,
            Err(rustyline::error::ReadlineError::Eof) => Line::End,
            Err(e) => return Err(Error::Runtime(format!("reading the terminal: {e}"))),
        };
        self.editor = Some(editor);
        Ok(line)
    }
}

/// `$XDG_DATA_HOME/corral/history`, its directory private (the history holds prompts).
fn history_file() -> Option<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let dir = dirs::data_dir()?.join("corral");
    let _ = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir);
    let path = dir.join("history");
    // Created private before rustyline ever writes it, so it is never readable by others.
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(&path)
        .ok()?;
    Some(path)
}
