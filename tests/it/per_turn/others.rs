//! qwen-code, copilot and `opencode run`, the real programs from npm, each a process per turn
//! against the fake server's OpenAI route.

use serde_json::Value;

use super::*;
use crate::common::*;
use crate::support::{FakeModel, Reply};

/// What each chat request sent as user text.
fn user_texts(server: &FakeModel) -> Vec<String> {
    server
        .chat_requests()
        .iter()
        .map(|body| {
            body["messages"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|m| m["role"] == "user")
                .map(|m| m["content"].to_string())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect()
}

fn offered_tools(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect()
}

fn qwen(h: &Harness, server: &FakeModel, args: &[&str]) -> Cmd {
    let settings = h.home_dir().join(".qwen");
    std::fs::create_dir_all(&settings).unwrap();
    std::fs::write(
        settings.join("settings.json"),
        r#"{"security":{"auth":{"selectedType":"openai"}},"privacy":{"usageStatisticsEnabled":false},"telemetry":{"enabled":false},"general":{"disableAutoUpdate":true},"memory":{"enableManagedAutoMemory":false,"enableManagedAutoDream":false}}"#,
    )
    .unwrap();
    let (path, base) = (path_with("qwen"), server.openai_base());
    let env = [
        ("PATH", path.as_str()),
        ("OPENAI_API_KEY", "real-openai-key"),
        ("OPENAI_BASE_URL", base.as_str()),
    ];
    corral_run(h, "qwen:fake-model", &env, args)
}

#[tokio::test]
async fn qwen_turns_resume_its_session_and_the_key_stays_with_corral() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("first answer").usage(10, 2));
    server.push(Reply::new().text("second answer").usage(10, 2));
    let out = two_turns(
        qwen(&h, &server, &["-i", "remember PLUM"]),
        "what was it",
        || {
            assert_eq!(left_in(&h, "qwen"), Vec::<String>::new());
        },
    )
    .await;
    assert_eq!(
        authoritative(&out, "assistant_text"),
        ["first answer", "second answer"]
    );
    let texts = user_texts(&server);
    let last = texts.last().unwrap();
    assert!(
        last.contains("remember PLUM") && last.contains("what was it"),
        "{texts:?}"
    );
    // qwen takes the standing instructions as its own system prompt.
    let system = server.chat_requests()[0]["messages"][0]["content"].to_string();
    assert!(system.contains("Message Notifications"), "{system}");
    for request in server
        .requests()
        .iter()
        .filter(|r| r.path.ends_with("/chat/completions"))
    {
        assert_eq!(
            request.header("authorization"),
            Some("Bearer real-openai-key")
        );
    }
}

#[tokio::test]
async fn qwen_runs_no_command_under_the_default_preset_and_does_under_bypass() {
    for (preset, runs) in [("default", false), ("bypass", true)] {
        let h = Harness::new();
        let server = FakeModel::start().await;
        server.push(Reply::new().tool_call(
            "c1",
            "run_shell_command",
            r#"{"command":"touch pwned"}"#,
        ));
        server.push(Reply::new().text("done"));
        let out = qwen(&h, &server, &["-p", preset, "make a file"])
            .run()
            .await;
        assert_eq!(out.code, Some(0), "{out:?}");
        assert_eq!(
            h.work().join("pwned").exists(),
            runs,
            "{preset}: {:#?}",
            out.events()
        );
    }
}

fn copilot(h: &Harness, server: &FakeModel, args: &[&str]) -> Cmd {
    let (path, base) = (path_with("copilot"), server.openai_base());
    let env = [
        ("PATH", path.as_str()),
        ("COPILOT_PROVIDER_BASE_URL", base.as_str()),
        ("COPILOT_PROVIDER_API_KEY", "real-copilot-key"),
    ];
    corral_run(h, "copilot:fake-model", &env, args)
}

#[tokio::test]
async fn copilot_turns_resume_its_session_and_a_command_runs_only_when_allowed() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c1", "bash", r#"{"command":"touch pwned"}"#));
    server.push(Reply::new().text("refused, fine"));
    server.push(Reply::new().tool_call("c2", "bash", r#"{"command":"touch allowed"}"#));
    server.push(Reply::new().text("made it"));
    // Under the default preset copilot may not run the command.
    let out = copilot(&h, &server, &["make pwned"]).run().await;
    assert!(!h.work().join("pwned").exists());
    assert_eq!(stop_reasons(&out), ["end_turn"], "{:#?}", out.events());
    for request in server
        .requests()
        .iter()
        .filter(|r| r.path.ends_with("/chat/completions"))
    {
        assert_eq!(
            request.header("authorization"),
            Some("Bearer real-copilot-key")
        );
    }
    // With shell allowed it may; a new session, so no resume.
    let out = copilot(&h, &server, &["--allow", "shell", "make allowed"])
        .run()
        .await;
    assert_eq!(stop_reasons(&out), ["end_turn"], "{:#?}", out.events());
    assert!(h.work().join("allowed").exists(), "{:#?}", out.events());
    let used = out.of_kind("tool_use");
    assert_eq!(used[0]["data"]["call"]["kind"], "execute", "{used:?}");
}

#[tokio::test]
async fn opencode_run_is_a_process_per_turn_whose_commands_are_not_even_offered_by_default() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    let config = h.home_dir().join("opencode.json");
    std::fs::write(
        &config,
        serde_json::json!({
            "model": "fake/fake-model", "small_model": "fake/fake-model",
            "autoupdate": false, "share": "disabled",
            "provider": {"fake": {"npm": "@ai-sdk/openai-compatible",
                "options": {"baseURL": server.openai_base(), "apiKey": "dummy"},
                "models": {"fake-model": {"tool_call": true,
                    "limit": {"context": 128000, "output": 4096}}}}}
        })
        .to_string(),
    )
    .unwrap();
    server.push(Reply::new().text("first answer"));
    server.push(Reply::new().text("second answer"));
    let cmd = h
        .corral()
        .env("PATH", path_with("opencode"))
        .env("OPENCODE_CONFIG", &config)
        .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
        .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
        .env("OPENCODE_DISABLE_LSP_DOWNLOAD", "1")
        .env("npm_config_registry", "http://127.0.0.1:9/")
        .args([
            "run",
            "--json",
            "-m",
            "opencode:fake/fake-model",
            "-i",
            "remember PLUM",
        ])
        .timeout(AGENT_TIMEOUT);
    let out = two_turns(cmd, "and now", || {
        assert_eq!(left_in(&h, "opencode"), Vec::<String>::new());
    })
    .await;
    let texts = user_texts(&server);
    let last = texts.last().unwrap();
    assert!(
        last.contains("remember PLUM") && last.contains("and now"),
        "{texts:?}"
    );
    assert_eq!(
        authoritative(&out, "assistant_text"),
        ["first answer", "second answer"]
    );
    // Under the default preset opencode's bash, edit and webfetch are `deny`: opencode does not
    // even offer them to the model.
    // (The first request with tools: opencode's title call has none.)
    let turn = server
        .chat_requests()
        .into_iter()
        .find(|body| body["tools"].is_array())
        .unwrap();
    let offered = offered_tools(&turn);
    assert!(offered.iter().any(|t| t == "read"), "{offered:?}");
    for denied in ["bash", "edit", "write", "webfetch"] {
        assert!(
            !offered.iter().any(|t| t == denied),
            "{denied} offered: {offered:?}"
        );
    }
}
