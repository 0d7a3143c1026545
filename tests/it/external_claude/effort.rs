//! The WebSocket API driving claude as the seed's client would: the effort of a session
//! (`claude:<model>/low`), a think-mode turn at high effort (claude's `apply_flag_settings`,
//! the conversation kept), and a message mid-turn answered TURN_IN_PROGRESS unless it asks to
//! steer.

use super::*;
use crate::server_ws::{Ws, collect, connect, is, next, send, session_url, state_is, user};
use crate::support::server::Server;

async fn claude_server(h: &Harness, model: &FakeModel) -> Server {
    let program = claude_program();
    let program = program.to_str().unwrap();
    let base = model.base_url();
    Server::start(
        h,
        &[
            ("CORRAL_CLAUDE", program),
            ("ANTHROPIC_BASE_URL", base.as_str()),
            ("ANTHROPIC_API_KEY", "sk-ant-dummy"),
            ("CLAUDE_CODE_MAX_RETRIES", "0"),
        ],
    )
    .await
}

/// A claude session over REST (an admin's: agents are the host owner's to start), and its
/// WebSocket after the first `agent_state`.
async fn open_claude(server: &Server, h: &Harness, model: &str) -> (String, Ws) {
    let token = server.token("root", true);
    let (status, body) = server
        .post(
            "/api/v1/sessions",
            &token,
            &json!({"cwd": h.work(), "model": model, "permission": "bypass"}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let id = body["id"].as_str().unwrap().to_string();
    let mut ws = connect(&session_url(server, &id, &token)).await;
    assert!(state_is("idle")(&next(&mut ws).await));
    (id, ws)
}

fn effort_of(request: &Value) -> Value {
    request["output_config"]["effort"].clone()
}

fn states(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["type"] == "agent_state")
        .map(|m| m["payload"]["state"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn ws_a_think_turn_runs_claude_at_high_effort_and_the_next_at_the_sessions() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let server = claude_server(&h, &model).await;
    let (_, mut ws) = open_claude(&server, &h, "claude:fake-model/low").await;

    model.push(Reply::new().text("plain"));
    send(&mut ws, user("one")).await;
    collect(&mut ws, is("done")).await;
    assert_eq!(
        effort_of(&message_requests(&model)[0]),
        "low",
        "--effort=low"
    );

    model.push(Reply::new().reasoning("let me see").text("deep"));
    let think = json!({"type": "user_message", "payload": {"text": "two", "mode": "think"}});
    send(&mut ws, think).await;
    let turn = collect(&mut ws, is("done")).await;
    assert!(
        turn.iter().all(|m| m["type"] != "error"),
        "claude took the effort: {turn:?}"
    );
    let requests = message_requests(&model);
    assert_eq!(effort_of(&requests[1]), "high", "the think turn");
    // Still one conversation: the think turn carries the first exchange.
    let history = requests[1]["messages"].to_string();
    assert!(
        history.contains("one") && history.contains("plain"),
        "{history}"
    );
    let states = states(&turn);
    assert_eq!(states[..2], ["thinking", "analyzing"], "{states:?}");
    assert!(states.contains(&"writing".to_string()), "{states:?}");
    assert_eq!(states.last().unwrap(), "done");

    model.push(Reply::new().text("back"));
    send(&mut ws, user("three")).await;
    collect(&mut ws, is("done")).await;
    assert_eq!(
        effort_of(&message_requests(&model)[2]),
        "low",
        "a normal turn is back at the session's effort"
    );
}

#[tokio::test]
async fn ws_a_message_mid_turn_is_turn_in_progress_unless_it_asks_to_steer() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let server = claude_server(&h, &model).await;
    let (_, mut ws) = open_claude(&server, &h, "claude:fake-model").await;
    model.push(
        Reply::new()
            .text("FIRST ")
            .chunk_delay(Duration::from_millis(100))
            .many_text_chunks(20, "."),
    );
    model.push(Reply::new().text("SECOND ANSWER"));
    send(&mut ws, user("first")).await;
    wait_until("claude never asked the model", || {
        !message_requests(&model).is_empty()
    })
    .await;
    // The seed: "the server sends an error payload with code TURN_IN_PROGRESS … the
    // in-progress turn is unaffected".
    send(&mut ws, user("also this")).await;
    let refused = collect(&mut ws, is("error")).await;
    let error = refused.last().unwrap();
    assert_eq!(error["payload"]["code"], "TURN_IN_PROGRESS", "{error}");
    // Asked for explicitly, the message joins the running turn.
    let steer = json!({"type": "user_message",
                       "payload": {"text": "also this", "steer": true}});
    send(&mut ws, steer).await;
    let turn = collect(&mut ws, is("done")).await;
    assert!(turn.iter().all(|m| m["type"] != "error"), "{turn:?}");
    let tokens: String = turn
        .iter()
        .filter(|m| m["type"] == "token")
        .map(|m| m["payload"]["text"].as_str().unwrap())
        .collect();
    assert!(tokens.contains("SECOND ANSWER"), "{tokens}");
    let requests = message_requests(&model);
    assert_eq!(requests.len(), 2, "only the steered message reached claude");
    let second = requests[1]["messages"].to_string();
    assert_eq!(second.matches("also this").count(), 1, "{second}");
    // A bad steer value is refused, not guessed.
    send(
        &mut ws,
        json!({"type": "user_message", "payload": {"text": "x", "steer": "yes"}}),
    )
    .await;
    let bad = collect(&mut ws, is("error")).await;
    assert_eq!(bad.last().unwrap()["payload"]["code"], "INVALID_MESSAGE");
}

#[tokio::test]
async fn ws_a_messages_own_effort_holds_for_its_turn_then_claude_is_back_at_its_default() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let server = claude_server(&h, &model).await;
    let (_, mut ws) = open_claude(&server, &h, "claude:fake-model").await;
    model.push(Reply::new().text("quick"));
    let low = json!({"type": "user_message", "payload": {"text": "one", "effort": "low"}});
    send(&mut ws, low).await;
    collect(&mut ws, is("done")).await;
    let default = json!({"type": "user_message", "payload": {"text": "two"}});
    model.push(Reply::new().text("usual"));
    send(&mut ws, default).await;
    let turn = collect(&mut ws, is("done")).await;
    assert!(turn.iter().all(|m| m["type"] != "error"), "{turn:?}");
    let requests = message_requests(&model);
    assert_eq!(effort_of(&requests[0]), "low");
    // claude's own default for this model (what it sends when started without --effort).
    assert_eq!(effort_of(&requests[1]), "high");
    let bad = json!({"type": "user_message", "payload": {"text": "x", "effort": "max"}});
    send(&mut ws, bad).await;
    let refused = collect(&mut ws, is("error")).await;
    assert_eq!(
        refused.last().unwrap()["payload"]["code"],
        "INVALID_MESSAGE"
    );
}
