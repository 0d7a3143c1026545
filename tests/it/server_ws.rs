//! The WebSocket API against the seed protocol (seeds/002): a real `corral serve`, sessions
//! opened over REST, the fake model behind them.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::server_attacks::wire::close_frame;
use crate::support::server::Server;
use crate::support::{FakeModel, Harness, Reply};

mod confirm;
mod logs;
mod seed;

pub(crate) type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

pub(crate) const WAIT: Duration = Duration::from_secs(30);

/// Opens a session for `sub` on the fake model; `permission` is a preset name (`bypass` needs
/// an admin token, so `sub` gets one for it).
pub(crate) async fn open(
    server: &Server,
    h: &Harness,
    model: &FakeModel,
    sub: &str,
    perm: Option<&str>,
) -> String {
    let mut body = json!({
        "cwd": h.work(),
        "model": "llamacpp:fake-model",
        "base_url": model.openai_base(),
    });
    if let Some(perm) = perm {
        body["permission"] = json!(perm);
    }
    let (status, json) = server
        .post(
            "/api/v1/sessions",
            &server.token(sub, perm == Some("bypass")),
            &body,
        )
        .await;
    assert_eq!(status, 201, "{json}");
    json["id"].as_str().unwrap().to_string()
}

pub(crate) async fn connect(url: &str) -> Ws {
    let (ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    ws
}

pub(crate) fn session_url(server: &Server, id: &str, token: &str) -> String {
    format!("{}/ws/v1/sessions/{id}?token={token}", server.ws_base)
}

/// The next JSON text message (control frames skipped).
pub(crate) async fn next(ws: &mut Ws) -> Value {
    loop {
        let frame = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("no message within 30 s")
            .expect("stream ended")
            .unwrap();
        match frame {
            Message::Text(text) => return serde_json::from_str(text.as_str()).unwrap(),
            Message::Close(frame) => panic!("closed: {frame:?}"),
            _ => {}
        }
    }
}

/// Messages up to and including the first one `until` accepts.
pub(crate) async fn collect(ws: &mut Ws, until: impl Fn(&Value) -> bool) -> Vec<Value> {
    let mut seen = Vec::new();
    loop {
        let m = next(ws).await;
        let stop = until(&m);
        seen.push(m);
        if stop {
            return seen;
        }
    }
}

/// The close code the server ends with (text messages before it are skipped).
pub(crate) async fn close_code(ws: &mut Ws) -> u16 {
    loop {
        let frame = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("no close");
        match frame {
            Some(Ok(Message::Close(Some(frame)))) => return u16::from(frame.code),
            Some(Ok(Message::Close(None))) | None => panic!("closed without a code"),
            Some(Err(e)) => panic!("{e}"),
            Some(Ok(_)) => {}
        }
    }
}

/// The admin log stream at INFO, to learn when the server decided something about a
/// connection; subscribed once it answers a ping, so nothing logged after this returns is
/// missed.
pub(crate) async fn log_stream(server: &Server) -> Ws {
    let url = format!(
        "{}/ws/v1/logs?token={}&level=INFO",
        server.ws_base,
        server.token("root", true)
    );
    let mut logs = connect(&url).await;
    logs.send(Message::text("ping")).await.unwrap();
    while next(&mut logs).await["type"] != "pong" {}
    logs
}

/// The message of the next log line that holds `needle`.
pub(crate) async fn wait_for_log(logs: &mut Ws, needle: &str) -> String {
    loop {
        let line = next(logs).await;
        let message = line["message"].as_str().unwrap_or("").to_string();
        if message.contains(needle) {
            return message;
        }
    }
}

/// The number the server gave the next connection attached to session `id`.
async fn attached_conn(logs: &mut Ws, id: &str) -> String {
    let prefix = format!("session {id}: connection ");
    loop {
        let message = wait_for_log(logs, &prefix).await;
        if let Some(conn) = message
            .strip_prefix(&prefix)
            .and_then(|rest| rest.strip_suffix(" attached"))
        {
            return conn.to_owned();
        }
    }
}

pub(crate) async fn send(ws: &mut Ws, value: Value) {
    ws.send(Message::text(value.to_string())).await.unwrap();
}

pub(crate) fn is(kind: &str) -> impl Fn(&Value) -> bool + '_ {
    move |m| m["type"] == kind
}

pub(crate) fn state_is(state: &str) -> impl Fn(&Value) -> bool + '_ {
    move |m| m["type"] == "agent_state" && m["payload"]["state"] == state
}

pub(crate) fn user(text: &str) -> Value {
    json!({"type": "user_message", "payload": {"text": text, "mode": "normal"}})
}

