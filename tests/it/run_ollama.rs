//! `corral run` against Ollama's native API (NDJSON): window sizing, whole tool calls,
//! errors mid-stream, and finding a model when none is named.

use serde_json::json;

use crate::common::*;
use crate::support::{FakeModel, Harness, ModelInfo, Reply};

#[tokio::test]
async fn ndjson_stream_with_thinking_and_the_window_sized_from_api_show() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.set_models(vec![ModelInfo::new(
        "fake-model",
        &["completion", "tools", "thinking"],
        40960,
    )]);
    server.push(
        Reply::new()
            .reasoning("hmm")
            .text("It is ")
            .text("22°C")
            .usage(26, 282),
    );
    let out = ollama_run(&h, &server, "weather?").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_well_formed(&out);
    assert_eq!(authoritative(&out, "thought"), ["hmm"]);
    assert_eq!(authoritative(&out, "assistant_text"), ["It is 22°C"]);
    let result = result_of(&out);
    assert_eq!(result["usage"]["inputTokens"], 26);
    assert_eq!(result["usage"]["outputTokens"], 282);

    let shows: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.path == "/api/show")
        .collect();
    assert_eq!(shows.len(), 1);
    let request = &server.chat_requests()[0];
    assert_eq!(request["truncate"], false);
    assert_eq!(request["shift"], false);
    assert_eq!(request["stream"], true);
    assert_eq!(request["think"], true);
    assert_eq!(
        request["options"]["num_ctx"], 32768,
        "min(trained 40960, 32768)"
    );
    assert!(request["tools"].as_array().is_some_and(|t| !t.is_empty()));
}

#[tokio::test]
async fn configured_num_ctx_wins_and_small_trained_windows_are_kept() {
    let h = Harness::new();
    h.write_config("[providers.ollama]\nnum_ctx = 4096\n");
    let server = FakeModel::start().await;
    server.push(Reply::new().text("ok"));
    let out = ollama_run(&h, &server, "x").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(server.chat_requests()[0]["options"]["num_ctx"], 4096);

    let h = Harness::new();
    let server = FakeModel::start().await;
    server.set_models(vec![ModelInfo::new(
        "fake-model",
        &["completion", "tools"],
        8192,
    )]);
    server.push(Reply::new().text("ok"));
    let out = ollama_run(&h, &server, "x").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let request = &server.chat_requests()[0];
    assert_eq!(request["options"]["num_ctx"], 8192);
    assert!(request.get("think").is_none(), "no thinking capability");
}

#[tokio::test]
async fn whole_tool_calls_run_and_results_go_back_with_tool_name_and_id() {
    let h = Harness::new();
    std::fs::create_dir(h.work().join("src")).unwrap();
    std::fs::write(
        h.work().join("src/lib.rs"),
        "pub fn answer() -> u32 { 42 }\n",
    )
    .unwrap();
    let server = FakeModel::start().await;
    server.push(
        Reply::new()
            .tool_call("call_k3j9x0aa", "search_files", r#"{"query":"answer"}"#)
            .tool_call("call_b", "list_directory", r#"{"path":"src"}"#)
            .usage(50, 10),
    );
    server.push(Reply::new().text("Found it.").usage(90, 5));
    let out = ollama_run(&h, &server, "find answer").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let results = out.of_kind("tool_result");
    assert_eq!(results.len(), 2);
    assert!(
        results[0]["data"]["result"]["output"]
            .as_str()
            .unwrap()
            .contains("src/lib.rs:1")
    );
    assert!(
        results[1]["data"]["result"]["output"]
            .as_str()
            .unwrap()
            .contains("lib.rs")
    );
    assert_eq!(result_of(&out)["usage"]["inputTokens"], 140);

    let second = messages(&server, 1);
    let n = second.len();
    assert_eq!(second[n - 3]["role"], "assistant");
    assert_eq!(second[n - 3]["tool_calls"][0]["id"], "call_k3j9x0aa");
    assert_eq!(
        second[n - 3]["tool_calls"][0]["function"]["arguments"],
        json!({"query": "answer"}),
        "Ollama takes arguments as an object"
    );
    assert_eq!(second[n - 2]["role"], "tool");
    assert_eq!(second[n - 2]["tool_name"], "search_files");
    assert_eq!(second[n - 2]["tool_call_id"], "call_k3j9x0aa");
    assert_eq!(second[n - 1]["tool_name"], "list_directory");
}

#[tokio::test]
async fn an_error_line_mid_stream_ends_the_turn() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("par").error_mid_stream("out of memory"));
    let out = ollama_run(&h, &server, "x").run().await;
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        result_of(&out)["error"]
            .as_str()
            .unwrap()
            .contains("out of memory")
    );
}

