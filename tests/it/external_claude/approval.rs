//! claude's tool calls answered through corral's gate: allow, deny, cancel, and the read-only
//! commands claude would otherwise run without asking.

use serde_json::{Value, json};

use super::*;
use crate::support::fake_anthropic::message_requests;
use crate::support::{FakeModel, Harness, Outcome};

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

/// The config's `approval_timeout_secs` holds for an external agent's questions as for the
/// native loop's: nobody answers, the call is denied, claude is told why.
#[tokio::test]
async fn an_unanswered_claude_request_is_denied_after_the_configured_timeout() {
    let h = Harness::new();
    h.write_config("approval_timeout_secs = 1\n");
    let server = FakeModel::start().await;
    scripted_tool_call(&server, "touch made-by-claude.txt");
    // stdin stays open and silent: a person who could answer and does not.
    let running = claude_run(&h, &server, &["--approve-stdin", "make the file"])
        .live_stdin()
        .spawn()
        .await;
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let resolved = out
        .of_kind("permission")
        .into_iter()
        .find(|e| e["data"]["resolved"] == true)
        .unwrap_or_else(|| panic!("never resolved: {out:?}"));
    assert_eq!(resolved["data"]["decision"], "deny", "{resolved}");
    assert_eq!(
        resolved["data"]["note"], "nobody answered within 1 s; denied",
        "{resolved}"
    );
    assert!(!h.work().join("made-by-claude.txt").exists());
    assert_eq!(tool_result_sent(&server)["is_error"], true);
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
