//! Self-tests of the fake model server, over real HTTP with reqwest.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};

use super::{FakeModel, ModelInfo, Reply};

fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

async fn post(url: &str, body: Value) -> reqwest::Response {
    client().post(url).json(&body).send().await.unwrap()
}

/// SSE `data:` payloads of a complete body.
fn sse_data(body: &str) -> Vec<String> {
    assert!(
        body.ends_with("\n\n"),
        "SSE body must end with a blank line: {body:?}"
    );
    body.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            e.strip_prefix("data: ")
                .unwrap_or_else(|| panic!("not a data event: {e:?}"))
                .to_owned()
        })
        .collect()
}

#[tokio::test]
async fn openai_split_tool_call_usage_and_done() {
    let fake = FakeModel::start().await;
    fake.push(
        Reply::new()
            .reasoning("hmm")
            .text("Hel")
            .text("lo")
            .tool_call_split("call_1", "read_file", &[r#"{"pa"#, r#"th":"a.txt"}"#])
            .usage(12, 5),
    );
    let url = format!("{}/chat/completions", fake.openai_base());
    let resp = post(&url, json!({"model": "m1", "stream": true, "messages": []})).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let data = sse_data(&resp.text().await.unwrap());
    assert_eq!(data.last().unwrap(), "[DONE]");
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    for c in &chunks {
        assert_eq!(c["id"], "chatcmpl-fake");
        assert_eq!(c["object"], "chat.completion.chunk");
        assert_eq!(c["model"], "m1");
        assert!(c["created"].is_u64());
    }
    let deltas: Vec<&Value> = chunks
        .iter()
        .filter_map(|c| c["choices"].get(0))
        .map(|c| &c["delta"])
        .collect();
    assert_eq!(deltas[0], &json!({"role": "assistant", "content": ""}));
    assert_eq!(deltas[1], &json!({"reasoning_content": "hmm"}));
    assert_eq!(deltas[2], &json!({"content": "Hel"}));
    assert_eq!(deltas[3], &json!({"content": "lo"}));
    assert_eq!(
        deltas[4],
        &json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                "function": {"name": "read_file", "arguments": ""}}]})
    );
    assert_eq!(
        deltas[5],
        &json!({"tool_calls": [{"index": 0, "function": {"arguments": r#"{"pa"#}}]})
    );
    assert_eq!(
        deltas[6],
        &json!({"tool_calls": [{"index": 0, "function": {"arguments": r#"th":"a.txt"}"#}}]})
    );
    let finish = &chunks[7]["choices"][0];
    assert_eq!(finish["delta"], json!({}));
    assert_eq!(finish["finish_reason"], "tool_calls");
    let usage = chunks.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(
        usage["usage"],
        json!({"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17})
    );
    assert_eq!(chunks.len(), 9);
}

#[tokio::test]
async fn openai_reasoning_field_keepalive_error_and_garbage() {
    let fake = FakeModel::start().await;
    fake.push(
        Reply::new()
            .reasoning_field("reasoning")
            .keepalive()
            .reasoning("r")
            .garbage("{not json")
            .error_mid_stream("boom")
            .no_done(),
    );
    let url = format!("{}/chat/completions", fake.openai_base());
    let body = post(&url, json!({"model": "m"}))
        .await
        .text()
        .await
        .unwrap();
    let events: Vec<&str> = body.split("\n\n").filter(|e| !e.is_empty()).collect();
    assert!(
        events[0].starts_with("data: ") && events[0].contains(r#""role":"assistant""#),
        "{body}"
    );
    assert_eq!(events[1], ": keepalive 1/2");
    assert!(events[2].contains(r#""delta":{"reasoning":"r"}"#), "{body}");
    assert_eq!(events[3], "data: {not json");
    assert_eq!(
        events[4],
        r#"data: {"error":{"message":"boom","type":"server_error"}}"#
    );
    assert_eq!(
        events.len(),
        5,
        "no finish and no [DONE] with no_done: {body}"
    );
}

#[tokio::test]
async fn ollama_ndjson_lines_and_done_line() {
    let fake = FakeModel::start().await;
    fake.push(
        Reply::new()
            .reasoning("think")
            .text("Hi")
            .tool_call_split("call_1", "read_file", &[r#"{"pa"#, r#"th":"a.txt"}"#])
            .tool_call("call_2", "bad", "{oops")
            .usage(26, 282),
    );
    let resp = post(
        &format!("{}/api/chat", fake.base_url()),
        json!({"model": "qwen3", "messages": [{"role": "user", "content": "x"}]}),
    )
    .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/x-ndjson");
    let text = resp.text().await.unwrap();
    assert!(text.ends_with('\n'));
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 5, "{text}");
    for l in &lines {
        assert_eq!(l["model"], "qwen3");
        assert!(l["created_at"].is_string());
        assert_eq!(l["message"]["role"], "assistant");
    }
    assert_eq!(lines[0]["message"]["thinking"], "think");
    assert_eq!(lines[0]["done"], false);
    assert_eq!(lines[1]["message"]["content"], "Hi");
    assert_eq!(
        lines[2]["message"]["tool_calls"],
        json!([{"id": "call_1", "function": {"index": 0, "name": "read_file", "arguments": {"path": "a.txt"}}}])
    );
    assert_eq!(
        lines[3]["message"]["tool_calls"][0]["function"]["arguments"],
        "{oops"
    );
    assert_eq!(lines[3]["message"]["tool_calls"][0]["function"]["index"], 1);
    let done = &lines[4];
    assert_eq!(done["done"], true);
    assert_eq!(done["done_reason"], "stop");
    assert_eq!(done["prompt_eval_count"], 26);
    assert_eq!(done["eval_count"], 282);
    assert!(done["total_duration"].as_u64().unwrap() > 1_000_000);
    assert!(done["eval_duration"].is_u64());
}

#[tokio::test]
async fn status_reply_with_body_and_header() {
    let fake = FakeModel::start().await;
    fake.push(
        Reply::new()
            .status(429, r#"{"error":{"message":"slow down"}}"#)
            .header("retry-after", "0"),
    );
    let resp = post(
        &format!("{}/chat/completions", fake.openai_base()),
        json!({"model": "m"}),
    )
    .await;
    assert_eq!(resp.status(), 429);
    assert_eq!(resp.headers()["retry-after"], "0");
    assert_eq!(resp.headers()["content-type"], "application/json");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body, json!({"error": {"message": "slow down"}}));
}

#[tokio::test]
async fn empty_queue_is_500_and_requests_are_recorded() {
    let fake = FakeModel::start().await;
    let resp = post(
        &format!("{}/api/chat", fake.base_url()),
        json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(resp.status(), 500);
    assert_eq!(
        resp.json::<Value>().await.unwrap(),
        json!({"error": "fake model: no scripted reply left"})
    );
    let tags: Value = client()
        .get(format!("{}/api/tags", fake.base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(tags["models"][0]["name"], "fake-model");
    assert!(tags["models"][0]["capabilities"].is_array());
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(
        (reqs[0].method.as_str(), reqs[0].path.as_str()),
        ("POST", "/api/chat")
    );
    assert_eq!(reqs[0].body["messages"][0]["content"], "hi");
    assert_eq!(reqs[0].header("Content-Type"), Some("application/json"));
    assert_eq!(
        (
            reqs[1].method.as_str(),
            reqs[1].path.as_str(),
            &reqs[1].body
        ),
        ("GET", "/api/tags", &Value::Null)
    );
    assert_eq!(fake.chat_requests().len(), 1);
    assert!(
        fake.wait_for_chat_requests(1, Duration::from_millis(10))
            .await
    );
    assert!(
        !fake
            .wait_for_chat_requests(2, Duration::from_millis(30))
            .await
    );
}

#[tokio::test]
async fn show_and_models() {
    let fake = FakeModel::start().await;
    fake.set_models(vec![ModelInfo::new(
        "qwen3:8b",
        &["completion", "tools"],
        40_960,
    )]);
    let show: Value = post(
        &format!("{}/api/show", fake.base_url()),
        json!({"model": "qwen3:8b"}),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(show["model_info"]["llama.context_length"], 40_960);
    assert_eq!(show["model_info"]["general.architecture"], "llama");
    assert_eq!(show["capabilities"], json!(["completion", "tools"]));
    assert_eq!(show["parameters"], "");
    let missing = post(
        &format!("{}/api/show", fake.base_url()),
        json!({"model": "x"}),
    )
    .await;
    assert_eq!(missing.status(), 404);
    assert_eq!(
        missing.json::<Value>().await.unwrap(),
        json!({"error": "model 'x' not found"})
    );
    let list: Value = client()
        .get(format!("{}/models", fake.openai_base()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list["object"], "list");
    assert_eq!(list["data"][0]["id"], "qwen3:8b");
}

#[tokio::test]
async fn disconnect_is_a_client_error() {
    let fake = FakeModel::start().await;
    fake.push(Reply::new().text("partial").disconnect());
    let resp = post(
        &format!("{}/chat/completions", fake.openai_base()),
        json!({"model": "m"}),
    )
    .await;
    assert_eq!(resp.status(), 200);
    let mut stream = resp.bytes_stream();
    let mut got = Vec::new();
    let mut error = None;
    while let Some(item) = stream.next().await {
        match item {
            Ok(b) => got.extend_from_slice(&b),
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    assert!(
        error.is_some(),
        "expected a body error, got clean end: {}",
        String::from_utf8_lossy(&got)
    );
    assert!(String::from_utf8_lossy(&got).contains("partial"));
    assert_eq!(fake.cancelled_streams(), 0);
}

#[tokio::test]
async fn truncate_ends_cleanly_and_client_drop_counts_as_cancel() {
    let fake = FakeModel::start().await;
    fake.push(Reply::new().text("a").truncate().text("never"));
    fake.push(
        Reply::new()
            .text("a")
            .stall(Duration::from_secs(30))
            .text("b"),
    );
    let body = post(
        &format!("{}/api/chat", fake.base_url()),
        json!({"model": "m"}),
    )
    .await
    .text()
    .await
    .unwrap();
    assert_eq!(body.lines().count(), 1, "{body}");
    assert!(!body.contains("done\":true"));

    let resp = post(
        &format!("{}/api/chat", fake.base_url()),
        json!({"model": "m"}),
    )
    .await;
    let mut stream = resp.bytes_stream();
    let first = stream.next().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("\"a\""));
    drop(stream);
    assert!(
        fake.wait_for_cancelled(1, Duration::from_secs(5)).await,
        "cancel not seen"
    );
    assert_eq!(fake.cancelled_streams(), 1);
}
