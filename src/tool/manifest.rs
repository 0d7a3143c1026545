//! Tool manifests: `tools/<name>.toml`, embedded at build time. The one description of each
//! tool — what the model is told, the argument schema, the danger level, the output limit.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::Deserialize;
use serde_json::Value;

pub use crate::model::Danger;
use crate::model::ToolSchema;

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
    /// Other names models trained on other runtimes give an argument (`old_string` for
    /// `old_text`), alias → name. Never shown to the model; calls are renamed before they are
    /// validated, so the gate, the guard and the tool only ever see the schema's names.
    #[serde(default)]
    pub aliases: BTreeMap<String, String>,
    /// What of the user's desktop the tool cannot work without; a session whose environment
    /// lacks it does not offer the tool (see `tool::desktop::presence`).
    #[serde(default)]
    pub needs: Vec<Need>,
}

/// A part of the user's desktop session a tool needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Need {
    /// An X11 display that accepts a connection (screen and clipboard live there).
    Display,
    /// A D-Bus session bus that accepts a connection (notifications go over it).
    SessionBus,
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

    /// `args` with every alias renamed to the argument it stands for, wherever the schema
    /// declares that argument (nested objects and array items included); a key the schema
    /// already declares is never renamed. Err: an alias and its argument both given, with
    /// different values.
    pub fn normalise_aliases(&self, args: Value) -> Result<Value, String> {
        if self.aliases.is_empty() {
            return Ok(args);
        }
        rename_aliases(args, &self.parameters, &self.aliases, "")
    }
}

fn rename_aliases(
    value: Value,
    schema: &Value,
    aliases: &BTreeMap<String, String>,
    at: &str,
) -> Result<Value, String> {
    match value {
        Value::Object(map) => {
            let Some(props) = schema.get("properties").and_then(Value::as_object) else {
                return Ok(Value::Object(map));
            };
            let mut out = serde_json::Map::new();
            for (key, value) in map {
                let name = match aliases.get(&key) {
                    Some(name) if !props.contains_key(&key) && props.contains_key(name) => {
                        name.clone()
                    }
                    _ => key.clone(),
                };
                let path = if at.is_empty() {
                    name.clone()
                } else {
                    format!("{at}.{name}")
                };
                let value = match props.get(&name) {
                    Some(prop) => rename_aliases(value, prop, aliases, &path)?,
                    None => value,
                };
                if let Some(earlier) = out.get(&name)
                    && *earlier != value
                {
                    return Err(format!(
                        "\"{path}\" is given twice, under two names with different values \
                         (\"{key}\" is another name for \"{name}\")"
                    ));
                }
                out.insert(name, value);
            }
            Ok(Value::Object(out))
        }
        Value::Array(items) => match schema.get("items") {
            Some(item_schema) => items
                .into_iter()
                .enumerate()
                .map(|(i, item)| rename_aliases(item, item_schema, aliases, &format!("{at}[{i}]")))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array),
            None => Ok(Value::Array(items)),
        },
        other => Ok(other),
    }
}

/// Whether `name` is declared as a property anywhere in `schema`.
fn declares(schema: &Value, name: &str) -> bool {
    let props = schema.get("properties").and_then(Value::as_object);
    props.is_some_and(|p| p.contains_key(name) || p.values().any(|s| declares(s, name)))
        || schema
            .get("items")
            .is_some_and(|items| declares(items, name))
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
    ("edit_file", include_str!("../../tools/edit_file.toml")),
    ("apply_patch", include_str!("../../tools/apply_patch.toml")),
    ("shell", include_str!("../../tools/shell.toml")),
    ("python", include_str!("../../tools/python.toml")),
    ("screenshot", include_str!("../../tools/screenshot.toml")),
    ("computer", include_str!("../../tools/computer.toml")),
    ("windows", include_str!("../../tools/windows.toml")),
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
    ("delegate", include_str!("../../tools/delegate.toml")),
    (
        "delegate_merge",
        include_str!("../../tools/delegate_merge.toml"),
    ),
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
    if let Some((alias, name)) = manifest.aliases.iter().find(|(alias, name)| {
        !declares(&manifest.parameters, name) || declares(&manifest.parameters, alias)
    }) {
        return Err(ManifestError {
            file,
            reason: format!(
                "alias {alias:?} must stand for a declared argument ({name:?}) and not be one"
            ),
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

    fn edit_file() -> &'static ToolManifest {
        manifests()
            .unwrap()
            .iter()
            .find(|m| m.name == "edit_file")
            .unwrap()
    }

    #[test]
    fn aliases_are_renamed_where_the_schema_declares_their_argument() {
        let args = serde_json::json!({
            "file_path": "a.rs",
            "old_string": "x",
            "newString": "y",
            "edits": [{"old_str": "a", "new_string": "b", "replaceAll": true}],
        });
        assert_eq!(
            edit_file().normalise_aliases(args).unwrap(),
            serde_json::json!({
                "path": "a.rs",
                "old_text": "x",
                "new_text": "y",
                "edits": [{"old_text": "a", "new_text": "b", "replace_all": true}],
            })
        );
        // The same value under both names is one argument; different values are an error.
        let same = serde_json::json!({"path": "a", "filePath": "a"});
        assert_eq!(
            edit_file().normalise_aliases(same).unwrap(),
            serde_json::json!({"path": "a"})
        );
        let clash = serde_json::json!({"path": "a", "filePath": "b"});
        let e = edit_file().normalise_aliases(clash).unwrap_err();
        assert!(
            e.contains("\"filePath\" is another name for \"path\""),
            "{e}"
        );
        // Unknown names stay as they are, for validation to report.
        let unknown = serde_json::json!({"path": "a", "mode": 1});
        assert_eq!(
            edit_file().normalise_aliases(unknown.clone()).unwrap(),
            unknown
        );
    }

    #[test]
    fn an_alias_must_name_a_declared_argument() {
        let text = "name = \"t\"\ntitle = \"T\"\nkind = \"other\"\ndanger = \"safe\"\n\
                    description = \"d\"\n[aliases]\nfile = \"nope\"\n\
                    [parameters]\ntype = \"object\"\n[parameters.properties.path]\n\
                    type = \"string\"\n";
        let e = parse("t", text).unwrap_err();
        assert!(e.reason.contains("alias \"file\""), "{e}");
    }
}
