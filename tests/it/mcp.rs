//! `corral mcp` end to end, driven by the official Python MCP SDK (PyPI `mcp`, installed by
//! scripts/install-mcp-client): open an agent on the fake model, run a turn whose tool call
//! needs approval, approve it over MCP, read the output, close it, see it dead.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{holding, marker, mcp_call, mcp_turn_started, mcp_wait_done, wait_until};
use crate::support::procs::{members, pgid_of, tracked};
use crate::support::{FakeModel, Harness, Reply};

mod effort;
mod kaimon;
mod servers;

/// The client's venv: scripts/install-mcp-client puts it here (CORRAL_MCP_VENV overrides).
fn venv_python() -> PathBuf {
    let venv = std::env::var_os("CORRAL_MCP_VENV").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/corral-ci/mcp-venv"),
        PathBuf::from,
    );
    venv.join("bin/python")
}

/// Runs tests/it/mcp/client.py in `scenario` against `corral mcp` in `h`'s environment and
/// returns what it printed.
async fn drive(h: &Harness, model: &FakeModel, scenario: &str) -> Value {
    let python = venv_python();
    assert!(
        python.exists(),
        "{} is missing: run scripts/install-mcp-client (scripts/setup does)",
        python.display()
    );
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/mcp/client.py");
    let cfg = json!({
        "corral": env!("CARGO_BIN_EXE_corral"),
        "cwd": h.work(),
        "base_url": model.openai_base(),
        "scenario": scenario,
    });
    let mut client = tokio::process::Command::new(&python);
    client.arg(script).arg(cfg.to_string());
    let out = crate::common::run_client(h, &mut client, "the MCP client").await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "client failed: {stderr}");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("client output is JSON ({e}): {stderr}"))
}

