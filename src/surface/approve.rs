//! Answering permission requests from the command line: a single-key prompt on the terminal,
//! or NDJSON decisions on stdin (`--approve-stdin`) for programs driving `corral run --json`.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use crossterm::event::{self, Event, KeyCode, KeyEvent, KeyModifiers};
use serde_json::Value;
use tokio::io::AsyncBufReadExt;

use crate::event::PermissionRequest;
use crate::policy::Decision;
use crate::session::Session;

use super::safe_text;

/// The block shown before the keys: tool, danger, why, and the full command, code or diff.
/// Everything in it is escaped for the terminal (it is model text), and a shell command is
/// followed by the simple commands it really runs, as bash reads them: a comment, a string
/// or an escape sequence cannot make it look like another command.
pub fn describe_request(request: &PermissionRequest) -> String {
    let mut text = request_body(request);
    text.push_str(if request.always_offered() {
        "[y]es [n]o [a]lways [d]isable [f]orbid-all [c]ancel › "
    } else {
        "[y]es [n]o [d]isable [f]orbid-all [c]ancel › "
    });
    text
}

/// [`describe_request`] without the keys: what the full-screen UI shows in its modal.
/// Escaped for the terminal like the prompt.
pub fn request_body(request: &PermissionRequest) -> String {
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
        text.push_str(&safe_text::escape(diff));
        if !diff.ends_with('\n') {
            text.push('\n');
        }
    } else if let Some(url) = &preview.url {
        text.push_str(&format!("  {}\n", safe_text::escape_line(url)));
    } else {
        text.push_str(&format!(
            "  {}\n",
            safe_text::escape_line(&request.tool_call.raw_input.to_string())
        ));
    }
    if let Some(note) = &preview.note {
        text.push_str(&format!("  ({})\n", safe_text::escape_line(note)));
    }
    if let Some(always) = &request.always {
        text.push_str(&format!("  {}\n", always.scope));
    }
    // Whatever else the block carries is model text too.
    safe_text::escape(&text).into_owned()
}

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

/// Shows the request on stderr, reads one key from the terminal, and answers the session.
/// Gives up quietly when the request is closed by other means (timeout, cancel).
pub async fn ask_on_terminal(session: Arc<Session>, request: &PermissionRequest) {
    let id = request.request_id.clone();
    let mut err = std::io::stderr();
    let _ = write!(err, "{}", describe_request(request));
    let _ = err.flush();
    let waiting = session.clone();
    let waited_id = id.clone();
    let always = request.always_offered();
    let key =
        tokio::task::spawn_blocking(move || read_decision(&waiting, &waited_id, always)).await;
    let decision = match key {
        Ok(Ok(Some(decision))) => decision,
        Ok(Ok(None)) => return,
        Ok(Err(e)) => {
            let _ = writeln!(err, "\ncannot read the terminal ({e}); denying");
            Decision::Deny
        }
        Err(e) => {
            tracing::error!(error = %e, "terminal prompt task failed");
            Decision::Deny
        }
    };
    let _ = writeln!(err, "{decision}");
    if let Err(e) = session.answer(&id, decision) {
        tracing::warn!(error = %e, "answering from the terminal");
    }
}

/// Raw mode only while waiting for the key, restored on every path out.
fn read_decision(session: &Session, id: &str, always: bool) -> std::io::Result<Option<Decision>> {
    crossterm::terminal::enable_raw_mode()?;
    let result = wait_for_key(session, id, always);
    let restored = crossterm::terminal::disable_raw_mode();
    let decision = result?;
    restored?;
    Ok(decision)
}

fn wait_for_key(session: &Session, id: &str, always: bool) -> std::io::Result<Option<Decision>> {
    loop {
        let still_open = session
            .pending_permissions()
            .iter()
            .any(|r| r.request_id == id);
        if !still_open {
            return Ok(None);
        }
        if event::poll(Duration::from_millis(100))?
            && let Event::Key(key) = event::read()?
            && let Some(decision) = decision_for(&key)
            && (always || decision != Decision::AllowAll)
        {
            return Ok(Some(decision));
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
    session.answer(id, decision).map_err(|e| e.to_string())
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
        let text = describe_request(&request);
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
        let text = describe_request(&request(
            "shell",
            ApprovalPreview {
                command: Some("echo 'x".into()),
                ..ApprovalPreview::default()
            },
        ));
        assert!(
            text.contains("only the command above says what runs"),
            "{text}"
        );
        let text = describe_request(&request(
            "write_file",
            ApprovalPreview {
                diff: Some("+a\x1b[1A\x1b[2K\n+\u{9b}b\n".into()),
                ..ApprovalPreview::default()
            },
        ));
        assert!(text.contains("+a\\x1b[1A\\x1b[2K\n+\\u{9b}b\n"), "{text}");
    }
}
