//! `codex:<model>`: the real codex CLI (`@openai/codex`, `codex app-server`) driven by corral
//! against the fake model server's Responses API on 127.0.0.1, with a config that keeps
//! everything on this machine (external-clis.md §5). Each test asserts corral's event stream.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::common::*;
use crate::support::{Cmd, FakeModel, Harness, Outcome, Reply};

mod approvals;
mod confine;
mod effort;
mod steering;

/// The codex program: `$CORRAL_CODEX`, else the CI install. Missing is a failure, not a skip.
pub(super) fn codex_program() -> PathBuf {
    if let Some(program) = std::env::var_os("CORRAL_CODEX").filter(|p| !p.is_empty()) {
        return PathBuf::from(program);
    }
    let home = std::env::var_os("HOME").expect("HOME");
    let program = PathBuf::from(home).join(".cache/corral-ci/agent-clis/node_modules/.bin/codex");
    assert!(
        program.exists(),
        "codex is not installed at {}: run scripts/install-agent-clis (or set CORRAL_CODEX)",
        program.display()
    );
    program
}

/// A CODEX_HOME whose config.toml points codex at the fake and switches off everything that
/// would leave the machine.
fn codex_home(h: &Harness, server: &FakeModel) -> PathBuf {
    let dir = h.home_dir().join("codex-home");
    std::fs::create_dir_all(&dir).unwrap();
    let config = format!(
        r#"model = "fake-model"
model_provider = "fake"
check_for_update_on_startup = false

[model_providers.fake]
name = "Fake local"
base_url = "{}"
env_key = "FAKE_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[features]
plugins = false
remote_plugin = false
apps = false
in_app_updates = false

[analytics]
enabled = false

[otel]
metrics_exporter = "none"
"#,
        server.openai_base()
    );
    std::fs::write(dir.join("config.toml"), config).unwrap();
    dir
}

/// `corral run --json -m codex:fake-model` with codex pointed at the fake.
pub(super) fn codex_run(h: &Harness, server: &FakeModel, program: &PathBuf) -> Cmd {
    h.corral()
        .env("CORRAL_CODEX", program)
        .env("CODEX_HOME", codex_home(h, server))
        .env("FAKE_API_KEY", "dummy")
        .args(["run", "--json", "-m", "codex:fake-model"])
        .timeout(Duration::from_secs(90))
}

pub(super) fn is_request(e: &Value) -> bool {
    e["kind"] == "permission" && e["data"].get("resolved").is_none()
}