#[tokio::test]
async fn an_unanswered_request_is_denied_after_the_approval_timeout_and_says_so() {
    let h = Harness::new();
    h.write_config("approval_timeout_secs = 1\n");
    let model = FakeModel::start().await;
    model.push(Reply::new().tool_call("c1", "write_file", r#"{"path":"x.txt","content":"hi"}"#));
    model.push(Reply::new().text("Could not write."));
    let r = drive(&h, &model, "timeout").await;
    let output = &r["output"];
    assert_eq!(output["done"], true, "{output}");
    let text = output["text"].as_str().unwrap();
    assert!(
        text.contains("nobody answered within 1 s; denied"),
        "{text}"
    );
    assert!(text.contains("Could not write."), "{text}");
    assert_eq!(r["pending"], json!([]));
    assert!(!h.work().join("x.txt").exists());
}

#[tokio::test]
async fn the_official_python_client_opens_approves_reads_and_closes_an_agent() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    model.push(Reply::new().tool_call("c1", "write_file", r#"{"path":"x.txt","content":"hi"}"#));
    model.push(Reply::new().text("Written."));
    model.push(Reply::new().text("Second answer."));
    model.push(Reply::new().text("Third, from another model."));
    // The reopened agent may only read: its write is refused without asking anyone.
    model.push(Reply::new().tool_call("c9", "write_file", r#"{"path":"z.txt","content":"no"}"#));
    model.push(Reply::new().text("Could not write."));
    let r = drive(&h, &model, "approve").await;

    assert_eq!(r["server"], "corral");
    let tools: Vec<&str> = r["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    for name in [
        "agent_approve",
        "agent_close",
        "agent_interrupt",
        "agent_list",
        "agent_open",
        "agent_output",
        "agent_pending",
        "agent_run",
        "agent_send",
        "agent_set_model",
        "agent_status",
    ] {
        assert!(tools.contains(&name), "{name} missing from {tools:?}");
    }
    // The caller's mistakes are tool errors with a message, not protocol errors.
    assert_eq!(r["bad_cwd"]["isError"], true);
    assert!(
        r["bad_cwd"]["text"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/dir")
    );
    assert_eq!(r["unknown_agent"]["isError"], true);
    assert!(
        r["unknown_agent"]["text"]
            .as_str()
            .unwrap()
            .contains("nope")
    );
    // rmcp 3.11 reports arguments that do not deserialize as a tool error too (the newer MCP
    // revisions ask for that, so a model can correct itself); unknown tools stay protocol
    // errors.
    assert_eq!(r["bad_args"]["isError"], true);
    assert!(
        r["bad_args"]["text"]
            .as_str()
            .unwrap()
            .contains("missing field `cwd`")
    );
    assert_eq!(r["bad_decision"]["isError"], true);
    let unknown = r["unknown_tool"].as_str().unwrap();
    assert!(unknown.starts_with("protocol error"), "{unknown}");

    assert_eq!(r["open"], json!({"agent_id": "mcp-one"}));
    assert_eq!(r["send"], json!({"turn": 1}));
    let pending = r["pending"].as_array().unwrap();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(r["approve"]["answered"], true);
    let output = &r["output"];
    assert_eq!(output["done"], true, "{output}");
    assert_eq!(output["turn"], 1);
    let text = output["text"].as_str().unwrap();
    assert!(text.contains("Written."), "{text}");
    assert!(text.contains("write_file"), "{text}");
    assert_eq!(
        std::fs::read_to_string(h.work().join("x.txt")).unwrap(),
        "hi"
    );
    // last_message with max_chars keeps the end and says how much it dropped.
    assert_eq!(r["last"]["text"], "ten.");
    assert_eq!(r["last"]["truncated"], true);
    assert_eq!(r["last"]["dropped_chars"], 4);

    assert_eq!(r["run"], json!({"text": "Second answer."}));
    // The switch keeps the conversation: the next request goes to the new model with the
    // earlier turns in it.
    assert_eq!(
        r["set_model"],
        json!({"switched": true, "model": "llamacpp:other-model"})
    );
    assert_eq!(r["bad_model"]["isError"], true, "{}", r["bad_model"]);
    assert_eq!(
        r["run_switched"],
        json!({"text": "Third, from another model."})
    );
    let last = model
        .chat_requests()
        .into_iter()
        .find(|r| r["messages"].to_string().contains("third"))
        .unwrap();
    assert_eq!(last["model"], "other-model");
    let history = last["messages"].to_string();
    assert!(history.contains("Second answer."), "{history}");
    assert_eq!(r["status"]["id"], "mcp-one");
    assert_eq!(r["status"]["model"], "llamacpp:other-model");
    assert_eq!(r["status"]["turn"], 3);
    assert_eq!(r["close"], json!({"closed": true}));
    let agents = r["list"]["agents"].as_array().unwrap();
    let agent = agents.iter().find(|a| a["id"] == "mcp-one").unwrap();
    assert_eq!(agent["status"], "dead");

    assert_eq!(r["reopen"]["agent_id"], "mcp-one", "{}", r["reopen"]);
    // The effort is applied (tests/it/mcp/effort.rs has the details), so nothing is noted.
    assert!(r["reopen"].get("notes").is_none(), "{}", r["reopen"]);
    let reopened = model
        .chat_requests()
        .into_iter()
        .find(|r| r["messages"].to_string().contains("write again"))
        .unwrap();
    assert_eq!(reopened["reasoning_effort"], "high");
    assert_eq!(r["reopen_run"], json!({"text": "Could not write."}));
    assert!(!h.work().join("z.txt").exists());
    assert_eq!(r["bad_only"]["isError"], true);
    let agents = r["list_after"]["agents"].as_array().unwrap();
    let same: Vec<&Value> = agents.iter().filter(|a| a["id"] == "mcp-one").collect();
    assert_eq!(same.len(), 1, "one slot for the reopened id: {agents:?}");
    assert_eq!(same[0]["status"], "idle");
}

/// The stateless revision (2026-07-28): no `initialize`; `server/discover` and every request
/// carry the protocol version in `_meta`. A whole turn runs that way.
#[tokio::test]
async fn the_stateless_protocol_revision_works_without_initialize() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let h = Harness::new();
    let model = FakeModel::start().await;
    model.push(Reply::new().text("Stateless hello."));
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_corral"))
        .arg("mcp")
        .env("HOME", h.home_dir())
        .env("XDG_CACHE_HOME", h.cache_dir())
        .env("XDG_CONFIG_HOME", h.config_dir())
        .current_dir(h.work())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    });
    let mut call = async |id: u64, method: &str, params: Value| -> Value {
        let mut params = params;
        params["_meta"] = meta.clone();
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        let reply = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("a reply in time")
            .unwrap()
            .expect("a reply line");
        serde_json::from_str(&reply).unwrap()
    };
    let discover = call(1, "server/discover", json!({})).await;
    let versions = discover["result"]["supportedVersions"].to_string();
    assert!(versions.contains("2026-07-28"), "{discover}");
    let tool = |name: &str, arguments: Value| json!({"name": name, "arguments": arguments});
    let opened = call(
        2,
        "tools/call",
        tool(
            "agent_open",
            json!({"cwd": h.work(), "model": "llamacpp:fake-model",
                   "base_url": model.openai_base()}),
        ),
    )
    .await;
    assert_eq!(opened["result"]["resultType"], "complete", "{opened}");
    let text = opened["result"]["content"][0]["text"].as_str().unwrap();
    let agent_id = serde_json::from_str::<Value>(text).unwrap()["agent_id"].clone();
    let ran = call(
        3,
        "tools/call",
        tool("agent_run", json!({"agent_id": agent_id, "text": "hi"})),
    )
    .await;
    let text = ran["result"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(text).unwrap(),
        json!({"text": "Stateless hello."})
    );
    // A version the server does not know is refused with the ones it does.
    let line = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2099-01-01",
        "io.modelcontextprotocol/clientCapabilities": {}}}});
    stdin
        .write_all(format!("{line}\n").as_bytes())
        .await
        .unwrap();
    let reply: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    assert!(reply["error"].is_object(), "{reply}");
    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success());
}

