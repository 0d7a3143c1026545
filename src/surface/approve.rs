//! Answering permission requests from the command line: a single-key prompt on the terminal,
//! or NDJSON decisions on stdin (`--approve-stdin`) for programs driving `corral run --json`.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use crossterm::event::{self, Event, KeyCode, KeyEvent, KeyModifiers};
use serde_json::Value;
use tokio::io::AsyncBufReadExt;

use crate::event::PermissionRequest;
use crate::policy::{Answer, Decision};
use crate::session::Session;

use super::desktop_preview::{self, Screenshot};
use super::safe_text;

/// The block shown before the keys: tool, danger, why, and the full command, code or diff.
/// Everything in it is escaped for the terminal (it is model text), and a shell command is
/// followed by the simple commands it really runs, as bash reads them: a comment, a string
/// or an escape sequence cannot make it look like another command. With `colour`, a diff's
/// lines are coloured (after escaping: no colour code comes from the model). A desktop
/// action shows its point, window, text and where `screenshot` was saved.
pub fn describe_request(
    request: &PermissionRequest,
    colour: bool,
    screenshot: &Screenshot,
) -> String {
    let mut text = painted_body(request, colour, screenshot);
    text.push_str(keys(request.always_offered()));
    text
}

fn keys(always: bool) -> &'static str {
    if always {
        "[y]es [n]o [a]lways [d]isable [f]orbid-all [c]ancel [?] › "
    } else {
        "[y]es [n]o [d]isable [f]orbid-all [c]ancel [?] › "
    }
}

/// What `?` shows: each choice in a sentence.
fn choices_help(always: bool) -> String {
    let mut text = String::from("\n");
    let mut line = |key: &str, what: &str| text.push_str(&format!("  {key}  {what}\n"));
    line("y", "yes: run this call once");
    line(
        "n",
        "no: refuse this call; type a reason after it (Enter to send) and the model is told",
    );
    if always {
        line(
            "a",
            "always: run it, and calls like it for the rest of this session (shown above)",
        );
    }
    line(
        "d",
        "disable: refuse it and take this tool away for the rest of the session",
    );
    line(
        "f",
        "forbid all: refuse it and every other tool call in this turn",
    );
    line("c", "cancel: end the turn now (Esc and Ctrl-C too)");
    text
}

/// [`describe_request`] without the keys: what the full-screen UI shows in its modal.
/// Escaped for the terminal like the prompt.
pub fn request_body(request: &PermissionRequest, screenshot: &Screenshot) -> String {
    painted_body(request, false, screenshot)
}

/// The colour of a diff line, by the rule of the session view's theme (`diff_line`).
fn diff_colour(line: &str) -> Option<&'static str> {
    if line.starts_with("+++") || line.starts_with("---") {
        Some("1")
    } else if line.starts_with('+') {
        Some("32")
    } else if line.starts_with('-') {
        Some("31")
    } else if line.starts_with("@@") {
        Some("36")
    } else {
        None
    }
}

fn painted_body(request: &PermissionRequest, colour: bool, screenshot: &Screenshot) -> String {
    let preview = &request.preview;
    let mut text = format!(
        "\n⚠ {} wants to run ({} · {})\n",
        safe_text::escape_line(&request.tool),
        safe_text::escape_line(&request.danger),
        safe_text::escape_line(&request.reason)
    );
    if let Some(command) = &preview.command {
        push_framed(&mut text, "  $ ", "  │ ", command);
        text.push_str(&parsed_commands(command));
    } else if let Some(code) = &preview.code {
        push_framed(&mut text, "  │ ", "  │ ", code);
    } else if let Some(diff) = &preview.diff {
        if let Some(path) = &preview.path {
            text.push_str(&format!("  file: {}\n", safe_text::escape_line(path)));
        }
        for line in diff.strip_suffix('\n').unwrap_or(diff).split('\n') {
            // Escaped first, then painted: the colour codes are corral's alone.
            let shown = safe_text::escape(line);
            match diff_colour(line).filter(|_| colour) {
                Some(code) => text.push_str(&format!("\x1b[{code}m{shown}\x1b[0m\n")),
                None => {
                    text.push_str(&shown);
                    text.push('\n');
                }
            }
        }
    } else if let Some(url) = &preview.url {
        text.push_str(&format!("  {}\n", safe_text::escape_line(url)));
    } else if let Some(desktop) = &preview.desktop {
        // In place of the raw arguments: their coordinates are the downsampled screenshot's,
        // these are the screen's.
        text.push_str(&desktop_preview::lines(desktop, screenshot));
    } else {
        text.push_str(&super::tool_args::lines(
            &request.tool_call.raw_input,
            "  ",
            ARGUMENT_CHARS,
            ARGUMENT_LINES,
        ));
    }
    if let Some(note) = &preview.note {
        text.push_str(&format!("  ({})\n", safe_text::escape_line(note)));
    }
    if let Some(always) = &request.always {
        text.push_str(&format!("  {}\n", safe_text::escape_line(&always.scope)));
    }
    text
}

