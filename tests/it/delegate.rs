//! `delegate`: the model splits a task, sub-sessions run the parts in parallel, each in its own
//! worktree of the repository, asking the parent's person; `delegate_merge` brings one back,
//! through the gate. Driven with `corral run` (the preset allows the tool) and over the
//! WebSocket in delegate mode.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::*;
use crate::server_ws::{connect, next, send, session_url, state_is};
use crate::support::server::Server;
use crate::support::{FakeModel, Harness, Reply};

/// The work directory as a repository with one commit.
fn repository(h: &Harness) {
    std::fs::write(h.work().join("README.md"), "project\n").unwrap();
    git(&h.work(), &["init", "-q", "-b", "main"]);
    git(&h.work(), &["add", "."]);
    git(&h.work(), &["commit", "-q", "-m", "start"]);
}

fn delegate_call(tasks: &[&str]) -> Reply {
    let args = json!({ "tasks": tasks }).to_string();
    Reply::new().tool_call("d1", "delegate", &args)
}

/// A sub-agent's two replies: write `file`, then say `answer`.
fn sub_agent(server: &FakeModel, task: &str, file: &str, answer: &str) {
    let args = json!({"path": file, "content": format!("{task}\n")}).to_string();
    server.push(
        Reply::new()
            .only_for(task)
            .chunk_delay(Duration::from_millis(200))
            .tool_call("w1", "write_file", &args),
    );
    server.push(Reply::new().only_for(task).text(answer));
}

/// A session on the fake model, opened over REST with an admin token; its id.
async fn open_session(server: &Server, h: &Harness, model: &FakeModel, preset: &str) -> String {
    let body = json!({"cwd": h.work(), "model": "llamacpp:fake-model", "permission": preset,
                      "base_url": model.openai_base()});
    let (status, body) = server
        .post("/api/v1/sessions", &server.token("root", true), &body)
        .await;
    assert_eq!(status, 201, "{body}");
    body["id"].as_str().unwrap().to_owned()
}

/// Answers the `tool_confirm_request` `m` with `action`.
async fn answer(ws: &mut crate::server_ws::Ws, m: &Value, action: &str) {
    let confirm = json!({"type": "tool_confirm", "payload": {
        "confirmation_id": m["payload"]["confirmation_id"], "action": action}});
    send(ws, confirm).await;
}

fn tool_output(out: &crate::support::Outcome, tool: &str) -> Value {
    out.of_kind("tool_result")
        .into_iter()
        .find(|e| e["data"]["result"]["tool"] == tool)
        .unwrap_or_else(|| panic!("no {tool} result: {out:?}"))["data"]["result"]
        .clone()
}

