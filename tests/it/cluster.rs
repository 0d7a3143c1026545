//! Beyond one machine: a real `nats-server -js`, `corral node` processes each in a home of
//! its own (as separate hosts), `corral serve --nats` in front, the fake model behind.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::cluster::{CLUSTER_CONFIG, Nats};
use crate::support::server::Server;
use crate::support::{FakeModel, Harness, Reply};

mod attacks;
mod faults;
mod placement;
mod resume;

/// `corral serve --nats` in `h` (its config gives the cluster's short timers).
pub(crate) async fn serve(h: &Harness, nats: &Nats) -> Server {
    h.write_config(CLUSTER_CONFIG);
    Server::start_with(h, &[], &["--nats", &nats.url]).await
}

pub(crate) fn admin(server: &Server) -> String {
    server.token("alice", true)
}

/// Waits until `serve` lists `names` as alive nodes.
pub(crate) async fn wait_for_nodes(server: &Server, names: &[&str]) {
    let token = admin(server);
    for _ in 0..200 {
        let (_, body) = server.get("/api/v1/nodes", &token).await;
        let alive: Vec<&str> = body["nodes"]
            .as_array()
            .map(|nodes| {
                nodes
                    .iter()
                    .filter(|n| n["alive"] == true)
                    .filter_map(|n| n["name"].as_str())
                    .collect()
            })
            .unwrap_or_default();
        if names.iter().all(|n| alive.contains(n)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("serve never listed nodes {names:?} as alive");
}

/// Opens a session on the fake model through `serve`; the status and the body.
pub(crate) async fn open(
    server: &Server,
    token: &str,
    h: &Harness,
    model: &FakeModel,
    extra: Value,
) -> (u16, Value) {
    let mut body = json!({
        "cwd": h.work(),
        "model": "llamacpp:fake-model",
        "base_url": model.openai_base(),
    });
    for (k, v) in extra.as_object().cloned().unwrap_or_default() {
        body[k] = v;
    }
    server.post("/api/v1/sessions", token, &body).await
}

/// The session as `serve` shows it, once `done` accepts it (30 s at most).
pub(crate) async fn wait_session(
    server: &Server,
    token: &str,
    id: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let mut last = Value::Null;
    for _ in 0..300 {
        let (status, body) = server.get(&format!("/api/v1/sessions/{id}"), token).await;
        if status == 200 && done(&body) {
            return body;
        }
        last = body;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("session {id} never got there; last: {last}");
}

/// The conversation `serve` rebuilds for `GET …/messages`, as (role, text) pairs.
pub(crate) async fn conversation(server: &Server, token: &str, id: &str) -> Vec<(String, String)> {
    let (status, body) = server
        .get(&format!("/api/v1/sessions/{id}/messages"), token)
        .await;
    assert_eq!(status, 200, "{body}");
    body["messages"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"))
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap_or("").to_string(),
                m["text"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// A reply of `n` words streamed `delay` apart.
pub(crate) fn slow_words(n: usize, delay: Duration) -> (Reply, String) {
    let mut reply = Reply::new();
    let mut text = String::new();
    for i in 0..n {
        let word = format!("w{i} ");
        reply = reply.text(&word);
        text.push_str(&word);
    }
    (reply.chunk_delay(delay).finish("stop"), text)
}
