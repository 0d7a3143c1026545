//! `acp:gemini`: `gemini --acp` against the fake server's Gemini routes, offline
//! (external-clis.md §4).

use std::time::Duration;

use serde_json::{Value, json};

use super::*;
use crate::common::*;
use crate::support::fake_gemini::is_turn_request;
use crate::support::{Cmd, FakeModel, Harness, Outcome, Reply};

const GEMINI_MODEL: &str = "gemini-2.5-flash";

/// `corral run --json -m acp:gemini:<model>` with gemini pointed at the fake server, offline.
fn gemini_run(h: &Harness, server: &FakeModel, prompt: &str) -> Cmd {
    gemini_cmd(h, server, &format!("acp:gemini:{GEMINI_MODEL}"), prompt)
}

fn gemini_cmd(h: &Harness, server: &FakeModel, spec: &str, prompt: &str) -> Cmd {
    write_gemini_settings(&h.home_dir());
    h.corral()
        .env("PATH", path_with("gemini"))
        .env("GEMINI_API_KEY", "dummy")
        .env("GOOGLE_GEMINI_BASE_URL", server.base_url())
        .env("GEMINI_CLI_TRUST_WORKSPACE", "true")
        .args(["run", "--json", "-m", spec, prompt])
        .timeout(AGENT_TIMEOUT)
}

/// The scripted turns gemini asked for (side calls excluded).
fn gemini_turns(server: &FakeModel) -> Vec<Value> {
    server
        .requests()
        .into_iter()
        .filter(|r| is_turn_request(&r.path, &r.body))
        .map(|r| r.body)
        .collect()
}

/// What gemini sent back to the model for a tool call: the functionResponse parts.
fn function_responses(server: &FakeModel) -> String {
    gemini_turns(server)
        .iter()
        .flat_map(|b| b["contents"].as_array().cloned().unwrap_or_default())
        .flat_map(|c| c["parts"].as_array().cloned().unwrap_or_default())
        .filter(|p| p.get("functionResponse").is_some())
        .map(|p| p["functionResponse"].to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn gemini_text_turn_streams_text_and_ends_the_turn() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(
        Reply::new()
            .text("Hello from ")
            .text("fake gemini.")
            .usage(12, 4),
    );
    let out = gemini_run(&h, &server, "say hello").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_well_formed(&out);
    // gemini asks before every edit, so the default preset's only rule (.git) holds: nothing
    // is advisory.
    assert!(out.of_kind("error").is_empty(), "{out:?}");
    assert_eq!(result_of(&out)["stopReason"], "end_turn");
    assert_eq!(deltas(&out, "assistant_text"), "Hello from fake gemini.");
    assert_eq!(
        authoritative(&out, "assistant_text"),
        ["Hello from fake gemini."]
    );
    let kinds = out.kinds();
    let pos = |k: &str| kinds.iter().position(|x| x == k).unwrap();
    assert!(pos("turn_started") < pos("user_text"));
    assert!(pos("user_text") < pos("assistant_text"));
    assert!(pos("assistant_text") < pos("result"));
    assert_eq!(statuses(&out).last().unwrap(), "dead");
    // The model came over the wire (session/set_model), not from gemini's router.
    let turns = gemini_turns(&server);
    assert_eq!(turns.len(), 1, "{:?}", server.requests());
    let user = turns[0]["contents"].to_string();
    assert!(user.contains("say hello"), "{user}");
    assert!(
        server
            .requests()
            .iter()
            .any(|r| r.path.contains(&format!("models/{GEMINI_MODEL}:"))),
        "{:?}",
        server
            .requests()
            .iter()
            .map(|r| &r.path)
            .collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn gemini_router_side_call_gets_schema_json_without_taking_a_reply() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("Routed."));
    // No model: gemini's "auto" first asks a flash-lite model to rate the prompt.
    let out = gemini_cmd(&h, &server, "acp:gemini", "route me")
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(authoritative(&out, "assistant_text"), ["Routed."]);
    assert_eq!(result_of(&out)["stopReason"], "end_turn");
    let side_calls = server
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/v1beta/") && !is_turn_request(&r.path, &r.body))
        .count();
    assert!(side_calls >= 1, "{:?}", server.requests());
    assert_eq!(server.pending_replies(), 0);
}

/// A shell call by gemini, approved or refused through `--approve-stdin`.
async fn gemini_shell(decision: &str) -> (Harness, FakeModel, Outcome, Value) {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call(
        "call_1",
        "run_shell_command",
        r#"{"command":"touch made.txt"}"#,
    ));
    server.push(Reply::new().text("Finished."));
    let mut running = gemini_run(&h, &server, "make a file")
        .arg("--approve-stdin")
        .live_stdin()
        .spawn()
        .await;
    let request = answer(&mut running, 0, decision).await;
    let out = running.wait().await;
    (h, server, out, request)
}

