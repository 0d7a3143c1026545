//! The system prompt: where the agent is, what day it is, how to use its tools. Two styles:
//! the full one, and a compact one for small context windows, where the prompt and every tool
//! definition together must leave most of the window for the work.

use std::path::Path;

use serde_json::Value;
use time::OffsetDateTime;

#[cfg(test)]
use crate::model::PromptMode;
use crate::model::ToolSchema;
use crate::tool::ToolManifest;

pub fn system_prompt(
    root: &Path,
    tool_names: &[&str],
    extra: Option<&str>,
    compact: bool,
) -> String {
    let date = OffsetDateTime::now_utc().date();
    let mut prompt = if compact {
        // Every line here is paid for on each request of a small window: only what changes
        // what the model does.
        format!(
            "You are corral, an agent that does tasks by calling tools.\n\
             Working directory: {root} ({os}). Date: {date}.\n\
             Paths are relative to the working directory. Read files before changing them. \
             If a tool fails, fix the call from its error. When done, answer briefly without \
             calling a tool.",
            root = root.display(),
            os = std::env::consts::OS,
        )
    } else {
        format!(
            "You are corral, an agent that completes tasks on the user's computer by calling tools.\n\
             Working directory: {root}\n\
             Operating system: {os} ({arch})\n\
             Date: {date}\n\
             Tools available: {tools}\n\
             \n\
             How to work:\n\
             - Look at files with the tools instead of guessing what they contain.\n\
             - Paths are relative to the working directory; nothing outside it can be reached.\n\
             - When the next step depends on a result, call one tool and wait for its result.\n\
             - When a tool fails, read the error, fix the arguments and try again, or say what blocked you.\n\
             - When the task is done, answer briefly in plain text without calling a tool.",
            root = root.display(),
            os = std::env::consts::OS,
            arch = std::env::consts::ARCH,
            tools = if tool_names.is_empty() {
                "none".to_string()
            } else {
                tool_names.join(", ")
            },
        )
    };
    if let Some(extra) = extra.map(str::trim).filter(|e| !e.is_empty()) {
        prompt.push_str("\n\nAdditional instructions:\n");
        prompt.push_str(extra);
    }
    prompt
}

/// A tool as the model is shown it: in the compact style, the manifest's `short` description
/// (its first sentence when it has none) and the parameters without their descriptions. The
/// schema the arguments are checked against stays the manifest's own.
pub fn tool_schema(manifest: &ToolManifest, compact: bool) -> ToolSchema {
    if !compact {
        return manifest.schema();
    }
    let description = manifest
        .short
        .clone()
        .unwrap_or_else(|| first_sentence(&manifest.description));
    let mut parameters = manifest.parameters.clone();
    strip_descriptions(&mut parameters);
    ToolSchema {
        name: manifest.name.clone(),
        description,
        parameters,
    }
}

fn first_sentence(text: &str) -> String {
    let end = text.find(". ").map_or(text.len(), |i| i + 1);
    text[..end].trim().to_string()
}

/// Keywords a compact schema leaves out: what the model reads past anyway (descriptions) and
/// limits the arguments are still checked against, with the full schema, when a call comes.
const ANNOTATIONS: &[&str] = &[
    "description",
    "additionalProperties",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "default",
    "examples",
    "title",
];