/// How much of each argument the prompt shows (the rest is counted, not shown).
const ARGUMENT_CHARS: usize = 400;
const ARGUMENT_LINES: usize = 12;

/// Each line of `body` behind a frame, so no line of it can pass for one of the prompt's own.
fn push_framed(text: &mut String, first: &str, rest: &str, body: &str) {
    for (i, line) in body.split('\n').enumerate() {
        let frame = if i == 0 { first } else { rest };
        text.push_str(frame);
        text.push_str(&safe_text::escape(line));
        text.push('\n');
    }
}

/// The simple commands bash would run for `command`, one per line, each word quoted as bash
/// would need it typed.
fn parsed_commands(command: &str) -> String {
    let commands = match crate::policy::shell::simple_commands(command) {
        Ok(commands) => commands,
        Err(e) => {
            return format!(
                "  ({}: only the command above says what runs)\n",
                safe_text::escape_line(&e.to_string())
            );
        }
    };
    let mut text = format!(
        "  runs {} command{}:\n",
        commands.len(),
        if commands.len() == 1 { "" } else { "s" }
    );
    for command in &commands {
        let words: Vec<String> = command
            .words
            .iter()
            .map(|w| safe_text::shell_quote(w))
            .collect();
        let line = if words.is_empty() {
            "(a redirection, no program)".to_string()
        } else {
            words.join(" ")
        };
        let dynamic = if command.dynamic {
            "   (expansions: decided when it runs)"
        } else {
            ""
        };
        text.push_str(&format!("    ▸ {line}{dynamic}\n"));
    }
    text
}

pub(crate) fn decision_for(key: &KeyEvent) -> Option<Decision> {
    if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
        return Some(Decision::Cancel);
    }
    match key.code {
        KeyCode::Char('y' | 'Y') => Some(Decision::Allow),
        KeyCode::Char('n' | 'N') => Some(Decision::Deny),
        KeyCode::Char('a' | 'A') => Some(Decision::AllowAll),
        KeyCode::Char('d' | 'D') => Some(Decision::Disable),
        KeyCode::Char('f' | 'F') => Some(Decision::ForbidAll),
        KeyCode::Char('c' | 'C') | KeyCode::Esc => Some(Decision::Cancel),
        _ => None,
    }
}

/// Whether a terminal can be asked: something to read keys from and stderr to show them.
pub fn terminal_available() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal() && std::fs::File::open("/dev/tty").is_ok()
}

/// Shows the request on stderr, reads one key from the terminal (`?` explains them; after
/// `n` a reason may be typed), and answers the session. Gives up quietly when the request is
/// closed by other means (timeout, cancel).
pub async fn ask_on_terminal(session: Arc<Session>, request: &PermissionRequest, colour: bool) {
    let id = request.request_id.clone();
    let mut err = std::io::stderr();
    // Kept until the answer: the file is removed when this drops.
    let screenshot = Screenshot::save(request);
    let _ = write!(err, "{}", describe_request(request, colour, &screenshot));
    let _ = err.flush();
    let waiting = session.clone();
    let waited_id = id.clone();
    let always = request.always_offered();
    let key = tokio::task::spawn_blocking(move || read_answer(&waiting, &waited_id, always)).await;
    let answer = match key {
        Ok(Ok(Some(answer))) => answer,
        Ok(Ok(None)) => return,
        Ok(Err(e)) => {
            let _ = writeln!(err, "\ncannot read the terminal ({e}); denying");
            Decision::Deny.into()
        }
        Err(e) => {
            tracing::error!(error = %e, "terminal prompt task failed");
            Decision::Deny.into()
        }
    };
    if answer.reason.is_none() {
        let _ = writeln!(err, "{}", answer.decision);
    }
    if let Err(e) = session.answer_with(&id, answer) {
        tracing::warn!(error = %e, "answering from the terminal");
    }
}

