//! claude-agent-acp and opencode, the real agents whose fake routes or start-up keep them out
//! of the default run.

use serde_json::json;

use super::*;
use crate::common::*;
use crate::support::{Cmd, FakeModel, Harness, Reply};

/// `corral run --json -m acp:claude` (claude-agent-acp) against the fake server's Anthropic
/// routes, offline (external-clis.md §2).
fn claude_acp_run(h: &Harness, server: &FakeModel, prompt: &str) -> Cmd {
    h.corral()
        .env("PATH", path_with("claude-agent-acp"))
        .env("ANTHROPIC_BASE_URL", server.base_url())
        .env("ANTHROPIC_API_KEY", "sk-ant-dummy")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        // claude refuses to skip its own prompts as root without it; corral's gate still asks.
        .env("IS_SANDBOX", "1")
        .args(["run", "--json", "-m", "acp:claude", prompt])
        .timeout(AGENT_TIMEOUT)
}

#[tokio::test]
async fn claude_agent_acp_bash_call_goes_through_the_gate() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call(
        "toolu_1",
        "Bash",
        r#"{"command":"touch made.txt","description":"Make a file"}"#,
    ));
    server.push(Reply::new().text("Made it."));
    let mut running = claude_acp_run(&h, &server, "make a file")
        .arg("--approve-stdin")
        .live_stdin()
        .spawn()
        .await;
    let request = answer(&mut running, 0, "allow").await;
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_well_formed(&out);
    assert!(out.of_kind("error").is_empty(), "{out:?}");
    assert_eq!(request["data"]["tool"], "shell", "{request}");
    assert_eq!(request["data"]["toolCall"]["kind"], "execute");
    assert!(h.work().join("made.txt").exists(), "the command ran");
    // Announced first, then once more with the input the agent filled in.
    let uses = out.of_kind("tool_use");
    assert_eq!(
        uses.last().unwrap()["data"]["call"]["rawInput"]["command"],
        "touch made.txt",
        "{out:?}"
    );
    let results = out.of_kind("tool_result");
    assert_eq!(results.len(), 1, "{out:?}");
    assert_eq!(results[0]["data"]["result"]["success"], true);
    assert_eq!(result_of(&out)["stopReason"], "end_turn");
    assert!(
        authoritative(&out, "assistant_text")
            .concat()
            .contains("Made it."),
        "{out:?}"
    );
}

#[tokio::test]
async fn claude_agent_acp_write_is_asked_about_with_a_diff() {
    let h = Harness::new();
    let root = h.work().canonicalize().unwrap();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call(
        "toolu_2",
        "Write",
        &json!({"file_path": root.join("notes.txt"), "content": "via corral\n"}).to_string(),
    ));
    server.push(Reply::new().text("Wrote it."));
    let mut running = claude_acp_run(&h, &server, "write notes")
        .arg("--approve-stdin")
        .live_stdin()
        .spawn()
        .await;
    let request = answer(&mut running, 0, "allow").await;
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    // claude-agent-acp 0.101 writes on its own (not through fs/*), after asking.
    assert_eq!(request["data"]["tool"], "write_file", "{request}");
    assert_eq!(request["data"]["agentTool"], "Write", "{request}");
    assert!(
        request["data"]["diff"]
            .as_str()
            .unwrap()
            .contains("via corral"),
        "{request}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("notes.txt")).unwrap(),
        "via corral\n"
    );
    assert_eq!(result_of(&out)["stopReason"], "end_turn");
}

