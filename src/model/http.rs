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
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(300),
            retry: RetryPolicy::default(),
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

/// A retry about to happen, for the session to show ("reconnecting 2/5").
#[derive(Debug, Clone, PartialEq)]
pub struct RetryNotice {
    pub attempt: u32,
    pub max_attempts: u32,
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
pub async fn post_json(
    client: &reqwest::Client,
    url: &str,
    headers: &HeaderMap,
    body: &serde_json::Value,
    settings: &HttpSettings,
    observer: RetryObserver<'_>,
) -> Result<reqwest::Response, ModelError> {
    let policy = settings.retry;
    let mut attempt = 1;
    loop {
        let sent = client
            .post(url)
            .headers(headers.clone())
            .json(body)
            .send()
            .await;
        let (error, retry_after) = match sent {
            Ok(response) if response.status().is_success() => return Ok(response),
            Ok(response) => {
                let retry_after = parse_retry_after(response.headers());
                (http_error(response).await, retry_after)
            }
            Err(e) => (transport_error(url, &e, settings), None),
        };
        if !error.is_retryable_before_stream() || attempt >= policy.max_attempts.max(1) {
            return Err(error);
        }
        let delay = policy.delay(attempt, retry_after);
        attempt += 1;
        observer(RetryNotice {
            attempt,
            max_attempts: policy.max_attempts,
            delay,
            reason: error.to_string(),
        });
        tracing::warn!(%url, attempt, ?delay, %error, "retrying model request");
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
        return Err(http_error(response).await);
    }
    let text = response
        .text()
        .await
        .map_err(|e| transport_error(url, &e, settings))?;
    serde_json::from_str(&text)
        .map_err(|e| ModelError::Malformed(format!("{url} did not answer JSON: {e}")))
}

async fn http_error(response: reqwest::Response) -> ModelError {
    let status = response.status().as_u16();
    let body = response.text().await.unwrap_or_default();
    ModelError::Http {
        status,
        message: error_message_from_body(&body),
    }
}

pub fn transport_error(url: &str, e: &reqwest::Error, settings: &HttpSettings) -> ModelError {
    if e.is_timeout() && !e.is_connect() {
        return ModelError::IdleTimeout(settings.idle_timeout);
    }
    if e.is_connect() || e.is_request() || e.is_timeout() {
        return ModelError::Connect {
            url: url.to_string(),
            reason: root_cause(e),
        };
    }
    ModelError::Transport(root_cause(e))
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
        .filter(|s| *s >= 0.0)
        .map(Duration::from_secs_f64)
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
