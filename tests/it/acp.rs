//! `corral acp` end to end, driven by the official ACP TypeScript SDK (npm
//! `@agentclientprotocol/sdk`, installed by scripts/install-agent-clis): initialize,
//! session/new, a prompt with a permission round-trip, a cancel while a permission question
//! is open, modes and the model option, and session/load replaying the session in a new
//! process. The SDK validates every update it receives against the schema.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::common::acp_open;
use crate::support::{FakeModel, Harness, Reply, Running};

mod mcp_servers;

/// Where scripts/install-agent-clis puts the npm packages (CORRAL_AGENT_CLIS overrides).
pub fn agent_clis() -> PathBuf {
    std::env::var_os("CORRAL_AGENT_CLIS").map_or_else(
        || {
            PathBuf::from(std::env::var_os("HOME").expect("HOME"))
                .join(".cache/corral-ci/agent-clis")
        },
        PathBuf::from,
    )
}

async fn drive(h: &Harness, model: &FakeModel) -> Value {
    let sdk = agent_clis().join("node_modules/@agentclientprotocol/sdk/dist/v1/stable/acp.js");
    assert!(
        sdk.exists(),
        "{} is missing: run scripts/install-agent-clis (scripts/setup does)",
        sdk.display()
    );
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/acp/client.mjs");
    let cfg = json!({
        "corral": env!("CARGO_BIN_EXE_corral"),
        "sdk": sdk,
        "cwd": h.work(),
        "base_url": model.openai_base(),
    });
    let mut client = tokio::process::Command::new("node");
    client.arg(script).arg(cfg.to_string());
    let out = crate::common::run_client(h, &mut client, "the ACP client").await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "client failed: {stderr}");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("client output is JSON ({e}): {stderr}"))
}

fn of_kind<'a>(updates: &'a Value, kind: &str) -> Vec<&'a Value> {
    updates
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["sessionUpdate"] == kind)
        .collect()
}

fn text_of(updates: &[&Value]) -> String {
    updates
        .iter()
        .map(|u| u["content"]["text"].as_str().unwrap_or_default())
        .collect()
}

