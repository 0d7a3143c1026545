//! Sessions a previous process left open: listed as `dead` after a restart, reopened by id.
//!
//! A runtime killed with SIGKILL (or crashed) never closes its sessions, so their logs end
//! without a `dead` status, and a new process has no handle for them. [`SessionManager::
//! load_dormant`] (run by `serve` at start) reads the agents directory once: every session a
//! manager opened (its metadata records an owner) whose log does not end with `dead` is listed
//! with status `dead`, under its recorded owner, until [`SessionManager::reopen`] resumes it
//! from its log (history repaired as `--resume` does). Only the tail of each log is read.
//! Sessions closed cleanly are not listed; `corral run --resume ID` still resumes any of them.
//! A session whose lock another live process holds is not listed either: it is not dead.

use std::collections::{HashMap, HashSet};
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;

use super::{Handle, SessionInfo, SessionManager, lock};
use crate::error::Error;
use crate::event::{Envelope, Payload, Status, Usage};
use crate::host::open::{Limits, OpenSpec};
use crate::session::{SessionMeta, log_path};

pub(super) struct Dormant {
    info: SessionInfo,
    meta: SessionMeta,
}

#[derive(Default)]
pub(super) struct Table {
    /// Left open by a previous process, by id.
    left: HashMap<String, Dormant>,
    /// Being reopened: a second request for the same id is refused, not run twice on one log.
    reopening: HashSet<String>,
}

/// Takes an id out of `reopening` when the reopen ends, however it ends.
struct Reopening<'a> {
    manager: &'a SessionManager,
    id: &'a str,
}

impl Drop for Reopening<'_> {
    fn drop(&mut self) {
        lock(&self.manager.inner.dormant).reopening.remove(self.id);
    }
}

/// The last readable envelope of a log, read from its end: a torn last line is skipped.
fn last_envelope(path: &Path) -> Option<Envelope> {
    let mut file = std::fs::File::open(path).ok()?;
    let size = file.metadata().ok()?.len();
    let mut window: u64 = 64 * 1024;
    loop {
        let start = size.saturating_sub(window);
        file.seek(SeekFrom::Start(start)).ok()?;
        let mut tail = Vec::new();
        file.by_ref()
            .take(size - start)
            .read_to_end(&mut tail)
            .ok()?;
        let mut lines: Vec<&[u8]> = tail.split(|b| *b == b'\n').collect();
        if start > 0 {
            // The window's first line may begin before it.
            lines.remove(0);
        }
        let found = lines
            .iter()
            .rev()
            .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
            .find_map(|l| serde_json::from_slice::<Envelope>(l).ok());
        if found.is_some() || start == 0 {
            return found;
        }
        window = window.saturating_mul(4);
    }
}

/// A session left open in `dir`, if `meta` is one.
fn dormant(dir: &Path, meta: SessionMeta) -> Option<Dormant> {
    let owner = meta.owner.clone()?;
    // Another live process (a `run -i`, a second server) runs it: not dead, and not ours.
    if crate::session::is_held(dir, &meta.id) {
        return None;
    }
    let path = log_path(dir, &meta.id);
    let last = last_envelope(&path)?;
    if matches!(&last.payload, Payload::Status(s) if s.status == Status::Dead) {
        return None;
    }
    let info = SessionInfo {
        id: meta.id.clone(),
        owner,
        status: Status::Dead,
        model: meta.model.clone(),
        cwd: meta.cwd.display().to_string(),
        turn: last.turn,
        created_at: meta.created_at.clone(),
        last_activity: last.ts.to_string(),
        usage: Usage::default(),
        backend: crate::model::backend_of(&meta.model),
        queues_prompts: false,
        event_log: Some(path.display().to_string()),
        worktree: meta.worktree.as_ref().map(|w| w.path.display().to_string()),
        pending_permissions: 0,
        title: crate::session::catalog::summarize(dir, &meta.id).title,
        parent: meta.parent.clone(),
        node: None,
    };
    Some(Dormant { info, meta })
}