#[tokio::test]
async fn invalid_json_lines_and_missing_done_are_reported() {
    for (reply, expected) in [
        (Reply::new().text("a").garbage("{oops"), "malformed"),
        (Reply::new().text("a").truncate(), "truncated"),
    ] {
        let h = Harness::new();
        let server = FakeModel::start().await;
        server.push(reply);
        let out = ollama_run(&h, &server, "x").run().await;
        assert_eq!(out.code, Some(1), "{out:?}");
        let error = result_of(&out)["error"].as_str().unwrap().to_owned();
        assert!(error.contains(expected), "{expected} not in {error}");
    }
}

#[tokio::test]
async fn a_model_the_server_does_not_have_fails_listing_what_it_has() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    let out = h
        .corral()
        .args([
            "run",
            "--json",
            "-m",
            "ollama:nope",
            "--base-url",
            &server.base_url(),
            "x",
        ])
        .run()
        .await;
    // Exit 1 as on the OpenAI wire (run_openai): the same failure, the same code.
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("not found") && out.stderr.contains("ollama pull nope"));
    assert!(
        out.stderr.contains("the server has: fake-model"),
        "{}",
        out.stderr
    );
    assert!(server.chat_requests().is_empty());
}

#[tokio::test]
async fn without_a_model_a_running_ollama_with_a_tool_model_is_used() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.set_models(vec![
        ModelInfo::new("chatty", &["completion"], 8192),
        ModelInfo::new("qwen3:8b", &["completion", "tools"], 40960),
    ]);
    server.push(Reply::new().text("hi"));
    let out = h
        .corral()
        .args(["run", "--json", "x"])
        .env(
            "OLLAMA_HOST",
            server.base_url().trim_start_matches("http://"),
        )
        .env(
            "CORRAL_TEST_PROBE_PORTS",
            crate::first_run::closed_probe_ports(),
        )
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(server.chat_requests()[0]["model"], "qwen3:8b");
    assert!(
        out.stderr.contains("no model named: using ollama:qwen3:8b"),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn without_a_model_or_a_usable_ollama_the_message_says_what_to_do() {
    let h = Harness::new();
    let closed = crate::first_run::closed_probe_ports();
    let server = FakeModel::start().await;
    server.set_models(vec![ModelInfo::new("chatty", &["completion"], 8192)]);
    let out = h
        .corral()
        .args(["run", "x"])
        .env("OLLAMA_HOST", server.base_url())
        .env("CORRAL_TEST_PROBE_PORTS", &closed)
        .run()
        .await;
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(
        out.stderr
            .contains("no running server has a model with the `tools` capability"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("chatty"));
    assert!(out.stderr.contains("scripts/setup"), "{}", out.stderr);

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = h
        .corral()
        .args(["run", "x"])
        .env("OLLAMA_HOST", format!("127.0.0.1:{port}"))
        .env("CORRAL_TEST_PROBE_PORTS", &closed)
        .run()
        .await;
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(
        out.stderr.contains("no model server answered at"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains(&format!("127.0.0.1:{port}")));
    assert!(out.stderr.contains("--model"));
}