/// The kinds of one turn's envelopes, liveness chunks and status changes left out.
pub(super) fn turn_kinds(out: &Outcome, turn: u64) -> Vec<String> {
    out.events()
        .iter()
        .filter(|e| e["turn"] == turn && e["kind"] != "status")
        .filter(|e| e["data"]["delta"] != true && e["kind"] != "tool_output")
        .map(|e| e["kind"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// Everything codex sent the model in one request, as text.
pub(super) fn request_text(server: &FakeModel, n: usize) -> String {
    server.responses_requests()[n]["input"].to_string()
}

/// The `function_call_output` codex sent back for a call.
pub(super) fn call_output(server: &FakeModel, n: usize, call_id: &str) -> String {
    let body = &server.responses_requests()[n];
    body["input"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "function_call_output" && i["call_id"] == call_id)
        .unwrap_or_else(|| panic!("no output for {call_id} in {body}"))["output"]
        .to_string()
}

/// SIGKILL to codex's whole process group, found in corral's pids.json.
/// `corral mcp` with codex pointed at the fake (the handshake not done yet).
pub(super) async fn codex_mcp(h: &Harness, server: &FakeModel) -> crate::support::Running {
    h.corral()
        .env("CORRAL_CODEX", codex_program())
        .env("CODEX_HOME", codex_home(h, server))
        .env("FAKE_API_KEY", "dummy")
        .arg("mcp")
        .live_stdin()
        .timeout(Duration::from_secs(90))
        .spawn()
        .await
}

pub(super) fn kill_codex(h: &Harness) {
    let pids: Vec<Value> = serde_json::from_str(
        &std::fs::read_to_string(h.cache_dir().join("corral/agents/pids.json")).unwrap(),
    )
    .unwrap();
    let codex = pids
        .iter()
        .find(|p| p["kind"] == "codex")
        .unwrap_or_else(|| panic!("no codex in pids.json: {pids:?}"));
    // `--`: procps kill takes `-<pgid>` for an option otherwise.
    let status = std::process::Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", codex["pgid"])])
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::test]
async fn two_turns_share_one_codex_thread() {
    let program = codex_program();
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("FIRST_").text("ANSWER").usage(20, 5));
    server.push(Reply::new().text("SECOND_ANSWER").usage(40, 7));
    let out = codex_run(&h, &server, &program)
        .arg("-i")
        .stdin_text("first question\nsecond question\n")
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_well_formed(&out);
    let results = out.of_kind("result");
    assert_eq!(results.len(), 2, "{out:?}");
    for result in &results {
        assert_eq!(result["data"]["stopReason"], "end_turn", "{out:?}");
    }
    assert_eq!(
        authoritative(&out, "assistant_text"),
        ["FIRST_ANSWER", "SECOND_ANSWER"]
    );
    assert!(deltas(&out, "assistant_text").contains("FIRST_ANSWER"));
    for turn in [1, 2] {
        let kinds = turn_kinds(&out, turn);
        assert_eq!(kinds[..2], ["turn_started", "user_text"], "{kinds:?}");
        assert_eq!(kinds.last().unwrap(), "result", "{kinds:?}");
        assert!(kinds.contains(&"assistant_text".to_owned()), "{kinds:?}");
    }
    assert_eq!(
        out.of_kind("user_text")[1]["data"]["content"]["text"],
        "second question"
    );
    // Usage is the turn's own, though codex reports thread totals.
    let usage = &results[1]["data"]["usage"];
    assert_eq!(usage["inputTokens"], 40, "{out:?}");
    assert_eq!(usage["outputTokens"], 7, "{out:?}");
    assert_eq!(
        statuses(&out),
        [
            "starting", "idle", "working", "idle", "working", "idle", "dead"
        ]
    );
    // One thread: the second request carries the first turn.
    let requests = server.responses_requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert!(request_text(&server, 0).contains("first question"));
    let second = request_text(&server, 1);
    assert!(
        second.contains("first question")
            && second.contains("FIRST_ANSWER")
            && second.contains("second question"),
        "{second}"
    );
    assert_eq!(requests[0]["model"], "fake-model");
    // codex keeps its threads in its home (what --hermetic keeps away from the user's).
    assert!(h.home_dir().join("codex-home/sessions").is_dir());
    assert!(requests[0]["stream"] == true);
}

#[tokio::test]
async fn an_interrupt_mid_turn_cancels_it() {
    let program = codex_program();
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(
        Reply::new()
            .text("PARTIAL")
            .stall(Duration::from_secs(60))
            .text(" never"),
    );
    let running = codex_run(&h, &server, &program)
        .arg("a long answer please")
        .spawn()
        .await;
    running
        .wait_for_event(0, |e| {
            e["kind"] == "assistant_text" && e["data"]["delta"] == true
        })
        .await;
    running.sigint().await;
    let out = running.wait().await;
    assert_eq!(out.code, Some(130), "{out:?}");
    assert_well_formed(&out);
    assert_eq!(result_of(&out)["stopReason"], "cancelled", "{out:?}");
    assert!(out.of_kind("error").is_empty(), "{out:?}");
    assert_eq!(deltas(&out, "assistant_text"), "PARTIAL");
    assert_eq!(
        statuses(&out),
        ["starting", "idle", "working", "idle", "dead"]
    );
    assert!(server.wait_for_cancelled(1, Duration::from_secs(10)).await);
}

#[tokio::test]
async fn a_codex_that_dies_mid_turn_ends_the_turn_with_its_report() {
    let real = codex_program();
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(
        Reply::new()
            .text("WORKING")
            .stall(Duration::from_secs(60))
            .text(" never"),
    );
    // A launcher that says something on stderr, so the crash report has a tail to show.
    let wrapper = h.home_dir().join("codex-wrapper");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\necho 'codex-wrapper: starting the real codex' >&2\nexec '{}' \"$@\"\n",
            real.display()
        ),
    )
    .unwrap();
    std::process::Command::new("chmod")
        .args(["+x", wrapper.to_str().unwrap()])
        .status()
        .unwrap();
    let running = codex_run(&h, &server, &wrapper)
        .arg("work on it")
        .spawn()
        .await;
    running
        .wait_for_event(0, |e| {
            e["kind"] == "assistant_text" && e["data"]["delta"] == true
        })
        .await;
    kill_codex(&h);
    let out = running.wait().await;
    assert_eq!(out.code, Some(1), "{out:?}");
    assert_well_formed(&out);
    let errors = out.of_kind("error");
    assert_eq!(errors.len(), 1, "{out:?}");
    let message = errors[0]["data"]["message"].as_str().unwrap();
    assert!(
        message.contains("SIGKILL") || message.contains("signal: 9"),
        "{message}"
    );
    assert!(
        message.contains("codex-wrapper: starting the real codex"),
        "{message}"
    );
    assert!(
        errors[0]["data"]["data"]["stderr"]
            .as_str()
            .unwrap_or_default()
            .contains("codex-wrapper"),
        "{errors:?}"
    );
    assert_eq!(
        errors[0]["data"]["data"]["exitStatus"],
        "signal: 9 (SIGKILL)"
    );
    assert!(
        message.ends_with("it is started again on its thread when the next message comes"),
        "{message}"
    );
    let result = result_of(&out);
    assert_eq!(result["stopReason"], "error");
    assert!(
        message.starts_with(result["error"].as_str().unwrap()),
        "{message} / {result}"
    );
    let kinds = turn_kinds(&out, 1);
    assert_eq!(kinds[kinds.len() - 2..], ["error", "result"], "{kinds:?}");
    // The session outlives the crash (the next line would start codex again); it ends when
    // `corral run` does.
    assert_eq!(
        statuses(&out),
        ["starting", "idle", "working", "idle", "dead"]
    );
    // codex's stderr is kept beside the session's event log.
    let id = out.events()[0]["agent"].as_str().unwrap().to_owned();
    let kept =
        std::fs::read_to_string(h.cache_dir().join(format!("corral/agents/{id}.stderr.log")))
            .unwrap();
    assert!(
        kept.contains("codex-wrapper: starting the real codex"),
        "{kept}"
    );
}

