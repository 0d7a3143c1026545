//! Tool manifests: `tools/<name>.toml`, embedded at build time. The one description of each
//! tool — what the model is told, the argument schema, the danger level, the output limit.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::ToolSchema;

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

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolManifest {
    pub name: String,
    /// Short human title, shown in tool-call lines and approval prompts.
    pub title: String,
    /// ACP tool kind: read, edit, search, execute, fetch, other.
    pub kind: String,
    pub danger: Danger,
    /// What the model is told about the tool.
    pub description: String,
    /// The description the compact prompt uses (small context windows): one or two sentences.
    #[serde(default)]
    pub short: Option<String>,
    /// Output handed back to the model is cut head+tail beyond this many bytes.
    #[serde(default = "default_max_output_bytes")]
    pub max_output_bytes: usize,
    /// JSON schema of the arguments (an object schema).
    pub parameters: Value,
}

fn default_max_output_bytes() -> usize {
    32 * 1024
}

impl ToolManifest {
    pub fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: self.name.clone(),
            description: self.description.clone(),
            parameters: self.parameters.clone(),
        }
    }
}

const EMBEDDED: &[(&str, &str)] = &[
    ("read_file", include_str!("../../tools/read_file.toml")),
    (
        "list_directory",
        include_str!("../../tools/list_directory.toml"),
    ),
    (
        "search_files",
        include_str!("../../tools/search_files.toml"),
    ),
    ("write_file", include_str!("../../tools/write_file.toml")),
    ("shell", include_str!("../../tools/shell.toml")),
    ("python", include_str!("../../tools/python.toml")),
    ("screenshot", include_str!("../../tools/screenshot.toml")),
    (
        "clipboard_read",
        include_str!("../../tools/clipboard_read.toml"),
    ),
    (
        "clipboard_write",
        include_str!("../../tools/clipboard_write.toml"),
    ),
    ("notify", include_str!("../../tools/notify.toml")),
    ("open_url", include_str!("../../tools/open_url.toml")),
    ("update_plan", include_str!("../../tools/update_plan.toml")),
];

#[derive(Debug, thiserror::Error)]
#[error("tool manifest tools/{file}.toml is invalid: {reason}")]
pub struct ManifestError {
    pub file: &'static str,
    pub reason: String,
}

/// The built-in tools' names (the tools/*.toml catalogue), without parsing anything.
pub fn tool_names() -> impl Iterator<Item = &'static str> {
    EMBEDDED.iter().map(|(name, _)| *name)
}

/// All embedded manifests, parsed once.
pub fn manifests() -> Result<&'static [ToolManifest], &'static ManifestError> {
    static PARSED: OnceLock<Result<Vec<ToolManifest>, ManifestError>> = OnceLock::new();
    PARSED
        .get_or_init(|| {
            EMBEDDED
                .iter()
                .map(|(file, text)| parse(file, text))
                .collect()
        })
        .as_ref()
        .map(Vec::as_slice)
}

fn parse(file: &'static str, text: &str) -> Result<ToolManifest, ManifestError> {
    let manifest: ToolManifest = toml::from_str(text).map_err(|e| ManifestError {
        file,
        reason: e.to_string(),
    })?;
    if manifest.name != file {
        return Err(ManifestError {
            file,
            reason: format!("name is {:?}, expected {file:?}", manifest.name),
        });
    }
    if manifest.parameters.get("type").and_then(Value::as_str) != Some("object") {
        return Err(ManifestError {
            file,
            reason: "parameters must be an object schema".into(),
        });
    }
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_embedded_manifest_parses() {
        let all = manifests().unwrap();
        assert_eq!(all.len(), EMBEDDED.len());
        for m in all {
            assert!(!m.description.is_empty(), "{} has no description", m.name);
            assert!(m.parameters.get("properties").is_some(), "{}", m.name);
        }
    }
}
