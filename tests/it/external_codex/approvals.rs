//! codex's approval requests answered through corral's gate: a person allowing, denying
//! or cancelling, presets deciding alone, a file change shown as corral's diff.

use serde_json::{Value, json};

use super::*;
use crate::support::{FakeModel, Harness, Outcome, Reply, Running};

/// A shell call that codex asks about, answered through corral's gate with `decision`.
async fn shell_call_answered(decision: &str) -> (Harness, FakeModel, Outcome, Value) {
    let program = codex_program();
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call(
        "call_touch",
        "exec_command",
        r#"{"cmd":"touch made.txt"}"#,
    ));
    server.push(Reply::new().text("ALL_DONE"));
    let mut running: Running = codex_run(&h, &server, &program)
        .arg("--approve-stdin")
        .arg("make the file")
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

fn assert_shell_request(out: &Outcome, request: &Value) {
    let data = &request["data"];
    assert_eq!(data["tool"], "shell", "{request}");
    assert_eq!(data["agentTool"], "commandExecution");
    assert_eq!(data["command"], "touch made.txt", "{request}");
    assert_eq!(data["toolCall"]["kind"], "execute");
    let uses = out.of_kind("tool_use");
    assert_eq!(uses.len(), 1, "{out:?}");
    let call = &uses[0]["data"]["call"];
    assert_eq!(call["kind"], "execute");
    assert_eq!(call["rawInput"]["command"], "touch made.txt");
    assert_eq!(data["toolCall"]["toolCallId"], call["toolCallId"]);
    let kinds = turn_kinds(out, 1);
    let at = |k: &str| kinds.iter().position(|x| x == k).unwrap_or(usize::MAX);
    assert!(
        at("turn_started") < at("tool_use")
            && at("tool_use") < at("permission")
            && at("permission") < at("tool_result")
            && at("tool_result") < at("assistant_text")
            && at("assistant_text") < at("result"),
        "{kinds:?}"
    );
    assert_eq!(
        statuses(out),
        [
            "starting",
            "idle",
            "working",
            "waiting_approval",
            "working",
            "idle",
            "dead"
        ]
    );
    assert_eq!(authoritative(out, "assistant_text"), ["ALL_DONE"]);
    assert_eq!(result_of(out)["stopReason"], "end_turn");
}

#[tokio::test]
async fn an_allowed_shell_call_runs() {
    let (h, server, out, request) = shell_call_answered("allow").await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_shell_request(&out, &request);
    let result = &out.of_kind("tool_result")[0]["data"];
    assert_eq!(result["result"]["success"], true, "{result}");
    assert_eq!(result["result"]["tool"], "shell");
    assert_eq!(result["update"]["status"], "completed");
    assert!(h.work().join("made.txt").exists());
    let resolved = out
        .of_kind("permission")
        .into_iter()
        .find(|e| e["data"]["resolved"] == true)
        .unwrap();
    assert_eq!(resolved["data"]["decision"], "allow");
    assert_eq!(server.responses_requests().len(), 2);
    call_output(&server, 1, "call_touch");
}

#[tokio::test]
async fn a_denied_shell_call_does_not_run_and_codex_is_told() {
    let (h, server, out, request) = shell_call_answered("deny").await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_shell_request(&out, &request);
    let result = &out.of_kind("tool_result")[0]["data"];
    assert_eq!(result["result"]["success"], false, "{result}");
    assert_eq!(result["result"]["error"], "the user denied this call");
    assert_eq!(result["update"]["status"], "failed");
    assert!(!h.work().join("made.txt").exists());
    let told = call_output(&server, 1, "call_touch");
    assert!(
        told.to_lowercase().contains("reject")
            || told.to_lowercase().contains("denied")
            || told.to_lowercase().contains("declin"),
        "{told}"
    );
}

#[tokio::test]
async fn cancel_as_the_answer_to_an_approval_cancels_the_turn() {
    let (h, _server, out, request) = shell_call_answered("cancel").await;
    assert_eq!(out.code, Some(130), "{out:?}");
    assert_eq!(request["data"]["tool"], "shell");
    assert!(!h.work().join("made.txt").exists());
    assert_eq!(result_of(&out)["stopReason"], "cancelled", "{out:?}");
    let resolved = out
        .of_kind("permission")
        .into_iter()
        .find(|e| e["data"]["resolved"] == true)
        .unwrap();
    assert_eq!(resolved["data"]["decision"], "cancel");
    assert!(authoritative(&out, "assistant_text").is_empty(), "{out:?}");
    assert_eq!(
        statuses(&out),
        [
            "starting",
            "idle",
            "working",
            "waiting_approval",
            "working",
            "idle",
            "dead"
        ]
    );
}

