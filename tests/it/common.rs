//! Shorthands the run tests share: a corral command pointed at the fake server, and event
//! assertions.

use serde_json::Value;

use crate::support::{Cmd, FakeModel, Harness, Outcome, Reply};

/// Fast retries so error tests do not wait seconds.
pub const FAST_RETRY: &str = "[retry]\nbase_delay_ms = 5\nmax_delay_ms = 20\n";

/// `corral run --json` against the fake server's OpenAI-compatible endpoint.
pub fn openai_run(h: &Harness, server: &FakeModel, prompt: &str) -> Cmd {
    h.corral().args([
        "run",
        "--json",
        "-m",
        "llamacpp:fake-model",
        "--base-url",
        &server.openai_base(),
        prompt,
    ])
}

/// `corral run --json` against the fake server's Ollama endpoint.
pub fn ollama_run(h: &Harness, server: &FakeModel, prompt: &str) -> Cmd {
    h.corral().args([
        "run",
        "--json",
        "-m",
        "ollama:fake-model",
        "--base-url",
        &server.base_url(),
        prompt,
    ])
}

pub fn result_of(out: &Outcome) -> Value {
    let results = out.of_kind("result");
    assert_eq!(results.len(), 1, "one result per turn: {out:?}");
    results[0]["data"].clone()
}

/// The authoritative (delta:false) blocks of a kind, joined.
pub fn authoritative(out: &Outcome, kind: &str) -> Vec<String> {
    out.of_kind(kind)
        .iter()
        .filter(|e| e["data"]["delta"] == false)
        .map(|e| {
            e["data"]["content"]["text"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect()
}

pub fn deltas(out: &Outcome, kind: &str) -> String {
    out.of_kind(kind)
        .iter()
        .filter(|e| e["data"]["delta"] == true)
        .map(|e| e["data"]["content"]["text"].as_str().unwrap_or(""))
        .collect()
}

pub fn statuses(out: &Outcome) -> Vec<String> {
    out.of_kind("status")
        .iter()
        .map(|e| e["data"]["status"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// seq strictly increasing, one agent id, the documented envelope fields on every line, and
/// every `tool_use` naming its tool as the call's `tool_result` does.
pub fn assert_well_formed(out: &Outcome) {
    assert_tool_names_agree(out);
    let events = out.events();
    assert!(!events.is_empty(), "no events: {out:?}");
    let agent = events[0]["agent"].clone();
    let mut last = 0;
    for e in &events {
        let seq = e["seq"].as_u64().expect("seq");
        assert!(seq > last, "seq not increasing at {e}");
        last = seq;
        assert_eq!(e["agent"], agent);
        assert!(e["ts"].as_str().is_some_and(|t| t.ends_with('Z')), "{e}");
        assert!(
            e["turn"].is_u64() && e["kind"].is_string() && e["data"].is_object(),
            "{e}"
        );
    }
}

/// Each `tool_use` names a tool, the one its call's `tool_result` names (a surface shows
/// the announce's name at the start and the result's at the end).
pub fn assert_tool_names_agree(out: &Outcome) {
    let results = out.of_kind("tool_result");
    for announce in out.of_kind("tool_use") {
        let tool = announce["data"]["tool"].as_str().unwrap_or_default();
        assert!(!tool.is_empty(), "a tool_use without its tool: {announce}");
        let id = &announce["data"]["call"]["toolCallId"];
        for result in results
            .iter()
            .filter(|r| &r["data"]["result"]["toolCallId"] == id)
        {
            assert_eq!(
                result["data"]["result"]["tool"], tool,
                "{announce} / {result}"
            );
        }
    }
}

/// The messages of the n-th chat request.
pub fn messages(server: &FakeModel, n: usize) -> Vec<Value> {
    server.chat_requests()[n]["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The MCP handshake on a running `corral mcp`.
pub async fn mcp_initialize(running: &mut crate::support::Running) {
    let init = serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "corral-tests", "version": "0"}}});
    running.send_line(&init.to_string()).await;
    running.wait_for_event(0, |m| m["id"] == 0).await;
    running
        .send_line(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await;
}

/// One MCP tool call on `corral mcp`'s stdin; its result's JSON text, parsed.
/// `corral mcp` with one agent opened on `model` (bypass preset) and sent "go"; returns the
/// process and the `agent_send` answer.
pub async fn mcp_turn_started(
    h: &Harness,
    model: &FakeModel,
) -> (crate::support::Running, String, Value) {
    let mut running = h.corral().arg("mcp").live_stdin().spawn().await;
    mcp_initialize(&mut running).await;
    let open = serde_json::json!({"cwd": h.work(), "model": "llamacpp:fake-model",
                      "base_url": model.openai_base(), "permission": "bypass"});
    let opened = mcp_call(&mut running, 1, "agent_open", open).await;
    let agent = opened["agent_id"].as_str().unwrap().to_owned();
    let send = serde_json::json!({"agent_id": agent, "text": "go"});
    let sent = mcp_call(&mut running, 2, "agent_send", send).await;
    (running, agent, sent)
}

pub async fn mcp_call(
    running: &mut crate::support::Running,
    id: u64,
    tool: &str,
    args: Value,
) -> Value {
    let result = mcp_call_result(running, id, tool, args).await;
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{tool}: {result}"));
    assert_ne!(result["isError"], true, "{tool}: {text}");
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// One MCP tool call; its whole `result` (`content`, `isError`), for calls meant to fail.
pub async fn mcp_call_result(
    running: &mut crate::support::Running,
    id: u64,
    tool: &str,
    args: Value,
) -> Value {
    let call = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                                  "params": {"name": tool, "arguments": args}});
    running.send_line(&call.to_string()).await;
    let answer = running.wait_for_event(0, |m| m["id"] == id).await;
    answer["result"].clone()
}

/// The ACP handshake on a running `corral acp` (no client fs, so tools use the disk) and a
/// new session in `h`'s work dir, over raw JSON-RPC with ids 0 and 1. Returns the session id.
pub async fn acp_open(running: &mut crate::support::Running, h: &Harness) -> String {
    let init = serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                                  "params": {"protocolVersion": 1, "clientCapabilities": {}}});
    running.send_line(&init.to_string()).await;
    running.wait_for_event(0, |m| m["id"] == 0).await;
    let new = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "session/new",
                                 "params": {"cwd": h.work(), "mcpServers": []}});
    running.send_line(&new.to_string()).await;
    let created = running.wait_for_event(0, |m| m["id"] == 1).await;
    created["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("session/new: {created}"))
        .to_owned()
}

/// Gives `command` `h`'s environment and nothing else (`PATH`, the harness's home and XDG
/// directories, no colour) and the work dir as its directory.
pub fn harness_env<'c>(
    h: &Harness,
    command: &'c mut tokio::process::Command,
) -> &'c mut tokio::process::Command {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    command
        .env_clear()
        .env("PATH", path)
        .env("HOME", h.home_dir())
        .env("XDG_CACHE_HOME", h.cache_dir())
        .env("XDG_CONFIG_HOME", h.config_dir())
        .env("XDG_DATA_HOME", h.data_dir())
        .env("NO_COLOR", "1")
        .current_dir(h.work())
        .kill_on_drop(true)
}

