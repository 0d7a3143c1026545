use std::collections::HashMap;

use serde_json::{Value, json};

use super::launch::{PROGRAM, map_tool, permission_flags};
use super::stream::TurnState;
use super::turn::tool_ask;
use crate::event::{Payload, StopReason};
use crate::policy::{Policy, PolicyOverrides};
use crate::sandbox::programs::{FindError, find_program};
use crate::session::Session;

fn policy(name: &str, allow: &[&str], deny: &[&str]) -> Policy {
    let overrides = PolicyOverrides {
        auto_approve: None,
        allow: allow.iter().map(|s| s.to_string()).collect(),
        deny: deny.iter().map(|s| s.to_string()).collect(),
        nested_agents: false,
    };
    Policy::load(name, None, &overrides).unwrap()
}

#[test]
fn presets_become_claudes_permission_flags() {
    let default = permission_flags(&policy("default", &[], &[]));
    assert_eq!(default.mode, "default");
    assert!(default.allowed.is_empty());
    assert_eq!(default.disallowed, ["Task", "Agent", "Workflow"]);
    for tool in [
        "Bash", "Read", "Write", "Edit", "Glob", "Grep", "LS", "WebFetch",
    ] {
        assert!(default.ask.iter().any(|t| t == tool), "{tool}");
    }
    assert!(permission_flags(&policy("bypass", &[], &[])).ask.is_empty());

    assert_eq!(
        permission_flags(&policy("auto", &[], &[])).mode,
        "acceptEdits"
    );
    assert_eq!(
        permission_flags(&policy("bypass", &[], &[])).mode,
        "bypassPermissions"
    );

    let readonly = permission_flags(&policy("readonly", &[], &[]));
    assert_eq!(readonly.mode, "default");
    for tool in [
        "Bash",
        "Write",
        "Edit",
        "MultiEdit",
        "NotebookEdit",
        "WebFetch",
    ] {
        assert!(readonly.disallowed.iter().any(|t| t == tool), "{tool}");
    }
    for tool in ["Read", "Glob", "Grep", "LS"] {
        assert!(!readonly.disallowed.iter().any(|t| t == tool), "{tool}");
    }

    let specialist = permission_flags(&policy("specialist", &["shell"], &[]));
    assert_eq!(specialist.allowed, ["Bash"]);
    assert!(specialist.ask.is_empty());
    assert!(specialist.disallowed.iter().any(|t| t == "Read"));
    assert!(!specialist.disallowed.iter().any(|t| t == "Bash"));

    let denied = permission_flags(&policy("default", &["read_file"], &["write_file"]));
    assert_eq!(denied.allowed, ["Read"]);
    assert!(denied.disallowed.iter().any(|t| t == "Edit"));
}

#[test]
fn the_notebook_preset_takes_claudes_file_and_shell_tools_and_lab_is_default() {
    let notebook = permission_flags(&policy("notebook", &[], &[]));
    assert_eq!(notebook.mode, "default");
    for tool in [
        "Bash",
        "Read",
        "Write",
        "Edit",
        "MultiEdit",
        "Glob",
        "Grep",
        "LS",
        "NotebookEdit",
        "Task",
        "Agent",
        "Workflow",
    ] {
        assert!(notebook.disallowed.iter().any(|t| t == tool), "{tool}");
    }
    // The desktop half stays as in default: claude asks, corral's gate answers.
    assert!(!notebook.disallowed.iter().any(|t| t == "WebFetch"));
    assert_eq!(notebook.ask, ["WebFetch"]);
    assert_eq!(
        permission_flags(&policy("lab", &[], &[])),
        permission_flags(&policy("default", &[], &[]))
    );
}

