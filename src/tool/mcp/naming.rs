//! An MCP server's tools as corral tools: the names the model sees (`SERVER__TOOL`, within
//! what every model API accepts), their manifests, and the danger level the gate uses.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::config::McpServer;
use crate::config::mcp::NAME_SEPARATOR;
use crate::model::Danger;
use crate::tool::ToolManifest;

/// Model APIs accept tool names of at most 64 characters from `[A-Za-z0-9_-]`.
const MAX_NAME: usize = 64;
/// A description longer than this is cut: it is paid for in every request.
const MAX_DESCRIPTION: usize = 4096;
/// A schema larger than this is replaced by a bare object schema (the server still checks
/// its arguments).
const MAX_SCHEMA_BYTES: usize = 32 * 1024;

/// One of a server's tools, as `tools/list` gave it.
#[derive(Debug, Clone, PartialEq)]
pub struct ListedTool {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub input_schema: Value,
    pub annotations: Option<Value>,
}

impl ListedTool {
    /// Reads a tool from its wire shape (`name`, `title`, `description`, `inputSchema`,
    /// `annotations`). `None`: no usable name.
    pub fn from_wire(tool: &Value) -> Option<ListedTool> {
        let text = |name: &str| tool.get(name).and_then(Value::as_str).map(str::to_string);
        let name = text("name").filter(|n| !n.is_empty())?;
        Some(ListedTool {
            title: text("title").or_else(|| {
                tool.pointer("/annotations/title")?
                    .as_str()
                    .map(str::to_string)
            }),
            description: text("description"),
            input_schema: tool.get("inputSchema").cloned().unwrap_or(Value::Null),
            annotations: tool.get("annotations").cloned().filter(|a| a.is_object()),
            name,
        })
    }

    fn hint(&self, name: &str) -> Option<bool> {
        self.annotations.as_ref()?.get(name)?.as_bool()
    }
}

/// The level of a server's tool: the config's, lowered by `readOnlyHint` no further than the
/// config's `min_danger`, raised to dangerous by `destructiveHint` (raising never weakens the
/// gate, so the server may always do it).
pub fn danger_of(tool: &ListedTool, server: &McpServer) -> Danger {
    if tool.hint("destructiveHint") == Some(true) && tool.hint("readOnlyHint") != Some(true) {
        return Danger::Dangerous;
    }
    if tool.hint("readOnlyHint") == Some(true) {
        return server.min_danger();
    }
    server.danger()
}

/// The manifest corral offers for `tool` of `server_name`, under `name`.
pub fn manifest(
    server_name: &str,
    server: &McpServer,
    tool: &ListedTool,
    name: &str,
) -> ToolManifest {
    let description = tool
        .description
        .as_deref()
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map_or_else(
            || {
                format!(
                    "The {} tool of the {server_name} MCP server.",
                    cut(&tool.name, 64)
                )
            },
            |d| cut(d, MAX_DESCRIPTION),
        );
    let title = tool
        .title
        .clone()
        .filter(|t| !t.trim().is_empty())
        .unwrap_or_else(|| tool.name.clone());
    ToolManifest {
        needs: Vec::new(),
        name: name.to_string(),
        title: format!("{server_name}: {}", cut(&title, 80)),
        // An editor may treat `read` calls as harmless: only a tool the config let its
        // annotation lower is called one.
        kind: if danger_of(tool, server) < server.danger() {
            "read".into()
        } else {
            "other".into()
        },
        danger: danger_of(tool, server),
        description,
        short: None,
        max_output_bytes: 32 * 1024,
        parameters: object_schema(&tool.input_schema),
        aliases: BTreeMap::new(),
    }
}

/// The schema as an object schema model APIs take: `type: object` and `properties` present.
fn object_schema(schema: &Value) -> Value {
    let too_big = serde_json::to_vec(schema).map_or(true, |bytes| bytes.len() > MAX_SCHEMA_BYTES);
    match schema {
        Value::Object(map) if !too_big => {
            let mut map = map.clone();
            map.insert("type".into(), json!("object"));
            map.entry("properties").or_insert_with(|| json!({}));
            Value::Object(map)
        }
        _ => json!({"type": "object", "properties": {}}),
    }
}

fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Names for a server's tools, `SERVER__TOOL`: characters model APIs refuse become `_`, a
/// name over 64 characters is shortened with a hash of the original, and two tools that come
/// out the same get `_2`, `_3`. Returns (corral name, server's name) in the server's order.
pub fn exposed_names<'a>(
    server_name: &str,
    tools: impl IntoIterator<Item = &'a str>,
) -> Vec<(String, String)> {
    let mut taken: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for original in tools {
        let clean: String = original
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let mut name = format!("{server_name}{NAME_SEPARATOR}{clean}");
        if name.len() > MAX_NAME {
            let hash = format!("{:08x}", fnv1a(original.as_bytes()) as u32);
            name.truncate(MAX_NAME - hash.len() - 1);
            name = format!("{name}_{hash}");
        }
        let mut candidate = name.clone();
        let mut n = 2;
        while taken.contains(&candidate) {
            let suffix = format!("_{n}");
            let mut base = name.clone();
            base.truncate(MAX_NAME - suffix.len());
            candidate = format!("{base}{suffix}");
            n += 1;
        }
        taken.push(candidate.clone());
        out.push((candidate, original.to_string()));
    }
    out
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(annotations: Value) -> ListedTool {
        ListedTool::from_wire(&json!({"name": "t", "inputSchema": {"type": "object"},
                                      "annotations": annotations}))
        .unwrap()
    }

    #[test]
    fn annotations_move_the_level_only_as_far_as_the_config_lets_them() {
        let strict = McpServer {
            command: Some("x".into()),
            danger: Some(Danger::Moderate),
            ..McpServer::default()
        };
        let trusting = McpServer {
            min_danger: Some(Danger::Safe),
            ..strict.clone()
        };
        let read_only = listed(json!({"readOnlyHint": true}));
        let destructive = listed(json!({"destructiveHint": true}));
        let plain = listed(json!({}));
        assert_eq!(danger_of(&read_only, &strict), Danger::Moderate);
        assert_eq!(danger_of(&read_only, &trusting), Danger::Safe);
        assert_eq!(danger_of(&destructive, &trusting), Danger::Dangerous);
        assert_eq!(danger_of(&plain, &trusting), Danger::Moderate);
        assert_eq!(danger_of(&plain, &McpServer::default()), Danger::Dangerous);
    }

    #[test]
    fn names_are_what_model_apis_take_and_stay_distinct() {
        let long = "x".repeat(80);
        let names = exposed_names("srv", ["get-sum", "a.b", "a/b", long.as_str(), "ok_1"]);
        let exposed: Vec<&str> = names.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(exposed[0], "srv__get-sum");
        assert_eq!(exposed[1], "srv__a_b");
        assert_eq!(exposed[2], "srv__a_b_2");
        assert!(exposed[3].len() <= MAX_NAME && exposed[3].starts_with("srv__xxx"));
        assert_eq!(names[3].1, long);
        for name in exposed {
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            );
        }
    }

    #[test]
    fn a_schema_becomes_an_object_schema_and_a_huge_one_a_bare_one() {
        let tool = ListedTool::from_wire(&json!({"name": "t", "inputSchema":
            {"properties": {"a": {"type": "string"}}}}))
        .unwrap();
        let m = manifest("srv", &McpServer::default(), &tool, "srv__t");
        assert_eq!(m.parameters["type"], "object");
        assert_eq!(m.title, "srv: t");
        let huge = json!({"type": "object", "description": "d".repeat(40_000)});
        assert_eq!(
            object_schema(&huge),
            json!({"type": "object", "properties": {}})
        );
        assert!(ListedTool::from_wire(&json!({"inputSchema": {}})).is_none());
    }
}
