//! The approval gate end to end: presets, denial without anyone to ask, every decision
//! answered as NDJSON on stdin (`--approve-stdin`), and bad answers.

use serde_json::{Value, json};

use crate::common::*;
use crate::support::{FakeModel, Harness, Reply, Running};

fn is_request(e: &Value) -> bool {
    e["kind"] == "permission" && e["data"].get("resolved").is_none()
}

/// `corral run --json --approve-stdin` with a live stdin.
async fn approving(h: &Harness, server: &FakeModel, extra: &[&str], prompt: &str) -> Running {
    openai_run(h, server, prompt)
        .args(["--approve-stdin"])
        .args(extra.iter().copied())
        .live_stdin()
        .spawn()
        .await
}

async fn answer(running: &mut Running, n: usize, decision: &str) -> Value {
    let request = running.wait_for_event(n, is_request).await;
    let id = request["data"]["requestId"].as_str().unwrap().to_owned();
    running
        .send_line(&json!({"requestId": id, "decision": decision}).to_string())
        .await;
    request
}

#[tokio::test]
async fn without_anyone_to_ask_a_call_needing_approval_is_denied_visibly() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c1", "write_file", r#"{"path":"x.txt","content":"hi"}"#));
    server.push(Reply::new().text("I could not write it."));
    let out = openai_run(&h, &server, "write x").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.of_kind("permission").is_empty());
    let error = out.of_kind("tool_result")[0]["data"]["result"]["error"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        error.contains("needs a person's approval") && error.contains("--allow write_file"),
        "{error}"
    );
    assert!(!h.work().join("x.txt").exists());
    // The model was told and the loop went on.
    let second = messages(&server, 1);
    assert!(
        second.last().unwrap()["content"]
            .as_str()
            .unwrap()
            .contains("approval")
    );
}

#[tokio::test]
async fn allow_runs_the_call_after_showing_a_diff_and_waiting() {
    let h = Harness::new();
    std::fs::write(h.work().join("a.txt"), "old line\n").unwrap();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call(
        "c1",
        "write_file",
        r#"{"path":"a.txt","content":"new line\n"}"#,
    ));
    server.push(Reply::new().text("done"));
    let mut running = approving(&h, &server, &[], "edit a").await;
    let request = answer(&mut running, 0, "allow").await;
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let data = &request["data"];
    assert_eq!(data["tool"], "write_file");
    assert_eq!(data["danger"], "moderate");
    assert_eq!(data["toolCall"]["toolCallId"], "c1");
    let diff = data["diff"].as_str().unwrap();
    assert!(
        diff.contains("-old line") && diff.contains("+new line"),
        "{diff}"
    );
    let options: Vec<&str> = data["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["optionId"].as_str().unwrap())
        .collect();
    assert_eq!(
        options,
        [
            "allow",
            "allow_all",
            "deny",
            "disable",
            "forbid_all",
            "cancel"
        ]
    );
    assert_eq!(
        std::fs::read_to_string(h.work().join("a.txt")).unwrap(),
        "new line\n"
    );
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
    let resolved: Vec<Value> = out
        .of_kind("permission")
        .into_iter()
        .filter(|e| e["data"]["resolved"] == true)
        .collect();
    assert_eq!(resolved[0]["data"]["decision"], "allow");
}

#[tokio::test]
async fn deny_gives_the_model_an_error_and_the_loop_goes_on() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c1", "write_file", r#"{"path":"x.txt","content":"hi"}"#));
    server.push(Reply::new().text("ok, I won't"));
    let mut running = approving(&h, &server, &[], "write").await;
    answer(&mut running, 0, "deny").await;
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(!h.work().join("x.txt").exists());
    let result = &out.of_kind("tool_result")[0]["data"]["result"];
    assert_eq!(result["error"], "the user denied this call");
    assert_eq!(result_of(&out)["stopReason"], "end_turn");
}