#[test]
fn the_recursion_guard_holds_unless_the_opener_lifts_it() {
    for name in ["default", "auto", "bypass", "lab", "notebook", "specialist"] {
        let flags = permission_flags(&policy(name, &[], &[]));
        for spawner in ["Task", "Agent", "Workflow"] {
            assert!(flags.disallowed.iter().any(|t| t == spawner), "{name}");
        }
    }
    let nested = Policy::load(
        "default",
        None,
        &PolicyOverrides {
            nested_agents: true,
            ..PolicyOverrides::default()
        },
    )
    .unwrap();
    assert!(permission_flags(&nested).disallowed.is_empty());
}

#[test]
fn claude_tools_map_onto_corrals() {
    let bash = map_tool("Bash", &json!({"command": "ls -la", "description": "list"}));
    assert_eq!(bash.corral_tool, Some("shell"));
    assert_eq!(bash.args, json!({"command": "ls -la"}));
    assert_eq!((bash.kind, bash.title.as_str()), ("execute", "ls -la"));

    let edit = map_tool(
        "Edit",
        &json!({"file_path": "/r/a.txt", "old_string": "a", "new_string": "b"}),
    );
    assert_eq!(edit.corral_tool, Some("write_file"));
    assert_eq!(edit.args, json!({"path": "/r/a.txt", "content": "b"}));
    assert_eq!(edit.kind, "edit");

    let grep = map_tool("Grep", &json!({"pattern": "fn main", "glob": "*.rs"}));
    assert_eq!(grep.corral_tool, Some("search_files"));
    assert_eq!(grep.args, json!({"query": "fn main", "pattern": "*.rs"}));

    let fetch = map_tool("WebFetch", &json!({"url": "https://example.org"}));
    assert_eq!(fetch.corral_tool, Some("open_url"));
    assert_eq!(fetch.kind, "fetch");

    let other = map_tool("TodoWrite", &json!({"todos": []}));
    assert_eq!(other.corral_tool, None);
    assert_eq!((other.kind, other.title.as_str()), ("other", "TodoWrite"));
    // Bad input is shown, never a panic.
    assert_eq!(map_tool("Bash", &Value::Null).title, "Bash");
}

#[test]
fn a_can_use_tool_request_becomes_a_tool_ask() {
    let request = json!({"subtype": "can_use_tool", "tool_name": "Write",
        "input": {"file_path": "x.txt", "content": "hi"}, "tool_use_id": "toolu_9"});
    let ask = tool_ask(&request, "req_1");
    assert_eq!(ask.tool_call_id, "toolu_9");
    assert_eq!(ask.corral_tool, Some("write_file"));
    assert_eq!(ask.args, json!({"path": "x.txt", "content": "hi"}));
    assert_eq!(ask.raw_input["file_path"], "x.txt");
    let bare = tool_ask(&json!({"subtype": "can_use_tool"}), "req_2");
    assert_eq!(
        (bare.tool_call_id.as_str(), bare.agent_tool.as_str()),
        ("req_2", "unknown")
    );
}

#[test]
fn the_program_is_found_by_override_path_or_ci_install() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let claude = bin.join("claude");
    std::fs::write(&claude, "#!/bin/sh\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).unwrap();
    let env = |vars: HashMap<&'static str, String>| move |k: &str| vars.get(k).cloned();

    let on_path = env(HashMap::from([("PATH", bin.display().to_string())]));
    assert_eq!(find_program(PROGRAM, on_path).unwrap(), claude);

    let overridden = env(HashMap::from([(
        "CORRAL_CLAUDE",
        claude.display().to_string(),
    )]));
    assert_eq!(find_program(PROGRAM, overridden).unwrap(), claude);

    let bad = env(HashMap::from([(
        "CORRAL_CLAUDE",
        "/nonexistent/claude".to_string(),
    )]));
    assert!(matches!(
        find_program(PROGRAM, bad),
        Err(FindError::BadOverride { .. })
    ));

    let ci = dir
        .path()
        .join(".cache/corral-ci/agent-clis/node_modules/.bin");
    std::fs::create_dir_all(&ci).unwrap();
    std::fs::copy(&claude, ci.join("claude")).unwrap();
    let home = env(HashMap::from([
        ("PATH", "/nonexistent".to_string()),
        ("HOME", dir.path().display().to_string()),
    ]));
    assert_eq!(find_program(PROGRAM, home).unwrap(), ci.join("claude"));

    let nothing = find_program(PROGRAM, |_| None).unwrap_err().to_string();
    assert!(nothing.contains("scripts/install-agent-clis"), "{nothing}");
    assert!(nothing.contains("@anthropic-ai/claude-code"), "{nothing}");
}

