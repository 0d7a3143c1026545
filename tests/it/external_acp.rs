//! `acp:<agent>`: corral driving real ACP agents (gemini --acp, claude-agent-acp) against the
//! fake model server, and a scripted agent (`acp:cmd=`) for what real agents will not do on
//! request (an fs call outside the root, a crash). Every test asserts corral's event stream.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::*;
use crate::support::fake_gemini::is_turn_request;
use crate::support::{Cmd, FakeModel, Harness, Outcome, Reply, Running};

const GEMINI_MODEL: &str = "gemini-2.5-flash";
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

/// `corral run --json -m acp:gemini:<model>` with gemini pointed at the fake server, offline.
fn gemini_run(h: &Harness, server: &FakeModel, prompt: &str) -> Cmd {
    let settings = h.home_dir().join(".gemini");
    std::fs::create_dir_all(&settings).unwrap();
    std::fs::write(
        settings.join("settings.json"),
        json!({
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "privacy": {"usageStatisticsEnabled": false},
            "telemetry": {"enabled": false},
            "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
        })
        .to_string(),
    )
    .unwrap();
    h.corral()
        .env("PATH", path_with("gemini"))
        .env("GEMINI_API_KEY", "dummy")
        .env("GOOGLE_GEMINI_BASE_URL", server.base_url())
        .env("GEMINI_CLI_TRUST_WORKSPACE", "true")
        .args(["run", "--json", "-m", &format!("acp:gemini:{GEMINI_MODEL}"), prompt])
        .timeout(AGENT_TIMEOUT)
}

fn is_request(e: &Value) -> bool {
    e["kind"] == "permission" && e["data"].get("resolved").is_none()
}

async fn answer(running: &mut Running, n: usize, decision: &str) -> Value {
    let request = running.wait_for_event(n, is_request).await;
    let id = request["data"]["requestId"].as_str().unwrap().to_owned();
    running
        .send_line(&json!({"requestId": id, "decision": decision}).to_string())
        .await;
    request
}

/// The scripted turns gemini asked for (side calls excluded).
fn gemini_turns(server: &FakeModel) -> Vec<Value> {
    server
        .requests()
        .into_iter()
        .filter(|r| is_turn_request(&r.path, &r.body))
        .map(|r| r.body)
        .collect()
}

/// What gemini sent back to the model for a tool call: the functionResponse parts.
fn function_responses(server: &FakeModel) -> String {
    gemini_turns(server)
        .iter()
        .flat_map(|b| b["contents"].as_array().cloned().unwrap_or_default())
        .flat_map(|c| c["parts"].as_array().cloned().unwrap_or_default())
        .filter(|p| p.get("functionResponse").is_some())
        .map(|p| p["functionResponse"].to_string())
        .collect::<Vec<_>>()
        .join("\n")
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

#[tokio::test]
async fn gemini_text_turn_streams_text_and_ends_the_turn() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("Hello from ").text("fake gemini.").usage(12, 4));
    let out = gemini_run(&h, &server, "say hello").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_well_formed(&out);
    assert_advisory_first(&out);
    assert!(turn_errors(&out).is_empty(), "{out:?}");
    assert_eq!(result_of(&out)["stopReason"], "end_turn");
    assert_eq!(deltas(&out, "assistant_text"), "Hello from fake gemini.");
    assert_eq!(
        authoritative(&out, "assistant_text"),
        ["Hello from fake gemini."]
    );
    let kinds = out.kinds();
    let pos = |k: &str| kinds.iter().position(|x| x == k).unwrap();
    assert!(pos("turn_started") < pos("user_text"));
    assert!(pos("user_text") < pos("assistant_text"));
    assert!(pos("assistant_text") < pos("result"));
    assert_eq!(statuses(&out).last().unwrap(), "dead");
    // The model came over the wire (session/set_model), not from gemini's router.
    let turns = gemini_turns(&server);
    assert_eq!(turns.len(), 1, "{:?}", server.requests());
    let user = turns[0]["contents"].to_string();
    assert!(user.contains("say hello"), "{user}");
    assert!(
        server
            .requests()
            .iter()
            .any(|r| r.path.contains(&format!("models/{GEMINI_MODEL}:"))),
        "{:?}",
        server.requests().iter().map(|r| &r.path).collect::<Vec<_>>()
    );
}
