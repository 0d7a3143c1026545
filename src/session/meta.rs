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