fn drain(
    events: &mut tokio::sync::mpsc::UnboundedReceiver<crate::event::SharedEvent>,
) -> Vec<Payload> {
    let mut out = Vec::new();
    while let Ok(event) = events.try_recv() {
        out.push(event.envelope.payload.clone());
    }
    out
}

fn result(
    state: &mut TurnState,
    session: &Session,
    line: Value,
) -> (StopReason, Option<String>, f64) {
    let line = state.on_result(session, &line);
    (
        line.end.stop_reason(),
        line.end.error().map(str::to_string),
        line.usage.cost_usd,
    )
}

#[test]
fn is_error_wins_over_a_success_subtype() {
    let session = Session::create(None).unwrap();
    let mut state = TurnState::default();
    let line = json!({"type": "result", "subtype": "success", "is_error": true,
        "result": "API Error: 500 overloaded", "usage": {"input_tokens": 3, "output_tokens": 0},
        "total_cost_usd": 0.5});
    let (stop, error, cost) = result(&mut state, &session, line);
    assert_eq!(stop, StopReason::Error);
    assert_eq!(error.as_deref(), Some("API Error: 500 overloaded"));
    assert_eq!(cost, 0.5);

    let mut state = TurnState::default();
    let line = json!({"type": "result", "subtype": "error_during_execution", "is_error": true,
        "errors": ["tool loop failed"]});
    let (stop, error, _) = result(&mut state, &session, line);
    assert_eq!(
        (stop, error.as_deref()),
        (StopReason::Error, Some("tool loop failed"))
    );

    let mut state = TurnState::default();
    let line = json!({"type": "result", "subtype": "error_max_turns", "is_error": true});
    assert_eq!(result(&mut state, &session, line).0, StopReason::MaxSteps);

    let mut state = TurnState::default();
    let (stop, error, _) = result(&mut state, &session, json!({"type": "result"}));
    assert_eq!((stop, error), (StopReason::EndTurn, None));
}

