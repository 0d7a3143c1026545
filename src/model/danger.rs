//! How much harm a tool call can do: the level the gate decides by. Shared by tool manifests
//! and the configuration of MCP servers, so it lives below both.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Danger {
    Safe,
    Moderate,
    Dangerous,
}

impl Danger {
    /// The level's name, as presets and permission requests write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Danger::Safe => "safe",
            Danger::Moderate => "moderate",
            Danger::Dangerous => "dangerous",
        }
    }
}
