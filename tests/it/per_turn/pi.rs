//! `pi[:provider/model]`: pi in its RPC mode, one process for the session's turns, against
//! the fake server's OpenAI route (a custom provider in pi's models.json).

use serde_json::json;

use super::*;
use crate::common::*;
use crate::support::{FakeModel, Reply};

fn pi(h: &Harness, server: &FakeModel, args: &[&str]) -> Cmd {
    let agent = h.home_dir().join(".pi/agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(
        agent.join("models.json"),
        json!({"providers": {"fake": {
            "baseUrl": server.openai_base(), "api": "openai-completions", "apiKey": "dummy",
            "compat": {"supportsDeveloperRole": false, "supportsReasoningEffort": false},
            "models": [{"id": "fake-model"}]}}})
        .to_string(),
    )
    .unwrap();
    pi_spec(h, "pi:fake/fake-model", args)
}

/// `corral run -m <spec>` with the installed pi on PATH.
fn pi_spec(h: &Harness, spec: &str, args: &[&str]) -> Cmd {
    let path = path_with("pi");
    corral_run(h, spec, &[("PATH", path.as_str())], args)
}

/// pi's processes in the work dir (pi names itself `pi`).
fn pi_processes(h: &Harness) -> Vec<String> {
    crate::common::procs_in(&h.work(), "pi")
        .into_iter()
        .filter(|(_, line)| line.trim_matches([' ', '\0']) == "pi")
        .map(|(dir, _)| dir.display().to_string())
        .collect()
}

fn tools_offered(server: &FakeModel) -> Vec<String> {
    server
        .chat_requests()
        .first()
        .and_then(|b| b["tools"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn pi_keeps_one_process_for_the_sessions_turns_and_offers_no_shell_by_default() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("first answer"));
    server.push(Reply::new().text("second answer"));
    let mut running = pi(&h, &server, &["-i", "remember PLUM"])
        .live_stdin()
        .spawn()
        .await;
    running.wait_for_event(0, |e| e["kind"] == "result").await;
    let between = pi_processes(&h);
    assert_eq!(between.len(), 1, "{between:?}");
    running.send_line("what was it").await;
    running.wait_for_event(1, |e| e["kind"] == "result").await;
    // Still the same process.
    assert_eq!(pi_processes(&h), between);
    running.close_stdin();
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_well_formed(&out);
    assert_eq!(
        stop_reasons(&out),
        ["end_turn", "end_turn"],
        "{:#?}",
        out.events()
    );
    assert_eq!(
        authoritative(&out, "assistant_text"),
        ["first answer", "second answer"]
    );
    let last = server.chat_requests().last().unwrap().to_string();
    assert!(
        last.contains("remember PLUM") && last.contains("what was it"),
        "{last}"
    );
    assert!(last.contains("Message Notifications"), "{last}");
    let offered = tools_offered(&server);
    assert!(offered.iter().any(|t| t == "read"), "{offered:?}");
    for absent in ["bash", "edit", "write"] {
        assert!(
            !offered.iter().any(|t| t == absent),
            "{absent}: {offered:?}"
        );
    }
    // The session's end ends pi.
    assert_eq!(pi_processes(&h), Vec::<String>::new());
}

#[tokio::test]
async fn under_bypass_pi_runs_the_command() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c1", "bash", r#"{"command":"touch made"}"#));
    server.push(Reply::new().text("done"));
    let out = pi(&h, &server, &["-p", "bypass", "make a file"])
        .run()
        .await;
    assert_eq!(stop_reasons(&out), ["end_turn"], "{:#?}", out.events());
    assert!(h.work().join("made").exists(), "{:#?}", out.events());
    let used = out.of_kind("tool_use");
    assert_eq!(used[0]["data"]["call"]["kind"], "execute", "{used:?}");
    let result = &out.of_kind("tool_result")[0];
    assert_eq!(result["data"]["update"]["status"], "completed", "{result}");
}

/// pi's parser takes no `--flag=value` form, so a model (which a `user` token may choose) that
/// starts with `-` would reach pi as an option of its own: refused before pi starts.
#[tokio::test]
async fn a_pi_model_that_looks_like_an_option_is_refused_before_pi_starts() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    let out = pi_spec(&h, "pi:--extension=/tmp/evil.js", &["hello"])
        .run()
        .await;
    assert_ne!(out.code, Some(0), "{out:?}");
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(said.contains("cannot start with '-'"), "{said}");
    assert!(pi_processes(&h).is_empty());
    assert!(server.requests().is_empty());
}