/// Raw mode only while waiting for the answer, restored on every path out.
fn read_answer(session: &Session, id: &str, always: bool) -> std::io::Result<Option<Answer>> {
    crossterm::terminal::enable_raw_mode()?;
    let result = wait_for_answer(session, id, always);
    let restored = crossterm::terminal::disable_raw_mode();
    let answer = result?;
    restored?;
    Ok(answer)
}

/// Raw mode: lines end with `\r\n`.
fn raw_write(text: &str) {
    let mut err = std::io::stderr();
    let _ = write!(err, "{}", text.replace('\n', "\r\n"));
    let _ = err.flush();
}

fn still_open(session: &Session, id: &str) -> bool {
    session
        .pending_permissions()
        .iter()
        .any(|r| r.request_id == id)
}

fn wait_for_answer(session: &Session, id: &str, always: bool) -> std::io::Result<Option<Answer>> {
    loop {
        if !still_open(session, id) {
            return Ok(None);
        }
        if !event::poll(Duration::from_millis(100))? {
            continue;
        }
        let Event::Key(key) = event::read()? else {
            continue;
        };
        if key.code == KeyCode::Char('?') {
            raw_write(&choices_help(always));
            raw_write(keys(always));
            continue;
        }
        match decision_for(&key) {
            Some(Decision::AllowAll) if !always => {}
            Some(Decision::Deny) => {
                raw_write("no — reason for the model (Enter to send, empty for none): ");
                return Ok(read_reason(session, id)?.map(|reason| Answer {
                    decision: Decision::Deny,
                    reason,
                }));
            }
            Some(decision) => return Ok(Some(decision.into())),
            None => {}
        }
    }
}

/// One line typed after `n`, echoed as typed (escaped: it may be pasted text). `Ok(None)`:
/// the request closed meanwhile; `Some(None)`: no reason.
fn read_reason(session: &Session, id: &str) -> std::io::Result<Option<Option<String>>> {
    let mut reason = String::new();
    loop {
        if !still_open(session, id) {
            return Ok(None);
        }
        if !event::poll(Duration::from_millis(100))? {
            continue;
        }
        match event::read()? {
            Event::Key(key) if key.kind != event::KeyEventKind::Release => match key.code {
                KeyCode::Enter => {
                    raw_write("\n");
                    let reason = reason.trim().to_string();
                    return Ok(Some((!reason.is_empty()).then_some(reason)));
                }
                KeyCode::Esc => {
                    raw_write("\n");
                    return Ok(Some(None));
                }
                KeyCode::Backspace if reason.pop().is_some() => raw_write("\x08 \x08"),
                // Ctrl-C still leaves the prompt: without the reason, a plain denial.
                KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                    raw_write("\n");
                    return Ok(Some(None));
                }
                KeyCode::Char(_) if key.modifiers.contains(KeyModifiers::CONTROL) => {}
                KeyCode::Char(c) => {
                    reason.push(c);
                    raw_write(&safe_text::escape_line(&c.to_string()));
                }
                _ => {}
            },
            Event::Paste(text) => {
                let line = text.lines().next().unwrap_or_default();
                reason.push_str(line);
                raw_write(&safe_text::escape_line(line));
            }
            _ => {}
        }
    }
}

