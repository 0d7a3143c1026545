//! Steering: a message sent (over MCP) while a codex turn runs goes to codex with
//! `turn/steer` and is answered within that turn. And codex dying between turns.

use serde_json::json;

use super::codex_mcp;
use crate::common::{mcp_call, steer_mid_turn};
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

/// Between turns, codex dying is reported at once; the next message starts it again on its
/// thread (`thread/resume`), and the model sees the conversation before the crash.
#[tokio::test]
async fn a_codex_that_dies_between_turns_is_started_again_on_its_thread() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("DONE"));
    server.push(Reply::new().text("BACK"));
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
        json!({"agent_id": agent, "text": "remember PLUM"}),
    )
    .await;
    assert_eq!(ran["text"], "DONE");
    super::kill_codex(&h);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut id = 100;
    let text = loop {
        id += 1;
        let all = mcp_call(
            &mut running,
            id,
            "agent_output",
            json!({"agent_id": agent, "which": "all", "include_tools": true}),
        )
        .await;
        let text = all["text"].as_str().unwrap().to_owned();
        if text.contains("started again on its thread") {
            break text;
        }
        assert!(std::time::Instant::now() < deadline, "{text}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert!(text.contains("codex stopped between turns"), "{text}");
    assert!(
        text.contains("SIGKILL") || text.contains("signal: 9"),
        "{text}"
    );
    let ran = mcp_call(
        &mut running,
        3,
        "agent_run",
        json!({"agent_id": agent, "text": "what was it"}),
    )
    .await;
    assert_eq!(ran["text"], "BACK", "{ran}");
    // The resumed thread carried the first turn.
    let last = server.requests().last().unwrap().body.to_string();
    assert!(
        last.contains("remember PLUM") && last.contains("what was it"),
        "{last}"
    );
    running.close_stdin();
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
}
