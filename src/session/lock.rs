//! One process per session: `<id>.lock` beside the event log carries an `flock` for as long as
//! a process runs the session, so a second `run --resume`, `serve` or MCP server cannot append
//! to the same log (duplicate seqs, two "turn 2"s). The kernel drops the lock when the holder
//! exits however it exits, kill -9 included, so a lock is never stale. The file itself stays:
//! removing it would let two processes lock two different files of the same name.
//!
//! The holder writes who it is (pid, command, since when) into the file so the refused one can
//! say so. Reading a session (its log, history, listings) takes no lock.

use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// How much of the holder's command line is recorded.
const COMMAND_CHARS: usize = 160;

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error(
        "session {id} is in use by {holder}; only one process may run a session at a time \
         (stop that one first, or read the session's log, which needs no lock)"
    )]
    Held { id: String, holder: String },
    #[error("cannot lock session {id} ({}): {source}", path.display())]
    Io {
        id: String,
        path: PathBuf,
        source: io::Error,
    },
}

/// Who holds a session, as written into its lock file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    pub pid: u32,
    pub command: String,
    pub since: String,
}

impl Holder {
    fn this_process() -> Holder {
        Holder {
            pid: std::process::id(),
            command: command_line(),
            since: crate::event::Timestamp::now().to_string(),
        }
    }

    fn describe(text: &[u8]) -> String {
        match serde_json::from_slice::<Holder>(text) {
            Ok(h) => format!("pid {} (`{}`), since {}", h.pid, h.command, h.since),
            // Locked, but the holder has not written itself down yet (or could not).
            Err(_) => "another process (it has not recorded which)".to_string(),
        }
    }
}

/// `/proc/self/cmdline`, space-joined, control characters replaced, cut to a readable size.
fn command_line() -> String {
    let raw = std::fs::read("/proc/self/cmdline").unwrap_or_default();
    let words: Vec<String> = raw
        .split(|b| *b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    let mut line: String = words
        .join(" ")
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if line.chars().count() > COMMAND_CHARS {
        line = line.chars().take(COMMAND_CHARS).collect::<String>() + "…";
    }
    line
}

pub fn lock_path(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{id}.lock"))
}

/// A held session lock; dropping it releases the session.
#[derive(Debug)]
pub struct SessionLock {
    _file: File,
}

impl SessionLock {
    /// Takes the lock of session `id` in `dir`, or says who has it.
    pub fn acquire(dir: &Path, id: &str) -> Result<SessionLock, LockError> {
        let path = lock_path(dir, id);
        let io_error = |source| LockError::Io {
            id: id.to_string(),
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(io_error)?;
        let file = OpenOptions::new()
            .create(true)
            .read(true)
            .write(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(io_error)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(LockError::Held {
                    id: id.to_string(),
                    holder: Holder::describe(&read_all(&file)),
                });
            }
            Err(TryLockError::Error(source)) => return Err(io_error(source)),
        }
        // Only the holder changes the file, so truncating here races with nobody.
        let record = serde_json::to_vec(&Holder::this_process()).unwrap_or_default();
        if let Err(e) = file.set_len(0).and_then(|()| file.write_all_at(&record, 0)) {
            // The lock holds without it; only the refusal's wording suffers.
            tracing::warn!(path = %path.display(), error = %e, "cannot record the session's holder");
        }
        Ok(SessionLock { _file: file })
    }
}

/// Whether a live process holds session `id` now. Probes with a shared lock on a read-only
/// open, so the holder's record is left as it is; a missing lock file means nobody.
pub fn is_held(dir: &Path, id: &str) -> bool {
    match File::open(lock_path(dir, id)) {
        Ok(file) => matches!(file.try_lock_shared(), Err(TryLockError::WouldBlock)),
        Err(_) => false,
    }
}

fn read_all(file: &File) -> Vec<u8> {
    let mut text = vec![0u8; 4096];
    let n = file.read_at(&mut text, 0).unwrap_or(0);
    text.truncate(n);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_refused_with_the_holder_named_and_free_again_after_release() {
        let dir = tempfile::tempdir().unwrap();
        let held = SessionLock::acquire(dir.path(), "abc").unwrap();
        let refused = SessionLock::acquire(dir.path(), "abc").unwrap_err();
        let text = refused.to_string();
        assert!(matches!(refused, LockError::Held { .. }), "{text}");
        assert!(
            text.contains(&format!("pid {}", std::process::id())) && text.contains("since "),
            "{text}"
        );
        assert!(SessionLock::acquire(dir.path(), "other").is_ok());
        assert!(is_held(dir.path(), "abc"));
        assert!(!is_held(dir.path(), "never-opened"));
        drop(held);
        assert!(!is_held(dir.path(), "abc"));
        assert!(SessionLock::acquire(dir.path(), "abc").is_ok());
    }

    #[test]
    fn an_unreadable_record_still_refuses() {
        assert_eq!(
            Holder::describe(b""),
            "another process (it has not recorded which)"
        );
        let h = Holder {
            pid: 7,
            command: "corral run -i".into(),
            since: "2026-12-01T12:00:00.000Z".into(),
        };
        let text = Holder::describe(&serde_json::to_vec(&h).unwrap());
        assert_eq!(
            text,
            "pid 7 (`corral run -i`), since 2026-12-01T12:00:00.000Z"
        );
    }
}
