//! `corral mcp` driven as Kaimon's clients drive its `agent_open` / `agent_status`: raw
//! JSON-RPC on stdio, the boolean `only`, unknown fields, `session_id` and `transcript`.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{mcp_call, mcp_call_result, mcp_initialize};
use crate::support::fake_anthropic::message_requests;
use crate::support::{FakeModel, Harness, Reply, Running};

async fn mcp(h: &Harness) -> Running {
    let mut running = h.corral().arg("mcp").live_stdin().spawn().await;
    mcp_initialize(&mut running).await;
    running
}

/// The tool names the model was offered in its `n`th request.
fn offered(model: &FakeModel, n: usize) -> Vec<String> {
    model.chat_requests()[n]["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn only_true_makes_allowed_tools_the_whole_set_and_false_leaves_every_tool() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    model.push(Reply::new().tool_call("c1", "write_file", r#"{"path":"x.txt","content":"hi"}"#));
    model.push(Reply::new().text("Could not."));
    model.push(Reply::new().text("Plain."));
    let mut running = mcp(&h).await;
    let open = |only: Value| {
        json!({"cwd": h.work(), "model": "llamacpp:fake-model", "base_url": model.openai_base(),
               "permission": "bypass", "allowed_tools": ["read_file"], "only": only})
    };
    let narrow = mcp_call(&mut running, 1, "agent_open", open(json!(true))).await;
    let ran = mcp_call(
        &mut running,
        2,
        "agent_run",
        json!({"agent_id": narrow["agent_id"], "text": "write x.txt"}),
    )
    .await;
    assert!(
        ran["text"].as_str().unwrap().contains("Could not."),
        "{ran}"
    );
    assert_eq!(offered(&model, 0), ["read_file"]);
    assert!(
        !h.work().join("x.txt").exists(),
        "a tool outside allowed_tools ran even under bypass"
    );
    // false is today's default: allowed_tools spare approvals, every tool is offered.
    let wide = mcp_call(&mut running, 3, "agent_open", open(json!(false))).await;
    let ran = mcp_call(
        &mut running,
        4,
        "agent_run",
        json!({"agent_id": wide["agent_id"], "text": "hi"}),
    )
    .await;
    assert_eq!(ran, json!({"text": "Plain."}));
    let tools = offered(&model, 2);
    assert!(
        tools.iter().any(|t| t == "write_file") && tools.iter().any(|t| t == "shell"),
        "{tools:?}"
    );
    // A list still works as before; a string is neither form.
    let listed = mcp_call(&mut running, 5, "agent_open", open(json!(["read_file"]))).await;
    assert!(listed["agent_id"].is_string(), "{listed}");
    let call = json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call",
                      "params": {"name": "agent_open", "arguments": open(json!("read_file"))}});
    running.send_line(&call.to_string()).await;
    let answer = running.wait_for_event(0, |m| m["id"] == 6).await;
    assert!(
        answer.to_string().contains("only is true, false or a list"),
        "{answer}"
    );
    running.close_stdin();
    let _ = running.wait().await;
}

#[tokio::test]
async fn unknown_agent_open_fields_are_refused_by_name_and_nothing_opens() {
    let h = Harness::new();
    let mut running = mcp(&h).await;
    let args = json!({"cwd": h.work(), "model": "llamacpp:m", "permision": "bypass",
                      "colour": "red"});
    let result = mcp_call_result(&mut running, 1, "agent_open", args).await;
    assert_eq!(result["isError"], true, "{result}");
    let text = result["content"][0]["text"].as_str().unwrap();
    let error = serde_json::from_str::<Value>(text).unwrap()["error"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(error.contains(r#""colour", "permision""#), "{error}");
    for known in [
        "cwd",
        "model",
        "permission",
        "allowed_tools",
        "only",
        "mcp_config",
    ] {
        assert!(error.contains(known), "{known} not in {error}");
    }
    let listed = mcp_call(&mut running, 2, "agent_list", json!({})).await;
    assert_eq!(listed, json!({"agents": []}));
    // The schema says so too, for clients that check before calling.
    let list = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}});
    running.send_line(&list.to_string()).await;
    let tools = running.wait_for_event(0, |m| m["id"] == 3).await;
    let open = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "agent_open")
        .unwrap()
        .clone();
    assert_eq!(open["inputSchema"]["additionalProperties"], false, "{open}");
    running.close_stdin();
    let _ = running.wait().await;
}

