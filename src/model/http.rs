//! Sending a model request: one HTTP client per model, retries with exponential backoff and
//! jitter before the first byte, a per-read idle timeout and never a total deadline (a long
//! generation is fine as long as bytes keep coming).

use std::time::Duration;

use reqwest::header::{HeaderMap, RETRY_AFTER};

use super::error::{ModelError, error_message_from_body};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HttpSettings {
    pub connect_timeout: Duration,
    /// Longest silence tolerated between two reads of a reply.
    pub idle_timeout: Duration,
    pub retry: RetryPolicy,
    /// Longest line of a streamed reply (an SSE event's data, an NDJSON line) and longest
    /// JSON document read whole: `[limits] max_stream_line_bytes`.
    pub max_stream_line: usize,
    /// How much of an error reply's body is read for its message: `[limits]
    /// max_error_body_bytes`. The rest is never read.
    pub max_error_body: usize,
}

/// Default `[limits] max_stream_line_bytes`: far above any real event (a whole tool call's
/// arguments in one event included), low enough that a server that never sends a newline
/// is stopped early.
pub const DEFAULT_MAX_STREAM_LINE: usize = 16 * 1024 * 1024;
/// Default `[limits] max_error_body_bytes`: error messages are shown as short excerpts.
pub const DEFAULT_MAX_ERROR_BODY: usize = 64 * 1024;

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(300),
            retry: RetryPolicy::default(),
            max_stream_line: DEFAULT_MAX_STREAM_LINE,
            max_error_body: DEFAULT_MAX_ERROR_BODY,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    pub base_delay: Duration,
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(20),
        }
    }
}

impl RetryPolicy {
    /// Exponential backoff with jitter: a random delay in [d/2, d] where d doubles per attempt.
    fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(wait) = retry_after {
            return wait.min(self.max_delay);
        }
        let factor = 2u32.saturating_pow(attempt.saturating_sub(1));
        let full = self.base_delay.saturating_mul(factor).min(self.max_delay);
        let half = full / 2;
        let jitter_ms = fastrand::u64(0..=half.as_millis().max(1) as u64);
        half + Duration::from_millis(jitter_ms)
    }
}

/// A retry about to happen, for the session to show ("retry 1/4"): retries are counted from
/// 1, the first attempt is not one.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryNotice {
    pub retry: u32,
    pub max_retries: u32,
    pub delay: Duration,
    pub reason: String,
}

pub type RetryObserver<'a> = &'a (dyn Fn(RetryNotice) + Send + Sync);

pub fn build_client(settings: &HttpSettings) -> Result<reqwest::Client, ModelError> {
    reqwest::Client::builder()
        .connect_timeout(settings.connect_timeout)
        .read_timeout(settings.idle_timeout)
        // Requests go out as headers then body: without this, Nagle waits for the server's
        // delayed ACK (40 ms on Linux) on every model call.
        .tcp_nodelay(true)
        .build()
        .map_err(|e| ModelError::Connect {
            url: String::new(),
            reason: format!("cannot build the HTTP client: {e}"),
        })
}

/// POST `body` as JSON and return the response once it has a success status, retrying
/// connection failures, 429 and 5xx.
/// A chat request body: its few settings as a JSON object, then the messages, serialized
/// from the history where it lies.
#[derive(serde::Serialize)]
pub struct ChatBody<M> {
    #[serde(flatten)]
    pub fields: serde_json::Value,
    pub messages: M,
}

