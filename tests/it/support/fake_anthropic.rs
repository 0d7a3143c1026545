//! Anthropic Messages routes for the fake model server, for the claude CLI (wire-formats.md §4,
//! external-clis.md §1): `POST /v1/messages` takes the next scripted [`Reply`] like the other
//! chat routes and streams it as Anthropic SSE; `POST /v1/messages/count_tokens` and `HEAD /`
//! answer at once; side calls (a title asked for with a JSON schema, a summary) get an answer
//! of their own and leave the scripted queue alone.
//!
//! A reply is rendered as OpenAI SSE by the shared chat route and translated here, so stalls,
//! disconnects, status replies and cancel counting behave exactly as on the other routes.

use std::collections::VecDeque;
use std::io;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::fake_model::FakeModel;

/// The title a side call gets (as every string field of its schema).
pub const SIDE_TITLE: &str = "Fake title";

/// Whether this server answers `method path` here.
pub fn handles(method: &str, path: &str) -> bool {
    path.starts_with("/v1/messages") || (method == "HEAD" && path == "/")
}

/// Answers one request; `chat` takes the next scripted reply (rendered as OpenAI SSE).
pub fn respond(
    method: &str,
    path: &str,
    body: &Value,
    chat: impl FnOnce() -> Response,
) -> Response {
    match (method, path) {
        ("HEAD", "/") => plain(200, "application/json", String::new()),
        ("POST", "/v1/messages/count_tokens") => {
            let tokens = (body.to_string().len() / 4).max(1);
            plain(
                200,
                "application/json",
                json!({"input_tokens": tokens}).to_string(),
            )
        }
        ("POST", "/v1/messages") if is_side_call(body) => side_reply(body),
        ("POST", "/v1/messages") => translate(chat(), model_of(body)),
        _ => plain(
            404,
            "application/json",
            json!({"type": "error", "error": {"type": "not_found_error",
                "message": format!("fake anthropic: no route {method} {path}")}})
            .to_string(),
        ),
    }
}

/// A request that is not the conversation itself: structured output asked for with a JSON
/// schema, or a tool-less request whose instructions are about a title or a summary.
pub fn is_side_call(body: &Value) -> bool {
    if body.pointer("/output_config/format").is_some() {
        return true;
    }
    let no_tools = body["tools"].as_array().is_none_or(Vec::is_empty);
    let system = body["system"].to_string().to_lowercase();
    no_tools && (system.contains("title") || system.contains("summar"))
}

/// Bodies of the conversation's `POST /v1/messages` requests (side calls left out), in order.
pub fn message_requests(server: &FakeModel) -> Vec<Value> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path == "/v1/messages" && !is_side_call(&r.body))
        .map(|r| r.body)
        .collect()
}

/// Every text a request's messages carry (user and assistant turns, tool results), in order.
pub fn texts(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for message in body["messages"].as_array().into_iter().flatten() {
        collect_text(&message["content"], &mut out);
    }
    out
}

fn collect_text(content: &Value, out: &mut Vec<String>) {
    match content {
        Value::String(text) => out.push(text.clone()),
        Value::Array(blocks) => {
            for block in blocks {
                if let Some(text) = block["text"].as_str() {
                    out.push(text.to_owned());
                }
                if block["type"] == "tool_result" {
                    collect_text(&block["content"], out);
                }
            }
        }
        _ => {}
    }
}

fn model_of(body: &Value) -> String {
    body["model"].as_str().unwrap_or("fake-model").to_owned()
}

fn plain(code: u16, content_type: &str, body: String) -> Response {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut()
        .insert("content-type", HeaderValue::from_str(content_type).unwrap());
    r
}

