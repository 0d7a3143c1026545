//! What a run says when the model is not where it was looked for: a refused local server at
//! once, a model the server lacks with the ones it has, on both wires alike; bare model names
//! and the forms of a spec.

use serde_json::Value;

use crate::support::{FakeModel, Harness, ModelInfo, Reply};

/// A local port nothing listens on.
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test]
async fn a_refused_local_server_fails_at_once_with_a_hint_on_both_wires() {
    let h = Harness::new();
    let port = closed_port();
    let mut codes = Vec::new();
    for (model, base, origin) in [
        (
            "ollama:qwen3",
            format!("http://127.0.0.1:{port}"),
            format!("http://127.0.0.1:{port}"),
        ),
        (
            "vllm:qwen3",
            format!("http://localhost:{port}/v1"),
            format!("http://localhost:{port}"),
        ),
        (
            "llamacpp:local",
            format!("http://[::1]:{port}/v1"),
            format!("http://[::1]:{port}"),
        ),
    ] {
        let out = h
            .corral()
            .args(["run", "--json", "-m", model, "--base-url", &base, "x"])
            .run()
            .await;
        // Said on stderr, or (a turn's error, on the OpenAI wire) in the events.
        let said = format!("{}{}", out.stderr, out.stdout);
        assert!(
            said.contains(&format!(
                "no model server listens at {origin} (connection refused)"
            )) && said.contains("--base-url URL"),
            "{model}: {said}"
        );
        // Not retried: no retry notice before the failure.
        let retries: Vec<Value> = out
            .of_kind("error")
            .into_iter()
            .filter(|e| !e["data"]["data"]["retry"].is_null())
            .collect();
        assert!(retries.is_empty(), "{model}: {retries:?}");
        codes.push(out.code);
    }
    assert_eq!(codes, [Some(1), Some(1), Some(1)]);
}

#[tokio::test]
async fn a_model_the_server_lacks_is_named_with_the_ones_it_has_on_both_wires() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.set_models(vec![
        ModelInfo::new("qwen3:8b", &["completion", "tools"], 40960),
        ModelInfo::new("llama3.2", &["completion"], 8192),
    ]);
    server.push(Reply::new().status(
        404,
        r#"{"error":{"message":"The model `nope` does not exist.","type":"NotFoundError","code":404}}"#,
    ));
    let openai = h
        .corral()
        .args(["run", "--json", "-m", "vllm:nope", "--base-url"])
        .arg(server.openai_base())
        .arg("x")
        .run()
        .await;
    let ollama = h
        .corral()
        .args(["run", "--json", "-m", "ollama:nope", "--base-url"])
        .arg(server.base_url())
        .arg("x")
        .run()
        .await;
    for out in [&openai, &ollama] {
        let said = format!("{}{}", out.stderr, out.stdout);
        assert!(
            said.contains("nope")
                && said.contains(" not found on the server at")
                && said.contains("the server has: qwen3:8b, llama3.2"),
            "{said}"
        );
    }
    assert!(ollama.stderr.contains("try: ollama pull nope"));
    assert_eq!(openai.code, Some(1), "{openai:?}");
    assert_eq!(openai.code, ollama.code);
}

#[tokio::test]
async fn a_bare_model_name_is_the_default_providers_model() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.set_models(vec![ModelInfo::new(
        "qwen3",
        &["completion", "tools"],
        40960,
    )]);
    server.push(Reply::new().text("from ollama"));
    let out = h
        .corral()
        .args(["run", "--json", "-m", "qwen3", "x"])
        .env("OLLAMA_HOST", server.base_url())
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let chats: Vec<String> = server
        .requests()
        .iter()
        .filter(|r| r.path.ends_with("/chat") || r.path.ends_with("/completions"))
        .map(|r| r.path.clone())
        .collect();
    assert_eq!(chats, ["/api/chat"]);
    assert_eq!(server.chat_requests()[0]["model"], "qwen3");

    // A config that names only another provider's server: that one.
    h.write_config(&format!(
        "[providers.vllm]\nbase_url = \"{}\"\n",
        server.openai_base()
    ));
    server.push(Reply::new().text("from vllm"));
    let out = h
        .corral()
        .args(["run", "--json", "-m", "qwen3", "x"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let last = server.requests().last().unwrap().path.clone();
    assert_eq!(last, "/v1/chat/completions");
    let meta = std::fs::read_dir(h.cache_dir().join("corral/agents"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .any(|text| text.contains("vllm:qwen3"));
    assert!(meta, "the session records the resolved spec");
}

#[tokio::test]
async fn unknown_specs_and_the_help_name_every_backend() {
    let h = Harness::new();
    let out = h.corral().args(["run", "-m", "a:b:c", "x"]).run().await;
    assert_eq!(out.code, Some(2), "{out:?}");
    let help = h.corral().args(["run", "--help"]).run().await;
    assert_eq!(help.code, Some(0), "{help:?}");
    let forms = [
        "ollama:",
        "openai:",
        "mlx:",
        "llamacpp:",
        "lmstudio:",
        "vllm:",
        "gguf:",
        "claude",
        "codex",
        "acp:opencode",
        "acp:cmd=",
    ];
    for form in forms {
        assert!(out.stderr.contains(form), "{form} not in {}", out.stderr);
        assert!(help.stdout.contains(form), "{form} not in the help");
    }
    assert!(out.stderr.contains("bare model name"), "{}", out.stderr);
}
