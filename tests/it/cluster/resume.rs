//! Nothing lost, nothing twice: a client moving to the other `serve`, a `serve` restarted
//! mid-turn.

use std::time::Duration;

use serde_json::{Value, json};

use super::{admin, conversation, open, serve, slow_words, wait_for_nodes, wait_session};
use crate::server_ws::{collect, connect, is, next, send, session_url, user};
use crate::support::cluster::{Nats, Node};
use crate::support::server::Server;
use crate::support::{FakeModel, Harness};

/// The text of the `token` messages, in order.
fn tokens(messages: &[Value]) -> String {
    messages
        .iter()
        .filter(|m| m["type"] == "token")
        .map(|m| m["payload"]["text"].as_str().unwrap_or(""))
        .collect()
}

/// Two `serve --nats` in homes of their own, both seeing node `n1`.
async fn two_serves(nats: &Nats) -> (Harness, Server, Harness, Server) {
    let (ha, hb) = (Harness::new(), Harness::new());
    let a = serve(&ha, nats).await;
    let b = serve(&hb, nats).await;
    wait_for_nodes(&a, &["n1"]).await;
    wait_for_nodes(&b, &["n1"]).await;
    (ha, a, hb, b)
}

fn assert_increasing_and_unique(messages: &[Value]) {
    let seqs: Vec<u64> = messages
        .iter()
        .map(|m| m["seq"].as_u64().unwrap_or_else(|| panic!("no seq: {m}")))
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
}

#[tokio::test]
async fn a_websocket_client_resumes_on_the_other_serve_with_last_seq_and_loses_nothing() {
    let nats = Nats::start().await;
    let _node = Node::start(&nats, "n1", &[]).await;
    let (ha, a, _hb, b) = two_serves(&nats).await;
    let model = FakeModel::start().await;
    let (reply, expected) = slow_words(40, Duration::from_millis(30));
    model.push(reply);
    let token = admin(&a);
    let (status, opened) = open(&a, &token, &ha, &model, json!({})).await;
    assert_eq!(status, 201, "{opened}");
    let id = opened["id"].as_str().unwrap();

    let mut first = connect(&session_url(&a, id, &token)).await;
    let mut seen = vec![next(&mut first).await];
    send(&mut first, user("count")).await;
    seen.extend(collect(&mut first, is("token")).await);
    for _ in 0..5 {
        seen.push(next(&mut first).await);
    }
    drop(first); // a network drop, mid-stream
    let last = seen.last().unwrap()["seq"].as_u64().unwrap();
    // The same client, now behind the other serve (a load balancer moved it).
    let url = format!("{}&last_seq={last}", session_url(&b, id, &admin(&b)));
    let mut second = connect(&url).await;
    seen.extend(collect(&mut second, is("done")).await);
    assert_increasing_and_unique(&seen);
    assert_eq!(tokens(&seen), expected);
    assert_eq!(seen.iter().filter(|m| m["type"] == "done").count(), 1);

    // Both serves tell the same history.
    wait_session(&b, &token, id, |s| s["status"] == "idle" && s["turn"] == 1).await;
    let from_a = conversation(&a, &token, id).await;
    assert_eq!(from_a, conversation(&b, &token, id).await);
    assert_eq!(from_a[1].1, expected);
    // And number it alike: a replay from the start is the same on both.
    let replay = |server: &Server| format!("{}&last_seq=-1", session_url(server, id, &token));
    let mut on_a = connect(&replay(&a)).await;
    let mut on_b = connect(&replay(&b)).await;
    let from_a = collect(&mut on_a, is("done")).await;
    let from_b = collect(&mut on_b, is("done")).await;
    let numbered = |ms: &[Value]| -> Vec<(u64, String)> {
        ms.iter()
            .filter(|m| m["type"] != "agent_state")
            .map(|m| (m["seq"].as_u64().unwrap(), m["type"].to_string()))
            .collect()
    };
    assert_eq!(numbered(&from_a), numbered(&from_b));
}

