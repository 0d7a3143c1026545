//! A scriptable fake model server on 127.0.0.1: Ollama (`/api/*`) and OpenAI (`/v1/*`) routes.
//! Chat requests of either format take the next queued [`Reply`]; every request is recorded.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::response::Response;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::reply::Action;
pub use super::reply::{Format, Reply};

/// One request as received.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    /// Header names are lower-case.
    pub headers: Vec<(String, String)>,
    /// Parsed JSON; `Null` if the body was empty, a JSON string if it was not JSON.
    pub body: Value,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A model the server lists (`/api/tags`, `/v1/models`) and describes (`/api/show`).
#[derive(Clone, Debug)]
pub struct ModelInfo {
    pub name: String,
    pub capabilities: Vec<String>,
    pub context_length: u64,
}

impl ModelInfo {
    pub fn new(name: &str, capabilities: &[&str], context_length: u64) -> ModelInfo {
        ModelInfo {
            name: name.to_owned(),
            capabilities: capabilities.iter().map(|c| (*c).to_owned()).collect(),
            context_length,
        }
    }
}

/// The model known before any `set_models`.
pub const DEFAULT_MODEL: &str = "fake-model";

#[derive(Default)]
struct Inner {
    queue: VecDeque<Reply>,
    requests: Vec<Recorded>,
    models: Vec<ModelInfo>,
    cancelled: usize,
    /// Per chat request: when it arrived, and when its whole body had been handed over.
    chat_times: Vec<(Instant, Option<Instant>)>,
}

type Shared = Arc<Mutex<Inner>>;

