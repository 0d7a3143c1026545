//! Resuming after faults: `corral run` killed with SIGKILL mid-stream and mid-tool, then
//! `--resume`d; `corral serve` killed with SIGKILL, restarted, its sessions listed as dead and
//! reopened by id.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::common::*;
use crate::server_rest::client::Api;
use crate::support::server::Server;
use crate::support::{FakeModel, Harness, Reply};

fn roles(messages: &[Value]) -> Vec<&str> {
    messages
        .iter()
        .map(|m| m["role"].as_str().unwrap_or(""))
        .collect()
}

/// The one event log of `h`, as text.
fn log_text(h: &Harness) -> String {
    let logs = h.event_logs();
    assert_eq!(logs.len(), 1, "{logs:?}");
    std::fs::read_to_string(&logs[0]).unwrap()
}

/// `corral run --resume <id> <prompt>` against `server`; the fake answers `ok`.
async fn resume(h: &Harness, server: &FakeModel, id: &str) -> crate::support::Outcome {
    server.push(Reply::new().text("ok"));
    let out = h
        .corral()
        .args(["run", "--json", "-p", "bypass", "--base-url"])
        .arg(server.openai_base())
        .args(["--resume", id, "go on"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    out
}

/// What the resumed run shows of the repair: the interrupted turn's own `result`.
fn assert_repair_shown(out: &crate::support::Outcome, turn: u64) {
    let closing: Vec<Value> = out
        .of_kind("result")
        .into_iter()
        .filter(|e| e["turn"] == turn)
        .collect();
    assert_eq!(closing.len(), 1, "{out:?}");
    assert_eq!(closing[0]["data"]["stopReason"], "error");
    assert!(
        closing[0]["data"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("interrupted")),
        "{closing:?}"
    );
}

#[tokio::test]
async fn resume_after_sigkill_mid_stream_keeps_roles_alternating() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(
        Reply::new()
            .text("Once upon")
            .stall(Duration::from_secs(60))
            .text(" never"),
    );
    let running = openai_run(&h, &server, "tell me a story").spawn().await;
    running
        .wait_for_event(0, |e| e["kind"] == "assistant_text")
        .await;
    let id = running.events_so_far()[0]["agent"]
        .as_str()
        .unwrap()
        .to_owned();
    running.signal("KILL").await;
    let killed = running.wait().await;
    assert_eq!(killed.signal, Some(9), "{killed:?}");
    let before = log_text(&h);

    let out = resume(&h, &server, &id).await;
    let sent = messages(&server, 1);
    assert_eq!(
        roles(&sent),
        ["system", "user", "assistant", "user"],
        "{sent:?}"
    );
    assert_eq!(sent[1]["content"], "tell me a story");
    assert!(
        sent[2]["content"]
            .as_str()
            .is_some_and(|c| c.contains("interrupted")),
        "the model is told the turn was cut off: {sent:?}"
    );
    assert_eq!(sent[3]["content"], "go on");
    assert_repair_shown(&out, 1);
    assert!(
        log_text(&h).starts_with(&before),
        "the log is appended to, never rewritten"
    );
}

#[tokio::test]
async fn resume_after_sigkill_mid_tool_tells_the_model_the_call_was_cut_off() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call(
        "c1",
        "shell",
        r#"{"command":"echo ran >> runs.txt; sleep 30"}"#,
    ));
    let running = openai_run(&h, &server, "run the slow thing")
        .args(["-p", "bypass"])
        .spawn()
        .await;
    let runs = h.work().join("runs.txt");
    wait_until("the tool to start", || runs.exists()).await;
    let id = running.events_so_far()[0]["agent"]
        .as_str()
        .unwrap()
        .to_owned();
    running.signal("KILL").await;
    running.wait().await;
    let before = log_text(&h);

    let out = resume(&h, &server, &id).await;
    assert_eq!(server.chat_requests().len(), 2, "one request per run");
    let sent = messages(&server, 1);
    assert_eq!(
        roles(&sent),
        ["system", "user", "assistant", "tool", "assistant", "user"],
        "{sent:?}"
    );
    assert_eq!(sent[2]["tool_calls"][0]["id"], "c1");
    assert_eq!(sent[2]["tool_calls"][0]["function"]["name"], "shell");
    assert_eq!(sent[3]["tool_call_id"], "c1");
    assert!(
        sent[3]["content"]
            .as_str()
            .is_some_and(|c| c.contains("interrupted") && c.contains("not run again")),
        "{sent:?}"
    );
    assert_eq!(sent[5]["content"], "go on");
    assert_eq!(
        std::fs::read_to_string(&runs).unwrap(),
        "ran\n",
        "the interrupted call is not run again"
    );
    let results = out.of_kind("tool_result");
    assert_eq!(results.len(), 1, "{out:?}");
    assert_eq!(results[0]["data"]["result"]["toolCallId"], "c1");
    assert_eq!(results[0]["data"]["result"]["success"], false);
    assert_repair_shown(&out, 1);
    assert!(log_text(&h).starts_with(&before));

    // Resuming again reads the repair from the log: the same history, no second repair.
    let again = resume(&h, &server, &id).await;
    assert!(again.of_kind("tool_result").is_empty(), "{again:?}");
    let third = messages(&server, 2);
    assert_eq!(&third[..6], &sent[..], "{third:?}");
}

