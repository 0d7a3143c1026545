//! `agent_open`'s `mcp_config`: the MCP servers an agent opened over `corral mcp` takes tools
//! from (server-everything over stdio, a real server nobody here wrote), given inline or as
//! a file, narrowed by `only`; a bad definition is a tool error naming the server.

use serde_json::{Value, json};

use crate::common::{mcp_call, mcp_call_result, mcp_initialize, offered_tools};
use crate::mcp_client::basics::server_bin;
use crate::support::{FakeModel, Harness, Reply};

/// What the model was told for tool call `id`, in any request it got.
fn tool_reply(model: &FakeModel, id: &str) -> String {
    model
        .chat_requests()
        .iter()
        .flat_map(|b| b["messages"].as_array().cloned().unwrap_or_default())
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
        .map(|m| m["content"].to_string())
        .unwrap_or_else(|| panic!("no tool message for {id}"))
}

#[tokio::test]
async fn agent_open_takes_mcp_servers_inline_or_from_a_file() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let everything = json!({"everything": {"command": server_bin("mcp-server-everything")}});
    model.push(Reply::new().tool_call("c1", "everything__echo", r#"{"message":"inline"}"#));
    model.push(Reply::new().text("one"));
    model.push(Reply::new().tool_call("c2", "everything__get-sum", r#"{"a":2,"b":40}"#));
    model.push(Reply::new().text("two"));
    std::fs::write(
        h.work().join("servers.json"),
        json!({"mcpServers": everything}).to_string(),
    )
    .unwrap();
    let mut running = h.corral().arg("mcp").live_stdin().spawn().await;
    mcp_initialize(&mut running).await;

    // The field is in the tool's schema, described, for clients that read it.
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    running.send_line(&list.to_string()).await;
    let tools = running.wait_for_event(0, |m| m["id"] == 1).await;
    let open = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "agent_open")
        .unwrap();
    let field = &open["inputSchema"]["properties"]["mcp_config"];
    assert!(
        field["description"]
            .as_str()
            .is_some_and(|d| d.contains("mcpServers")),
        "{open}"
    );

    let base = |extra: Value| {
        let mut args = json!({"cwd": h.work(), "model": "llamacpp:fake-model",
                              "base_url": model.openai_base(), "permission": "bypass"});
        for (k, v) in extra.as_object().unwrap() {
            args[k] = v.clone();
        }
        args
    };
    // Inline, the map itself.
    let opened = mcp_call(
        &mut running,
        2,
        "agent_open",
        base(json!({"mcp_config": everything})),
    )
    .await;
    let agent = opened["agent_id"].as_str().unwrap().to_owned();
    let ran = mcp_call(
        &mut running,
        3,
        "agent_run",
        json!({"agent_id": agent, "text": "go", "timeout": 60}),
    )
    .await;
    assert_eq!(ran, json!({"text": "one"}));
    assert!(tool_reply(&model, "c1").contains("Echo: inline"));
    assert!(offered_tools(&model, 0).contains(&"everything__echo".to_string()));

    // From a file relative to cwd, with `only` keeping one tool of the server.
    let opened = mcp_call(
        &mut running,
        4,
        "agent_open",
        base(json!({"mcp_config": "servers.json",
                    "only": ["read_file", "everything__get-sum"]})),
    )
    .await;
    let agent = opened["agent_id"].as_str().unwrap().to_owned();
    let ran = mcp_call(
        &mut running,
        5,
        "agent_run",
        json!({"agent_id": agent, "text": "go", "timeout": 60}),
    )
    .await;
    assert_eq!(ran, json!({"text": "two"}));
    assert!(tool_reply(&model, "c2").contains("42"));
    let offered = offered_tools(&model, 2);
    assert!(
        offered.contains(&"everything__get-sum".to_string()),
        "{offered:?}"
    );
    assert!(
        !offered.contains(&"everything__echo".to_string()),
        "{offered:?}"
    );
    assert!(!offered.contains(&"shell".to_string()), "{offered:?}");

    // Mistakes are tool errors that say what is wrong, and open nothing.
    for (id, config, says) in [
        (6, json!({"a__b": {"command": "x"}}), "a__b"),
        (7, json!("missing.json"), "missing.json"),
        (8, json!(["not", "a", "map"]), "mcp_config"),
    ] {
        let result = mcp_call_result(
            &mut running,
            id,
            "agent_open",
            base(json!({"mcp_config": config})),
        )
        .await;
        assert_eq!(result["isError"], true, "{result}");
        let text = result["content"][0]["text"].as_str().unwrap();
        assert!(text.contains(says), "{text}");
    }
    let listed = mcp_call(&mut running, 9, "agent_list", json!({})).await;
    assert_eq!(listed["agents"].as_array().unwrap().len(), 2, "{listed}");
    running.close_stdin();
    assert!(running.wait().await.success());
}