#[tokio::test]
async fn a_model_error_fails_the_turn_and_the_session_goes_on() {
    let program = codex_program();
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().status(
        400,
        r#"{"error":{"message":"FAKE_BAD_REQUEST","type":"invalid_request_error"}}"#,
    ));
    server.push(Reply::new().text("RECOVERED"));
    let out = codex_run(&h, &server, &program)
        .arg("-i")
        .stdin_text("this one fails\nthis one works\n")
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_well_formed(&out);
    let results = out.of_kind("result");
    assert_eq!(results.len(), 2, "{out:?}");
    assert_eq!(results[0]["data"]["stopReason"], "error", "{out:?}");
    let error = results[0]["data"]["error"].as_str().unwrap();
    let errors = out.of_kind("error");
    assert!(
        errors
            .iter()
            .any(|e| e["turn"] == 1 && e["data"]["message"] == error),
        "{errors:?}"
    );
    assert_eq!(turn_kinds(&out, 1).last().unwrap(), "result");
    assert!(error.contains("FAKE_BAD_REQUEST"), "{error}");
    assert_eq!(results[1]["data"]["stopReason"], "end_turn", "{out:?}");
    assert_eq!(authoritative(&out, "assistant_text"), ["RECOVERED"]);
    assert_eq!(
        statuses(&out),
        [
            "starting", "idle", "working", "idle", "working", "idle", "dead"
        ]
    );
}

