//! Effort levels on corral's own loop: `--effort`, a `/level` model suffix and the config's
//! `effort` reach the model server in its own words (Ollama `think`, `reasoning_effort`,
//! llama.cpp's template switches), and a model that cannot take one says so.

use serde_json::json;

use crate::common::*;
use crate::support::{FakeModel, Harness, ModelInfo, Reply};

fn thinking_model(server: &FakeModel, name: &str, thinks: bool) {
    let capabilities: &[&str] = if thinks {
        &["completion", "tools", "thinking"]
    } else {
        &["completion", "tools"]
    };
    server.set_models(vec![ModelInfo::new(name, capabilities, 8192)]);
}

#[tokio::test]
async fn ollama_think_follows_the_effort_per_model_family() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    thinking_model(&server, "fake-model", true);
    for (effort, think) in [("low", json!(false)), ("high", json!(true))] {
        server.push(Reply::new().text("ok"));
        let out = ollama_run(&h, &server, "x")
            .args(["--effort", effort])
            .run()
            .await;
        assert_eq!(out.code, Some(0), "{out:?}");
        assert!(out.of_kind("error").is_empty(), "{out:?}");
        let last = server.chat_requests().pop().unwrap();
        assert_eq!(last["think"], think, "effort {effort}");
    }
    // GPT-OSS takes only a level (it ignores booleans): the level itself.
    let server = FakeModel::start().await;
    thinking_model(&server, "gpt-oss:20b", true);
    server.push(Reply::new().text("ok"));
    let out = h
        .corral()
        .args(["run", "--json", "-m", "ollama:gpt-oss:20b/medium"])
        .args(["--base-url", &server.base_url(), "x"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(server.chat_requests()[0]["think"], "medium");
    assert_eq!(server.chat_requests()[0]["model"], "gpt-oss:20b");
}

#[tokio::test]
async fn a_model_that_does_not_think_gets_no_think_and_a_note() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    thinking_model(&server, "fake-model", false);
    server.push(Reply::new().text("ok"));
    let out = ollama_run(&h, &server, "x")
        .args(["--effort", "high"])
        .run()
        .await;
    // The turn runs anyway: the note is information, not a failure.
    assert_eq!(out.code, Some(0), "{out:?}");
    let errors = out.of_kind("error");
    assert_eq!(errors.len(), 1, "{out:?}");
    assert_eq!(errors[0]["data"]["data"]["code"], "EFFORT_NOT_APPLIED");
    assert_eq!(errors[0]["data"]["data"]["effort"], "high");
    let message = errors[0]["data"]["message"].as_str().unwrap();
    assert!(message.contains("does not think"), "{message}");
    // Sending `think` to such a model is an HTTP 400 from Ollama.
    assert!(server.chat_requests()[0].get("think").is_none());
}

#[tokio::test]
async fn openai_compatible_servers_get_reasoning_effort_and_llamacpp_its_template_switch() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("ok"));
    // The suffix on the spec, as Kaimon writes it.
    let out = h
        .corral()
        .args(["run", "--json", "-m", "llamacpp:fake-model/low"])
        .args(["--base-url", &server.openai_base(), "x"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let request = &server.chat_requests()[0];
    assert_eq!(request["model"], "fake-model");
    assert_eq!(request["reasoning_effort"], "low");
    assert_eq!(
        request["chat_template_kwargs"],
        json!({"enable_thinking": false, "reasoning_effort": "low"})
    );
    // --effort wins over the suffix; vLLM gets the field without llama.cpp's switches.
    server.push(Reply::new().text("ok"));
    let out = h
        .corral()
        .args([
            "run",
            "--json",
            "-m",
            "vllm:fake-model/low",
            "--effort",
            "high",
        ])
        .args(["--base-url", &server.openai_base(), "x"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let request = &server.chat_requests()[1];
    assert_eq!(request["reasoning_effort"], "high");
    assert!(request.get("chat_template_kwargs").is_none(), "{request}");
    // No effort anywhere: nothing is sent, the server decides.
    server.push(Reply::new().text("ok"));
    let out = openai_run(&h, &server, "x").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(server.chat_requests()[2].get("reasoning_effort").is_none());
}

#[tokio::test]
async fn the_config_sets_a_default_effort_and_refuses_a_suffix_in_its_model() {
    let h = Harness::new();
    h.write_config("effort = \"medium\"\n");
    let server = FakeModel::start().await;
    server.push(Reply::new().text("ok"));
    let out = openai_run(&h, &server, "x").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(server.chat_requests()[0]["reasoning_effort"], "medium");

    h.write_config("model = \"claude:sonnet/high\"\n");
    let out = openai_run(&h, &server, "x").run().await;
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(
        out.stderr.contains("effort = \"high\""),
        "the error says how to write it: {}",
        out.stderr
    );
    h.write_config("effort = \"max\"\n");
    let out = openai_run(&h, &server, "x").run().await;
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("effort"), "{}", out.stderr);
}

#[tokio::test]
async fn a_bad_effort_flag_is_a_usage_error() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    let out = openai_run(&h, &server, "x")
        .args(["--effort", "extreme"])
        .run()
        .await;
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("low, medium or high"), "{}", out.stderr);
    assert!(server.chat_requests().is_empty());
}
