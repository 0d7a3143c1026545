//! Failures: a node lost mid-turn (its sessions end, open approvals are withdrawn, the
//! others go on, and the node reaps what it left when it comes back), NATS restarted mid-turn.

use std::time::Duration;

use serde_json::{Value, json};

use super::{admin, conversation, open, serve, slow_words, wait_for_nodes, wait_session};
use crate::common::holding;
use crate::server_ws::{collect, connect, is, next, session_url};
use crate::support::cluster::{Nats, Node};
use crate::support::{FakeModel, Harness, Reply};

#[tokio::test]
async fn a_node_killed_mid_turn_ends_its_sessions_and_no_other() {
    let nats = Nats::start().await;
    let mut lost = Node::start(&nats, "lost", &[]).await;
    let _kept = Node::start(&nats, "kept", &[]).await;
    let h = Harness::new();
    let server = serve(&h, &nats).await;
    wait_for_nodes(&server, &["lost", "kept"]).await;
    let token = admin(&server);
    let on_lost = FakeModel::start().await;
    let on_kept = FakeModel::start().await;
    let word = crate::common::marker("node-lost");

    // On the node that will be lost: a command running, and a call waiting for a person.
    let (_, running) = open(
        &server,
        &token,
        &h,
        &on_lost,
        json!({"node": "lost", "permission": "bypass"}),
    )
    .await;
    let running = running["id"].as_str().unwrap().to_string();
    let (_, asking) = open(&server, &token, &h, &on_lost, json!({"node": "lost"})).await;
    let asking = asking["id"].as_str().unwrap().to_string();
    let command = json!({"command": format!("sleep 300; echo {word}")});
    on_lost.push(
        Reply::new()
            .tool_call("c1", "shell", &command.to_string())
            .only_for("run it"),
    );
    on_lost.push(
        Reply::new()
            .tool_call("c2", "shell", r#"{"command":"touch asked"}"#)
            .only_for("ask me"),
    );
    // On the other node: a turn streaming all along.
    let (_, other) = open(&server, &token, &h, &on_kept, json!({"node": "kept"})).await;
    let other = other["id"].as_str().unwrap().to_string();
    let (reply, expected) = slow_words(60, Duration::from_millis(50));
    on_kept.push(reply);

    let send = |id: &str, text: &str| {
        let path = format!("/api/v1/sessions/{id}/messages");
        let body = json!({"text": text});
        let server = &server;
        let token = &token;
        async move { server.post(&path, token, &body).await }
    };
    assert_eq!(send(&running, "run it").await.0, 202);
    assert_eq!(send(&asking, "ask me").await.0, 202);
    assert_eq!(send(&other, "count").await.0, 202);
    wait_session(&server, &token, &asking, |s| {
        s["status"] == "waiting_approval"
    })
    .await;
    for _ in 0..200 {
        if !holding(&word).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!holding(&word).is_empty(), "the command never started");
    let mut watching = connect(&session_url(&server, &asking, &token)).await;
    next(&mut watching).await;

    lost.kill().await;

    // Both sessions of the lost node end, each with an error naming it.
    for id in [&running, &asking] {
        let dead = wait_session(&server, &token, id, |s| s["status"] == "dead").await;
        assert_eq!(dead["pending_permissions"], 0, "{dead}");
        let (_, permissions) = server
            .get(&format!("/api/v1/sessions/{id}/permissions"), &token)
            .await;
        assert_eq!(permissions["permissions"], json!([]));
    }
    // A client watching is told: the request withdrawn, the error, then the end.
    let told = collect(&mut watching, |m| m["type"] == "error").await;
    let error: &Value = told.last().unwrap();
    assert_eq!(error["payload"]["code"], "NODE_LOST", "{error}");
    assert!(
        error["payload"]["message"]
            .as_str()
            .unwrap()
            .contains("node lost"),
        "{error}"
    );
    // The other node's turn went on untouched.
    let done = wait_session(&server, &token, &other, |s| {
        s["status"] == "idle" && s["turn"] == 1
    })
    .await;
    assert_eq!(done["node"], "kept");
    assert_eq!(conversation(&server, &token, &other).await[1].1, expected);
    // The lost node's approval was never run.
    assert!(!h.work().join("asked").exists());

    // The node comes back on its host: what its sessions left running is ended.
    let host = lost.host;
    let _back = Node::start_on(&nats, "lost", host, &[]).await;
    for _ in 0..100 {
        if holding(&word).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        holding(&word),
        Vec::<u32>::new(),
        "the lost node's command outlived it"
    );
    // And takes new sessions.
    let (status, fresh) = open(&server, &token, &h, &on_lost, json!({"node": "lost"})).await;
    assert_eq!(status, 201, "{fresh}");
}

#[tokio::test]
async fn nats_restarted_mid_turn_loses_no_envelope() {
    let mut nats = Nats::start().await;
    let node = Node::start(&nats, "n1", &[]).await;
    let h = Harness::new();
    let server = serve(&h, &nats).await;
    wait_for_nodes(&server, &["n1"]).await;
    let token = admin(&server);
    let model = FakeModel::start().await;
    let (reply, expected) = slow_words(60, Duration::from_millis(50));
    model.push(reply);
    let (_, opened) = open(&server, &token, &h, &model, json!({})).await;
    let id = opened["id"].as_str().unwrap().to_string();
    let (status, _) = server
        .post(
            &format!("/api/v1/sessions/{id}/messages"),
            &token,
            &json!({"text": "count"}),
        )
        .await;
    assert_eq!(status, 202);
    wait_session(&server, &token, &id, |s| s["status"] == "working").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Down for less than a node takes to be given up on; JetStream's file store keeps what
    // it acknowledged.
    nats.restart(Duration::from_millis(1000)).await;
    let done = wait_session(&server, &token, &id, |s| {
        s["status"] == "idle" && s["turn"] == 1
    })
    .await;
    assert_eq!(done["node"], "n1");
    assert_eq!(conversation(&server, &token, &id).await[1].1, expected);
    // Well past the time a silent node is given up on, the node is still known alive (its
    // heartbeats are followed again after the restart) and the session goes on.
    tokio::time::sleep(Duration::from_secs(4)).await;
    model.push(Reply::new().text("after the restart").finish("stop"));
    let (status, _) = server
        .post(
            &format!("/api/v1/sessions/{id}/messages"),
            &token,
            &json!({"text": "again"}),
        )
        .await;
    assert_eq!(status, 202);
    wait_session(&server, &token, &id, |s| {
        s["status"] == "idle" && s["turn"] == 2
    })
    .await;
    // The node's own log and the stream hold the same envelopes, each once.
    let mut ws = connect(&format!(
        "{}&last_seq=-1",
        session_url(&server, &id, &token)
    ))
    .await;
    let replay = collect(&mut ws, is("done")).await;
    let text: String = replay
        .iter()
        .filter(|m| m["type"] == "token")
        .map(|m| m["payload"]["text"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(text, expected);
    let logged = node.host.event_logs();
    assert_eq!(logged.len(), 1, "{logged:?}");
    let on_node: Vec<Value> = std::fs::read_to_string(&logged[0])
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let seqs: Vec<u64> = on_node.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    let last = *seqs.last().unwrap();
    // A fresh serve reads the whole stream: it holds every envelope up to the node's last.
    let h2 = Harness::new();
    let fresh = serve(&h2, &nats).await;
    let session = wait_session(&fresh, &token, &id, |s| {
        s["status"] == "idle" && s["turn"] == 2
    })
    .await;
    assert_eq!(session["node"], "n1");
    assert_eq!(
        conversation(&fresh, &token, &id).await,
        conversation(&server, &token, &id).await
    );
    assert!(last > 60, "{seqs:?}");
}