#[tokio::test]
async fn gemini_shell_call_allowed_through_the_gate_runs() {
    let (h, server, out, request) = gemini_shell("allow").await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_well_formed(&out);
    let data = &request["data"];
    assert_eq!(data["tool"], "shell", "{request}");
    assert_eq!(data["toolCall"]["kind"], "execute");
    assert!(
        data["toolCall"]["title"]
            .as_str()
            .unwrap()
            .contains("touch made.txt"),
        "{request}"
    );
    let id = data["toolCall"]["toolCallId"].as_str().unwrap();
    let resolved = out
        .of_kind("permission")
        .into_iter()
        .find(|e| e["data"]["resolved"] == true)
        .expect("resolved");
    assert_eq!(resolved["data"]["decision"], "allow");
    let uses = out.of_kind("tool_use");
    assert!(
        uses.iter().any(|u| u["data"]["call"]["toolCallId"] == id),
        "{out:?}"
    );
    let results = out.of_kind("tool_result");
    assert_eq!(results.len(), 1, "{out:?}");
    assert_eq!(results[0]["data"]["update"]["toolCallId"], id);
    assert_eq!(results[0]["data"]["update"]["status"], "completed");
    assert_eq!(results[0]["data"]["result"]["success"], true);
    assert!(h.work().join("made.txt").exists(), "the command ran");
    assert_eq!(result_of(&out)["stopReason"], "end_turn");
    assert_eq!(authoritative(&out, "assistant_text"), ["Finished."]);
    assert!(statuses(&out).contains(&"waiting_approval".to_owned()));
    assert_eq!(gemini_turns(&server).len(), 2);
}

#[tokio::test]
async fn gemini_shell_call_denied_through_the_gate_does_not_run() {
    let (h, server, out, _) = gemini_shell("deny").await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        !h.work().join("made.txt").exists(),
        "the command must not run"
    );
    let results = out.of_kind("tool_result");
    assert_eq!(results.len(), 1, "{out:?}");
    assert_eq!(results[0]["data"]["result"]["success"], false);
    assert!(
        results[0]["data"]["result"]["error"]
            .as_str()
            .unwrap()
            .contains("denied"),
        "{out:?}"
    );
    // gemini told its model the call did not run.
    assert!(
        function_responses(&server).contains("error"),
        "{}",
        function_responses(&server)
    );
    assert_eq!(result_of(&out)["stopReason"], "end_turn");
}

