//! `agent_open`'s parameters, and the MCP servers they give the agent: `mcp_config` (the
//! field Kaimon's agents pass) and how `only` narrows every server's tools.
//!
//! A field corral does not know is refused, never ignored: a client written for another
//! agent host (Kaimon's `agent_open`) must learn that a setting it relies on has no effect.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::config::McpServers;
use crate::config::mcp::{NAME_SEPARATOR, load_file, servers_from_json};

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct OpenParams {
    /// Working directory of the agent; must exist.
    pub cwd: String,
    /// Model spec, e.g. ollama:<tag>, llamacpp:<model>, openai:<model> (default: config).
    pub model: Option<String>,
    /// Base URL of the model server (wins over config and environment).
    pub base_url: Option<String>,
    /// Permission preset: default, readonly, auto … (see `corral policies`).
    pub permission: Option<String>,
    /// Overrides the preset's mode, with claude's names: default (the preset as it is),
    /// acceptEdits (edits and other moderate tools run without asking), plan (read-only:
    /// the readonly preset), auto (the auto preset), bypassPermissions (the bypass preset).
    pub permission_mode: Option<String>,
    /// Tools allowed without asking, on top of the preset.
    pub allowed_tools: Option<Vec<String>>,
    /// Tools the agent may not call at all, on top of the recursion guard (the agent_* tools
    /// of its MCP servers; claude's Task, Agent and Workflow). An empty list `[]` lifts the
    /// guard: nested agents are allowed.
    pub disallowed_tools: Option<Vec<String>>,
    /// The only tools the agent is offered; every other is denied. Either the list itself, or
    /// (as Kaimon's agent_open) true: allowed_tools are the whole tool set; false: they only
    /// spare approvals. MCP tools by their exact SERVER__TOOL names; a server none of whose
    /// tools is named is not started.
    pub only: Option<Only>,
    /// Reasoning effort: low, medium or high (claude --effort, codex's effort, Ollama's think,
    /// reasoning_effort on OpenAI-compatible servers). Overrides a model suffix such as
    /// claude:sonnet/high. Where the model cannot take it, the agent's events say so.
    pub effort: Option<String>,
    /// An external agent (claude, acp:…, codex) gets a private HOME and config directory.
    pub hermetic: Option<bool>,
    /// Instructions appended to the agent's system prompt.
    pub system_prompt: Option<String>,
    /// Caller-chosen agent id; reopening a dead id reuses its slot.
    pub id: Option<String>,
    /// Work in an isolated git worktree of cwd.
    pub worktree: Option<bool>,
    /// MCP servers the agent takes tools from (as SERVER__TOOL), on top of config.toml's
    /// `[mcp_servers]` (same name: this one wins). Either the JSON other agents write,
    /// {"mcpServers": {"NAME": {"command": …, "args": […], "env": {…}}}} or
    /// {"NAME": {"url": "http://…/mcp", "headers": {…}}} (the map itself), or a string: the
    /// path of such a file (JSON, or TOML with [mcp_servers.NAME]; relative to cwd).
    pub mcp_config: Option<Value>,
    /// Every field not named above, so it can be refused by name (see [`unknown_fields`]).
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: serde_json::Map<String, Value>,
}

/// `only`: Kaimon's boolean over `allowed_tools`, or the list of tools itself.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(untagged, expecting = "only is true, false or a list of tool names")]
pub enum Only {
    Flag(bool),
    Tools(Vec<String>),
}

/// What `permission_mode` does to the preset and the auto-approval level (default: nothing).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ModeOverride {
    /// A preset that replaces the requested one.
    pub preset: Option<&'static str>,
    pub auto_approve: Option<crate::model::Danger>,
}

/// Kaimon's `permission_mode` (claude's permission-mode names) as corral's presets, for
/// every backend: claude's own flags follow from the preset (`backend::claude::launch`).
pub fn permission_mode(mode: &str) -> Result<ModeOverride, String> {
    let (preset, auto_approve) = match mode {
        "default" => (None, None),
        "acceptEdits" => (None, Some(crate::model::Danger::Moderate)),
        "plan" => (Some("readonly"), None),
        "auto" => (Some("auto"), None),
        "bypassPermissions" => (Some("bypass"), None),
        other => {
            return Err(format!(
                "permission_mode {other:?} is not one of default, acceptEdits, plan, auto, \
                 bypassPermissions"
            ));
        }
    };
    Ok(ModeOverride {
        preset,
        auto_approve,
    })
}