#[test]
fn stream_lines_become_deltas_then_authoritative_blocks() {
    let session = Session::create(None).unwrap();
    let mut events = session.tap(session.last_seq());
    let mut state = TurnState::default();
    let stream = |event: Value| {
        json!({"type": "stream_event", "event": event,
        "parent_tool_use_id": null})
    };
    for event in [
        json!({"type": "message_start", "message": {"id": "msg_1"}}),
        json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "thinking", "thinking": ""}}),
        json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "hmm"}}),
        json!({"type": "content_block_start", "index": 1,
            "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 1,
            "delta": {"type": "text_delta", "text": "Hi"}}),
        json!({"type": "content_block_start", "index": 2,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}}),
        json!({"type": "content_block_delta", "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": "{\"command\""}}),
        json!({"type": "content_block_delta", "index": 7, "delta": {"type": "mystery"}}),
    ] {
        state.on_stream_event(&session, &stream(event));
    }
    let assistant = json!({"type": "assistant", "parent_tool_use_id": null, "message": {
        "id": "msg_1", "usage": {"input_tokens": 4, "cache_read_input_tokens": 6},
        "content": [{"type": "thinking", "thinking": "hmm", "signature": "s"},
                    {"type": "text", "text": "Hi"},
                    {"type": "tool_use", "id": "toolu_1", "name": "Bash",
                     "input": {"command": "ls"}}]}});
    state.on_assistant(&session, &assistant);
    // The same blocks again (claude repeats a message's blocks): not emitted twice.
    state.on_assistant(&session, &assistant);
    // Sub-agent traffic stays inside its tool call.
    let mut nested = assistant.clone();
    nested["parent_tool_use_id"] = json!("toolu_1");
    nested["message"]["id"] = json!("msg_2");
    state.on_assistant(&session, &nested);
    state.on_user(
        &session,
        &json!({"type": "user", "parent_tool_use_id": null, "message": {
        "role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
        "content": [{"type": "text", "text": "a.txt"}], "is_error": false}]}}),
    );
    state.on_user(
        &session,
        &json!({"type": "user", "message": {"content": "plain"}}),
    );
    let kinds: Vec<String> = drain(&mut events)
        .iter()
        .map(|p| match p {
            Payload::AssistantText(t) | Payload::Thought(t) => {
                format!("{}{}", p.kind_name(), if t.delta { "+delta" } else { "" })
            }
            Payload::ToolUse(u) => format!("tool_use:{:?}", u.call.status),
            Payload::ToolResult(r) => format!(
                "tool_result:{}:{}:{}",
                r.result.tool,
                r.result.success,
                r.result.output.clone().unwrap_or_default()
            ),
            other => other.kind_name().to_string(),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "thought+delta",
            "assistant_text+delta",
            "tool_use:Pending",
            "tool_input_delta",
            "thought",
            "assistant_text",
            "tool_use:InProgress",
            "tool_result:Bash:true:a.txt"
        ]
    );
    let (_, _, _) = result(&mut state, &session, json!({"type": "result"}));
    match drain(&mut events).as_slice() {
        [Payload::Usage(usage)] => assert_eq!(usage.context_tokens, Some(10)),
        other => panic!("{other:?}"),
    }
}

/// A stand-in for claude speaking just enough stream-json: it answers `set_model`, and a user
/// line with an init, a text naming its model, a line that is not JSON, and a result.
const FAKE_CLAUDE: &str = r#"#!/bin/bash
model=none
while IFS= read -r line; do
  case "$line" in
    *set_model*)
      id=$(echo "$line" | sed 's/.*"request_id":"\([^"]*\)".*/\1/')
      model=$(echo "$line" | sed 's/.*"model":"\([^"]*\)".*/\1/')
      echo "{\"type\":\"control_response\",\"response\":{\"subtype\":\"success\",\"request_id\":\"$id\",\"response\":{\"model\":\"$model\"}}}";;
    *'"type":"user"'*)
      echo '{"type":"system","subtype":"init","session_id":"sess-1"}'
      echo "{\"type\":\"assistant\",\"parent_tool_use_id\":null,\"message\":{\"id\":\"m\",\"content\":[{\"type\":\"text\",\"text\":\"model=$model\"}]}}"
      echo 'not json at all'
      echo '{"type":"result","subtype":"success","is_error":false,"result":"ok","usage":{}}';;
  esac
done
"#;