#[tokio::test]
async fn allow_all_asks_once_for_the_tool_in_the_session() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c1", "write_file", r#"{"path":"a.txt","content":"1"}"#));
    server.push(Reply::new().tool_call("c2", "write_file", r#"{"path":"b.txt","content":"2"}"#));
    server.push(Reply::new().text("both written"));
    let mut running = approving(&h, &server, &[], "write two").await;
    answer(&mut running, 0, "allow_all").await;
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(
        out.of_kind("permission")
            .iter()
            .filter(|e| is_request(e))
            .count(),
        1
    );
    assert!(h.work().join("a.txt").exists() && h.work().join("b.txt").exists());
}

#[tokio::test]
async fn disable_takes_the_tool_off_the_offer_for_the_session() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c1", "write_file", r#"{"path":"a.txt","content":"1"}"#));
    server.push(Reply::new().text("fine"));
    let mut running = approving(&h, &server, &[], "write").await;
    answer(&mut running, 0, "disable").await;
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let offered = |n: usize| offered_tools(&server, n);
    assert!(offered(0).contains(&"write_file".to_string()));
    assert!(!offered(1).contains(&"write_file".to_string()));
    assert!(offered(1).contains(&"read_file".to_string()));
    assert!(
        out.of_kind("tool_result")[0]["data"]["result"]["error"]
            .as_str()
            .unwrap()
            .contains("disabled")
    );
}