#[tokio::test]
async fn delegated_tasks_run_in_parallel_worktrees_and_report_back() {
    let h = Harness::new();
    repository(&h);
    let server = FakeModel::start().await;
    server.push(delegate_call(&[
        "TASK-A: write a.txt",
        "TASK-B: write b.txt",
    ]));
    // Replies in the order they could be taken: both first steps, then both answers.
    sub_agent(&server, "TASK-A", "a.txt", "DONE-A");
    sub_agent(&server, "TASK-B", "b.txt", "DONE-B");
    // The sub-agents' answers would be queued behind each other without only_for; the
    // parent's last reply takes what is left.
    let queue_fix = server.pending_replies();
    assert_eq!(queue_fix, 5);
    // A sub-agent of another session (or a path) is not this session's to merge.
    let foreign = json!({"session": "elsewhere-d1"}).to_string();
    server.push(Reply::new().tool_call("m1", "delegate_merge", &foreign));
    server.push(Reply::new().text("Both parts are done."));
    let out = openai_run(&h, &server, "split the work")
        .args(["--allow", "delegate,delegate_merge,write_file"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(
        authoritative(&out, "assistant_text").last().unwrap(),
        "Both parts are done."
    );
    let parent = out.events()[0]["agent"].as_str().unwrap().to_owned();
    let result = tool_output(&out, "delegate");
    assert_eq!(result["success"], true, "{result}");
    let report = result["output"].as_str().unwrap();
    for needle in [
        format!("sub-agent {parent}-d1 (end_turn)"),
        format!("sub-agent {parent}-d2 (end_turn)"),
        "a.txt".to_string(),
        "b.txt".to_string(),
        "DONE-A".to_string(),
        "DONE-B".to_string(),
    ] {
        assert!(report.contains(&needle), "{needle} missing from {report}");
    }
    let refused = tool_output(&out, "delegate_merge");
    assert_eq!(refused["success"], false, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("not a sub-agent this session delegated to"),
        "{refused}"
    );
    // Nothing reached the person's working tree: each part is in its own kept worktree.
    assert!(!h.work().join("a.txt").exists() && !h.work().join("b.txt").exists());
    let worktrees = h.data_dir().join("corral/worktrees");
    let a = std::fs::read_to_string(worktrees.join(format!("{parent}-d1/a.txt")))
        .or_else(|_| std::fs::read_to_string(worktrees.join(format!("{parent}-d2/a.txt"))))
        .unwrap();
    assert_eq!(a, "TASK-A\n");
    // Each sub-session is recorded with its parent.
    for n in [1, 2] {
        let meta: Value = serde_json::from_str(
            &std::fs::read_to_string(
                h.cache_dir()
                    .join(format!("corral/agents/{parent}-d{n}.meta.json")),
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(meta["parent"], parent.as_str(), "{meta}");
    }
    // In parallel: the second sub-agent asked the model before the first one's slow first
    // reply was over.
    let times = server.chat_times();
    let (first_arrived, first_done) = times[1];
    let (second_arrived, _) = times[2];
    assert!(second_arrived >= first_arrived);
    assert!(
        first_done.is_some_and(|done| second_arrived < done),
        "the sub-agents ran one after the other: {times:?}"
    );
}

#[tokio::test]
async fn without_the_preset_allowing_it_delegate_is_neither_offered_nor_run() {
    let h = Harness::new();
    repository(&h);
    let server = FakeModel::start().await;
    server.push(delegate_call(&["TASK-A: write a.txt"]));
    server.push(Reply::new().text("I will do it myself."));
    let out = openai_run(&h, &server, "split")
        .args(["-p", "bypass"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let offered: Vec<String> = server.chat_requests()[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        !offered.iter().any(|t| t.starts_with("delegate")),
        "{offered:?}"
    );
    let result = tool_output(&out, "delegate");
    assert_eq!(result["success"], false, "{result}");
    assert!(
        result["error"]
            .as_str()
            .unwrap()
            .contains("not available in this turn"),
        "{result}"
    );
    assert_eq!(
        server.chat_requests().len(),
        2,
        "no sub-session asked the model"
    );
}

#[tokio::test]
async fn ws_delegate_mode_asks_the_parents_person_and_merges_through_the_gate() {
    let h = Harness::new();
    repository(&h);
    let model = FakeModel::start().await;
    let server = Server::start(&h, &[]).await;
    let token = server.token("root", true);
    let id = open_session(&server, &h, &model, "default").await;
    let sub = format!("{id}-d1");
    model.push(delegate_call(&["TASK-A: write a.txt"]));
    sub_agent(&model, "TASK-A", "a.txt", "DONE-A");
    let merge = json!({ "session": sub }).to_string();
    model.push(Reply::new().tool_call("m1", "delegate_merge", &merge));
    model.push(Reply::new().text("Merged."));

    let mut ws = connect(&session_url(&server, &id, &token)).await;
    assert!(state_is("idle")(&next(&mut ws).await));
    send(
        &mut ws,
        json!({"type": "user_message", "payload": {"text": "split it", "mode": "delegate"}}),
    )
    .await;
    // The delegate mode's first step offers delegate alone, and requires a call.
    let mut seen = Vec::new();
    let mut asked = Vec::new();
    loop {
        let m = next(&mut ws).await;
        seen.push(m.clone());
        if m["type"] == "tool_confirm_request" {
            asked.push(m["payload"].clone());
            answer(&mut ws, &m, "allow").await;
        }
        if m["type"] == "done" {
            break;
        }
    }
    let first = &model.chat_requests()[0];
    let offered: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["delegate"]);
    assert_eq!(first["tool_choice"], "required");
    // Three questions, all to this connection: delegating, the sub-agent's write (labelled
    // with its id), and the merge.
    let tools: Vec<&str> = asked.iter().map(|a| a["tool"].as_str().unwrap()).collect();
    assert_eq!(
        tools,
        ["delegate", "write_file", "delegate_merge"],
        "{asked:?}"
    );
    assert_eq!(asked[1]["sub_session"], sub.as_str(), "{asked:?}");
    let message = asked[1]["message"].as_str().unwrap();
    assert!(message.starts_with(&format!("[{sub}] ")), "{message}");
    assert!(asked[0].get("sub_session").is_none(), "{asked:?}");
    assert_eq!(
        std::fs::read_to_string(h.work().join("a.txt")).unwrap(),
        "TASK-A\n"
    );
    let states: Vec<&str> = seen
        .iter()
        .filter(|m| m["type"] == "agent_state")
        .map(|m| m["payload"]["state"].as_str().unwrap())
        .collect();
    assert_eq!(states.first(), Some(&"thinking"));
    assert!(states.contains(&"delegating"), "{states:?}");
    assert!(!states.contains(&"writing"), "{states:?}");
    assert_eq!(states.last(), Some(&"done"));
    // The sub-session is listed, with its parent.
    let (_, list) = server.get("/api/v1/sessions", &token).await;
    let listed = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == sub.as_str())
        .unwrap_or_else(|| panic!("{list}"))
        .clone();
    assert_eq!(listed["parent"], id.as_str());
}

/// Cancelling the parent's turn stops its sub-sessions' turns and closes them: nothing is
/// left running, and the model's stream is closed.
#[tokio::test]
async fn ws_cancelling_the_parent_stops_and_closes_its_sub_sessions() {
    let h = Harness::new();
    repository(&h);
    let model = FakeModel::start().await;
    let server = Server::start(&h, &[]).await;
    let token = server.token("root", true);
    let id = open_session(&server, &h, &model, "bypass").await;
    model.push(delegate_call(&["TASK-A: think forever"]));
    model.push(
        Reply::new()
            .only_for("TASK-A")
            .text("thinking")
            .stall(Duration::from_secs(120)),
    );
    let mut ws = connect(&session_url(&server, &id, &token)).await;
    assert!(state_is("idle")(&next(&mut ws).await));
    send(
        &mut ws,
        json!({"type": "user_message", "payload": {"text": "go", "mode": "delegate"}}),
    )
    .await;
    assert!(
        model
            .wait_for_chat_requests(2, Duration::from_secs(30))
            .await,
        "the sub-agent never asked the model"
    );
    send(&mut ws, json!({"type": "cancel", "payload": {}})).await;
    loop {
        let m = next(&mut ws).await;
        if m["type"] == "error" && m["payload"]["code"] == "CANCELLED" {
            break;
        }
        assert_ne!(m["type"], "done", "a cancelled turn sends no done: {m}");
    }
    assert!(
        model.wait_for_cancelled(1, Duration::from_secs(30)).await,
        "the sub-agent's model stream was left open"
    );
    let sub = format!("{id}-d1");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (_, list) = server.get("/api/v1/sessions", &token).await;
        let status = list["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == sub.as_str())
            .map(|s| s["status"].clone());
        if status == Some(json!("dead")) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the sub-session is still {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What the person took away from the parent holds for its sub-sessions (a tool disabled
/// mid-session is not offered to them), and cancelling while a sub-session's question is open
/// on the parent withdraws it: the parent is back at rest and takes the next message.
#[tokio::test]
async fn ws_a_disabled_tool_stays_off_for_sub_sessions_and_a_cancel_mid_question_frees_the_parent()
{
    let h = Harness::new();
    repository(&h);
    let model = FakeModel::start().await;
    let server = Server::start(&h, &[]).await;
    let token = server.token("root", true);
    let id = open_session(&server, &h, &model, "default").await;
    model.push(Reply::new().tool_call("s1", "shell", r#"{"command":"ls"}"#));
    model.push(Reply::new().text("ok"));
    model.push(delegate_call(&["TASK-X: write x.txt"]));
    let args = json!({"path": "x.txt", "content": "x"}).to_string();
    model.push(
        Reply::new()
            .only_for("TASK-X")
            .tool_call("w1", "write_file", &args),
    );
    // Only for turn 3: under load a sub-session being stopped may still ask once, and must
    // not take the parent's answer.
    model.push(Reply::new().only_for("TURN-THREE").text("still here"));
    let mut ws = connect(&session_url(&server, &id, &token)).await;
    assert!(state_is("idle")(&next(&mut ws).await));

    // Turn 1: the person disables shell for the session.
    send(
        &mut ws,
        json!({"type": "user_message", "payload": {"text": "look"}}),
    )
    .await;
    loop {
        let m = next(&mut ws).await;
        if m["type"] == "tool_confirm_request" {
            assert_eq!(m["payload"]["tool"], "shell");
            answer(&mut ws, &m, "disable").await;
        }
        if m["type"] == "done" {
            break;
        }
    }
    // Turn 2: delegated; the sub-session's question is left open, then the turn cancelled.
    send(
        &mut ws,
        json!({"type": "user_message", "payload": {"text": "split", "mode": "delegate"}}),
    )
    .await;
    loop {
        let m = next(&mut ws).await;
        if m["type"] != "tool_confirm_request" {
            continue;
        }
        if m["payload"]["tool"] == "delegate" {
            answer(&mut ws, &m, "allow").await;
            continue;
        }
        assert_eq!(m["payload"]["sub_session"], format!("{id}-d1"), "{m}");
        break;
    }
    let sub_request = model
        .chat_requests()
        .into_iter()
        .find(|r| r.to_string().contains("TASK-X") && r["messages"].as_array().unwrap().len() == 2)
        .expect("the sub-session's first request");
    let offered: Vec<&str> = sub_request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(!offered.contains(&"shell"), "{offered:?}");
    assert!(offered.contains(&"write_file"), "{offered:?}");
    send(&mut ws, json!({"type": "cancel", "payload": {}})).await;
    loop {
        let m = next(&mut ws).await;
        if m["type"] == "error" && m["payload"]["code"] == "CANCELLED" {
            break;
        }
    }
    // Turn 3 is taken and answered: the parent is not left waiting for the withdrawn question.
    send(
        &mut ws,
        json!({"type": "user_message", "payload": {"text": "TURN-THREE"}}),
    )
    .await;
    let mut text = String::new();
    loop {
        let m = next(&mut ws).await;
        assert_ne!(m["payload"]["code"], "TURN_IN_PROGRESS", "{m}");
        if m["type"] == "token" {
            text.push_str(m["payload"]["text"].as_str().unwrap());
        }
        if m["type"] == "done" {
            break;
        }
    }
    assert_eq!(text, "still here");
    assert!(!h.work().join("x.txt").exists());
}

/// A `user` token cannot multiply its sessions by delegating: a sub-session counts against
/// the owner's `max_sessions_per_owner` like one it opened itself.
#[tokio::test]
async fn ws_a_user_tokens_sub_sessions_count_against_its_session_cap() {
    let h = Harness::new();
    repository(&h);
    h.write_config("[server]\nmax_sessions_per_owner = 1\n");
    let model = FakeModel::start().await;
    let server = Server::start(&h, &[]).await;
    let token = server.token("alice", false);
    let body = json!({"cwd": h.work(), "model": "llamacpp:fake-model",
                      "base_url": model.openai_base()});
    let (status, body) = server.post("/api/v1/sessions", &token, &body).await;
    assert_eq!(status, 201, "{body}");
    let id = body["id"].as_str().unwrap().to_owned();
    // Nothing scripted for a sub-session: one that started would find no reply of its own.
    model.push(delegate_call(&["TASK-A: write a.txt"]));
    model.push(Reply::new().text("Could not delegate."));
    let mut ws = connect(&session_url(&server, &id, &token)).await;
    assert!(state_is("idle")(&next(&mut ws).await));
    send(
        &mut ws,
        json!({"type": "user_message", "payload": {"text": "split", "mode": "delegate"}}),
    )
    .await;
    loop {
        let m = next(&mut ws).await;
        if m["type"] == "tool_confirm_request" {
            assert_eq!(m["payload"]["tool"], "delegate", "{m}");
            answer(&mut ws, &m, "allow").await;
        }
        if m["type"] == "done" {
            break;
        }
    }
    let requests = model.chat_requests();
    assert_eq!(
        requests.len(),
        2,
        "a sub-session asked the model: {requests:?}"
    );
    let told = requests[1]["messages"].to_string();
    assert!(told.contains("live sessions, its limit"), "{told}");
    assert!(!h.work().join("a.txt").exists());
}

/// A session continued with `--continue` (or `--resume`) delegates like a new one: its
/// sub-sessions are new sessions of their own, not the parent resumed a second time.
#[tokio::test]
async fn a_continued_session_delegates_to_new_sub_sessions() {
    let h = Harness::new();
    repository(&h);
    let server = FakeModel::start().await;
    server.push(Reply::new().text("ready"));
    let first = openai_run(&h, &server, "get ready").run().await;
    assert_eq!(first.code, Some(0), "{first:?}");
    let parent = first.events()[0]["agent"].as_str().unwrap().to_owned();

    server.push(delegate_call(&["TASK-C: write c.txt"]));
    sub_agent(&server, "TASK-C", "c.txt", "DONE-C");
    server.push(Reply::new().text("Delegated."));
    let out = h
        .corral()
        .args([
            "run",
            "--json",
            "--base-url",
            &server.openai_base(),
            "--continue",
        ])
        .args(["--allow", "delegate,write_file", "now split it"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(out.events()[0]["agent"], parent.as_str());
    let result = tool_output(&out, "delegate");
    assert_eq!(result["success"], true, "{result}");
    let report = result["output"].as_str().unwrap();
    assert!(
        report.contains(&format!("sub-agent {parent}-d1 (end_turn)")) && report.contains("DONE-C"),
        "{report}"
    );
}
