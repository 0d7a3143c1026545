//! `corral run` against an OpenAI-compatible server (SSE): streaming, tool calls assembled
//! from fragments, and every way the stream can go wrong.

use std::time::Duration;

use serde_json::json;

use crate::common::*;
use crate::support::{FakeModel, Harness, Reply};

#[tokio::test]
async fn streams_thoughts_text_and_usage_as_envelopes() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(
        Reply::new()
            .reasoning("Need a ")
            .reasoning("plan")
            .text("Hel")
            .text("lo")
            .usage(812, 41),
    );
    let out = openai_run(&h, &server, "say hello").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_well_formed(&out);
    assert_eq!(deltas(&out, "thought"), "Need a plan");
    assert_eq!(authoritative(&out, "thought"), ["Need a plan"]);
    assert_eq!(deltas(&out, "assistant_text"), "Hello");
    assert_eq!(authoritative(&out, "assistant_text"), ["Hello"]);
    assert_eq!(
        statuses(&out),
        ["starting", "idle", "working", "idle", "dead"]
    );
    let result = result_of(&out);
    assert_eq!(result["stopReason"], "end_turn");
    assert_eq!(result["usage"]["inputTokens"], 812);
    assert_eq!(result["usage"]["outputTokens"], 41);
    assert_eq!(result["usage"]["costUsd"], 0.0);
    assert_eq!(
        out.of_kind("user_text")[0]["data"]["content"]["text"],
        "say hello"
    );
    let kinds = out.kinds();
    let pos = |k: &str| kinds.iter().position(|x| x == k).unwrap();
    assert!(pos("turn_started") < pos("user_text") && pos("user_text") < pos("thought"));
    assert!(pos("usage") < pos("result"));

    let request = &server.chat_requests()[0];
    assert_eq!(request["stream"], true);
    assert_eq!(request["stream_options"]["include_usage"], true);
    assert!(request["max_tokens"].as_u64().unwrap() > 512, "{request}");
    let tools: Vec<&str> = request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"read_file") && tools.contains(&"search_files"));
    assert_eq!(request["messages"][0]["role"], "system");

    // Nothing but authoritative envelopes in the event log.
    let logs = h.event_logs();
    assert_eq!(logs.len(), 1);
    let logged = std::fs::read_to_string(&logs[0]).unwrap();
    assert!(logged.lines().count() < out.events().len());
    assert!(!logged.contains("\"delta\":true"));
}

#[tokio::test]
async fn reasoning_field_variant_becomes_thoughts_too() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(
        Reply::new()
            .reasoning_field("reasoning")
            .reasoning("mlx thinks")
            .keepalive()
            .text("ok"),
    );
    let out = openai_run(&h, &server, "x").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(authoritative(&out, "thought"), ["mlx thinks"]);
    assert_eq!(authoritative(&out, "assistant_text"), ["ok"]);
}

