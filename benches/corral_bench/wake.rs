//! Wake latency (issue 23): from a message to the model request it causes, for a claude that
//! the session manager put to sleep (its process stopped, started again on `--resume`) against
//! one whose process is already up (a session's first message), and for a per-turn runtime
//! (qwen-code, a new process on `--resume` for every message). Real programs, the fake model
//! server, `corral mcp` as the client drives it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::support::{FakeModel, Harness, Reply, Running};
use super::{Row, median};

const RUNS: usize = 5;

/// The claude scripts/install-agent-clis installs, or `$CORRAL_CLAUDE`.
fn claude() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("CORRAL_CLAUDE") {
        return Some(PathBuf::from(path));
    }
    let path = PathBuf::from(std::env::var_os("HOME")?)
        .join(".cache/corral-ci/agent-clis/node_modules/.bin/claude");
    path.exists().then_some(path)
}

async fn call(running: &mut Running, id: u64, tool: &str, args: Value) -> Value {
    let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                      "params": {"name": tool, "arguments": args}});
    running.send_line(&call.to_string()).await;
    let answer = running.wait_for_event(0, |m| m["id"] == id).await;
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("");
    serde_json::from_str(text).unwrap_or(Value::Null)
}

/// The MCP handshake with a `corral mcp` just started.
async fn initialize(running: &mut Running) {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "corral-bench", "version": "0"}}});
    running.send_line(&init.to_string()).await;
    running.wait_for_event(0, |m| m["id"] == 0).await;
    running
        .send_line(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await;
}

/// Whether a claude process works in `root`.
fn claude_up(root: &Path) -> bool {
    let root = root.canonicalize().unwrap();
    std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
        let dir = entry.path();
        std::fs::read(dir.join("cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains("stream-json"))
            && std::fs::read_link(dir.join("cwd")).is_ok_and(|cwd| cwd == root)
    })
}

