//! Steering: a message sent (over MCP) while a codex turn runs goes to codex with
//! `turn/steer` and is answered within that turn. And codex dying between turns.

use serde_json::json;

use super::codex_mcp;
use crate::common::{mcp_call, mcp_wait_dead, steer_mid_turn};
use crate::support::{FakeModel, Harness, Reply};

#[tokio::test]
async fn a_message_sent_mid_turn_is_steered_into_it() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    let mut running = codex_mcp(&h, &server).await;
    steer_mid_turn(&h, &mut running, &server, "codex:fake-model", || {
        !server.responses_requests().is_empty()
    })
    .await;
    let requests = server.responses_requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    let second = requests[1]["input"].to_string();
    assert!(second.contains("also this"), "{second}");
    running.close_stdin();
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
}

/// Between turns, codex dying moves the session to dead at once, with the report, instead
/// of waiting for the next message to find out.
#[tokio::test]
async fn a_codex_that_dies_between_turns_is_dead_at_once() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("DONE"));
    let mut running = codex_mcp(&h, &server).await;
    crate::common::mcp_initialize(&mut running).await;
    let work = h.work().display().to_string();
    let opened = mcp_call(
        &mut running,
        1,
        "agent_open",
        json!({"cwd": work, "model": "codex:fake-model"}),
    )
    .await;
    let agent = opened["agent_id"].as_str().unwrap().to_owned();
    let ran = mcp_call(
        &mut running,
        2,
        "agent_run",
        json!({"agent_id": agent, "text": "go"}),
    )
    .await;
    assert_eq!(ran["text"], "DONE");
    super::kill_codex(&h);
    mcp_wait_dead(&mut running, &agent, 3).await;
    let all = mcp_call(
        &mut running,
        5000,
        "agent_output",
        json!({"agent_id": agent, "which": "all", "include_tools": true}),
    )
    .await;
    let text = all["text"].as_str().unwrap();
    assert!(text.contains("codex stopped between turns"), "{text}");
    assert!(
        text.contains("SIGKILL") || text.contains("signal: 9"),
        "{text}"
    );
    running.close_stdin();
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
}
