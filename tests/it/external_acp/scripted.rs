//! `acp:cmd=`: a scripted agent (scripted_agent.py) for what real agents will not do on
//! request: fs calls outside the root, crashes, every permission answer, session/load, model
//! switches, stop reasons.

use std::path::Path;

use serde_json::{Value, json};

use super::*;
use crate::common::*;
use crate::support::{Cmd, Harness, Running};

/// A scripted ACP agent run as `acp:cmd=python3 scripted_agent.py`. It offers the models
/// `small` and (grouped) `large` as a config option, logs each switch to
/// `set_config_option.log` and each `session/load` to `session_load.log` in its cwd. A prompt
/// is `;`-separated commands: `say <text>`, `think <text>`, `plan`, `usage`,
/// `stop <stopReason>`, `read <path>` / `write <path> <content>` (fs/* answers said back),
/// `ask <command>` (a shell call asking permission; the option chosen said back),
/// `edit <path> <content>` (an edit with its own tool, written by the agent once allowed),
/// `blocks` (says every block of the prompt), `whoami`
/// (pid to `agent.pid`, HOME said back), `crash`, `ask-and-crash`, `ask-twice` (two
/// permission requests at once), `ask-and-read <path>` (an fs read while a question is open:
/// `READ-FIRST` when its answer came first), `named-calls` (two shell calls named the ways
/// opencode and claude-agent-acp name them), `leave-after` (exit 4 a moment after the turn's
/// answer). Each `ask` is a new call, `t1`, `t2`, ….
const SCRIPTED_AGENT: &str = include_str!("scripted_agent.py");

/// `corral run --json -m acp:cmd=python3 <scripted agent>`.
pub(super) fn scripted_run(h: &Harness, prompt: &str) -> Cmd {
    let script = h.home_dir().join("scripted_agent.py");
    std::fs::write(&script, SCRIPTED_AGENT).unwrap();
    h.corral().args([
        "run",
        "--json",
        "-m",
        &format!("acp:cmd=python3 {}", script.display()),
        prompt,
    ])
}