#[tokio::test]
async fn set_model_goes_over_the_wire_and_a_bad_line_is_an_error_event() {
    use std::sync::{Arc, Mutex};

    use crate::backend::external::ExternalContext;
    use crate::event::Status;
    use crate::policy::Approver;
    use crate::tool::ToolRegistry;

    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let program = root.join("fake-claude");
    std::fs::write(&program, FAKE_CLAUDE).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let session = Session::create(None).unwrap();
    let policy = policy("default", &[], &[]);
    let approver = Arc::new(Approver::new(
        policy.clone(),
        ToolRegistry::builtin().unwrap(),
        root.clone(),
        false,
        None,
        session.clone(),
    ));
    let recorded = Arc::new(Mutex::new(Vec::new()));
    let sink = recorded.clone();
    let context = ExternalContext {
        session: session.clone(),
        spec: "claude:first".parse().unwrap(),
        root,
        policy,
        approver,
        resume: None,
        home: None,
        tmpdir: std::env::temp_dir(),
        stderr_log: None,
        record_external_id: Box::new(move |id: &str| sink.lock().unwrap().push(id.to_string())),
        project_settings: false,
        system: None,
        effort: None,
        acp_permission_timeout: crate::backend::external::DEFAULT_ACP_PERMISSION_TIMEOUT,
    };
    let mut backend = super::start_program(context, program).await.unwrap();
    session.transition(Status::Idle).unwrap();
    assert_eq!(backend.info().kind, "claude");
    assert!(!backend.info().queues_prompts);
    assert_eq!(backend.set_model("claude:second").await, Ok(true));
    assert!(backend.set_model("ollama:qwen3").await.is_err());
    let mut events = session.tap(session.last_seq());
    let outcome = backend
        .run_turn("hi", tokio_util::sync::CancellationToken::new())
        .await;
    assert_eq!(outcome.stop_reason, StopReason::EndTurn, "{outcome:?}");
    assert_eq!(outcome.text, "ok");
    let payloads = drain(&mut events);
    let texts: Vec<String> = payloads
        .iter()
        .filter_map(|p| match p {
            Payload::AssistantText(t) => Some(format!("{:?}", t.content)),
            _ => None,
        })
        .collect();
    assert_eq!(
        texts,
        [format!(
            "{:?}",
            crate::event::ContentBlock::text("model=second")
        )]
    );
    let errors: Vec<&str> = payloads
        .iter()
        .filter_map(|p| match p {
            Payload::Error(e) => Some(e.message.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(errors.len(), 1, "{payloads:?}");
    assert!(errors[0].contains("not json at all"), "{errors:?}");
    assert_eq!(*recorded.lock().unwrap(), ["sess-1"]);
    assert_eq!(session.status(), Status::Idle);
    backend.shutdown().await;
}

#[test]
fn steering_waits_for_the_end_of_a_streamed_message_and_for_tool_results() {
    let session = Session::create(None).unwrap();
    let mut state = TurnState::default();
    let stream = |event: Value| {
        json!({"type": "stream_event", "event": event,
                                       "parent_tool_use_id": null})
    };
    assert!(state.at_safe_boundary());
    state.on_stream_event(
        &session,
        &stream(json!({"type": "message_start",
                                                    "message": {"id": "m"}})),
    );
    assert!(!state.at_safe_boundary(), "mid-message");
    state.on_assistant(
        &session,
        &json!({"type": "assistant", "parent_tool_use_id": null, "message": {"id": "m",
            "content": [{"type": "tool_use", "id": "t1", "name": "Bash",
                         "input": {"command": "ls"}}]}}),
    );
    state.on_stream_event(&session, &stream(json!({"type": "message_stop"})));
    assert!(!state.at_safe_boundary(), "a tool use without its result");
    state.on_user(
        &session,
        &json!({"type": "user", "parent_tool_use_id": null, "message": {"content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}}),
    );
    assert!(state.at_safe_boundary());
}

#[test]
fn a_woken_claude_resumes_its_session_with_the_model_and_effort_of_now() {
    let first: Vec<String> = [
        "-p",
        "--model=opus",
        "--effort=low",
        "--resume=old",
        "--verbose",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let args = super::relaunch_args(
        &first,
        Some("sonnet"),
        Some(crate::model::Effort::High),
        Some("abc-123"),
    );
    assert_eq!(
        args,
        [
            "-p",
            "--verbose",
            "--model=sonnet",
            "--effort=high",
            "--resume=abc-123"
        ]
    );
    let bare = super::relaunch_args(&first, None, None, None);
    assert_eq!(bare, ["-p", "--verbose"]);
    // A model a client switched to that looks like a flag stays a model name.
    let hostile = super::relaunch_args(&first, Some("--dangerously-skip-permissions"), None, None);
    assert_eq!(
        hostile,
        ["-p", "--verbose", "--model=--dangerously-skip-permissions"]
    );
    assert!(
        !hostile
            .iter()
            .any(|a| a == "--dangerously-skip-permissions")
    );
}
