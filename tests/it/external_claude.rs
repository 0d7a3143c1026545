//! `claude[:<model>]` end to end: the real claude CLI (installed by scripts/install-agent-clis)
//! kept alive in stream-json mode, talking to the fake model server's Anthropic routes on
//! 127.0.0.1. Each test asserts corral's event stream.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::*;
use crate::support::fake_anthropic::{message_requests, texts};
use crate::support::{Cmd, FakeModel, Harness, Outcome, Reply};

mod agents;
mod approval;
mod confine;
mod effort;
mod lifecycle;
mod planted;
mod sleep;
mod steering;

/// `corral mcp` whose claude agents talk to `server`.
pub(crate) async fn claude_mcp(h: &Harness, server: &FakeModel) -> crate::support::Running {
    claude_mcp_keyed(h, server, "sk-ant-dummy").await
}

/// [`claude_mcp`] with `ANTHROPIC_API_KEY` set to `key`.
pub(crate) async fn claude_mcp_keyed(
    h: &Harness,
    server: &FakeModel,
    key: &str,
) -> crate::support::Running {
    claude_mcp_with(h, server, key, &claude_program()).await
}

/// [`claude_mcp_keyed`] running `program` as claude (a wrapper around it).
pub(crate) async fn claude_mcp_with(
    h: &Harness,
    server: &FakeModel,
    key: &str,
    program: &Path,
) -> crate::support::Running {
    h.corral()
        .arg("mcp")
        .env("CORRAL_CLAUDE", program)
        .env("ANTHROPIC_BASE_URL", server.base_url())
        .env("ANTHROPIC_API_KEY", key)
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        .live_stdin()
        .timeout(Duration::from_secs(150))
        .spawn()
        .await
}

/// Initializes the MCP server and opens a `claude:fake-model` session under `bypass` in the
/// harness's work directory; its agent id.
pub(crate) async fn open_claude(running: &mut crate::support::Running, h: &Harness) -> String {
    mcp_initialize(running).await;
    let opened = mcp_call(
        running,
        1,
        "agent_open",
        json!({"cwd": h.work(), "model": "claude:fake-model", "permission": "bypass"}),
    )
    .await;
    opened["agent_id"].as_str().unwrap().to_owned()
}

/// The claude program: `$CORRAL_CLAUDE`, the CI install, or `claude` on PATH. Missing is a
/// failure, not a skip.
pub(crate) fn claude_program() -> PathBuf {
    if let Some(path) = std::env::var_os("CORRAL_CLAUDE") {
        return PathBuf::from(path);
    }
    let home = std::env::var_os("HOME").unwrap_or_default();
    let installed = Path::new(&home).join(".cache/corral-ci/agent-clis/node_modules/.bin/claude");
    if installed.exists() {
        return installed;
    }
    let on_path = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("claude"))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
        .into_iter()
        .find(|p| p.exists());
    on_path.unwrap_or_else(|| {
        panic!(
            "the claude CLI is not installed: run scripts/install-agent-clis (or set \
             CORRAL_CLAUDE to a claude binary)"
        )
    })
}

/// `corral run -m claude:fake-model --json …` with the env that keeps claude on 127.0.0.1.
fn claude_run(h: &Harness, server: &FakeModel, args: &[&str]) -> Cmd {
    h.corral()
        .args(["run", "-m", "claude:fake-model", "--json"])
        .args(args.iter().copied())
        .env("CORRAL_CLAUDE", claude_program())
        .env("ANTHROPIC_BASE_URL", server.base_url())
        .env("ANTHROPIC_API_KEY", "sk-ant-dummy")
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        .env("RUST_LOG", "corral=debug")
        .timeout(Duration::from_secs(120))
}

/// The kinds with runs of liveness deltas collapsed into one `…_delta` entry, status left out.
fn shape(out: &Outcome, turn: u64) -> Vec<String> {
    let mut shape: Vec<String> = Vec::new();
    for e in out
        .events()
        .iter()
        .filter(|e| e["turn"] == turn && e["kind"] != "status")
    {
        let kind = e["kind"].as_str().unwrap_or("");
        let name = if e["data"]["delta"] == true || kind == "tool_input_delta" {
            format!("{kind}+delta")
        } else {
            kind.to_owned()
        };
        if shape.last() != Some(&name) || !name.ends_with("+delta") {
            shape.push(name);
        }
    }
    shape
}