#[tokio::test]
async fn claude_agent_acp_is_handed_the_tools_a_preset_does_not_offer() {
    let h = Harness::new();
    let root = h.work().canonicalize().unwrap();
    let server = FakeModel::start().await;
    // The fake model calls Write anyway; claude has no such tool under readonly.
    server.push(Reply::new().tool_call(
        "toolu_3",
        "Write",
        &json!({"file_path": root.join("notes.txt"), "content": "nope"}).to_string(),
    ));
    server.push(Reply::new().text("I cannot write."));
    let out = claude_acp_run(&h, &server, "write notes")
        .args(["-p", "readonly"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    // Handed over as a deny list, so not advisory: no error at spawn, nobody asked.
    assert!(out.of_kind("error").is_empty(), "{out:?}");
    assert!(out.of_kind("permission").is_empty(), "{out:?}");
    assert!(!root.join("notes.txt").exists());
    let tools = server
        .requests()
        .into_iter()
        .find(|r| {
            r.path == "/v1/messages" && r.body["tools"].as_array().is_some_and(|t| !t.is_empty())
        })
        .map(|r| r.body["tools"].to_string())
        .unwrap_or_default();
    assert!(
        tools.contains("\"Read\"") && !tools.contains("\"Write\""),
        "{tools}"
    );
    assert_eq!(result_of(&out)["stopReason"], "end_turn");
}

/// `corral run --json -m acp:opencode:fake/fake-model`, opencode's provider pointed at the
/// fake server's OpenAI route, offline (external-clis.md §3). opencode is the slowest agent
/// to start (seconds on two cores); its one test runs with the rest all the same.
fn opencode_run(h: &Harness, server: &FakeModel, prompt: &str) -> Cmd {
    let config = h.home_dir().join("opencode.json");
    std::fs::write(
        &config,
        json!({
            "$schema": "https://opencode.ai/config.json",
            "model": "fake/fake-model",
            "small_model": "fake/fake-model",
            "autoupdate": false,
            "share": "disabled",
            "provider": {"fake": {
                "npm": "@ai-sdk/openai-compatible",
                "options": {"baseURL": server.openai_base(), "apiKey": "dummy"},
                "models": {"fake-model": {"tool_call": true,
                    "limit": {"context": 128_000, "output": 4096}}},
            }},
        })
        .to_string(),
    )
    .unwrap();
    h.corral()
        .env("PATH", path_with("opencode"))
        .env("OPENCODE_CONFIG", &config)
        .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
        .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
        .env("OPENCODE_DISABLE_LSP_DOWNLOAD", "1")
        .env("OPENCODE_DISABLE_SHARE", "1")
        .env("OPENCODE_PERMISSION", r#"{"bash":"ask"}"#)
        .env("npm_config_registry", "http://127.0.0.1:9/")
        .args([
            "run",
            "--json",
            "-m",
            "acp:opencode:fake/fake-model",
            prompt,
        ])
        .timeout(AGENT_TIMEOUT)
}

#[tokio::test]
async fn opencode_bash_call_goes_through_the_gate() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    // opencode's title request is a side call the fake answers on its own.
    server.push(Reply::new().tool_call(
        "call_1",
        "bash",
        r#"{"command":"touch made.txt","description":"make"}"#,
    ));
    server.push(Reply::new().text("Made it."));
    let mut running = opencode_run(&h, &server, "make a file")
        .arg("--approve-stdin")
        .live_stdin()
        .spawn()
        .await;
    let request = answer(&mut running, 0, "allow").await;
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(request["data"]["tool"], "shell", "{request}");
    assert!(h.work().join("made.txt").exists(), "the command ran");
    let results = out.of_kind("tool_result");
    assert_eq!(results.len(), 1, "{out:?}");
    assert_eq!(results[0]["data"]["result"]["success"], true);
    assert_eq!(authoritative(&out, "assistant_text"), ["Made it."]);
    assert_eq!(result_of(&out)["stopReason"], "end_turn");
    // The model was chosen over the wire (session/set_config_option) and used.
    let turns = server.chat_requests();
    assert!(
        turns.iter().all(|b| b["model"] == "fake-model"),
        "{turns:?}"
    );
}

/// Issue 13 §3: a `SessionStart` hook planted in the project's `.claude/settings.json` runs
/// for claude-agent-acp only when the person opts in. Returns whether it ran.
async fn claude_acp_in_planted_project(opt_in: bool) -> bool {
    let h = Harness::new();
    let outside = tempfile::tempdir().unwrap();
    let marker = outside.path().join("hook-ran");
    let dir = h.work().join(".claude");
    std::fs::create_dir_all(&dir).unwrap();
    let hook = json!({"hooks": {"SessionStart": [{"hooks": [
        {"type": "command", "command": format!("touch {}", marker.display())}]}]}});
    std::fs::write(dir.join("settings.json"), hook.to_string()).unwrap();
    if opt_in {
        h.write_config("[agents]\nproject_settings = true\n");
    }
    let server = FakeModel::start().await;
    server.push(Reply::new().text("HELLO"));
    let out = claude_acp_run(&h, &server, "hello").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(result_of(&out)["stopReason"], "end_turn");
    if opt_in {
        appears(&marker).await
    } else {
        marker.exists()
    }
}

#[tokio::test]
async fn claude_agent_acp_runs_no_hook_planted_in_the_project() {
    assert!(!claude_acp_in_planted_project(false).await);
}

#[tokio::test]
async fn claude_agent_acp_runs_the_projects_hooks_with_the_opt_in() {
    assert!(claude_acp_in_planted_project(true).await);
}

/// Issue 13 §3: an `opencode.json` planted in the project with a local MCP command runs it
/// only when the person opts in. Returns whether it ran.
async fn opencode_in_planted_project(opt_in: bool) -> bool {
    let h = Harness::new();
    let outside = tempfile::tempdir().unwrap();
    let marker = outside.path().join("mcp-ran");
    let planted = json!({"$schema": "https://opencode.ai/config.json", "mcp": {"planted": {
        "type": "local", "enabled": true,
        "command": ["sh", "-c", format!("touch {}; sleep 1", marker.display())]}}});
    std::fs::write(h.work().join("opencode.json"), planted.to_string()).unwrap();
    if opt_in {
        h.write_config("[agents]\nproject_settings = true\n");
    }
    let server = FakeModel::start().await;
    server.push(Reply::new().text("HELLO"));
    let out = opencode_run(&h, &server, "hello").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    if opt_in {
        appears(&marker).await
    } else {
        marker.exists()
    }
}

#[tokio::test]
async fn opencode_runs_no_mcp_command_planted_in_the_project() {
    assert!(!opencode_in_planted_project(false).await);
}

#[tokio::test]
async fn opencode_runs_the_projects_mcp_command_with_the_opt_in() {
    assert!(opencode_in_planted_project(true).await);
}

/// The tools claude-agent-acp offered its model, for an `acp:claude` agent opened over MCP with
/// `disallowed_tools` as given (absent when `None`).
async fn offered_by_claude_acp(disallowed: Option<serde_json::Value>) -> Vec<String> {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("OK"));
    let mut running = h
        .corral()
        .arg("mcp")
        .env("PATH", path_with("claude-agent-acp"))
        .env("ANTHROPIC_BASE_URL", server.base_url())
        .env("ANTHROPIC_API_KEY", "sk-ant-dummy")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        .env("IS_SANDBOX", "1")
        .live_stdin()
        .timeout(AGENT_TIMEOUT)
        .spawn()
        .await;
    mcp_initialize(&mut running).await;
    let mut open = json!({"cwd": h.work(), "model": "acp:claude"});
    if let Some(list) = disallowed {
        open["disallowed_tools"] = list;
    }
    let opened = mcp_call(&mut running, 1, "agent_open", open).await;
    let run = json!({"agent_id": opened["agent_id"], "text": "hello"});
    mcp_call(&mut running, 2, "agent_run", run).await;
    running.close_stdin();
    let _ = running.wait().await;
    server
        .requests()
        .into_iter()
        .find(|r| {
            r.path == "/v1/messages" && r.body["tools"].as_array().is_some_and(|t| !t.is_empty())
        })
        .and_then(|r| r.body["tools"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn claude_agent_acp_gets_the_recursion_guard_unless_the_opener_lifts_it() {
    let guarded = offered_by_claude_acp(None).await;
    assert!(guarded.iter().any(|t| t == "Read"), "{guarded:?}");
    for spawner in ["Task", "Agent", "Workflow"] {
        assert!(
            !guarded.iter().any(|t| t == spawner),
            "{spawner}: {guarded:?}"
        );
    }
    let nested = offered_by_claude_acp(Some(json!([]))).await;
    assert!(
        nested.iter().any(|t| t == "Agent" || t == "Task"),
        "no subagent tool with the guard lifted: {nested:?}"
    );
}
