//! `claude[:<model>]` end to end: the real claude CLI (installed by scripts/install-agent-clis)
//! kept alive in stream-json mode, talking to the fake model server's Anthropic routes on
//! 127.0.0.1. Each test asserts corral's event stream.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::*;
use crate::support::fake_anthropic::{message_requests, texts};
use crate::support::{Cmd, FakeModel, Harness, Outcome, Reply};

/// The claude program: `$CORRAL_CLAUDE`, the CI install, or `claude` on PATH. Missing is a
/// failure, not a skip.
fn claude_program() -> PathBuf {
    if let Some(path) = std::env::var_os("CORRAL_CLAUDE") {
        return PathBuf::from(path);
    }
    let home = std::env::var_os("HOME").unwrap_or_default();
    let installed = Path::new(&home).join(".cache/corral-ci/agent-clis/node_modules/.bin/claude");
    if installed.exists() {
        return installed;
    }
    let on_path = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("claude"))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
        .into_iter()
        .find(|p| p.exists());
    on_path.unwrap_or_else(|| {
        panic!(
            "the claude CLI is not installed: run scripts/install-agent-clis (or set \
             CORRAL_CLAUDE to a claude binary)"
        )
    })
}

/// `corral run -m claude:fake-model --json …` with the env that keeps claude on 127.0.0.1.
fn claude_run(h: &Harness, server: &FakeModel, args: &[&str]) -> Cmd {
    h.corral()
        .args(["run", "-m", "claude:fake-model", "--json"])
        .args(args.iter().copied())
        .env("CORRAL_CLAUDE", claude_program())
        .env("ANTHROPIC_BASE_URL", server.base_url())
        .env("ANTHROPIC_API_KEY", "sk-ant-dummy")
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        .env("RUST_LOG", "corral=debug")
        .timeout(Duration::from_secs(120))
}

/// The kinds with runs of liveness deltas collapsed into one `…_delta` entry, status left out.
fn shape(out: &Outcome, turn: u64) -> Vec<String> {
    let mut shape: Vec<String> = Vec::new();
    for e in out
        .events()
        .iter()
        .filter(|e| e["turn"] == turn && e["kind"] != "status")
    {
        let kind = e["kind"].as_str().unwrap_or("");
        let name = if e["data"]["delta"] == true || kind == "tool_input_delta" {
            format!("{kind}+delta")
        } else {
            kind.to_owned()
        };
        if shape.last() != Some(&name) || !name.ends_with("+delta") {
            shape.push(name);
        }
    }
    shape
}

#[tokio::test]
async fn two_turns_in_one_process_and_the_second_sees_the_first() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("FIRST ").text("ANSWER").usage(21, 7));
    server.push(Reply::new().text("SECOND ANSWER"));
    let out = claude_run(&h, &server, &["-i"])
        .stdin_text("first turn hello\nsecond turn please\n")
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_well_formed(&out);
    assert_eq!(
        shape(&out, 1),
        [
            "turn_started",
            "user_text",
            "assistant_text+delta",
            "assistant_text",
            "usage",
            "result"
        ],
        "{:?}",
        out.events()
    );
    assert_eq!(shape(&out, 2), shape(&out, 1));
    assert_eq!(
        authoritative(&out, "assistant_text"),
        ["FIRST ANSWER", "SECOND ANSWER"]
    );
    assert_eq!(deltas(&out, "assistant_text"), "FIRST ANSWERSECOND ANSWER");
    let results = out.of_kind("result");
    assert_eq!(results.len(), 2);
    for result in &results {
        assert_eq!(result["data"]["stopReason"], "end_turn", "{result}");
    }
    assert_eq!(results[0]["data"]["usage"]["outputTokens"], 7);
    assert_eq!(
        statuses(&out),
        [
            "starting", "idle", "working", "idle", "working", "idle", "dead"
        ]
    );
    // One process for both turns: the second request carries the whole conversation.
    let requests = message_requests(&server);
    assert_eq!(requests.len(), 2, "{requests:?}");
    let second = texts(&requests[1]).join("\n");
    for needle in ["first turn hello", "FIRST ANSWER", "second turn please"] {
        assert!(second.contains(needle), "{needle:?} not in {second}");
    }
    assert!(!texts(&requests[0]).join("\n").contains("second turn"));
}

