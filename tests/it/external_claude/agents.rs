//! What corral hands claude about agents and plans: the recursion guard (claude's subagent
//! tools withheld unless the opener passed `disallowed_tools: []`), and claude's TodoWrite
//! checklist shown as corral's `plan`.

use super::*;
use crate::common::{mcp_call, mcp_initialize};

/// The tools claude offered its model, for a claude agent opened over MCP with
/// `disallowed_tools` as given (absent when `None`).
async fn offered_to_claude(disallowed: Option<Value>) -> Vec<String> {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("OK"));
    let mut running = claude_mcp(&h, &server).await;
    mcp_initialize(&mut running).await;
    let mut open = json!({"cwd": h.work(), "model": "claude:fake-model"});
    if let Some(list) = disallowed {
        open["disallowed_tools"] = list;
    }
    let opened = mcp_call(&mut running, 1, "agent_open", open).await;
    let run = json!({"agent_id": opened["agent_id"], "text": "hello"});
    mcp_call(&mut running, 2, "agent_run", run).await;
    running.close_stdin();
    let _ = running.wait().await;
    let requests = message_requests(&server);
    assert!(!requests.is_empty(), "claude made no request");
    offered_tools(&requests[0])
}

#[tokio::test]
async fn claudes_subagent_tools_are_withheld_unless_the_opener_lifts_the_guard() {
    let guarded = offered_to_claude(None).await;
    assert!(guarded.iter().any(|t| t == "Bash"), "{guarded:?}");
    for spawner in ["Task", "Agent", "Workflow"] {
        assert!(
            !guarded.iter().any(|t| t == spawner),
            "{spawner}: {guarded:?}"
        );
    }
    let more = offered_to_claude(Some(json!(["shell"]))).await;
    for gone in ["Task", "Agent", "Workflow", "Bash"] {
        assert!(!more.iter().any(|t| t == gone), "{gone}: {more:?}");
    }
    let nested = offered_to_claude(Some(json!([]))).await;
    assert!(
        nested.iter().any(|t| t == "Agent" || t == "Task"),
        "no subagent tool with the guard lifted: {nested:?}"
    );
}

/// claude's TodoWrite is corral's plan once claude has taken it. claude 2.1.332 in `-p` mode
/// has no TodoWrite ("disabled for this session"): its result fails and no plan may show; a
/// claude that runs it must show the list as the plan.
#[tokio::test]
async fn a_todo_write_call_is_the_plan_only_when_claude_takes_it() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    let todos = json!({"todos": [
        {"content": "Read the code", "status": "completed", "activeForm": "Reading the code"},
        {"content": "Fix the bug", "status": "in_progress", "activeForm": "Fixing the bug"},
    ]});
    server.push(Reply::new().tool_call("toolu_todo", "TodoWrite", &todos.to_string()));
    server.push(Reply::new().text("Planned."));
    let out = claude_run(&h, &server, &["plan it"]).run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let results = out.of_kind("tool_result");
    let result = results
        .iter()
        .find(|e| e["data"]["result"]["toolCallId"] == "toolu_todo")
        .unwrap_or_else(|| panic!("no result for the TodoWrite call: {:#?}", out.events()));
    let plans = out.of_kind("plan");
    if result["data"]["result"]["success"] == true {
        assert_eq!(plans.len(), 1, "{:#?}", out.events());
        assert_eq!(
            plans[0]["data"]["entries"],
            json!([
                {"content": "Read the code", "priority": "medium", "status": "completed"},
                {"content": "Fix the bug", "priority": "medium", "status": "in_progress"},
            ])
        );
    } else {
        assert!(
            plans.is_empty(),
            "a refused TodoWrite made a plan: {plans:?}"
        );
    }
    assert_eq!(result_of(&out)["stopReason"], "end_turn");
}

/// An image claude's Read returns reaches corral's `tool_result` as image content, not dropped.
#[tokio::test]
async fn an_image_claude_reads_is_kept_in_the_tool_result() {
    let h = Harness::new();
    std::fs::create_dir_all(h.work()).unwrap();
    // A 1×1 PNG.
    let png: [u8; 67] = [
        0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44,
        0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f,
        0x15, 0xc4, 0x89, 0x00, 0x00, 0x00, 0x0a, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00,
        0x01, 0x00, 0x00, 0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49,
        0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
    ];
    let pic = h.work().canonicalize().unwrap().join("pic.png");
    std::fs::write(&pic, png).unwrap();
    let server = FakeModel::start().await;
    let input = json!({"file_path": pic}).to_string();
    server.push(Reply::new().tool_call("toolu_read", "Read", &input));
    server.push(Reply::new().text("A dot."));
    let out = claude_run(&h, &server, &["-p", "bypass", "look at pic.png"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let results = out.of_kind("tool_result");
    let result = results
        .iter()
        .find(|e| e["data"]["result"]["toolCallId"] == "toolu_read")
        .unwrap_or_else(|| panic!("no Read result: {:#?}", out.events()));
    assert_eq!(result["data"]["result"]["success"], true, "{result}");
    let image = result["data"]["update"]["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["content"]["type"] == "image")
        .unwrap_or_else(|| panic!("no image in {result}"))
        .clone();
    assert_eq!(image["content"]["mimeType"], "image/png", "{image}");
    assert!(
        !image["content"]["data"]
            .as_str()
            .unwrap_or_default()
            .is_empty(),
        "{image}"
    );
}
