//! What `agent_status` and `agent_list` say of an agent: the manager's view of the session,
//! plus the two fields Kaimon's clients read to follow an external agent on their own:
//! `session_id` (the agent's own id: claude's session, an ACP session, a codex thread; null
//! for corral's native loop) and `transcript` (the agent's own record where it keeps one
//! corral can name, else corral's event log).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::host::manager::Handle;
use crate::session::SessionMeta;

/// One agent's status object.
pub fn status(handle: &Handle) -> Value {
    let info = handle.info();
    let session_id = external_id(handle);
    let transcript = session_id
        .as_deref()
        .filter(|_| info.backend == "claude")
        .and_then(|id| claude_transcript(&claude_config_dir()?, &handle.meta.cwd, id))
        .map(|p| p.display().to_string())
        .or_else(|| info.event_log.clone());
    let mut value = json!(info);
    value["session_id"] = json!(session_id);
    value["transcript"] = json!(transcript);
    value
}

/// The external agent's id: recorded in the session's meta file once the agent reports it
/// (after the handle's copy of the meta was taken), or carried over from a resumed session.
fn external_id(handle: &Handle) -> Option<String> {
    let from_disk = handle
        .session
        .log_path()
        .and_then(Path::parent)
        .and_then(|dir| SessionMeta::load(dir, handle.id()).ok())
        .and_then(|meta| meta.external_id);
    from_disk.or_else(|| handle.meta.external_id.clone())
}

/// claude's config directory: `CLAUDE_CONFIG_DIR`, else `~/.claude` (the agent inherits
/// corral's environment unless it is hermetic).
fn claude_config_dir() -> Option<PathBuf> {
    std::env::var_os("CLAUDE_CONFIG_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| dirs::home_dir().map(|h| h.join(".claude")))
}

/// claude keeps `<config dir>/projects/<cwd, every non-alphanumeric char a '-'>/<id>.jsonl`.
/// Named only when the file is there: a hermetic agent's lives in its private HOME, gone
/// with it, and before the first turn there is none yet.
fn claude_transcript(config_dir: &Path, cwd: &Path, session_id: &str) -> Option<PathBuf> {
    // An id is claude's UUID; anything else must not become a path.
    if session_id.is_empty()
        || !session_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-')
    {
        return None;
    }
    // claude names the directory after its real working directory.
    let cwd = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf());
    let munged: String = cwd
        .to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let path = config_dir
        .join("projects")
        .join(munged)
        .join(format!("{session_id}.jsonl"));
    path.is_file().then_some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claude_transcript_is_named_only_where_claude_keeps_it() {
        let root = tempfile::tempdir().unwrap();
        let cwd = root.path().join("my_proj.v2");
        std::fs::create_dir(&cwd).unwrap();
        let config = root.path().join("claude-config");
        let id = "0b6f3c1e-2a4d-4e8f-9a1b-3c5d7e9f1a2b";
        assert_eq!(
            claude_transcript(&config, &cwd, id),
            None,
            "not written yet"
        );
        let real = std::fs::canonicalize(&cwd).unwrap().display().to_string();
        let munged = real.replace(['/', '.', '_'], "-");
        let dir = config.join("projects").join(&munged);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join(format!("{id}.jsonl"));
        std::fs::write(&file, "{}\n").unwrap();
        assert!(munged.ends_with("-my-proj-v2"), "{munged}");
        assert_eq!(claude_transcript(&config, &cwd, id), Some(file));
        // An id that is not claude's shape never becomes a path, even one that exists.
        std::fs::write(dir.join("x.jsonl"), "").unwrap();
        assert_eq!(claude_transcript(&config, &cwd, "../x/x"), None);
        assert_eq!(claude_transcript(&config, &cwd, ""), None);
    }
}
