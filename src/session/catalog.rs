//! The sessions on this machine, as their files in the agents directory tell them, without
//! opening any: `<id>.events.jsonl` (the log, which makes a session), `<id>.meta.json` (what it
//! was opened with; optional, a session without one is listed with what its log says) and
//! `<id>.lock` (held while a process runs it). `corral sessions` lists them, `corral logs`
//! finds one by a prefix of its id.
//!
//! A session's status comes from its lock and its last `status` envelope:
//! - a process holds the lock: the last status the log records (`idle` before the first);
//! - the log ends closed (`dead`): `dead`, whoever holds it;
//! - nobody holds it and the log does not end closed: `stopped` — the process running it was
//!   killed or crashed (`corral run --resume ID` continues it; `serve` lists it as `dead`).
//!
//! Reading takes no lock and writes nothing; a log being appended to is read as far as its
//! last complete line.

mod scan;
#[cfg(test)]
mod tests;

use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{SessionMeta, is_held, log_path};
use crate::event::{Status, Timestamp, Usage};
use scan::LogSummary;

/// How much of the first prompt a title keeps.
const TITLE_CHARS: usize = 60;

/// One session as the listing shows it.
#[derive(Debug, Clone, Serialize)]
pub struct LocalSession {
    pub id: String,
    /// The first prompt, on one line, cut to about 60 characters with `…`; empty before any.
    pub title: String,
    /// `None` when the session has no readable metadata.
    pub model: Option<String>,
    /// `native`, `claude`, `acp` or `codex`, from the model.
    pub backend: Option<&'static str>,
    pub cwd: Option<String>,
    pub worktree: Option<String>,
    /// Who opened it through a session manager (a token's subject, `mcp`, `acp`).
    pub owner: Option<String>,
    /// The session that delegated this one.
    pub parent: Option<String>,
    /// From the metadata, else the log's first envelope.
    pub created_at: Option<String>,
    /// The time of the log's last envelope.
    pub last_activity: Option<Timestamp>,
    pub status: LocalStatus,
    /// The highest turn number in the log.
    pub turns: u32,
    /// The sum of every turn's `result` usage.
    pub usage: Usage,
    /// Complete lines of the log that are envelopes.
    pub events: u64,
    /// Lines that are not (damage); a torn last line is not counted as either.
    pub unreadable_lines: u64,
    pub event_log: PathBuf,
}

/// [`Status`] for a session some process runs, or `stopped` for one nobody runs that was not
/// closed (see the module).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LocalStatus {
    Starting,
    Idle,
    Working,
    WaitingApproval,
    Dead,
    Stopped,
}

impl LocalStatus {
    fn of(held: bool, last: Option<Status>) -> LocalStatus {
        match (held, last) {
            (_, Some(Status::Dead)) => LocalStatus::Dead,
            (true, Some(Status::Starting)) => LocalStatus::Starting,
            (true, Some(Status::Idle) | None) => LocalStatus::Idle,
            (true, Some(Status::Working)) => LocalStatus::Working,
            (true, Some(Status::WaitingApproval)) => LocalStatus::WaitingApproval,
            (false, _) => LocalStatus::Stopped,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            LocalStatus::Starting => "starting",
            LocalStatus::Idle => "idle",
            LocalStatus::Working => "working",
            LocalStatus::WaitingApproval => "waiting_approval",
            LocalStatus::Dead => "dead",
            LocalStatus::Stopped => "stopped",
        }
    }
}

/// Why an id given on the command line names no one session.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error("no session {text:?} in {} (`corral sessions` lists them)", dir.display())]
    Unknown { text: String, dir: PathBuf },
    #[error(
        "{text:?} is the start of {} session ids: {}; give more of it",
        candidates.len(),
        some_of(candidates)
    )]
    Ambiguous {
        text: String,
        candidates: Vec<String>,
    },
    #[error("cannot read the sessions in {}: {source}", dir.display())]
    Io { dir: PathBuf, source: io::Error },
}

/// The first few candidates, and how many more there are.
fn some_of(candidates: &[String]) -> String {
    const SHOWN: usize = 8;
    let mut text = candidates
        .iter()
        .take(SHOWN)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if candidates.len() > SHOWN {
        text.push_str(&format!(" and {} more", candidates.len() - SHOWN));
    }
    text
}

/// The ids of the sessions in `dir` (those with a log), sorted; none when it does not exist.
pub fn ids(dir: &Path) -> io::Result<Vec<String>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut ids = Vec::new();
    for entry in entries {
        let name = entry?.file_name();
        if let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".events.jsonl"))
            && !id.is_empty()
        {
            ids.push(id.to_string());
        }
    }
    ids.sort();
    Ok(ids)
}

