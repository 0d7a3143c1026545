//! server-everything over HTTP: streamable HTTP (`/mcp`) and the legacy SSE transport
//! (`/sse`), each a real server process on 127.0.0.1.

use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};

use super::basics::{mcp_config, run_with, server_bin};
use crate::common::tool_results;
use crate::support::Harness;

/// Starts server-everything in `mode` on a free port; returns it with the port once it
/// says it listens.
async fn everything_http(mode: &str) -> (tokio::process::Child, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = tokio::process::Command::new(server_bin("mcp-server-everything"))
        .arg(mode)
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut out_lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let listening = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            tokio::select! {
                Ok(Some(line)) = lines.next_line() => if says_listening(&line) { return; },
                Ok(Some(line)) = out_lines.next_line() => if says_listening(&line) { return; },
                else => return,
            }
        }
    })
    .await;
    assert!(listening.is_ok(), "server-everything {mode} did not start");
    // Keep draining so the server never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    tokio::spawn(async move { while let Ok(Some(_)) = out_lines.next_line().await {} });
    (child, port)
}

/// "listening on port N" (streamable HTTP) or "Server is running on port N" (SSE).
fn says_listening(line: &str) -> bool {
    line.contains("listening") || line.contains("running on port")
}

#[tokio::test]
async fn a_streamable_http_server_and_a_legacy_sse_server_both_serve_tools() {
    let (_http, http_port) = everything_http("streamableHttp").await;
    let (_sse, sse_port) = everything_http("sse").await;
    let h = Harness::new();
    let config = mcp_config(
        &h,
        json!({
            "web": {"url": format!("http://127.0.0.1:{http_port}/mcp"),
                    "headers": {"X-Test": "yes"}},
            "old": {"type": "sse", "url": format!("http://127.0.0.1:{sse_port}/sse")},
        }),
    );
    let (out, _) = run_with(
        &h,
        &config,
        "bypass",
        &[
            ("web__echo", json!({"message": "over streamable http"})),
            ("old__echo", json!({"message": "over legacy sse"})),
            (
                "web__trigger-long-running-operation",
                json!({"duration": 1, "steps": 2}),
            ),
        ],
    )
    .await;
    let results = tool_results(&out);
    assert_eq!(results.len(), 3, "{}", out.stdout);
    assert!(
        results[0].to_string().contains("over streamable http"),
        "{results:?}"
    );
    assert!(
        results[1].to_string().contains("over legacy sse"),
        "{results:?}"
    );
    let progress = super::basics::streamed(&out);
    assert!(progress.contains("progress 2/2"), "{progress:?}");
}

#[tokio::test]
async fn an_unreachable_http_server_is_an_error_naming_it_and_the_session_goes_on() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let h = Harness::new();
    let config = mcp_config(
        &h,
        json!({"gone": {"url": format!("http://127.0.0.1:{port}/mcp"),
                        "startup_timeout_secs": 3}}),
    );
    let (out, _) = run_with(&h, &config, "bypass", &[]).await;
    assert!(
        super::basics::said_error(&out, "MCP server gone failed to start"),
        "{}",
        out.stdout
    );
    assert_eq!(crate::common::result_of(&out)["stopReason"], "end_turn");
}
