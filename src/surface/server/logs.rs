//! Log lines for `/ws/v1/logs`: a tracing layer copies every event into a broadcast channel
//! that admin clients subscribe to, each with its own minimum level.
//!
//! The layer has its own filter, apart from the stderr one (`RUST_LOG`, quiet by default),
//! so a subscriber asking for DEBUG gets DEBUG lines without making stderr noisy. It passes
//! INFO and above always, and corral's own DEBUG lines (targets `corral…`) only while some
//! subscriber asked for DEBUG: other crates' DEBUG lines stay out (a WebSocket library
//! logging each frame it sends would feed the stream its own echo), and with nobody asking
//! a DEBUG call costs one atomic load. TRACE never flows.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::Serialize;
use tokio::sync::broadcast;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::filter::{FilterFn, LevelFilter};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

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
    /// Subscribers that asked for DEBUG: while nonzero, corral's DEBUG lines are captured.
    debug_wanted: Arc<AtomicUsize>,
}

impl Default for LogHub {
    fn default() -> Self {
        let (sender, _) = broadcast::channel(1024);
        LogHub {
            sender,
            debug_wanted: Arc::default(),
        }
    }
}

/// One subscriber's lines; while it lives and asked for DEBUG, DEBUG lines are captured.
pub struct Subscription {
    pub lines: broadcast::Receiver<(Level, LogLine)>,
    debug: Option<Arc<AtomicUsize>>,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(wanted) = &self.debug {
            wanted.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Whether an event is one of corral's own (its crate's module path).
fn is_corral(target: &str) -> bool {
    target
        .strip_prefix("corral")
        .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
}

impl LogHub {
    /// Lines at `min` and above (lines below it may still arrive: filter them).
    pub fn subscribe(&self, min: Level) -> Subscription {
        // tracing orders levels by verbosity: ERROR < WARN < INFO < DEBUG < TRACE.
        let debug = (min >= Level::DEBUG).then(|| {
            self.debug_wanted.fetch_add(1, Ordering::Relaxed);
            self.debug_wanted.clone()
        });
        Subscription {
            lines: self.sender.subscribe(),
            debug,
        }
    }

    /// The tracing layer feeding this hub, with its own filter (see the module's comment):
    /// add it beside the stderr layer, not under a global filter, or that filter decides.
    pub fn layer<S>(&self) -> impl Layer<S> + use<S>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let wanted = self.debug_wanted.clone();
        let filter = FilterFn::new(move |meta: &Metadata<'_>| {
            let level = *meta.level();
            level <= Level::INFO
                || (level == Level::DEBUG
                    && wanted.load(Ordering::Relaxed) > 0
                    && is_corral(meta.target()))
        })
        .with_max_level_hint(LevelFilter::DEBUG);
        HubLayer {
            sender: self.sender.clone(),
        }
        .with_filter(filter)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_corrals_own_targets_count_as_corral() {
        assert!(is_corral("corral"));
        assert!(is_corral("corral::ws"));
        assert!(!is_corral("corral_helper::x"));
        assert!(!is_corral("tungstenite::protocol"));
    }

    #[test]
    fn debug_is_wanted_while_a_debug_subscription_lives() {
        let hub = LogHub::default();
        let info = hub.subscribe(Level::INFO);
        assert_eq!(hub.debug_wanted.load(Ordering::Relaxed), 0);
        let debug = hub.subscribe(Level::DEBUG);
        assert_eq!(hub.debug_wanted.load(Ordering::Relaxed), 1);
        drop(debug);
        drop(info);
        assert_eq!(hub.debug_wanted.load(Ordering::Relaxed), 0);
    }
}
