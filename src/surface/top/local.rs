//! `corral top` without a server: the sessions of this machine's agents directory, from
//! their `<id>.meta.json` and `<id>.events.jsonl`, read again about once a second.
//!
//! Each log is read once and then only from where the last read stopped ([`LogTail`]), so
//! polling costs what was appended, not the logs' size. A session is live while a process
//! holds its lock (`corral run`, a server); otherwise it has ended, and shows as dead
//! whatever its log's last status says (a process killed never wrote `dead`).

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::board::Row;
use crate::event::{Envelope, Status, Usage};
use crate::host::manager::backend_kind;
use crate::session::{SessionMeta, is_held, log_path};

/// An event log read incrementally: each [`LogTail::read_new`] returns the envelopes of the
/// lines completed since the last one. A torn last line waits for its end; a log that shrank
/// (replaced) is read again from its start.
#[derive(Debug)]
pub(super) struct LogTail {
    path: PathBuf,
    offset: u64,
    partial: Vec<u8>,
}

impl LogTail {
    pub fn new(path: PathBuf) -> Self {
        LogTail {
            path,
            offset: 0,
            partial: Vec::new(),
        }
    }

    pub fn read_new(&mut self) -> std::io::Result<Vec<Envelope>> {
        let mut file = std::fs::File::open(&self.path)?;
        let size = file.metadata()?.len();
        if size < self.offset {
            self.offset = 0;
            self.partial.clear();
        }
        if size == self.offset {
            return Ok(Vec::new());
        }
        file.seek(SeekFrom::Start(self.offset))?;
        let mut bytes = Vec::new();
        file.take(size - self.offset).read_to_end(&mut bytes)?;
        self.offset += bytes.len() as u64;
        self.partial.extend_from_slice(&bytes);
        let Some(end) = self.partial.iter().rposition(|b| *b == b'\n') else {
            return Ok(Vec::new());
        };
        let rest = self.partial.split_off(end + 1);
        let complete = std::mem::replace(&mut self.partial, rest);
        Ok(complete
            .split(|b| *b == b'\n')
            .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
            .filter_map(|l| serde_json::from_slice(l).ok())
            .collect())
    }
}

struct Entry {
    tail: LogTail,
    /// The row as its log tells it; [`Catalog::scan`] decides about liveness.
    row: Row,
}

/// Every session of an agents directory, summarized.
#[derive(Default)]
pub(super) struct Catalog {
    entries: HashMap<String, Entry>,
}

fn row_of(meta: &SessionMeta) -> Row {
    Row {
        id: meta.id.clone(),
        status: Status::Starting,
        backend: backend_kind(&meta.model).to_string(),
        model: meta.model.clone(),
        cwd: meta.cwd.display().to_string(),
        turn: 0,
        usage: Usage::default(),
        created_at: meta.created_at.clone(),
        last_activity: meta.created_at.clone(),
        worktree: meta.worktree.as_ref().map(|w| w.path.display().to_string()),
        title: None,
        pending: 0,
    }
}

impl Catalog {
    /// The sessions of `dir` as they stand now.
    pub fn scan(&mut self, dir: &Path) -> Vec<Row> {
        let Ok(listing) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        let mut rows = Vec::new();
        for item in listing.flatten() {
            let name = item.file_name();
            let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".meta.json")) else {
                continue;
            };
            if !self.entries.contains_key(id) {
                match SessionMeta::load(dir, id) {
                    Ok(meta) if meta.id == id => {
                        let entry = Entry {
                            tail: LogTail::new(log_path(dir, id)),
                            row: row_of(&meta),
                        };
                        self.entries.insert(id.to_string(), entry);
                    }
                    // Being written, or not a session's: looked at again next time.
                    _ => continue,
                }
            }
            let Some(entry) = self.entries.get_mut(id) else {
                continue;
            };
            match entry.tail.read_new() {
                Ok(envelopes) => envelopes.iter().for_each(|e| entry.row.apply(e)),
                Err(e) => tracing::debug!(id, error = %e, "event log not readable yet"),
            }
            let mut row = entry.row.clone();
            if !is_held(dir, id) {
                row.status = Status::Dead;
            }
            if row.status != Status::WaitingApproval {
                row.pending = 0;
            }
            rows.push(row);
        }
        rows
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    const LINE: &str = r#"{"seq":1,"ts":"2026-12-01T00:00:00.000Z","agent":"a","turn":1,"kind":"user_text","data":{"content":{"type":"text","text":"fix the bug\nplease"}}}"#;

    #[test]
    fn a_log_is_read_once_and_then_only_what_was_appended() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.events.jsonl");
        let mut file = std::fs::File::create(&path).unwrap();
        let mut tail = LogTail::new(path.clone());
        write!(file, "{LINE}\n{}", &LINE[..20]).unwrap();
        assert_eq!(tail.read_new().unwrap().len(), 1);
        assert!(tail.read_new().unwrap().is_empty(), "a torn line waits");
        writeln!(file, "{}", &LINE[20..]).unwrap();
        assert_eq!(tail.read_new().unwrap()[0].seq, 1);
        std::fs::write(&path, format!("{LINE}\n")).unwrap();
        assert_eq!(
            tail.read_new().unwrap().len(),
            1,
            "a replaced log is read anew"
        );
    }

    #[test]
    fn a_session_no_process_holds_has_ended() {
        let dir = tempfile::tempdir().unwrap();
        let meta: SessionMeta = serde_json::from_value(serde_json::json!({
            "id": "a", "model": "llamacpp:m", "base_url": "", "cwd": "/work",
            "created_at": "2026-12-01T00:00:00.000Z",
        }))
        .unwrap();
        meta.save(dir.path()).unwrap();
        std::fs::write(log_path(dir.path(), "a"), format!("{LINE}\n")).unwrap();
        let rows = Catalog::default().scan(dir.path());
        assert_eq!(rows.len(), 1);
        let row = &rows[0];
        assert_eq!((row.status, row.turn), (Status::Dead, 1));
        assert_eq!(
            (row.backend.as_str(), row.title.as_deref()),
            ("native", Some("fix the bug"))
        );
    }
}