fn is_request(e: &Value) -> bool {
    e["kind"] == "permission" && e["data"].get("resolved").is_none()
}

/// Position of the first event matching `pred`; fails the test when there is none.
fn position(events: &[Value], what: &str, pred: impl Fn(&Value) -> bool) -> usize {
    events
        .iter()
        .position(pred)
        .unwrap_or_else(|| panic!("no {what} event in {events:#?}"))
}

/// A Bash call claude must ask about, then the model's reply to its result.
fn scripted_tool_call(server: &FakeModel, command: &str) {
    let input = json!({"command": command, "description": "make a file"}).to_string();
    server.push(Reply::new().text("I will run it.").tool_call_split(
        "toolu_fake1",
        "Bash",
        &[&input[..10], &input[10..]],
    ));
    server.push(Reply::new().text("The command was handled."));
}

/// Runs a Bash call through corral's gate and answers the permission request with `decision`.
async fn approve_bash(decision: &str) -> (Harness, FakeModel, Outcome, Value) {
    approve_command("touch made-by-claude.txt", decision).await
}

async fn approve_command(command: &str, decision: &str) -> (Harness, FakeModel, Outcome, Value) {
    let h = Harness::new();
    let server = FakeModel::start().await;
    scripted_tool_call(&server, command);
    let mut running = claude_run(&h, &server, &["--approve-stdin", "make the file"])
        .live_stdin()
        .spawn()
        .await;
    let request = running.wait_for_event(0, is_request).await;
    let id = request["data"]["requestId"].as_str().unwrap().to_owned();
    running
        .send_line(&json!({"requestId": id, "decision": decision}).to_string())
        .await;
    let out = running.wait().await;
    (h, server, out, request)
}

/// What every approval run shows: claude's call announced, then asked about through corral's
/// gate as a shell command, then its result, then the model's answer.
fn assert_approval_flow(out: &Outcome, request: &Value, decision: &str) -> Value {
    assert_well_formed(out);
    let data = &request["data"];
    assert_eq!(data["tool"], "shell", "{request}");
    assert_eq!(data["agentTool"], "Bash");
    assert_eq!(data["danger"], "dangerous");
    assert_eq!(data["toolCall"]["toolCallId"], "toolu_fake1");
    assert_eq!(data["toolCall"]["kind"], "execute");
    assert_eq!(
        data["toolCall"]["rawInput"]["command"],
        "touch made-by-claude.txt"
    );
    let events = out.events();
    let announce = position(&events, "tool_use announce", |e| {
        e["kind"] == "tool_use" && e["data"]["call"]["status"] == "pending"
    });
    let input_delta = position(&events, "tool_input_delta", |e| {
        e["kind"] == "tool_input_delta" && e["data"]["toolCallId"] == "toolu_fake1"
    });
    let full = position(&events, "authoritative tool_use", |e| {
        e["kind"] == "tool_use" && e["data"]["call"]["status"] == "in_progress"
    });
    let asked = position(&events, "permission request", is_request);
    let resolved = position(&events, "permission resolution", |e| {
        e["kind"] == "permission" && e["data"]["resolved"] == true
    });
    let result = position(&events, "tool_result", |e| e["kind"] == "tool_result");
    let answer = position(&events, "final text", |e| {
        e["kind"] == "assistant_text"
            && e["data"]["delta"] == false
            && e["data"]["content"]["text"] == "The command was handled."
    });
    let end = position(&events, "result", |e| e["kind"] == "result");
    assert!(
        announce < input_delta && input_delta < full && full < asked && asked < resolved,
        "order: {events:#?}"
    );
    assert!(
        resolved < result && result < answer && answer < end,
        "order: {events:#?}"
    );
    assert_eq!(
        events[announce]["data"]["call"]["toolCallId"],
        "toolu_fake1"
    );
    assert_eq!(
        events[full]["data"]["call"]["rawInput"]["command"],
        "touch made-by-claude.txt"
    );
    assert_eq!(
        events[full]["data"]["call"]["title"],
        "touch made-by-claude.txt"
    );
    assert_eq!(events[resolved]["data"]["decision"], decision);
    assert_eq!(events[end]["data"]["stopReason"], "end_turn");
    let statuses = statuses(out);
    assert!(
        statuses
            .windows(2)
            .any(|w| w == ["waiting_approval", "working"]),
        "{statuses:?}"
    );
    assert_eq!(statuses.last().map(String::as_str), Some("dead"));
    events[result]["data"].clone()
}