#[tokio::test]
async fn split_tool_call_is_assembled_run_and_answered() {
    let h = Harness::new();
    std::fs::write(h.work().join("a.txt"), "hello from a\n").unwrap();
    let server = FakeModel::start().await;
    // finish_reason "stop" although a call was made: local servers do this.
    server.push(
        Reply::new()
            .text("Let me read it.")
            .tool_call_split(
                "call_1",
                "read_file",
                &[r#"{"pa"#, r#"th": "a.t"#, r#"xt"}"#],
            )
            .finish("stop"),
    );
    server.push(Reply::new().text("It says hello."));
    let out = openai_run(&h, &server, "read a.txt").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");

    let uses = out.of_kind("tool_use");
    assert_eq!(uses.len(), 2, "announce + authoritative");
    assert_eq!(uses[0]["data"]["call"]["toolCallId"], "call_1");
    assert!(uses[0]["data"]["call"].get("rawInput").is_none());
    assert_eq!(
        uses[1]["data"]["call"]["rawInput"],
        json!({"path": "a.txt"})
    );
    assert_eq!(uses[1]["data"]["call"]["kind"], "read");
    let fragments: String = out
        .of_kind("tool_input_delta")
        .iter()
        .map(|e| e["data"]["partialJson"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(fragments, r#"{"path": "a.txt"}"#);
    let result = &out.of_kind("tool_result")[0]["data"];
    assert_eq!(result["update"]["status"], "completed");
    assert_eq!(result["result"]["success"], true);
    assert_eq!(result["result"]["tool"], "read_file");
    assert!(
        result["result"]["output"]
            .as_str()
            .unwrap()
            .contains("hello from a")
    );
    assert!(result["result"]["durationMs"].is_u64());
    assert_eq!(
        authoritative(&out, "assistant_text"),
        ["Let me read it.", "It says hello."]
    );

    let second = messages(&server, 1);
    let assistant = &second[second.len() - 2];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(assistant["tool_calls"][0]["id"], "call_1");
    assert_eq!(assistant["tool_calls"][0]["function"]["name"], "read_file");
    let args: serde_json::Value = serde_json::from_str(
        assistant["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(args, json!({"path": "a.txt"}));
    let tool = &second[second.len() - 1];
    assert_eq!(tool["role"], "tool");
    assert_eq!(tool["tool_call_id"], "call_1");
    assert!(tool["content"].as_str().unwrap().contains("hello from a"));
}

/// Issue 17: a native call named with another runtime's namespace (`functions.read_file`)
/// runs the tool it names; a namespaced name that is no tool is refused as unknown.
#[tokio::test]
async fn a_namespaced_tool_name_runs_the_tool_it_names_and_no_other() {
    let h = Harness::new();
    std::fs::write(h.work().join("a.txt"), "hello from a\n").unwrap();
    let server = FakeModel::start().await;
    server.push(
        Reply::new()
            .tool_call("call_1", "functions.read_file", r#"{"path": "a.txt"}"#)
            .tool_call("call_2", "functions.format_disk", r#"{}"#)
            .finish("tool_calls"),
    );
    server.push(Reply::new().text("Done."));
    let out = openai_run(&h, &server, "read a.txt").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_well_formed(&out);
    let results = out.of_kind("tool_result");
    assert_eq!(results.len(), 2, "{out:?}");
    let read = &results[0]["data"]["result"];
    assert_eq!(read["tool"], "read_file", "{read}");
    assert_eq!(read["success"], true, "{read}");
    assert!(read["output"].as_str().unwrap().contains("hello from a"));
    let unknown = &results[1]["data"]["result"];
    assert_eq!(unknown["success"], false, "{unknown}");
    assert!(
        unknown["error"]
            .as_str()
            .unwrap()
            .contains("unknown tool \"functions.format_disk\""),
        "{unknown}"
    );
    // The history the model sees next names the tool as corral ran it.
    let second = messages(&server, 1);
    let assistant = second
        .iter()
        .rev()
        .find(|m| m["role"] == "assistant")
        .unwrap();
    assert_eq!(assistant["tool_calls"][0]["function"]["name"], "read_file");
}

#[tokio::test]
async fn eof_without_finish_or_done_is_a_truncated_reply() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("partial ans").truncate());
    let out = openai_run(&h, &server, "x").run().await;
    assert_eq!(out.code, Some(1), "{out:?}");
    let result = result_of(&out);
    assert_eq!(result["stopReason"], "error");
    assert!(
        result["error"].as_str().unwrap().contains("truncated"),
        "{result}"
    );
    // What streamed is not lost.
    assert_eq!(authoritative(&out, "assistant_text"), ["partial ans"]);
    assert_eq!(statuses(&out).last().unwrap(), "dead");
}

#[tokio::test]
async fn a_finished_reply_without_done_is_accepted() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("whole").finish("stop").no_done());
    let out = openai_run(&h, &server, "x").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(authoritative(&out, "assistant_text"), ["whole"]);
}

#[tokio::test]
async fn errors_mid_stream_garbage_and_disconnects_end_the_turn_clearly() {
    let cases: [(Reply, &str); 3] = [
        (Reply::new().text("a").error_mid_stream("boom"), "boom"),
        (Reply::new().text("a").garbage("{not json"), "malformed"),
        (Reply::new().text("a").disconnect(), "broke mid-stream"),
    ];
    for (reply, expected) in cases {
        let h = Harness::new();
        let server = FakeModel::start().await;
        server.push(reply);
        let out = openai_run(&h, &server, "x").run().await;
        assert_eq!(out.code, Some(1), "{expected}: {out:?}");
        let result = result_of(&out);
        assert_eq!(result["stopReason"], "error");
        let error = result["error"].as_str().unwrap();
        assert!(error.contains(expected), "{expected} not in {error}");
        assert!(!out.of_kind("error").is_empty());
        assert_eq!(statuses(&out).last().unwrap(), "dead");
    }
}

#[tokio::test]
async fn rate_limits_and_server_errors_are_retried_visibly() {
    let h = Harness::new();
    h.write_config(FAST_RETRY);
    let server = FakeModel::start().await;
    server.push(
        Reply::new()
            .status(429, r#"{"error":{"message":"slow down"}}"#)
            .header("retry-after", "0"),
    );
    server.push(Reply::new().status(503, r#"{"error":"loading model"}"#));
    server.push(Reply::new().text("finally"));
    let out = openai_run(&h, &server, "x").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let notices: Vec<String> = out
        .of_kind("error")
        .iter()
        .map(|e| e["data"]["message"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(notices.len(), 2, "{notices:?}");
    // Retries are counted from 1; five attempts are four retries.
    assert!(notices[0].starts_with("retry 1/4") && notices[0].contains("slow down"));
    assert!(notices[1].starts_with("retry 2/4") && notices[1].contains("loading model"));
    let numbers: Vec<serde_json::Value> = out
        .of_kind("error")
        .iter()
        .map(|e| e["data"]["data"]["retry"].clone())
        .collect();
    assert_eq!(numbers[0]["number"], 1, "{numbers:?}");
    assert_eq!(numbers[1]["number"], 2, "{numbers:?}");
    assert_eq!(numbers[1]["of"], 4, "{numbers:?}");
    assert_eq!(server.chat_requests().len(), 3);
}

#[tokio::test]
async fn persistent_server_errors_give_up_after_the_last_attempt() {
    let h = Harness::new();
    h.write_config(FAST_RETRY);
    let server = FakeModel::start().await;
    for _ in 0..5 {
        server.push(Reply::new().status(500, r#"{"error":{"message":"kaput"}}"#));
    }
    let out = openai_run(&h, &server, "x").run().await;
    assert_eq!(out.code, Some(1), "{out:?}");
    let error = result_of(&out)["error"].as_str().unwrap().to_owned();
    assert!(
        error.contains("HTTP 500") && error.contains("kaput"),
        "{error}"
    );
    assert_eq!(server.chat_requests().len(), 5);
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    let h = Harness::new();
    h.write_config(FAST_RETRY);
    let server = FakeModel::start().await;
    server.push(Reply::new().status(400, r#"{"error":{"message":"bad field tools"}}"#));
    let out = openai_run(&h, &server, "x").run().await;
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        result_of(&out)["error"]
            .as_str()
            .unwrap()
            .contains("bad field tools")
    );
    assert_eq!(server.chat_requests().len(), 1);
}

#[tokio::test]
async fn a_stalled_stream_hits_the_idle_timeout() {
    let h = Harness::new();
    h.write_config("[timeouts]\nidle_secs = 0.5\n");
    let server = FakeModel::start().await;
    server.push(
        Reply::new()
            .text("a")
            .stall(Duration::from_secs(5))
            .text("b"),
    );
    let out = openai_run(&h, &server, "x").run().await;
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        result_of(&out)["error"]
            .as_str()
            .unwrap()
            .contains("idle timeout")
    );
}

#[tokio::test]
async fn a_refused_local_server_is_reported_at_once_not_retried() {
    let h = Harness::new();
    h.write_config(FAST_RETRY);
    // A port nothing listens on: bind, read the port, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = h
        .corral()
        .args(["run", "--json", "-m", "vllm:m", "--base-url"])
        .arg(format!("http://127.0.0.1:{port}/v1"))
        .arg("x")
        .run()
        .await;
    assert_eq!(out.code, Some(1), "{out:?}");
    let error = result_of(&out)["error"].as_str().unwrap().to_owned();
    assert!(
        error.contains(&format!(
            "no model server listens at http://127.0.0.1:{port} (connection refused)"
        )),
        "{error}"
    );
    // No retry can start a server: the final error only, no retry notices.
    assert_eq!(out.of_kind("error").len(), 1, "{out:?}");
}

#[tokio::test]
async fn openai_base_url_at_a_local_server_needs_no_key() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("local answer"));
    // The harness clears the environment: no OPENAI_API_KEY, only the base URL.
    let out = h
        .corral()
        .env("OPENAI_BASE_URL", server.openai_base())
        .args(["run", "--json", "-m", "openai:fake-model", "hi"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(authoritative(&out, "assistant_text"), ["local answer"]);
    assert_eq!(server.chat_requests().len(), 1);
}

#[tokio::test]
async fn openais_own_endpoint_without_a_key_is_refused_before_connecting() {
    let h = Harness::new();
    // OPENAI_BASE_URL unset: the real endpoint. Fails before any request is made.
    let out = h
        .corral()
        .args(["run", "--json", "-m", "openai:gpt-x", "hi"])
        .run()
        .await;
    assert_ne!(out.code, Some(0), "{out:?}");
    let text = format!("{}{}", out.stdout, out.stderr);
    assert!(
        text.contains("needs an API key for https://api.openai.com/v1: set OPENAI_API_KEY"),
        "{text}"
    );
    // The same endpoint named explicitly is held to the same rule.
    let out = h
        .corral()
        .args(["run", "--json", "-m", "openai:gpt-x", "--base-url"])
        .arg("https://api.openai.com/v1/")
        .arg("hi")
        .run()
        .await;
    assert_ne!(out.code, Some(0), "{out:?}");
    let text = format!("{}{}", out.stdout, out.stderr);
    assert!(text.contains("needs an API key"), "{text}");
}
