//! The list `corral top` shows: one row per session, from whichever source, with its sort,
//! its filter, and the dead sessions kept (dimmed) until the person dismisses them.
//!
//! A row disappears only when dismissed: a session the source stops listing (a server keeps
//! the last ten dead ones, a log deleted) stays, marked dead, so nothing vanishes from under
//! the person reading it.

use std::collections::{HashMap, HashSet};

use serde::Deserialize;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::event::{Envelope, Payload, Status, Usage};

/// One session as the list shows it: the server's `SessionInfo` shape, which local sessions
/// are summarized into too.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(super) struct Row {
    pub id: String,
    pub status: Status,
    #[serde(default)]
    pub backend: String,
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub cwd: String,
    #[serde(default)]
    pub turn: u32,
    #[serde(default)]
    pub usage: Usage,
    #[serde(default)]
    pub created_at: String,
    #[serde(default)]
    pub last_activity: String,
    #[serde(default)]
    pub worktree: Option<String>,
    /// The `corral node` that runs it (`serve --nats`).
    #[serde(default)]
    pub node: Option<String>,
    /// The first prompt, shortened (`session::catalog::title_of`); the server's list and
    /// the local catalog both give it, empty (`None` here) before the first prompt.
    #[serde(default, deserialize_with = "non_empty")]
    pub title: Option<String>,
    #[serde(default, rename = "pending_permissions")]
    pub pending: usize,
}

/// An empty or missing title as `None`, so a later listing or envelope can give one.
fn non_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let title = Option::<String>::deserialize(d)?;
    Ok(title.filter(|t| !t.is_empty()))
}