#[tokio::test]
async fn a_crashed_agent_ends_the_turn_with_its_exit_status_and_stderr() {
    let h = Harness::new();
    let out = scripted_run(&h, "say starting; crash").run().await;
    assert_ne!(out.code, Some(0), "{out:?}");
    assert_eq!(deltas(&out, "assistant_text"), "starting");
    let errors = turn_errors(&out);
    assert_eq!(errors.len(), 1, "{out:?}");
    let message = errors[0]["data"]["message"].as_str().unwrap();
    assert!(message.contains("exit status: 3"), "{message}");
    assert!(
        message.contains("scripted agent: out of cheese"),
        "{message}"
    );
    let result = result_of(&out);
    assert_eq!(result["stopReason"], "error");
    assert!(result["error"].as_str().unwrap().contains("out of cheese"));
    assert_eq!(statuses(&out).last().unwrap(), "dead");
    // The agent's stderr is also kept beside the event log.
    let logs = std::fs::read_dir(h.cache_dir().join("corral/agents"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".stderr.log"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect::<String>();
    assert!(logs.contains("out of cheese"), "{logs:?}");
}

/// `corral mcp` with the scripted agent (started with `flags`) opened in the work dir: the
/// running server and the agent's id.
async fn scripted_mcp(h: &Harness, flags: &str) -> (Running, String) {
    let script = h.home_dir().join("scripted_agent.py");
    std::fs::write(&script, SCRIPTED_AGENT).unwrap();
    let mut running = h.corral().arg("mcp").live_stdin().spawn().await;
    crate::common::mcp_initialize(&mut running).await;
    let model = format!("acp:cmd=python3 {} {flags}", script.display());
    let opened = mcp_tool(
        &mut running,
        1,
        "agent_open",
        json!({"cwd": h.work(), "model": model.trim_end()}),
    )
    .await;
    let agent = opened["agent_id"].as_str().unwrap().to_owned();
    (running, agent)
}

/// `corral run`: an agent that can load its session and dies mid-turn is started again on it
/// by the person's next line.
#[tokio::test]
async fn a_crashed_agent_is_started_again_on_its_session_by_the_next_line() {
    let h = Harness::new();
    let script = h.home_dir().join("scripted_agent.py");
    std::fs::write(&script, SCRIPTED_AGENT).unwrap();
    let model = format!("acp:cmd=python3 {}", script.display());
    let mut running = h
        .corral()
        .args(["run", "--json", "-m", &model, "-i", "say starting; crash"])
        .live_stdin()
        .timeout(AGENT_TIMEOUT)
        .spawn()
        .await;
    running.wait_for_event(0, |e| e["kind"] == "result").await;
    running.send_line("say still here").await;
    running.close_stdin();
    let out = running.wait().await;
    let reasons: Vec<String> = out
        .of_kind("result")
        .iter()
        .map(|r| r["data"]["stopReason"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(reasons, ["error", "end_turn"], "{:#?}", out.events());
    assert!(out.stdout.contains("out of cheese"));
    assert!(out.stdout.contains("still here"));
    let loaded = std::fs::read_to_string(h.work().join("session_load.log")).unwrap();
    assert_eq!(loaded.trim(), "scripted-1");
}

/// Under the manager, an agent that dies again each time it is started is given up on after
/// three restarts, 1 s, 2 s and 4 s apart: the session goes dead.
#[tokio::test]
async fn an_agent_that_keeps_dying_is_given_up_on_after_three_restarts() {
    let h = Harness::new();
    let (mut running, agent) = scripted_mcp(&h, "--die-on-load").await;
    let status = crate::common::mcp_status(&mut running, 2, &agent).await;
    let log_path = status["event_log"].as_str().unwrap().to_owned();
    let log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    mcp_tool(
        &mut running,
        3,
        "agent_run",
        json!({"agent_id": agent, "text": "crash"}),
    )
    .await;
    mcp_tool(
        &mut running,
        10,
        "agent_send",
        json!({"agent_id": agent, "text": "say hello"}),
    )
    .await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(40);
    while !log().contains(r#""status":"dead""#) {
        assert!(std::time::Instant::now() < deadline, "{}", log());
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let lifecycle = crate::common::lifecycle_errors(&log());
    assert!(
        lifecycle
            .iter()
            .any(|m| m.contains("gave up after 3 restarts")),
        "{lifecycle:#?}"
    );
    let restarts = lifecycle
        .iter()
        .filter(|m| m.contains("started again when needed"))
        .count();
    assert_eq!(restarts, 3, "{lifecycle:#?}");
    running.close_stdin();
    running.wait().await;
}

#[tokio::test]
async fn fs_callbacks_are_confined_to_the_root_and_gated() {
    let h = Harness::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "TOP SECRET").unwrap();
    let root = h.work().canonicalize().unwrap();
    let prompt = format!(
        "write {inside} hello; write {out_file} nope; read {secret}; read {inside}; \
         write {git} x",
        inside = root.join("in.txt").display(),
        out_file = outside.path().join("out.txt").display(),
        secret = outside.path().join("secret.txt").display(),
        git = root.join(".git/config").display(),
    );
    let out = scripted_run(&h, &prompt)
        .args(["--allow", "write_file"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(root.join("in.txt")).unwrap(),
        "hello"
    );
    assert!(!outside.path().join("out.txt").exists());
    assert!(
        !root.join(".git/config").exists(),
        "the preset's deny rule holds"
    );
    // An agent corral knows nothing about is held only where it asks or uses fs/*.
    assert_advisory_first(&out);
    let text = authoritative(&out, "assistant_text").concat();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "{text}");
    assert_eq!(lines[0], "WRITE null");
    assert!(lines[1].contains("outside the session root"), "{text}");
    assert!(lines[2].contains("outside the session root"), "{text}");
    assert!(!text.contains("TOP SECRET"), "{text}");
    assert_eq!(lines[3], r#"READ {"content": "hello"}"#);
    assert!(lines[4].contains(".git"), "{text}");
    // Nobody to ask and --allow write_file: no permission requests at all.
    assert!(out.of_kind("permission").is_empty(), "{out:?}");
    assert_eq!(result_of(&out)["stopReason"], "end_turn");
}

/// One MCP request to `corral mcp` on its stdin; its answer from stdout.
async fn mcp(running: &mut Running, id: u64, method: &str, params: Value) -> Value {
    running
        .send_line(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
        )
        .await;
    running.wait_for_event(0, |m| m["id"] == id).await
}

/// A tool's answer: the JSON text of its first content block.
async fn mcp_tool(running: &mut Running, id: u64, name: &str, arguments: Value) -> Value {
    let answer = mcp(
        running,
        id,
        "tools/call",
        json!({"name": name, "arguments": arguments}),
    )
    .await;
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{name}: {answer}"));
    serde_json::from_str(text).unwrap()
}

#[tokio::test]
async fn agent_set_model_switches_an_acp_agent_through_its_config_option() {
    let h = Harness::new();
    let script = h.home_dir().join("scripted_agent.py");
    std::fs::write(&script, SCRIPTED_AGENT).unwrap();
    let mut running = h.corral().arg("mcp").live_stdin().spawn().await;
    mcp(
        &mut running,
        0,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "it", "version": "1"}}),
    )
    .await;
    running
        .send_line(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await;
    let opened = mcp_tool(
        &mut running,
        1,
        "agent_open",
        json!({"cwd": h.work(), "model": format!("acp:cmd=python3 {}", script.display())}),
    )
    .await;
    let agent = opened["agent_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{opened}"));
    let status = mcp_tool(&mut running, 2, "agent_status", json!({"agent_id": agent})).await;
    assert_eq!(status["queues_prompts"], false, "{status}");
    let switched = mcp_tool(
        &mut running,
        3,
        "agent_set_model",
        json!({"agent_id": agent, "model": "large"}),
    )
    .await;
    assert_eq!(switched["switched"], true, "{switched}");
    let unknown = mcp_tool(
        &mut running,
        4,
        "agent_set_model",
        json!({"agent_id": agent, "model": "huge"}),
    )
    .await;
    let error = unknown["error"]
        .as_str()
        .unwrap_or_else(|| panic!("{unknown}"));
    assert!(
        error.contains("huge") && error.contains("small, large"),
        "{error}"
    );
    let log = std::fs::read_to_string(h.work().join("set_config_option.log")).unwrap();
    assert_eq!(log, "large\n", "only the known model reached the agent");
    running.close_stdin();
    running.wait().await;
}

#[tokio::test]
async fn resume_loads_the_agents_own_session_without_replaying_it() {
    let h = Harness::new();
    let first = scripted_run(&h, "say first").run().await;
    assert_eq!(first.code, Some(0), "{first:?}");
    let id = first.events()[0]["agent"].as_str().unwrap().to_owned();
    let second = h
        .corral()
        .args(["run", "--json", "--resume", &id, "say second"])
        .run()
        .await;
    assert_eq!(second.code, Some(0), "{second:?}");
    assert_eq!(second.events()[0]["agent"], id.as_str());
    assert_eq!(second.of_kind("turn_started")[0]["turn"], 2);
    // The agent's session came back by its own id; its replay is not shown again.
    let loads = std::fs::read_to_string(h.work().join("session_load.log")).unwrap();
    assert_eq!(loads, "scripted-1\n");
    assert_eq!(authoritative(&second, "assistant_text"), ["second"]);
    assert!(!second.stdout.contains("REPLAYED"), "{second:?}");
}

#[tokio::test]
async fn permission_answers_pick_the_agents_options_by_kind() {
    for (decision, chosen, stop) in [
        ("allow", "yes", "end_turn"),
        // corral's gate remembers "always" itself; the agent keeps asking.
        ("allow_all", "yes", "end_turn"),
        ("deny", "no", "end_turn"),
        ("cancel", "cancelled", "cancelled"),
    ] {
        let h = Harness::new();
        let mut running = scripted_run(&h, "ask rm -rf build")
            .arg("--approve-stdin")
            .live_stdin()
            .spawn()
            .await;
        let request = answer(&mut running, 0, decision).await;
        let out = running.wait().await;
        assert_eq!(request["data"]["tool"], "shell", "{request}");
        assert_eq!(
            request["data"]["toolCall"]["rawInput"]["command"],
            "rm -rf build"
        );
        let text = deltas(&out, "assistant_text");
        assert_eq!(
            text,
            format!("PERMISSION {chosen}\n"),
            "{decision}: {out:?}"
        );
        assert_eq!(result_of(&out)["stopReason"], stop, "{decision}: {out:?}");
        let results = out.of_kind("tool_result");
        assert_eq!(results.len(), 1, "{decision}: {out:?}");
        assert_eq!(
            results[0]["data"]["result"]["success"],
            decision.starts_with("allow"),
            "{decision}: {out:?}"
        );
    }
}

#[tokio::test]
async fn a_crash_while_a_person_is_asked_withdraws_the_question() {
    let h = Harness::new();
    let running = scripted_run(&h, "ask-and-crash")
        .arg("--approve-stdin")
        .live_stdin()
        .spawn()
        .await;
    running.wait_for_event(0, is_request).await;
    let out = running.wait().await;
    let resolved: Vec<Value> = out
        .of_kind("permission")
        .into_iter()
        .filter(|e| e["data"]["resolved"] == true)
        .collect();
    assert_eq!(resolved.len(), 1, "{out:?}");
    let errors = turn_errors(&out);
    assert_eq!(errors.len(), 1, "{out:?}");
    assert!(
        errors[0]["data"]["message"]
            .as_str()
            .unwrap()
            .contains("gave up waiting"),
        "{out:?}"
    );
    assert_eq!(result_of(&out)["stopReason"], "error");
    assert_eq!(statuses(&out).last().unwrap(), "dead");
}

#[tokio::test]
async fn thoughts_plans_usage_and_stop_reasons_map_to_events() {
    let h = Harness::new();
    let out = scripted_run(
        &h,
        "think pondering; plan; usage; say done; stop max_tokens",
    )
    .run()
    .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(authoritative(&out, "thought"), ["pondering"]);
    assert_eq!(authoritative(&out, "assistant_text"), ["done"]);
    let plan = &out.of_kind("plan")[0]["data"]["entries"];
    assert_eq!(plan[1]["content"], "fix", "{plan}");
    let usage = out.of_kind("usage");
    assert_eq!(usage[0]["data"]["contextTokens"], 1200);
    assert_eq!(usage[0]["data"]["contextWindow"], 200000);
    assert_eq!(usage[0]["data"]["usage"]["costUsd"], 0.25);
    // max_tokens: the turn stands, with a note.
    let result = result_of(&out);
    assert_eq!(result["stopReason"], "end_turn");
    assert_eq!(result["usage"]["inputTokens"], 30);
    assert_eq!(result["usage"]["outputTokens"], 7);
    let notes = turn_errors(&out);
    assert_eq!(notes.len(), 1, "{out:?}");
    assert_eq!(notes[0]["data"]["data"]["stopReason"], "max_tokens");

    let refused = scripted_run(&h, "say no; stop refusal").run().await;
    let result = result_of(&refused);
    assert_eq!(result["stopReason"], "error", "{refused:?}");
    assert!(result["error"].as_str().unwrap().contains("refusal"));
    let limited = scripted_run(&h, "say on; stop max_turn_requests")
        .run()
        .await;
    assert_eq!(
        result_of(&limited)["stopReason"],
        "max_steps",
        "{limited:?}"
    );
}

#[tokio::test]
async fn hermetic_agents_get_a_private_home_and_die_with_the_session() {
    let h = Harness::new();
    let out = scripted_run(&h, "whoami").arg("--hermetic").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let text = authoritative(&out, "assistant_text").concat();
    let home = text.trim().strip_prefix("HOME=").unwrap();
    assert!(
        !home.is_empty() && Path::new(home) != h.home_dir(),
        "{text}"
    );
    // The private home lived in the session's temp dir, gone with it.
    assert!(!Path::new(home).exists(), "{home}");
    let pid: i32 = std::fs::read_to_string(h.work().join("agent.pid"))
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "the agent process {pid} is gone"
    );
}

#[tokio::test]
async fn a_missing_agent_program_or_a_bad_command_line_is_a_clear_error() {
    let h = Harness::new();
    let missing = h
        .corral()
        .env("PATH", "/usr/bin:/bin")
        .args(["run", "--json", "-m", "acp:opencode", "hi"])
        .run()
        .await;
    assert_ne!(missing.code, Some(0), "{missing:?}");
    let message = missing.of_kind("error")[0]["data"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.contains("opencode is not installed") && message.contains("opencode-ai"),
        "{message}"
    );
    assert_eq!(statuses(&missing).last().unwrap(), "dead");
    let unquoted = h
        .corral()
        .args(["run", "--json", "-m", "acp:cmd=python3 'agent.py", "hi"])
        .run()
        .await;
    assert_ne!(unquoted.code, Some(0), "{unquoted:?}");
    assert!(
        unquoted.stderr.contains("unterminated single quote"),
        "{unquoted:?}"
    );
}

#[tokio::test]
async fn two_questions_at_once_are_asked_one_after_the_other() {
    let h = Harness::new();
    let mut running = scripted_run(&h, "ask-twice")
        .arg("--approve-stdin")
        .live_stdin()
        .spawn()
        .await;
    let first = answer(&mut running, 0, "allow").await;
    let second = answer(&mut running, 1, "deny").await;
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(first["data"]["toolCall"]["toolCallId"], "p1", "{first}");
    assert_eq!(second["data"]["toolCall"]["toolCallId"], "p2", "{second}");
    // The second was opened only once the first was resolved.
    let events = out.events();
    let position = |pred: &dyn Fn(&Value) -> bool| events.iter().position(pred).unwrap();
    let first_resolved = position(&|e| {
        e["kind"] == "permission"
            && e["data"]["requestId"] == first["data"]["requestId"]
            && e["data"]["resolved"] == true
    });
    let second_opened = position(&|e| {
        e["kind"] == "permission"
            && e["data"]["requestId"] == second["data"]["requestId"]
            && e["data"].get("resolved").is_none()
    });
    assert!(first_resolved < second_opened, "{out:?}");
    assert_eq!(deltas(&out, "assistant_text"), "ANSWERS yes no\n");
}

/// A scripted agent under `corral mcp` (with `flags`) that answers one turn and then exits.
async fn turn_then_leave(h: &Harness, flags: &str) -> (Running, String) {
    let (mut running, agent) = scripted_mcp(h, flags).await;
    let ran = mcp_tool(
        &mut running,
        2,
        "agent_run",
        json!({"agent_id": agent, "text": "say bye; leave-after"}),
    )
    .await;
    assert_eq!(ran["text"], "bye", "{ran}");
    (running, agent)
}

/// Between turns, an agent that cannot load its session (no `loadSession`) exiting moves the
/// session to dead at once, with its report.
#[tokio::test]
async fn an_agent_that_cannot_resume_and_exits_between_turns_is_dead_at_once() {
    let h = Harness::new();
    let (mut running, agent) = turn_then_leave(&h, "--no-load").await;
    crate::common::mcp_wait_dead(&mut running, &agent, 3).await;
    let all = mcp_tool(
        &mut running,
        5000,
        "agent_output",
        json!({"agent_id": agent, "which": "all", "include_tools": true}),
    )
    .await;
    let text = all["text"].as_str().unwrap();
    assert!(text.contains("stopped between turns"), "{text}");
    assert!(
        text.contains("leaving between turns") && text.contains("4"),
        "{text}"
    );
    running.close_stdin();
    running.wait().await;
}

/// An agent that can load its session and exits between turns is started again on it when the
/// next message comes (after the manager's first backoff); the session never goes dead.
#[tokio::test]
async fn an_agent_that_exits_between_turns_is_started_again_on_its_session() {
    let h = Harness::new();
    let (mut running, agent) = turn_then_leave(&h, "").await;
    // Told, and not dead.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut id = 100;
    loop {
        id += 1;
        let all = mcp_tool(
            &mut running,
            id,
            "agent_output",
            json!({"agent_id": agent, "which": "all", "include_tools": true}),
        )
        .await;
        if all["text"]
            .as_str()
            .unwrap()
            .contains("started again on its session")
        {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{all}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let status = crate::common::mcp_status(&mut running, 3, &agent).await;
    assert_ne!(status["status"], "dead", "{status}");
    let ran = mcp_tool(
        &mut running,
        4,
        "agent_run",
        json!({"agent_id": agent, "text": "say back again"}),
    )
    .await;
    assert_eq!(ran["text"], "back again", "{ran}");
    // The new process loaded the first one's session.
    let loaded = std::fs::read_to_string(h.work().join("session_load.log")).unwrap();
    assert_eq!(loaded.trim(), "scripted-1");
    running.close_stdin();
    running.wait().await;
}

/// Issue 12 §9: an edit the agent makes with its own tool is asked about with its path in
/// `locations`; under `-p auto` (edits run unasked) every path leading out of the root is
/// refused before the gate's auto-approval, so the agent never writes it. The edit inside
/// the root is the control: the same auto-approval lets it through.
#[tokio::test]
async fn edits_outside_the_root_are_refused_whatever_the_preset() {
    let h = Harness::new();
    let outside = tempfile::tempdir().unwrap();
    let root = h.work().canonicalize().unwrap();
    std::os::unix::fs::symlink(outside.path(), root.join("link")).unwrap();
    let targets = [
        outside.path().join("abs.txt").display().to_string(),
        format!("{}/../dotdot.txt", root.display()),
        root.join("link/linked.txt").display().to_string(),
        "../relative.txt".to_owned(),
    ];
    let prompt = format!(
        "edit {} inside; edit {} a; edit {} b; edit {} c; edit {} d",
        root.join("in.txt").display(),
        targets[0],
        targets[1],
        targets[2],
        targets[3],
    );
    let out = scripted_run(&h, &prompt).args(["-p", "auto"]).run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(root.join("in.txt")).unwrap(),
        "inside"
    );
    for written in [
        outside.path().join("abs.txt"),
        h.home_dir().join("dotdot.txt"),
        outside.path().join("linked.txt"),
        h.home_dir().join("relative.txt"),
    ] {
        assert!(
            !written.exists(),
            "{} was written: {out:?}",
            written.display()
        );
    }
    let text = authoritative(&out, "assistant_text").concat();
    assert_eq!(
        text.lines().collect::<Vec<_>>(),
        ["EDIT yes", "EDIT no", "EDIT no", "EDIT no", "EDIT no"],
        "{out:?}"
    );
    let failed: Vec<String> = out
        .of_kind("tool_result")
        .iter()
        .filter(|r| r["data"]["result"]["success"] == false)
        .map(|r| {
            r["data"]["result"]["error"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    assert_eq!(failed.len(), 4, "{out:?}");
    for error in &failed {
        assert!(
            error.contains("refused by corral") && error.contains("outside the session root"),
            "{error}"
        );
    }
}

/// Issue 13 §7: SIGTERM while an agent is still starting (its handshake unanswered) stops it
/// with corral, at once, instead of after the handshake's timeout.
#[tokio::test]
async fn sigterm_while_the_agent_starts_stops_it_with_corral() {
    let h = Harness::new();
    let running = h
        .corral()
        .args(["run", "--json", "-m", "acp:cmd=sleep 300", "hello"])
        .spawn()
        .await;
    let pids = h.cache_dir().join("corral/agents/pids.json");
    let mut pid = None;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    while pid.is_none() && tokio::time::Instant::now() < deadline {
        pid = std::fs::read_to_string(&pids)
            .ok()
            .and_then(|text| serde_json::from_str::<Vec<Value>>(&text).ok())
            .and_then(|entries| {
                entries
                    .iter()
                    .find(|e| e["kind"] == "acp")
                    .and_then(|e| e["pid"].as_u64())
            });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let pid = pid.unwrap_or_else(|| panic!("the agent never started"));
    let proc_dir = std::path::PathBuf::from(format!("/proc/{pid}"));
    assert!(proc_dir.exists());
    running.signal("TERM").await;
    let out = running.wait().await;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    let gone = |dir: &Path| {
        std::fs::read_to_string(dir.join("stat"))
            .map(|s| s.contains(") Z") || s.contains(") X"))
            .unwrap_or(true)
    };
    while !gone(&proc_dir) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let left = !gone(&proc_dir);
    if left {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    assert!(!left, "the agent {pid} outlived corral: {out:?}");
    assert_eq!(out.code, Some(143), "{out:?}");
}

/// An agent's children that left its process group (`setsid`, as claude does for every shell
/// command) are stopped with it when the session ends.
#[tokio::test]
async fn an_agents_child_in_a_session_of_its_own_is_stopped_with_it() {
    let h = Harness::new();
    let script = h.home_dir().join("scripted_agent.py");
    std::fs::write(&script, SCRIPTED_AGENT).unwrap();
    let pid_file = h.home_dir().join("escaped.pid");
    let wrapper = h.home_dir().join("agent.sh");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nsetsid sleep 300 &\necho $! > {}\nexec python3 {}\n",
            pid_file.display(),
            script.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let out = h
        .corral()
        .args([
            "run",
            "--json",
            "-m",
            &format!("acp:cmd={}", wrapper.display()),
            "say hi",
        ])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let proc_dir = std::path::PathBuf::from(format!("/proc/{pid}"));
    let running = || {
        std::fs::read_to_string(proc_dir.join("stat"))
            .is_ok_and(|s| !s.contains(") Z") && !s.contains(") X"))
            && std::fs::read_to_string(proc_dir.join("cmdline")).is_ok_and(|c| c.contains("sleep"))
    };
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    while running() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let left = running();
    if left {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    assert!(!left, "the agent's child {pid} outlived the session");
}

/// `--system` reaches an ACP agent (which has no system prompt) as the first block of the
/// first prompt, once; the person's text stays the last block.
#[tokio::test]
async fn the_sessions_system_text_reaches_an_acp_agent_ahead_of_the_first_prompt() {
    let h = Harness::new();
    let script = h.home_dir().join("scripted_agent.py");
    std::fs::write(&script, SCRIPTED_AGENT).unwrap();
    let agent = format!("acp:cmd=python3 {}", script.display());
    let out = h
        .corral()
        .args(["run", "--json", "-m", &agent, "-i"])
        .args(["--system", "Always answer in PIRATE-SPEAK-7731."])
        .stdin_text("blocks\nblocks\n")
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let said = crate::common::authoritative(&out, "assistant_text");
    assert_eq!(said.len(), 2, "{said:?}");
    assert!(
        said[0].contains("PIRATE-SPEAK-7731") && said[0].contains("blocks"),
        "{said:?}"
    );
    assert!(
        !said[1].contains("PIRATE-SPEAK-7731"),
        "sent again: {said:?}"
    );
}

/// An agent that publishes an effort option (category `thought_level`) gets the effort over
/// the wire; one that publishes none is run anyway, and the session says the effort was not
/// applied.
#[tokio::test]
async fn the_effort_goes_to_the_agents_thought_level_option_or_a_note_says_it_cannot() {
    let h = Harness::new();
    let script = h.home_dir().join("scripted_agent.py");
    std::fs::write(&script, SCRIPTED_AGENT).unwrap();
    let out = h
        .corral()
        .args(["run", "--json", "--effort", "high", "-m"])
        .arg(format!("acp:cmd=python3 {} --effort", script.display()))
        .arg("say ok")
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(effort_notes(&out).is_empty(), "{out:?}");
    let log = std::fs::read_to_string(h.work().join("set_config_option.log")).unwrap();
    assert_eq!(log, "effort=high\n");

    std::fs::remove_file(h.work().join("set_config_option.log")).unwrap();
    let out = scripted_run(&h, "say still here")
        .args(["--effort", "low"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(deltas(&out, "assistant_text"), "still here");
    let errors = effort_notes(&out);
    assert_eq!(errors.len(), 1, "{out:?}");
    let message = errors[0]["data"]["message"].as_str().unwrap();
    assert!(message.contains("no effort setting"), "{message}");
    assert!(!h.work().join("set_config_option.log").exists());
}

fn effort_notes(out: &crate::support::Outcome) -> Vec<Value> {
    out.of_kind("error")
        .into_iter()
        .filter(|e| e["data"]["data"]["code"] == "EFFORT_NOT_APPLIED")
        .collect()
}

/// The `lab` preset lets an agent's `fs/*` reads and writes in the root run with nobody asked;
/// the same writes under `default` are refused (nobody could answer), the `.git` rule holds
/// under both, and the allowance never covers a permission request the agent makes for its
/// own tool.
#[tokio::test]
async fn lab_lets_fs_callbacks_run_unasked_and_nothing_else() {
    for (preset, allowed) in [("lab", true), ("default", false)] {
        let h = Harness::new();
        let root = h.work().canonicalize().unwrap();
        let prompt = format!(
            "write {inside} hello; read {inside}; write {git} x; ask touch {rogue}",
            inside = root.join("in.txt").display(),
            git = root.join(".git/config").display(),
            rogue = root.join("rogue.txt").display(),
        );
        let out = scripted_run(&h, &prompt).args(["-p", preset]).run().await;
        assert_eq!(out.code, Some(0), "{preset}: {out:?}");
        let text = authoritative(&out, "assistant_text").concat();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{preset}: {text}");
        assert_eq!(root.join("in.txt").exists(), allowed, "{preset}: {text}");
        if allowed {
            assert_eq!(lines[0], "WRITE null", "{text}");
            assert_eq!(lines[1], r#"READ {"content": "hello"}"#, "{text}");
        } else {
            assert!(lines[0].contains("nobody can answer"), "{text}");
        }
        assert!(lines[2].contains(".git"), "{preset}: {text}");
        assert!(!root.join(".git/config").exists(), "{preset}");
        // The agent's own shell call asks, and nobody can answer: rejected.
        assert!(
            lines[3].starts_with("PERMISSION ")
                && !lines[3].contains("yes")
                && !lines[3].contains("always"),
            "{preset}: {text}"
        );
        assert!(!root.join("rogue.txt").exists());
        assert!(out.of_kind("permission").is_empty(), "{preset}: {out:?}");
    }
}