pub async fn post_json(
    client: &reqwest::Client,
    url: &str,
    headers: &HeaderMap,
    body: &(impl serde::Serialize + ?Sized),
    settings: &HttpSettings,
    observer: RetryObserver<'_>,
) -> Result<reqwest::Response, ModelError> {
    // Serialized once: a retry sends the same bytes (a long history is megabytes).
    let body = bytes::Bytes::from(serde_json::to_vec(body).map_err(|e| ModelError::Connect {
        url: url.to_string(),
        reason: format!("the request could not be written as JSON: {e}"),
    })?);
    let policy = settings.retry;
    let mut attempt = 1;
    loop {
        let sent = client
            .post(url)
            .headers(headers.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.clone())
            .send()
            .await;
        let (error, retry_after) = match sent {
            Ok(response) if response.status().is_success() => return Ok(response),
            Ok(response) => {
                let retry_after = parse_retry_after(response.headers());
                (http_error(response, settings).await, retry_after)
            }
            Err(e) => (transport_error(url, &e, settings), None),
        };
        if !error.is_retryable_before_stream() || attempt >= policy.max_attempts.max(1) {
            return Err(error);
        }
        let delay = policy.delay(attempt, retry_after);
        observer(RetryNotice {
            retry: attempt,
            max_retries: policy.max_attempts.max(1) - 1,
            delay,
            reason: error.to_string(),
        });
        tracing::warn!(%url, retry = attempt, ?delay, %error, "retrying model request");
        attempt += 1;
        tokio::time::sleep(delay).await;
    }
}

/// GET a small JSON document (model metadata); one attempt, no retries.
pub async fn get_json(
    client: &reqwest::Client,
    url: &str,
    headers: &HeaderMap,
    settings: &HttpSettings,
) -> Result<serde_json::Value, ModelError> {
    let response = client
        .get(url)
        .headers(headers.clone())
        .send()
        .await
        .map_err(|e| transport_error(url, &e, settings))?;
    read_json(url, response, settings).await
}

pub async fn post_json_once(
    client: &reqwest::Client,
    url: &str,
    headers: &HeaderMap,
    body: &serde_json::Value,
    settings: &HttpSettings,
) -> Result<serde_json::Value, ModelError> {
    let response = client
        .post(url)
        .headers(headers.clone())
        .json(body)
        .send()
        .await
        .map_err(|e| transport_error(url, &e, settings))?;
    read_json(url, response, settings).await
}

async fn read_json(
    url: &str,
    response: reqwest::Response,
    settings: &HttpSettings,
) -> Result<serde_json::Value, ModelError> {
    if !response.status().is_success() {
        return Err(http_error(response, settings).await);
    }
    let (body, cut) = read_capped(response, settings.max_stream_line)
        .await
        .map_err(|e| transport_error(url, &e, settings))?;
    if cut {
        return Err(ModelError::line_over_cap(
            "a JSON document",
            settings.max_stream_line,
        ));
    }
    serde_json::from_slice(&body)
        .map_err(|e| ModelError::Malformed(format!("{url} did not answer JSON: {e}")))
}

async fn http_error(response: reqwest::Response, settings: &HttpSettings) -> ModelError {
    let status = response.status().as_u16();
    let (body, cut) = read_error_body(response, settings).await;
    let mut message = error_message_from_body(&body);
    if cut {
        message.push_str(&format!(
            " (error body cut at {} bytes, [limits] max_error_body_bytes)",
            settings.max_error_body
        ));
    }
    ModelError::Http { status, message }
}

/// Up to `[limits] max_error_body_bytes` of a body that is only read for its message, and
/// whether there was more. A transport error mid-body keeps what arrived.
pub async fn read_error_body(
    response: reqwest::Response,
    settings: &HttpSettings,
) -> (String, bool) {
    let mut body = Vec::new();
    let mut response = response;
    let mut cut = false;
    while let Ok(Some(chunk)) = response.chunk().await {
        let room = settings.max_error_body.saturating_sub(body.len());
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            cut = true;
            break;
        }
        body.extend_from_slice(&chunk);
    }
    (String::from_utf8_lossy(&body).into_owned(), cut)
}

