//! `<id>.meta.json` beside the event log: what a session was opened with, so `--resume` and
//! later surfaces (status, listings) know its model and directory.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionMeta {
    pub id: String,
    pub model: String,
    pub base_url: String,
    pub cwd: PathBuf,
    pub created_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// Set when the session ran in an isolated worktree (`corral run --worktree`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<WorktreeMeta>,
    /// An external agent's own session/thread id (claude `--resume`, ACP `session/load`,
    /// codex thread), for resuming.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_id: Option<String>,
    /// Who opened it through a session manager (a server token's subject, `mcp`, `acp`):
    /// after a restart the session is listed for that owner only, and only they (or an admin)
    /// may reopen it. `None` for `corral run`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The permission preset it was opened with, if one was named: a reopened session keeps
    /// it rather than falling back to the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission: Option<String>,
    /// The MCP servers it was opened with, by name, when it was opened with a choice (a
    /// REST `mcp_servers`, its own definitions): a reopened session gets the config's servers
    /// of these names, never more. Definitions are not kept (their `env` and headers may
    /// hold secrets). `None`: every configured server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_servers: Option<Vec<String>>,
    /// The effort it was opened with, if one was chosen: a resumed session keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<crate::model::Effort>,
    /// The session that delegated this one (`delegate`), if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
}

/// Where a worktree session's changes live and what they started from, so they can be
/// reviewed, merged or removed after the session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorktreeMeta {
    /// The linked worktree's directory (its top, not the session's subdirectory).
    pub path: PathBuf,
    /// `corral/<session-id>`.
    pub branch: String,
    /// The commit the branch was created from (full hex id).
    pub base: String,
    /// The working tree of the repository the session was started in.
    pub repo: PathBuf,
}

impl SessionMeta {
    pub fn path(dir: &Path, id: &str) -> PathBuf {
        dir.join(format!("{id}.meta.json"))
    }

    pub fn save(&self, dir: &Path) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(Self::path(dir, &self.id), text)
    }

    pub fn load(dir: &Path, id: &str) -> std::io::Result<SessionMeta> {
        let text = std::fs::read_to_string(Self::path(dir, id))?;
        serde_json::from_str(&text).map_err(std::io::Error::other)
    }
}
