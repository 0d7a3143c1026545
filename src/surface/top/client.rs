//! `corral top` against a running `corral serve`: its REST API (`/api/v1/sessions…`) and its
//! bus of every session's envelopes (`/api/v1/events`, resumed with `Last-Event-ID`).
//!
//! The bearer token goes in the `Authorization` header only, never in a URL: URLs end up in
//! error messages, and those are shown.

use std::time::Duration;

use reqwest::{Method, Response, Url};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::board::Row;
use crate::error::Error;
use crate::event::PermissionRequest;
use crate::policy::Decision;

/// A REST call that takes longer has failed (the list, an answer, a history).
const CALL_TIMEOUT: Duration = Duration::from_secs(15);

/// The bus sends a comment every 15 s: this much silence means the connection is gone.
const STREAM_SILENCE: Duration = Duration::from_secs(40);

#[derive(Debug, thiserror::Error)]
pub(super) enum ClientError {
    #[error("cannot reach {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("the server refused ({status}): {message}")]
    Refused { status: u16, message: String },
    #[error("the server's answer is not what corral expects: {0}")]
    BadReply(String),
}

/// The innermost cause of a transport error ("Connection refused"), after reqwest's own
/// words: its outer message alone says only that sending failed.
fn reason(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    text
}

#[derive(Debug, Clone)]
pub(super) struct Client {
    http: reqwest::Client,
    /// Without a total timeout: the event stream lasts as long as the program.
    stream: reqwest::Client,
    base: Url,
    token: Option<String>,
}

impl Client {
    /// A client of the server at `server` (`http://host:port`; the scheme may be left out).
    pub fn new(server: &str, token: Option<String>) -> Result<Client, Error> {
        let text = if server.contains("://") {
            server.to_string()
        } else {
            format!("http://{server}")
        };
        let base = Url::parse(&text)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
            .ok_or_else(|| Error::Usage(format!("--server {server:?} is not an http(s) URL")))?;
        let build = |builder: reqwest::ClientBuilder| {
            builder
                .connect_timeout(Duration::from_secs(5))
                .build()
                .map_err(|e| Error::Runtime(format!("cannot start an HTTP client: {e}")))
        };
        Ok(Client {
            http: build(reqwest::Client::builder().timeout(CALL_TIMEOUT))?,
            stream: build(reqwest::Client::builder().read_timeout(STREAM_SILENCE))?,
            base,
            token,
        })
    }

    /// The server as the header shows it.
    pub fn label(&self) -> String {
        self.base.as_str().trim_end_matches('/').to_string()
    }

    /// `/api/v1/<segments…>`, each segment escaped: a session id from the server cannot
    /// turn into another path.
    fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(["api", "v1"]).extend(segments);
        }
        url
    }

    async fn send(
        &self,
        method: Method,
        url: Url,
        body: Option<Value>,
    ) -> Result<Response, ClientError> {
        let shown = url.to_string();
        let mut request = self.http.request(method, url);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.map_err(|e| ClientError::Unreachable {
            url: shown,
            reason: reason(&e),
        })?;
        refused(response).await
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        segments: &[&str],
        body: Option<Value>,
    ) -> Result<T, ClientError> {
        let response = self.send(method, self.url(segments), body).await?;
        response
            .json()
            .await
            .map_err(|e| ClientError::BadReply(reason(&e)))
    }

    /// Every session the token may see. One the client cannot read is left out (logged),
    /// not the whole list.
    pub async fn sessions(&self) -> Result<Vec<Row>, ClientError> {
        let body: Value = self.call(Method::GET, &["sessions"], None).await?;
        let Some(list) = body["sessions"].as_array() else {
            return Err(ClientError::BadReply("no \"sessions\" list".into()));
        };
        Ok(list
            .iter()
            .filter_map(|s| match serde_json::from_value::<Row>(s.clone()) {
                Ok(row) => Some(row),
                Err(e) => {
                    tracing::warn!(error = %e, "a session the server listed was left out");
                    None
                }
            })
            .collect())
    }

    pub async fn permissions(&self, id: &str) -> Result<Vec<PermissionRequest>, ClientError> {
        let body: Value = self
            .call(Method::GET, &["sessions", id, "permissions"], None)
            .await?;
        serde_json::from_value(body["permissions"].clone())
            .map_err(|e| ClientError::BadReply(e.to_string()))
    }

    pub async fn answer(
        &self,
        id: &str,
        request: &str,
        decision: Decision,
    ) -> Result<(), ClientError> {
        let body = json!({ "confirmation_id": request, "action": decision });
        self.call::<Value>(Method::POST, &["sessions", id, "confirmations"], Some(body))
            .await
            .map(drop)
    }

    /// Whether a turn was running to cancel.
    pub async fn cancel(&self, id: &str) -> Result<bool, ClientError> {
        let body: Value = self
            .call(Method::POST, &["sessions", id, "cancel"], None)
            .await?;
        Ok(body["cancelled"].as_bool().unwrap_or(false))
    }

    pub async fn close(&self, id: &str) -> Result<(), ClientError> {
        self.call::<Value>(Method::DELETE, &["sessions", id], None)
            .await
            .map(drop)
    }

    /// The conversation as the server keeps it (from its log when its ring is short).
    pub async fn messages(&self, id: &str) -> Result<Vec<Value>, ClientError> {
        let body: Value = self
            .call(Method::GET, &["sessions", id, "messages"], None)
            .await?;
        Ok(body["messages"].as_array().cloned().unwrap_or_default())
    }

    /// The bus of every visible session's envelopes, after global id `after` (from what the
    /// server's ring still holds) and then live.
    pub async fn events(&self, after: u64) -> Result<Response, ClientError> {
        let url = self.url(&["events"]);
        let shown = url.to_string();
        let mut request = self
            .stream
            .get(url)
            .header("Accept", "text/event-stream")
            .header("Last-Event-ID", after.to_string());
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.map_err(|e| ClientError::Unreachable {
            url: shown,
            reason: reason(&e),
        })?;
        refused(response).await
    }
}

/// A response with an error status as the error the server's JSON body names.
async fn refused(response: Response) -> Result<Response, ClientError> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let body: Value = response.json().await.unwrap_or(Value::Null);
    let message = body["error"]["message"]
        .as_str()
        .map_or_else(|| status.to_string(), str::to_string);
    Err(ClientError::Refused {
        status: status.as_u16(),
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_stay_one_path_segment_and_the_scheme_is_checked() {
        let client = Client::new("127.0.0.1:7777/", Some("t".into())).unwrap();
        assert_eq!(client.label(), "http://127.0.0.1:7777");
        let url = client.url(&["sessions", "../../events?x=1#y", "cancel"]);
        assert_eq!(
            url.as_str(),
            "http://127.0.0.1:7777/api/v1/sessions/..%2F..%2Fevents%3Fx=1%23y/cancel"
        );
        assert!(matches!(
            Client::new("ftp://host", None),
            Err(Error::Usage(_))
        ));
        assert!(matches!(Client::new("http://", None), Err(Error::Usage(_))));
    }
}