#[tokio::test]
async fn a_serve_restarted_mid_turn_loses_nothing_and_repeats_nothing() {
    let nats = Nats::start().await;
    let _node = Node::start(&nats, "n1", &[]).await;
    let h = Harness::new();
    let first = serve(&h, &nats).await;
    wait_for_nodes(&first, &["n1"]).await;
    let model = FakeModel::start().await;
    let (reply, expected) = slow_words(40, Duration::from_millis(40));
    model.push(reply);
    let token = admin(&first);
    let (status, opened) = open(&first, &token, &h, &model, json!({})).await;
    assert_eq!(status, 201, "{opened}");
    let id = opened["id"].as_str().unwrap().to_string();
    let (status, sent) = first
        .post(
            &format!("/api/v1/sessions/{id}/messages"),
            &token,
            &json!({"text": "count"}),
        )
        .await;
    assert_eq!(status, 202, "{sent}");
    wait_session(&first, &token, &id, |s| s["status"] == "working").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Killed outright mid-turn: no goodbye.
    let mut first = first;
    let _ = first.child.kill().await;
    let _ = first.child.wait().await;

    let again = serve(&h, &nats).await;
    let session = wait_session(&again, &token, &id, |s| {
        s["status"] == "idle" && s["turn"] == 1
    })
    .await;
    assert_eq!(session["node"], "n1");
    let history = conversation(&again, &token, &id).await;
    assert_eq!(
        history,
        [
            ("user".to_string(), "count".to_string()),
            ("assistant".to_string(), expected.clone())
        ]
    );
    let mut ws = connect(&format!("{}&last_seq=-1", session_url(&again, &id, &token))).await;
    let replay = collect(&mut ws, is("done")).await;
    assert_increasing_and_unique(&replay);
    assert_eq!(tokens(&replay), expected);
    // The session goes on through the new serve.
    model.push(
        crate::support::Reply::new()
            .text("still here")
            .finish("stop"),
    );
    send(&mut ws, user("again")).await;
    let more = collect(&mut ws, is("done")).await;
    assert_eq!(tokens(&more), "still here");
}

#[tokio::test]
async fn an_approval_answered_on_the_other_serve_reaches_the_node_that_asked() {
    let nats = Nats::start().await;
    let _node = Node::start(&nats, "n1", &[]).await;
    let (ha, a, _hb, b) = two_serves(&nats).await;
    let model = FakeModel::start().await;
    model.push(
        crate::support::Reply::new()
            .tool_call(
                "w1",
                "write_file",
                r#"{"path":"approved.txt","content":"yes"}"#,
            )
            .finish("tool_calls"),
    );
    model.push(crate::support::Reply::new().text("written").finish("stop"));
    let token = a.token("alice", false);
    let (status, opened) = open(&a, &token, &ha, &model, json!({})).await;
    assert_eq!(status, 201, "{opened}");
    let id = opened["id"].as_str().unwrap();
    let mut watching = connect(&session_url(&a, id, &token)).await;
    next(&mut watching).await;
    let (status, _) = a
        .post(
            &format!("/api/v1/sessions/{id}/messages"),
            &token,
            &json!({"text": "write it"}),
        )
        .await;
    assert_eq!(status, 202);
    let asked = collect(&mut watching, is("tool_confirm_request")).await;
    let request = asked.last().unwrap()["payload"]["confirmation_id"]
        .as_str()
        .unwrap()
        .to_string();
    // The other serve lists the same request and takes the answer.
    wait_session(&b, &token, id, |s| s["pending_permissions"] == 1).await;
    let (_, listed) = b
        .get(&format!("/api/v1/sessions/{id}/permissions"), &token)
        .await;
    assert_eq!(
        listed["permissions"][0]["requestId"],
        request.as_str(),
        "{listed}"
    );
    let (status, answered) = b
        .post(
            &format!("/api/v1/sessions/{id}/confirmations"),
            &token,
            &json!({"confirmation_id": request, "action": "allow"}),
        )
        .await;
    assert_eq!(status, 200, "{answered}");
    // The first serve's client sees the turn go on and end.
    let rest = collect(&mut watching, is("done")).await;
    assert_eq!(tokens(&rest), "written");
    assert_eq!(
        std::fs::read_to_string(ha.work().join("approved.txt")).unwrap(),
        "yes"
    );
    // An answer to a request that is not open is refused on either.
    let (status, _) = a
        .post(
            &format!("/api/v1/sessions/{id}/confirmations"),
            &token,
            &json!({"confirmation_id": request, "action": "allow"}),
        )
        .await;
    assert_eq!(status, 404);
}