/// An instance of a JSON schema, good enough for titles and small structured answers.
fn instance(schema: &Value) -> Value {
    if let Some(first) = schema["enum"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    match schema["type"].as_str().unwrap_or("object") {
        "string" => json!(SIDE_TITLE),
        "integer" | "number" => json!(1),
        "boolean" => json!(false),
        "array" => json!([]),
        "null" => Value::Null,
        _ => {
            let mut object = serde_json::Map::new();
            if let Some(properties) = schema["properties"].as_object() {
                for (key, property) in properties {
                    object.insert(key.clone(), instance(property));
                }
            }
            Value::Object(object)
        }
    }
}

fn side_reply(body: &Value) -> Response {
    let text = match body.pointer("/output_config/format/schema") {
        Some(schema) => instance(schema).to_string(),
        None => SIDE_TITLE.to_owned(),
    };
    let model = model_of(body);
    if body["stream"] != true {
        let message = json!({"id": "msg_fake_side", "type": "message", "role": "assistant",
            "model": model, "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 5}});
        return plain(200, "application/json", message.to_string());
    }
    let mut t = Translator::new(model);
    let mut out = t.start();
    out.extend(t.text_delta(&text));
    out.extend(t.finish());
    let body: String = out
        .into_iter()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .collect();
    plain(200, "text/event-stream", body)
}

/// Streams the OpenAI SSE body of `reply` as Anthropic SSE.
fn translate(reply: Response, model: String) -> Response {
    if reply.status() != StatusCode::OK {
        return reply;
    }
    let (mut parts, body) = reply.into_parts();
    parts.headers.insert(
        "content-type",
        HeaderValue::from_static("text/event-stream"),
    );
    let (tx, rx) = mpsc::channel::<Result<Bytes, io::Error>>(1);
    tokio::spawn(async move {
        let mut inner = body.into_data_stream();
        let mut t = Translator::new(model);
        let mut buf = String::new();
        let mut pending: VecDeque<Bytes> = t.start().into();
        loop {
            while let Some(chunk) = pending.pop_front() {
                if tx.send(Ok(chunk)).await.is_err() {
                    // The client went away: dropping `inner` tells the reply writer.
                    return;
                }
            }
            if t.done {
                return;
            }
            let next = tokio::select! {
                next = inner.next() => next,
                () = tx.closed() => return,
            };
            match next {
                Some(Ok(bytes)) => {
                    buf.push_str(&String::from_utf8_lossy(&bytes));
                    while let Some(end) = buf.find("\n\n") {
                        let event: String = buf.drain(..end + 2).collect();
                        pending.extend(t.openai_event(event.trim()));
                    }
                }
                Some(Err(e)) => {
                    let _ = tx.send(Err(io::Error::other(e.to_string()))).await;
                    return;
                }
                None => {
                    if t.finish_reason.is_some() {
                        pending.extend(t.finish());
                    }
                    t.done = true;
                }
            }
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    Response::from_parts(parts, Body::from_stream(stream))
}

#[derive(Clone, Copy, PartialEq)]
enum Open {
    Text,
    Thinking,
    Tool(u64),
}

/// OpenAI chunk → Anthropic events, one content block open at a time.
struct Translator {
    model: String,
    index: u64,
    open: Option<Open>,
    finish_reason: Option<String>,
    usage: Option<(u64, u64)>,
    done: bool,
}

fn sse(name: &str, data: &Value) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

impl Translator {
    fn new(model: String) -> Translator {
        Translator {
            model,
            index: 0,
            open: None,
            finish_reason: None,
            usage: None,
            done: false,
        }
    }

    fn start(&self) -> Vec<Bytes> {
        vec![sse(
            "message_start",
            &json!({"type": "message_start", "message": {"id": "msg_fake", "type": "message",
                "role": "assistant", "content": [], "model": self.model, "stop_reason": null,
                "stop_sequence": null, "usage": {"input_tokens": 10,
                "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
                "output_tokens": 1}}}),
        )]
    }

    /// Closes the open block unless it is `want`; opens `want` with `block` if needed.
    fn ensure(&mut self, want: Open, block: Value) -> Vec<Bytes> {
        if self.open == Some(want) {
            return Vec::new();
        }
        let mut out = self.close();
        out.push(sse(
            "content_block_start",
            &json!({"type": "content_block_start", "index": self.index, "content_block": block}),
        ));
        self.open = Some(want);
        out
    }

    fn close(&mut self) -> Vec<Bytes> {
        if self.open.take().is_none() {
            return Vec::new();
        }
        let out = vec![sse(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": self.index}),
        )];
        self.index += 1;
        out
    }

    fn delta(&self, delta: Value) -> Bytes {
        sse(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": self.index, "delta": delta}),
        )
    }

    fn text_delta(&mut self, text: &str) -> Vec<Bytes> {
        let mut out = self.ensure(Open::Text, json!({"type": "text", "text": ""}));
        out.push(self.delta(json!({"type": "text_delta", "text": text})));
        out
    }

    fn openai_event(&mut self, event: &str) -> Vec<Bytes> {
        if event.starts_with(':') {
            return vec![sse("ping", &json!({"type": "ping"}))];
        }
        let Some(data) = event.strip_prefix("data: ") else {
            return Vec::new();
        };
        if data == "[DONE]" {
            return self.finish();
        }
        let Ok(chunk) = serde_json::from_str::<Value>(data) else {
            // Scripted garbage stays garbage.
            return vec![Bytes::from(format!(
                "event: content_block_delta\ndata: {data}\n\n"
            ))];
        };
        if let Some(message) = chunk["error"]["message"].as_str() {
            return vec![sse(
                "error",
                &json!({"type": "error", "error": {"type": "api_error", "message": message}}),
            )];
        }
        if let Some(usage) = chunk["usage"].as_object() {
            let get = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or_default();
            self.usage = Some((get("prompt_tokens"), get("completion_tokens")));
        }
        let mut out = Vec::new();
        let Some(choice) = chunk["choices"].get(0) else {
            return out;
        };
        let delta = &choice["delta"];
        for field in ["reasoning_content", "reasoning", "thinking"] {
            if let Some(text) = delta[field].as_str().filter(|t| !t.is_empty()) {
                out.extend(self.ensure(
                    Open::Thinking,
                    json!({"type": "thinking", "thinking": "", "signature": ""}),
                ));
                out.push(self.delta(json!({"type": "thinking_delta", "thinking": text})));
                out.push(self.delta(json!({"type": "signature_delta", "signature": "fake-sig"})));
            }
        }
        if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
            out.extend(self.text_delta(text));
        }
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            let n = call["index"].as_u64().unwrap_or_default();
            if let Some(id) = call["id"].as_str() {
                let name = call["function"]["name"].as_str().unwrap_or_default();
                // A new call always gets a block of its own.
                out.extend(self.close());
                out.extend(self.ensure(
                    Open::Tool(n),
                    json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                ));
            }
            if let Some(args) = call["function"]["arguments"]
                .as_str()
                .filter(|a| !a.is_empty())
                && self.open == Some(Open::Tool(n))
            {
                out.push(self.delta(json!({"type": "input_json_delta", "partial_json": args})));
            }
        }
        if let Some(reason) = choice["finish_reason"].as_str() {
            self.finish_reason = Some(reason.to_owned());
        }
        out
    }

    fn finish(&mut self) -> Vec<Bytes> {
        if self.done {
            return Vec::new();
        }
        self.done = true;
        let mut out = self.close();
        let stop = match self.finish_reason.as_deref() {
            Some("tool_calls") => "tool_use",
            Some("length") => "max_tokens",
            Some("stop") | None => "end_turn",
            Some(other) => other,
        };
        let (input, output) = self.usage.unwrap_or((10, 5));
        out.push(sse(
            "message_delta",
            &json!({"type": "message_delta", "delta": {"stop_reason": stop,
                "stop_sequence": null}, "usage": {"input_tokens": input, "output_tokens": output}}),
        ));
        out.push(sse("message_stop", &json!({"type": "message_stop"})));
        out
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::{FakeModel, Reply};

    fn client() -> reqwest::Client {
        reqwest::Client::builder().no_proxy().build().unwrap()
    }

    /// `(event name, data)` of every SSE event in a complete body.
    fn events(body: &str) -> Vec<(String, Value)> {
        body.split("\n\n")
            .filter(|e| !e.trim().is_empty())
            .map(|e| {
                let (name, data) = e.split_once('\n').unwrap();
                let name = name.strip_prefix("event: ").unwrap().to_owned();
                let data = data.strip_prefix("data: ").unwrap();
                (name, serde_json::from_str(data).unwrap())
            })
            .collect()
    }

    #[tokio::test]
    async fn a_scripted_reply_streams_as_anthropic_messages_sse() {
        let fake = FakeModel::start().await;
        fake.push(
            Reply::new()
                .reasoning("hmm")
                .text("Hel")
                .text("lo")
                .tool_call_split("toolu_1", "Bash", &[r#"{"comm"#, r#"and":"ls"}"#])
                .usage(12, 5),
        );
        let url = format!("{}/v1/messages?beta=true", fake.base_url());
        let body = json!({"model": "m1", "stream": true, "max_tokens": 100,
            "tools": [{"name": "Bash"}], "messages": [{"role": "user", "content": "hi"}]});
        let resp = client().post(&url).json(&body).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["content-type"], "text/event-stream");
        let events = events(&resp.text().await.unwrap());
        let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        assert_eq!(events[0].1["message"]["model"], "m1");
        assert_eq!(events[1].1["content_block"]["type"], "thinking");
        assert_eq!(events[2].1["delta"]["thinking"], "hmm");
        assert_eq!(events[6].1["delta"]["text"], "Hel");
        assert_eq!(events[9].1["index"], 2);
        assert_eq!(events[9].1["content_block"]["id"], "toolu_1");
        let json: String = events[10..12]
            .iter()
            .map(|(_, d)| d["delta"]["partial_json"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(json, r#"{"command":"ls"}"#);
        assert_eq!(events[13].1["delta"]["stop_reason"], "tool_use");
        assert_eq!(events[13].1["usage"]["output_tokens"], 5);
        assert_eq!(fake.pending_replies(), 0);
    }

    #[tokio::test]
    async fn side_calls_count_tokens_and_head_leave_the_queue_alone() {
        let fake = FakeModel::start().await;
        fake.push(Reply::new().text("scripted"));
        let base = fake.base_url();
        let head = client().head(format!("{base}/")).send().await.unwrap();
        assert_eq!(head.status(), 200);
        let count: Value = client()
            .post(format!("{base}/v1/messages/count_tokens"))
            .json(&json!({"model": "m1", "messages": [{"role": "user", "content": "hello"}]}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert!(count["input_tokens"].as_u64().unwrap() > 0);
        let schema = json!({"type": "object", "properties": {"title": {"type": "string"},
            "isNew": {"type": "boolean"}}, "required": ["title"]});
        let title: Value = client()
            .post(format!("{base}/v1/messages"))
            .json(&json!({"model": "m1", "max_tokens": 50, "messages": [],
                "output_config": {"format": {"type": "json_schema", "schema": schema}}}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let text = title["content"][0]["text"].as_str().unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(text).unwrap(),
            json!({"title": super::SIDE_TITLE, "isNew": false})
        );
        assert_eq!(fake.pending_replies(), 1);
        assert!(super::message_requests(&fake).is_empty());
    }
}