fn assert_seq_increasing(messages: &[Value]) {
    let seqs: Vec<u64> = messages
        .iter()
        .map(|m| m["seq"].as_u64().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
}

#[tokio::test]
async fn ws_refusals_close_with_the_seed_codes() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let server = Server::start(&h, &[]).await;
    let id = open(&server, &h, &model, "alice", None).await;
    let base = &server.ws_base;
    let mut ws = connect(&format!("{base}/ws/v1/sessions/{id}")).await;
    assert_eq!(close_code(&mut ws).await, 4001, "no token");
    let mut ws = connect(&session_url(&server, &id, "not-a-jwt")).await;
    assert_eq!(close_code(&mut ws).await, 4001, "bad token");
    let mut ws = connect(&session_url(&server, &id, &server.token("bob", false))).await;
    assert_eq!(
        close_code(&mut ws).await,
        4004,
        "another owner's session is as missing"
    );
    let mut ws = connect(&session_url(&server, "nope", &server.token("alice", false))).await;
    assert_eq!(close_code(&mut ws).await, 4004, "unknown session");
    let mut ws = connect(&format!("{base}/ws/v1/logs")).await;
    assert_eq!(close_code(&mut ws).await, 4001, "logs without a token");
    let url = format!("{base}/ws/v1/logs?token={}", server.token("alice", false));
    let mut ws = connect(&url).await;
    assert_eq!(close_code(&mut ws).await, 4003, "logs are admin only");

    // The header works as well as the query, and an admin may use anyone's session.
    let mut request = format!("{base}/ws/v1/sessions/{id}")
        .into_client_request()
        .unwrap();
    let bearer = format!("Bearer {}", server.token("root", true));
    request
        .headers_mut()
        .insert("authorization", bearer.parse().unwrap());
    let (mut first, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let hello = next(&mut first).await;
    assert_eq!(hello["type"], "agent_state");
    assert_eq!(hello["payload"]["state"], "idle");
    assert_eq!(hello["session_id"], id.as_str());
    assert!(hello["ts"].as_str().unwrap().ends_with('Z'));

    // A second connection replaces the first, which is closed with 1001.
    let mut second = connect(&session_url(&server, &id, &server.token("alice", false))).await;
    assert_eq!(next(&mut second).await["payload"]["state"], "idle");
    assert_eq!(close_code(&mut first).await, 1001);
    send(&mut second, json!({"type": "ping", "payload": {}})).await;
    assert_eq!(next(&mut second).await["type"], "pong");
}

#[tokio::test]
async fn ws_full_turn_with_a_tool_call_in_order() {
    let h = Harness::new();
    std::fs::write(h.work().join("a.txt"), "hello").unwrap();
    let model = FakeModel::start().await;
    let server = Server::start(&h, &[]).await;
    let id = open(&server, &h, &model, "alice", Some("bypass")).await;
    model.push(
        Reply::new()
            .text("Let me look.")
            .tool_call("c1", "read_file", r#"{"path":"a.txt"}"#)
            .usage(1_200, 34)
            .finish("tool_calls"),
    );
    model.push(
        Reply::new()
            .text("It says")
            .text(" hello.")
            .usage(1_301, 9)
            .finish("stop"),
    );
    let mut ws = connect(&session_url(&server, &id, &server.token("alice", false))).await;
    assert_eq!(next(&mut ws).await["payload"]["state"], "idle");
    send(&mut ws, user("what is in a.txt?")).await;
    let turn = collect(&mut ws, is("done")).await;
    assert_seq_increasing(&turn);
    let kinds: Vec<String> = turn
        .iter()
        .filter(|m| m["type"] != "usage" && m["type"] != "thought")
        .map(|m| match m["type"].as_str().unwrap() {
            "agent_state" => format!("state:{}", m["payload"]["state"].as_str().unwrap()),
            other => other.to_string(),
        })
        .collect();
    let pos = |k: &str| {
        kinds
            .iter()
            .position(|x| x == k)
            .unwrap_or_else(|| panic!("{k}: {kinds:?}"))
    };
    assert_eq!(kinds[0], "state:thinking");
    assert!(pos("state:thinking") < pos("tool_start"));
    assert!(pos("tool_start") < pos("tool_end"));
    assert!(pos("tool_end") < kinds.iter().rposition(|k| k == "token").unwrap());
    assert_eq!(&kinds[kinds.len() - 2..], ["state:done", "done"]);
    let start = turn.iter().find(|m| m["type"] == "tool_start").unwrap();
    assert_eq!(start["payload"]["tool"], "read_file");
    assert_eq!(start["payload"]["tool_call_id"], "c1");
    assert_eq!(start["payload"]["input"]["path"], "a.txt");
    let end = turn.iter().find(|m| m["type"] == "tool_end").unwrap();
    assert_eq!(end["payload"]["error"], Value::Null);
    let text: String = turn
        .iter()
        .filter(|m| m["type"] == "token" && m["payload"]["final"] == true)
        .map(|m| m["payload"]["text"].as_str().unwrap())
        .collect();
    assert!(text.ends_with("It says hello."), "{text:?}");
    let done = &turn.last().unwrap()["payload"];
    assert_eq!(done["tool_calls"], 1);
    // The turn's tokens are the sums of what the model server reported for its two requests.
    assert_eq!(done["input_tokens"], 1_200 + 1_301, "{done}");
    assert_eq!(done["output_tokens"], 34 + 9, "{done}");
    assert_eq!(done["total_tokens"], 1_200 + 1_301 + 34 + 9, "{done}");
    assert_eq!(
        done["message_id"].as_str().map(str::len),
        Some(36),
        "{done}"
    );
    assert!(done["duration_ms"].is_u64(), "{done}");
}

#[tokio::test]
async fn ws_ping_pong_and_bad_messages_keep_the_connection() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let server = Server::start(&h, &[]).await;
    let id = open(&server, &h, &model, "alice", None).await;
    let mut ws = connect(&session_url(&server, &id, &server.token("alice", false))).await;
    let hello = next(&mut ws).await;
    send(&mut ws, json!({"type": "ping", "payload": {}})).await;
    let pong = next(&mut ws).await;
    assert_eq!(pong["type"], "pong");
    assert_eq!(pong["payload"], json!({}));
    assert!(pong["seq"].as_u64() > hello["seq"].as_u64());
    ws.send(Message::text("{not json")).await.unwrap();
    assert_eq!(next(&mut ws).await["payload"]["code"], "INVALID_MESSAGE");
    send(&mut ws, json!({"type": "dance", "payload": {}})).await;
    assert_eq!(next(&mut ws).await["payload"]["code"], "INVALID_MESSAGE");
    send(&mut ws, user("")).await;
    assert_eq!(next(&mut ws).await["payload"]["code"], "INVALID_MESSAGE");
    send(&mut ws, user(&"x".repeat(65_537))).await;
    assert_eq!(next(&mut ws).await["payload"]["code"], "INVALID_MESSAGE");
    send(&mut ws, json!({"type": "ping", "payload": {}})).await;
    assert_eq!(next(&mut ws).await["type"], "pong");
}

#[tokio::test]
async fn ws_silent_connections_are_dropped() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let server = Server::start(&h, &[("CORRAL_WS_IDLE_SECS", "1")]).await;
    let id = open(&server, &h, &model, "alice", None).await;
    let mut ws = connect(&session_url(&server, &id, &server.token("alice", false))).await;
    // Served first (the current state), then dropped for its silence, and said so.
    assert!(state_is("idle")(&next(&mut ws).await));
    let (code, reason) = close_frame(&mut ws, WAIT).await;
    assert_eq!(
        (code, reason.as_str()),
        (1000, "no message within the keepalive window")
    );
    let url = format!(
        "{}/ws/v1/logs?token={}",
        server.ws_base,
        server.token("root", true)
    );
    let mut logs = connect(&url).await;
    let (code, reason) = close_frame(&mut logs, WAIT).await;
    assert_eq!(
        (code, reason.as_str()),
        (1000, "no message within the keepalive window")
    );
}

