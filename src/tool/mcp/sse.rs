//! The 2024-11-05 HTTP+SSE transport, which rmcp no longer carries: a GET opens an event
//! stream whose first `endpoint` event names where to POST messages; replies and server
//! requests arrive as `message` events on the stream.

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::StreamExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::mpsc;

use crate::model::SseParser;

/// One event on the stream (a message) is capped at this size.
const MAX_EVENT: usize = 16 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum SseError {
    #[error("{0}")]
    Http(String),
}

pub struct LegacySse {
    client: reqwest::Client,
    endpoint: reqwest::Url,
    incoming: mpsc::Receiver<RxJsonRpcMessage<RoleClient>>,
    reader: tokio::task::JoinHandle<()>,
}

pub fn header_map(headers: &BTreeMap<String, String>) -> Result<HeaderMap, String> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|e| format!("{name}: {e}"))?;
        let value = HeaderValue::from_str(value).map_err(|e| format!("{name}: {e}"))?;
        map.insert(name, value);
    }
    Ok(map)
}

fn too_long() -> SseError {
    SseError::Http(format!("an SSE event over {MAX_EVENT} bytes"))
}

impl LegacySse {
    /// Opens the stream and waits (at most `timeout`) for the endpoint it names. The
    /// endpoint must be on the stream's own origin: a server cannot send corral's headers
    /// (a bearer token among them) anywhere else.
    pub async fn connect(
        url: &str,
        headers: HeaderMap,
        timeout: Duration,
    ) -> Result<LegacySse, SseError> {
        let http = |e: String| SseError::Http(e);
        let base = reqwest::Url::parse(url).map_err(|e| http(format!("{url}: {e}")))?;
        let client = reqwest::Client::builder()
            .default_headers(headers)
            .connect_timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| http(e.to_string()))?;
        let response = tokio::time::timeout(
            timeout,
            client
                .get(base.clone())
                .header("Accept", "text/event-stream")
                .send(),
        )
        .await
        .map_err(|_| {
            http(format!(
                "no answer from {url} within {} s",
                timeout.as_secs()
            ))
        })?
        .map_err(|e| http(format!("{url}: {e}")))?;
        if !response.status().is_success() {
            return Err(http(format!("{url} answered {}", response.status())));
        }
        let mut body = response.bytes_stream();
        let mut parser = SseParser::new(MAX_EVENT);
        let endpoint = tokio::time::timeout(timeout, async {
            loop {
                if let Some(event) = parser.next_event().map_err(|_| too_long())? {
                    if event.name == "endpoint" {
                        return Ok(event.data);
                    }
                    continue;
                }
                match body.next().await {
                    Some(Ok(chunk)) => parser.push(&chunk).map_err(|_| too_long())?,
                    Some(Err(e)) => return Err(http(e.to_string())),
                    None => {
                        return Err(http(
                            "the event stream ended before naming its endpoint".into(),
                        ));
                    }
                }
            }
        })
        .await
        .map_err(|_| {
            http(format!(
                "{url} named no endpoint within {} s",
                timeout.as_secs()
            ))
        })??;
        let endpoint = base
            .join(endpoint.trim())
            .map_err(|e| http(format!("endpoint {endpoint:?}: {e}")))?;
        if endpoint.origin() != base.origin() {
            return Err(http(format!(
                "the server named an endpoint on another origin ({endpoint}); refused"
            )));
        }
        let (tx, incoming) = mpsc::channel(64);
        let reader = tokio::spawn(async move {
            loop {
                match parser.next_event() {
                    Ok(Some(event)) => {
                        if event.name.is_empty() || event.name == "message" {
                            match serde_json::from_str(&event.data) {
                                Ok(message) => {
                                    if tx.send(message).await.is_err() {
                                        return;
                                    }
                                }
                                Err(e) => {
                                    tracing::warn!(error = %e, "an SSE message that is not JSON-RPC")
                                }
                            }
                        }
                        continue;
                    }
                    Ok(None) => {}
                    Err(_) => {
                        tracing::warn!(
                            "an SSE event over {MAX_EVENT} bytes; the stream is dropped"
                        );
                        return;
                    }
                }
                match body.next().await {
                    Some(Ok(chunk)) => {
                        if parser.push(&chunk).is_err() {
                            return;
                        }
                    }
                    _ => return,
                }
            }
        });
        Ok(LegacySse {
            client,
            endpoint,
            incoming,
            reader,
        })
    }
}

impl Transport<RoleClient> for LegacySse {
    type Error = SseError;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let request = self.client.post(self.endpoint.clone()).json(&item);
        async move {
            let response = request
                .send()
                .await
                .map_err(|e| SseError::Http(e.to_string()))?;
            if response.status().is_success() {
                Ok(())
            } else {
                Err(SseError::Http(format!(
                    "POST answered {}",
                    response.status()
                )))
            }
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.incoming.recv()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.reader.abort();
        std::future::ready(Ok(()))
    }
}

impl Drop for LegacySse {
    fn drop(&mut self) {
        self.reader.abort();
    }
}
