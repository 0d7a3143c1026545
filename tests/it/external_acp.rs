//! `acp:<agent>`: corral driving real ACP agents (gemini --acp, claude-agent-acp) against the
//! fake model server, and a scripted agent (`acp:cmd=`) for what real agents will not do on
//! request (an fs call outside the root, a crash). Every test asserts corral's event stream.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::*;
use crate::support::fake_gemini::is_turn_request;
use crate::support::{Cmd, FakeModel, Harness, Outcome, Reply, Running};

const GEMINI_MODEL: &str = "gemini-2.5-flash";
/// Real agents take seconds to start on two shared cores.
const AGENT_TIMEOUT: Duration = Duration::from_secs(180);

/// Where `scripts/install-agent-clis` installs the agent programs.
fn agent_clis() -> PathBuf {
    let home = std::env::var_os("HOME").expect("HOME");
    Path::new(&home).join(".cache/corral-ci/agent-clis/node_modules/.bin")
}

/// PATH with the installed agent programs first; fails the test when `program` is missing.
fn path_with(program: &str) -> String {
    let bin = agent_clis();
    assert!(
        bin.join(program).is_file(),
        "{program} is not installed in {}: run scripts/install-agent-clis",
        bin.display()
    );
    let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
    format!("{}:{path}", bin.display())
}

/// `corral run --json -m acp:gemini:<model>` with gemini pointed at the fake server, offline.
fn gemini_run(h: &Harness, server: &FakeModel, prompt: &str) -> Cmd {
    gemini_cmd(h, server, &format!("acp:gemini:{GEMINI_MODEL}"), prompt)
}

fn gemini_cmd(h: &Harness, server: &FakeModel, spec: &str, prompt: &str) -> Cmd {
    let settings = h.home_dir().join(".gemini");
    std::fs::create_dir_all(&settings).unwrap();
    std::fs::write(
        settings.join("settings.json"),
        json!({
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "privacy": {"usageStatisticsEnabled": false},
            "telemetry": {"enabled": false},
            "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
        })
        .to_string(),
    )
    .unwrap();
    h.corral()
        .env("PATH", path_with("gemini"))
        .env("GEMINI_API_KEY", "dummy")
        .env("GOOGLE_GEMINI_BASE_URL", server.base_url())
        .env("GEMINI_CLI_TRUST_WORKSPACE", "true")
        .args(["run", "--json", "-m", spec, prompt])
        .timeout(AGENT_TIMEOUT)
}

fn is_request(e: &Value) -> bool {
    e["kind"] == "permission" && e["data"].get("resolved").is_none()
}