#[tokio::test]
async fn ws_cancel_and_turn_in_progress() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let server = Server::start(&h, &[]).await;
    let id = open(&server, &h, &model, "alice", None).await;
    model.push(
        Reply::new()
            .text("thinking")
            .stall(Duration::from_secs(20))
            .text("never")
            .finish("stop"),
    );
    let mut ws = connect(&session_url(&server, &id, &server.token("alice", false))).await;
    next(&mut ws).await;
    send(&mut ws, user("go")).await;
    collect(&mut ws, is("token")).await;
    send(&mut ws, user("again")).await;
    let busy = collect(&mut ws, is("error")).await;
    assert_eq!(busy.last().unwrap()["payload"]["code"], "TURN_IN_PROGRESS");
    send(&mut ws, json!({"type": "cancel", "payload": {}})).await;
    let end = collect(&mut ws, is("error")).await;
    let n = end.len();
    assert!(n >= 2, "{end:?}");
    assert!(state_is("idle")(&end[n - 2]), "{end:?}");
    assert_eq!(end[n - 1]["payload"]["code"], "CANCELLED");
    assert!(end.iter().all(|m| m["type"] != "done"));
    // No done follows, and the connection serves the next turn.
    send(&mut ws, json!({"type": "ping", "payload": {}})).await;
    assert_eq!(next(&mut ws).await["type"], "pong");
    model.push(Reply::new().text("back").finish("stop"));
    send(&mut ws, user("again")).await;
    collect(&mut ws, is("done")).await;
}