#[tokio::test]
async fn two_turns_in_one_process_and_the_second_sees_the_first() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("FIRST ").text("ANSWER").usage(21, 7));
    server.push(Reply::new().text("SECOND ANSWER"));
    let out = claude_run(&h, &server, &["-i"])
        .stdin_text("first turn hello\nsecond turn please\n")
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_well_formed(&out);
    assert_eq!(
        shape(&out, 1),
        [
            "turn_started",
            "user_text",
            "assistant_text+delta",
            "assistant_text",
            "usage",
            "result"
        ],
        "{:?}",
        out.events()
    );
    assert_eq!(shape(&out, 2), shape(&out, 1));
    assert_eq!(
        authoritative(&out, "assistant_text"),
        ["FIRST ANSWER", "SECOND ANSWER"]
    );
    assert_eq!(deltas(&out, "assistant_text"), "FIRST ANSWERSECOND ANSWER");
    let results = out.of_kind("result");
    assert_eq!(results.len(), 2);
    for result in &results {
        assert_eq!(result["data"]["stopReason"], "end_turn", "{result}");
    }
    assert_eq!(results[0]["data"]["usage"]["outputTokens"], 7);
    assert_eq!(
        statuses(&out),
        [
            "starting", "idle", "working", "idle", "working", "idle", "dead"
        ]
    );
    // One process for both turns: the second request carries the whole conversation.
    let requests = message_requests(&server);
    assert_eq!(requests.len(), 2, "{requests:?}");
    let second = texts(&requests[1]).join("\n");
    for needle in ["first turn hello", "FIRST ANSWER", "second turn please"] {
        assert!(second.contains(needle), "{needle:?} not in {second}");
    }
    assert!(!texts(&requests[0]).join("\n").contains("second turn"));
}

fn is_request(e: &Value) -> bool {
    e["kind"] == "permission" && e["data"].get("resolved").is_none()
}

/// Position of the first event matching `pred`; fails the test when there is none.
fn position(events: &[Value], what: &str, pred: impl Fn(&Value) -> bool) -> usize {
    events
        .iter()
        .position(pred)
        .unwrap_or_else(|| panic!("no {what} event in {events:#?}"))
}

/// A Bash call claude must ask about, then the model's reply to its result.
pub(crate) fn scripted_tool_call(server: &FakeModel, command: &str) {
    let input = json!({"command": command, "description": "make a file"}).to_string();
    server.push(Reply::new().text("I will run it.").tool_call_split(
        "toolu_fake1",
        "Bash",
        &[&input[..10], &input[10..]],
    ));
    server.push(Reply::new().text("The command was handled."));
}

/// A wrapper that runs the real claude (its pid in `pid_file`) and, once claude is gone, says so
/// on stderr and exits 3.
fn wrapper_script(h: &Harness, pid_file: &Path) -> PathBuf {
    let wrapper = h.home_dir().join("claude-wrapper");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/bash\n\"{}\" \"$@\" <&0 &\necho $! > \"{}\"\nwait $!\n\
             echo \"wrapper: claude is gone\" >&2\nexit 3\n",
            claude_program().display(),
            pid_file.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    wrapper
}

fn kill_claude(pid_file: &Path) {
    let pid = std::fs::read_to_string(pid_file).unwrap();
    let status = std::process::Command::new("kill")
        .args(["-KILL", pid.trim()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::test]
async fn an_api_failure_reported_as_success_with_is_error_is_an_error() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().status(
        500,
        r#"{"type":"error","error":{"type":"api_error","message":"fake overload"}}"#,
    ));
    let out = claude_run(&h, &server, &["hello"]).run().await;
    assert_eq!(out.code, Some(1), "{out:?}");
    assert_well_formed(&out);
    assert_eq!(
        shape(&out, 1),
        [
            "turn_started",
            "user_text",
            "assistant_text",
            "usage",
            "error",
            "result"
        ],
        "{:#?}",
        out.events()
    );
    let result = result_of(&out);
    assert_eq!(result["stopReason"], "error");
    let error = result["error"].as_str().unwrap();
    assert!(
        error.contains("500") || error.contains("fake overload"),
        "{error}"
    );
    assert_eq!(out.of_kind("error")[0]["data"]["message"], error);
    // claude words the failure as its own reply too; it is shown as such.
    assert_eq!(authoritative(&out, "assistant_text"), [error]);
}