impl SessionManager {
    /// Lists the sessions a previous process left open in the agents directory (see the
    /// module). Returns how many.
    pub fn load_dormant(&self) -> usize {
        let dir = &self.inner.log_dir;
        let Ok(entries) = std::fs::read_dir(dir) else {
            return 0;
        };
        let mut found = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".meta.json")) else {
                continue;
            };
            match SessionMeta::load(dir, id) {
                Ok(meta) if meta.id == id => found.extend(dormant(dir, meta)),
                Ok(_) => tracing::warn!(id, "session metadata names another id; skipped"),
                Err(e) => tracing::warn!(id, error = %e, "unreadable session metadata; skipped"),
            }
        }
        let live = lock(&self.inner.sessions);
        let mut table = lock(&self.inner.dormant);
        for session in found {
            if !live.contains_key(&session.meta.id) {
                table.left.insert(session.meta.id.clone(), session);
            }
        }
        table.left.len()
    }

    /// The sessions left open by a previous process, oldest first, as `dead`.
    pub fn dormant(&self) -> Vec<SessionInfo> {
        let mut all: Vec<SessionInfo> = lock(&self.inner.dormant)
            .left
            .values()
            .map(|d| d.info.clone())
            .collect();
        all.sort_by(|a, b| a.created_at.cmp(&b.created_at));
        all
    }

    /// The owner of a session [`SessionManager::reopen`] can resume: one left open by a
    /// previous process, or one closed in this one.
    pub fn reopenable_owner(&self, id: &str) -> Option<String> {
        if let Some(d) = lock(&self.inner.dormant).left.get(id) {
            return Some(d.info.owner.clone());
        }
        self.get(id)
            .filter(|h| h.session.status() == Status::Dead)
            .map(|h| h.owner.clone())
    }

    /// Resumes a dead session from its log, under its recorded owner; `limits` are the
    /// caller's (a `user` token's: the session must be recorded as theirs, and its model and
    /// directory pass as for a new one).
    pub async fn reopen(&self, id: &str, limits: Option<Limits>) -> Result<Arc<Handle>, Error> {
        let stored = {
            let mut table = lock(&self.inner.dormant);
            if !table.reopening.insert(id.to_string()) {
                return Err(Error::Usage(format!(
                    "session {id} is already being reopened"
                )));
            }
            table.left.get(id).map(|d| d.meta.clone())
        };
        let _reopening = Reopening { manager: self, id };
        let meta = match stored {
            Some(meta) => meta,
            None => match self.get(id) {
                Some(h) if h.session.status() == Status::Dead => {
                    let mut meta = h.meta.clone();
                    meta.owner = Some(h.owner.clone());
                    meta
                }
                Some(_) => return Err(Error::Usage(format!("session {id} is already open"))),
                None => return Err(Error::Usage(format!("no session {id} to reopen"))),
            },
        };
        let owner = meta.owner.clone().unwrap_or_default();
        let spec = OpenSpec {
            id: Some(id.to_string()),
            resume: Some(id.to_string()),
            // The model server it talked to, as it was opened (none for an external agent).
            base_url: Some(meta.base_url.clone()).filter(|b| !b.is_empty()),
            // What it was opened with, not the defaults: a reopen never widens its preset.
            system: meta.system.clone(),
            permission: meta.permission.clone(),
            // Its MCP servers as chosen, of those the config still names: never more.
            mcp_select: meta.mcp_servers.clone(),
            owner: Some(owner.clone()),
            limits,
            ..OpenSpec::default()
        };
        let handle = self.open(spec, &owner).await?;
        lock(&self.inner.dormant).left.remove(id);
        Ok(handle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_envelope_is_read_from_the_end_past_a_torn_line_and_long_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.events.jsonl");
        let line = |seq: u64, text: &str| {
            format!(
                r#"{{"seq":{seq},"ts":"2026-12-01T00:00:00.000Z","agent":"a","turn":{seq},"kind":"user_text","data":{{"content":{{"type":"text","text":"{text}"}}}}}}"#
            )
        };
        let long = "x".repeat(300 * 1024);
        let text = format!(
            "{}\n{}\n{}\n{{\"seq\":4,\"ts",
            line(1, "a"),
            line(2, "b"),
            line(3, &long)
        );
        std::fs::write(&path, text).unwrap();
        let last = last_envelope(&path).unwrap();
        assert_eq!((last.seq, last.turn), (3, 3));
        std::fs::write(&path, "").unwrap();
        assert!(last_envelope(&path).is_none());
    }
}