#[tokio::test]
async fn ws_reconnect_with_last_seq_loses_and_repeats_nothing() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let server = Server::start(&h, &[]).await;
    let id = open(&server, &h, &model, "alice", None).await;
    let mut reply = Reply::new();
    for i in 0..30 {
        reply = reply.text(&format!("w{i} "));
    }
    model.push(reply.chunk_delay(Duration::from_millis(40)).finish("stop"));
    let token = server.token("alice", false);
    let mut logs = log_stream(&server).await;
    let mut first = connect(&session_url(&server, &id, &token)).await;
    let conn = attached_conn(&mut logs, &id).await;
    let mut seen = vec![next(&mut first).await];
    send(&mut first, user("count")).await;
    seen.extend(collect(&mut first, is("token")).await);
    seen.push(next(&mut first).await);
    drop(first); // no close handshake: a network drop
    // The server has let go of the dropped connection: the next one reconnects, it does not
    // replace a live one.
    let detached = format!("session {id}: connection {conn} detached");
    wait_for_log(&mut logs, &detached).await;
    let last = seen.last().unwrap()["seq"].as_u64().unwrap();
    let mut second = connect(&format!(
        "{}&last_seq={last}",
        session_url(&server, &id, &token)
    ))
    .await;
    seen.extend(collect(&mut second, is("done")).await);
    // The reconnect's own agent_state is new; everything else continues the old run.
    let seqs: Vec<u64> = seen.iter().map(|m| m["seq"].as_u64().unwrap()).collect();
    let mut sorted = seqs.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), seqs.len(), "duplicates: {seqs:?}");
    assert!(sorted.windows(2).all(|w| w[1] == w[0] + 1), "gap: {seqs:?}");
    let text: String = seen
        .iter()
        .filter(|m| m["type"] == "token")
        .map(|m| m["payload"]["text"].as_str().unwrap())
        .collect();
    let expected: String = (0..30).map(|i| format!("w{i} ")).collect();
    assert_eq!(text, expected);

    // A last_seq the buffer cannot serve (from the future) gives the current state only.
    let mut third = connect(&format!(
        "{}&last_seq=999999",
        session_url(&server, &id, &token)
    ))
    .await;
    let now = next(&mut third).await;
    assert_eq!(now["type"], "agent_state");
    assert_eq!(now["payload"]["state"], "idle");
}

#[tokio::test]
async fn ws_log_stream_is_admin_only_and_answers_ping() {
    let h = Harness::new();
    let server = Server::start(&h, &[]).await;
    let url = format!(
        "{}/ws/v1/logs?token={}&level=INFO",
        server.ws_base,
        server.token("root", true)
    );
    let mut logs = connect(&url).await;
    logs.send(Message::text("ping")).await.unwrap();
    assert_eq!(next(&mut logs).await, json!({"type": "pong"}));
    // A refused session socket is logged at INFO.
    let mut refused = connect(&session_url(&server, "missing", &server.token("a", false))).await;
    assert_eq!(close_code(&mut refused).await, 4004);
    let line = loop {
        let m = next(&mut logs).await;
        if m["message"].as_str().unwrap_or("").contains("missing") {
            break m;
        }
    };
    assert_eq!(line["type"], "log_line");
    assert_eq!(line["level"], "INFO");
    assert!(line.get("seq").is_none() && line.get("session_id").is_none());
    for key in ["logger", "timestamp"] {
        assert!(line[key].is_string(), "{line}");
    }
}

#[tokio::test]
async fn ws_expired_buffer_gives_current_state_and_shutdown_closes_1001() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let window = Duration::from_millis(50);
    let secs = window.as_secs_f64().to_string();
    let server = Server::start(&h, &[("CORRAL_WS_REPLAY_SECS", secs.as_str())]).await;
    let id = open(&server, &h, &model, "alice", None).await;
    let url = session_url(&server, &id, &server.token("alice", false));
    let mut logs = log_stream(&server).await;
    let mut ws = connect(&url).await;
    let conn = attached_conn(&mut logs, &id).await;
    next(&mut ws).await;
    model.push(Reply::new().text("gone soon").finish("stop"));
    send(&mut ws, user("hi")).await;
    collect(&mut ws, is("done")).await;
    drop(ws);
    // The window runs from the server's disconnect, which came before its log line: once
    // `window` has passed since the line arrived, it has passed for the server too.
    let detached = format!("session {id}: connection {conn} detached");
    wait_for_log(&mut logs, &detached).await;
    tokio::time::sleep_until(tokio::time::Instant::now() + window).await;
    let mut ws = connect(&format!("{url}&last_seq=1")).await;
    assert!(state_is("idle")(&next(&mut ws).await));
    // Nothing was replayed: the next message is the answer to this ping.
    send(&mut ws, json!({"type": "ping", "payload": {}})).await;
    assert_eq!(next(&mut ws).await["type"], "pong");
    let stopping = tokio::spawn(server.stop());
    assert_eq!(close_code(&mut ws).await, 1001);
    assert!(stopping.await.unwrap().success());
}
