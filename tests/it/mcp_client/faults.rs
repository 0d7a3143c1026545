//! A server that crashes, hangs, changes its tools, starts slowly or asks for what corral
//! does not give (tests/it/mcp_client/fixtures/scripted_server.py).

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use super::basics::{mcp_config, run_with};
use crate::common::{offered_tools, openai_run, tool_results};
use crate::support::{FakeModel, Harness, Reply};

fn scripted(args: &[&str], record: Option<&PathBuf>) -> Value {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/it/mcp_client/fixtures/scripted_server.py"
    );
    let mut env = json!({});
    if let Some(record) = record {
        env["RECORD"] = json!(record);
    }
    let args: Vec<String> = std::iter::once(script)
        .chain(args.iter().copied())
        .map(str::to_string)
        .collect();
    json!({"command": "python3", "args": args, "env": env})
}

fn received(record: &PathBuf) -> Vec<Value> {
    std::fs::read_to_string(record)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[tokio::test]
async fn a_crash_is_an_error_event_its_tools_are_withdrawn_and_the_next_call_restarts_it() {
    let h = Harness::new();
    std::fs::create_dir_all(h.work()).unwrap();
    // Inside the root: the only place besides its temp dir a confined server may write.
    // On the server's command line, so its processes can be found after the session.
    let tag = crate::common::marker("mcp-crash");
    let config = mcp_config(&h, json!({"s": scripted(&["--tag", &tag], None)}));
    let (out, model) = run_with(
        &h,
        &config,
        "bypass",
        &[("s__crash", json!({})), ("s__fail", json!({}))],
    )
    .await;
    let errors = out.of_kind("error");
    let said = errors
        .iter()
        .find(|e| {
            e["data"]["message"]
                .to_string()
                .contains("MCP server s stopped")
        })
        .unwrap_or_else(|| panic!("no error event for the crash: {}", out.stdout));
    assert!(
        said["data"]["message"]
            .to_string()
            .contains("crashing on purpose"),
        "the error carries the stderr tail: {said}"
    );
    assert_eq!(said["data"]["data"]["mcpServer"], "s");
    // The step after the crash no longer offers its tools...
    let after = offered_tools(&model, 1);
    assert!(!after.iter().any(|t| t.starts_with("s__")), "{after:?}");
    // ...but the call the model still makes restarts it and runs.
    let results = tool_results(&out);
    assert_eq!(results.len(), 2, "{}", out.stdout);
    assert!(
        results[1].to_string().contains("it went wrong on purpose"),
        "the restarted server answered (isError reaches the model): {results:?}"
    );
    assert_eq!(
        out.of_kind("tool_result")[1]["data"]["update"]["status"],
        "failed"
    );
    // The restarted server went with the session.
    let left = crate::common::holding(&tag);
    assert!(
        left.is_empty(),
        "the MCP server outlived its session: {left:?}"
    );
    // Its stderr is kept beside the event log.
    let logs: Vec<PathBuf> = std::fs::read_dir(h.cache_dir().join("corral/agents"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".mcp-s.stderr.log"))
        .collect();
    assert_eq!(logs.len(), 1, "one stderr log for the server");
    assert!(
        std::fs::read_to_string(&logs[0])
            .unwrap()
            .contains("crashing on purpose")
    );
}

#[tokio::test]
async fn a_cancelled_turn_cancels_the_call_at_the_server() {
    let h = Harness::new();
    std::fs::create_dir_all(h.work()).unwrap();
    let record = h.work().join("received.jsonl");
    let config = mcp_config(&h, json!({"s": scripted(&[], Some(&record))}));
    let model = FakeModel::start().await;
    model.push(Reply::new().tool_call("c0", "s__hang", "{}"));
    model.push(Reply::new().text("done"));
    std::fs::create_dir_all(h.work()).unwrap();
    let running = openai_run(&h, &model, "go")
        .args(["-p", "bypass", "--mcp-config", &config])
        .spawn()
        .await;
    crate::common::wait_until("the call reaches the server", || {
        received(&record)
            .iter()
            .any(|m| m["method"] == "tools/call")
    })
    .await;
    running.sigint().await;
    let out = running.wait().await;
    let call_id = received(&record)
        .iter()
        .find(|m| m["method"] == "tools/call")
        .map(|m| m["id"].clone())
        .unwrap();
    crate::common::wait_until("notifications/cancelled arrives", || {
        received(&record).iter().any(|m| {
            m["method"] == "notifications/cancelled" && m["params"]["requestId"] == call_id
        })
    })
    .await;
    assert_eq!(
        crate::common::result_of(&out)["stopReason"],
        "cancelled",
        "{}",
        out.stdout
    );
}

#[tokio::test]
async fn a_changed_tool_list_is_offered_from_the_next_step() {
    let h = Harness::new();
    let config = mcp_config(&h, json!({"s": scripted(&[], None)}));
    let (out, model) = run_with(
        &h,
        &config,
        "bypass",
        &[("s__add_tool", json!({})), ("s__added", json!({}))],
    )
    .await;
    assert!(!offered_tools(&model, 0).iter().any(|t| t == "s__added"));
    assert!(offered_tools(&model, 1).iter().any(|t| t == "s__added"));
    assert!(
        tool_results(&out)[1]
            .to_string()
            .contains("the added tool ran"),
        "{}",
        out.stdout
    );
}

#[tokio::test]
async fn sampling_is_refused_and_elicitation_declined() {
    let h = Harness::new();
    let config = mcp_config(&h, json!({"s": scripted(&[], None)}));
    let (out, _) = run_with(
        &h,
        &config,
        "bypass",
        &[("s__ask_sampling", json!({})), ("s__ask_user", json!({}))],
    )
    .await;
    let results = tool_results(&out);
    assert!(
        results[0].to_string().contains("-32601"),
        "sampling refused: {results:?}"
    );
    assert!(
        results[1].to_string().contains("decline"),
        "elicitation declined: {results:?}"
    );
}

#[tokio::test]
async fn a_server_answering_an_older_protocol_works_and_an_unknown_one_is_a_clear_error() {
    let h = Harness::new();
    let config = mcp_config(
        &h,
        json!({"old": scripted(&["--protocol", "2024-11-05"], None),
               "odd": scripted(&["--protocol", "1999-01-01"], None)}),
    );
    let (out, model) = run_with(&h, &config, "bypass", &[("old__fail", json!({}))]).await;
    assert!(
        tool_results(&out)[0]
            .to_string()
            .contains("went wrong on purpose"),
        "{}",
        out.stdout
    );
    let offered = offered_tools(&model, 0);
    assert!(
        !offered.iter().any(|t| t.starts_with("odd__")),
        "{offered:?}"
    );
    assert!(
        super::basics::said_error(&out, "MCP server odd failed to start"),
        "{}",
        out.stdout
    );
}

/// A server that takes 10 s to start does not hold the first model request past its
/// startup timeout: the request comes while it is still starting.
#[tokio::test]
async fn a_slow_server_does_not_hold_the_first_request_past_its_timeout() {
    let h = Harness::new();
    std::fs::create_dir_all(h.work()).unwrap();
    let ready = h.work().join("ready");
    let mut server = scripted(&["--slow-start", "10"], None);
    server["env"]["READY"] = json!(ready);
    server["startup_timeout_secs"] = json!(1);
    let config = mcp_config(&h, json!({"slow": server}));
    let model = FakeModel::start().await;
    // The session outlives the server's start, so the server's tools can join later.
    model.push(Reply::new().tool_call("c0", "shell", &json!({"command": "sleep 12"}).to_string()));
    model.push(Reply::new().text("done"));
    std::fs::create_dir_all(h.work()).unwrap();
    let running = openai_run(&h, &model, "go")
        .args(["-p", "bypass", "--mcp-config", &config])
        .spawn()
        .await;
    assert!(
        model
            .wait_for_chat_requests(1, Duration::from_secs(8))
            .await
    );
    assert!(
        !ready.exists(),
        "the first request waited for the slow server"
    );
    assert!(
        !offered_tools(&model, 0)
            .iter()
            .any(|t| t.starts_with("slow__"))
    );
    let out = running.wait().await;
    assert_eq!(
        crate::common::result_of(&out)["stopReason"],
        "end_turn",
        "{}",
        out.stdout
    );
    // It kept starting in the background and its tools joined between steps.
    assert!(ready.exists());
    let later = offered_tools(&model, 1);
    assert!(later.iter().any(|t| t == "slow__fail"), "{later:?}");
}

/// A server's tool names and descriptions are its own text: what the terminal shows of them
/// carries no escape sequence, and the model-facing name only characters APIs accept.
#[tokio::test]
async fn a_servers_escape_sequences_never_reach_the_terminal() {
    let h = Harness::new();
    let config = mcp_config(&h, json!({"s": scripted(&[], None)}));
    let model = FakeModel::start().await;
    model.push(Reply::new().tool_call("c0", "s__describe__0_pwned_", "{}"));
    model.push(Reply::new().text("done"));
    std::fs::create_dir_all(h.work()).unwrap();
    let out = crate::support::Harness::corral(&h)
        .args([
            "run",
            "-m",
            "llamacpp:fake-model",
            "--base-url",
            &model.openai_base(),
        ])
        .args(["-p", "bypass", "--mcp-config", &config, "go"])
        .run()
        .await;
    let offered = offered_tools(&model, 0);
    assert!(
        offered.iter().any(|t| t == "s__describe__0_pwned_"),
        "{offered:?}"
    );
    for stream in [&out.stdout, &out.stderr] {
        assert!(
            !stream.contains('\u{1b}'),
            "a raw ESC reached the terminal: {stream:?}"
        );
        assert!(
            !stream.contains('\u{7}'),
            "a raw BEL reached the terminal: {stream:?}"
        );
    }
    assert!(out.stdout.contains("done"), "{out:?}");
    // The title was shown, as text: the test sees what the terminal would.
    let shown = format!("{}{}", out.stdout, out.stderr);
    assert!(shown.contains("pwned"), "{shown:?}");
}

/// A stdio server writes only where the session's tools may, plus the paths its config
/// names in `writable` (a launcher's cache).
#[tokio::test]
async fn a_server_writes_outside_the_root_only_where_its_config_says() {
    let h = Harness::new();
    let cache = h.home_dir().join("launcher-cache");
    std::fs::create_dir_all(&cache).unwrap();
    let target = cache.join("file");
    let call = [("s__write", json!({"path": target}))];
    let confined = mcp_config(&h, json!({"s": scripted(&[], None)}));
    let (out, _) = run_with(&h, &confined, "bypass", &call).await;
    assert_eq!(tool_results(&out)[0]["success"], false, "{}", out.stdout);
    assert!(
        !target.exists(),
        "the confined server wrote outside the root"
    );
    let mut server = scripted(&[], None);
    server["writable"] = json!([cache]);
    let allowed = mcp_config(&h, json!({"s": server}));
    let (out, _) = run_with(&h, &allowed, "bypass", &call).await;
    assert_eq!(tool_results(&out)[0]["success"], true, "{}", out.stdout);
    assert!(target.exists());
}

/// A server that says its tools changed and then never lists them does not wedge the
/// session: the re-listing is bounded by its timeout, the next step comes.
#[tokio::test]
async fn a_server_that_never_answers_a_relisting_does_not_wedge_the_session() {
    let h = Harness::new();
    let mut server = scripted(&[], None);
    server["startup_timeout_secs"] = json!(1);
    let config = mcp_config(&h, json!({"s": server}));
    let (out, model) = run_with(
        &h,
        &config,
        "bypass",
        &[("s__wedge", json!({})), ("s__fail", json!({}))],
    )
    .await;
    assert_eq!(model.chat_requests().len(), 3, "{}", out.stdout);
    assert!(
        tool_results(&out)[1]
            .to_string()
            .contains("went wrong on purpose")
    );
    assert_eq!(crate::common::result_of(&out)["stopReason"], "end_turn");
}

/// Progress without end gets the call's output cap, like a process's output.
#[tokio::test]
async fn a_progress_flood_is_capped() {
    let h = Harness::new();
    let config = mcp_config(&h, json!({"s": scripted(&[], None)}));
    let (out, _) = run_with(&h, &config, "bypass", &[("s__flood", json!({}))]).await;
    let shown = super::basics::streamed(&out);
    assert!(
        shown.contains("progress 1/5000"),
        "{}",
        &shown[..shown.len().min(300)]
    );
    assert!(
        shown.len() <= 40 * 1024,
        "{} bytes of progress shown",
        shown.len()
    );
    assert!(shown.contains("[further progress not shown]"));
    assert!(tool_results(&out)[0].to_string().contains("flooded"));
}
