//! The server under slow and hostile clients: a WebSocket client that stops reading (a tiny
//! receive buffer, nothing read) during a big streamed answer, oversized and invalid frames,
//! and the REST status read while turns start and end.

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio_tungstenite::MaybeTlsStream;
use tokio_tungstenite::tungstenite::Message;

use crate::server_rest::client::Api;
use crate::server_ws::{
    Ws, close_code, collect, connect, is, log_stream, next, open, send, session_url, user,
    wait_for_log,
};
use crate::support::server::Server;
use crate::support::{FakeModel, Harness, Reply};

/// Text per streamed chunk: distinct, so a replay that loses or repeats one shows.
fn chunk(i: usize) -> String {
    format!("{i:07}:{}\n", "x".repeat(990))
}

fn answer(chunks: usize) -> (Reply, String) {
    let mut reply = Reply::new();
    let mut text = String::new();
    for i in 0..chunks {
        let c = chunk(i);
        reply = reply.text(&c);
        text.push_str(&c);
    }
    (reply.finish("stop"), text)
}

/// A WebSocket client whose socket receives into a 4 KB buffer.
async fn slow_client(server: &Server, url: &str) -> Ws {
    let addr = server.base.trim_start_matches("http://").parse().unwrap();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let tcp = socket.connect(addr).await.unwrap();
    let (ws, _) = tokio_tungstenite::client_async(url, MaybeTlsStream::Plain(tcp))
        .await
        .unwrap();
    ws
}

fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib / 1024.0
}

/// Polls `GET /sessions/{id}` (up to 120 s) until the turn `turn` is over.
async fn wait_turn_over(api: &Api, id: &str, turn: u64, mut each: impl FnMut()) {
    let path = format!("/api/v1/sessions/{id}");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        each();
        let (status, session) = api.call(Method::GET, &path, None).await;
        assert_eq!(status, StatusCode::OK, "{session}");
        if session["status"] == "idle" && session["turn"] == turn {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "turn {turn} never ended: {session}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Once the session's consumers (projection, log writer, event bus) have worked off a stream,
/// what is left is what is kept: polls (up to 60 s) until RSS is within `bound` MiB of
/// `before`, and returns the last reading.
async fn settled_rss(pid: u32, before: f64, bound: f64) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut after = rss_mib(pid);
    while after - before >= bound && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        after = rss_mib(pid);
    }
    after
}

fn api_for(server: Server) -> Api {
    let token = server.token("alice", false);
    Api {
        server,
        http: reqwest::Client::new(),
        token,
    }
}

/// Messages until the close frame, and its code.
async fn drain_to_close(ws: &mut Ws) -> (Vec<Value>, u16) {
    let mut seen = Vec::new();
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(60), ws.next())
            .await
            .expect("neither a message nor a close within 60 s");
        match frame {
            Some(Ok(Message::Text(text))) => {
                seen.push(serde_json::from_str(text.as_str()).unwrap())
            }
            Some(Ok(Message::Close(Some(frame)))) => return (seen, u16::from(frame.code)),
            Some(Ok(Message::Close(None))) | None => panic!("closed without a code"),
            Some(Err(e)) => panic!("{e}"),
            Some(Ok(_)) => {}
        }
    }
}

