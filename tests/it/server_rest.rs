//! `/api/v1` end to end: a real `corral serve` process, sessions against the fake model,
//! driven over HTTP with minted tokens.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::{FakeModel, Harness, Reply};

pub(crate) mod client;
mod mcp_servers;

use client::{Api, Sse, cmdline, code, descendants};

#[tokio::test]
async fn a_turn_runs_and_its_history_is_listed() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    model.push(Reply::new().text("Hello from the fake."));
    let api = Api::start(&h).await;
    let id = api.create(&h, &model, json!({})).await;
    assert!(
        id.len() == 8 && id.bytes().all(|b| b.is_ascii_hexdigit()),
        "the 8-hex id `corral run` uses too: {id}"
    );
    let (status, sent) = api.send(&id, "say hello").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{sent}");
    assert_eq!(sent["turn"], 1);
    assert_eq!(sent["message_id"].as_str().unwrap().len(), 36);
    let session = api.wait_idle_after(&id, 1).await;
    assert_eq!(session["model"], "llamacpp:fake-model");
    assert_eq!(session["pending_permissions"], 0);
    let path = format!("/api/v1/sessions/{id}/messages");
    let (status, body) = api.call(Method::GET, &path, None).await;
    assert_eq!(status, StatusCode::OK);
    let messages = body["messages"].as_array().unwrap();
    let pairs: Vec<(&str, &str)> = messages
        .iter()
        .map(|m| (m["role"].as_str().unwrap(), m["text"].as_str().unwrap()))
        .collect();
    assert_eq!(
        pairs,
        [("user", "say hello"), ("assistant", "Hello from the fake.")]
    );
    assert!(
        messages
            .iter()
            .all(|m| m["turn"] == 1 && m["ts"].is_string())
    );
    let (_, list) = api.call(Method::GET, "/api/v1/sessions", None).await;
    assert_eq!(list["sessions"][0]["id"], id.as_str());
}

#[tokio::test]
async fn tokens_and_ownership_are_enforced() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let api = Api::start(&h).await;
    let id = api.create(&h, &model, json!({})).await;
    let path = format!("/api/v1/sessions/{id}");
    for token in [None, Some("not-a-jwt")] {
        let (status, body) = api.call_as(token, Method::GET, &path, None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
        assert_eq!(code(&body), "UNAUTHORIZED");
        assert!(body["error"]["message"].is_string());
    }
    // Another user's session answers like a missing one.
    let bob = api.server.token("bob", false);
    let (status, body) = api.call_as(Some(&bob), Method::GET, &path, None).await;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "NOT_FOUND"));
    let messages = format!("{path}/messages");
    let (status, _) = api
        .call_as(
            Some(&bob),
            Method::POST,
            &messages,
            Some(json!({"text": "hi"})),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = api.call_as(Some(&bob), Method::DELETE, &path, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, list) = api
        .call_as(Some(&bob), Method::GET, "/api/v1/sessions", None)
        .await;
    assert_eq!(list["sessions"], json!([]));
    let admin = api.server.token("root", true);
    let (status, body) = api.call_as(Some(&admin), Method::GET, &path, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["owner"], "alice");
    let (_, list) = api
        .call_as(Some(&admin), Method::GET, "/api/v1/sessions", None)
        .await;
    assert_eq!(list["sessions"].as_array().unwrap().len(), 1);
    let (status, body) = api
        .call(Method::GET, "/api/v1/sessions/no-such-session", None)
        .await;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "NOT_FOUND"));
}

