//! Wake and sleep: an idle claude's process is stopped after `idle_sleep_secs`, the session
//! staying idle to clients, and the next message starts claude again on its own session
//! (`--resume`), so the conversation goes on.

use std::path::Path;

use super::*;

/// The claude processes working in `root` (the session's root is their cwd), with their
/// command lines.
fn claudes_in(root: &Path) -> Vec<String> {
    procs_in(root, "stream-json")
        .into_iter()
        .map(|(_, cmdline)| cmdline)
        .collect()
}

#[tokio::test]
async fn an_idle_claude_sleeps_and_the_next_message_wakes_it_on_its_own_conversation() {
    let h = Harness::new();
    h.write_config("[agents]\nidle_sleep_secs = 1\n");
    let server = FakeModel::start().await;
    server.push(Reply::new().text("FIRST ANSWER"));
    server.push(Reply::new().text("SECOND ANSWER"));
    let mut running = claude_mcp(&h, &server).await;
    let agent = open_claude(&mut running, &h).await;
    let send = |text: &str| json!({"agent_id": agent, "text": text});
    mcp_call(&mut running, 2, "agent_send", send("remember the word")).await;
    let first = mcp_wait_turn(&mut running, &agent, 1, 100).await;
    assert_eq!(first["text"], "FIRST ANSWER", "{first}");
    assert_eq!(claudes_in(&h.work()).len(), 1, "claude runs after its turn");
    // Idle for a second: its process is stopped, the session is not.
    wait_until("the idle claude was never put to sleep", || {
        claudes_in(&h.work()).is_empty()
    })
    .await;
    let status = mcp_status(&mut running, 200, &agent).await;
    assert_eq!(status["status"], "idle", "{status}");
    // The next message wakes it, resumed on the conversation it had.
    assert_eq!(
        mcp_call(&mut running, 201, "agent_send", send("what was it?")).await,
        json!({"turn": 2})
    );
    let second = mcp_wait_turn(&mut running, &agent, 2, 300).await;
    assert_eq!(second["text"], "SECOND ANSWER", "{second}");
    let requests = message_requests(&server);
    assert_eq!(requests.len(), 2, "{requests:?}");
    // Started and woken on the session's model (`--model=`, never a flag of its own).
    for request in &requests {
        assert_eq!(request["model"], "fake-model", "{request}");
    }
    let conversation = requests[1]["messages"].to_string();
    assert!(
        conversation.contains("remember the word") && conversation.contains("FIRST ANSWER"),
        "the woken claude lost the conversation: {conversation}"
    );
    let woken = claudes_in(&h.work());
    assert!(
        woken.len() <= 1 && woken.iter().all(|c| c.contains("--resume=")),
        "{woken:?}"
    );
    running.close_stdin();
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(claudes_in(&h.work()).is_empty(), "claude outlived corral");
}