impl OpenParams {
    /// The tools the agent is limited to, if it is: `only: true` makes `allowed_tools` (none
    /// given: no tool at all) the whole set, as Kaimon's specialist agents expect.
    pub fn only_tools(&self) -> Option<Vec<String>> {
        match &self.only {
            None | Some(Only::Flag(false)) => None,
            Some(Only::Flag(true)) => Some(self.allowed_tools.clone().unwrap_or_default()),
            Some(Only::Tools(tools)) => Some(tools.clone()),
        }
    }
}

/// The refusal of fields `agent_open` does not take, naming each and the ones it does;
/// `None` when there are none.
pub fn unknown_fields(params: &OpenParams) -> Option<String> {
    if params.unknown.is_empty() {
        return None;
    }
    let mut unknown: Vec<String> = params.unknown.keys().map(|k| format!("{k:?}")).collect();
    unknown.sort();
    // The known names are the schema's own, so the message cannot drift from the struct.
    let schema = schemars::schema_for!(OpenParams);
    let known: Vec<&str> = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().map(String::as_str).collect())
        .unwrap_or_default();
    Some(format!(
        "agent_open does not take {}: {}; its fields are {}",
        if unknown.len() == 1 {
            "the field"
        } else {
            "the fields"
        },
        unknown.join(", "),
        known.join(", ")
    ))
}

/// The servers `mcp_config` defines; a relative file path is under the agent's `cwd`.
pub fn mcp_servers(config: Option<&Value>, cwd: &Path) -> Result<McpServers, String> {
    match config {
        None | Some(Value::Null) => Ok(McpServers::new()),
        Some(Value::String(path)) => {
            load_file(&cwd.join(path)).map_err(|e| format!("mcp_config: {e}"))
        }
        Some(value @ Value::Object(_)) => {
            servers_from_json(value).map_err(|e| format!("mcp_config: {e}"))
        }
        Some(_) => {
            Err("mcp_config is an object ({\"mcpServers\": {…}} or the map) or a file path".into())
        }
    }
}

