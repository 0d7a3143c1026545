//! The scripted agent's questions: a question nobody answers is refused before the agent's
//! own request would time out, the agent's other traffic flows while one is open, and a
//! call's name is the same in every event and in the question the gate asks.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::scripted::scripted_run;
use super::*;
use crate::common::*;
use crate::support::Harness;

fn resolution_of(out_events: &[Value], request: &Value) -> Value {
    out_events
        .iter()
        .find(|e| {
            e["kind"] == "permission"
                && e["data"]["resolved"] == true
                && e["data"]["requestId"] == request["data"]["requestId"]
        })
        .cloned()
        .unwrap_or_else(|| panic!("no resolution of {request}: {out_events:?}"))
}

#[tokio::test]
async fn a_question_nobody_answers_is_refused_in_time_and_a_late_answer_does_nothing() {
    let h = Harness::new();
    h.write_config("[agents]\nacp_permission_timeout_secs = 2\n");
    let started = Instant::now();
    let mut running = scripted_run(&h, "ask rm -rf build; ask touch second")
        .arg("--approve-stdin")
        .live_stdin()
        .spawn()
        .await;
    let first = running.wait_for_event(0, is_request).await;
    // Nobody answers the first; the second is asked once the agent has its refusal.
    let second = running.wait_for_event(1, is_request).await;
    assert_eq!(second["data"]["toolCall"]["toolCallId"], "t2", "{second}");
    // The person's answer to the first comes late, while the second is open: refused, and
    // not taken for the second.
    let late = first["data"]["requestId"].as_str().unwrap().to_owned();
    running
        .send_line(&json!({"requestId": late, "decision": "allow"}).to_string())
        .await;
    let refused = running
        .wait_for_event(0, |e| {
            e["kind"] == "error"
                && e["data"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("no open permission request"))
        })
        .await;
    assert!(
        refused["data"]["message"].as_str().unwrap().contains(&late),
        "{refused}"
    );
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    // Two deadlines of 2 s, and nothing waited on the person beyond them.
    assert!(started.elapsed() < Duration::from_secs(20), "{out:?}");
    let events = out.events();
    for request in [&first, &second] {
        let resolved = resolution_of(&events, request);
        assert_eq!(resolved["data"]["decision"], "deny", "{resolved}");
        let note = resolved["data"]["note"].as_str().unwrap();
        assert!(
            note.contains("nobody answered within 2 s, as long as the agent waits"),
            "{note}"
        );
    }
    // The agent got reject_once both times and went on to the end of its turn.
    assert_eq!(
        deltas(&out, "assistant_text"),
        "PERMISSION no\nPERMISSION no\n"
    );
    assert_eq!(result_of(&out)["stopReason"], "end_turn");
    let results = out.of_kind("tool_result");
    assert_eq!(results.len(), 2, "{out:?}");
    for result in &results {
        assert_eq!(result["data"]["result"]["success"], false, "{result}");
        let error = result["data"]["result"]["error"].as_str().unwrap();
        assert!(error.contains("nobody answered"), "{error}");
    }
}

#[tokio::test]
async fn the_agents_updates_and_fs_calls_go_on_while_a_person_is_asked() {
    let h = Harness::new();
    h.write_config("[agents]\nacp_permission_timeout_secs = 4\n");
    let root = h.work().canonicalize().unwrap();
    std::fs::write(root.join("a.txt"), "hello").unwrap();
    let prompt = format!("ask-and-read {}", root.join("a.txt").display());
    let running = scripted_run(&h, &prompt)
        .arg("--approve-stdin")
        .live_stdin()
        .spawn()
        .await;
    let request = running.wait_for_event(0, is_request).await;
    // The read is served while the question is still open.
    running
        .wait_for_event(0, |e| {
            e["kind"] == "assistant_text"
                && e["data"]["content"]["text"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("READ-FIRST"))
        })
        .await;
    assert!(
        running
            .events_so_far()
            .iter()
            .all(|e| e["data"]["resolved"] != true),
        "the question was still open"
    );
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(
        deltas(&out, "assistant_text"),
        "ASKED\nREAD-FIRST {\"content\": \"hello\"}\nPERMISSION no\n"
    );
    let resolved = resolution_of(&out.events(), &request);
    assert_eq!(resolved["data"]["decision"], "deny", "{resolved}");
    assert_eq!(result_of(&out)["stopReason"], "end_turn");
}

#[tokio::test]
async fn a_call_keeps_one_name_in_its_events_and_its_question() {
    let h = Harness::new();
    let mut running = scripted_run(&h, "named-calls")
        .arg("--approve-stdin")
        .live_stdin()
        .spawn()
        .await;
    let first = answer(&mut running, 0, "allow").await;
    let second = answer(&mut running, 1, "deny").await;
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    // The gate judges both as shell; the name is the agent's tool where it gives one, else
    // the tool the gate judges — never the title of the moment.
    for (request, name) in [(&first, "shell"), (&second, "Bash")] {
        assert_eq!(request["data"]["tool"], "shell", "{request}");
        assert_eq!(request["data"]["agentTool"], name, "{request}");
    }
    assert_eq!(
        first["data"]["toolCall"]["rawInput"]["command"], "mkdir made",
        "{first}"
    );
    let named = |kind: &str, id: &str| -> Vec<Value> {
        out.of_kind(kind)
            .into_iter()
            .filter(|e| {
                e["data"]["call"]["toolCallId"] == id || e["data"]["update"]["toolCallId"] == id
            })
            .map(|e| {
                if kind == "tool_use" {
                    e["data"]["tool"].clone()
                } else {
                    e["data"]["result"]["tool"].clone()
                }
            })
            .collect()
    };
    // Announced, announced again with its input, finished: one name throughout.
    assert_eq!(named("tool_use", "n1"), ["shell", "shell"], "{out:?}");
    assert_eq!(named("tool_result", "n1"), ["shell"], "{out:?}");
    assert_eq!(named("tool_use", "n2"), ["Bash"], "{out:?}");
    assert_eq!(named("tool_result", "n2"), ["Bash"], "{out:?}");
}