impl Row {
    /// Folds an envelope of this session into the row: what it says about status, turn,
    /// tokens and activity. The source's next listing corrects anything missed.
    pub fn apply(&mut self, envelope: &Envelope) {
        let ts = envelope.ts.to_string();
        if ts > self.last_activity {
            self.last_activity = ts;
        }
        self.turn = self.turn.max(envelope.turn);
        match &envelope.payload {
            Payload::Status(s) => self.status = s.status,
            Payload::Result(result) => self.usage.add(&result.usage),
            Payload::UserText(text) if self.title.is_none() => {
                if let crate::event::ContentBlock::Text { text } = &text.content {
                    self.title =
                        Some(crate::session::catalog::title_of(text)).filter(|t| !t.is_empty());
                }
            }
            _ => {}
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SortKey {
    /// The default: sessions waiting for an answer first, then the most recently active.
    Activity,
    Status,
    /// Newest first.
    Age,
    Id,
}

impl SortKey {
    pub fn next(self) -> SortKey {
        match self {
            SortKey::Activity => SortKey::Status,
            SortKey::Status => SortKey::Age,
            SortKey::Age => SortKey::Id,
            SortKey::Id => SortKey::Activity,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SortKey::Activity => "activity",
            SortKey::Status => "status",
            SortKey::Age => "age",
            SortKey::Id => "id",
        }
    }
}

/// Waiting for a person first: that is what a monitor is watched for.
fn status_rank(status: Status) -> u8 {
    match status {
        Status::WaitingApproval => 0,
        Status::Working => 1,
        Status::Starting => 2,
        Status::Idle => 3,
        Status::Dead => 4,
    }
}

#[derive(Debug)]
pub(super) struct Board {
    rows: HashMap<String, Row>,
    /// Dead sessions the person dismissed, for this run only.
    dismissed: HashSet<String>,
    pub sort: SortKey,
    pub filter: String,
}

impl Default for Board {
    fn default() -> Self {
        Board {
            rows: HashMap::new(),
            dismissed: HashSet::new(),
            sort: SortKey::Activity,
            filter: String::new(),
        }
    }
}

impl Board {
    /// The source's whole list. Rows it no longer names are kept as dead.
    pub fn replace(&mut self, listed: Vec<Row>) {
        let named: HashSet<&str> = listed.iter().map(|r| r.id.as_str()).collect();
        for row in self.rows.values_mut() {
            if !named.contains(row.id.as_str()) {
                row.status = Status::Dead;
                row.pending = 0;
            }
        }
        for mut row in listed {
            if let Some(old) = self.rows.get(&row.id) {
                // The server moves `last_activity` at a turn's end only; envelopes are newer.
                if old.last_activity > row.last_activity {
                    row.last_activity.clone_from(&old.last_activity);
                }
                if row.title.is_none() {
                    row.title.clone_from(&old.title);
                }
            }
            if row.status != Status::Dead {
                // Reopened: it is back.
                self.dismissed.remove(&row.id);
            }
            self.rows.insert(row.id.clone(), row);
        }
    }

    /// Folds a live envelope in. False when the session is not listed yet (the caller asks
    /// the source for the list again).
    pub fn apply(&mut self, envelope: &Envelope) -> bool {
        match self.rows.get_mut(&*envelope.session) {
            Some(row) => {
                row.apply(envelope);
                true
            }
            None => false,
        }
    }

    pub fn get(&self, id: &str) -> Option<&Row> {
        self.rows.get(id)
    }

    /// Hides a dead session; false (and nothing changes) for a live one.
    pub fn dismiss(&mut self, id: &str) -> bool {
        match self.rows.get(id) {
            Some(row) if row.status == Status::Dead => {
                self.dismissed.insert(id.to_string());
                true
            }
            _ => false,
        }
    }

    fn matches(&self, row: &Row) -> bool {
        if self.filter.is_empty() {
            return true;
        }
        let needle = self.filter.to_lowercase();
        [
            row.id.as_str(),
            row.model.as_str(),
            row.backend.as_str(),
            row.cwd.as_str(),
            row.title.as_deref().unwrap_or_default(),
            row.node.as_deref().unwrap_or_default(),
            row.status.as_str(),
        ]
        .iter()
        .any(|field| field.to_lowercase().contains(&needle))
    }

    /// The rows shown, in order: not dismissed, passing the filter, sorted.
    pub fn visible(&self) -> Vec<&Row> {
        let mut rows: Vec<&Row> = self
            .rows
            .values()
            .filter(|r| !self.dismissed.contains(&r.id) && self.matches(r))
            .collect();
        let waiting_first = |r: &Row| u8::from(r.status != Status::WaitingApproval);
        rows.sort_by(|a, b| {
            let order = match self.sort {
                SortKey::Activity => waiting_first(a)
                    .cmp(&waiting_first(b))
                    .then_with(|| b.last_activity.cmp(&a.last_activity)),
                SortKey::Status => status_rank(a.status)
                    .cmp(&status_rank(b.status))
                    .then_with(|| b.last_activity.cmp(&a.last_activity)),
                SortKey::Age => b.created_at.cmp(&a.created_at),
                SortKey::Id => std::cmp::Ordering::Equal,
            };
            // Equal keys keep one order from frame to frame.
            order.then_with(|| a.id.cmp(&b.id))
        });
        rows
    }

    /// How many shown sessions are in each status (dismissed ones not counted), in the
    /// order of [`status_rank`].
    pub fn counts(&self) -> Vec<(Status, usize)> {
        let mut counts = [0usize; 5];
        for row in self.rows.values() {
            if !self.dismissed.contains(&row.id) {
                counts[usize::from(status_rank(row.status))] += 1;
            }
        }
        [
            Status::WaitingApproval,
            Status::Working,
            Status::Starting,
            Status::Idle,
            Status::Dead,
        ]
        .into_iter()
        .zip(counts)
        .filter(|(_, n)| *n > 0)
        .collect()
    }
}

/// `12s`, `5m`, `3h`, `2d`: how long ago an RFC 3339 time was; empty when it does not parse.
pub(super) fn ago(rfc3339: &str, now: OffsetDateTime) -> String {
    let Ok(then) = OffsetDateTime::parse(rfc3339, &Rfc3339) else {
        return String::new();
    };
    let secs = (now - then).whole_seconds().max(0);
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// `1.2k`, `3.4M`: a token count in a narrow column.
pub(super) fn count(n: u64) -> String {
    match n {
        n if n < 1000 => n.to_string(),
        n if n < 1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        n => format!("{:.1}M", n as f64 / 1e6),
    }
}

#[cfg(test)]
#[path = "board_tests.rs"]
mod tests;
