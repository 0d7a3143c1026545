//! Each session's private temp dir (`$TMPDIR/corral-tmp-<session>-XXXXXX`, the tools'
//! `TMPDIR`): removed when the session ends, and, when its runtime crashed, by the next start.
//!
//! The owner holds an exclusive `flock` on the directory for as long as the session lives; the
//! kernel drops it when the process dies, however it dies. So a start removes exactly the
//! `corral-tmp-*` directories nobody holds: a live session's is locked and stays. The lock is
//! taken before the directory gets its findable name (it is made under a hidden name, locked,
//! then renamed without replacing anything), so a sweep never sees one unlocked in between.
//! Only directories owned by this user are considered, and symlinks never.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

const PREFIX: &str = "corral-tmp-";

/// A session's temp dir, locked while this lives and removed on drop.
#[derive(Debug)]
pub struct SessionTmp {
    path: PathBuf,
    _lock: File,
}

impl SessionTmp {
    /// Makes and locks a new temp dir for `session` under the system's temp dir.
    pub fn create(session: &str) -> std::io::Result<SessionTmp> {
        SessionTmp::create_in(&std::env::temp_dir(), session)
    }

    fn create_in(parent: &Path, session: &str) -> std::io::Result<SessionTmp> {
        let hidden = tempfile::Builder::new()
            .prefix(&format!(".{PREFIX}{session}-"))
            .tempdir_in(parent)?
            .keep();
        let lock = File::open(&hidden)?;
        lock.lock()?;
        let name = hidden
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix('.'))
            .map(str::to_owned)
            .ok_or_else(|| std::io::Error::other("unexpected temp dir name"))?;
        let path = parent.join(name);
        if let Err(e) = rustix::fs::renameat_with(
            rustix::fs::CWD,
            &hidden,
            rustix::fs::CWD,
            &path,
            rustix::fs::RenameFlags::NOREPLACE,
        ) {
            let _ = std::fs::remove_dir(&hidden);
            return Err(e.into());
        }
        Ok(SessionTmp { path, _lock: lock })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SessionTmp {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(path = %self.path.display(), error = %e, "removing the session's temp dir");
        }
    }
}

static SWEPT: AtomicBool = AtomicBool::new(false);

/// Removes the temp dirs of sessions whose runtime is gone, once per process. Returns how
/// many were removed.
pub fn sweep_once() -> usize {
    if SWEPT.swap(true, Ordering::SeqCst) {
        return 0;
    }
    sweep(&std::env::temp_dir())
}

fn sweep(parent: &Path) -> usize {
    let Ok(dir) = std::fs::read_dir(parent) else {
        return 0;
    };
    let me = rustix::process::geteuid().as_raw();
    let mut removed = 0;
    for entry in dir.flatten() {
        let name = entry.file_name();
        if !name.to_str().is_some_and(|n| n.starts_with(PREFIX)) {
            continue;
        }
        let path = entry.path();
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() && meta.uid() == me => {}
            _ => continue,
        }
        let Ok(lock) = File::open(&path) else {
            continue;
        };
        // Held: a live session's. Taken: its owner is gone (and no other start removes it
        // while this holds it).
        if lock.try_lock().is_err() {
            continue;
        }
        match std::fs::remove_dir_all(&path) {
            Ok(()) => removed += 1,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "removing a crashed session's temp dir");
            }
        }
    }
    if removed > 0 {
        tracing::info!(removed, "removed temp dirs of crashed sessions");
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sweep_removes_unlocked_dirs_and_keeps_locked_ones() {
        let parent = tempfile::tempdir().unwrap();
        let live = SessionTmp::create_in(parent.path(), "live").unwrap();
        assert!(live.path().starts_with(parent.path()));
        let name = live.path().file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with("corral-tmp-live-"), "{name}");
        std::fs::write(live.path().join("f"), "x").unwrap();
        let crashed = parent.path().join("corral-tmp-dead-abc");
        std::fs::create_dir_all(crashed.join("sub")).unwrap();
        let other = parent.path().join("corral-it-keep");
        std::fs::create_dir(&other).unwrap();
        std::os::unix::fs::symlink(&other, parent.path().join("corral-tmp-link")).unwrap();
        assert_eq!(sweep(parent.path()), 1);
        assert!(!crashed.exists());
        assert!(live.path().join("f").exists() && other.exists());
        let path = live.path().to_path_buf();
        drop(live);
        assert!(!path.exists());
    }
}