/// `only` over MCP servers: each server (the config's and the request's) offers just the
/// tools `only` names of it, within its own allow-list; one it names none of is not started.
/// Returned as definitions that override the config's by name; an MCP name of a server
/// the agent does not have is an error.
pub fn narrow_to_only(only: &[String], servers: &McpServers) -> Result<McpServers, String> {
    let unknown = only.iter().find(|o| {
        o.split_once(NAME_SEPARATOR)
            .is_some_and(|(server, _)| !servers.contains_key(server))
    });
    if let Some(unknown) = unknown {
        let known: Vec<&str> = servers.keys().map(String::as_str).collect();
        return Err(format!(
            "only names {unknown:?}, but the agent has no such MCP server (it has: {})",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        ));
    }
    Ok(servers
        .iter()
        .map(|(name, server)| {
            let prefix = format!("{name}{NAME_SEPARATOR}");
            let picked: Vec<String> = only
                .iter()
                .filter_map(|o| o.strip_prefix(&prefix))
                // Exact names only: a glob here could match more than the allow-list does.
                .filter(|tool| !tool.contains(['*', '?']) && server.allows_tool(tool))
                .map(str::to_string)
                .collect();
            let mut server = server.clone();
            if picked.is_empty() {
                server.enabled = Some(false);
            }
            server.tools = Some(picked);
            (name.clone(), server)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    #[test]
    fn permission_modes_map_to_presets_and_others_are_refused() {
        use crate::model::Danger;
        let mode = |m: &str| super::permission_mode(m).unwrap();
        assert_eq!(mode("default").preset, None);
        assert_eq!(mode("acceptEdits").auto_approve, Some(Danger::Moderate));
        assert_eq!(mode("plan").preset, Some("readonly"));
        assert_eq!(mode("auto").preset, Some("auto"));
        assert_eq!(mode("bypassPermissions").preset, Some("bypass"));
        assert!(
            super::permission_mode("yolo")
                .unwrap_err()
                .contains("acceptEdits")
        );
    }

    use super::*;
    use serde_json::json;

    fn params(value: Value) -> Result<OpenParams, serde_json::Error> {
        serde_json::from_value(value)
    }

    #[test]
    fn only_is_kaimons_boolean_or_a_list() {
        let allowed = json!(["read_file", "list_dir"]);
        let p = params(json!({"cwd": "/", "allowed_tools": allowed, "only": true})).unwrap();
        assert_eq!(
            p.only_tools(),
            Some(vec!["read_file".to_string(), "list_dir".to_string()])
        );
        let p = params(json!({"cwd": "/", "only": true})).unwrap();
        assert_eq!(p.only_tools(), Some(vec![]));
        let p = params(json!({"cwd": "/", "allowed_tools": allowed, "only": false})).unwrap();
        assert_eq!(p.only_tools(), None);
        let p = params(json!({"cwd": "/", "only": ["shell"]})).unwrap();
        assert_eq!(p.only_tools(), Some(vec!["shell".to_string()]));
        let e = params(json!({"cwd": "/", "only": "shell"})).unwrap_err();
        assert!(e.to_string().contains("true, false or a list"), "{e}");
    }

    #[test]
    fn unknown_fields_are_named_with_the_known_ones() {
        let p = params(json!({"cwd": "/", "model": "ollama:x"})).unwrap();
        assert_eq!(unknown_fields(&p), None);
        let p = params(json!({"cwd": "/", "colour": "red", "sandbox": 1})).unwrap();
        let e = unknown_fields(&p).unwrap();
        assert!(e.contains(r#""colour", "sandbox""#), "{e}");
        assert!(e.contains("cwd, model, base_url, permission"), "{e}");
        assert!(e.contains("mcp_config") && !e.contains("unknown"), "{e}");
    }

    #[test]
    fn mcp_config_takes_an_object_the_map_or_a_file() {
        let cwd = tempfile::tempdir().unwrap();
        let wrapped = json!({"mcpServers": {"git": {"command": "uvx"}}});
        assert!(
            mcp_servers(Some(&wrapped), cwd.path()).unwrap()["git"]
                .command
                .is_some()
        );
        let map = json!({"docs": {"url": "http://127.0.0.1:9/mcp"}});
        assert!(
            mcp_servers(Some(&map), cwd.path()).unwrap()["docs"]
                .url
                .is_some()
        );
        std::fs::write(
            cwd.path().join("servers.toml"),
            "[mcp_servers.time]\ncommand = \"mcp-server-time\"\n",
        )
        .unwrap();
        let file = json!("servers.toml");
        assert!(
            mcp_servers(Some(&file), cwd.path())
                .unwrap()
                .contains_key("time")
        );
        assert!(mcp_servers(None, cwd.path()).unwrap().is_empty());
        let missing = mcp_servers(Some(&json!("nope.json")), cwd.path()).unwrap_err();
        assert!(missing.contains("nope.json"), "{missing}");
        let bad = mcp_servers(Some(&json!({"a__b": {"command": "x"}})), cwd.path()).unwrap_err();
        assert!(bad.contains("a__b"), "{bad}");
        assert!(mcp_servers(Some(&json!(3)), cwd.path()).is_err());
    }

    #[test]
    fn only_narrows_each_server_to_the_tools_it_names() {
        let servers: McpServers = serde_json::from_value(json!({
            "git": {"command": "g"},
            "docs": {"url": "http://x/mcp", "tools": ["search_*"]},
            "time": {"command": "t"},
        }))
        .unwrap();
        let only = [
            "read_file".to_string(),
            "git__status".to_string(),
            "docs__search_docs".to_string(),
            "docs__delete_docs".to_string(),
        ];
        let narrowed = narrow_to_only(&only, &servers).unwrap();
        assert!(narrowed["git"].allows_tool("status"));
        assert!(!narrowed["git"].allows_tool("commit"));
        assert!(narrowed["docs"].allows_tool("search_docs"));
        // `only` cannot widen what the config allows.
        assert!(!narrowed["docs"].allows_tool("delete_docs"));
        assert!(!narrowed["time"].enabled());
        assert!(narrowed["git"].enabled());
        let e = narrow_to_only(&["web__fetch".to_string()], &servers).unwrap_err();
        assert!(
            e.contains("web__fetch") && e.contains("docs, git, time"),
            "{e}"
        );
    }
}