#[tokio::test]
async fn gemini_files_go_through_corrals_fs_callbacks() {
    let h = Harness::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "TOP SECRET").unwrap();
    // Inside the root by name, outside by target.
    std::os::unix::fs::symlink(outside.path(), h.work().join("link")).unwrap();
    std::fs::write(h.work().join("data.txt"), "apple pie\n").unwrap();
    let root = h.work().canonicalize().unwrap();
    let notes = root.join("notes.txt");
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call(
        "w1",
        "write_file",
        &json!({"file_path": notes, "content": "written via corral\n"}).to_string(),
    ));
    server.push(Reply::new().tool_call(
        "r1",
        "read_file",
        &json!({ "file_path": root.join("data.txt") }).to_string(),
    ));
    server.push(Reply::new().tool_call(
        "r2",
        "read_file",
        &json!({ "file_path": root.join("link/secret.txt") }).to_string(),
    ));
    server.push(Reply::new().text("Done."));
    let mut running = gemini_run(&h, &server, "write notes, read data and the secret")
        .env("RUST_LOG", "corral::acp=debug")
        .arg("--approve-stdin")
        .live_stdin()
        .spawn()
        .await;
    let request = answer(&mut running, 0, "allow").await;
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(request["data"]["tool"], "write_file", "{request}");
    assert!(
        request["data"]["diff"]
            .as_str()
            .unwrap()
            .contains("via corral"),
        "{request}"
    );
    // Approved once: the fs/write_text_file that follows is not asked about again.
    let asked = out
        .of_kind("permission")
        .into_iter()
        .filter(is_request)
        .count();
    assert_eq!(asked, 1, "{out:?}");
    assert_eq!(
        std::fs::read_to_string(&notes).unwrap(),
        "written via corral\n"
    );
    // corral wrote the file (fs/write_text_file). gemini 0.61's read_file tool reads on its
    // own, not through fs/* (the advisory at spawn says as much); its write_file checks the
    // file through fs/read_text_file first.
    let served = |what: &str, path: &str| {
        out.stderr
            .lines()
            .any(|l| l.contains(what) && l.contains(path))
    };
    assert!(
        served("fs/write_text_file served", "notes.txt"),
        "{}",
        out.stderr
    );
    assert!(served("fs/read_text_file", "notes.txt"), "{}", out.stderr);
    let responses = function_responses(&server);
    assert!(responses.contains("apple pie"), "{responses}");
    // The link leads out of the root: refused (gemini resolves it itself, corral would too).
    assert!(!responses.contains("TOP SECRET"), "{responses}");
    assert!(!served("served", "secret.txt"), "{}", out.stderr);
    let results = out.of_kind("tool_result");
    assert_eq!(results.len(), 3, "{out:?}");
    let ok: Vec<bool> = results
        .iter()
        .map(|r| r["data"]["result"]["success"].as_bool().unwrap())
        .collect();
    assert_eq!(ok, [true, true, false], "{out:?}");
    assert_eq!(result_of(&out)["stopReason"], "end_turn");
}

#[tokio::test]
async fn gemini_turn_cancelled_mid_reply_sends_session_cancel() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(
        Reply::new()
            .text("Working on it")
            .stall(Duration::from_secs(60))
            .text(" never sent"),
    );
    let running = gemini_run(&h, &server, "take your time")
        .env("RUST_LOG", "corral::acp_wire=trace")
        .spawn()
        .await;
    wait_long(&running, 0, |e| e["kind"] == "assistant_text").await;
    running.sigint().await;
    let out = running.wait().await;
    assert_eq!(out.code, Some(130), "{out:?}");
    assert_eq!(result_of(&out)["stopReason"], "cancelled");
    // The cancel reached gemini and the turn ended because gemini honoured it: corral sent
    // one session/cancel for the session, and gemini then answered the prompt request with
    // stopReason cancelled (corral reports a cancel the agent ignores only after a 30 s
    // grace, so an unsent or ignored cancel fails here), dropping its model stream.
    let wire = acp_wire(&out.stderr);
    let prompt = wire
        .iter()
        .position(|(out, m)| *out && m["method"] == "session/prompt")
        .unwrap_or_else(|| panic!("no session/prompt: {}", out.stderr));
    let session = wire[prompt].1["params"]["sessionId"].clone();
    let cancels: Vec<usize> = (0..wire.len())
        .filter(|&i| wire[i].0 && wire[i].1["method"] == "session/cancel")
        .collect();
    assert_eq!(cancels.len(), 1, "{}", out.stderr);
    assert_eq!(wire[cancels[0]].1["params"], json!({"sessionId": session}));
    let answer = wire
        .iter()
        .position(|(out, m)| !*out && m["id"] == wire[prompt].1["id"] && m.get("method").is_none())
        .unwrap_or_else(|| panic!("the prompt was never answered: {}", out.stderr));
    assert!(
        answer > cancels[0],
        "answered before the cancel: {}",
        out.stderr
    );
    assert_eq!(
        wire[answer].1["result"]["stopReason"], "cancelled",
        "{}",
        wire[answer].1
    );
    assert!(
        server.wait_for_cancelled(1, Duration::from_secs(10)).await,
        "gemini never dropped its model stream"
    );
    assert_eq!(deltas(&out, "assistant_text"), "Working on it");
    assert!(!out.stdout.contains("never sent"));
    assert!(turn_errors(&out).is_empty(), "{out:?}");
    assert_eq!(statuses(&out).last().unwrap(), "dead");
}