/// The `tool_result` block claude sent back to the model for the call.
fn tool_result_sent(server: &FakeModel) -> Value {
    let requests = message_requests(server);
    assert_eq!(requests.len(), 2, "{requests:#?}");
    requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .find(|b| b["type"] == "tool_result" && b["tool_use_id"] == "toolu_fake1")
        .unwrap_or_else(|| panic!("no tool_result in {:#?}", requests[1]))
}

#[tokio::test]
async fn a_bash_call_allowed_through_corrals_gate_runs() {
    let (h, server, out, request) = approve_bash("allow").await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let result = assert_approval_flow(&out, &request, "allow");
    assert_eq!(result["result"]["success"], true, "{result}");
    assert_eq!(result["result"]["tool"], "Bash");
    assert_eq!(result["result"]["toolCallId"], "toolu_fake1");
    assert_eq!(result["update"]["status"], "completed");
    assert!(h.work().join("made-by-claude.txt").exists());
    assert_ne!(tool_result_sent(&server)["is_error"], true);
}

#[tokio::test]
async fn a_bash_call_denied_through_corrals_gate_does_not_run_and_claude_is_told() {
    let (h, server, out, request) = approve_bash("deny").await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let result = assert_approval_flow(&out, &request, "deny");
    assert_eq!(result["result"]["success"], false, "{result}");
    assert_eq!(result["update"]["status"], "failed");
    let error = result["result"]["error"].as_str().unwrap();
    assert!(error.contains("the user denied this call"), "{error}");
    assert!(!h.work().join("made-by-claude.txt").exists());
    let sent = tool_result_sent(&server);
    assert_eq!(sent["is_error"], true, "{sent}");
    assert!(
        sent.to_string().contains("the user denied this call"),
        "{sent}"
    );
}

#[tokio::test]
async fn an_interrupt_mid_turn_ends_it_cancelled_and_the_session_goes_on() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(
        Reply::new()
            .text("slow start ")
            .stall(Duration::from_secs(60))
            .text("never sent"),
    );
    server.push(Reply::new().text("STILL HERE"));
    let mut running = claude_run(&h, &server, &["-i", "count slowly"])
        .live_stdin()
        .spawn()
        .await;
    running
        .wait_for_event(0, |e| {
            e["kind"] == "assistant_text" && e["data"]["content"]["text"] == "slow start "
        })
        .await;
    running.sigint().await;
    let cancelled = running.wait_for_event(0, |e| e["kind"] == "result").await;
    assert_eq!(cancelled["data"]["stopReason"], "cancelled", "{cancelled}");
    assert!(cancelled["data"].get("error").is_none(), "{cancelled}");
    running.send_line("are you there").await;
    running.close_stdin();
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_well_formed(&out);
    // The interrupted stream was dropped by claude, not run to its end.
    assert!(
        server.wait_for_cancelled(1, Duration::from_secs(5)).await,
        "claude kept reading the interrupted reply"
    );
    let first = shape(&out, 1);
    assert_eq!(
        first,
        [
            "turn_started",
            "user_text",
            "assistant_text+delta",
            "assistant_text",
            "usage",
            "result"
        ],
        "{:#?}",
        out.events()
    );
    assert!(out.of_kind("error").is_empty(), "{:#?}", out.events());
    assert!(!out.stdout.contains("never sent"));
    let results = out.of_kind("result");
    assert_eq!(results.len(), 2);
    assert_eq!(results[1]["data"]["stopReason"], "end_turn");
    // What streamed before the interrupt stays, as claude's authoritative text.
    assert_eq!(
        authoritative(&out, "assistant_text"),
        ["slow start ", "STILL HERE"]
    );
    assert_eq!(
        statuses(&out),
        [
            "starting", "idle", "working", "idle", "working", "idle", "dead"
        ]
    );
}