/// Like `Running::wait_for_event`, with room for a real agent's start-up.
async fn wait_long(running: &Running, n: usize, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + AGENT_TIMEOUT;
    while tokio::time::Instant::now() < deadline {
        if let Some(found) = running
            .events_so_far()
            .into_iter()
            .filter(|e| pred(e))
            .nth(n)
        {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Its panic carries the events and stderr so far.
    running.wait_for_event(n, pred).await
}

async fn answer(running: &mut Running, n: usize, decision: &str) -> Value {
    let request = wait_long(running, n, is_request).await;
    let id = request["data"]["requestId"].as_str().unwrap().to_owned();
    running
        .send_line(&json!({"requestId": id, "decision": decision}).to_string())
        .await;
    request
}

/// The scripted turns gemini asked for (side calls excluded).
fn gemini_turns(server: &FakeModel) -> Vec<Value> {
    server
        .requests()
        .into_iter()
        .filter(|r| is_turn_request(&r.path, &r.body))
        .map(|r| r.body)
        .collect()
}

/// What gemini sent back to the model for a tool call: the functionResponse parts.
fn function_responses(server: &FakeModel) -> String {
    gemini_turns(server)
        .iter()
        .flat_map(|b| b["contents"].as_array().cloned().unwrap_or_default())
        .flat_map(|c| c["parts"].as_array().cloned().unwrap_or_default())
        .filter(|p| p.get("functionResponse").is_some())
        .map(|p| p["functionResponse"].to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The advisory `error` at spawn (seed: "Where an ACP preset is enforced"), before the turn.
fn assert_advisory_first(out: &Outcome) {
    let events = out.events();
    let first_error = events.iter().position(|e| e["kind"] == "error");
    let turn = events.iter().position(|e| e["kind"] == "turn_started");
    let (Some(error), Some(turn)) = (first_error, turn) else {
        panic!("an advisory error and a turn: {out:?}");
    };
    assert!(error < turn, "the advisory comes at spawn: {out:?}");
    let message = events[error]["data"]["message"].as_str().unwrap();
    assert!(message.contains("advisory"), "{message}");
    assert_eq!(events[error]["data"]["data"]["advisory"], true);
}

fn turn_errors(out: &Outcome) -> Vec<Value> {
    out.of_kind("error")
        .into_iter()
        .filter(|e| e["data"]["data"]["advisory"] != true)
        .collect()
}

#[tokio::test]
async fn gemini_text_turn_streams_text_and_ends_the_turn() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(
        Reply::new()
            .text("Hello from ")
            .text("fake gemini.")
            .usage(12, 4),
    );
    let out = gemini_run(&h, &server, "say hello").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_well_formed(&out);
    assert_advisory_first(&out);
    assert!(turn_errors(&out).is_empty(), "{out:?}");
    assert_eq!(result_of(&out)["stopReason"], "end_turn");
    assert_eq!(deltas(&out, "assistant_text"), "Hello from fake gemini.");
    assert_eq!(
        authoritative(&out, "assistant_text"),
        ["Hello from fake gemini."]
    );
    let kinds = out.kinds();
    let pos = |k: &str| kinds.iter().position(|x| x == k).unwrap();
    assert!(pos("turn_started") < pos("user_text"));
    assert!(pos("user_text") < pos("assistant_text"));
    assert!(pos("assistant_text") < pos("result"));
    assert_eq!(statuses(&out).last().unwrap(), "dead");
    // The model came over the wire (session/set_model), not from gemini's router.
    let turns = gemini_turns(&server);
    assert_eq!(turns.len(), 1, "{:?}", server.requests());
    let user = turns[0]["contents"].to_string();
    assert!(user.contains("say hello"), "{user}");
    assert!(
        server
            .requests()
            .iter()
            .any(|r| r.path.contains(&format!("models/{GEMINI_MODEL}:"))),
        "{:?}",
        server
            .requests()
            .iter()
            .map(|r| &r.path)
            .collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn gemini_router_side_call_gets_schema_json_without_taking_a_reply() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("Routed."));
    // No model: gemini's "auto" first asks a flash-lite model to rate the prompt.
    let out = gemini_cmd(&h, &server, "acp:gemini", "route me")
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(authoritative(&out, "assistant_text"), ["Routed."]);
    assert_eq!(result_of(&out)["stopReason"], "end_turn");
    let side_calls = server
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/v1beta/") && !is_turn_request(&r.path, &r.body))
        .count();
    assert!(side_calls >= 1, "{:?}", server.requests());
    assert_eq!(server.pending_replies(), 0);
}

/// A shell call by gemini, approved or refused through `--approve-stdin`.
async fn gemini_shell(decision: &str) -> (Harness, FakeModel, Outcome, Value) {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call(
        "call_1",
        "run_shell_command",
        r#"{"command":"touch made.txt"}"#,
    ));
    server.push(Reply::new().text("Finished."));
    let mut running = gemini_run(&h, &server, "make a file")
        .arg("--approve-stdin")
        .live_stdin()
        .spawn()
        .await;
    let request = answer(&mut running, 0, decision).await;
    let out = running.wait().await;
    (h, server, out, request)
}

#[tokio::test]
async fn gemini_shell_call_allowed_through_the_gate_runs() {
    let (h, server, out, request) = gemini_shell("allow").await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_well_formed(&out);
    let data = &request["data"];
    assert_eq!(data["tool"], "shell", "{request}");
    assert_eq!(data["toolCall"]["kind"], "execute");
    assert!(
        data["toolCall"]["title"]
            .as_str()
            .unwrap()
            .contains("touch made.txt"),
        "{request}"
    );
    let id = data["toolCall"]["toolCallId"].as_str().unwrap();
    let resolved = out
        .of_kind("permission")
        .into_iter()
        .find(|e| e["data"]["resolved"] == true)
        .expect("resolved");
    assert_eq!(resolved["data"]["decision"], "allow");
    let uses = out.of_kind("tool_use");
    assert!(
        uses.iter().any(|u| u["data"]["call"]["toolCallId"] == id),
        "{out:?}"
    );
    let results = out.of_kind("tool_result");
    assert_eq!(results.len(), 1, "{out:?}");
    assert_eq!(results[0]["data"]["update"]["toolCallId"], id);
    assert_eq!(results[0]["data"]["update"]["status"], "completed");
    assert_eq!(results[0]["data"]["result"]["success"], true);
    assert!(h.work().join("made.txt").exists(), "the command ran");
    assert_eq!(result_of(&out)["stopReason"], "end_turn");
    assert_eq!(authoritative(&out, "assistant_text"), ["Finished."]);
    assert!(statuses(&out).contains(&"waiting_approval".to_owned()));
    assert_eq!(gemini_turns(&server).len(), 2);
}

#[tokio::test]
async fn gemini_shell_call_denied_through_the_gate_does_not_run() {
    let (h, server, out, _) = gemini_shell("deny").await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        !h.work().join("made.txt").exists(),
        "the command must not run"
    );
    let results = out.of_kind("tool_result");
    assert_eq!(results.len(), 1, "{out:?}");
    assert_eq!(results[0]["data"]["result"]["success"], false);
    assert!(
        results[0]["data"]["result"]["error"]
            .as_str()
            .unwrap()
            .contains("denied"),
        "{out:?}"
    );
    // gemini told its model the call did not run.
    assert!(
        function_responses(&server).contains("error"),
        "{}",
        function_responses(&server)
    );
    assert_eq!(result_of(&out)["stopReason"], "end_turn");
}

#[tokio::test]
async fn gemini_files_go_through_corrals_fs_callbacks() {
    let h = Harness::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "TOP SECRET").unwrap();
    // Inside the root by name, outside by target.
    std::os::unix::fs::symlink(outside.path(), h.work().join("link")).unwrap();
    std::fs::write(h.work().join("data.txt"), "apple pie\n").unwrap();
    let root = h.work().canonicalize().unwrap();
    let notes = root.join("notes.txt");
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call(
        "w1",
        "write_file",
        &json!({"file_path": notes, "content": "written via corral\n"}).to_string(),
    ));
    server.push(Reply::new().tool_call(
        "r1",
        "read_file",
        &json!({ "file_path": root.join("data.txt") }).to_string(),
    ));
    server.push(Reply::new().tool_call(
        "r2",
        "read_file",
        &json!({ "file_path": root.join("link/secret.txt") }).to_string(),
    ));
    server.push(Reply::new().text("Done."));
    let mut running = gemini_run(&h, &server, "write notes, read data and the secret")
        .env("RUST_LOG", "corral::acp=debug")
        .arg("--approve-stdin")
        .live_stdin()
        .spawn()
        .await;
    let request = answer(&mut running, 0, "allow").await;
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(request["data"]["tool"], "write_file", "{request}");
    assert!(
        request["data"]["diff"]
            .as_str()
            .unwrap()
            .contains("via corral"),
        "{request}"
    );
    // Approved once: the fs/write_text_file that follows is not asked about again.
    let asked = out
        .of_kind("permission")
        .into_iter()
        .filter(is_request)
        .count();
    assert_eq!(asked, 1, "{out:?}");
    assert_eq!(
        std::fs::read_to_string(&notes).unwrap(),
        "written via corral\n"
    );
    // corral wrote the file (fs/write_text_file). gemini 0.61's read_file tool reads on its
    // own, not through fs/* (the advisory at spawn says as much); its write_file checks the
    // file through fs/read_text_file first.
    let served = |what: &str, path: &str| {
        out.stderr
            .lines()
            .any(|l| l.contains(what) && l.contains(path))
    };
    assert!(
        served("fs/write_text_file served", "notes.txt"),
        "{}",
        out.stderr
    );
    assert!(served("fs/read_text_file", "notes.txt"), "{}", out.stderr);
    let responses = function_responses(&server);
    assert!(responses.contains("apple pie"), "{responses}");
    // The link leads out of the root: refused (gemini resolves it itself, corral would too).
    assert!(!responses.contains("TOP SECRET"), "{responses}");
    assert!(!served("served", "secret.txt"), "{}", out.stderr);
    let results = out.of_kind("tool_result");
    assert_eq!(results.len(), 3, "{out:?}");
    let ok: Vec<bool> = results
        .iter()
        .map(|r| r["data"]["result"]["success"].as_bool().unwrap())
        .collect();
    assert_eq!(ok, [true, true, false], "{out:?}");
    assert_eq!(result_of(&out)["stopReason"], "end_turn");
}

