//! Credential vouchers (issue 23): the real claude and codex never hold the real API key.
//! Their environment, `/proc/<pid>/environ`, the files under the test's HOME (their config,
//! corral's logs) and the event log hold a voucher at most; the fake upstream receives the
//! real key; the proxy answers 401 to a wrong or revoked voucher and forwards only API paths.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::common::{mcp_call, mcp_wait_turn, procs_in, wait_until};
use crate::external_claude::{claude_mcp_keyed, open_claude};
use crate::external_codex::{codex_program, codex_run};
use crate::support::{FakeModel, Harness, Reply};

/// A key nobody could guess, so finding it anywhere is a leak.
fn real_key(prefix: &str) -> String {
    format!("{prefix}-REAL-{:016x}", fastrand::u64(..))
}

/// The environments of the processes working in `root` whose command line has `needle`.
fn environs_in(root: &Path, needle: &str) -> Vec<String> {
    procs_in(root, needle)
        .into_iter()
        .filter_map(|(dir, _)| std::fs::read(dir.join("environ")).ok())
        .map(|environ| String::from_utf8_lossy(&environ).replace('\0', "\n"))
        .collect()
}

fn env_value<'a>(environ: &'a str, name: &str) -> Option<&'a str> {
    environ
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix('='))
}

/// Every file under `dir` whose bytes contain `needle`.
fn files_holding(dir: &Path, needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file()
                && std::fs::read(&path)
                    .is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle.as_bytes()))
            {
                found.push(path.display().to_string());
            }
        }
    }
    found
}

async fn post(url: &str, key: &str) -> u16 {
    reqwest::Client::new()
        .post(url)
        .header("x-api-key", key)
        .header("content-type", "application/json")
        .body(r#"{"model":"fake-model","max_tokens":8,"messages":[]}"#)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test]
async fn claude_runs_on_a_voucher_that_dies_with_its_session() {
    let h = Harness::new();
    let real = real_key("sk-ant");
    let server = FakeModel::start().await;
    server.push(Reply::new().text("HELLO THROUGH THE PROXY"));
    let mut running = claude_mcp_keyed(&h, &server, &real).await;
    let agent = open_claude(&mut running, &h).await;
    mcp_call(
        &mut running,
        2,
        "agent_send",
        json!({"agent_id": agent, "text": "hello"}),
    )
    .await;
    let turn = mcp_wait_turn(&mut running, &agent, 1, 100).await;
    assert_eq!(turn["text"], "HELLO THROUGH THE PROXY", "{turn}");

    // The upstream got the real key; claude holds only the voucher.
    let request = server
        .requests()
        .into_iter()
        .find(|r| r.path.starts_with("/v1/messages"))
        .expect("claude sent no message request");
    assert_eq!(request.header("x-api-key"), Some(real.as_str()));
    let environs = environs_in(&h.work(), "stream-json");
    assert_eq!(environs.len(), 1, "{environs:?}");
    let environ = &environs[0];
    assert!(
        !environ.contains(&real),
        "the real key is in claude's environ"
    );
    let voucher = env_value(environ, "ANTHROPIC_API_KEY").unwrap().to_owned();
    assert!(voucher.starts_with("corral-voucher-"), "{voucher}");
    let proxy = env_value(environ, "ANTHROPIC_BASE_URL").unwrap().to_owned();
    assert!(proxy.starts_with("http://127.0.0.1:"), "{proxy}");
    assert_ne!(proxy, server.base_url());

    // The proxy: a wrong voucher is refused, a path outside the API is not forwarded.
    let asked = server.requests().len();
    let messages = format!("{proxy}/v1/messages");
    assert_eq!(post(&messages, "corral-voucher-0000").await, 401);
    assert_eq!(post(&format!("{proxy}/v1/files"), &voucher).await, 403);
    assert_eq!(
        post(&format!("{proxy}/v1/models/../../admin"), &voucher).await,
        403
    );
    assert_eq!(
        server.requests().len(),
        asked,
        "a refused request reached upstream"
    );

    // Closed, the session's voucher is revoked while corral (and its proxy) goes on.
    mcp_call(&mut running, 300, "agent_close", json!({"agent_id": agent})).await;
    wait_until("claude outlived its session", || {
        environs_in(&h.work(), "stream-json").is_empty()
    })
    .await;
    assert_eq!(post(&messages, &voucher).await, 401);
    assert_eq!(server.requests().len(), asked);

    // corral made itself undumpable for the keys' sake; its own tools still start in their
    // sandbox (the helper is a fresh exec) and are held to it.
    let outside = tempfile::tempdir().unwrap();
    let local = FakeModel::start().await;
    let command = format!(
        "echo in > inside.txt; echo out > {}/escaped.txt",
        outside.path().display()
    );
    let args = json!({ "command": command }).to_string();
    local.push(Reply::new().tool_call("c1", "shell", &args));
    local.push(Reply::new().text("done"));
    let open = json!({"cwd": h.work(), "model": "llamacpp:fake-model",
                      "base_url": local.openai_base(), "permission": "bypass"});
    let native = mcp_call(&mut running, 400, "agent_open", open).await;
    let native = native["agent_id"].as_str().unwrap().to_owned();
    let send = json!({"agent_id": native, "text": "go"});
    mcp_call(&mut running, 401, "agent_send", send).await;
    mcp_wait_turn(&mut running, &native, 1, 500).await;
    assert!(h.work().join("inside.txt").exists());
    assert!(!outside.path().join("escaped.txt").exists());
    running.close_stdin();
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(!out.stdout.contains(&real) && !out.stderr.contains(&real));
    let leaks = files_holding(&h.home_dir(), &real);
    assert!(leaks.is_empty(), "the real key was written to {leaks:?}");
}

#[tokio::test]
async fn codex_runs_on_a_voucher_and_never_sees_the_key() {
    let program = codex_program();
    let h = Harness::new();
    let real = real_key("sk-proj");
    let server = FakeModel::start().await;
    // Long enough for the test to read codex's environment while it waits on the model.
    server.push(
        Reply::new()
            .stall(Duration::from_secs(3))
            .text("HELLO THROUGH THE PROXY"),
    );
    let running = codex_run(&h, &server, &program)
        .env("FAKE_API_KEY", &real)
        .arg("hello")
        .spawn()
        .await;
    wait_until("codex never started", || {
        !environs_in(&h.work(), "app-server").is_empty()
    })
    .await;
    let environs = environs_in(&h.work(), "app-server");
    for environ in &environs {
        assert!(
            !environ.contains(&real),
            "the real key is in codex's environ"
        );
        let voucher = env_value(environ, "FAKE_API_KEY").unwrap();
        assert!(voucher.starts_with("corral-voucher-"), "{voucher}");
    }
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("HELLO THROUGH THE PROXY"), "{out:?}");
    let request = server
        .requests()
        .into_iter()
        .find(|r| r.path.ends_with("/responses"))
        .expect("codex sent no request");
    assert_eq!(
        request.header("authorization"),
        Some(format!("Bearer {real}").as_str())
    );
    assert!(!out.stdout.contains(&real) && !out.stderr.contains(&real));
    let leaks = files_holding(&h.home_dir(), &real);
    assert!(leaks.is_empty(), "the real key was written to {leaks:?}");
}