/// The sessions `token` is shown by `GET /api/v1/sessions`.
async fn listed(api: &Api, token: &str) -> Vec<Value> {
    let (status, body) = api
        .call_as(Some(token), Method::GET, "/api/v1/sessions", None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["sessions"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn sessions_of_a_killed_server_are_listed_dead_and_reopen_with_their_history() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let mut api = Api::start(&h).await;
    model.push(Reply::new().text("Noted: plum."));
    let id = api.create(&h, &model, serde_json::json!({})).await;
    let (status, body) = api.send(&id, "remember the word plum").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    api.wait_idle_after(&id, 1).await;
    api.server.child.kill().await.unwrap();

    let server = Server::start(&h, &[]).await;
    let (alice, bob, admin) = (
        server.token("alice", false),
        server.token("bob", false),
        server.token("root", true),
    );
    let api = Api {
        server,
        http: reqwest::Client::new(),
        token: alice.clone(),
    };
    let mine = listed(&api, &alice).await;
    let entry = mine
        .iter()
        .find(|s| s["id"] == id.as_str())
        .unwrap_or_else(|| panic!("the killed server's session is listed: {mine:?}"));
    assert_eq!(entry["status"], "dead");
    assert_eq!(entry["owner"], "alice");
    assert_eq!(entry["turn"], 1);
    assert!(
        listed(&api, &admin)
            .await
            .iter()
            .any(|s| s["id"] == id.as_str())
    );
    assert!(
        !listed(&api, &bob)
            .await
            .iter()
            .any(|s| s["id"] == id.as_str()),
        "another user does not see it"
    );

    let reopen = format!("/api/v1/sessions/{id}/reopen");
    let (status, body) = api.call_as(Some(&bob), Method::POST, &reopen, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, body) = api.call(Method::POST, &reopen, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["id"], id.as_str());
    assert_eq!(body["owner"], "alice");
    let (status, body) = api.call(Method::POST, &reopen, None).await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "an open session is not reopened: {body}"
    );
    let mine = listed(&api, &alice).await;
    assert_eq!(
        mine.iter().filter(|s| s["id"] == id.as_str()).count(),
        1,
        "{mine:?}"
    );

    model.push(Reply::new().text("plum"));
    let (status, body) = api.send(&id, "what was the word?").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["turn"], 2);
    api.wait_idle_after(&id, 2).await;
    let sent = messages(&model, 1);
    assert_eq!(
        roles(&sent),
        ["system", "user", "assistant", "user"],
        "{sent:?}"
    );
    assert_eq!(sent[1]["content"], "remember the word plum");
    assert_eq!(sent[2]["content"], "Noted: plum.");
    assert_eq!(sent[3]["content"], "what was the word?");
}

/// A second server on the same agents directory does not list as dead a session the first
/// one still runs (its lock is held), and cannot reopen it.
#[tokio::test]
async fn a_session_another_live_server_runs_is_not_listed_dead() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let api = Api::start(&h).await;
    let id = api.create(&h, &model, serde_json::json!({})).await;
    let second = Server::start(&h, &[]).await;
    let admin = second.token("root", true);
    let other = Api {
        server: second,
        http: reqwest::Client::new(),
        token: admin.clone(),
    };
    let all = listed(&other, &admin).await;
    assert!(
        !all.iter().any(|s| s["id"] == id.as_str()),
        "a live session is listed by another server: {all:?}"
    );
    let reopen = format!("/api/v1/sessions/{id}/reopen");
    let (status, body) = other.call(Method::POST, &reopen, None).await;
    assert_ne!(
        status,
        StatusCode::OK,
        "reopened under a live server: {body}"
    );
}
