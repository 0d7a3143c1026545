//! `mcp_servers` on `POST /api/v1/sessions`: user tokens pick among the servers the server's
//! config.toml names (server-everything, a real server nobody here wrote); only admin tokens
//! define servers, since a definition is a command line the server would start.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::client::{Api, code};
use crate::common::offered_tools;
use crate::mcp_client::basics::server_bin;
use crate::support::{FakeModel, Harness, Reply};

/// A definition that, if anything ever started it, leaves `marker` behind.
fn toucher(marker: &std::path::Path) -> Value {
    json!({"evil": {"command": "sh", "args": ["-c", format!("touch {}", marker.display())]}})
}

fn create_body(h: &Harness, model: &FakeModel, mcp_servers: Value) -> Value {
    json!({"cwd": h.work(), "model": "llamacpp:fake-model", "base_url": model.openai_base(),
           "mcp_servers": mcp_servers})
}

#[tokio::test]
async fn a_user_token_cannot_define_a_server_and_nothing_starts() {
    let h = Harness::new();
    h.write_config(&format!(
        "[mcp_servers.everything]\ncommand = {:?}\n",
        server_bin("mcp-server-everything")
    ));
    let model = FakeModel::start().await;
    let api = Api::start(&h).await;
    let marker = h.work().join("MARKER");
    for (definition, says) in [
        (toucher(&marker), "admin tokens"),
        (json!({"mcpServers": toucher(&marker)}), "admin tokens"),
        // Malformed or not, a user's definition is the same refusal.
        (
            json!({"evil": {"command": "sh", "surprise": true}}),
            "admin tokens",
        ),
        (json!(["everything", "not-configured"]), "not-configured"),
    ] {
        let (status, body) = api
            .call(
                Method::POST,
                "/api/v1/sessions",
                Some(create_body(&h, &model, definition)),
            )
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
        assert_eq!(code(&body), "FORBIDDEN");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(says),
            "{body}"
        );
    }
    // Long enough for a started `sh` to have run.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!marker.exists(), "a user's MCP definition was started");
    let (_, list) = api.call(Method::GET, "/api/v1/sessions", None).await;
    assert_eq!(list["sessions"], json!([]), "{list}");
    assert!(model.chat_requests().is_empty());

    // An admin token may define one: it is started with the session.
    let admin = api.server.token("root", true);
    let (status, body) = api
        .call_as(
            Some(&admin),
            Method::POST,
            "/api/v1/sessions",
            Some(create_body(&h, &model, toucher(&marker))),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !marker.exists() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(marker.exists(), "the admin's server was not started");
    // An admin's mistakes are the request's: 422 saying what is wrong.
    for (bad, says) in [
        (json!({"a__b": {"command": "x"}}), "a__b"),
        (json!(["nope"]), "nope"),
        (json!("everything"), "mcp_servers"),
    ] {
        let (status, body) = api
            .call_as(
                Some(&admin),
                Method::POST,
                "/api/v1/sessions",
                Some(create_body(&h, &model, bad)),
            )
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(says),
            "{body}"
        );
    }
}

#[tokio::test]
async fn a_user_token_picks_configured_servers_by_name() {
    let h = Harness::new();
    // Safe, so the default preset runs its tools without asking.
    h.write_config(&format!(
        "[mcp_servers.everything]\ncommand = {:?}\ndanger = \"safe\"\n",
        server_bin("mcp-server-everything")
    ));
    let model = FakeModel::start().await;
    model.push(Reply::new().tool_call("c1", "everything__echo", r#"{"message":"by name"}"#));
    model.push(Reply::new().text("Echoed."));
    model.push(Reply::new().text("No servers here."));
    let api = Api::start(&h).await;
    let id = api
        .create(&h, &model, json!({"mcp_servers": ["everything"]}))
        .await;
    let (status, sent) = api.send(&id, "echo").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{sent}");
    api.wait_idle_after(&id, 1).await;
    assert!(offered_tools(&model, 0).contains(&"everything__echo".to_string()));
    let reply = model.chat_requests()[1]["messages"].to_string();
    assert!(reply.contains("Echo: by name"), "{reply}");
    // An empty list picks none of the configured servers.
    let id = api.create(&h, &model, json!({"mcp_servers": []})).await;
    api.send(&id, "hi").await;
    api.wait_idle_after(&id, 1).await;
    let offered = offered_tools(&model, 2);
    assert!(offered.contains(&"read_file".to_string()), "{offered:?}");
    assert!(
        !offered.iter().any(|t| t.starts_with("everything__")),
        "{offered:?}"
    );
}