/// A wrapper that runs the real claude (its pid in `pid_file`) and, once claude is gone, says so
/// on stderr and exits 3.
fn wrapper_script(h: &Harness, pid_file: &Path) -> PathBuf {
    let wrapper = h.home_dir().join("claude-wrapper");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/bash\n\"{}\" \"$@\" <&0 &\necho $! > \"{}\"\nwait $!\n\
             echo \"wrapper: claude is gone\" >&2\nexit 3\n",
            claude_program().display(),
            pid_file.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    wrapper
}

fn kill_claude(pid_file: &Path) {
    let pid = std::fs::read_to_string(pid_file).unwrap();
    let status = std::process::Command::new("kill")
        .args(["-KILL", pid.trim()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::test]
async fn a_crash_of_claude_mid_turn_is_an_error_with_its_exit_status_and_stderr() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(
        Reply::new()
            .text("working on it ")
            .stall(Duration::from_secs(60))
            .text("never sent"),
    );
    let pid_file = h.home_dir().join("claude.pid");
    let wrapper = wrapper_script(&h, &pid_file);
    let running = claude_run(&h, &server, &["do some work"])
        .env("CORRAL_CLAUDE", &wrapper)
        .spawn()
        .await;
    running
        .wait_for_event(0, |e| {
            e["kind"] == "assistant_text" && e["data"]["content"]["text"] == "working on it "
        })
        .await;
    kill_claude(&pid_file);
    let out = running.wait().await;
    assert_eq!(out.code, Some(1), "{out:?}");
    assert_well_formed(&out);
    let events = out.events();
    let tail: Vec<&str> = events
        .iter()
        .rev()
        .take(3)
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(tail, ["status", "result", "error"], "{events:#?}");
    let error = &out.of_kind("error")[0]["data"];
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("exit status: 3"), "{message}");
    assert!(message.contains("wrapper: claude is gone"), "{message}");
    assert_eq!(error["data"]["exitCode"], 3);
    assert!(
        error["data"]["stderr"]
            .as_str()
            .unwrap()
            .contains("wrapper: claude is gone")
    );
    let result = result_of(&out);
    assert_eq!(result["stopReason"], "error");
    assert!(result["error"].as_str().unwrap().contains("exit status: 3"));
    assert_eq!(statuses(&out), ["starting", "idle", "working", "dead"]);
    // The session's stderr log kept what claude's side printed.
    let logs = std::fs::read_dir(h.cache_dir().join("corral/agents"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".stderr.log"))
        .collect::<Vec<_>>();
    assert_eq!(logs.len(), 1, "{logs:?}");
    assert!(
        std::fs::read_to_string(&logs[0])
            .unwrap()
            .contains("wrapper: claude is gone")
    );
}

