//! `/ws/v1/logs?level=DEBUG`: corral's DEBUG lines reach a subscriber that asked for them,
//! and neither an INFO subscriber nor the server's stderr.

use std::process::Stdio;
use std::time::Duration;

use futures_util::SinkExt;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use tokio_tungstenite::tungstenite::Message;

use super::{Ws, close_code, connect, log_stream, next, open, send, session_url};
use crate::support::server::{Server, TEST_SECRET};
use crate::support::{FakeModel, Harness};

/// `corral serve` as `Server::start` runs it, but with stderr kept in `stderr` for reading.
async fn serve_with_stderr(h: &Harness, stderr: &std::path::Path) -> Server {
    let file = std::fs::File::create(stderr).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_corral"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", h.home_dir())
        .env("XDG_CACHE_HOME", h.cache_dir())
        .env("XDG_CONFIG_HOME", h.config_dir())
        .env("XDG_DATA_HOME", h.data_dir())
        .env("CORRAL_JWT_SECRET", TEST_SECRET)
        .env("NO_COLOR", "1")
        .args(["serve", "--listen", "127.0.0.1:0"])
        .current_dir(h.work())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(file))
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("corral serve did not start within 30 s")
        .unwrap()
        .expect("corral serve exited before listening");
    let base = line.rsplit(' ').next().unwrap().to_string();
    assert!(base.starts_with("http://127.0.0.1:"), "{line}");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Server {
        ws_base: base.replacen("http://", "ws://", 1),
        base,
        child,
        home: h.home_dir(),
    }
}

async fn debug_stream(server: &Server) -> Ws {
    let url = format!(
        "{}/ws/v1/logs?token={}&level=DEBUG",
        server.ws_base,
        server.token("root", true)
    );
    let mut logs = connect(&url).await;
    logs.send(Message::text("ping")).await.unwrap();
    while next(&mut logs).await["type"] != "pong" {}
    logs
}

/// Log lines up to and including the first whose message holds `needle`.
async fn lines_until(logs: &mut Ws, needle: &str) -> Vec<Value> {
    let mut seen = Vec::new();
    loop {
        let line = next(logs).await;
        let hit = line["message"].as_str().unwrap_or("").contains(needle);
        seen.push(line);
        if hit {
            return seen;
        }
    }
}

#[tokio::test]
async fn ws_log_stream_at_debug_gets_debug_lines_and_nobody_else_does() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let stderr = h.home_dir().join("serve.stderr");
    let server = serve_with_stderr(&h, &stderr).await;
    let mut debug = debug_stream(&server).await;
    let mut info = log_stream(&server).await;
    let id = open(&server, &h, &model, "alice", None).await;
    let mut ws = connect(&session_url(&server, &id, &server.token("alice", false))).await;
    next(&mut ws).await;
    send(&mut ws, json!({"type": "ping", "payload": {}})).await;
    assert_eq!(next(&mut ws).await["type"], "pong");

    let sent = r#"sent "ping""#;
    let line = lines_until(&mut debug, sent).await.pop().unwrap();
    assert_eq!(line["type"], "log_line");
    assert_eq!(line["level"], "DEBUG", "{line}");
    assert_eq!(line["logger"], "corral.ws", "{line}");

    // The INFO subscriber sees the next INFO line and nothing at DEBUG before it.
    let mut refused = connect(&session_url(&server, "marker-x", &server.token("a", false))).await;
    assert_eq!(close_code(&mut refused).await, 4004);
    let seen = lines_until(&mut info, "marker-x").await;
    assert!(
        seen.iter().all(|l| l["level"] != "DEBUG"),
        "DEBUG reached an INFO subscriber: {seen:?}"
    );
    // Nor did the DEBUG subscriber make stderr (RUST_LOG unset: INFO) any louder. The
    // refusal's INFO line shows stderr is written and read here.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let text = loop {
        let text = std::fs::read_to_string(&stderr).unwrap();
        if text.contains("marker-x") || tokio::time::Instant::now() > deadline {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(text.contains("marker-x"), "{text}");
    assert!(!text.contains(sent), "DEBUG on stderr: {text}");
    assert!(!text.contains(" DEBUG "), "{text}");

    // Once the DEBUG subscriber is gone, the INFO one still gets no DEBUG lines.
    drop(debug);
    send(&mut ws, json!({"type": "ping", "payload": {}})).await;
    assert_eq!(next(&mut ws).await["type"], "pong");
    let mut refused = connect(&session_url(&server, "marker-y", &server.token("a", false))).await;
    assert_eq!(close_code(&mut refused).await, 4004);
    let seen = lines_until(&mut info, "marker-y").await;
    assert!(seen.iter().all(|l| l["level"] != "DEBUG"), "{seen:?}");
}