fn tokens(messages: &[Value]) -> String {
    messages
        .iter()
        .filter(|m| m["type"] == "token")
        .map(|m| m["payload"]["text"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn a_client_that_stops_reading_is_closed_1013_and_server_memory_stays_bounded() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    // Long enough that a loaded machine still gets the close frame out once the client reads.
    let server = Server::start(&h, &[("CORRAL_WS_SEND_SECS", "120")]).await;
    let pid = server.child.id().unwrap();
    let id = open(&server, &h, &model, "alice", None).await;
    let token = server.token("alice", false);
    let mut logs = log_stream(&server).await;
    let mut slow = slow_client(&server, &session_url(&server, &id, &token)).await;
    assert_eq!(next(&mut slow).await["payload"]["state"], "idle");
    let before = rss_mib(pid);
    // 96 MB of tokens the client never reads while they stream.
    let (reply, _) = answer(96_000);
    model.push(reply);
    send(&mut slow, user("stream a lot")).await;
    let closing = wait_for_log(&mut logs, "fell behind").await;
    assert!(closing.contains("1013"), "{closing}");
    let api = api_for(server);
    let mut peak = before;
    wait_turn_over(&api, &id, 1, || peak = peak.max(rss_mib(pid))).await;
    let after = settled_rss(pid, before, 96.0 + 64.0).await;
    // The client reads again: what was in flight, then the documented close.
    let (seen, code) = drain_to_close(&mut slow).await;
    assert_eq!(code, 1013);
    assert!(
        tokens(&seen).len() < 16 << 20,
        "{} bytes",
        tokens(&seen).len()
    );
    eprintln!("serve RSS: {before:.1} MiB before, {peak:.1} peak, {after:.1} after");
    assert!(
        after - before < 96.0 + 64.0,
        "serve RSS grew {before:.1} → {after:.1} MiB for a 96 MB answer"
    );
}

/// A 96 MB answer, nobody attached: the conversation keeps it once; the replay rings let go
/// of its envelope and JSON once newer envelopes follow (the log has it).
#[tokio::test]
async fn a_big_answer_is_kept_once_after_its_turn() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let server = Server::start(&h, &[]).await;
    let pid = server.child.id().unwrap();
    let id = open(&server, &h, &model, "alice", None).await;
    let api = api_for(server);
    let before = rss_mib(pid);
    let (reply, expected) = answer(96_000);
    model.push(reply);
    let (status, _) = api.send(&id, "stream a lot").await;
    assert_eq!(status, StatusCode::ACCEPTED);
    wait_turn_over(&api, &id, 1, || {}).await;
    let after = settled_rss(pid, before, 96.0 + 48.0).await;
    eprintln!("serve RSS: {before:.1} MiB before, {after:.1} after a 96 MB answer");
    assert!(
        after - before < 96.0 + 48.0,
        "serve RSS grew {before:.1} → {after:.1} MiB for a 96 MB answer"
    );
    // Nothing lost: the history still has the whole answer (from the log).
    let path = format!("/api/v1/sessions/{id}/messages");
    let (_, body) = api.call(Method::GET, &path, None).await;
    let answer = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .map(|m| m["text"].as_str().unwrap().len());
    assert_eq!(answer, Some(expected.len()));
}

#[tokio::test]
async fn a_slow_client_reconnects_with_last_seq_and_gets_the_exact_rest() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let server = Server::start(&h, &[("CORRAL_WS_SEND_SECS", "120")]).await;
    let id = open(&server, &h, &model, "alice", None).await;
    let token = server.token("alice", false);
    let url = session_url(&server, &id, &token);
    let mut logs = log_stream(&server).await;
    let mut slow = slow_client(&server, &url).await;
    let hello = next(&mut slow).await;
    // 10 MB: more than a client may fall behind, less than the session's buffer; paced, so
    // the turn is still streaming when the second client comes.
    let (reply, expected) = answer(10_000);
    model.push(reply.chunk_delay(Duration::from_millis(1)));
    send(&mut slow, user("stream")).await;
    wait_for_log(&mut logs, "fell behind").await;
    let (mut seen, code) = drain_to_close(&mut slow).await;
    assert_eq!(code, 1013);
    seen.insert(0, hello);
    let last = seen.last().unwrap()["seq"].as_u64().unwrap();
    assert!(
        tokens(&seen).len() < expected.len(),
        "the slow client got everything"
    );

    // A second client on the session meanwhile is served at once, to the end of the turn.
    let mut other = connect(&url).await;
    let now = next(&mut other).await;
    assert_eq!(now["type"], "agent_state");
    if now["payload"]["state"] != "idle" {
        let live = collect(&mut other, is("done")).await;
        assert!(
            expected.ends_with(&tokens(&live)),
            "the second client's tokens"
        );
    }
    send(&mut other, json!({"type": "ping", "payload": {}})).await;
    collect(&mut other, is("pong")).await;
    let api = api_for(server);
    wait_turn_over(&api, &id, 1, || {}).await;

    // The reconnect replays exactly what the slow client missed, then the current state.
    let mut again = connect(&format!("{url}&last_seq={last}")).await;
    let rest = collect(&mut again, is("done")).await;
    assert_eq!(
        close_code(&mut other).await,
        1001,
        "replaced by the reconnect"
    );
    let all: Vec<Value> = seen.iter().chain(&rest).cloned().collect();
    let seqs: Vec<u64> = all.iter().map(|m| m["seq"].as_u64().unwrap()).collect();
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "gap or repeat in {:?}…",
        &seqs[..seqs.len().min(50)]
    );
    assert!(
        tokens(&all) == expected,
        "the replayed answer differs ({} bytes of {})",
        tokens(&all).len(),
        expected.len()
    );
}

