//! `update_plan` (issue 17): the model's plan as a `plan` event in the log, a checklist on
//! the terminal (escaped), a WebSocket `plan` message and an ACP `plan` update; and the
//! project instructions on the surfaces that are not a terminal (WebSocket, ACP, MCP).

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::*;
use crate::server_ws::{collect, connect, is, next, open, send, session_url, user};
use crate::support::server::Server;
use crate::support::{FakeModel, Harness, Reply};

fn plan_call(id: &str, steps: &[(&str, &str)]) -> Reply {
    let plan: Vec<Value> = steps
        .iter()
        .map(|(step, status)| json!({"step": step, "status": status}))
        .collect();
    let args = json!({"plan": plan, "explanation": "found the cause"}).to_string();
    Reply::new().tool_call(id, "update_plan", &args)
}

fn entries(steps: &[(&str, &str)]) -> Value {
    steps
        .iter()
        .map(|(step, status)| json!({"content": step, "priority": "medium", "status": status}))
        .collect()
}

const STEPS: [(&str, &str); 3] = [
    ("Find the bug", "completed"),
    ("Fix it", "in_progress"),
    ("Run the tests", "pending"),
];

#[tokio::test]
async fn a_plan_the_model_keeps_is_a_plan_event_and_a_checklist_on_the_terminal() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(plan_call("p1", &STEPS));
    server.push(Reply::new().text("Planned."));
    let out = openai_run(&h, &server, "fix it").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let plans = out.of_kind("plan");
    assert_eq!(plans.len(), 1, "{out:?}");
    assert_eq!(plans[0]["data"]["entries"], entries(&STEPS));
    assert_eq!(plans[0]["data"]["explanation"], "found the cause");
    let result = &out.of_kind("tool_result")[0]["data"]["result"];
    assert_eq!(result["success"], true, "{result}");
    assert_eq!(
        result["output"],
        "Plan updated: 1 of 3 steps done; in progress: Fix it."
    );
    let log = std::fs::read_to_string(&h.event_logs()[0]).unwrap();
    assert!(log.contains(r#""kind":"plan""#), "{log}");

    // On a terminal: a checklist, the model's text shown escaped, never obeyed.
    server.push(plan_call(
        "p2",
        &[
            ("Read \x1b]52;c;Y2xpcA==\x07the code", "completed"),
            ("Done", "pending"),
        ],
    ));
    server.push(Reply::new().text("Planned."));
    let out = h
        .corral()
        .args([
            "run",
            "-m",
            "llamacpp:m",
            "--base-url",
            &server.openai_base(),
            "go",
        ])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stderr.contains(
            "plan\n  found the cause\n  [x] Read \\x1b]52;c;Y2xpcA==\\x07the code\n  [ ] Done\n"
        ),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains('\x1b') && !out.stderr.contains('\x07'));
}

#[tokio::test]
async fn a_bad_plan_is_an_error_the_model_can_fix() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(plan_call("p1", &[("  ", "pending")]));
    server.push(plan_call("p2", &[("Look", "doing")]));
    server.push(Reply::new().text("Giving up on plans."));
    let out = openai_run(&h, &server, "go").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.of_kind("plan").is_empty(), "{out:?}");
    let errors: Vec<String> = out
        .of_kind("tool_result")
        .iter()
        .map(|r| r["data"]["result"]["error"].as_str().unwrap().to_owned())
        .collect();
    assert!(errors[0].contains("plan[0].step is empty"), "{errors:?}");
    assert!(
        errors[1].contains("\"pending\", \"in_progress\", \"completed\""),
        "{errors:?}"
    );
}

