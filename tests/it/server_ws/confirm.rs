//! Approval over the WebSocket: a `tool_confirm_request`, answered with each of the six
//! actions, and what each leaves behind for the rest of the turn and the session.

use serde_json::{Value, json};

use super::{Ws, collect, connect, is, next, open, send, session_url, user};
use crate::common::offered_tools;
use crate::support::server::Server;
use crate::support::{FakeModel, Harness, Reply};

/// A write_file turn under the default preset, answered with `action`; returns the turn.
async fn confirm_turn(ws: &mut Ws, model: &FakeModel, action: &str) -> Vec<Value> {
    model.push(
        Reply::new()
            .tool_call("w1", "write_file", r#"{"path":"out.txt","content":"hi"}"#)
            .finish("tool_calls"),
    );
    if action != "cancel" {
        model.push(Reply::new().text("ok").finish("stop"));
    }
    send(ws, user("write it")).await;
    let asked = collect(ws, is("tool_confirm_request")).await;
    let request = &asked.last().unwrap()["payload"];
    assert_eq!(request["tool"], "write_file");
    assert_eq!(request["parameters"]["path"], "out.txt");
    assert!(
        request["message"].as_str().unwrap().contains("out.txt"),
        "{request}"
    );
    let id = request["confirmation_id"].as_str().unwrap().to_string();
    send(
        ws,
        json!({"type": "tool_confirm", "payload": {"confirmation_id": id, "action": action}}),
    )
    .await;
    let end = |m: &Value| m["type"] == "done" || m["payload"]["code"] == "CANCELLED";
    let rest = collect(ws, end).await;
    assert!(
        rest.iter()
            .all(|m| m["payload"]["code"] != "INVALID_MESSAGE"
                && m["payload"]["code"] != "UNKNOWN_CONFIRMATION"),
        "{action}: {rest:?}"
    );
    rest
}

/// Answers every `tool_confirm_request` of the running turn with `deny` until `done`; whether
/// one came, and the turn's messages.
async fn deny_asks_until_done(ws: &mut Ws) -> (bool, Vec<Value>) {
    let mut asked = false;
    let mut seen = Vec::new();
    loop {
        let part = collect(ws, |m| is("done")(m) || is("tool_confirm_request")(m)).await;
        let last = part.last().unwrap().clone();
        seen.extend(part);
        if last["type"] == "done" {
            return (asked, seen);
        }
        asked = true;
        let id = &last["payload"]["confirmation_id"];
        let answer = json!({"confirmation_id": id, "action": "deny"});
        send(ws, json!({"type": "tool_confirm", "payload": answer})).await;
    }
}

/// The error of the turn's one `tool_end` (`None`: the call ran).
fn tool_error(turn: &[Value]) -> Option<String> {
    let ends: Vec<&Value> = turn.iter().filter(|m| m["type"] == "tool_end").collect();
    assert_eq!(ends.len(), 1, "{turn:?}");
    ends[0]["payload"]["error"].as_str().map(str::to_owned)
}

/// Each answer does what DESIGN.md's approval options say, and only that: deny refuses this
/// call; disable takes the tool off the offer for the session and refuses it later without
/// asking; forbid_all offers no tools for the rest of the turn, and the next turn has them
/// again; allow_all lets the next call run without asking; cancel ends the turn.
#[tokio::test]
async fn ws_tool_confirm_allow_deny_and_every_action() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let server = Server::start(&h, &[]).await;
    let token = server.token("alice", false);
    let has_write = |tools: &[String]| tools.iter().any(|t| t == "write_file");
    for action in [
        "allow",
        "deny",
        "allow_all",
        "disable",
        "forbid_all",
        "cancel",
    ] {
        let _ = std::fs::remove_file(h.work().join("out.txt"));
        let first = model.chat_requests().len();
        let id = open(&server, &h, &model, "alice", None).await;
        let mut ws = connect(&session_url(&server, &id, &token)).await;
        assert_eq!(next(&mut ws).await["payload"]["state"], "idle");
        let rest = confirm_turn(&mut ws, &model, action).await;
        let written = h.work().join("out.txt").exists();
        assert_eq!(written, matches!(action, "allow" | "allow_all"), "{action}");
        let last = rest.last().unwrap();
        if action == "cancel" {
            assert_eq!(last["type"], "error", "{rest:?}");
            assert_eq!(model.chat_requests().len(), first + 1, "{action}");
        } else {
            assert_eq!(last["type"], "done", "{rest:?}");
            let expected = match action {
                "deny" => Some("the user denied this call"),
                "disable" => Some("the user disabled write_file for the rest of this session"),
                "forbid_all" => Some(
                    "the user forbade tool calls for the rest of this turn; answer without tools",
                ),
                _ => None,
            };
            assert_eq!(tool_error(&rest).as_deref(), expected, "{action}");
            // The same turn's next request: what the answer left on offer.
            let after = offered_tools(&model, first + 1);
            match action {
                "disable" => {
                    assert!(!has_write(&after), "{action}: {after:?}");
                    assert!(
                        after.iter().any(|t| t == "read_file"),
                        "{action}: {after:?}"
                    );
                }
                "forbid_all" => assert!(after.is_empty(), "{action}: {after:?}"),
                _ => assert!(has_write(&after), "{action}: {after:?}"),
            }
        }

        // A second turn makes the same call again.
        let turn2 = model.chat_requests().len();
        model.push(
            Reply::new()
                .tool_call(
                    "w2",
                    "write_file",
                    r#"{"path":"out.txt","content":"again"}"#,
                )
                .finish("tool_calls"),
        );
        model.push(Reply::new().text("ok").finish("stop"));
        send(&mut ws, user("write it again")).await;
        let (asked, turn) = deny_asks_until_done(&mut ws).await;
        let offered = offered_tools(&model, turn2);
        let again = std::fs::read_to_string(h.work().join("out.txt")).ok();
        match action {
            "allow_all" => {
                assert!(!asked, "allow_all: asked again");
                assert_eq!(tool_error(&turn), None);
                assert_eq!(again.as_deref(), Some("again"));
            }
            "disable" => {
                assert!(!asked, "disable: asked again");
                assert!(!has_write(&offered), "disable: {offered:?}");
                assert_eq!(
                    tool_error(&turn).as_deref(),
                    Some("refused: the write_file tool was disabled for this session")
                );
            }
            // A new turn lifts forbid_all; deny and allow held for that one call only.
            _ => {
                assert!(asked, "{action}: not asked again");
                assert!(has_write(&offered), "{action}: {offered:?}");
                assert_eq!(
                    tool_error(&turn).as_deref(),
                    Some("the user denied this call")
                );
            }
        }
        if action != "allow_all" {
            assert_eq!(again.as_deref(), written.then_some("hi"), "{action}");
        }
    }
}