#[tokio::test]
async fn bad_requests_get_json_errors_and_a_closed_session_stays_listed() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let api = Api::start(&h).await;
    let sessions = "/api/v1/sessions";
    for body in [
        json!({"model": "llamacpp:fake-model"}),
        json!({"cwd": "relative/dir"}),
        json!({"cwd": h.work(), "colour": "blue"}),
        json!({"cwd": h.work(), "worktree": "yes"}),
    ] {
        let (status, err) = api.call(Method::POST, sessions, Some(body)).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{err}");
        assert_eq!(code(&err), "INVALID_REQUEST");
    }
    let id = api.create(&h, &model, json!({})).await;
    let messages = format!("/api/v1/sessions/{id}/messages");
    for body in [
        json!({"text": ""}),
        json!({"text": "hi", "mode": "sideways"}),
        json!({"text": "hi", "effort": "max"}),
        json!({"text": "hi", "steer": "yes"}),
        json!({"words": "hi"}),
    ] {
        let (status, err) = api.call(Method::POST, &messages, Some(body)).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{err}");
        assert_eq!(code(&err), "INVALID_REQUEST");
    }
    let long = "x".repeat(65_537);
    let (status, err) = api.send(&id, &long).await;
    assert_eq!(
        (status, code(&err)),
        (StatusCode::PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE")
    );
    // The server answers before reading the whole body and drops the connection, so this
    // goes over a connection of its own, not the shared client's pool.
    let huge = json!({ "text": "x".repeat(2 << 20) });
    let response = reqwest::Client::new()
        .post(api.url(&format!("/api/v1/sessions/{id}/messages")))
        .bearer_auth(&api.token)
        .json(&huge)
        .send()
        .await
        .unwrap();
    let status = response.status();
    let err: Value = response.json().await.unwrap();
    assert_eq!(
        (status, code(&err)),
        (StatusCode::PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE")
    );
    let confirmations = format!("/api/v1/sessions/{id}/confirmations");
    let (status, err) = api
        .call(
            Method::POST,
            &confirmations,
            Some(json!({"confirmation_id": "perm_1", "action": "maybe"})),
        )
        .await;
    assert_eq!(
        (status, code(&err)),
        (StatusCode::UNPROCESSABLE_ENTITY, "INVALID_REQUEST")
    );
    let (status, err) = api
        .call(
            Method::POST,
            &confirmations,
            Some(json!({"confirmation_id": "perm_1", "action": "allow"})),
        )
        .await;
    assert_eq!(
        (status, code(&err)),
        (StatusCode::NOT_FOUND, "CONFIRMATION_NOT_FOUND")
    );

    let path = format!("/api/v1/sessions/{id}");
    let (status, body) = api.call(Method::DELETE, &path, None).await;
    assert_eq!(
        (status, body.clone()),
        (StatusCode::OK, json!({"closed": true}))
    );
    let (_, body) = api.call(Method::DELETE, &path, None).await;
    assert_eq!(body, json!({"closed": false}));
    let (_, list) = api.call(Method::GET, sessions, None).await;
    assert_eq!(list["sessions"][0]["id"], id.as_str());
    assert_eq!(list["sessions"][0]["status"], "dead");
    let (status, err) = api.send(&id, "anyone there?").await;
    assert_eq!(
        (status, code(&err)),
        (StatusCode::CONFLICT, "SESSION_CLOSED")
    );
}

#[tokio::test]
async fn a_busy_session_refuses_a_second_message_and_cancel_ends_the_turn() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    model.push(Reply::new().stall(Duration::from_secs(60)).text("too late"));
    let api = Api::start(&h).await;
    let id = api.create(&h, &model, json!({})).await;
    let mut events = Sse::open(&api, &format!("agent:{id}"), None).await;
    let (status, _) = api.send(&id, "take your time").await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert!(
        model
            .wait_for_chat_requests(1, Duration::from_secs(10))
            .await
    );
    let (status, err) = api.send(&id, "and another thing").await;
    assert_eq!(
        (status, code(&err)),
        (StatusCode::CONFLICT, "TURN_IN_PROGRESS")
    );
    let cancel = format!("/api/v1/sessions/{id}/cancel");
    let (status, body) = api.call(Method::POST, &cancel, None).await;
    assert_eq!((status, body), (StatusCode::OK, json!({"cancelled": true})));
    let seen = events.until("result").await;
    let result = &seen.last().unwrap().2;
    assert_eq!(result["data"]["stopReason"], "cancelled", "{result}");
    api.wait_idle_after(&id, 1).await;
    let (_, body) = api.call(Method::POST, &cancel, None).await;
    assert_eq!(body, json!({"cancelled": false}));
}