/// The session `text` names: its whole id, or a prefix only one id starts with.
pub fn resolve(dir: &Path, text: &str) -> Result<String, ResolveError> {
    let unknown = || ResolveError::Unknown {
        text: text.to_string(),
        dir: dir.to_path_buf(),
    };
    if text.is_empty() {
        return Err(unknown());
    }
    let ids = ids(dir).map_err(|source| ResolveError::Io {
        dir: dir.to_path_buf(),
        source,
    })?;
    if ids.iter().any(|id| id == text) {
        return Ok(text.to_string());
    }
    let mut candidates: Vec<String> = ids.into_iter().filter(|id| id.starts_with(text)).collect();
    match candidates.len() {
        0 => Err(unknown()),
        1 => Ok(candidates.remove(0)),
        _ => Err(ResolveError::Ambiguous {
            text: text.to_string(),
            candidates,
        }),
    }
}

/// Every session in `dir`, the most recently active first. A log that cannot be read, or
/// reads as damage, still lists its session with whatever could be read.
pub fn list(dir: &Path) -> io::Result<Vec<LocalSession>> {
    let mut sessions: Vec<LocalSession> = ids(dir)?.iter().map(|id| summarize(dir, id)).collect();
    sessions.sort_by(|a, b| {
        let key = |s: &LocalSession| s.last_activity.map(|t| t.0);
        key(b)
            .cmp(&key(a))
            .then_with(|| b.created_at.cmp(&a.created_at))
            .then_with(|| a.id.cmp(&b.id))
    });
    Ok(sessions)
}

/// The most recently active session opened in `root` (or in a worktree of the repository at
/// `root`) that no process runs, no other session delegated, and that has had a turn: what
/// `--continue` resumes.
pub fn latest_in(dir: &Path, root: &Path) -> io::Result<Option<LocalSession>> {
    Ok(list(dir)?.into_iter().find(|session| {
        let free = matches!(session.status, LocalStatus::Dead | LocalStatus::Stopped);
        free && session.parent.is_none() && session.turns > 0 && opened_in(dir, &session.id, root)
    }))
}

fn opened_in(dir: &Path, id: &str, root: &Path) -> bool {
    SessionMeta::load(dir, id).is_ok_and(|meta| {
        meta.cwd == root || meta.worktree.is_some_and(|worktree| worktree.repo == root)
    })
}

/// One session of `dir`, read from its files.
pub fn summarize(dir: &Path, id: &str) -> LocalSession {
    let event_log = log_path(dir, id);
    let log = LogSummary::read(&event_log).unwrap_or_else(|e| {
        tracing::warn!(path = %event_log.display(), error = %e, "cannot read an event log");
        LogSummary::default()
    });
    let meta = match SessionMeta::load(dir, id) {
        Ok(meta) if meta.id == id => Some(meta),
        Ok(_) => {
            tracing::warn!(id, "session metadata names another id; ignored");
            None
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => {
            tracing::warn!(id, error = %e, "unreadable session metadata; ignored");
            None
        }
    };
    let held = is_held(dir, id);
    let meta = meta.as_ref();
    LocalSession {
        id: id.to_string(),
        title: title_of(log.first_prompt.as_deref().unwrap_or_default()),
        model: meta.map(|m| m.model.clone()),
        backend: meta.map(|m| crate::model::backend_of(&m.model)),
        cwd: meta.map(|m| m.cwd.display().to_string()),
        worktree: meta.and_then(|m| m.worktree.as_ref().map(|w| w.path.display().to_string())),
        owner: meta.and_then(|m| m.owner.clone()),
        parent: meta.and_then(|m| m.parent.clone()),
        created_at: meta
            .map(|m| m.created_at.clone())
            .or_else(|| log.first_ts.map(|t| t.to_string())),
        last_activity: log.last_ts,
        status: LocalStatus::of(held, log.last_status),
        turns: log.turns,
        usage: log.usage,
        events: log.events,
        unreadable_lines: log.unreadable,
        event_log,
    }
}

/// A prompt as a title: whitespace runs (newlines included) as one space, cut with `…`.
/// Anything else stays as the prompt had it; whoever shows it escapes it. One rule for every
/// place a session is named by its prompt (`sessions`, the server's list, `top`).
pub(crate) fn title_of(prompt: &str) -> String {
    let mut title = String::new();
    let mut chars = 0;
    for (i, word) in prompt.split_whitespace().enumerate() {
        for c in (i > 0).then_some(' ').into_iter().chain(word.chars()) {
            if chars == TITLE_CHARS {
                title.push('…');
                return title;
            }
            title.push(c);
            chars += 1;
        }
    }
    title
}
