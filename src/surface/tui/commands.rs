//! Slash commands of the session view. Each is handled here, never sent to the model; those
//! that wait on the session (a model switch, a compaction, opening another session) run in a
//! task and report back as a [`Done`].

use std::sync::Arc;

use ratatui::text::{Line, Span};

use crate::host::manager::Handle;
use crate::host::open;
use crate::model::Effort;
use crate::session::catalog;

use super::app::{App, Overlay};
use super::theme::Theme;
use super::wrap::{clean_line, wrap_text};

pub enum Done {
    Notice(String),
    Error(String),
    Switched { handle: Arc<Handle>, notes: Vec<u8> },
    Overlay(Overlay),
}

pub const HELP: &[(&str, &str)] = &[
    ("/model SPEC", "switch the model, keeping the conversation"),
    ("/preset NAME", "apply another permission preset"),
    (
        "/effort [low|medium|high|default]",
        "how hard the model reasons",
    ),
    ("/compact", "summarize the conversation to free context"),
    ("/clear", "start a new session here"),
    (
        "/resume [ID]",
        "continue another session (a list without ID)",
    ),
    ("/sessions", "the sessions of this machine"),
    (
        "/worktree diff|merge",
        "review or merge this session's worktree",
    ),
    ("/help", "this help"),
    ("/quit", "leave (the session can be resumed)"),
];

const KEYS: &[(&str, &str)] = &[
    ("Enter", "send"),
    ("Alt-Enter, Ctrl-J", "new line"),
    ("↑ ↓", "move; history at the first/last line"),
    (
        "@path, Tab",
        "complete a file under the root; it is inlined when sent",
    ),
    ("Esc", "cancel the running turn"),
    ("Ctrl-C twice", "quit"),
    ("PgUp PgDn, wheel", "scroll; Ctrl-Home/End: top/bottom"),
    ("Ctrl-T", "show or fold thoughts"),
    (
        "y n a d f c",
        "answer an approval: yes, no, always, disable, forbid all, cancel",
    ),
];

/// Runs `/name args`.
/// Whether a line is a slash command rather than a message: its first word is `/` and a
/// name with no other `/` in it, so a message that starts with a path (`/etc/hosts is
/// wrong`) goes to the model.
pub fn is_command(line: &str) -> bool {
    let first = line.split_whitespace().next().unwrap_or_default();
    first.strip_prefix('/').is_some_and(|name| {
        !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    })
}