#[tokio::test]
async fn gemini_turn_cancelled_mid_reply_sends_session_cancel() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(
        Reply::new()
            .text("Working on it")
            .stall(Duration::from_secs(60))
            .text(" never sent"),
    );
    let running = gemini_run(&h, &server, "take your time").spawn().await;
    wait_long(&running, 0, |e| e["kind"] == "assistant_text").await;
    running.sigint().await;
    let out = running.wait().await;
    assert_eq!(out.code, Some(130), "{out:?}");
    assert_eq!(result_of(&out)["stopReason"], "cancelled");
    assert_eq!(deltas(&out, "assistant_text"), "Working on it");
    assert!(!out.stdout.contains("never sent"));
    assert!(turn_errors(&out).is_empty(), "{out:?}");
    assert_eq!(statuses(&out).last().unwrap(), "dead");
}

/// A scripted ACP agent for `acp:cmd=`, offering the models `small` and (grouped) `large` as a
/// config option and logging each switch to `set_config_option.log` in its cwd. Each prompt is
/// `;`-separated commands: also `think <text>`, `plan`, `usage`, `stop <stopReason>`,
/// `whoami` (its pid to `agent.pid`, its HOME said back), `ask <command>` (a shell call asking permission; the chosen
/// option is said back) (a `session/load` is logged to `session_load.log` and replays a
/// message) — `say <text>`,
/// `read <path>`, `write <path> <content>` (the fs/* answers are said back as text),
/// `crash` (a stderr line, then exit 3).
const SCRIPTED_AGENT: &str = r#"
import json, sys

