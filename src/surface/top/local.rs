//! `corral top` without a server: the sessions of this machine's agents directory as the
//! session catalog summarizes them (`corral sessions` lists the same), read again about once
//! a second, and the log of the one whose feed is open, followed as it grows.
//!
//! A session's summary is made again only when its log changed (size, modification time) or
//! a process took or left its lock: polling costs a `stat` and a lock probe per session, not
//! a read of every log every second.

use std::collections::HashMap;
use std::path::Path;
use std::time::SystemTime;

use super::board::Row;
use crate::event::{Envelope, Status};
use crate::session::catalog::{self, LocalSession, LocalStatus};
use crate::session::{LogTail, is_held, log_path};

/// What a summary was made from: a change in any of it makes it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    len: u64,
    modified: Option<SystemTime>,
    held: bool,
}

fn seen(dir: &Path, id: &str) -> Option<Seen> {
    let file = std::fs::metadata(log_path(dir, id)).ok()?;
    Some(Seen {
        len: file.len(),
        modified: file.modified().ok(),
        held: is_held(dir, id),
    })
}

/// A catalog entry as the list shows it. `stopped` (nobody runs it, and it was not closed: its
/// process was killed) shows as ended, as `dead` does: neither runs.
fn row_of(session: LocalSession) -> Row {
    let status = match session.status {
        LocalStatus::Starting => Status::Starting,
        LocalStatus::Idle => Status::Idle,
        LocalStatus::Working => Status::Working,
        LocalStatus::WaitingApproval => Status::WaitingApproval,
        LocalStatus::Dead | LocalStatus::Stopped => Status::Dead,
    };
    let created_at = session.created_at.unwrap_or_default();
    Row {
        id: session.id,
        status,
        backend: session.backend.unwrap_or("?").to_string(),
        model: session.model.unwrap_or_default(),
        cwd: session.cwd.unwrap_or_default(),
        turn: session.turns,
        usage: session.usage,
        last_activity: session
            .last_activity
            .map_or_else(|| created_at.clone(), |t| t.to_string()),
        created_at,
        worktree: session.worktree,
        node: None,
        title: Some(session.title).filter(|t| !t.is_empty()),
        pending: usize::from(status == Status::WaitingApproval),
    }
}

/// The sessions of an agents directory, summarized again as they change.
#[derive(Default)]
pub(super) struct Catalog {
    known: HashMap<String, (Seen, Row)>,
}

impl Catalog {
    /// The sessions of `dir` as they stand now.
    pub fn scan(&mut self, dir: &Path) -> Vec<Row> {
        let ids = catalog::ids(dir).unwrap_or_else(|e| {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot list the sessions");
            Vec::new()
        });
        self.known.retain(|id, _| ids.contains(id));
        let mut rows = Vec::with_capacity(ids.len());
        for id in ids {
            let Some(now) = seen(dir, &id) else {
                continue;
            };
            let row = match self.known.get(&id) {
                Some((before, row)) if *before == now => row.clone(),
                _ => {
                    let row = row_of(catalog::summarize(dir, &id));
                    self.known.insert(id, (now, row.clone()));
                    row
                }
            };
            rows.push(row);
        }
        rows
    }
}

/// The envelopes appended to a log since the last call (all of it at first); a line that is
/// not an envelope is skipped.
pub(super) fn read_new(tail: &mut LogTail) -> Vec<Envelope> {
    let mut envelopes = Vec::new();
    loop {
        match tail.next_line() {
            Ok(Some(line)) => {
                if let Ok(envelope) = serde_json::from_slice(&line) {
                    envelopes.push(envelope);
                }
            }
            Ok(None) => return envelopes,
            Err(e) => {
                tracing::debug!(error = %e, "reading a followed log");
                return envelopes;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::session::SessionMeta;

    const LINE: &str = r#"{"seq":1,"ts":"2026-12-01T00:00:00.000Z","agent":"a","turn":1,"kind":"user_text","data":{"content":{"type":"text","text":"fix the bug\nplease"}}}"#;

    #[test]
    fn a_session_is_summarized_again_only_when_its_log_changes() {
        let dir = tempfile::tempdir().unwrap();
        let meta: SessionMeta = serde_json::from_value(serde_json::json!({
            "id": "a", "model": "llamacpp:m", "base_url": "", "cwd": "/work",
            "created_at": "2026-12-01T00:00:00.000Z",
        }))
        .unwrap();
        meta.save(dir.path()).unwrap();
        let path = log_path(dir.path(), "a");
        std::fs::write(&path, format!("{LINE}\n")).unwrap();
        let mut catalog = Catalog::default();
        let rows = catalog.scan(dir.path());
        let row = &rows[0];
        assert_eq!((row.status, row.turn), (Status::Dead, 1), "nobody runs it");
        assert_eq!(row.backend, "native");
        assert_eq!(row.title.as_deref(), Some("fix the bug please"));
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        writeln!(file, "{}", LINE.replace(r#""turn":1"#, r#""turn":2"#)).unwrap();
        assert_eq!(catalog.scan(dir.path())[0].turn, 2);
        std::fs::remove_file(&path).unwrap();
        assert!(catalog.scan(dir.path()).is_empty());
    }

    #[test]
    fn a_followed_log_gives_its_envelopes_as_they_are_appended() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.events.jsonl");
        let mut file = std::fs::File::create(&path).unwrap();
        write!(file, "{LINE}\nnot json\n{}", &LINE[..20]).unwrap();
        let mut tail = LogTail::open(&path).unwrap();
        assert_eq!(read_new(&mut tail).len(), 1);
        writeln!(file, "{}", &LINE[20..]).unwrap();
        assert_eq!(read_new(&mut tail)[0].seq, 1);
    }
}