#[tokio::test]
async fn a_resumed_session_continues_the_codex_thread() {
    let program = codex_program();
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("REMEMBER_ME"));
    server.push(Reply::new().text("I_REMEMBER"));
    let first = codex_run(&h, &server, &program)
        .arg("first visit")
        .run()
        .await;
    assert_eq!(first.code, Some(0), "{first:?}");
    let id = first.events()[0]["agent"].as_str().unwrap().to_owned();
    let meta: Value = serde_json::from_str(
        &std::fs::read_to_string(h.cache_dir().join(format!("corral/agents/{id}.meta.json")))
            .unwrap(),
    )
    .unwrap();
    let thread = meta["external_id"].as_str().unwrap_or_default().to_owned();
    assert!(!thread.is_empty(), "{meta}");
    let second = h
        .corral()
        .env("CORRAL_CODEX", &program)
        .env("CODEX_HOME", h.home_dir().join("codex-home"))
        .env("FAKE_API_KEY", "dummy")
        .args(["run", "--json", "--resume", &id, "second visit"])
        .timeout(Duration::from_secs(90))
        .run()
        .await;
    assert_eq!(second.code, Some(0), "{second:?}");
    assert_eq!(result_of(&second)["stopReason"], "end_turn");
    assert_eq!(authoritative(&second, "assistant_text"), ["I_REMEMBER"]);
    assert_eq!(second.of_kind("turn_started")[0]["turn"], 2);
    let text = request_text(&server, 1);
    assert!(
        text.contains("first visit")
            && text.contains("REMEMBER_ME")
            && text.contains("second visit"),
        "{text}"
    );
}

#[tokio::test]
async fn hermetic_codex_gets_its_own_home_with_the_provider_config() {
    let program = codex_program();
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("HERMETIC_HELLO"));
    let out = codex_run(&h, &server, &program)
        .args(["--hermetic", "hello"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(authoritative(&out, "assistant_text"), ["HERMETIC_HELLO"]);
    // The provider config reached the private home (the fake was asked); nothing of this
    // session was written to the user's codex home.
    assert_eq!(server.responses_requests().len(), 1);
    let user_home = h.home_dir().join("codex-home");
    assert!(!user_home.join("sessions").exists());
    let config = std::fs::read_to_string(user_home.join("config.toml")).unwrap();
    assert!(!config.contains("[projects"), "{config}");
}

#[tokio::test]
async fn a_codex_that_cannot_start_fails_the_run_with_its_stderr() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    let broken = h.home_dir().join("broken-codex");
    std::fs::write(
        &broken,
        "#!/bin/sh\necho 'BROKEN_CODEX: no config' >&2\nexit 3\n",
    )
    .unwrap();
    std::process::Command::new("chmod")
        .args(["+x", broken.to_str().unwrap()])
        .status()
        .unwrap();
    let out = codex_run(&h, &server, &broken).arg("hi").run().await;
    assert_ne!(out.code, Some(0), "{out:?}");
    let errors = out.of_kind("error");
    assert_eq!(errors.len(), 1, "{out:?}");
    let message = errors[0]["data"]["message"].as_str().unwrap();
    assert!(
        message.contains("exit status: 3") && message.contains("BROKEN_CODEX: no config"),
        "{message}"
    );
    assert!(out.stderr.contains("BROKEN_CODEX"), "{}", out.stderr);
    assert!(out.of_kind("turn_started").is_empty());
}