#[tokio::test]
async fn forbid_all_refuses_every_further_call_in_the_turn() {
    let h = Harness::new();
    std::fs::write(h.work().join("r.txt"), "r").unwrap();
    let server = FakeModel::start().await;
    // Two calls in one step: the second (a safe read) is refused too.
    server.push(
        Reply::new()
            .tool_call("c1", "write_file", r#"{"path":"a.txt","content":"1"}"#)
            .tool_call("c2", "read_file", r#"{"path":"r.txt"}"#),
    );
    server.push(Reply::new().text("no tools then"));
    let mut running = approving(&h, &server, &[], "go").await;
    answer(&mut running, 0, "forbid_all").await;
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let results = out.of_kind("tool_result");
    assert_eq!(results.len(), 2);
    for r in &results {
        assert_eq!(r["data"]["result"]["success"], false);
    }
    assert!(
        results[1]["data"]["result"]["error"]
            .as_str()
            .unwrap()
            .contains("forbidden")
    );
    assert!(
        server.chat_requests()[1].get("tools").is_none(),
        "no tools offered after forbid_all"
    );
}

#[tokio::test]
async fn cancel_ends_the_turn_as_cancelled() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c1", "write_file", r#"{"path":"a.txt","content":"1"}"#));
    let mut running = approving(&h, &server, &[], "go").await;
    answer(&mut running, 0, "cancel").await;
    let out = running.wait().await;
    assert_eq!(out.code, Some(130), "{out:?}");
    assert_eq!(result_of(&out)["stopReason"], "cancelled");
    assert!(!h.work().join("a.txt").exists());
    assert_eq!(server.chat_requests().len(), 1);
}

#[tokio::test]
async fn bad_answers_on_stdin_are_reported_and_the_request_stays_open() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c1", "write_file", r#"{"path":"a.txt","content":"1"}"#));
    server.push(Reply::new().text("done"));
    let mut running = approving(&h, &server, &[], "go").await;
    let request = running.wait_for_event(0, is_request).await;
    let id = request["data"]["requestId"].as_str().unwrap().to_owned();
    running.send_line("this is not json").await;
    running
        .send_line(r#"{"requestId":"perm_nope","decision":"allow"}"#)
        .await;
    running
        .send_line(&json!({"requestId": id, "decision": "maybe"}).to_string())
        .await;
    running.wait_for_event(2, |e| e["kind"] == "error").await;
    running
        .send_line(&json!({"requestId": id, "decision": "allow"}).to_string())
        .await;
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let errors: Vec<String> = out
        .of_kind("error")
        .iter()
        .map(|e| e["data"]["message"].as_str().unwrap().to_owned())
        .collect();
    assert!(errors[0].contains("not JSON"), "{errors:?}");
    assert!(
        errors[1].contains("no open permission request \"perm_nope\""),
        "{errors:?}"
    );
    assert!(
        errors[2].contains("unknown decision \"maybe\""),
        "{errors:?}"
    );
    assert!(h.work().join("a.txt").exists());
}

#[tokio::test]
async fn presets_and_flags_shape_what_is_offered_and_what_asks() {
    // readonly: only the read tools are offered.
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("ok"));
    let out = openai_run(&h, &server, "x")
        .args(["-p", "readonly"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let mut names: Vec<String> = server.chat_requests()[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["list_directory", "read_file", "search_files"]);

    // --allow runs a tool without asking; --auto-approve moderate likewise for moderate ones.
    for flags in [
        &["--allow", "write_file"][..],
        &["--auto-approve", "moderate"][..],
        &["-p", "auto"][..],
    ] {
        let h = Harness::new();
        let server = FakeModel::start().await;
        server.push(Reply::new().tool_call(
            "c1",
            "write_file",
            r#"{"path":"w.txt","content":"w"}"#,
        ));
        server.push(Reply::new().text("ok"));
        let out = openai_run(&h, &server, "x")
            .args(flags.iter().copied())
            .run()
            .await;
        assert_eq!(out.code, Some(0), "{flags:?}: {out:?}");
        assert!(h.work().join("w.txt").exists(), "{flags:?}");
    }

    // --deny takes a tool away.
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("ok"));
    openai_run(&h, &server, "x")
        .args(["--deny", "search_files,read_file"])
        .run()
        .await;
    let tools = server.chat_requests()[0]["tools"].to_string();
    assert!(!tools.contains("search_files") && !tools.contains("\"read_file\""));

    // Usage errors.
    let h = Harness::new();
    for (flags, expected) in [
        (&["-p", "nonsense"][..], "unknown permission preset"),
        (&["--allow", "rm_rf"][..], "unknown tool \"rm_rf\""),
    ] {
        let out = h
            .corral()
            .args(["run", "-m", "vllm:m"])
            .args(flags.iter().copied())
            .arg("x")
            .run()
            .await;
        assert_eq!(out.code, Some(2), "{flags:?}");
        assert!(out.stderr.contains(expected), "{}", out.stderr);
    }
    let out = h
        .corral()
        .args(["run", "-m", "vllm:m", "--approve-stdin"])
        .stdin_text("x")
        .run()
        .await;
    assert_eq!(out.code, Some(2));
    assert!(out.stderr.contains("--approve-stdin"));
}

#[tokio::test]
async fn bypass_warns_and_runs_everything() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c1", "write_file", r#"{"path":"w.txt","content":"w"}"#));
    server.push(Reply::new().text("ok"));
    let out = openai_run(&h, &server, "x")
        .args(["-p", "bypass"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stderr.contains("warning: permission preset 'bypass'"));
    assert!(h.work().join("w.txt").exists());
}

#[tokio::test]
async fn policies_lists_and_shows_presets() {
    let h = Harness::new();
    let out = h.corral().arg("policies").run().await;
    assert_eq!(out.code, Some(0));
    for name in ["default", "readonly", "auto", "specialist", "bypass"] {
        assert!(
            out.stdout.lines().any(|l| l.starts_with(name)),
            "{name}: {}",
            out.stdout
        );
    }
    let out = h.corral().args(["policies", "show", "auto"]).run().await;
    assert!(out.stdout.contains("shell allow:") && out.stdout.contains("git status"));
    std::fs::create_dir_all(h.config_dir().join("corral/policies")).unwrap();
    std::fs::write(
        h.config_dir().join("corral/policies/team.toml"),
        "description = \"the team's rules\"\nauto_approve = \"none\"\n",
    )
    .unwrap();
    let out = h.corral().arg("policies").run().await;
    assert!(out.stdout.contains("team") && out.stdout.contains("the team's rules"));
    let out = h.corral().args(["policies", "show", "nope"]).run().await;
    assert_eq!(out.code, Some(2));
}

/// `--approve-stdin`: a denial's `reason` reaches the model with the refusal, and the
/// resolution event records it.
#[tokio::test]
async fn a_denial_from_stdin_carries_its_reason_to_the_model() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c1", "write_file", r#"{"path":"x.txt","content":"hi"}"#));
    server.push(Reply::new().text("Understood."));
    let mut running = approving(&h, &server, &[], "write x").await;
    let request = running.wait_for_event(0, is_request).await;
    let id = request["data"]["requestId"].as_str().unwrap().to_owned();
    let line = json!({"requestId": id, "decision": "deny", "reason": "x.txt is generated"});
    running.send_line(&line.to_string()).await;
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let tool = messages(&server, 1)
        .into_iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert!(
        tool["content"]
            .as_str()
            .unwrap()
            .contains("the user denied this call: x.txt is generated"),
        "{tool}"
    );
    let resolution = out
        .of_kind("permission")
        .into_iter()
        .find(|e| e["data"].get("resolved").is_some())
        .unwrap();
    assert_eq!(resolution["data"]["note"], "reason: x.txt is generated");
    assert!(!h.work().join("x.txt").exists());
}
