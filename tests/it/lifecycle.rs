//! The session manager's lifecycle reducer at work through a real surface (MCP): messages a
//! client lets wait are coalesced into the next turn, in order; a turn that stops making
//! progress is interrupted and the session goes on. (An idle claude put to sleep and woken
//! is in `external_claude::sleep`.)

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{
    lifecycle_errors, mcp_call, mcp_initialize, mcp_status, mcp_wait_turn, wait_until,
};
use crate::support::{FakeModel, Harness, Reply, Running};

async fn mcp(h: &Harness) -> Running {
    let mut running = h
        .corral()
        .arg("mcp")
        .live_stdin()
        .timeout(Duration::from_secs(120))
        .spawn()
        .await;
    mcp_initialize(&mut running).await;
    running
}

async fn open_native(running: &mut Running, h: &Harness, model: &FakeModel) -> String {
    let opened = mcp_call(
        running,
        2,
        "agent_open",
        json!({"cwd": h.work(), "model": "llamacpp:fake-model",
               "base_url": model.openai_base()}),
    )
    .await;
    opened["agent_id"].as_str().unwrap().to_owned()
}

fn last_user_text(request: &Value) -> String {
    let messages = request["messages"].as_array().unwrap();
    let user = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
    match &user["content"] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[tokio::test]
async fn messages_sent_mid_turn_by_agent_send_wait_and_are_coalesced_into_the_next_turn() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    model.push(
        Reply::new()
            .text("ONE ")
            .chunk_delay(Duration::from_millis(100))
            .many_text_chunks(20, "."),
    );
    model.push(Reply::new().text("TWO"));
    let mut running = mcp(&h).await;
    let agent = open_native(&mut running, &h, &model).await;
    let send = |text: &str| json!({"agent_id": agent, "text": text});
    assert_eq!(
        mcp_call(&mut running, 3, "agent_send", send("first")).await,
        json!({"turn": 1})
    );
    wait_until("the model was never asked", || {
        !model.chat_requests().is_empty()
    })
    .await;
    // corral's own loop cannot take a message mid-turn: both wait for turn 2, together.
    assert_eq!(
        mcp_call(&mut running, 4, "agent_send", send("second")).await,
        json!({"turn": 2})
    );
    assert_eq!(
        mcp_call(&mut running, 5, "agent_send", send("third")).await,
        json!({"turn": 2})
    );
    let first = mcp_wait_turn(&mut running, &agent, 1, 100).await;
    assert!(
        first["text"].as_str().unwrap().starts_with("ONE"),
        "{first}"
    );
    let second = mcp_wait_turn(&mut running, &agent, 2, 200).await;
    assert_eq!(second["text"], "TWO", "{second}");
    let requests = model.chat_requests();
    assert_eq!(requests.len(), 2, "one turn for both waiting messages");
    assert_eq!(last_user_text(&requests[1]), "second\n\nthird");
    let status = mcp_status(&mut running, 300, &agent).await;
    assert_eq!(status["turn"], 2, "{status}");
    assert_eq!(status["status"], "idle", "{status}");
    running.close_stdin();
    assert_eq!(running.wait().await.code, Some(0));
}

#[tokio::test]
async fn a_turn_without_progress_is_interrupted_and_the_session_goes_on() {
    let h = Harness::new();
    h.write_config(
        "[agents]\nstall_secs = 1\nstall_grace_secs = 5\n\n[timeouts]\nidle_secs = 120\n",
    );
    let model = FakeModel::start().await;
    model.push(
        Reply::new()
            .text("thinking")
            .stall(Duration::from_secs(60))
            .text("late"),
    );
    model.push(Reply::new().text("AGAIN"));
    let mut running = mcp(&h).await;
    let agent = open_native(&mut running, &h, &model).await;
    let started = std::time::Instant::now();
    mcp_call(
        &mut running,
        3,
        "agent_send",
        json!({"agent_id": agent, "text": "first"}),
    )
    .await;
    let first = mcp_wait_turn(&mut running, &agent, 1, 100).await;
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the stalled turn ran on: {first}"
    );
    let status = mcp_status(&mut running, 200, &agent).await;
    assert_eq!(status["status"], "idle", "{status}");
    let log = std::fs::read_to_string(status["event_log"].as_str().unwrap()).unwrap();
    let events: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let lifecycle = lifecycle_errors(&log);
    let stalled = lifecycle
        .first()
        .unwrap_or_else(|| panic!("no stall error: {log}"));
    assert!(stalled.contains("made no progress"), "{stalled}");
    let result = events.iter().find(|e| e["kind"] == "result").unwrap();
    assert_eq!(result["data"]["stopReason"], "cancelled", "{result}");
    // The session is usable: the next message runs.
    mcp_call(
        &mut running,
        300,
        "agent_send",
        json!({"agent_id": agent, "text": "again"}),
    )
    .await;
    let again = mcp_wait_turn(&mut running, &agent, 2, 400).await;
    assert_eq!(again["text"], "AGAIN", "{again}");
    running.close_stdin();
    assert_eq!(running.wait().await.code, Some(0));
}

#[tokio::test]
async fn a_turn_waiting_for_a_persons_answer_is_not_stalled() {
    let h = Harness::new();
    h.write_config("[agents]\nstall_secs = 1\nstall_grace_secs = 1\n");
    let model = FakeModel::start().await;
    model.push(Reply::new().tool_call("c1", "shell", r#"{"command": "echo asked-and-ran"}"#));
    model.push(Reply::new().text("DONE"));
    let mut running = mcp(&h).await;
    let agent = open_native(&mut running, &h, &model).await;
    mcp_call(
        &mut running,
        3,
        "agent_send",
        json!({"agent_id": agent, "text": "run it"}),
    )
    .await;
    let mut id = 10;
    let request = loop {
        id += 1;
        let pending = mcp_call(
            &mut running,
            id,
            "agent_pending",
            json!({"agent_id": agent}),
        )
        .await;
        if let Some(first) = pending["pending"].as_array().and_then(|p| p.first()) {
            break first["requestId"].as_str().unwrap().to_owned();
        }
        assert!(id < 500, "never asked: {pending}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // The person takes three stall periods to answer.
    tokio::time::sleep(Duration::from_secs(3)).await;
    mcp_call(
        &mut running,
        600,
        "agent_approve",
        json!({"agent_id": agent, "request_id": request, "decision": "allow"}),
    )
    .await;
    let turn = mcp_wait_turn(&mut running, &agent, 1, 700).await;
    assert_eq!(turn["text"], "DONE", "{turn}");
    let status = mcp_status(&mut running, 900, &agent).await;
    let log = std::fs::read_to_string(status["event_log"].as_str().unwrap()).unwrap();
    assert!(!log.contains("AGENT_LIFECYCLE"), "{log}");
    assert!(log.contains("asked-and-ran"), "{log}");
    running.close_stdin();
    assert_eq!(running.wait().await.code, Some(0));
}