pub fn run(app: &mut App, line: &str) {
    let (name, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let rest = rest.trim();
    let id = app.handle.id().to_string();
    let manager = app.manager.clone();
    let done = app.done_sender();
    match name {
        "/help" | "/?" => app.overlay = Some(help(app)),
        "/quit" | "/exit" | "/q" => app.quit(),
        "/model" if rest.is_empty() => {
            let model = app.handle.info().model;
            app.conversation
                .transcript
                .notice(format!("model: {model} (switch with /model SPEC)"));
        }
        "/model" => {
            let model = rest.to_string();
            app.flash(format!("switching to {model}…"));
            tokio::spawn(async move {
                let _ = done.send(match manager.set_model(&id, &model).await {
                    Ok(true) => Done::Notice(format!("model: {model}")),
                    Ok(false) => Done::Error("this session's agent cannot switch models".into()),
                    Err(e) => Done::Error(e.to_string()),
                });
            });
        }
        "/preset" | "/permission" if rest.is_empty() => {
            let preset = app
                .handle
                .current_preset()
                .unwrap_or_else(|| app.handle.posture.preset.clone());
            app.conversation.transcript.notice(format!(
                "preset: {preset} (switch with /preset NAME; `corral policies` lists them)"
            ));
        }
        "/preset" | "/permission" => {
            let preset = rest.to_string();
            tokio::spawn(async move {
                let _ = done.send(match manager.set_preset(&id, &preset).await {
                    Ok(true) => Done::Notice(format!("preset: {preset}")),
                    Ok(false) => Done::Error("this session's agent cannot change presets".into()),
                    Err(e) => Done::Error(e.to_string()),
                });
            });
        }
        "/effort" => effort(app, rest),
        "/compact" => {
            app.flash("compacting…");
            tokio::spawn(async move {
                let _ = done.send(match manager.compact(&id).await {
                    Ok(true) => Done::Notice("compacted".into()),
                    Ok(false) => Done::Notice(
                        "nothing compacted: too little history, or this agent compacts by itself"
                            .into(),
                    ),
                    Err(e) => Done::Error(e.to_string()),
                });
            });
        }
        "/clear" | "/new" => {
            let spec = open::OpenSpec {
                resume: None,
                continue_last: false,
                id: None,
                ..app.args.open.clone()
            };
            open_instead(app, spec);
        }
        "/resume" if rest.is_empty() => sessions(app),
        "/resume" => resume(app, rest),
        "/sessions" => sessions(app),
        "/worktree" => worktree(app, rest),
        _ => app.conversation.transcript.error(format!(
            "unknown command {}: /help lists them",
            clean_line(name)
        )),
    }
}

/// What a task reported, applied to the view.
pub fn finish(app: &mut App, done: Done) {
    match done {
        Done::Notice(text) => {
            app.flash = None;
            app.conversation.transcript.notice(text);
        }
        Done::Error(text) => {
            app.flash = None;
            app.conversation.transcript.error(text);
        }
        Done::Switched { handle, notes } => {
            app.flash = None;
            app.switch_to(handle, &notes);
        }
        Done::Overlay(overlay) => app.overlay = Some(overlay),
    }
}

fn effort(app: &mut App, rest: &str) {
    if rest.is_empty() {
        let current = app
            .handle
            .meta
            .effort
            .map_or("the model's own", Effort::as_str);
        app.conversation.transcript.notice(format!(
            "effort: {current} (set with /effort low|medium|high|default)"
        ));
        return;
    }
    let effort = match rest {
        "default" | "none" => None,
        text => match text.parse::<Effort>() {
            Ok(effort) => Some(effort),
            Err(e) => return app.conversation.transcript.error(e),
        },
    };
    let id = app.handle.id().to_string();
    let manager = app.manager.clone();
    let done = app.done_sender();
    tokio::spawn(async move {
        let shown = effort.map_or("default", Effort::as_str);
        let _ = done.send(match manager.set_effort(&id, effort).await {
            Ok(true) => Done::Notice(format!("effort: {shown}")),
            // The session said why in an error event.
            Ok(false) => Done::Notice(format!("effort {shown} is not applied")),
            Err(e) => Done::Error(e.to_string()),
        });
    });
}

/// Opens another session with `spec` and shows it instead; the current one is closed once
/// the new one is open (so a failure leaves the person where they were).
fn open_instead(app: &mut App, spec: open::OpenSpec) {
    let manager = app.manager.clone();
    let done = app.done_sender();
    app.flash("opening…");
    tokio::spawn(async move {
        let _ = done.send(match manager.open_noted(spec, App::owner()).await {
            Ok((handle, notes)) => Done::Switched { handle, notes },
            Err(e) => Done::Error(e.to_string()),
        });
    });
}

fn resume(app: &mut App, text: &str) {
    let dir = match open::agents_dir() {
        Ok(dir) => dir,
        Err(e) => return app.conversation.transcript.error(e.to_string()),
    };
    let id = match catalog::resolve(&dir, text) {
        Ok(id) => id,
        Err(e) => return app.conversation.transcript.error(e.to_string()),
    };
    if id == app.handle.id() {
        return app
            .conversation
            .transcript
            .notice(format!("already in session {id}"));
    }
    let spec = open::OpenSpec {
        resume: Some(id),
        continue_last: false,
        id: None,
        ..app.args.open.clone()
    };
    open_instead(app, spec);
}

/// The local sessions, newest first; Enter resumes the one selected. Read off the UI's
/// thread: every log is scanned.
fn sessions(app: &mut App) {
    let dir = match open::agents_dir() {
        Ok(dir) => dir,
        Err(e) => return app.conversation.transcript.error(e.to_string()),
    };
    let current = app.handle.id().to_string();
    let theme = app.theme.clone();
    let done = app.done_sender();
    app.flash("reading the sessions…");
    tokio::task::spawn_blocking(move || {
        let report = match catalog::list(&dir) {
            Ok(list) => Done::Overlay(sessions_overlay(&list, &current, &theme)),
            Err(e) => Done::Error(format!("cannot list sessions: {e}")),
        };
        let _ = done.send(report);
    });
}

fn sessions_overlay(list: &[catalog::LocalSession], current: &str, theme: &Theme) -> Overlay {
    let mut lines = Vec::new();
    let mut ids = Vec::new();
    let now = time::OffsetDateTime::now_utc();
    for session in list.iter().filter(|s| s.parent.is_none()) {
        let here = if session.id == current { "●" } else { " " };
        let model =
            crate::surface::sessions_cli::short_model(session.model.as_deref().unwrap_or("-"));
        let age = session.last_activity.map_or_else(
            || "-".to_string(),
            |t| crate::surface::sessions_cli::age(now - t.0),
        );
        lines.push(Line::from(vec![
            Span::styled(
                format!("{here} {} ", clean_line(&session.id)),
                theme.heading,
            ),
            Span::styled(format!("{:<17}", session.status.as_str()), theme.dim),
            Span::raw(clean_line(&session.title)),
            Span::styled(
                format!(
                    "  · {} · {} turn{} · {age}",
                    clean_line(&model),
                    session.turns,
                    if session.turns == 1 { "" } else { "s" },
                ),
                theme.dim,
            ),
        ]));
        ids.push(session.id.clone());
    }
    if lines.is_empty() {
        lines.push(Line::from("no sessions yet"));
    }
    Overlay {
        title: "sessions · Enter resumes · Esc closes".into(),
        lines,
        scroll: 0,
        pick: Some((ids, 0)),
    }
}

fn worktree(app: &mut App, rest: &str) {
    let Some(worktree) = app.handle.meta.worktree.clone() else {
        return app.conversation.transcript.error(
            "this session has no worktree: start one with `corral chat --worktree`".to_string(),
        );
    };
    let id = app.handle.id().to_string();
    let command = match rest {
        "diff" | "" => crate::surface::worktree_cli::WorktreeCommand::Diff { id },
        "merge" => crate::surface::worktree_cli::WorktreeCommand::Merge { id },
        other => {
            return app.conversation.transcript.error(format!(
                "/worktree {}: use /worktree diff or /worktree merge",
                clean_line(other)
            ));
        }
    };
    let is_diff = matches!(
        command,
        crate::surface::worktree_cli::WorktreeCommand::Diff { .. }
    );
    let done = app.done_sender();
    let theme = app.theme.clone();
    let branch = worktree.branch;
    // git work blocks: off the runtime's thread.
    tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        let mut err = Vec::new();
        let code = crate::surface::worktree_cli::worktree_main(&command, &mut out, &mut err);
        let out = String::from_utf8_lossy(&out).into_owned();
        let err = String::from_utf8_lossy(&err).into_owned();
        let report = if code != crate::surface::run::Exit::Ok {
            Done::Error(format!("{out}{err}").trim().to_string())
        } else if is_diff {
            let text = if out.trim().is_empty() {
                "no changes".to_string()
            } else {
                out
            };
            let mut lines = Vec::new();
            for line in text.lines() {
                let style = theme.diff_line(line);
                lines.extend(wrap_text(line, style, 400, &Span::raw(""), &Span::raw("")));
            }
            Done::Overlay(Overlay {
                title: format!("worktree diff · {} · Esc closes", clean_line(&branch)),
                lines,
                scroll: 0,
                pick: None,
            })
        } else {
            Done::Notice(format!("{out}{err}").trim().to_string())
        };
        let _ = done.send(report);
    });
}

fn help(app: &App) -> Overlay {
    let mut lines = vec![Line::from(Span::styled("commands", app.theme.heading))];
    for (command, what) in HELP {
        lines.push(Line::from(vec![
            Span::styled(format!("  {command:<36}"), app.theme.user),
            Span::raw(*what),
        ]));
    }
    lines.push(Line::default());
    lines.push(Line::from(Span::styled("keys", app.theme.heading)));
    for (key, what) in KEYS {
        lines.push(Line::from(vec![
            Span::styled(format!("  {key:<36}"), app.theme.user),
            Span::raw(*what),
        ]));
    }
    Overlay {
        title: "help · Esc closes".into(),
        lines,
        scroll: 0,
        pick: None,
    }
}

#[cfg(test)]
mod command_line_tests {
    #[test]
    fn a_path_at_the_start_of_a_message_is_no_command() {
        for line in ["/help", "/model ollama:qwen3", " /resume ab12", "/quit"] {
            assert!(super::is_command(line.trim()), "{line}");
        }
        for line in [
            "/etc/hosts is wrong",
            "/ ",
            "/",
            "hello /help",
            "/tmp/x.txt",
        ] {
            assert!(!super::is_command(line.trim()), "{line}");
        }
    }
}