/// The JSON-RPC messages of corral's `corral::acp_wire` trace, in order: (sent by corral,
/// message).
fn acp_wire(stderr: &str) -> Vec<(bool, Value)> {
    stderr
        .lines()
        .filter(|l| l.contains("corral::acp_wire"))
        .filter_map(|l| {
            let (sent, at) = match (l.find("-> {"), l.find("<- {")) {
                (Some(at), _) => (true, at),
                (None, Some(at)) => (false, at),
                (None, None) => return None,
            };
            serde_json::from_str(&l[at + 3..]).ok().map(|m| (sent, m))
        })
        .collect()
}

/// Issue 13 §3: an MCP server planted in the project's `.gemini/settings.json` starts only
/// when the person opts in (gemini runs an untrusted workspace's settings never). Returns
/// whether its command ran.
async fn gemini_in_planted_project(opt_in: bool) -> bool {
    let h = Harness::new();
    let outside = tempfile::tempdir().unwrap();
    let marker = outside.path().join("mcp-ran");
    let dir = h.work().join(".gemini");
    std::fs::create_dir_all(&dir).unwrap();
    let planted = json!({"mcpServers": {"planted": {"command": "sh",
        "args": ["-c", format!("touch {}; sleep 1", marker.display())]}}});
    std::fs::write(dir.join("settings.json"), planted.to_string()).unwrap();
    if opt_in {
        h.write_config("[agents]\nproject_settings = true\n");
    }
    let server = FakeModel::start().await;
    server.push(Reply::new().text("HELLO"));
    let out = gemini_run(&h, &server, "say hello").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(result_of(&out)["stopReason"], "end_turn", "{out:?}");
    if opt_in {
        appears(&marker).await
    } else {
        marker.exists()
    }
}

#[tokio::test]
async fn gemini_starts_no_mcp_server_planted_in_the_project() {
    assert!(!gemini_in_planted_project(false).await);
}

#[tokio::test]
async fn gemini_starts_the_projects_mcp_server_with_the_opt_in() {
    assert!(gemini_in_planted_project(true).await);
}

/// Vouchers (issue 23): gemini gets a voucher and the proxy's URL, never the key; the
/// upstream gets the key as `x-goog-api-key`.
#[tokio::test]
async fn gemini_runs_on_a_voucher_and_never_sees_the_key() {
    let h = Harness::new();
    let real = format!("AIza-REAL-{:016x}", fastrand::u64(..));
    let server = FakeModel::start().await;
    // Long enough for the test to read gemini's environment while it waits on the model.
    server.push(
        Reply::new()
            .stall(Duration::from_secs(3))
            .text("HELLO THROUGH THE PROXY"),
    );
    let running = gemini_run(&h, &server, "say hello")
        .env("GEMINI_API_KEY", &real)
        .spawn()
        .await;
    let environ = || -> Option<String> {
        let (dir, _) = procs_in(&h.work(), "--acp").into_iter().next()?;
        let environ = std::fs::read(dir.join("environ")).ok()?;
        Some(String::from_utf8_lossy(&environ).replace('\0', "\n"))
    };
    wait_until("gemini never started", || environ().is_some()).await;
    let environ = environ().unwrap();
    assert!(
        !environ.contains(&real),
        "the real key is in gemini's environ"
    );
    assert!(
        environ.contains("GEMINI_API_KEY=corral-voucher-"),
        "no voucher in gemini's environ"
    );
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("HELLO THROUGH THE PROXY"), "{out:?}");
    let turn = server
        .requests()
        .into_iter()
        .find(|r| is_turn_request(&r.path, &r.body))
        .expect("gemini sent no turn");
    assert_eq!(turn.header("x-goog-api-key"), Some(real.as_str()));
    assert!(!out.stdout.contains(&real) && !out.stderr.contains(&real));
}
