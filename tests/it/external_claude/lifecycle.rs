//! The claude process's life: an interrupt mid-turn; crashes mid-turn, between turns and
//! while a person is being asked, each followed by a restart when the next message comes; and
//! the restart limit.

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
    let crash = position(&events, "the crash report", |e| e["kind"] == "error");
    let end = position(&events, "result", |e| e["kind"] == "result");
    assert!(crash < end, "{events:#?}");
    let error = &events[crash]["data"];
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
    // The session survives its agent (the next message would start claude again) until
    // `run` ends it.
    assert_eq!(
        statuses(&out),
        ["starting", "idle", "working", "idle", "dead"]
    );
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
async fn a_crash_between_turns_is_reported_and_the_next_message_restarts_claude() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("first done"));
    server.push(Reply::new().text("SECOND AFTER THE RESTART"));
    let pid_file = h.home_dir().join("claude.pid");
    let wrapper = wrapper_script(&h, &pid_file);
    let mut running = claude_run(&h, &server, &["-i", "remember the word"])
        .env("CORRAL_CLAUDE", &wrapper)
        .live_stdin()
        .spawn()
        .await;
    running.wait_for_event(0, |e| e["kind"] == "result").await;
    let first_pid = std::fs::read_to_string(&pid_file).unwrap();
    kill_claude(&pid_file);
    let error = running.wait_for_event(0, |e| e["kind"] == "error").await;
    let message = error["data"]["message"].as_str().unwrap();
    assert!(message.contains("exit status: 3"), "{message}");
    assert!(message.contains("wrapper: claude is gone"), "{message}");
    running.send_line("what was it?").await;
    let second = running
        .wait_for_event(0, |e| e["kind"] == "result" && e["turn"] == 2)
        .await;
    assert_eq!(second["data"]["stopReason"], "end_turn", "{second}");
    assert_ne!(std::fs::read_to_string(&pid_file).unwrap(), first_pid);
    // Started on its own session: the conversation is still there.
    let requests = message_requests(&server);
    let conversation = requests[1]["messages"].to_string();
    assert!(
        conversation.contains("remember the word") && conversation.contains("first done"),
        "the restarted claude lost the conversation: {conversation}"
    );
    running.close_stdin();
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_well_formed(&out);
    assert_eq!(
        statuses(&out),
        [
            "starting", "idle", "working", "idle", "working", "idle", "dead"
        ]
    );
}

/// Through the session manager (MCP here; `serve` alike), a claude that dies at every start
/// is started again with backoff when messages need it, three times; then the session gives
/// up and ends.
#[tokio::test]
async fn a_claude_that_keeps_dying_is_given_up_on_after_three_restarts() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("first done"));
    let pid_file = h.home_dir().join("claude.pid");
    let wrapper = wrapper_script(&h, &pid_file);
    let broken = h.home_dir().join("broken");
    let script = std::fs::read_to_string(&wrapper).unwrap().replacen(
        "#!/bin/bash\n",
        &format!(
            "#!/bin/bash\nif [ -e \"{}\" ]; then echo 'wrapper: broken' >&2; exit 3; fi\n",
            broken.display()
        ),
        1,
    );
    std::fs::write(&wrapper, script).unwrap();
    let mut running = claude_mcp_with(&h, &server, "sk-ant-dummy", &wrapper).await;
    let agent = open_claude(&mut running, &h).await;
    let send = |text: &str| json!({"agent_id": agent, "text": text});
    mcp_call(&mut running, 2, "agent_send", send("first")).await;
    let first = mcp_wait_turn(&mut running, &agent, 1, 100).await;
    assert_eq!(first["text"], "first done", "{first}");
    let status = mcp_status(&mut running, 3, &agent).await;
    let log_path = status["event_log"].as_str().unwrap().to_owned();
    std::fs::write(&broken, "").unwrap();
    kill_claude(&pid_file);
    let log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    wait_until("the crash was never counted", || {
        log().contains("started again when needed")
    })
    .await;
    // Each message starts claude again, after 1 s, 2 s, 4 s; each start dies.
    for (turn, id) in [(2, 400), (3, 500), (4, 600)] {
        mcp_call(
            &mut running,
            id,
            "agent_send",
            send(&format!("message {turn}")),
        )
        .await;
        let answer = mcp_wait_turn(&mut running, &agent, turn, id + 1).await;
        assert_ne!(answer["stopReason"], "end_turn", "{answer}");
    }
    wait_until("the session never gave up", || {
        log().contains("gave up after 3 restarts")
    })
    .await;
    let lifecycle = lifecycle_errors(&log());
    let restarts = lifecycle
        .iter()
        .filter(|m| m.contains("started again when needed"))
        .count();
    assert_eq!(restarts, 3, "{lifecycle:#?}");
    wait_until("the given-up session is not dead", || {
        log().contains(r#""status":"dead""#)
    })
    .await;
    // Only the first turn reached the model.
    assert_eq!(message_requests(&server).len(), 1);
    running.close_stdin();
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
}

#[tokio::test]
async fn a_crash_while_a_person_is_asked_withdraws_the_question() {
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
            "idle",
            "dead"
        ]
    );
}
