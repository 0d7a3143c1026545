//! Helpers of the REST tests: an HTTP client holding a token, and a minimal SSE reader.

use std::time::Duration;

use futures_util::StreamExt;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::server::Server;
use crate::support::{FakeModel, Harness};

pub struct Api {
    pub server: Server,
    pub http: reqwest::Client,
    /// `alice`: a plain user, unless started with `start_admin`.
    pub token: String,
}

impl Api {
    pub async fn start(h: &Harness) -> Api {
        Api::start_as(h, false).await
    }

    /// `alice` with an admin token: the host's owner (bypass, any directory).
    pub async fn start_admin(h: &Harness) -> Api {
        Api::start_as(h, true).await
    }

    async fn start_as(h: &Harness, admin: bool) -> Api {
        let server = Server::start(h, &[]).await;
        let token = server.token("alice", admin);
        Api {
            server,
            http: reqwest::Client::new(),
            token,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.server.base)
    }

    /// A request as `token` (none: anonymous); the status and the JSON body (Null if none).
    pub async fn call_as(
        &self,
        token: Option<&str>,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut request = self.http.request(method, self.url(path));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let text = response.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        self.call_as(Some(&self.token), method, path, body).await
    }

    /// Opens a session on the fake model; returns its id.
    pub async fn create(&self, h: &Harness, model: &FakeModel, extra: Value) -> String {
        let mut body = json!({
            "cwd": h.work(), "model": "llamacpp:fake-model", "base_url": model.openai_base(),
        });
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let (status, session) = self
            .call(Method::POST, "/api/v1/sessions", Some(body))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{session}");
        assert_eq!(session["owner"], "alice");
        session["id"].as_str().unwrap().to_owned()
    }

    pub async fn send(&self, id: &str, text: &str) -> (StatusCode, Value) {
        let path = format!("/api/v1/sessions/{id}/messages");
        self.call(Method::POST, &path, Some(json!({ "text": text })))
            .await
    }

    /// Polls the session until `done` holds of it.
    pub async fn wait_session(&self, id: &str, done: impl Fn(&Value) -> bool) -> Value {
        let path = format!("/api/v1/sessions/{id}");
        for _ in 0..300 {
            let (status, session) = self.call(Method::GET, &path, None).await;
            assert_eq!(status, StatusCode::OK, "{session}");
            if done(&session) {
                return session;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("session {id} never reached the expected state");
    }

    pub async fn wait_idle_after(&self, id: &str, turn: u64) -> Value {
        self.wait_session(id, |s| s["status"] == "idle" && s["turn"] == turn)
            .await
    }
}

pub fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or("")
}

type Body = std::pin::Pin<Box<dyn futures_util::Stream<Item = reqwest::Result<bytes::Bytes>>>>;

/// A minimal SSE reader: (id, event, data) per event, comments skipped.
pub struct Sse {
    body: Body,
    buf: String,
}

impl Sse {
    pub async fn open(api: &Api, channel: &str, last_event_id: Option<&str>) -> Sse {
        let mut request = api
            .http
            .get(api.url(&format!("/api/v1/events?channel={channel}")))
            .bearer_auth(&api.token);
        if let Some(id) = last_event_id {
            request = request.header("Last-Event-ID", id);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let kind = response.headers()["content-type"].to_str().unwrap();
        assert!(kind.starts_with("text/event-stream"), "{kind}");
        Sse {
            body: Box::pin(response.bytes_stream()),
            buf: String::new(),
        }
    }

    pub async fn next(&mut self) -> (u64, String, Value) {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let (mut id, mut event, mut data) = (None, String::new(), String::new());
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.trim().parse::<u64>().unwrap());
                    } else if let Some(v) = line.strip_prefix("event:") {
                        event = v.trim().to_owned();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                    }
                }
                if let Some(id) = id {
                    return (id, event, serde_json::from_str(&data).unwrap());
                }
                continue;
            }
            let chunk = tokio::time::timeout(Duration::from_secs(20), self.body.next())
                .await
                .expect("no SSE event within 20 s")
                .expect("the SSE stream ended")
                .unwrap();
            self.buf
                .push_str(&String::from_utf8_lossy(&chunk).replace("\r\n", "\n"));
        }
    }

    /// Events until (and with) the first of `kind`.
    pub async fn until(&mut self, kind: &str) -> Vec<(u64, String, Value)> {
        let mut seen = Vec::new();
        loop {
            let event = self.next().await;
            let last = event.1 == kind;
            seen.push(event);
            if last {
                return seen;
            }
        }
    }
}

pub fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

/// Every process below `root`, from /proc's parent links.
pub fn descendants(root: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        if let Some(ppid) = after.split_whitespace().nth(1).and_then(|p| p.parse().ok()) {
            parents.push((pid, ppid));
        }
    }
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parents
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    found.remove(0);
    found
}