async fn until(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !cond() {
        assert!(Instant::now() < deadline, "wake bench: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Sends a message and returns how long until its model request arrived; waits for the turn.
async fn timed_message(
    running: &mut Running,
    server: &FakeModel,
    agent: &str,
    id: u64,
    turn: u64,
) -> f64 {
    let asked = server.chat_times().len();
    let sent = Instant::now();
    call(
        running,
        id,
        "agent_send",
        json!({"agent_id": agent, "text": "go on"}),
    )
    .await;
    until("no model request", || server.chat_times().len() > asked).await;
    let latency = server.first_byte_after(sent).unwrap();
    // The turn's end, as the manager reports it.
    let mut poll = id * 100;
    loop {
        poll += 1;
        let status = call(running, poll, "agent_status", json!({"agent_id": agent})).await;
        if status["status"] == "idle" && status["turn"].as_u64().unwrap_or(turn) >= turn {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    latency.as_secs_f64() * 1e3
}

pub async fn wake(rows: &mut Vec<Row>) {
    let goal = "a woken claude answers about as soon as one that is up";
    let Some(claude) = claude() else {
        rows.push(Row {
            name: "wake: slept claude, message → model request",
            figure: "not measured: claude is not installed (scripts/install-agent-clis)".into(),
            goal,
        });
        return;
    };
    let h = Harness::new();
    h.write_config("[agents]\nidle_sleep_secs = 1\n");
    let server = FakeModel::start().await;
    for _ in 0..(2 * RUNS) {
        server.push(Reply::new().text("ok"));
    }
    let mut running = h
        .corral()
        .arg("mcp")
        .env("CORRAL_CLAUDE", &claude)
        .env("ANTHROPIC_BASE_URL", server.base_url())
        .env("ANTHROPIC_API_KEY", "sk-ant-bench")
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        .live_stdin()
        .timeout(Duration::from_secs(600))
        .spawn()
        .await;
    initialize(&mut running).await;
    let (mut up, mut woken) = (Vec::new(), Vec::new());
    let mut id = 10;
    for _ in 0..RUNS {
        // A new session: its claude starts when it opens, so the first message finds it up.
        let work = h.work().join(format!("s{id}"));
        std::fs::create_dir_all(&work).unwrap();
        let opened = call(
            &mut running,
            id,
            "agent_open",
            json!({"cwd": work, "model": "claude:fake-model", "permission": "bypass"}),
        )
        .await;
        let agent = opened["agent_id"].as_str().unwrap().to_owned();
        until("claude never started", || claude_up(&work)).await;
        up.push(timed_message(&mut running, &server, &agent, id + 1, 1).await);
        // Idle for a second: put to sleep; the next message wakes it.
        until("claude never slept", || !claude_up(&work)).await;
        woken.push(timed_message(&mut running, &server, &agent, id + 2, 2).await);
        call(
            &mut running,
            id + 3,
            "agent_close",
            json!({"agent_id": agent}),
        )
        .await;
        id += 10;
    }
    running.close_stdin();
    let _ = running.wait().await;
    let range = |v: &[f64]| {
        let min = v.iter().copied().fold(f64::INFINITY, f64::min);
        let max = v.iter().copied().fold(0.0, f64::max);
        format!(
            "{:.0} ms median ({min:.0}–{max:.0}, {RUNS} runs)",
            median(v.to_vec())
        )
    };
    rows.push(Row {
        name: "wake: slept claude, message → model request",
        figure: range(&woken),
        goal,
    });
    rows.push(Row {
        name: "wake: claude already up, message → model request",
        figure: range(&up),
        goal: "the baseline the wake is measured against",
    });
}

/// The qwen scripts/install-agent-clis installs.
fn qwen() -> Option<PathBuf> {
    let path = PathBuf::from(std::env::var_os("HOME")?)
        .join(".cache/corral-ci/agent-clis/node_modules/.bin/qwen");
    path.exists().then_some(path)
}

/// A per-turn runtime: every message starts a qwen process that resumes the conversation.
pub async fn per_turn_wake(rows: &mut Vec<Row>) {
    let name = "wake: per-turn qwen, message → model request";
    let goal = "a per-turn runtime's process start is the whole wake";
    let Some(qwen) = qwen() else {
        rows.push(Row {
            name,
            figure: "not measured: qwen is not installed (scripts/install-agent-clis)".into(),
            goal,
        });
        return;
    };
    let h = Harness::new();
    let settings = h.home_dir().join(".qwen");
    std::fs::create_dir_all(&settings).unwrap();
    // No memory side calls: each turn is one model request.
    std::fs::write(
        settings.join("settings.json"),
        r#"{"security":{"auth":{"selectedType":"openai"}},"privacy":{"usageStatisticsEnabled":false},"telemetry":{"enabled":false},"general":{"disableAutoUpdate":true},"memory":{"enableManagedAutoMemory":false,"enableManagedAutoDream":false}}"#,
    )
    .unwrap();
    let server = FakeModel::start().await;
    for _ in 0..=RUNS {
        server.push(Reply::new().text("ok"));
    }
    let path = format!(
        "{}:{}",
        qwen.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut running = h
        .corral()
        .arg("mcp")
        .env("PATH", path)
        .env("OPENAI_API_KEY", "bench-key")
        .env("OPENAI_BASE_URL", server.openai_base())
        .live_stdin()
        .timeout(Duration::from_secs(600))
        .spawn()
        .await;
    initialize(&mut running).await;
    let opened = call(
        &mut running,
        1,
        "agent_open",
        json!({"cwd": h.work(), "model": "qwen:fake-model", "permission": "bypass"}),
    )
    .await;
    let agent = opened["agent_id"].as_str().unwrap().to_owned();
    // The first message starts the conversation; the timed ones resume it.
    timed_message(&mut running, &server, &agent, 2, 1).await;
    let mut resumed = Vec::new();
    for turn in 0..RUNS {
        let id = 10 + 10 * turn as u64;
        resumed.push(timed_message(&mut running, &server, &agent, id, 2 + turn as u64).await);
    }
    running.close_stdin();
    let _ = running.wait().await;
    let min = resumed.iter().copied().fold(f64::INFINITY, f64::min);
    let max = resumed.iter().copied().fold(0.0, f64::max);
    rows.push(Row {
        name,
        figure: format!(
            "{:.0} ms median ({min:.0}–{max:.0}, {RUNS} runs)",
            median(resumed)
        ),
        goal,
    });
}