/// One shell call under a preset, nobody attending.
async fn shell_call_under(preset: &str) -> (Harness, Outcome) {
    let program = codex_program();
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call(
        "call_touch",
        "exec_command",
        r#"{"cmd":"touch made.txt"}"#,
    ));
    server.push(Reply::new().text("ALL_DONE"));
    let out = codex_run(&h, &server, &program)
        .args(["-p", preset, "make the file"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(result_of(&out)["stopReason"], "end_turn", "{out:?}");
    assert!(out.of_kind("permission").is_empty(), "{out:?}");
    (h, out)
}

#[tokio::test]
async fn corrals_preset_refuses_for_codex_without_asking_anyone() {
    let (h, out) = shell_call_under("readonly").await;
    let result = &out.of_kind("tool_result")[0]["data"]["result"];
    assert_eq!(result["success"], false, "{result}");
    let error = result["error"].as_str().unwrap();
    assert!(
        error.contains("refused by corral's policy") && error.contains("shell"),
        "{error}"
    );
    assert!(!h.work().join("made.txt").exists());
}

#[tokio::test]
async fn under_bypass_codex_runs_its_commands_unasked() {
    let (h, out) = shell_call_under("bypass").await;
    let result = &out.of_kind("tool_result")[0]["data"]["result"];
    assert_eq!(result["success"], true, "{result}");
    assert!(h.work().join("made.txt").exists());
}

#[tokio::test]
async fn a_codex_that_dies_while_a_person_decides_closes_the_question() {
    let program = codex_program();
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call(
        "call_touch",
        "exec_command",
        r#"{"cmd":"touch made.txt"}"#,
    ));
    let running = codex_run(&h, &server, &program)
        .arg("--approve-stdin")
        .arg("make the file")
        .live_stdin()
        .spawn()
        .await;
    running.wait_for_event(0, is_request).await;
    kill_codex(&h);
    let out = running.wait().await;
    assert_eq!(out.code, Some(1), "{out:?}");
    assert_well_formed(&out);
    let resolved = out
        .of_kind("permission")
        .into_iter()
        .find(|e| e["data"]["resolved"] == true)
        .unwrap_or_else(|| panic!("the question stayed open: {out:?}"));
    assert_eq!(resolved["data"]["decision"], "cancel");
    let kinds = turn_kinds(&out, 1);
    assert_eq!(
        kinds[kinds.len() - 3..],
        ["permission", "error", "result"],
        "{kinds:?}"
    );
    assert_eq!(result_of(&out)["stopReason"], "error");
    assert_eq!(
        statuses(&out),
        [
            "starting",
            "idle",
            "working",
            "waiting_approval",
            "working",
            "idle",
            "dead"
        ]
    );
    assert!(!h.work().join("made.txt").exists());
}

/// codex edits files with `apply_patch`; a patch to an existing file is asked about as a
/// `write_file` of its new content, so the person sees corral's diff.
#[tokio::test]
async fn a_file_change_is_asked_about_as_a_write_with_its_diff() {
    let program = codex_program();
    let h = Harness::new();
    std::fs::write(h.work().join("notes.txt"), "keep\nold line\n").unwrap();
    let server = FakeModel::start().await;
    let patch = "*** Begin Patch\n*** Update File: notes.txt\n@@\n keep\n-old line\n+new line\n*** End Patch\n";
    let args = json!({"cmd": format!("apply_patch <<'EOF'\n{patch}EOF\n")}).to_string();
    server.push(Reply::new().tool_call("call_patch", "exec_command", &args));
    server.push(Reply::new().text("PATCHED"));
    let mut running = codex_run(&h, &server, &program)
        .arg("--approve-stdin")
        .arg("patch it")
        .live_stdin()
        .spawn()
        .await;
    let request = running.wait_for_event(0, is_request).await;
    let id = request["data"]["requestId"].as_str().unwrap().to_owned();
    running
        .send_line(&json!({"requestId": id, "decision": "allow"}).to_string())
        .await;
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let data = &request["data"];
    assert_eq!(data["tool"], "write_file", "{request}");
    assert_eq!(data["agentTool"], "fileChange");
    assert_eq!(data["path"], "notes.txt");
    let diff = data["diff"].as_str().unwrap();
    assert!(
        diff.contains("-old line") && diff.contains("+new line"),
        "{diff}"
    );
    let call = &out.of_kind("tool_use")[0]["data"]["call"];
    assert_eq!(call["kind"], "edit");
    assert_eq!(call["title"], "edit notes.txt");
    assert_eq!(call["toolCallId"], "call_patch");
    let result = &out.of_kind("tool_result")[0]["data"]["result"];
    assert_eq!(result["success"], true, "{result}");
    assert_eq!(result["tool"], "write_file");
    assert!(
        result["output"].as_str().unwrap().contains("+new line"),
        "{result}"
    );
    assert_eq!(
        std::fs::read_to_string(h.work().join("notes.txt")).unwrap(),
        "keep\nnew line\n"
    );
    assert_eq!(result_of(&out)["stopReason"], "end_turn");
}
