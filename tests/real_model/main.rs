//! The real-model tier: corral against llama.cpp's server running SmolLM2-135M (installed by
//! scripts/install-local-model). Slow (tens of seconds per test on 2 cores), so it is its own
//! test target. Plain `cargo test` runs it as it is: every test holds [`ONE_AT_A_TIME`] while
//! it runs, since each starts a model server of its own and two of them loading at once on two
//! cores only make both late (the health wait and the turn timeouts would fail instead). Each
//! test still owns its server, port and directories, and checks only the processes it started,
//! so nothing but that lock orders them.
//! Assertions are about protocol and shape, never the 135M model's wording.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../it/support/mod.rs"]
mod support;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use support::procs::{members, tracked};
use support::{Harness, Outcome};

/// Held by every test for its whole run (see the module doc). A tokio mutex: it is held across
/// awaits, each test has its own runtime, and a failed test's guard is released on unwind.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn data_dir() -> PathBuf {
    std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".local/share")
        })
        .join("corral")
}

fn model() -> PathBuf {
    let path = data_dir().join("models/SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(
        path.is_file(),
        "{} is missing: run scripts/install-local-model",
        path.display()
    );
    path
}

fn server_bin() -> PathBuf {
    let path = data_dir().join("llama-server/bin/llama-server");
    assert!(
        path.is_file(),
        "{} is missing: run scripts/install-local-model",
        path.display()
    );
    path
}