/// Runs a third-party client program (an MCP or ACP client) that starts corral itself, in
/// `h`'s environment and nothing else; fails the test if it does not finish in 90 s.
pub async fn run_client(
    h: &Harness,
    command: &mut tokio::process::Command,
    what: &str,
) -> std::process::Output {
    let run = harness_env(h, command).output();
    tokio::time::timeout(std::time::Duration::from_secs(90), run)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish in time"))
        .unwrap_or_else(|e| panic!("{what} cannot run: {e}"))
}

/// `corral run --json -p bypass … go` against `server`, started through `wrapper` (a program
/// that ends by running the arguments it is given: `exe`, then the run's arguments and
/// `flags`), in `h`'s environment with stdin closed; fails the test after 60 s.
pub async fn run_through(
    h: &Harness,
    mut wrapper: tokio::process::Command,
    exe: &std::path::Path,
    server: &FakeModel,
    flags: &[&str],
) -> Outcome {
    wrapper
        .arg(exe)
        .args(["run", "--json", "-m", "llamacpp:fake-model", "-p", "bypass"])
        .args(["--base-url", &server.openai_base()])
        .args(flags)
        .arg("go")
        .stdin(std::process::Stdio::null());
    let run = harness_env(h, &mut wrapper).output();
    let output = tokio::time::timeout(std::time::Duration::from_secs(60), run)
        .await
        .unwrap()
        .unwrap();
    Outcome {
        code: output.status.code(),
        signal: None,
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Polls `agent_output` (full turn) over MCP until the turn is done; MCP ids from `first_id`.
pub async fn mcp_wait_done(
    running: &mut crate::support::Running,
    agent: &str,
    first_id: u64,
) -> Value {
    poll_mcp(running, first_id, "agent_output", agent, |v| {
        v["done"] == true
    })
    .await
}

/// Polls `agent_status` over MCP until the agent is dead; MCP ids from `first_id`.
pub async fn mcp_wait_dead(
    running: &mut crate::support::Running,
    agent: &str,
    first_id: u64,
) -> Value {
    poll_mcp(running, first_id, "agent_status", agent, |v| {
        v["status"] == "dead"
    })
    .await
}

async fn poll_mcp(
    running: &mut crate::support::Running,
    first_id: u64,
    tool: &str,
    agent: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let args = if tool == "agent_output" {
        serde_json::json!({"agent_id": agent, "which": "full_turn"})
    } else {
        serde_json::json!({"agent_id": agent})
    };
    let mut last = Value::Null;
    for id in first_id..first_id + 1200 {
        last = mcp_call(running, id, tool, args.clone()).await;
        if done(&last) {
            return last;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("{tool} never got there: {last}");
}

/// Whether `marker` appears within 5 s: a background command (an MCP server an agent starts)
/// may still be making it after the run.
pub async fn appears(marker: &std::path::Path) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !marker.exists() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    marker.exists()
}

/// Waits (up to 60 s) until `cond` holds, failing with `what`.
pub async fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !cond() {
        assert!(std::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// The steering scenario over MCP, for any backend that steers: the fake model streams a
/// slow first answer; while it streams a second message is sent; it must join turn 1 and the
/// turn must end with the answer to it. `asked` tells when the agent reached the model.
/// Returns the turn's full output.
pub async fn steer_mid_turn(
    h: &Harness,
    running: &mut crate::support::Running,
    server: &FakeModel,
    model: &str,
    asked: impl Fn() -> bool,
) -> Value {
    server.push(
        crate::support::Reply::new()
            .text("FIRST ")
            .chunk_delay(std::time::Duration::from_millis(100))
            .many_text_chunks(15, "."),
    );
    server.push(crate::support::Reply::new().text("SECOND ANSWER"));
    mcp_initialize(running).await;
    let work = h.work();
    let opened = mcp_call(
        running,
        1,
        "agent_open",
        serde_json::json!({"cwd": work, "model": model, "permission": "bypass"}),
    )
    .await;
    let agent = opened["agent_id"].as_str().unwrap().to_owned();
    let first = serde_json::json!({"agent_id": agent, "text": "first"});
    assert_eq!(
        mcp_call(running, 2, "agent_send", first).await,
        serde_json::json!({"turn": 1})
    );
    wait_until("the agent never asked the model", asked).await;
    let also = serde_json::json!({"agent_id": agent, "text": "also this"});
    let steered = mcp_call(running, 3, "agent_send", also).await;
    assert_eq!(
        steered,
        serde_json::json!({"turn": 1}),
        "the message joins the running turn"
    );
    let output = mcp_wait_done(running, &agent, 4).await;
    assert_eq!(output["turn"], 1);
    let text = output["text"].as_str().unwrap();
    assert!(text.contains("SECOND ANSWER"), "{text}");
    let status = mcp_call(
        running,
        5000,
        "agent_status",
        serde_json::json!({"agent_id": agent}),
    )
    .await;
    assert_eq!(status["turn"], 1, "{status}");
    assert_eq!(status["status"], "idle", "{status}");
    output
}

/// `git` as the person runs it: a fixed identity and no user or system config, so commits
/// work anywhere.
pub fn git_command(dir: &std::path::Path, args: &[&str]) -> std::process::Command {
    let mut command = std::process::Command::new("git");
    command
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.com");
    command
}

/// [`git_command`], failing the test when git does. Returns its trimmed stdout.
pub fn git(dir: &std::path::Path, args: &[&str]) -> String {
    let out = git_command(dir, args).output().expect("run git");
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// `dir` as a repository on `main` with one commit of `a.txt` holding `content`.
pub fn git_repo_at(dir: &std::path::Path, content: &str) {
    git(dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join("a.txt"), content).unwrap();
    git(dir, &["add", "."]);
    git(dir, &["commit", "-q", "-m", "first"]);
}

/// The harness's work dir as a repository on `main` with one commit of `a.txt` holding
/// `content`.
pub fn git_repo(h: &Harness, content: &str) -> std::path::PathBuf {
    let dir = h.work();
    git_repo_at(&dir, content);
    dir
}

/// A word no other process on the machine has in its command line.
pub fn marker(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("corral-escape-{tag}-{}-{nanos}", std::process::id())
}

/// Live (not zombie) processes whose command line holds `word`.
pub fn holding(word: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| s.rsplit(") ").next().map(|r| r.starts_with('Z')))
            .unwrap_or(true);
        if !zombie && String::from_utf8_lossy(&cmdline).contains(word) {
            found.push(pid);
        }
    }
    found
}

/// The tool names the `n`-th chat request offered (none when it has no `tools`).
pub fn offered_tools(server: &FakeModel, n: usize) -> Vec<String> {
    server.chat_requests()[n]["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| t["function"]["name"].as_str().unwrap_or("").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Names the machine features whose tests may be skipped, comma-separated: `landlock` (the
/// kernel has no usable landlock), `userns` (no user or mount namespaces), `root` (the tests
/// do not run as root). Nothing else skips a test.
pub const SKIP_VAR: &str = "CORRAL_TEST_SKIP";

/// For a test that needs `feature`, which this machine lacks (`why`): fails the test unless
/// [`SKIP_VAR`] names the feature, in which case the skip is said on stderr and `true`
/// returned (the test then returns).
#[allow(clippy::print_stderr)]
pub fn skip_without(feature: &str, why: &str) -> bool {
    let named = std::env::var(SKIP_VAR)
        .unwrap_or_default()
        .split(',')
        .any(|f| f.trim() == feature);
    assert!(
        named,
        "{why}; set {SKIP_VAR}={feature} to skip the tests that need it"
    );
    eprintln!("skipped ({SKIP_VAR}={feature}): {why}");
    true
}

/// Whether the tests run as root; otherwise a skip of `what` [`SKIP_VAR`] must name.
pub fn root_here(what: &str) -> bool {
    let uid = std::process::Command::new("id").arg("-u").output().unwrap();
    String::from_utf8_lossy(&uid.stdout).trim() == "0"
        || !skip_without("root", &format!("{what} needs the tests to run as root"))
}

/// A run in `cwd` under `preset` whose model makes `calls`, one per step, then answers "done".
pub async fn run_calls(
    h: &Harness,
    cwd: &std::path::Path,
    preset: &str,
    calls: &[(&str, Value)],
) -> Outcome {
    let server = FakeModel::start().await;
    for (i, (name, args)) in calls.iter().enumerate() {
        server.push(Reply::new().tool_call(&format!("c{i}"), name, &args.to_string()));
    }
    server.push(Reply::new().text("done"));
    let out = openai_run(h, &server, "go")
        .args(["-p", preset])
        .current_dir(cwd)
        .timeout(std::time::Duration::from_secs(60))
        .run()
        .await;
    assert_well_formed(&out);
    out
}

/// The `{success, output, error}` records of a run's calls, in order.
pub fn tool_results(out: &Outcome) -> Vec<Value> {
    out.of_kind("tool_result")
        .iter()
        .map(|e| e["data"]["result"].clone())
        .collect()
}

/// Polls `agent_output` (full turn) over MCP until turn `turn` is done (it may not have begun
/// yet: a queued or waking turn); MCP ids from `first_id`.
pub async fn mcp_wait_turn(
    running: &mut crate::support::Running,
    agent: &str,
    turn: u64,
    first_id: u64,
) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    let mut id = first_id;
    loop {
        id += 1;
        let args = serde_json::json!({"agent_id": agent, "which": "full_turn", "turn": turn});
        let result = mcp_call_result(running, id, "agent_output", args).await;
        let text = result["content"][0]["text"].as_str().unwrap_or_default();
        let out: Value = serde_json::from_str(text).unwrap_or(Value::Null);
        if result["isError"] != true && out["done"] == true && out["turn"] == turn {
            return out;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "turn {turn}: {result}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// The `/proc/<pid>` directories of the processes working in `root` (their cwd) whose command
/// line contains `needle`, with that command line (arguments joined by spaces).
pub fn procs_in(root: &std::path::Path, needle: &str) -> Vec<(std::path::PathBuf, String)> {
    let root = root.canonicalize().unwrap();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let dir = entry.path();
        let Ok(cmdline) = std::fs::read(dir.join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(needle) && std::fs::read_link(dir.join("cwd")).is_ok_and(|c| c == root)
        {
            found.push((dir, cmdline));
        }
    }
    found
}

/// `agent_status` of one agent on a running `corral mcp`.
pub async fn mcp_status(running: &mut crate::support::Running, id: u64, agent: &str) -> Value {
    mcp_call(
        running,
        id,
        "agent_status",
        serde_json::json!({"agent_id": agent}),
    )
    .await
}

/// The messages of the `AGENT_LIFECYCLE` errors (stalls, restarts, giving up) in an event
/// log's text.
pub fn lifecycle_errors(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["kind"] == "error" && e["data"]["data"]["code"] == "AGENT_LIFECYCLE")
        .filter_map(|e| e["data"]["message"].as_str().map(str::to_owned))
        .collect()
}

/// gemini's settings in `home` for the fake server, offline: an API key, no usage statistics,
/// telemetry or update checks (external-clis.md §4).
pub fn write_gemini_settings(home: &std::path::Path) {
    let settings = home.join(".gemini");
    std::fs::create_dir_all(&settings).unwrap();
    std::fs::write(
        settings.join("settings.json"),
        serde_json::json!({
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "privacy": {"usageStatisticsEnabled": false},
            "telemetry": {"enabled": false},
            "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
        })
        .to_string(),
    )
    .unwrap();
}