#[tokio::test]
async fn a_resumed_session_continues_claudes_own_conversation() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("OK PAPAYA"));
    server.push(Reply::new().text("It was PAPAYA."));
    let first = claude_run(&h, &server, &["remember the word PAPAYA"])
        .run()
        .await;
    assert_eq!(first.code, Some(0), "{first:?}");
    let id = first.events()[0]["agent"].as_str().unwrap().to_owned();
    let second = claude_run(&h, &server, &["--resume", &id, "what was the word?"])
        .run()
        .await;
    assert_eq!(second.code, Some(0), "{second:?}");
    assert_well_formed(&second);
    assert_eq!(second.events()[0]["agent"], id.as_str());
    assert_eq!(authoritative(&second, "assistant_text"), ["It was PAPAYA."]);
    assert_eq!(result_of(&second)["stopReason"], "end_turn");
    // A new claude process, started with --resume: the history is claude's own, replayed.
    let requests = message_requests(&server);
    assert_eq!(requests.len(), 2, "{requests:#?}");
    let history = texts(&requests[1]).join("\n");
    for needle in [
        "remember the word PAPAYA",
        "OK PAPAYA",
        "what was the word?",
    ] {
        assert!(history.contains(needle), "{needle:?} not in {history}");
    }
    let claude_session = |body: &Value| -> String {
        let user: Value =
            serde_json::from_str(body["metadata"]["user_id"].as_str().unwrap()).unwrap();
        user["session_id"].as_str().unwrap().to_owned()
    };
    assert_eq!(claude_session(&requests[0]), claude_session(&requests[1]));
}

fn offered_tools(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn the_readonly_preset_takes_claudes_writing_tools_away() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("looked only"));
    let out = claude_run(&h, &server, &["-p", "readonly", "look around"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(result_of(&out)["stopReason"], "end_turn");
    let tools = offered_tools(&message_requests(&server)[0]);
    assert!(tools.iter().any(|t| t == "Read"), "{tools:?}");
    for gone in [
        "Bash",
        "Write",
        "Edit",
        "NotebookEdit",
        "WebFetch",
        "Task",
        "Agent",
        "Workflow",
    ] {
        assert!(
            !tools.iter().any(|t| t == gone),
            "{gone} offered: {tools:?}"
        );
    }
}

#[tokio::test]
async fn the_bypass_preset_runs_claudes_tools_without_asking() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    scripted_tool_call(&server, "touch bypassed.txt");
    // No --approve-stdin: nobody could answer, and nothing asks.
    let out = claude_run(&h, &server, &["-p", "bypass", "make the file"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.of_kind("permission").is_empty(), "{:#?}", out.events());
    let result = &out.of_kind("tool_result")[0]["data"]["result"];
    assert_eq!(result["success"], true, "{result}");
    assert!(h.work().join("bypassed.txt").exists());
    assert_eq!(result_of(&out)["stopReason"], "end_turn");
}

#[tokio::test]
async fn thinking_streams_as_thought_deltas_then_the_block() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(
        Reply::new()
            .reasoning("pondering ")
            .reasoning("deeply")
            .text("the answer"),
    );
    let out = claude_run(&h, &server, &["think"]).run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(
        shape(&out, 1),
        [
            "turn_started",
            "user_text",
            "thought+delta",
            "thought",
            "assistant_text+delta",
            "assistant_text",
            "usage",
            "result"
        ],
        "{:#?}",
        out.events()
    );
    assert_eq!(deltas(&out, "thought"), "pondering deeply");
    assert_eq!(authoritative(&out, "thought"), ["pondering deeply"]);
    assert_eq!(authoritative(&out, "assistant_text"), ["the answer"]);
}

#[tokio::test]
async fn a_claude_program_that_is_not_there_is_a_clear_error() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    let out = claude_run(&h, &server, &["hello"])
        .env("CORRAL_CLAUDE", "/nonexistent/claude")
        .run()
        .await;
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr.contains("CORRAL_CLAUDE=/nonexistent/claude"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("@anthropic-ai/claude-code"),
        "{}",
        out.stderr
    );
    let error = &out.of_kind("error")[0]["data"]["message"];
    assert!(error.as_str().unwrap().contains("claude"), "{error}");
    assert_eq!(statuses(&out), ["starting", "dead"]);
}

/// `--system` reaches claude as `--append-system-prompt`: the request to the model carries it
/// in its system prompt (dropped silently before).
#[tokio::test]
async fn the_sessions_system_text_reaches_claudes_system_prompt() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("OK"));
    let out = claude_run(
        &h,
        &server,
        &["--system", "Always answer in PIRATE-SPEAK-7731.", "hi"],
    )
    .run()
    .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let requests = crate::support::fake_anthropic::message_requests(&server);
    let system = requests
        .iter()
        .map(|r| r["system"].to_string())
        .find(|s| s.contains("PIRATE-SPEAK-7731"));
    assert!(
        system.is_some(),
        "the system text is not in claude's requests: {requests:?}"
    );
}