/// Over the WebSocket: each new connection is told the instructions the session loaded,
/// a reconnect that names what it saw is not told again, and the plan is a `plan` message.
#[tokio::test]
async fn the_websocket_shows_the_instructions_and_the_plan() {
    let h = Harness::new();
    std::fs::write(h.work().join("AGENTS.md"), "RULE\n").unwrap();
    let model = FakeModel::start().await;
    let server = Server::start(&h, &[]).await;
    let id = open(&server, &h, &model, "alice", None).await;
    model.push(plan_call("p1", &STEPS));
    model.push(Reply::new().text("Planned."));
    let url = session_url(&server, &id, &server.token("alice", false));
    let mut ws = connect(&url).await;
    assert_eq!(next(&mut ws).await["type"], "agent_state");
    let told = next(&mut ws).await;
    assert_eq!(told["type"], "instructions", "{told}");
    let file = &told["payload"]["files"][0];
    let agents = h.work().canonicalize().unwrap().join("AGENTS.md");
    assert_eq!(file["path"], agents.display().to_string());
    assert_eq!(file["bytes"], 5);
    send(&mut ws, user("plan it")).await;
    let turn = collect(&mut ws, is("done")).await;
    let plan = turn.iter().find(|m| m["type"] == "plan").expect("a plan");
    assert_eq!(plan["payload"]["entries"], entries(&STEPS));
    assert_eq!(plan["payload"]["explanation"], "found the cause");
    let last = turn.last().unwrap()["seq"].as_u64().unwrap();
    drop(ws);
    let mut again = connect(&format!("{url}&last_seq={last}")).await;
    assert_eq!(next(&mut again).await["type"], "agent_state");
    send(&mut again, json!({"type": "ping", "payload": {}})).await;
    assert_eq!(next(&mut again).await["type"], "pong", "told twice");
}

fn updates_of<'a>(lines: &'a [Value], kind: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|m| {
            m["method"] == "session/update" && m["params"]["update"]["sessionUpdate"] == kind
        })
        .collect()
}

/// ACP: the instructions are a finished `read` tool call sent right after `session/new`
/// answers (a client drops updates for a session it does not know yet); the plan is a
/// `plan` update.
#[tokio::test]
async fn an_acp_client_is_shown_the_instructions_after_session_new_and_the_plan() {
    let h = Harness::new();
    std::fs::write(h.work().join("AGENTS.md"), "RULE\n").unwrap();
    let model = FakeModel::start().await;
    model.push(plan_call("p1", &STEPS));
    model.push(Reply::new().text("Planned."));
    let mut running = h
        .corral()
        .args(["acp", "-m", "llamacpp:fake-model"])
        .args(["--base-url", &model.openai_base()])
        .live_stdin()
        .spawn()
        .await;
    let session = acp_open(&mut running, &h).await;
    let read = running
        .wait_for_event(0, |m| m["params"]["update"]["sessionUpdate"] == "tool_call")
        .await;
    let update = &read["params"]["update"];
    assert_eq!(read["params"]["sessionId"], session.as_str());
    assert_eq!(update["kind"], "read");
    assert_eq!(update["status"], "completed");
    let agents = h.work().canonicalize().unwrap().join("AGENTS.md");
    assert_eq!(update["locations"][0]["path"], agents.display().to_string());
    let lines = running.events_so_far();
    let answered = lines.iter().position(|m| m["id"] == 1).unwrap();
    let shown = lines.iter().position(|m| m == &read).unwrap();
    assert!(answered < shown, "{lines:?}");

    let prompt = json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
                        "params": {"sessionId": session,
                                   "prompt": [{"type": "text", "text": "plan it"}]}});
    running.send_line(&prompt.to_string()).await;
    let done = running.wait_for_event(0, |m| m["id"] == 2).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    let lines = running.events_so_far();
    let plans = updates_of(&lines, "plan");
    assert_eq!(plans.len(), 1, "{lines:?}");
    assert_eq!(plans[0]["params"]["update"]["entries"], entries(&STEPS));
    running.close_stdin();
    running.wait().await;
}

/// MCP: `agent_output` names the instructions the agent's prompt holds.
#[tokio::test]
async fn mcp_agent_output_names_the_instructions() {
    let h = Harness::new();
    std::fs::write(h.work().join("AGENTS.md"), "RULE\n").unwrap();
    let model = FakeModel::start().await;
    model.push(plan_call("p1", &STEPS));
    model.push(Reply::new().text("Planned."));
    let (mut running, agent, _) = mcp_turn_started(&h, &model).await;
    let output = mcp_wait_done(&mut running, &agent, 10).await;
    let agents = h.work().canonicalize().unwrap().join("AGENTS.md");
    assert_eq!(
        output["instructions"],
        json!([{"path": agents.display().to_string(), "bytes": 5, "truncated": false}]),
        "{output}"
    );
    let full = mcp_call(
        &mut running,
        5_000,
        "agent_output",
        json!({"agent_id": agent, "which": "full_turn", "include_tools": true}),
    )
    .await;
    let text = full["text"].as_str().unwrap();
    assert!(
        text.contains("[plan]\n[x] Find the bug\n[>] Fix it\n[ ] Run the tests"),
        "{text}"
    );
    running.close_stdin();
    tokio::time::timeout(Duration::from_secs(30), running.wait())
        .await
        .expect("corral mcp exits when stdin closes");
}