#[tokio::test]
async fn without_codex_the_error_says_what_to_install() {
    let h = Harness::new();
    // Nothing on PATH at all, so a system-wide codex cannot be found either.
    let empty = h.home_dir().join("empty-bin");
    std::fs::create_dir(&empty).unwrap();
    let out = h
        .corral()
        .env("PATH", &empty)
        .args(["run", "--json", "-m", "codex", "hi"])
        .run()
        .await;
    assert_ne!(out.code, Some(0), "{out:?}");
    assert!(
        out.stderr.contains("codex is not installed") && out.stderr.contains("@openai/codex"),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn a_model_switch_reaches_codex_on_the_next_turn() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("FROM_FAKE_MODEL"));
    server.push(Reply::new().text("FROM_OTHER_MODEL"));
    let mut running = codex_mcp(&h, &server).await;
    mcp_initialize(&mut running).await;
    let work = h.work().display().to_string();
    let opened = mcp_call(
        &mut running,
        1,
        "agent_open",
        serde_json::json!({"cwd": work, "model": "codex:fake-model"}),
    )
    .await;
    let agent = opened["agent_id"].as_str().unwrap().to_owned();
    let first = mcp_call(
        &mut running,
        2,
        "agent_run",
        serde_json::json!({"agent_id": agent, "text": "first"}),
    )
    .await;
    assert_eq!(first["text"], "FROM_FAKE_MODEL");
    let switched = mcp_call(
        &mut running,
        3,
        "agent_set_model",
        serde_json::json!({"agent_id": agent, "model": "codex:other-model"}),
    )
    .await;
    assert_eq!(switched["switched"], true, "{switched}");
    let refused = mcp_call(
        &mut running,
        4,
        "agent_set_model",
        serde_json::json!({"agent_id": agent, "model": "ollama:qwen3"}),
    )
    .await;
    assert_eq!(refused["switched"], false, "{refused}");
    let second = mcp_call(
        &mut running,
        5,
        "agent_run",
        serde_json::json!({"agent_id": agent, "text": "second"}),
    )
    .await;
    assert_eq!(second["text"], "FROM_OTHER_MODEL");
    let requests = server.responses_requests();
    assert_eq!(requests[0]["model"], "fake-model");
    assert_eq!(requests[1]["model"], "other-model");
    assert!(requests[1]["input"].to_string().contains("FROM_FAKE_MODEL"));
    running.close_stdin();
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
}

/// A stand-in for `codex app-server` that answers the handshake, then writes a line that is
/// not JSON-RPC in the middle of a turn.
const GARBLED_CODEX: &str = r#"import json, sys
def send(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    m = json.loads(line)
    method, id = m.get("method"), m.get("id")
    if method == "initialize":
        send({"id": id, "result": {"userAgent": "fake"}})
    elif method == "thread/start":
        send({"id": id, "result": {"thread": {"id": "thr_fake"}}})
    elif method == "turn/start":
        send({"id": id, "result": {"turn": {"id": "turn_1", "status": "inProgress"}}})
        sys.stdout.write("this is not json\n"); sys.stdout.flush()
        send({"method": "brand/newThing", "params": {}})
        send({"method": "item/completed", "params": {"item":
             {"type": "agentMessage", "id": "m1", "text": "STILL_HERE"}}})
        send({"method": "turn/completed", "params": {"turn": {"id": "turn_1", "status": "completed"}}})
"#;

#[tokio::test]
async fn a_line_that_is_not_json_rpc_is_reported_and_the_turn_goes_on() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    let script = h.home_dir().join("garbled.py");
    std::fs::write(&script, GARBLED_CODEX).unwrap();
    let launcher = h.home_dir().join("garbled-codex");
    std::fs::write(
        &launcher,
        format!("#!/bin/sh\nexec python3 '{}'\n", script.display()),
    )
    .unwrap();
    std::process::Command::new("chmod")
        .args(["+x", launcher.to_str().unwrap()])
        .status()
        .unwrap();
    let out = codex_run(&h, &server, &launcher).arg("hi").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let kinds = turn_kinds(&out, 1);
    assert_eq!(
        kinds,
        [
            "turn_started",
            "user_text",
            "error",
            "assistant_text",
            "result"
        ],
        "{out:?}"
    );
    let error = &out.of_kind("error")[0]["data"]["message"];
    assert!(
        error.as_str().unwrap().contains("this is not json"),
        "{error}"
    );
    assert_eq!(authoritative(&out, "assistant_text"), ["STILL_HERE"]);
    assert_eq!(result_of(&out)["stopReason"], "end_turn");
}

/// `--system` reaches codex as the thread's `developerInstructions`: the model request
/// carries it (dropped silently before).
#[tokio::test]
async fn the_sessions_system_text_reaches_codex_as_developer_instructions() {
    let program = codex_program();
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("OK"));
    let out = codex_run(&h, &server, &program)
        .args(["--system", "Always answer in PIRATE-SPEAK-7731.", "hi"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let requests = server.responses_requests();
    assert!(
        requests
            .iter()
            .any(|r| r.to_string().contains("PIRATE-SPEAK-7731")),
        "the system text is not in codex's requests: {requests:?}"
    );
}
