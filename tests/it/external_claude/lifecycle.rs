//! The claude process's life: an interrupt mid-turn, and crashes mid-turn, between turns and
//! while a person is being asked.

use std::time::Duration;

use super::*;
use crate::support::{FakeModel, Harness, Reply};

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
