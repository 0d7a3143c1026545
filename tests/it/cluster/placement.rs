//! Where sessions go: labels, capacity, a named node; and that a turn runs there.

use serde_json::json;

use super::{admin, conversation, open, serve, wait_for_nodes, wait_session};
use crate::support::cluster::{Nats, Node};
use crate::support::{FakeModel, Harness, Reply};

#[tokio::test]
async fn sessions_spread_by_labels_and_capacity_and_carry_their_node() {
    let nats = Nats::start().await;
    let _gpu = Node::start(
        &nats,
        "gpu-box",
        &["--labels", "gpu,zone=eu", "--capacity", "1"],
    )
    .await;
    let _big = Node::start(&nats, "big-box", &["--labels", "repo=x", "--capacity", "2"]).await;
    let h = Harness::new();
    let server = serve(&h, &nats).await;
    wait_for_nodes(&server, &["gpu-box", "big-box"]).await;
    let model = FakeModel::start().await;
    let token = admin(&server);

    let (status, first) = open(&server, &token, &h, &model, json!({"labels": ["gpu"]})).await;
    assert_eq!(status, 201, "{first}");
    assert_eq!(first["node"], "gpu-box");
    // The only gpu node is full.
    let (status, full) = open(&server, &token, &h, &model, json!({"labels": ["zone=eu"]})).await;
    assert_eq!(
        (status, full["error"]["code"].as_str()),
        (503, Some("NODE_FULL")),
        "{full}"
    );
    let (status, none) = open(&server, &token, &h, &model, json!({"labels": ["zone=us"]})).await;
    assert_eq!(
        (status, none["error"]["code"].as_str()),
        (503, Some("NO_NODE")),
        "{none}"
    );
    // No labels: the node with room.
    let (status, second) = open(&server, &token, &h, &model, json!({})).await;
    assert_eq!(
        (status, second["node"].as_str()),
        (201, Some("big-box")),
        "{second}"
    );
    let (status, third) = open(&server, &token, &h, &model, json!({"node": "big-box"})).await;
    assert_eq!(
        (status, third["node"].as_str()),
        (201, Some("big-box")),
        "{third}"
    );
    let (status, over) = open(&server, &token, &h, &model, json!({})).await;
    assert_eq!(
        (status, over["error"]["code"].as_str()),
        (503, Some("NODE_FULL")),
        "{over}"
    );
    // A user token may ask for labels, not name a node.
    let user = server.token("bob", false);
    let (status, named) = open(&server, &user, &h, &model, json!({"node": "gpu-box"})).await;
    assert_eq!(status, 403, "{named}");

    // A turn runs on its node and streams back through serve.
    model.push(Reply::new().text("hello from a node").finish("stop"));
    let id = first["id"].as_str().unwrap();
    let (status, sent) = server
        .post(
            &format!("/api/v1/sessions/{id}/messages"),
            &token,
            &json!({"text": "hi"}),
        )
        .await;
    assert_eq!(status, 202, "{sent}");
    let done = wait_session(&server, &token, id, |s| {
        s["status"] == "idle" && s["turn"] == 1
    })
    .await;
    assert_eq!(done["node"], "gpu-box");
    assert_eq!(
        conversation(&server, &token, id).await,
        [
            ("user".to_string(), "hi".to_string()),
            ("assistant".to_string(), "hello from a node".to_string())
        ]
    );
    let (_, list) = server.get("/api/v1/sessions", &token).await;
    let nodes: Vec<&str> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["node"].as_str())
        .collect();
    assert_eq!(nodes.len(), 3, "{list}");

    // Closing frees the place.
    let (status, closed) = server
        .request_delete(&format!("/api/v1/sessions/{id}"), &token)
        .await;
    assert_eq!(
        (status, closed["closed"].as_bool()),
        (200, Some(true)),
        "{closed}"
    );
    wait_session(&server, &token, id, |s| s["status"] == "dead").await;
    let (status, again) = open(&server, &token, &h, &model, json!({"labels": ["gpu"]})).await;
    assert_eq!(
        (status, again["node"].as_str()),
        (201, Some("gpu-box")),
        "{again}"
    );
}