/// `agent_interrupt` on a turn whose tool is running: the turn ends cancelled, the tool's
/// whole process group (a background child that ignores SIGTERM included) is gone when it
/// does, and a second interrupt finds nothing to interrupt.
#[tokio::test]
async fn agent_interrupt_ends_a_running_turn_and_kills_its_tool_group() {
    let h = Harness::new();
    let word = marker("mcp-interrupt");
    let model = FakeModel::start().await;
    let command = format!("trap '' TERM; : {word}; sleep 1000 & sleep 1000; :");
    let args = json!({ "command": command }).to_string();
    model.push(Reply::new().tool_call("c1", "shell", &args));
    let (mut running, agent, sent) = mcp_turn_started(&h, &model).await;
    assert_eq!(sent, json!({"turn": 1}));
    // Both sleeps run: the shell holding the word and its background child.
    let pgid = std::sync::OnceLock::new();
    wait_until("the tool's sleeps to start", || {
        let Some(pid) = holding(&word).first().copied() else {
            return false;
        };
        let group = pgid_of(pid).unwrap_or_default();
        let sleeping = members(group)
            .into_iter()
            .filter(|p| {
                std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| c.starts_with(b"sleep\0"))
            })
            .count();
        sleeping == 2 && pgid.set(group).is_ok()
    })
    .await;
    let pgid = *pgid.get().unwrap();
    let me = json!({"agent_id": agent});
    let interrupted = mcp_call(&mut running, 3, "agent_interrupt", me.clone()).await;
    assert_eq!(interrupted, json!({"interrupted": true}));
    let output = mcp_wait_done(&mut running, &agent, 4).await;
    assert_eq!(output["turn"], 1, "{output}");
    // The abandoned call's group is ended in the background (SIGTERM, a grace, SIGKILL), and
    // its pids.json entry goes once it is gone.
    let pids = h.cache_dir().join("corral/agents/pids.json");
    let gone = || members(pgid).is_empty() && !tracked(&pids).iter().any(|e| e["pgid"] == pgid);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !gone() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let left = members(pgid);
    let listed = tracked(&pids);
    let again = mcp_call(&mut running, 5000, "agent_interrupt", me).await;
    running.close_stdin();
    let _ = running.wait().await;
    for pid in &left {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    assert_eq!(
        left,
        Vec::<u32>::new(),
        "the tool's group outlived the interrupt"
    );
    assert!(
        !listed.iter().any(|e| e["pgid"] == pgid),
        "pids.json still lists the group: {listed:?}"
    );
    assert_eq!(again, json!({"interrupted": false}));
    // The turn's one result, from the event log: cancelled.
    let log = std::fs::read_to_string(&h.event_logs()[0]).unwrap();
    let events: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let results: Vec<&Value> = events.iter().filter(|e| e["kind"] == "result").collect();
    assert_eq!(results.len(), 1, "{log}");
    assert_eq!(results[0]["data"]["stopReason"], "cancelled", "{log}");
    assert_eq!(results[0]["turn"], 1);
}