/// A llama-server the test owns (for /slots), killed on drop.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    async fn start() -> Server {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let template = concat!(env!("CARGO_MANIFEST_DIR"), "/templates/chatml-tools.jinja");
        let child = Command::new(server_bin())
            .args(["--model"])
            .arg(model())
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args([
                "--ctx-size",
                "8192",
                "--parallel",
                "2",
                "--threads",
                "1",
                "--jinja",
            ])
            .args(["--chat-template-file", template])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start llama-server");
        let server = Server { child, port };
        let client = reqwest::Client::new();
        for _ in 0..600 {
            if let Ok(r) = client.get(server.url("/health")).send().await
                && r.status().is_success()
            {
                return server;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("llama-server did not become healthy in 60 s");
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    async fn slots_busy(&self) -> usize {
        let slots: Value = reqwest::get(self.url("/slots"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        slots
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["is_processing"] == true)
            .count()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A 135M model rambles: keep replies short so each test takes seconds, not minutes.
const CONFIG: &str = "max_tokens = 160\ntemperature = 0.0\n";

/// `corral run --json` against the test's server, three read tools only (a short prompt).
fn against(h: &Harness, server: &Server, prompt: &str) -> support::Cmd {
    h.write_config(CONFIG);
    h.corral()
        .args([
            "run",
            "--json",
            "-p",
            "readonly",
            "-m",
            "llamacpp:smollm2",
            "--base-url",
        ])
        .arg(server.url("/v1"))
        .arg(prompt)
        .timeout(Duration::from_secs(240))
}

fn result_of(out: &Outcome) -> Value {
    out.of_kind("result")
        .last()
        .cloned()
        .expect("a result event")["data"]
        .clone()
}

fn deltas(out: &Outcome) -> usize {
    out.of_kind("assistant_text")
        .iter()
        .filter(|e| e["data"]["delta"] == true)
        .count()
}

#[tokio::test]
async fn streamed_text_with_usage_counted() {
    let _one = ONE_AT_A_TIME.lock().await;
    let server = Server::start().await;
    let h = Harness::new();
    let out = against(&h, &server, "Say hello in one short sentence.")
        .args(["--tool-choice", "none"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(deltas(&out) >= 2, "text streamed in chunks: {out:?}");
    let usage = &result_of(&out)["usage"];
    assert!(usage["inputTokens"].as_u64().unwrap() > 50, "{usage}");
    assert!(usage["outputTokens"].as_u64().unwrap() > 0, "{usage}");
}

#[tokio::test]
async fn a_forced_tool_call_runs_and_its_result_goes_back() {
    let _one = ONE_AT_A_TIME.lock().await;
    let server = Server::start().await;
    let h = Harness::new();
    std::fs::write(h.work().join("README.md"), "# demo\n").unwrap();
    let out = against(&h, &server, "List the files in the current directory.")
        .args(["--tool-choice", "first-required", "--max-steps", "3"])
        .run()
        .await;
    assert!(matches!(out.code, Some(0) | Some(1)), "{out:?}");
    let uses: Vec<Value> = out
        .of_kind("tool_use")
        .into_iter()
        .filter(|e| e["data"]["call"].get("rawInput").is_some())
        .collect();
    assert!(!uses.is_empty(), "the first step is a tool call: {out:?}");
    assert!(!out.of_kind("tool_result").is_empty());
    // A second model step happened: the result went back to the model.
    assert!(out.of_kind("usage").len() >= 2, "{out:?}");
}

#[tokio::test]
async fn cancelling_mid_stream_frees_the_servers_slot() {
    let _one = ONE_AT_A_TIME.lock().await;
    let server = Server::start().await;
    let h = Harness::new();
    let running = against(
        &h,
        &server,
        "Write a very long story about a dragon, at least 500 words.",
    )
    .args(["--tool-choice", "none"])
    .spawn()
    .await;
    running
        .wait_for_event(0, |e| {
            e["kind"] == "assistant_text" && e["data"]["delta"] == true
        })
        .await;
    assert_eq!(server.slots_busy().await, 1, "generating");
    running.sigint().await;
    let out = running.wait().await;
    assert_eq!(out.code, Some(130), "{out:?}");
    assert_eq!(result_of(&out)["stopReason"], "cancelled");
    let mut busy = 1;
    for _ in 0..30 {
        busy = server.slots_busy().await;
        if busy == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(busy, 0, "the slot was freed when corral closed the stream");
}

#[tokio::test]
async fn two_sessions_at_once_share_the_server() {
    let _one = ONE_AT_A_TIME.lock().await;
    let server = Server::start().await;
    let (h1, h2) = (Harness::new(), Harness::new());
    let a = against(&h1, &server, "Say one word.")
        .args(["--tool-choice", "none"])
        .spawn()
        .await;
    let b = against(&h2, &server, "Say two words.")
        .args(["--tool-choice", "none"])
        .spawn()
        .await;
    let (a, b) = tokio::join!(a.wait(), b.wait());
    for out in [&a, &b] {
        assert_eq!(out.code, Some(0), "{out:?}");
        assert_eq!(result_of(out)["stopReason"], "end_turn");
    }
    assert_ne!(a.events()[0]["agent"], b.events()[0]["agent"]);
}

#[tokio::test]
async fn gguf_models_get_a_server_corral_starts_uses_and_stops() {
    let _one = ONE_AT_A_TIME.lock().await;
    let h = Harness::new();
    let model = model();
    std::fs::write(h.work().join("notes.txt"), "hi\n").unwrap();
    h.write_config(CONFIG);
    // One step, and it must be a tool call: the turn then always ends at the step limit
    // (exit 1, max_steps), whatever the model would have said next.
    let running = h
        .corral()
        .args([
            "run",
            "--json",
            "-p",
            "readonly",
            "--tool-choice",
            "first-required",
            "--max-steps",
            "1",
        ])
        .arg("-m")
        .arg(format!("gguf:{}", model.display()))
        .arg("list the files here")
        .env("XDG_DATA_HOME", data_dir().parent().unwrap())
        .timeout(Duration::from_secs(240))
        .spawn()
        .await;
    // The server THIS run started: the model-server entry its corral wrote to the harness's
    // own pids.json, checked to be a llama-server for this model.
    let pids = h.cache_dir().join("corral/agents/pids.json");
    let owner = running.pid();
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let server = loop {
        let found = tracked(&pids)
            .into_iter()
            .find(|e| e["kind"] == "model-server" && e["owner_pid"] == owner);
        if let Some(entry) = found {
            break entry;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "corral never recorded a model server: {:?}",
            running.events_so_far()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let (pid, pgid) = (
        server["pid"].as_u64().unwrap() as u32,
        server["pgid"].as_u64().unwrap() as u32,
    );
    assert_eq!(
        pid, pgid,
        "the server leads its own process group: {server}"
    );
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let cmdline = String::from_utf8_lossy(&cmdline);
    assert!(
        cmdline.contains("llama") && cmdline.contains(&*model.to_string_lossy()),
        "{pid} is not this run's llama-server: {cmdline}"
    );
    let out = running.wait().await;
    let left = members(pgid);
    for pid in &left {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    assert_eq!(out.code, Some(1), "{out:?}");
    assert_eq!(result_of(&out)["stopReason"], "max_steps", "{out:?}");
    assert!(
        out.stderr.contains("llama-server ready on 127.0.0.1:"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("ChatML tool template"),
        "{}",
        out.stderr
    );
    assert!(!out.of_kind("tool_result").is_empty(), "{out:?}");
    assert!(result_of(&out)["usage"]["inputTokens"].as_u64().unwrap() > 0);
    assert_eq!(
        left,
        Vec::<u32>::new(),
        "the server's group outlived corral"
    );
    let tracked_now = tracked(&pids);
    assert!(
        tracked_now.is_empty(),
        "nothing left tracked: {tracked_now:?}"
    );
}

/// The README's main job as corral runs it: its own server with one slot (the whole 8192-token
/// context), so the compact prompt under `auto`, and the second step evaluating only what the
/// first did not (the server's prompt cache, reported as `cacheReadTokens`).
#[tokio::test]
async fn a_gguf_turn_sends_the_compact_prompt_and_reuses_the_prompt_cache() {
    let _one = ONE_AT_A_TIME.lock().await;
    let h = Harness::new();
    std::fs::write(h.work().join("notes.txt"), "hi\n").unwrap();
    h.write_config(CONFIG);
    let out = h
        .corral()
        .args([
            "run",
            "--json",
            "--tool-choice",
            "first-required",
            "--max-steps",
            "2",
        ])
        .arg("-m")
        .arg(format!("gguf:{}", model().display()))
        .arg("list the files here")
        .env("XDG_DATA_HOME", data_dir().parent().unwrap())
        .timeout(Duration::from_secs(300))
        .run()
        .await;
    let usage = out.of_kind("usage");
    assert!(usage.len() >= 2, "two steps, two usage events: {out:?}");
    let first = &usage[0]["data"];
    assert_eq!(
        first["contextWindow"], 8192,
        "one slot has the whole context"
    );
    let first_prompt = first["usage"]["inputTokens"].as_u64().unwrap();
    // The system prompt, every offered tool and the chat template around them, counted by the
    // model's own tokenizer; the four-word prompt is in it too.
    assert!(
        first_prompt <= 1500,
        "the compact first request is {first_prompt} tokens"
    );
    let second = &usage[1]["data"]["usage"];
    let cached = second["cacheReadTokens"].as_u64().unwrap();
    assert!(
        cached * 10 >= first_prompt * 9,
        "the second step re-evaluated what the first had: {cached} of {first_prompt} cached"
    );
}

#[tokio::test]
async fn a_server_that_cannot_start_reports_its_last_lines() {
    let _one = ONE_AT_A_TIME.lock().await;
    let h = Harness::new();
    let bogus = h.work().join("broken.gguf");
    // A GGUF header with no tensors: the server refuses to load it.
    let mut bytes = b"GGUF".to_vec();
    bytes.extend(3u32.to_le_bytes());
    bytes.extend(0u64.to_le_bytes());
    bytes.extend(0u64.to_le_bytes());
    std::fs::write(&bogus, bytes).unwrap();
    let out = h
        .corral()
        .args(["run", "-m"])
        .arg(format!("gguf:{}", bogus.display()))
        .arg("x")
        .env("XDG_DATA_HOME", data_dir().parent().unwrap())
        .timeout(Duration::from_secs(120))
        .run()
        .await;
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr.contains("llama-server exited during start-up"),
        "{}",
        out.stderr
    );
}