def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()

next_id = [100]

def request(method, params):
    next_id[0] += 1
    rid = next_id[0]
    send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
    for line in sys.stdin:
        message = json.loads(line)
        if message.get("id") == rid and "method" not in message:
            return message
    sys.exit(0)

def say(sid, text):
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid,
          "update": {"sessionUpdate": "agent_message_chunk",
                     "content": {"type": "text", "text": text}}}})

def options(current):
    return [{"id": "model", "name": "Model", "category": "model", "type": "select",
             "currentValue": current, "options": [{"value": "small", "name": "Small"},
             {"group": "big", "name": "Big", "options": [{"value": "large", "name": "Large"}]}]}]

for line in sys.stdin:
    message = json.loads(line)
    method, mid = message.get("method"), message.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": 1,
              "agentCapabilities": {"loadSession": True}, "authMethods": []}})
    elif method == "session/load":
        sid = message["params"]["sessionId"]
        with open("session_load.log", "a") as log:
            log.write(sid + "\n")
        say(sid, "REPLAYED")
        send({"jsonrpc": "2.0", "id": mid, "result": {"configOptions": options("small")}})
    elif method == "session/new":
        send({"jsonrpc": "2.0", "id": mid, "result": {"sessionId": "scripted-1",
              "configOptions": options("small")}})
    elif method == "session/set_config_option":
        params = message["params"]
        assert params["configId"] == "model", params
        send({"jsonrpc": "2.0", "id": mid, "result": {"configOptions": options(params["value"])}})
        with open("set_config_option.log", "a") as log:
            log.write(params["value"] + "\n")
    elif method == "session/prompt":
        sid = message["params"]["sessionId"]
        stop = "end_turn"
        for command in message["params"]["prompt"][0]["text"].split(";"):
            command = command.strip()
            if command == "ask-and-crash":
                send({"jsonrpc": "2.0", "id": 7, "method": "session/request_permission",
                      "params": {"sessionId": sid, "toolCall": {"toolCallId": "t9",
                      "title": "rm -rf /", "kind": "execute"}, "options": []}})
                sys.stdout.flush()
                import time
                time.sleep(0.5)
                sys.stderr.write("scripted agent: gave up waiting\n")
                sys.exit(3)
            if command == "crash":
                sys.stderr.write("scripted agent: out of cheese\n")
                sys.stderr.flush()
                sys.exit(3)
            elif command.startswith("ask "):
                title = command[4:]
                update = {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": title,
                          "kind": "execute", "status": "pending", "rawInput": {"command": title}}
                send({"jsonrpc": "2.0", "method": "session/update",
                      "params": {"sessionId": sid, "update": update}})
                answer = request("session/request_permission", {"sessionId": sid,
                    "toolCall": {"toolCallId": "t1"}, "options": [
                        {"optionId": "yes", "name": "Yes", "kind": "allow_once"},
                        {"optionId": "always", "name": "Always", "kind": "allow_always"},
                        {"optionId": "no", "name": "No", "kind": "reject_once"}]})
                outcome = answer["result"]["outcome"]
                chosen = outcome.get("optionId", outcome["outcome"])
                status = "completed" if chosen in ("yes", "always") else "failed"
                update = {"sessionUpdate": "tool_call_update", "toolCallId": "t1",
                          "status": status, "rawOutput": chosen}
                send({"jsonrpc": "2.0", "method": "session/update",
                      "params": {"sessionId": sid, "update": update}})
                say(sid, "PERMISSION " + chosen + "\n")
            elif command.startswith("stop "):
                stop = command[5:]
            elif command.startswith("think "):
                send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid,
                      "update": {"sessionUpdate": "agent_thought_chunk",
                                 "content": {"type": "text", "text": command[6:]}}}})
            elif command == "plan":
                entries = [{"content": "look", "priority": "high", "status": "completed"},
                           {"content": "fix", "priority": "medium", "status": "pending"}]
                send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid,
                      "update": {"sessionUpdate": "plan", "entries": entries}}})
            elif command == "usage":
                send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid,
                      "update": {"sessionUpdate": "usage_update", "used": 1200, "size": 200000,
                                 "cost": {"amount": 0.25, "currency": "USD"}}}})
            elif command == "whoami":
                import os
                with open("agent.pid", "w") as f:
                    f.write(str(os.getpid()))
                say(sid, "HOME=" + os.environ.get("HOME", "") + "\n")
            elif command.startswith("say "):
                say(sid, command[4:])
            elif command.startswith("read "):
                answer = request("fs/read_text_file", {"sessionId": sid, "path": command[5:]})
                say(sid, "READ " + json.dumps(answer.get("result", answer.get("error"))) + "\n")
            elif command.startswith("write "):
                path, content = command[6:].split(" ", 1)
                answer = request("fs/write_text_file",
                                 {"sessionId": sid, "path": path, "content": content})
                say(sid, "WRITE " + json.dumps(answer.get("result", answer.get("error"))) + "\n")
        send({"jsonrpc": "2.0", "id": mid, "result": {"stopReason": stop,
              "usage": {"inputTokens": 30, "outputTokens": 7}}})
    elif mid is not None:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": method}})