/// The body, up to `limit` bytes; true if it was longer (the rest is left unread).
async fn read_capped(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<(Vec<u8>, bool), reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if chunk.len() > limit.saturating_sub(body.len()) {
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

pub fn transport_error(url: &str, e: &reqwest::Error, settings: &HttpSettings) -> ModelError {
    if e.is_timeout() && !e.is_connect() {
        return ModelError::IdleTimeout(settings.idle_timeout);
    }
    if e.is_connect() && is_refused(e) && is_local(url) {
        return ModelError::Refused { url: origin(url) };
    }
    if e.is_connect() || e.is_request() || e.is_timeout() {
        return ModelError::Connect {
            url: url.to_string(),
            reason: root_cause(e),
        };
    }
    ModelError::Transport(root_cause(e))
}

/// `scheme://host:port` of a request URL: where the server should have been.
fn origin(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(parsed) => match (parsed.host_str(), parsed.port_or_known_default()) {
            (Some(host), Some(port)) => format!("{}://{host}:{port}", parsed.scheme()),
            _ => url.to_string(),
        },
        Err(_) => url.to_string(),
    }
}

/// The connection was refused (an RST: nothing listens), as opposed to a timeout or DNS.
fn is_refused(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(e);
    while let Some(inner) = source {
        if inner
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
        {
            return true;
        }
        source = inner.source();
    }
    false
}

/// This machine: a loopback or unspecified address, or `localhost`. A refusal here is final
/// (a remote host may be restarting behind a load balancer; this one is simply not running).
pub fn is_local(url: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(url) else {
        return false;
    };
    let Some(host) = url.host_str() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback() || ip.is_unspecified(),
        Err(_) => {
            let name = host.trim_end_matches('.').to_ascii_lowercase();
            name == "localhost" || name.ends_with(".localhost")
        }
    }
}

/// The model names a server lists: OpenAI's `GET {base}/models` (`data[].id`) or Ollama's
/// `GET {base}/api/tags` (`models[].name`). `None`: it did not answer with a list.
pub async fn list_models(
    client: &reqwest::Client,
    url: &str,
    headers: &HeaderMap,
    settings: &HttpSettings,
) -> Option<Vec<String>> {
    let listing = get_json(client, url, headers, settings).await.ok()?;
    let (items, key) = match (listing.get("data"), listing.get("models")) {
        (Some(data), _) => (data.as_array()?, "id"),
        (None, Some(models)) => (models.as_array()?, "name"),
        (None, None) => return None,
    };
    Some(
        items
            .iter()
            .filter_map(|m| m.get(key).and_then(serde_json::Value::as_str))
            .map(str::to_string)
            .collect(),
    )
}

/// reqwest wraps the useful part (connection refused, reset by peer) several sources deep.
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        text = inner.to_string();
        source = inner.source();
    }
    text
}

fn parse_retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?;
    value
        .trim()
        .parse::<f64>()
        .ok()
        // A hostile `Retry-After: 1e300` must not panic; the wait is capped by max_delay anyway.
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
}

/// Map an error from reading a streaming body.
pub fn body_error(e: &reqwest::Error, settings: &HttpSettings) -> ModelError {
    if e.is_timeout() {
        ModelError::IdleTimeout(settings.idle_timeout)
    } else {
        ModelError::Transport(root_cause(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_machine_is_local() {
        for url in [
            "http://127.0.0.1:11434",
            "http://localhost:8080/v1",
            "http://LOCALHOST./v1",
            "http://[::1]:8000/v1",
            "http://0.0.0.0:1234",
            "http://127.3.2.1:9",
        ] {
            assert!(is_local(url), "{url}");
        }
        for url in [
            "http://10.0.0.2:11434",
            "https://api.openai.com/v1",
            "http://localhost.example.com",
            "not a url",
        ] {
            assert!(!is_local(url), "{url}");
        }
    }

    #[test]
    fn backoff_grows_and_respects_retry_after_and_cap() {
        let policy = RetryPolicy {
            max_attempts: 5,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(1000),
        };
        for _ in 0..50 {
            let d1 = policy.delay(1, None);
            assert!(d1 >= Duration::from_millis(50) && d1 <= Duration::from_millis(100));
            let d3 = policy.delay(3, None);
            assert!(d3 >= Duration::from_millis(200) && d3 <= Duration::from_millis(400));
            assert!(policy.delay(30, None) <= Duration::from_millis(1000));
        }
        assert_eq!(
            policy.delay(1, Some(Duration::from_secs(60))),
            Duration::from_millis(1000)
        );
    }
}
