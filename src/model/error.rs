//! What can go wrong talking to a model server, and whether trying again can help.

use std::time::Duration;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// No connection could be made (after retries).
    #[error("cannot reach the model server at {url}: {reason}")]
    Connect { url: String, reason: String },
    /// Nothing listens at a local address: no retry can change that, so it fails at once.
    #[error(
        "no model server listens at {url} (connection refused). Start it there, or point \
         corral at the one you run: --base-url URL, or `corral init` to find running servers \
         and write the config"
    )]
    Refused { url: String },
    /// The server answered with a non-success status before streaming.
    #[error("the model server answered HTTP {status}: {message}")]
    Http { status: u16, message: String },
    /// The server reported an error inside the stream.
    #[error("the model server reported an error mid-stream: {0}")]
    Stream(String),
    /// The server sent something that is not the wire format.
    #[error("the model server sent malformed data: {0}")]
    Malformed(String),
    /// The body ended before the reply was complete.
    #[error("the model server ended the reply early (truncated): {0}")]
    Truncated(String),
    /// Nothing arrived for longer than the idle timeout.
    #[error("no data from the model server for {0:?} (idle timeout)")]
    IdleTimeout(Duration),
    /// The connection broke while streaming.
    #[error("the connection to the model server broke mid-stream: {0}")]
    Transport(String),
    /// A line of the stream (an SSE event, an NDJSON line, a JSON document) went past its cap.
    #[error(
        "the model server sent {what} longer than {limit} bytes, the cap set by [limits] {key} \
         in the config; raise it if this server really sends that much"
    )]
    OverCap {
        what: &'static str,
        limit: usize,
        key: &'static str,
    },
    /// The model is not known to the server.
    #[error("model {model:?} not found on the server at {url}{hint}")]
    ModelNotFound {
        model: String,
        url: String,
        hint: String,
    },
}

impl ModelError {
    /// A stream line over `[limits] max_stream_line_bytes`.
    pub fn line_over_cap(what: &'static str, limit: usize) -> Self {
        ModelError::OverCap {
            what,
            limit,
            key: "max_stream_line_bytes",
        }
    }

    /// Whether a fresh request could succeed where this one failed. Only errors before the first
    /// byte of a reply are retried; a stream that started is never replayed behind the
    /// user's back.
    pub fn is_retryable_before_stream(&self) -> bool {
        match self {
            ModelError::Connect { .. } => true,
            ModelError::Refused { .. } => false,
            ModelError::Http { status, .. } => *status == 429 || (500..600).contains(status),
            ModelError::Stream(_)
            | ModelError::Malformed(_)
            | ModelError::Truncated(_)
            | ModelError::IdleTimeout(_)
            | ModelError::Transport(_)
            | ModelError::OverCap { .. }
            | ModelError::ModelNotFound { .. } => false,
        }
    }
}

/// Pull a human message out of an error body: OpenAI `{"error":{"message":…}}`, Ollama and mlx
/// `{"error":"…"}`, or the raw text.
pub fn error_message_from_body(body: &str) -> String {
    let trimmed = body.trim();
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(trimmed) {
        let error = value.get("error").unwrap_or(&value);
        if let Some(text) = error.as_str() {
            return text.to_string();
        }
        if let Some(text) = error.get("message").and_then(|m| m.as_str()) {
            return text.to_string();
        }
    }
    if trimmed.is_empty() {
        return "(empty body)".to_string();
    }
    excerpt(trimmed, 300)
}

/// A short, single-line excerpt of untrusted text for error messages.
pub fn excerpt(text: &str, max_chars: usize) -> String {
    let one_line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(max_chars)
        .collect();
    if text.chars().count() > max_chars {
        format!("{one_line}…")
    } else {
        one_line
    }
}

/// The hint of a "model not found" error: what the server has (` (the server has: a, b)`),
/// and for Ollama how to get the one asked for.
pub fn not_found_hint(pull: Option<&str>, available: Option<&[String]>) -> String {
    let listed = match available {
        Some([]) => "the server has no models".to_string(),
        Some(names) => format!(
            "the server has: {}",
            names
                .iter()
                .take(20)
                .map(|n| excerpt(n, 80))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        None => "the server did not list its models".to_string(),
    };
    match pull {
        Some(model) => format!(" ({listed}; try: ollama pull {model})"),
        None => format!(" ({listed})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_come_out_of_each_error_shape() {
        assert_eq!(
            error_message_from_body(r#"{"error":{"message":"slow down","type":"x"}}"#),
            "slow down"
        );
        assert_eq!(
            error_message_from_body(r#"{"error":"model 'x' not found"}"#),
            "model 'x' not found"
        );
        assert_eq!(error_message_from_body("  oops\n"), "oops");
        assert_eq!(error_message_from_body(""), "(empty body)");
    }

    #[test]
    fn only_pre_stream_server_trouble_is_retryable() {
        let http = |status| ModelError::Http {
            status,
            message: String::new(),
        };
        assert!(http(429).is_retryable_before_stream());
        assert!(http(503).is_retryable_before_stream());
        assert!(!http(400).is_retryable_before_stream());
        assert!(!ModelError::Truncated(String::new()).is_retryable_before_stream());
    }
}
