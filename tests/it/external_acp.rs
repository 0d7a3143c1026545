//! `acp:<agent>`: corral driving real ACP agents (gemini --acp, claude-agent-acp, opencode)
//! against the fake model server, and a scripted agent (`acp:cmd=`) for what real agents will
//! not do on request (an fs call outside the root, a crash). Every test asserts corral's event
//! stream.

mod doctor;
mod gemini;
mod others;
mod scripted;
mod scripted_asks;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Outcome, Running};

/// Real agents take seconds to start on two shared cores.
const AGENT_TIMEOUT: Duration = Duration::from_secs(180);

/// Where `scripts/install-agent-clis` installs the agent programs.
fn agent_clis() -> PathBuf {
    let home = std::env::var_os("HOME").expect("HOME");
    Path::new(&home).join(".cache/corral-ci/agent-clis/node_modules/.bin")
}

/// PATH with the installed agent programs first; fails the test when `program` is missing.
fn path_with(program: &str) -> String {
    let bin = agent_clis();
    assert!(
        bin.join(program).is_file(),
        "{program} is not installed in {}: run scripts/install-agent-clis",
        bin.display()
    );
    let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
    format!("{}:{path}", bin.display())
}

fn is_request(e: &Value) -> bool {
    e["kind"] == "permission" && e["data"].get("resolved").is_none()
}

/// Like `Running::wait_for_event`, with room for a real agent's start-up.
async fn wait_long(running: &Running, n: usize, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + AGENT_TIMEOUT;
    while tokio::time::Instant::now() < deadline {
        if let Some(found) = running
            .events_so_far()
            .into_iter()
            .filter(|e| pred(e))
            .nth(n)
        {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Its panic carries the events and stderr so far.
    running.wait_for_event(n, pred).await
}

async fn answer(running: &mut Running, n: usize, decision: &str) -> Value {
    let request = wait_long(running, n, is_request).await;
    let id = request["data"]["requestId"].as_str().unwrap().to_owned();
    running
        .send_line(&json!({"requestId": id, "decision": decision}).to_string())
        .await;
    request
}

/// The advisory `error` at spawn (seed: "Where an ACP preset is enforced"), before the turn.
fn assert_advisory_first(out: &Outcome) {
    let events = out.events();
    let first_error = events.iter().position(|e| e["kind"] == "error");
    let turn = events.iter().position(|e| e["kind"] == "turn_started");
    let (Some(error), Some(turn)) = (first_error, turn) else {
        panic!("an advisory error and a turn: {out:?}");
    };
    assert!(error < turn, "the advisory comes at spawn: {out:?}");
    let message = events[error]["data"]["message"].as_str().unwrap();
    assert!(message.contains("advisory"), "{message}");
    assert_eq!(events[error]["data"]["data"]["advisory"], true);
}

fn turn_errors(out: &Outcome) -> Vec<Value> {
    out.of_kind("error")
        .into_iter()
        .filter(|e| e["data"]["data"]["advisory"] != true)
        .collect()
}
