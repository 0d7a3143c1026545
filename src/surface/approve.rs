//! Answering permission requests from the command line: a single-key prompt on the terminal,
//! or NDJSON decisions on stdin (`--approve-stdin`) for programs driving `corral run --json`.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use crossterm::event::{self, Event, KeyCode, KeyEvent, KeyModifiers};
use serde_json::Value;
use tokio::io::AsyncBufReadExt;

use crate::policy::Decision;
use crate::session::Session;

/// The block shown before the keys: tool, danger, why, and the full command, code or diff.
pub fn describe_request(request: &Value) -> String {
    let field = |name: &str| {
        request
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let mut text = format!(
        "\n⚠ {} wants to run ({} · {})\n",
        field("tool"),
        field("danger"),
        field("reason")
    );
    if let Some(command) = request.get("command").and_then(Value::as_str) {
        text.push_str(&format!("  $ {command}\n"));
    } else if let Some(code) = request.get("code").and_then(Value::as_str) {
        for line in code.lines() {
            text.push_str(&format!("  │ {line}\n"));
        }
    } else if let Some(diff) = request.get("diff").and_then(Value::as_str) {
        text.push_str(diff);
        if !diff.ends_with('\n') {
            text.push('\n');
        }
    } else if let Some(url) = request.get("url").and_then(Value::as_str) {
        text.push_str(&format!("  {url}\n"));
    } else if let Some(input) = request.pointer("/toolCall/rawInput") {
        text.push_str(&format!("  {input}\n"));
    }
    if let Some(note) = request.get("note").and_then(Value::as_str) {
        text.push_str(&format!("  ({note})\n"));
    }
    if let Some(scope) = request.pointer("/always/scope").and_then(Value::as_str) {
        text.push_str(&format!("  {scope}\n"));
    }
    text.push_str(if always_offered(request) {
        "[y]es [n]o [a]lways [d]isable [f]orbid-all [c]ancel › "
    } else {
        "[y]es [n]o [d]isable [f]orbid-all [c]ancel › "
    });
    text
}

/// Whether the request offers "allow always" (older requests without the field do).
fn always_offered(request: &Value) -> bool {
    request
        .pointer("/always/offered")
        .and_then(Value::as_bool)
        .unwrap_or(true)
}

fn decision_for(key: &KeyEvent) -> Option<Decision> {
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
pub async fn ask_on_terminal(session: Arc<Session>, request: Value) {
    let Some(id) = request
        .get("requestId")
        .and_then(Value::as_str)
        .map(str::to_string)
    else {
        return;
    };
    let mut err = std::io::stderr();
    let _ = write!(err, "{}", describe_request(&request));
    let _ = err.flush();
    let waiting = session.clone();
    let waited_id = id.clone();
    let always = always_offered(&request);
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
            .any(|r| r.get("requestId").and_then(Value::as_str) == Some(id));
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