#[tokio::test]
async fn an_api_failure_reported_as_success_with_is_error_is_an_error() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().status(
        500,
        r#"{"type":"error","error":{"type":"api_error","message":"fake overload"}}"#,
    ));
    let out = claude_run(&h, &server, &["hello"]).run().await;
    assert_eq!(out.code, Some(1), "{out:?}");
    assert_well_formed(&out);
    assert_eq!(
        shape(&out, 1),
        [
            "turn_started",
            "user_text",
            "assistant_text",
            "usage",
            "error",
            "result"
        ],
        "{:#?}",
        out.events()
    );
    let result = result_of(&out);
    assert_eq!(result["stopReason"], "error");
    let error = result["error"].as_str().unwrap();
    assert!(
        error.contains("500") || error.contains("fake overload"),
        "{error}"
    );
    assert_eq!(out.of_kind("error")[0]["data"]["message"], error);
    // claude words the failure as its own reply too; it is shown as such.
    assert_eq!(authoritative(&out, "assistant_text"), [error]);
}

#[tokio::test]
async fn a_resumed_session_continues_claudes_own_conversation() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("OK PAPAYA"));
    server.push(Reply::new().text("It was PAPAYA."));
    let first = claude_run(&h, &server, &["remember the word PAPAYA"])
        .run()
        .await;
    assert_eq!(first.code, Some(0), "{first:?}");
    let id = first.events()[0]["agent"].as_str().unwrap().to_owned();
    let second = claude_run(&h, &server, &["--resume", &id, "what was the word?"])
        .run()
        .await;
    assert_eq!(second.code, Some(0), "{second:?}");
    assert_well_formed(&second);
    assert_eq!(second.events()[0]["agent"], id.as_str());
    assert_eq!(authoritative(&second, "assistant_text"), ["It was PAPAYA."]);
    assert_eq!(result_of(&second)["stopReason"], "end_turn");
    // A new claude process, started with --resume: the history is claude's own, replayed.
    let requests = message_requests(&server);
    assert_eq!(requests.len(), 2, "{requests:#?}");
    let history = texts(&requests[1]).join("\n");
    for needle in [
        "remember the word PAPAYA",
        "OK PAPAYA",
        "what was the word?",
    ] {
        assert!(history.contains(needle), "{needle:?} not in {history}");
    }
    let claude_session = |body: &Value| -> String {
        let user: Value =
            serde_json::from_str(body["metadata"]["user_id"].as_str().unwrap()).unwrap();
        user["session_id"].as_str().unwrap().to_owned()
    };
    assert_eq!(claude_session(&requests[0]), claude_session(&requests[1]));
}

#[tokio::test]
async fn a_read_only_command_claude_would_run_unasked_still_goes_through_the_gate() {
    // corral's default preset asks before any shell command; claude on its own would not ask
    // about `ls`.
    let (_h, server, out, request) = approve_command("ls", "allow").await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(request["data"]["tool"], "shell");
    assert_eq!(request["data"]["toolCall"]["rawInput"]["command"], "ls");
    let result = &out.of_kind("tool_result")[0]["data"]["result"];
    assert_eq!(result["success"], true, "{result}");
    assert_ne!(tool_result_sent(&server)["is_error"], true);
}

#[tokio::test]
async fn cancel_answered_to_a_permission_request_interrupts_the_turn() {
    let (h, _server, out, _request) = approve_command("touch never.txt", "cancel").await;
    assert_eq!(out.code, Some(130), "{out:?}");
    assert_well_formed(&out);
    assert!(!h.work().join("never.txt").exists());
    let events = out.events();
    let resolved = position(&events, "permission resolution", |e| {
        e["kind"] == "permission" && e["data"]["resolved"] == true
    });
    assert_eq!(events[resolved]["data"]["decision"], "cancel");
    let result = result_of(&out);
    assert_eq!(result["stopReason"], "cancelled", "{result}");
    assert!(out.of_kind("error").is_empty(), "{events:#?}");
    // The model was never asked again: the turn ended at the interrupt.
    assert!(!out.stdout.contains("The command was handled."));
    assert_eq!(statuses(&out).last().map(String::as_str), Some("dead"));
}