"#;

/// `corral run --json -m acp:cmd=python3 <scripted agent>`.
fn scripted_run(h: &Harness, prompt: &str) -> Cmd {
    let script = h.home_dir().join("scripted_agent.py");
    std::fs::write(&script, SCRIPTED_AGENT).unwrap();
    h.corral().args([
        "run",
        "--json",
        "-m",
        &format!("acp:cmd=python3 {}", script.display()),
        prompt,
    ])
}

#[tokio::test]
async fn a_crashed_agent_ends_the_turn_with_its_exit_status_and_stderr() {
    let h = Harness::new();
    let out = scripted_run(&h, "say starting; crash").run().await;
    assert_ne!(out.code, Some(0), "{out:?}");
    assert_eq!(deltas(&out, "assistant_text"), "starting");
    let errors = turn_errors(&out);
    assert_eq!(errors.len(), 1, "{out:?}");
    let message = errors[0]["data"]["message"].as_str().unwrap();
    assert!(message.contains("exit status: 3"), "{message}");
    assert!(
        message.contains("scripted agent: out of cheese"),
        "{message}"
    );
    let result = result_of(&out);
    assert_eq!(result["stopReason"], "error");
    assert!(result["error"].as_str().unwrap().contains("out of cheese"));
    assert_eq!(statuses(&out).last().unwrap(), "dead");
    // The agent's stderr is also kept beside the event log.
    let logs = std::fs::read_dir(h.cache_dir().join("corral/agents"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".stderr.log"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect::<String>();
    assert!(logs.contains("out of cheese"), "{logs:?}");
}

#[tokio::test]
async fn fs_callbacks_are_confined_to_the_root_and_gated() {
    let h = Harness::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "TOP SECRET").unwrap();
    let root = h.work().canonicalize().unwrap();
    let prompt = format!(
        "write {inside} hello; write {out_file} nope; read {secret}; read {inside}; \
         write {git} x",
        inside = root.join("in.txt").display(),
        out_file = outside.path().join("out.txt").display(),
        secret = outside.path().join("secret.txt").display(),
        git = root.join(".git/config").display(),
    );
    let out = scripted_run(&h, &prompt)
        .args(["--allow", "write_file"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(root.join("in.txt")).unwrap(),
        "hello"
    );
    assert!(!outside.path().join("out.txt").exists());
    assert!(
        !root.join(".git/config").exists(),
        "the preset's deny rule holds"
    );
    let text = authoritative(&out, "assistant_text").concat();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "{text}");
    assert_eq!(lines[0], "WRITE null");
    assert!(lines[1].contains("outside the session root"), "{text}");
    assert!(lines[2].contains("outside the session root"), "{text}");
    assert!(!text.contains("TOP SECRET"), "{text}");
    assert_eq!(lines[3], r#"READ {"content": "hello"}"#);
    assert!(lines[4].contains(".git"), "{text}");
    // Nobody to ask and --allow write_file: no permission requests at all.
    assert!(out.of_kind("permission").is_empty(), "{out:?}");
    assert_eq!(result_of(&out)["stopReason"], "end_turn");
}

/// `corral run --json -m acp:claude` (claude-agent-acp) against the fake server's Anthropic
/// routes, offline (external-clis.md §2).
fn claude_acp_run(h: &Harness, server: &FakeModel, prompt: &str) -> Cmd {
    h.corral()
        .env("PATH", path_with("claude-agent-acp"))
        .env("ANTHROPIC_BASE_URL", server.base_url())
        .env("ANTHROPIC_API_KEY", "sk-ant-dummy")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        // claude refuses to skip its own prompts as root without it; corral's gate still asks.
        .env("IS_SANDBOX", "1")
        .args(["run", "--json", "-m", "acp:claude", prompt])
        .timeout(AGENT_TIMEOUT)
}

#[tokio::test]
#[ignore = "needs the fake Anthropic routes (tests/it/support/fake_anthropic.rs from the claude backend's branch)"]
async fn claude_agent_acp_bash_call_goes_through_the_gate() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call(
        "toolu_1",
        "Bash",
        r#"{"command":"touch made.txt","description":"Make a file"}"#,
    ));
    server.push(Reply::new().text("Made it."));
    let mut running = claude_acp_run(&h, &server, "make a file")
        .arg("--approve-stdin")
        .live_stdin()
        .spawn()
        .await;
    let request = answer(&mut running, 0, "allow").await;
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_well_formed(&out);
    assert_advisory_first(&out);
    assert_eq!(request["data"]["tool"], "shell", "{request}");
    assert_eq!(request["data"]["toolCall"]["kind"], "execute");
    assert!(h.work().join("made.txt").exists(), "the command ran");
    // Announced first, then once more with the input the agent filled in.
    let uses = out.of_kind("tool_use");
    assert_eq!(
        uses.last().unwrap()["data"]["call"]["rawInput"]["command"],
        "touch made.txt",
        "{out:?}"
    );
    let results = out.of_kind("tool_result");
    assert_eq!(results.len(), 1, "{out:?}");
    assert_eq!(results[0]["data"]["result"]["success"], true);
    assert_eq!(result_of(&out)["stopReason"], "end_turn");
    assert!(
        authoritative(&out, "assistant_text")
            .concat()
            .contains("Made it."),
        "{out:?}"
    );
}