#[tokio::test]
async fn a_tool_call_waits_for_a_confirmation_over_rest() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    model.push(Reply::new().tool_call("c1", "write_file", r#"{"path":"x.txt","content":"hi"}"#));
    model.push(Reply::new().text("Written."));
    let api = Api::start(&h).await;
    let id = api.create(&h, &model, json!({})).await;
    assert_eq!(api.send(&id, "write x").await.0, StatusCode::ACCEPTED);
    let session = api
        .wait_session(&id, |s| s["status"] == "waiting_approval")
        .await;
    assert_eq!(session["pending_permissions"], 1);
    let path = format!("/api/v1/sessions/{id}/permissions");
    let (_, body) = api.call(Method::GET, &path, None).await;
    let request = body["permissions"][0]["requestId"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/api/v1/sessions/{id}/confirmations");
    let answer = json!({"confirmation_id": request, "action": "allow"});
    let (status, body) = api.call(Method::POST, &path, Some(answer)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    api.wait_idle_after(&id, 1).await;
    assert_eq!(
        std::fs::read_to_string(h.work().join("x.txt")).unwrap(),
        "hi"
    );
    let path = format!("/api/v1/sessions/{id}/messages");
    let (_, body) = api.call(Method::GET, &path, None).await;
    let tool = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()
        .clone();
    assert_eq!(tool["tool"]["name"], "write_file");
    assert_eq!(tool["tool"]["input"]["path"], "x.txt");
    assert_eq!(tool["tool"]["success"], true);
}

#[tokio::test]
async fn the_event_stream_carries_envelopes_and_resumes_after_last_event_id() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    model.push(Reply::new().text("one"));
    model.push(Reply::new().text("two"));
    let api = Api::start(&h).await;
    let id = api.create(&h, &model, json!({})).await;
    let mut events = Sse::open(&api, "agent:", None).await;
    api.send(&id, "first").await;
    let first = events.until("result").await;
    let kinds: Vec<&str> = first.iter().map(|e| e.1.as_str()).collect();
    assert!(kinds.contains(&"turn_started"), "{kinds:?}");
    assert!(kinds.contains(&"user_text") && kinds.contains(&"assistant_text"));
    assert!(first.windows(2).all(|w| w[0].0 < w[1].0), "ids increase");
    assert!(
        first
            .iter()
            .all(|e| e.2["agent"] == id.as_str() && e.2["kind"] == e.1)
    );
    let last_id = first.last().unwrap().0;
    api.wait_idle_after(&id, 1).await;
    api.send(&id, "second").await;
    api.wait_idle_after(&id, 2).await;
    let mut resumed = Sse::open(&api, &format!("agent:{id}"), Some(&last_id.to_string())).await;
    let second = resumed.until("result").await;
    // Only what followed the last id seen: turn 1's closing status, then turn 2.
    assert_eq!(second[0].0, last_id + 1, "{second:?}");
    let texts: Vec<&Value> = second
        .iter()
        .filter(|e| e.1 == "user_text")
        .map(|e| &e.2["data"]["content"]["text"])
        .collect();
    assert_eq!(texts, [&json!("second")]);
    // Another user's stream does not see alice's session.
    let bob = api.server.token("bob", false);
    let response = api
        .http
        .get(api.url(&format!("/api/v1/events?channel=agent:{id}")))
        .bearer_auth(bob)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn every_documented_route_is_served() {
    let h = Harness::new();
    let api = Api::start(&h).await;
    let (status, doc) = api
        .call_as(None, Method::GET, "/api/v1/openapi.json", None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    let mut routes = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            if method == "parameters" || path == "/api/v1/openapi.json" {
                continue;
            }
            let method = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let concrete = path.replace("{id}", "some-id");
            let (status, body) = api.call_as(None, method.clone(), &concrete, None).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {path}: {body}");
            assert_eq!(code(&body), "UNAUTHORIZED");
            routes += 1;
        }
    }
    // Every route of the list but the document itself (the unit test checks the list).
    assert_eq!(routes, 13);
}

#[tokio::test]
async fn the_server_stops_cleanly_with_a_command_running() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let args = json!({"command": "sleep 45"});
    model.push(Reply::new().tool_call("c1", "shell", &args.to_string()));
    let api = Api::start_admin(&h).await;
    let id = api
        .create(&h, &model, json!({"permission": "bypass"}))
        .await;
    api.send(&id, "sleep").await;
    let pid = api.server.child.id().unwrap();
    let mut sleeper = None;
    for _ in 0..200 {
        sleeper = descendants(pid)
            .into_iter()
            .find(|p| cmdline(*p).contains("sleep"));
        if sleeper.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let sleeper = sleeper.expect("the command never started");
    // An open event stream must not hold the graceful shutdown up.
    let _events = Sse::open(&api, "agent:", None).await;
    let Api { server, .. } = api;
    let status = server.stop().await;
    assert!(status.success(), "{status:?}");
    assert!(
        !std::path::Path::new(&format!("/proc/{sleeper}")).exists()
            || std::fs::read_to_string(format!("/proc/{sleeper}/stat"))
                .is_ok_and(|s| s.contains(") Z ")),
        "the command outlived the server"
    );
}

#[tokio::test]
async fn a_worktree_session_shows_its_diff_and_others_have_none() {
    let h = Harness::new();
    let git = |args: &[&str]| {
        let status = std::process::Command::new("git")
            .args(args)
            .current_dir(h.work())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "Test")
            .env("GIT_AUTHOR_EMAIL", "test@example.com")
            .env("GIT_COMMITTER_NAME", "Test")
            .env("GIT_COMMITTER_EMAIL", "test@example.com")
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    };
    git(&["init", "-q", "-b", "main"]);
    std::fs::write(h.work().join("a.txt"), "one\n").unwrap();
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "first"]);
    let model = FakeModel::start().await;
    let args = json!({"path": "new.txt", "content": "hello\n"}).to_string();
    model.push(Reply::new().tool_call("c1", "write_file", &args));
    model.push(Reply::new().text("done"));
    let api = Api::start_admin(&h).await;
    let id = api
        .create(
            &h,
            &model,
            json!({"worktree": true, "permission": "bypass"}),
        )
        .await;
    let (status, _) = api.send(&id, "write it").await;
    assert_eq!(status, StatusCode::ACCEPTED);
    api.wait_idle_after(&id, 1).await;
    let (status, wt) = api
        .call(
            Method::GET,
            &format!("/api/v1/sessions/{id}/worktree"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{wt}");
    assert_eq!(wt["branch"], format!("corral/{id}"));
    assert_eq!(wt["files"], json!(["new.txt"]));
    assert!(wt["diff"].as_str().unwrap().contains("+hello"), "{wt}");
    assert!(
        !h.work().join("new.txt").exists(),
        "the original tree is untouched"
    );

    let plain = api.create(&h, &model, json!({})).await;
    let (status, body) = api
        .call(
            Method::GET,
            &format!("/api/v1/sessions/{plain}/worktree"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(code(&body), "NO_WORKTREE");
}