#[tokio::test]
async fn oversized_messages_close_1009_and_invalid_utf8_closes_1007() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let server = Server::start(&h, &[]).await;
    let id = open(&server, &h, &model, "alice", None).await;
    let url = session_url(&server, &id, &server.token("alice", false));
    let mut logs = log_stream(&server).await;

    let mut ws = connect(&url).await;
    next(&mut ws).await;
    let huge = json!({"type": "ping", "payload": {"pad": "x".repeat(2 << 20)}});
    // The server closes as soon as the frame is over the limit, while the client may still be
    // writing it: the rest it never reads makes the kernel reset the connection, and the
    // client then sees a reset instead of the close frame. The server's log says how it
    // closed either way; the frame is checked whenever it arrives.
    if ws.send(Message::text(huge.to_string())).await.is_ok() {
        match tokio::time::timeout(Duration::from_secs(30), ws.next()).await {
            Ok(Some(Ok(Message::Close(Some(frame))))) => assert_eq!(u16::from(frame.code), 1009),
            Ok(Some(Err(_))) | Ok(None) => {}
            other => panic!("neither the close frame nor a reset: {other:?}"),
        }
    }
    let closed = wait_for_log(&mut logs, "closed with").await;
    assert!(closed.contains("closed with 1009"), "{closed}");

    // A text frame with bytes that are not UTF-8, written raw (the client library refuses).
    let mut ws = connect(&url).await;
    next(&mut ws).await;
    let frame = tokio_tungstenite::tungstenite::protocol::frame::Frame::message(
        vec![b'{', 0xff, 0xfe, b'}'],
        tokio_tungstenite::tungstenite::protocol::frame::coding::OpCode::Data(
            tokio_tungstenite::tungstenite::protocol::frame::coding::Data::Text,
        ),
        true,
    );
    ws.send(Message::Frame(frame)).await.unwrap();
    assert_eq!(close_code(&mut ws).await, 1007);

    // The session is fine: a new connection works.
    let mut ws = connect(&url).await;
    next(&mut ws).await;
    send(&mut ws, json!({"type": "ping", "payload": {}})).await;
    assert_eq!(next(&mut ws).await["type"], "pong");
}

/// `GET /sessions/{id}` while turns start and end, from several pollers at once: a session
/// shown `idle` with turn N has finished turn N, so a message sent then is never refused.
#[tokio::test]
async fn the_session_status_and_turn_are_one_snapshot() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let server = Server::start(&h, &[]).await;
    let id = open(&server, &h, &model, "alice", None).await;
    let api = std::sync::Arc::new(api_for(server));
    const TURNS: u64 = 300;
    for _ in 0..TURNS {
        model.push(Reply::new().text("ok").finish("stop"));
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let path = format!("/api/v1/sessions/{id}");
    let pollers: Vec<_> = (0..6)
        .map(|_| {
            let (api, stop, path) = (api.clone(), stop.clone(), path.clone());
            tokio::spawn(async move {
                let mut seen = Vec::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let (_, s) = api.call(Method::GET, &path, None).await;
                    seen.push((
                        s["status"].as_str().unwrap().to_string(),
                        s["turn"].as_u64().unwrap(),
                    ));
                }
                seen
            })
        })
        .collect();
    let mut refused = Vec::new();
    for turn in 1..=TURNS {
        let (status, body) = api.send(&id, "go").await;
        if status != StatusCode::ACCEPTED {
            refused.push((turn, body));
            break;
        }
        assert_eq!(body["turn"], turn);
        // Right after the 202 the turn shows as running, never as the previous one idle.
        let (_, now) = api.call(Method::GET, &path, None).await;
        assert!(
            now["status"] != "idle" || now["turn"] == turn,
            "turn {turn} accepted, then shown as {now}"
        );
        wait_turn_over(&api, &id, turn, || {}).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(refused.is_empty(), "refused after idle: {refused:?}");
    for poller in pollers {
        let seen = poller.await.unwrap();
        // Within one poller, time runs forward: once turn N was shown idle, it never runs.
        let mut idle_seen = 0;
        for (status, turn) in &seen {
            if status == "idle" {
                idle_seen = idle_seen.max(*turn);
            } else if status == "working" || status == "waiting_approval" {
                assert!(
                    *turn > idle_seen,
                    "turn {turn} shown {status} after it was shown idle"
                );
            }
        }
    }
}