fn lock(state: &Shared) -> MutexGuard<'_, Inner> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The running server; it stops accepting connections when dropped.
pub struct FakeModel {
    addr: SocketAddr,
    state: Shared,
    server: JoinHandle<()>,
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl FakeModel {
    pub async fn start() -> FakeModel {
        let state: Shared = Arc::new(Mutex::new(Inner {
            models: vec![ModelInfo::new(
                DEFAULT_MODEL,
                &["completion", "tools", "thinking"],
                32_768,
            )],
            ..Inner::default()
        }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("fake model: bind 127.0.0.1:0: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("fake model: local_addr: {e}"));
        // Long chat histories can exceed axum's default 2 MB body limit.
        let app = Router::new()
            .fallback(handle)
            .layer(DefaultBodyLimit::disable())
            .with_state(state.clone());
        let server = tokio::spawn(async move {
            // An accept error ends the server; tests then see connection errors.
            // Like any real model server: no Nagle delay between a reply's small chunks.
            use axum::serve::ListenerExt;
            let listener = listener.tap_io(|tcp| {
                let _ = tcp.set_nodelay(true);
            });
            let _ = axum::serve(listener, app).await;
        });
        FakeModel {
            addr,
            state,
            server,
        }
    }

    /// Ollama base, `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// OpenAI base, `http://127.0.0.1:PORT/v1`.
    pub fn openai_base(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Queue a reply (FIFO) for the next chat request of either format.
    pub fn push(&self, reply: Reply) {
        lock(&self.state).queue.push_back(reply);
    }

    /// Replies not yet taken.
    pub fn pending_replies(&self) -> usize {
        lock(&self.state).queue.len()
    }

    /// Every request received, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.state).requests.clone()
    }

    /// Bodies of `POST /api/chat` and `POST /v1/chat/completions`, in order.
    pub fn chat_requests(&self) -> Vec<Value> {
        lock(&self.state)
            .requests
            .iter()
            .filter(|r| is_chat_path(&r.path))
            .map(|r| r.body.clone())
            .collect()
    }

    /// Replace the model list (default: one `fake-model` with completion/tools/thinking, 32768).
    pub fn set_models(&self, models: Vec<ModelInfo>) {
        lock(&self.state).models = models;
    }

    /// Streamed replies whose client went away before the end.
    pub fn cancelled_streams(&self) -> usize {
        lock(&self.state).cancelled
    }

    /// True once at least `n` chat requests arrived; false on timeout.
    pub async fn wait_for_chat_requests(&self, n: usize, timeout: Duration) -> bool {
        self.wait_until(timeout, || self.chat_requests().len() >= n)
            .await
    }

    /// True once at least `n` streams were cancelled by their client; false on timeout.
    pub async fn wait_for_cancelled(&self, n: usize, timeout: Duration) -> bool {
        self.wait_until(timeout, || self.cancelled_streams() >= n)
            .await
    }

    /// Time from `since` to the arrival of the first chat request after it (for start-up
    /// benchmarks).
    pub fn first_byte_after(&self, since: Instant) -> Option<Duration> {
        lock(&self.state)
            .chat_times
            .iter()
            .find(|(arrived, _)| *arrived >= since)
            .map(|(arrived, _)| *arrived - since)
    }

    /// For each chat request after the first: how long after the previous reply's last byte
    /// it arrived — the client's own work between two model calls.
    pub fn turnarounds(&self) -> Vec<Duration> {
        let times = lock(&self.state).chat_times.clone();
        times
            .windows(2)
            .filter_map(|w| {
                w[0].1
                    .map(|finished| w[1].0.saturating_duration_since(finished))
            })
            .collect()
    }

    /// Per chat request that took a scripted reply, in the order the replies were taken: when
    /// it arrived, and when its whole body had been handed over (`None` while still streaming).
    pub fn chat_times(&self) -> Vec<(Instant, Option<Instant>)> {
        lock(&self.state).chat_times.clone()
    }

    async fn wait_until(&self, timeout: Duration, cond: impl Fn() -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if cond() {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

fn is_chat_path(path: &str) -> bool {
    path == "/api/chat" || path == "/v1/chat/completions"
}

async fn handle(
    State(state): State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let arrived = Instant::now();
    let path = uri.path().to_owned();
    let body = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()))
    };
    lock(&state).requests.push(Recorded {
        method: method.to_string(),
        path: path.clone(),
        headers: headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: body.clone(),
    });
    if super::fake_gemini::is_gemini_path(&path) {
        let counter = state.clone();
        return super::fake_gemini::handle(
            &path,
            &body,
            || lock(&state).queue.pop_front(),
            move || lock(&counter).cancelled += 1,
        );
    }
    match (method.as_str(), path.as_str()) {
        ("POST", "/api/chat") => chat(&state, Format::Ollama, &body, arrived),
        ("POST", "/v1/chat/completions") => chat(&state, Format::OpenAi, &body, arrived),
        ("POST", "/api/show") => show(&state, &body),
        ("GET", "/api/tags") => tags(&state),
        ("GET", "/v1/models") => openai_models(&state),
        ("POST", "/v1/responses") => responses::respond(&state, &body, arrived),
        ("GET", "/health") => json_response(200, &json!({"status": "ok"})),
        ("GET", "/") => text_response(200, "Ollama is running"),
        (m, p) if super::fake_anthropic::handles(m, p) => {
            super::fake_anthropic::respond(m, p, &body, || {
                chat(&state, Format::OpenAi, &body, arrived)
            })
        }
        _ => json_response(
            404,
            &json!({"error": format!("fake model: no route {method} {path}")}),
        ),
    }
}

fn chat(state: &Shared, format: Format, body: &Value, arrived: Instant) -> Response {
    let model = body["model"].as_str().unwrap_or(DEFAULT_MODEL).to_owned();
    // Ollama preload: empty `messages` loads the model and takes no scripted reply.
    if format == Format::Ollama && body["messages"].as_array().is_some_and(Vec::is_empty) {
        let line = json!({"model": model, "created_at": "2026-01-01T00:00:00.000000Z",
            "message": {"role": "assistant", "content": ""}, "done_reason": "load", "done": true});
        let mut resp = text_response(200, &format!("{line}\n"));
        set_header(&mut resp, "content-type", "application/x-ndjson");
        return resp;
    }
    // A side call for a session title (opencode makes one, racing its real turn): answered
    // at once, without taking a scripted reply.
    if format == Format::OpenAi && is_title_request(body) {
        return title_reply(&model);
    }
    let (reply, index) = {
        let mut inner = lock(state);
        let text = body.to_string();
        let position = inner.queue.iter().position(|r| {
            r.only_for
                .as_deref()
                .is_none_or(|needle| text.contains(needle))
        });
        let Some(reply) = position.and_then(|i| inner.queue.remove(i)) else {
            return json_response(500, &json!({"error": "fake model: no scripted reply left"}));
        };
        inner.chat_times.push((arrived, None));
        (reply, inner.chat_times.len() - 1)
    };
    let mut resp = if let Some((code, body)) = &reply.status {
        lock(state).chat_times[index].1 = Some(Instant::now());
        let mut r = text_response(*code, body);
        set_header(&mut r, "content-type", "application/json");
        r
    } else {
        let (tx, rx) = mpsc::channel::<Result<Bytes, io::Error>>(1);
        let actions = reply.render(format, &model);
        tokio::spawn(write_body(
            actions,
            reply.chunk_delay,
            tx,
            state.clone(),
            index,
        ));
        let stream = futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        });
        let mut r = Response::new(Body::from_stream(stream));
        let content_type = match format {
            Format::Ollama => "application/x-ndjson",
            Format::OpenAi => "text/event-stream",
        };
        set_header(&mut r, "content-type", content_type);
        if let Some(code) = reply.stream_status {
            *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
        }
        if format == Format::OpenAi {
            set_header(&mut r, "cache-control", "no-cache");
        }
        r
    };
    for (k, v) in &reply.headers {
        set_header(&mut resp, k, v);
    }
    resp
}

/// Feeds the body channel; counts a cancel when the receiver (hyper's body) is gone early.
async fn write_body(
    actions: Vec<Action>,
    delay: Option<Duration>,
    tx: mpsc::Sender<Result<Bytes, io::Error>>,
    state: Shared,
    index: usize,
) {
    let cancelled = || lock(&state).cancelled += 1;
    let mut first = true;
    for action in actions {
        match action {
            Action::Send(bytes) => {
                if let (false, Some(d)) = (first, delay)
                    && !sleep_unless_closed(&tx, d).await
                {
                    return cancelled();
                }
                first = false;
                if tx.send(Ok(bytes)).await.is_err() {
                    return cancelled();
                }
            }
            Action::Sleep(d) => {
                if !sleep_unless_closed(&tx, d).await {
                    return cancelled();
                }
            }
            Action::Repeat(bytes) => loop {
                if tx.send(Ok(bytes.clone())).await.is_err() {
                    return cancelled();
                }
            },
            Action::Fail => {
                let _ = tx
                    .send(Err(io::Error::other("fake model: scripted disconnect")))
                    .await;
                return;
            }
        }
    }
    // Wait until hyper took the last chunk; a client gone before that counts as a cancel.
    if tx.reserve().await.is_err() {
        cancelled();
    }
    lock(&state).chat_times[index].1 = Some(Instant::now());
}

/// Sleeps `d`; false if the body was dropped (client gone) meanwhile.
async fn sleep_unless_closed(tx: &mpsc::Sender<Result<Bytes, io::Error>>, d: Duration) -> bool {
    tokio::select! {
        () = tokio::time::sleep(d) => true,
        () = tx.closed() => false,
    }
}

/// A tool-less request whose system prompt asks for a title.
fn is_title_request(body: &Value) -> bool {
    let no_tools = body["tools"].as_array().is_none_or(Vec::is_empty);
    let system = body["messages"][0]["content"].to_string().to_lowercase();
    no_tools && system.contains("title") && system.contains("generat")
}

fn title_reply(model: &str) -> Response {
    let chunk = json!({"id": "title", "object": "chat.completion.chunk", "model": model,
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": "A title"},
                     "finish_reason": "stop"}]});
    let mut resp = text_response(200, &format!("data: {chunk}\n\ndata: [DONE]\n\n"));
    set_header(&mut resp, "content-type", "text/event-stream");
    resp
}

