//! Log lines for `/ws/v1/logs`: a tracing layer copies every event into a broadcast channel
//! that admin clients subscribe to, each with its own minimum level.

use std::fmt::Write as _;

use serde::Serialize;
use tokio::sync::broadcast;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LogLine {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub level: &'static str,
    pub logger: String,
    pub message: String,
    pub timestamp: String,
}

/// The seed's level names.
pub fn level_name(level: Level) -> &'static str {
    match level {
        Level::ERROR => "ERROR",
        Level::WARN => "WARNING",
        Level::INFO => "INFO",
        Level::DEBUG => "DEBUG",
        Level::TRACE => "DEBUG",
    }
}

/// `DEBUG`, `INFO`, `WARNING` (or `WARN`), `ERROR` → a level; anything else is refused.
pub fn parse_level(text: &str) -> Option<Level> {
    match text.to_ascii_uppercase().as_str() {
        "DEBUG" => Some(Level::DEBUG),
        "INFO" => Some(Level::INFO),
        "WARNING" | "WARN" => Some(Level::WARN),
        "ERROR" => Some(Level::ERROR),
        _ => None,
    }
}

#[derive(Clone)]
pub struct LogHub {
    sender: broadcast::Sender<(Level, LogLine)>,
}

impl Default for LogHub {
    fn default() -> Self {
        let (sender, _) = broadcast::channel(1024);
        LogHub { sender }
    }
}

impl LogHub {
    pub fn subscribe(&self) -> broadcast::Receiver<(Level, LogLine)> {
        self.sender.subscribe()
    }

    /// The tracing layer feeding this hub.
    pub fn layer(&self) -> HubLayer {
        HubLayer {
            sender: self.sender.clone(),
        }
    }
}

pub struct HubLayer {
    sender: broadcast::Sender<(Level, LogLine)>,
}

struct MessageVisitor(String);

impl Visit for MessageVisitor {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, "{value:?}");
        } else {
            let sep = if self.0.is_empty() { "" } else { " " };
            let _ = write!(self.0, "{sep}{}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0.push_str(value);
        } else {
            let sep = if self.0.is_empty() { "" } else { " " };
            let _ = write!(self.0, "{sep}{}={value}", field.name());
        }
    }
}

impl<S: Subscriber> Layer<S> for HubLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        if self.sender.receiver_count() == 0 {
            return;
        }
        let mut visitor = MessageVisitor(String::new());
        event.record(&mut visitor);
        let level = *event.metadata().level();
        let line = LogLine {
            kind: "log_line",
            level: level_name(level),
            logger: event.metadata().target().replace("::", "."),
            message: visitor.0,
            timestamp: crate::event::Timestamp::now().to_string(),
        };
        let _ = self.sender.send((level, line));
    }
}