#[tokio::test]
async fn a_crash_between_turns_moves_the_session_to_dead_at_once() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("first done"));
    let pid_file = h.home_dir().join("claude.pid");
    let wrapper = wrapper_script(&h, &pid_file);
    let mut running = claude_run(&h, &server, &["-i", "first"])
        .env("CORRAL_CLAUDE", &wrapper)
        .live_stdin()
        .spawn()
        .await;
    running.wait_for_event(0, |e| e["kind"] == "result").await;
    kill_claude(&pid_file);
    let error = running.wait_for_event(0, |e| e["kind"] == "error").await;
    running
        .wait_for_event(0, |e| {
            e["kind"] == "status" && e["data"]["status"] == "dead"
        })
        .await;
    let message = error["data"]["message"].as_str().unwrap();
    assert!(message.contains("exit status: 3"), "{message}");
    assert!(message.contains("wrapper: claude is gone"), "{message}");
    running.close_stdin();
    let out = running.wait().await;
    assert_well_formed(&out);
    assert_eq!(
        statuses(&out),
        ["starting", "idle", "working", "idle", "dead"]
    );
    assert_eq!(out.of_kind("result").len(), 1);
}

fn offered_tools(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn the_readonly_preset_takes_claudes_writing_tools_away() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("looked only"));
    let out = claude_run(&h, &server, &["-p", "readonly", "look around"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(result_of(&out)["stopReason"], "end_turn");
    let tools = offered_tools(&message_requests(&server)[0]);
    assert!(tools.iter().any(|t| t == "Read"), "{tools:?}");
    for gone in [
        "Bash",
        "Write",
        "Edit",
        "NotebookEdit",
        "WebFetch",
        "Task",
        "Agent",
    ] {
        assert!(
            !tools.iter().any(|t| t == gone),
            "{gone} offered: {tools:?}"
        );
    }
}

#[tokio::test]
async fn the_bypass_preset_runs_claudes_tools_without_asking() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    scripted_tool_call(&server, "touch bypassed.txt");
    // No --approve-stdin: nobody could answer, and nothing asks.
    let out = claude_run(&h, &server, &["-p", "bypass", "make the file"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.of_kind("permission").is_empty(), "{:#?}", out.events());
    let result = &out.of_kind("tool_result")[0]["data"]["result"];
    assert_eq!(result["success"], true, "{result}");
    assert!(h.work().join("bypassed.txt").exists());
    assert_eq!(result_of(&out)["stopReason"], "end_turn");
}

#[tokio::test]
async fn a_crash_while_a_person_is_asked_withdraws_the_question_and_ends_dead() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    scripted_tool_call(&server, "touch never.txt");
    let pid_file = h.home_dir().join("claude.pid");
    let wrapper = wrapper_script(&h, &pid_file);
    let running = claude_run(&h, &server, &["--approve-stdin", "make the file"])
        .env("CORRAL_CLAUDE", &wrapper)
        .live_stdin()
        .spawn()
        .await;
    running.wait_for_event(0, is_request).await;
    kill_claude(&pid_file);
    // Nobody answers: the question is withdrawn because claude is gone.
    let out = running.wait().await;
    assert_eq!(out.code, Some(1), "{out:?}");
    assert_well_formed(&out);
    let events = out.events();
    let resolved = position(&events, "permission withdrawal", |e| {
        e["kind"] == "permission" && e["data"]["resolved"] == true
    });
    assert_eq!(events[resolved]["data"]["decision"], "deny");
    let error = position(&events, "error", |e| e["kind"] == "error");
    let end = position(&events, "result", |e| e["kind"] == "result");
    assert!(resolved < error && error < end, "{events:#?}");
    let message = events[error]["data"]["message"].as_str().unwrap();
    assert!(message.contains("exit status: 3"), "{message}");
    assert_eq!(events[end]["data"]["stopReason"], "error");
    assert!(!h.work().join("never.txt").exists());
    assert_eq!(
        statuses(&out),
        [
            "starting",
            "idle",
            "working",
            "waiting_approval",
            "working",
            "dead"
        ]
    );
}