/// `OPENAI_BASE_URL` at a local server serves an `openai:` agent with no key; its status has
/// no external session id and names corral's event log as its transcript.
#[tokio::test]
async fn an_openai_agent_on_openai_base_url_needs_no_key_and_its_transcript_is_the_event_log() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    model.push(Reply::new().text("Local."));
    let mut running = h
        .corral()
        .arg("mcp")
        .env("OPENAI_BASE_URL", model.openai_base())
        .live_stdin()
        .spawn()
        .await;
    mcp_initialize(&mut running).await;
    let open = json!({"cwd": h.work(), "model": "openai:fake-model"});
    let opened = mcp_call(&mut running, 1, "agent_open", open).await;
    let me = json!({"agent_id": opened["agent_id"], "text": "hi"});
    let ran = mcp_call(&mut running, 2, "agent_run", me).await;
    assert_eq!(ran, json!({"text": "Local."}));
    let status = mcp_call(
        &mut running,
        3,
        "agent_status",
        json!({"agent_id": opened["agent_id"]}),
    )
    .await;
    assert_eq!(status["session_id"], Value::Null, "{status}");
    assert!(status["event_log"].is_string(), "{status}");
    assert_eq!(status["transcript"], status["event_log"], "{status}");
    let listed = mcp_call(&mut running, 4, "agent_list", json!({})).await;
    assert_eq!(listed["agents"][0]["transcript"], status["event_log"]);
    running.close_stdin();
    let _ = running.wait().await;
}

fn claude_program() -> PathBuf {
    std::env::var_os("CORRAL_CLAUDE").map_or_else(
        || {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/corral-ci/agent-clis/node_modules/.bin/claude")
        },
        PathBuf::from,
    )
}

/// A claude agent's status carries claude's own session id and the transcript claude keeps
/// of it under `~/.claude/projects/<munged cwd>/<session_id>.jsonl`.
#[tokio::test]
async fn a_claude_agents_status_names_its_session_id_and_claudes_transcript() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("CLAUDE ANSWER"));
    let claude = claude_program();
    assert!(
        claude.exists(),
        "{}: run scripts/install-agent-clis",
        claude.display()
    );
    let mut running = h
        .corral()
        .arg("mcp")
        .env("CORRAL_CLAUDE", claude)
        .env("ANTHROPIC_BASE_URL", server.base_url())
        .env("ANTHROPIC_API_KEY", "sk-ant-dummy")
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        .live_stdin()
        .timeout(Duration::from_secs(120))
        .spawn()
        .await;
    mcp_initialize(&mut running).await;
    let open = json!({"cwd": h.work(), "model": "claude:fake-model", "permission": "bypass"});
    let opened = mcp_call(&mut running, 1, "agent_open", open).await;
    let agent = json!({"agent_id": opened["agent_id"]});
    let mut run = agent.clone();
    run["text"] = json!("hello");
    let ran = mcp_call(&mut running, 2, "agent_run", run).await;
    assert!(
        ran["text"].as_str().unwrap().contains("CLAUDE ANSWER"),
        "{ran}"
    );
    assert_eq!(message_requests(&server).len(), 1);
    let status = mcp_call(&mut running, 3, "agent_status", agent).await;
    let session_id = status["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{status}"));
    assert!(!session_id.is_empty());
    let transcript = PathBuf::from(status["transcript"].as_str().unwrap());
    assert_ne!(status["transcript"], status["event_log"], "{status}");
    assert!(
        transcript.starts_with(h.home_dir().join(".claude/projects")),
        "{status}"
    );
    assert_eq!(
        transcript.file_name().unwrap().to_str().unwrap(),
        format!("{session_id}.jsonl")
    );
    let text = std::fs::read_to_string(&transcript).unwrap();
    assert!(text.contains("CLAUDE ANSWER"), "{text}");
    running.close_stdin();
    let _ = running.wait().await;
}