/// `--approve-stdin`: each stdin line `{"requestId":…,"decision":…}` answers a request.
/// Mistakes are reported as `error` events; the session goes on.
pub async fn answer_from_stdin(session: Arc<Session>) {
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    loop {
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => return,
            Err(e) => {
                session.emit_error(
                    format!("--approve-stdin: cannot read stdin: {e}"),
                    Value::Null,
                );
                return;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        if let Err(message) = apply_line(&session, &line) {
            session.emit_error(
                format!("--approve-stdin: {message}"),
                serde_json::json!({"line": crate::model::excerpt(&line, 200)}),
            );
        }
    }
}

fn apply_line(session: &Session, line: &str) -> Result<(), String> {
    let value: Value =
        serde_json::from_str(line).map_err(|e| format!("the line is not JSON ({e})"))?;
    let id = value
        .get("requestId")
        .and_then(Value::as_str)
        .ok_or("the line has no \"requestId\"")?;
    let decision: Decision = value
        .get("decision")
        .and_then(Value::as_str)
        .ok_or("the line has no \"decision\"")?
        .parse()
        .map_err(|e: crate::policy::UnknownDecision| e.to_string())?;
    // A denial may say why; the model is told.
    let reason = value
        .get("reason")
        .and_then(Value::as_str)
        .map(str::to_string);
    session
        .answer_with(id, Answer { decision, reason })
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::ApprovalPreview;

    fn request(tool: &str, preview: ApprovalPreview) -> PermissionRequest {
        PermissionRequest {
            preview,
            ..PermissionRequest::sample(tool, serde_json::json!({}))
        }
    }

    #[test]
    fn a_command_is_shown_escaped_and_as_the_commands_it_runs() {
        let request = PermissionRequest {
            danger: "dangerous".into(),
            reason: "shell\x1b[8m asks".into(),
            ..request(
                "shell",
                ApprovalPreview {
                    command: Some("echo hi # \x1b[2J\x1b[H$ ls\nrm -rf 'my dir' \u{202e}x".into()),
                    ..ApprovalPreview::default()
                },
            )
        };
        let text = describe_request(&request, false, &Screenshot::None);
        assert!(!text.chars().any(safe_text::is_unsafe), "{text:?}");
        assert!(text.contains(r"(dangerous · shell\x1b[8m asks)"), "{text}");
        assert!(text.contains(r"  $ echo hi # \x1b[2J\x1b[H$ ls"), "{text}");
        assert!(text.contains("  │ rm -rf 'my dir' \\u{202e}x\n"), "{text}");
        assert!(
            text.contains("  runs 2 commands:\n    ▸ echo hi\n"),
            "{text}"
        );
        assert!(text.contains(r"    ▸ rm -rf 'my dir' $'\u202ex'"), "{text}");
    }

    #[test]
    fn a_command_that_does_not_parse_says_so_and_diffs_are_escaped() {
        let text = describe_request(
            &request(
                "shell",
                ApprovalPreview {
                    command: Some("echo 'x".into()),
                    ..ApprovalPreview::default()
                },
            ),
            false,
            &Screenshot::None,
        );
        assert!(
            text.contains("only the command above says what runs"),
            "{text}"
        );
        let text = describe_request(
            &request(
                "write_file",
                ApprovalPreview {
                    diff: Some("+a\x1b[1A\x1b[2K\n+\u{9b}b\n".into()),
                    ..ApprovalPreview::default()
                },
            ),
            false,
            &Screenshot::None,
        );
        assert!(text.contains("+a\\x1b[1A\\x1b[2K\n+\\u{9b}b\n"), "{text}");
    }

    #[test]
    fn diffs_are_coloured_after_escaping_and_arguments_read_as_lines() {
        let diff = request(
            "write_file",
            ApprovalPreview {
                diff: Some("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\x1b[31m\n+new\n same\n".into()),
                ..ApprovalPreview::default()
            },
        );
        let text = describe_request(&diff, true, &Screenshot::None);
        assert!(text.contains("\x1b[1m--- a/x\x1b[0m\n"), "{text:?}");
        assert!(text.contains("\x1b[36m@@ -1 +1 @@\x1b[0m\n"), "{text:?}");
        assert!(text.contains("\x1b[31m-old\\x1b[31m\x1b[0m\n"), "{text:?}");
        assert!(text.contains("\x1b[32m+new\x1b[0m\n same\n"), "{text:?}");
        let plain = describe_request(&diff, false, &Screenshot::None);
        assert!(!plain.contains('\x1b'), "{plain:?}");
        let call = PermissionRequest::sample(
            "mcp__deploy",
            serde_json::json!({"target": "prod", "notes": "a\nb"}),
        );
        let text = describe_request(&call, false, &Screenshot::None);
        assert!(
            text.contains("  target: prod\n  notes:\n    │ a\n    │ b\n"),
            "{text}"
        );
        assert!(!text.contains("{\"target\""), "{text}");
        assert!(text.ends_with("[c]ancel [?] › "), "{text}");
        assert!(
            choices_help(true).lines().count() == 7,
            "{}",
            choices_help(true)
        );
    }
}