#[tokio::test]
#[ignore = "needs the fake Anthropic routes (tests/it/support/fake_anthropic.rs from the claude backend's branch)"]
async fn claude_agent_acp_write_is_asked_about_with_a_diff() {
    let h = Harness::new();
    let root = h.work().canonicalize().unwrap();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call(
        "toolu_2",
        "Write",
        &json!({"file_path": root.join("notes.txt"), "content": "via corral\n"}).to_string(),
    ));
    server.push(Reply::new().text("Wrote it."));
    let mut running = claude_acp_run(&h, &server, "write notes")
        .arg("--approve-stdin")
        .live_stdin()
        .spawn()
        .await;
    let request = answer(&mut running, 0, "allow").await;
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    // claude-agent-acp 0.101 writes on its own (not through fs/*), after asking.
    assert_eq!(request["data"]["tool"], "write_file", "{request}");
    assert_eq!(request["data"]["agentTool"], "Write", "{request}");
    assert!(
        request["data"]["diff"]
            .as_str()
            .unwrap()
            .contains("via corral"),
        "{request}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("notes.txt")).unwrap(),
        "via corral\n"
    );
    assert_eq!(result_of(&out)["stopReason"], "end_turn");
}

/// One MCP request to `corral mcp` on its stdin; its answer from stdout.
async fn mcp(running: &mut Running, id: u64, method: &str, params: Value) -> Value {
    running
        .send_line(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
        )
        .await;
    running.wait_for_event(0, |m| m["id"] == id).await
}

/// A tool's answer: the JSON text of its first content block.
async fn mcp_tool(running: &mut Running, id: u64, name: &str, arguments: Value) -> Value {
    let answer = mcp(
        running,
        id,
        "tools/call",
        json!({"name": name, "arguments": arguments}),
    )
    .await;
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{name}: {answer}"));
    serde_json::from_str(text).unwrap()
}

#[tokio::test]
async fn agent_set_model_switches_an_acp_agent_through_its_config_option() {
    let h = Harness::new();
    let script = h.home_dir().join("scripted_agent.py");
    std::fs::write(&script, SCRIPTED_AGENT).unwrap();
    let mut running = h.corral().arg("mcp").live_stdin().spawn().await;
    mcp(
        &mut running,
        0,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "it", "version": "1"}}),
    )
    .await;
    running
        .send_line(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await;
    let opened = mcp_tool(
        &mut running,
        1,
        "agent_open",
        json!({"cwd": h.work(), "model": format!("acp:cmd=python3 {}", script.display())}),
    )
    .await;
    let agent = opened["agent_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{opened}"));
    let status = mcp_tool(&mut running, 2, "agent_status", json!({"agent_id": agent})).await;
    assert_eq!(status["queues_prompts"], false, "{status}");
    let switched = mcp_tool(
        &mut running,
        3,
        "agent_set_model",
        json!({"agent_id": agent, "model": "large"}),
    )
    .await;
    assert_eq!(switched["switched"], true, "{switched}");
    let unknown = mcp_tool(
        &mut running,
        4,
        "agent_set_model",
        json!({"agent_id": agent, "model": "huge"}),
    )
    .await;
    let error = unknown["error"]
        .as_str()
        .unwrap_or_else(|| panic!("{unknown}"));
    assert!(
        error.contains("huge") && error.contains("small, large"),
        "{error}"
    );
    let log = std::fs::read_to_string(h.work().join("set_config_option.log")).unwrap();
    assert_eq!(log, "large\n", "only the known model reached the agent");
    running.close_stdin();
    running.wait().await;
}