/// "Up to 10 dead agents are kept (oldest dropped first)": twelve closed, the first two gone
/// from the list and from `agent_status`, their logs still on disk.
#[tokio::test]
async fn ten_dead_agents_are_kept_and_the_oldest_dropped_first() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let mut running = mcp(&h).await;
    let mut id = 0;
    let mut next = || {
        id += 1;
        id
    };
    for n in 0..12 {
        let open = json!({"cwd": h.work(), "model": "llamacpp:fake-model",
                          "base_url": model.openai_base(), "id": format!("k{n}")});
        mcp_call(&mut running, next(), "agent_open", open).await;
        let closed = mcp_call(
            &mut running,
            next(),
            "agent_close",
            json!({"agent_id": format!("k{n}")}),
        )
        .await;
        assert_eq!(closed, json!({"closed": true}));
    }
    let listed = mcp_call(&mut running, next(), "agent_list", json!({})).await;
    let mut ids: Vec<String> = listed["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            assert_eq!(a["status"], "dead", "{a}");
            a["id"].as_str().unwrap().to_owned()
        })
        .collect();
    ids.sort_by_key(|i| i[1..].parse::<u32>().unwrap());
    let expected: Vec<String> = (2..12).map(|n| format!("k{n}")).collect();
    assert_eq!(ids, expected);
    let gone = mcp_call_result(
        &mut running,
        next(),
        "agent_status",
        json!({"agent_id": "k0"}),
    )
    .await;
    assert_eq!(gone["isError"], true, "{gone}");
    assert_eq!(h.event_logs().len(), 12, "logs persist regardless");
    // A dead id reopens in its slot; it is live again, not among the dead.
    let open = json!({"cwd": h.work(), "model": "llamacpp:fake-model",
                      "base_url": model.openai_base(), "id": "k2"});
    mcp_call(&mut running, next(), "agent_open", open).await;
    let status = mcp_call(
        &mut running,
        next(),
        "agent_status",
        json!({"agent_id": "k2"}),
    )
    .await;
    assert_ne!(status["status"], "dead", "{status}");
    running.close_stdin();
    let _ = running.wait().await;
}

/// Kaimon's `permission_mode` overrides the preset's mode: `bypassPermissions` lets a write
/// run that the default preset would have asked for (nobody is there to answer, so it would
/// be refused), `plan` offers no writing tool at all, and a name claude does not have is
/// refused before anything opens.
#[tokio::test]
async fn permission_mode_overrides_the_presets_mode() {
    let h = Harness::new();
    std::fs::create_dir_all(h.work()).unwrap();
    let model = FakeModel::start().await;
    model.push(Reply::new().tool_call("c1", "write_file", r#"{"path":"x.txt","content":"hi"}"#));
    model.push(Reply::new().text("Wrote it."));
    model.push(Reply::new().text("Planned."));
    let mut running = mcp(&h).await;
    let open = |mode: &str| {
        json!({"cwd": h.work(), "model": "llamacpp:fake-model", "base_url": model.openai_base(),
               "permission": "default", "permission_mode": mode})
    };
    let bypass = mcp_call(&mut running, 1, "agent_open", open("bypassPermissions")).await;
    let ran = mcp_call(
        &mut running,
        2,
        "agent_run",
        json!({"agent_id": bypass["agent_id"], "text": "write x.txt"}),
    )
    .await;
    assert!(ran["text"].as_str().unwrap().contains("Wrote it."), "{ran}");
    assert!(
        h.work().join("x.txt").exists(),
        "bypassPermissions did not let the write run"
    );
    let plan = mcp_call(&mut running, 3, "agent_open", open("plan")).await;
    let _ = mcp_call(
        &mut running,
        4,
        "agent_run",
        json!({"agent_id": plan["agent_id"], "text": "plan it"}),
    )
    .await;
    let offered_in_plan = offered(&model, 2);
    assert!(
        offered_in_plan.iter().any(|t| t == "read_file"),
        "{offered_in_plan:?}"
    );
    assert!(
        !offered_in_plan.iter().any(|t| t == "write_file"),
        "{offered_in_plan:?}"
    );
    let bad = mcp_call_result(&mut running, 5, "agent_open", open("yolo")).await;
    assert_eq!(bad["isError"], true, "{bad}");
    assert!(bad.to_string().contains("bypassPermissions"), "{bad}");
    running.close_stdin();
    let _ = running.wait().await;
}