/// Removes [`ANNOTATIONS`] from a schema, leaving properties that happen to carry one of those
/// names alone.
fn strip_descriptions(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            map.retain(|key, _| !ANNOTATIONS.contains(&key.as_str()));
            for (key, value) in map.iter_mut() {
                if key == "properties" {
                    if let Value::Object(properties) = value {
                        properties.values_mut().for_each(strip_descriptions);
                    }
                } else {
                    strip_descriptions(value);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(strip_descriptions),
        _ => {}
    }
}

/// The system prompt with a compaction summary appended.
pub fn with_summary(base: &str, summary: &str) -> String {
    format!("{base}\n\n# Summary of the earlier conversation\n{summary}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::ToolRegistry;

    /// A conservative count for the budget: the tokenizers of the small models corral targets
    /// average more than 3 bytes of English and JSON per token.
    fn budget_tokens(text: &str) -> usize {
        text.len().div_ceil(3)
    }

    /// The system prompt and tool definitions, with or without the tools that are offered
    /// only where a display is (`needs = ["display"]`).
    fn rendered(compact: bool, desktop: bool) -> (String, String) {
        let tools = ToolRegistry::builtin().unwrap();
        let names: Vec<&str> = tools
            .names()
            .filter(|n| desktop || tools.get(n).unwrap().manifest.needs.is_empty())
            .collect();
        let system = system_prompt(Path::new("/home/user/project"), &names, None, compact);
        let schemas: Vec<ToolSchema> = names
            .iter()
            .map(|n| tool_schema(&tools.get(n).unwrap().manifest, compact))
            .collect();
        let definitions = serde_json::to_string(&schemas).unwrap();
        (system, definitions)
    }

    /// A small window gets every tool in 1500 tokens; a session with a display adds the
    /// desktop tools (screenshot, clipboard, computer, windows) for at most 600 more — such a
    /// session runs a model that can look at screenshots, whose window is larger anyway.
    #[test]
    fn the_compact_prompt_fits_in_1500_tokens_and_the_desktop_tools_in_600_more() {
        let tokens = |(system, definitions): (String, String)| {
            budget_tokens(&system) + budget_tokens(&definitions)
        };
        let headless = tokens(rendered(true, false));
        assert!(headless <= 1500, "compact prompt is {headless} tokens");
        let desktop = tokens(rendered(true, true));
        assert!(
            desktop <= headless + 600,
            "the desktop tools add {} tokens",
            desktop - headless
        );
        assert!(
            tokens(rendered(false, true)) > desktop * 2,
            "the full prompt should be far larger than the compact one"
        );
    }

    #[test]
    fn every_builtin_tool_has_a_short_description() {
        let tools = ToolRegistry::builtin().unwrap();
        for name in tools.names() {
            let short = tools.get(name).unwrap().manifest.short.clone();
            let short = short.unwrap_or_else(|| panic!("{name} has no short description"));
            assert!(
                !short.trim().is_empty() && short.len() <= 200,
                "{name}: {short:?}"
            );
        }
    }

    #[test]
    fn compact_schemas_keep_types_and_required_and_lose_descriptions() {
        let tools = ToolRegistry::builtin().unwrap();
        let manifest = &tools.get("read_file").unwrap().manifest;
        let schema = tool_schema(manifest, true);
        assert_eq!(
            schema.parameters["required"],
            manifest.parameters["required"]
        );
        assert_eq!(schema.parameters["properties"]["path"]["type"], "string");
        assert!(
            schema.parameters["properties"]["path"]
                .get("description")
                .is_none()
        );
        assert_eq!(tool_schema(manifest, false).parameters, manifest.parameters);
    }

    #[test]
    fn a_property_named_description_survives_stripping() {
        let mut schema = serde_json::json!({
            "type": "object",
            "description": "gone",
            "additionalProperties": false,
            "properties": {
                "description": {"type": "string", "description": "gone too"},
                "minimum": {"type": "integer", "minimum": 1},
            },
        });
        strip_descriptions(&mut schema);
        assert_eq!(
            schema,
            serde_json::json!({"type": "object", "properties": {
                "description": {"type": "string"},
                "minimum": {"type": "integer"},
            }})
        );
    }

    #[test]
    fn auto_is_compact_up_to_8192_tokens() {
        assert!(PromptMode::Auto.is_compact(8192));
        assert!(!PromptMode::Auto.is_compact(8193));
        assert!(PromptMode::Compact.is_compact(1_000_000));
        assert!(!PromptMode::Full.is_compact(2048));
        assert_eq!("compact".parse::<PromptMode>(), Ok(PromptMode::Compact));
        assert!("small".parse::<PromptMode>().is_err());
    }
}