/// `corral run --json -m acp:opencode:fake/fake-model`, opencode's provider pointed at the
/// fake server's OpenAI route, offline (external-clis.md §3). opencode is slow to start
/// (13 s on two cores), so its tests are a separate tier:
/// `cargo test --test integration external_acp::opencode -- --ignored`.
fn opencode_run(h: &Harness, server: &FakeModel, prompt: &str) -> Cmd {
    let config = h.home_dir().join("opencode.json");
    std::fs::write(
        &config,
        json!({
            "$schema": "https://opencode.ai/config.json",
            "model": "fake/fake-model",
            "small_model": "fake/fake-model",
            "autoupdate": false,
            "share": "disabled",
            "provider": {"fake": {
                "npm": "@ai-sdk/openai-compatible",
                "options": {"baseURL": server.openai_base(), "apiKey": "dummy"},
                "models": {"fake-model": {"tool_call": true,
                    "limit": {"context": 128_000, "output": 4096}}},
            }},
        })
        .to_string(),
    )
    .unwrap();
    h.corral()
        .env("PATH", path_with("opencode"))
        .env("OPENCODE_CONFIG", &config)
        .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
        .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
        .env("OPENCODE_DISABLE_LSP_DOWNLOAD", "1")
        .env("OPENCODE_DISABLE_SHARE", "1")
        .env("OPENCODE_PERMISSION", r#"{"bash":"ask"}"#)
        .env("npm_config_registry", "http://127.0.0.1:9/")
        .args([
            "run",
            "--json",
            "-m",
            "acp:opencode:fake/fake-model",
            prompt,
        ])
        .timeout(AGENT_TIMEOUT)
}

#[tokio::test]
#[ignore = "slow tier (opencode takes ~15 s to start): run with --ignored"]
async fn opencode_bash_call_goes_through_the_gate() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    // opencode asks for a title first, on the same route.
    server.push(Reply::new().text("A title"));
    server.push(Reply::new().tool_call(
        "call_1",
        "bash",
        r#"{"command":"touch made.txt","description":"make"}"#,
    ));
    server.push(Reply::new().text("Made it."));
    let mut running = opencode_run(&h, &server, "make a file")
        .arg("--approve-stdin")
        .live_stdin()
        .spawn()
        .await;
    let request = answer(&mut running, 0, "allow").await;
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(request["data"]["tool"], "shell", "{request}");
    assert!(h.work().join("made.txt").exists(), "the command ran");
    let results = out.of_kind("tool_result");
    assert_eq!(results.len(), 1, "{out:?}");
    assert_eq!(results[0]["data"]["result"]["success"], true);
    assert_eq!(authoritative(&out, "assistant_text"), ["Made it."]);
    assert_eq!(result_of(&out)["stopReason"], "end_turn");
    // The model was chosen over the wire (session/set_config_option) and used.
    let turns = server.chat_requests();
    assert!(
        turns.iter().all(|b| b["model"] == "fake-model"),
        "{turns:?}"
    );
}

#[tokio::test]
async fn resume_loads_the_agents_own_session_without_replaying_it() {
    let h = Harness::new();
    let first = scripted_run(&h, "say first").run().await;
    assert_eq!(first.code, Some(0), "{first:?}");
    let id = first.events()[0]["agent"].as_str().unwrap().to_owned();
    let second = h
        .corral()
        .args(["run", "--json", "--resume", &id, "say second"])
        .run()
        .await;
    assert_eq!(second.code, Some(0), "{second:?}");
    assert_eq!(second.events()[0]["agent"], id.as_str());
    assert_eq!(second.of_kind("turn_started")[0]["turn"], 2);
    // The agent's session came back by its own id; its replay is not shown again.
    let loads = std::fs::read_to_string(h.work().join("session_load.log")).unwrap();
    assert_eq!(loads, "scripted-1\n");
    assert_eq!(authoritative(&second, "assistant_text"), ["second"]);
    assert!(!second.stdout.contains("REPLAYED"), "{second:?}");
}