fn show(state: &Shared, body: &Value) -> Response {
    let name = body["model"]
        .as_str()
        .or(body["name"].as_str())
        .unwrap_or("");
    let found = lock(state)
        .models
        .iter()
        .find(|m| model_matches(&m.name, name))
        .cloned();
    let Some(m) = found else {
        return json_response(404, &json!({"error": format!("model '{name}' not found")}));
    };
    json_response(
        200,
        &json!({
            "license": "",
            "modelfile": format!("FROM {}\n", m.name),
            "parameters": "",
            "template": "{{ .Prompt }}",
            "details": details(),
            "model_info": {
                "general.architecture": "llama",
                "general.parameter_count": 8_030_261_248_u64,
                "llama.context_length": m.context_length,
                "llama.embedding_length": 4096,
            },
            "capabilities": m.capabilities,
            "modified_at": "2026-01-01T00:00:00Z",
        }),
    )
}

/// Ollama treats `name` and `name:latest` as the same model.
fn model_matches(known: &str, asked: &str) -> bool {
    let norm = |s: &str| {
        if s.contains(':') {
            s.to_owned()
        } else {
            format!("{s}:latest")
        }
    };
    norm(known) == norm(asked)
}

fn details() -> Value {
    json!({"parent_model": "", "format": "gguf", "family": "llama", "families": ["llama"],
           "parameter_size": "8.0B", "quantization_level": "Q4_K_M"})
}

fn tags(state: &Shared) -> Response {
    let models: Vec<Value> = lock(state)
        .models
        .iter()
        .map(|m| {
            json!({"name": m.name, "model": m.name, "modified_at": "2026-01-01T00:00:00Z",
                   "size": 4_920_753_328_u64,
                   "digest": "365c0bd3c000a25d28ddbf732fe1c6add414de7275464c4e4d1c3b5fcb5d8ad1",
                   "details": details(), "capabilities": m.capabilities})
        })
        .collect();
    json_response(200, &json!({ "models": models }))
}

fn openai_models(state: &Shared) -> Response {
    let data: Vec<Value> = lock(state)
        .models
        .iter()
        .map(|m| json!({"id": m.name, "object": "model", "created": 1_767_225_600, "owned_by": "fake"}))
        .collect();
    json_response(200, &json!({"object": "list", "data": data}))
}

fn text_response(code: u16, body: &str) -> Response {
    let mut r = Response::new(Body::from(body.to_owned()));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    set_header(&mut r, "content-type", "text/plain; charset=utf-8");
    r
}

fn json_response(code: u16, body: &Value) -> Response {
    let mut r = text_response(code, &body.to_string());
    set_header(&mut r, "content-type", "application/json");
    r
}

fn set_header(resp: &mut Response, name: &str, value: &str) {
    let name = HeaderName::from_bytes(name.as_bytes())
        .unwrap_or_else(|e| panic!("fake model: bad header name {name:?}: {e}"));
    let value = HeaderValue::from_str(value)
        .unwrap_or_else(|e| panic!("fake model: bad header value {value:?}: {e}"));
    resp.headers_mut().insert(name, value);
}

#[path = "fake_responses.rs"]
mod responses;
#[cfg(test)]
mod tests;
