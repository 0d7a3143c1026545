//! Helpers of the attack tests: requests as a given token, raw HTTP with any headers, and
//! WebSocket connections with chosen headers.

use std::time::Duration;

use futures_util::StreamExt;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::support::server::{Server, TEST_SECRET};

pub type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A token of `sub` valid for `ttl`, signed with the test server's secret.
pub fn token_for(sub: &str, admin: bool, ttl: Duration) -> String {
    let role = if admin {
        corral::ServerRole::Admin
    } else {
        corral::ServerRole::User
    };
    corral::Auth::new(TEST_SECRET.as_bytes())
        .unwrap()
        .mint(sub, role, ttl)
        .unwrap()
}

/// A REST call as `token`: the status and the JSON body (`Null` if none).
pub async fn call(
    server: &Server,
    token: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut request = reqwest::Client::new()
        .request(method, format!("{}{path}", server.base))
        .bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// `POST /api/v1/sessions` as `token`.
pub async fn create(server: &Server, token: &str, body: Value) -> (StatusCode, Value) {
    call(server, token, Method::POST, "/api/v1/sessions", Some(body)).await
}

/// A session body on the fake model at `base` (OpenAI wire) in `cwd`, plus `extra`.
pub fn session_body(cwd: &std::path::Path, base: &str, extra: Value) -> Value {
    let mut body = json!({"cwd": cwd, "model": "llamacpp:fake-model", "base_url": base});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    body
}

/// One raw HTTP/1.1 request: the status line's code, the header block and the body.
pub async fn raw(server: &Server, head: &str) -> (u16, String, String) {
    let addr = server.base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut response))
        .await
        .expect("no complete response within 10 s")
        .unwrap();
    let response = String::from_utf8_lossy(&response).into_owned();
    let status = response
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {response}"));
    let (headers, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    (status, headers.to_ascii_lowercase(), body.to_string())
}

/// A WebSocket upgrade with extra headers; `Err` carries the HTTP status of a refusal.
pub async fn ws_connect(url: &str, headers: &[(&str, &str)]) -> Result<Ws, u16> {
    let mut request = url.into_client_request().unwrap();
    for (name, value) in headers {
        request.headers_mut().insert(
            reqwest::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok((ws, _)) => Ok(ws),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            Err(response.status().as_u16())
        }
        Err(e) => panic!("WebSocket connect: {e}"),
    }
}

/// The first text message, as JSON.
pub async fn first_message(ws: &mut Ws) -> Value {
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(20), ws.next())
            .await
            .expect("no message within 20 s")
            .expect("stream ended")
            .unwrap();
        match frame {
            Message::Text(text) => return serde_json::from_str(text.as_str()).unwrap(),
            Message::Close(frame) => panic!("closed: {frame:?}"),
            _ => {}
        }
    }
}

/// The close frame's code and reason, waiting at most `within`; text messages are skipped.
pub async fn close_frame(ws: &mut Ws, within: Duration) -> (u16, String) {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let frame = tokio::time::timeout_at(deadline, ws.next())
            .await
            .unwrap_or_else(|_| panic!("the connection was not closed within {within:?}"));
        match frame {
            Some(Ok(Message::Close(Some(frame)))) => {
                return (u16::from(frame.code), frame.reason.to_string());
            }
            Some(Ok(Message::Close(None))) | None => panic!("closed without a code"),
            Some(Err(e)) => panic!("{e}"),
            Some(Ok(_)) => {}
        }
    }
}

/// Replaces every occurrence of `id` so two answers about different ids compare.
pub fn without(value: &Value, id: &str) -> String {
    value.to_string().replace(id, "<ID>")
}