#[tokio::test]
async fn permission_answers_pick_the_agents_options_by_kind() {
    for (decision, chosen, stop) in [
        ("allow", "yes", "end_turn"),
        ("allow_all", "always", "end_turn"),
        ("deny", "no", "end_turn"),
        ("cancel", "cancelled", "cancelled"),
    ] {
        let h = Harness::new();
        let mut running = scripted_run(&h, "ask rm -rf build")
            .arg("--approve-stdin")
            .live_stdin()
            .spawn()
            .await;
        let request = answer(&mut running, 0, decision).await;
        let out = running.wait().await;
        assert_eq!(request["data"]["tool"], "shell", "{request}");
        assert_eq!(
            request["data"]["toolCall"]["rawInput"]["command"],
            "rm -rf build"
        );
        let text = deltas(&out, "assistant_text");
        assert_eq!(
            text,
            format!("PERMISSION {chosen}\n"),
            "{decision}: {out:?}"
        );
        assert_eq!(result_of(&out)["stopReason"], stop, "{decision}: {out:?}");
        let results = out.of_kind("tool_result");
        assert_eq!(results.len(), 1, "{decision}: {out:?}");
        assert_eq!(
            results[0]["data"]["result"]["success"],
            decision.starts_with("allow"),
            "{decision}: {out:?}"
        );
    }
}

#[tokio::test]
async fn a_crash_while_a_person_is_asked_withdraws_the_question() {
    let h = Harness::new();
    let running = scripted_run(&h, "ask-and-crash")
        .arg("--approve-stdin")
        .live_stdin()
        .spawn()
        .await;
    running.wait_for_event(0, is_request).await;
    let out = running.wait().await;
    let resolved: Vec<Value> = out
        .of_kind("permission")
        .into_iter()
        .filter(|e| e["data"]["resolved"] == true)
        .collect();
    assert_eq!(resolved.len(), 1, "{out:?}");
    let errors = turn_errors(&out);
    assert_eq!(errors.len(), 1, "{out:?}");
    assert!(
        errors[0]["data"]["message"]
            .as_str()
            .unwrap()
            .contains("gave up waiting"),
        "{out:?}"
    );
    assert_eq!(result_of(&out)["stopReason"], "error");
    assert_eq!(statuses(&out).last().unwrap(), "dead");
}

#[tokio::test]
async fn thoughts_plans_usage_and_stop_reasons_map_to_events() {
    let h = Harness::new();
    let out = scripted_run(
        &h,
        "think pondering; plan; usage; say done; stop max_tokens",
    )
    .run()
    .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(authoritative(&out, "thought"), ["pondering"]);
    assert_eq!(authoritative(&out, "assistant_text"), ["done"]);
    let plan = &out.of_kind("plan")[0]["data"]["entries"];
    assert_eq!(plan[1]["content"], "fix", "{plan}");
    let usage = out.of_kind("usage");
    assert_eq!(usage[0]["data"]["contextTokens"], 1200);
    assert_eq!(usage[0]["data"]["contextWindow"], 200000);
    assert_eq!(usage[0]["data"]["usage"]["costUsd"], 0.25);
    // max_tokens: the turn stands, with a note.
    let result = result_of(&out);
    assert_eq!(result["stopReason"], "end_turn");
    assert_eq!(result["usage"]["inputTokens"], 30);
    assert_eq!(result["usage"]["outputTokens"], 7);
    let notes = turn_errors(&out);
    assert_eq!(notes.len(), 1, "{out:?}");
    assert_eq!(notes[0]["data"]["data"]["stopReason"], "max_tokens");

    let refused = scripted_run(&h, "say no; stop refusal").run().await;
    let result = result_of(&refused);
    assert_eq!(result["stopReason"], "error", "{refused:?}");
    assert!(result["error"].as_str().unwrap().contains("refusal"));
    let limited = scripted_run(&h, "say on; stop max_turn_requests")
        .run()
        .await;
    assert_eq!(
        result_of(&limited)["stopReason"],
        "max_steps",
        "{limited:?}"
    );
}

#[tokio::test]
async fn hermetic_agents_get_a_private_home_and_die_with_the_session() {
    let h = Harness::new();
    let out = scripted_run(&h, "whoami").arg("--hermetic").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let text = authoritative(&out, "assistant_text").concat();
    let home = text.trim().strip_prefix("HOME=").unwrap();
    assert!(
        !home.is_empty() && Path::new(home) != h.home_dir(),
        "{text}"
    );
    // The private home lived in the session's temp dir, gone with it.
    assert!(!Path::new(home).exists(), "{home}");
    let pid: i32 = std::fs::read_to_string(h.work().join("agent.pid"))
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "the agent process {pid} is gone"
    );
}
