//! Removing the files of a session that never reached a model (see
//! [`super::Session::discard_if_unheard`]).

use std::io;
use std::path::Path;

use super::SessionMeta;

/// Removes the log at `log`, the metadata and lock beside it, and empty stderr logs of the
/// session's agent and MCP servers. A stderr log with something in it is why the session
/// never got going: then nothing is removed, so the person can read it. Whether the session
/// is gone.
pub(super) fn remove_files(log: &Path, id: &str) -> bool {
    let Some(dir) = log.parent() else {
        return false;
    };
    let stderr_logs = match stderr_logs(dir, id) {
        Ok(logs) => logs,
        Err(e) => {
            tracing::warn!(id, error = %e, "cannot look for a session's stderr logs; kept");
            return false;
        }
    };
    if stderr_logs
        .iter()
        .any(|path| std::fs::metadata(path).is_ok_and(|m| m.len() > 0))
    {
        tracing::info!(
            id,
            "kept: the session's agent or MCP servers wrote to stderr"
        );
        return false;
    }
    let mut gone = true;
    for path in [log.to_path_buf(), SessionMeta::path(dir, id)]
        .into_iter()
        .chain(stderr_logs)
    {
        if let Err(e) = std::fs::remove_file(&path)
            && e.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!(path = %path.display(), error = %e, "cannot remove an unused session's file");
            gone = false;
        }
    }
    if gone {
        let _ = std::fs::remove_file(super::lock::lock_path(dir, id));
        tracing::debug!(id, "removed a session no model was reached in");
    }
    gone
}

/// `<id>.stderr.log` and `<id>.mcp-<name>.stderr.log`.
fn stderr_logs(dir: &Path, id: &str) -> io::Result<Vec<std::path::PathBuf>> {
    let prefix = format!("{id}.");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(&prefix) && name.ends_with(".stderr.log") {
            found.push(dir.join(name.as_ref()));
        }
    }
    Ok(found)
}
