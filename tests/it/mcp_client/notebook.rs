//! The presets that lean on a session's MCP servers, and the recursion guard over them:
//! `notebook` offers the servers' tools (run without asking) instead of corral's file and shell
//! tools; corral's own `corral mcp`, attached to an agent as an MCP server, keeps its agent_*
//! tools from that agent unless the opener passed `disallowed_tools: []`.

use std::time::Duration;

use serde_json::{Value, json};

use super::basics::{mcp_config, run_with, server_bin};
use crate::common::{mcp_call, mcp_initialize, offered_tools, tool_results};
use crate::support::{FakeModel, Harness, Reply};

#[tokio::test]
async fn notebook_offers_mcp_tools_unasked_and_refuses_shell_and_read_file() {
    let h = Harness::new();
    std::fs::create_dir_all(h.work()).unwrap();
    std::fs::write(h.work().join("secret.txt"), "SECRET-CONTENT-5521").unwrap();
    let config = mcp_config(
        &h,
        json!({"time": {"command": server_bin("mcp-server-time"),
                        "args": ["--local-timezone", "UTC"]}}),
    );
    // No --approve-stdin: a call that asked would be refused, so the MCP call running shows
    // the preset allowed it.
    let (out, model) = run_with(
        &h,
        &config,
        "notebook",
        &[
            ("shell", json!({"command": "touch pwned.txt"})),
            ("read_file", json!({"path": "secret.txt"})),
            ("time__get_current_time", json!({"timezone": "UTC"})),
        ],
    )
    .await;
    let offered = offered_tools(&model, 0);
    assert!(
        offered.iter().any(|t| t == "time__get_current_time"),
        "{offered:?}"
    );
    for gone in [
        "shell",
        "python",
        "read_file",
        "write_file",
        "edit_file",
        "apply_patch",
        "list_directory",
        "search_files",
    ] {
        assert!(!offered.iter().any(|t| t == gone), "{gone}: {offered:?}");
    }
    let results = tool_results(&out);
    assert_eq!(results.len(), 3, "{}", out.stdout);
    for refused in &results[..2] {
        assert_eq!(refused["success"], false, "{results:?}");
        assert!(
            refused["error"]
                .as_str()
                .unwrap_or_default()
                .contains("not available under the 'notebook' permission preset"),
            "{results:?}"
        );
    }
    assert!(!h.work().join("pwned.txt").exists());
    assert!(!out.stdout.contains("SECRET-CONTENT-5521"));
    assert_eq!(results[2]["success"], true, "{results:?}");
    assert!(out.of_kind("permission").is_empty(), "{}", out.stdout);
}

/// `corral mcp` as an outer host; its agent is given `corral mcp` again as an MCP server.
async fn offered_to_a_nested_corral_agent(disallowed: Option<Value>) -> Vec<String> {
    let h = Harness::new();
    let model = FakeModel::start().await;
    model.push(Reply::new().text("looked at my tools"));
    let mut running = h
        .corral()
        .arg("mcp")
        .live_stdin()
        .timeout(Duration::from_secs(90))
        .spawn()
        .await;
    mcp_initialize(&mut running).await;
    let mut open = json!({"cwd": h.work(), "model": "llamacpp:fake-model",
        "base_url": model.openai_base(), "permission": "bypass",
        "mcp_config": {"mcpServers": {"corral": {
            "command": env!("CARGO_BIN_EXE_corral"), "args": ["mcp"]}}}});
    if let Some(list) = disallowed {
        open["disallowed_tools"] = list;
    }
    let opened = mcp_call(&mut running, 1, "agent_open", open).await;
    let run = json!({"agent_id": opened["agent_id"], "text": "which tools?"});
    let ran = mcp_call(&mut running, 2, "agent_run", run).await;
    assert!(
        ran["text"].as_str().unwrap_or_default().contains("looked"),
        "{ran}"
    );
    running.close_stdin();
    let _ = running.wait().await;
    offered_tools(&model, 0)
}

#[tokio::test]
async fn corral_attached_to_itself_keeps_its_agent_tools_from_the_agent() {
    let guarded = offered_to_a_nested_corral_agent(None).await;
    assert!(guarded.iter().any(|t| t == "shell"), "{guarded:?}");
    assert!(
        !guarded.iter().any(|t| t.starts_with("corral__agent_")),
        "{guarded:?}"
    );
    let more = offered_to_a_nested_corral_agent(Some(json!(["python"]))).await;
    assert!(
        !more
            .iter()
            .any(|t| t.starts_with("corral__agent_") || t == "python"),
        "{more:?}"
    );
    // `[]` is the opener's deliberate choice: the same server's agent tools are offered.
    let nested = offered_to_a_nested_corral_agent(Some(json!([]))).await;
    for tool in [
        "corral__agent_open",
        "corral__agent_run",
        "corral__agent_close",
    ] {
        assert!(nested.iter().any(|t| t == tool), "{tool}: {nested:?}");
    }
}
