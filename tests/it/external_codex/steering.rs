//! Steering: a message sent (over MCP) while a codex turn runs goes to codex with
//! `turn/steer` and is answered within that turn.

use std::time::Duration;

use serde_json::{Value, json};

use super::{codex_home, codex_program};
use crate::common::{mcp_call, mcp_initialize};
use crate::support::{FakeModel, Harness, Reply};

#[tokio::test]
async fn a_message_sent_mid_turn_is_steered_into_it() {
    let program = codex_program();
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(
        Reply::new()
            .text("FIRST ")
            .chunk_delay(Duration::from_millis(100))
            .many_text_chunks(15, "."),
    );
    server.push(Reply::new().text("SECOND ANSWER"));
    let mut running = h
        .corral()
        .env("CORRAL_CODEX", &program)
        .env("CODEX_HOME", codex_home(&h, &server))
        .env("FAKE_API_KEY", "dummy")
        .arg("mcp")
        .live_stdin()
        .timeout(Duration::from_secs(90))
        .spawn()
        .await;
    mcp_initialize(&mut running).await;
    let work = h.work().display().to_string();
    let opened = mcp_call(
        &mut running,
        1,
        "agent_open",
        json!({"cwd": work, "model": "codex:fake-model", "permission": "bypass"}),
    )
    .await;
    let agent = opened["agent_id"].as_str().unwrap().to_owned();
    let sent = mcp_call(
        &mut running,
        2,
        "agent_send",
        json!({"agent_id": agent, "text": "first"}),
    )
    .await;
    assert_eq!(sent, json!({"turn": 1}));
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while server.responses_requests().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "codex never asked the model"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let steered = mcp_call(
        &mut running,
        3,
        "agent_send",
        json!({"agent_id": agent, "text": "also this"}),
    )
    .await;
    assert_eq!(
        steered,
        json!({"turn": 1}),
        "the message joins the running turn"
    );
    let mut output = Value::Null;
    for id in 4..2000 {
        output = mcp_call(
            &mut running,
            id,
            "agent_output",
            json!({"agent_id": agent, "which": "full_turn"}),
        )
        .await;
        if output["done"] == true {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(output["done"], true, "{output}");
    assert_eq!(output["turn"], 1);
    let text = output["text"].as_str().unwrap();
    assert!(text.contains("SECOND ANSWER"), "{text}");
    let requests = server.responses_requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    let second = requests[1]["input"].to_string();
    assert!(second.contains("also this"), "{second}");
    let status = mcp_call(
        &mut running,
        3000,
        "agent_status",
        json!({"agent_id": agent}),
    )
    .await;
    assert_eq!(status["turn"], 1, "{status}");
    running.close_stdin();
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
}

/// Between turns, codex dying moves the session to dead at once, with the report, instead
/// of waiting for the next message to find out.
#[tokio::test]
async fn a_codex_that_dies_between_turns_is_dead_at_once() {
    let program = codex_program();
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("DONE"));
    let mut running = h
        .corral()
        .env("CORRAL_CODEX", &program)
        .env("CODEX_HOME", codex_home(&h, &server))
        .env("FAKE_API_KEY", "dummy")
        .arg("mcp")
        .live_stdin()
        .timeout(Duration::from_secs(90))
        .spawn()
        .await;
    mcp_initialize(&mut running).await;
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
    let mut status = Value::Null;
    for id in 3..400 {
        status = mcp_call(&mut running, id, "agent_status", json!({"agent_id": agent})).await;
        if status["status"] == "dead" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status["status"], "dead", "{status}");
    let all = mcp_call(
        &mut running,
        500,
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