/// What the model was told for tool call `id` in request `body`.
fn tool_reply(body: &Value, id: &str) -> String {
    let message = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
        .unwrap_or_else(|| panic!("no tool message for {id}: {body}"));
    message["content"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn an_acp_client_drives_a_session_through_permission_cancel_modes_and_load() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    model.push(Reply::new().tool_call("c1", "write_file", r#"{"path":"x.txt","content":"hi"}"#));
    model.push(Reply::new().text("Written."));
    model.push(Reply::new().tool_call("c2", "write_file", r#"{"path":"y.txt","content":"no"}"#));
    model.push(Reply::new().tool_call("c3", "read_file", r#"{"path":"notes.txt"}"#));
    model.push(Reply::new().tool_call("c4", "read_file", r#"{"path":"../outside.txt"}"#));
    model.push(Reply::new().text("Read."));
    std::fs::write(h.work().join("notes.txt"), "disk text").unwrap();
    std::fs::write(h.work().join("../outside.txt"), "secret").unwrap();
    let r = drive(&h, &model).await;

    let init = &r["initialize"];
    assert_eq!(init["protocolVersion"], 1);
    assert_eq!(init["agentCapabilities"]["loadSession"], true);
    assert_eq!(
        init["agentCapabilities"]["promptCapabilities"]["image"],
        true
    );
    assert_eq!(init["agentInfo"]["name"], "corral");

    let new = &r["new"];
    assert_eq!(new["modes"]["currentModeId"], "default");
    let modes: Vec<&str> = new["modes"]["availableModes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(
        modes.contains(&"readonly") && modes.contains(&"auto"),
        "{modes:?}"
    );
    let option = &new["configOptions"][0];
    assert_eq!(option["category"], "model");
    assert_eq!(option["currentValue"], "llamacpp:fake-model");

    // The first prompt: permission asked with the four kinds, allowed, the write shown as
    // a diff, the file written, the answer streamed.
    assert_eq!(r["first"]["stopReason"], "end_turn");
    let first = &r["permissions"][0];
    let kinds: Vec<&str> = first["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["allow_once", "allow_always", "reject_once", "reject_always"]
    );
    assert_eq!(first["toolCall"]["toolCallId"], "c1");
    assert_eq!(first["toolCall"]["content"][0]["type"], "diff");
    assert_eq!(first["toolCall"]["content"][0]["newText"], "hi");
    // The client offered fs: the write went to its buffer, not to the disk.
    assert!(!h.work().join("x.txt").exists());
    assert_eq!(
        r["fs_writes"].as_array().unwrap().len(),
        1,
        "{}",
        r["fs_writes"]
    );
    assert_eq!(
        r["fs_writes"][0]["path"],
        h.work().join("x.txt").to_str().unwrap()
    );
    assert_eq!(r["fs_writes"][0]["content"], "hi");
    let updates = &r["updates"];
    let calls = of_kind(updates, "tool_call");
    assert_eq!(calls[0]["toolCallId"], "c1");
    assert_eq!(calls[0]["kind"], "edit");
    let done: Vec<&Value> = of_kind(updates, "tool_call_update")
        .into_iter()
        .filter(|u| u["toolCallId"] == "c1" && u["status"] == "completed")
        .collect();
    assert_eq!(done.len(), 1, "{updates}");
    assert_eq!(done[0]["content"][0]["type"], "diff");
    assert_eq!(
        text_of(&of_kind(updates, "agent_message_chunk")),
        "Written.Read."
    );

    // The second: cancelled while asking; nothing written, never an error.
    assert_eq!(r["second"]["stopReason"], "cancelled");
    assert_eq!(r["permissions"][1]["toolCall"]["toolCallId"], "c2");
    assert!(!h.work().join("y.txt").exists());

    assert_eq!(r["set_mode"], json!({}));
    assert!(
        of_kind(updates, "current_mode_update")
            .iter()
            .any(|u| u["currentModeId"] == "readonly"),
        "{updates}"
    );
    assert_eq!(r["bad_mode"]["code"], -32602, "{}", r["bad_mode"]);
    assert_eq!(
        r["set_model"]["configOptions"][0]["currentValue"],
        "llamacpp:other-model"
    );
    assert_eq!(
        r["unknown_session"]["code"], -32002,
        "{}",
        r["unknown_session"]
    );
    assert_eq!(r["first_exit"], 0);

    // The model switch reached the model server: every request before it named the opening
    // model, every one after it the switched one.
    let sent: Vec<Value> = model.chat_requests();
    let names: Vec<&str> = sent.iter().map(|b| b["model"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "fake-model",
            "fake-model",
            "fake-model",
            "other-model",
            "other-model",
            "other-model"
        ]
    );

    // The third prompt's reads: notes.txt through the client's buffer (the model saw the
    // buffer, not the disk); ../outside.txt refused beneath the root before the client was
    // asked (tool/editor.rs resolves every path first), so exactly one fs read reached it.
    assert_eq!(r["third"]["stopReason"], "end_turn");
    assert_eq!(
        r["fs_reads"],
        json!([{"sessionId": r["sessionId"], "path": h.work().join("notes.txt")}])
    );
    assert_eq!(tool_reply(&sent[5], "c3"), "EDITOR BUFFER of notes.txt");
    let outside = tool_reply(&sent[5], "c4");
    assert_eq!(
        outside,
        format!(
            "Error: path outside the session root: ../outside.txt (the session root is {})",
            h.work().display()
        )
    );
    let c4: Vec<&Value> = of_kind(updates, "tool_call_update")
        .into_iter()
        .filter(|u| u["toolCallId"] == "c4" && u["status"] == "failed")
        .collect();
    assert_eq!(c4.len(), 1, "{updates}");

    // session/load in a new process replays the conversation from the event log.
    let replayed = &r["replayed"];
    let user = text_of(&of_kind(replayed, "user_message_chunk"));
    assert!(
        user.contains("write x") && user.contains("run ls"),
        "{replayed}"
    );
    assert_eq!(
        text_of(&of_kind(replayed, "agent_message_chunk")),
        "Written.Read."
    );
    assert_eq!(of_kind(replayed, "tool_call")[0]["toolCallId"], "c1");
    assert_eq!(r["load"]["modes"]["currentModeId"], "default");
}

/// A published ACP client nobody here wrote (npm `acpx`) runs a one-shot prompt through
/// `corral acp`, approving the write it asks for.
#[tokio::test]
async fn acpx_runs_a_prompt_through_corral_acp() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    model.push(Reply::new().tool_call("c1", "write_file", r#"{"path":"x.txt","content":"hi"}"#));
    model.push(Reply::new().text("Written by corral."));
    let acpx = agent_clis().join("node_modules/.bin/acpx");
    assert!(
        acpx.exists(),
        "{} is missing: run scripts/install-agent-clis (scripts/setup does)",
        acpx.display()
    );
    let agent = format!(
        "{} acp -m llamacpp:fake-model --base-url {}",
        env!("CARGO_BIN_EXE_corral"),
        model.openai_base()
    );
    let mut acpx_run = tokio::process::Command::new(&acpx);
    acpx_run
        .args([
            "--agent",
            &agent,
            "--approve-all",
            "--format",
            "json",
            "--cwd",
        ])
        .arg(h.work())
        .args(["exec", "write x"]);
    let out = crate::common::run_client(&h, &mut acpx_run, "acpx").await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "acpx failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("Written by corral."), "{stdout}");
    assert_eq!(
        std::fs::read_to_string(h.work().join("x.txt")).unwrap(),
        "hi"
    );
}

fn is_permission_request(m: &Value) -> bool {
    m["method"] == "session/request_permission"
}

/// Sends `session/prompt` (JSON-RPC id `id`); answers the next permission request with the
/// option `pick`, if given; returns the prompt's answer and the permission request.
async fn prompt_answering(
    running: &mut Running,
    session: &str,
    id: u64,
    asked_before: usize,
    pick: &str,
) -> (Value, Value) {
    let prompt = json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
                        "params": {"sessionId": session,
                                   "prompt": [{"type": "text", "text": "go"}]}});
    running.send_line(&prompt.to_string()).await;
    let ask = running
        .wait_for_event(asked_before, is_permission_request)
        .await;
    let answer = json!({"jsonrpc": "2.0", "id": ask["id"],
                        "result": {"outcome": {"outcome": "selected", "optionId": pick}}});
    running.send_line(&answer.to_string()).await;
    let done = running.wait_for_event(0, |m| m["id"] == id).await;
    (done, ask)
}

fn offered(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect()
}

/// The client's "always" answers stand for the session: after allow_always a later write is
/// not asked about, after reject_always the tool is off (refused without asking, and no
/// longer offered to the model).
#[tokio::test]
async fn allow_always_and_reject_always_picked_by_the_client_hold_for_the_session() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    model.push(Reply::new().tool_call("c1", "write_file", r#"{"path":"a.txt","content":"one"}"#));
    model.push(Reply::new().tool_call("c2", "write_file", r#"{"path":"b.txt","content":"two"}"#));
    model.push(Reply::new().text("Both written."));
    model.push(Reply::new().tool_call("c3", "shell", r#"{"command":"echo first > s1"}"#));
    model.push(Reply::new().tool_call("c4", "shell", r#"{"command":"echo second > s2"}"#));
    model.push(Reply::new().text("No shell."));
    let mut running = h
        .corral()
        .args(["acp", "-m", "llamacpp:fake-model"])
        .args(["--base-url", &model.openai_base()])
        .live_stdin()
        .spawn()
        .await;
    let session = acp_open(&mut running, &h).await;

    let (done, ask) = prompt_answering(&mut running, &session, 2, 0, "allow_all").await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    assert_eq!(ask["params"]["toolCall"]["toolCallId"], "c1");
    let kinds: Vec<&Value> = ask["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["optionId"] == "allow_all" || o["optionId"] == "disable")
        .map(|o| &o["kind"])
        .collect();
    assert_eq!(kinds, [&json!("allow_always"), &json!("reject_always")]);
    assert_eq!(
        std::fs::read_to_string(h.work().join("a.txt")).unwrap(),
        "one"
    );
    assert_eq!(
        std::fs::read_to_string(h.work().join("b.txt")).unwrap(),
        "two"
    );

    let (done, ask) = prompt_answering(&mut running, &session, 3, 1, "disable").await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    assert_eq!(ask["params"]["toolCall"]["toolCallId"], "c3");
    running.close_stdin();
    let out = running.wait().await;
    // Asked exactly twice: c1 (allowed always, so c2 was not asked) and c3 (rejected
    // always, so c4 was not asked).
    let asked: Vec<Value> = out
        .events()
        .into_iter()
        .filter(is_permission_request)
        .map(|m| m["params"]["toolCall"]["toolCallId"].clone())
        .collect();
    assert_eq!(asked, [json!("c1"), json!("c3")], "{}", out.stdout);
    assert!(!h.work().join("s1").exists() && !h.work().join("s2").exists());
    let sent = model.chat_requests();
    assert_eq!(sent.len(), 6);
    assert!(offered(&sent[3]).contains(&"shell".to_owned()));
    assert!(
        !offered(&sent[4]).contains(&"shell".to_owned()),
        "{:?}",
        offered(&sent[4])
    );
    assert!(!offered(&sent[5]).contains(&"shell".to_owned()));
    assert_eq!(
        tool_reply(&sent[4], "c3"),
        "Error: the user disabled shell for the rest of this session"
    );
    assert_eq!(
        tool_reply(&sent[5], "c4"),
        "Error: refused: the shell tool was disabled for this session"
    );
}
