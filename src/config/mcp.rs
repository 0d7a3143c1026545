//! MCP servers a session takes tools from: `[mcp_servers.NAME]` in `config.toml`, and the
//! same shape from `--mcp-config FILE` (TOML, or the JSON `{"mcpServers": {…}}` other agents
//! write), MCP `agent_open`'s `mcp_config`, REST session create and ACP `session/new`.
//!
//! ```toml
//! [mcp_servers.git]
//! command = "uvx"                      # stdio: command, args, env, cwd
//! args = ["mcp-server-git"]
//! [mcp_servers.docs]
//! url = "http://127.0.0.1:9000/mcp"    # streamable HTTP; transport = "sse" for legacy SSE
//! headers = { "X-Team" = "core" }
//! bearer_token_env_var = "DOCS_TOKEN"  # Authorization: Bearer $DOCS_TOKEN
//! tools = ["search_*"]                 # allow-list of this server's tools (globs)
//! danger = "moderate"                  # its tools' level (default: dangerous)
//! # stdio servers run in the session's sandbox; `writable = ["~/.cache/uv"]` lets uvx
//! # keep its cache, `sandbox = false` runs one unconfined.
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::model::Danger;
use crate::sandbox::NetworkMode;

/// Server name → how to reach it, in name order.
pub type McpServers = BTreeMap<String, McpServer>;

/// Separates a server's name from its tool's in the names the model sees (`git__status`).
pub const NAME_SEPARATOR: &str = "__";

/// The default wait for a server to start before the session's first model request goes
/// without its tools (they join between steps once it is up).
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(10);
/// The default limit of one tool call.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(120);

/// How corral talks to a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum McpTransport {
    /// A child process speaking JSON-RPC lines on stdin/stdout.
    Stdio,
    /// Streamable HTTP (one endpoint, POST and optional SSE replies).
    #[serde(
        alias = "streamable-http",
        alias = "streamable_http",
        alias = "streamableHttp"
    )]
    Http,
    /// The 2024-11-05 HTTP+SSE transport: a GET event stream and a POST endpoint it names.
    Sse,
}

impl McpTransport {
    pub fn as_str(self) -> &'static str {
        match self {
            McpTransport::Stdio => "stdio",
            McpTransport::Http => "http",
            McpTransport::Sse => "sse",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServer {
    /// stdio: the program (looked up on PATH).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Set on top of the environment tool processes get (never corral's own secrets).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Where the process starts; relative paths are under the session root. Default: the root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// HTTP: the endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Default: `stdio` with a command, `http` with a URL.
    #[serde(default, alias = "type", skip_serializing_if = "Option::is_none")]
    pub transport: Option<McpTransport>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// The variable holding a bearer token for `Authorization` (read when the server starts).
    #[serde(
        default,
        alias = "bearerTokenEnvVar",
        skip_serializing_if = "Option::is_none"
    )]
    pub bearer_token_env_var: Option<String>,
    /// Only these of its tools are offered (globs over the server's own tool names).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// The level of its tools. Default: dangerous.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub danger: Option<Danger>,
    /// The lowest level a tool's `readOnlyHint` may bring it to. Default: `danger` (a server's
    /// own words never lower the gate unless the config says how far they may).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_danger: Option<Danger>,
    /// stdio: start inside the session's sandbox (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<bool>,
    /// stdio: the network inside the sandbox. Default: the session's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkMode>,
    /// stdio: more paths the server may write inside the sandbox (`~/` is the home directory,
    /// relative paths are under the session root): a launcher's cache, `~/.cache/uv` for
    /// `uvx`, `~/.npm` for `npx`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writable: Vec<String>,
    #[serde(
        default,
        alias = "startupTimeoutSecs",
        skip_serializing_if = "Option::is_none"
    )]
    pub startup_timeout_secs: Option<f64>,
    #[serde(
        default,
        alias = "toolTimeoutSecs",
        skip_serializing_if = "Option::is_none"
    )]
    pub tool_timeout_secs: Option<f64>,
    /// `false`: configured but not started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum McpConfigError {
    #[error("MCP server {name:?}: {message}")]
    Server { name: String, message: String },
    #[error("cannot read MCP config {path}: {message}")]
    File { path: PathBuf, message: String },
}

impl McpServer {
    pub fn transport(&self) -> McpTransport {
        match (self.transport, &self.url) {
            (Some(transport), _) => transport,
            (None, Some(_)) => McpTransport::Http,
            (None, None) => McpTransport::Stdio,
        }
    }

    pub fn enabled(&self) -> bool {
        self.enabled.unwrap_or(true)
    }

    pub fn danger(&self) -> Danger {
        self.danger.unwrap_or(Danger::Dangerous)
    }

    /// The lowest level annotations may bring a tool to (never above `danger`).
    pub fn min_danger(&self) -> Danger {
        self.min_danger.unwrap_or(self.danger()).min(self.danger())
    }

    pub fn startup_timeout(&self) -> Duration {
        self.startup_timeout_secs
            .map_or(DEFAULT_STARTUP_TIMEOUT, Duration::from_secs_f64)
    }

    pub fn tool_timeout(&self) -> Duration {
        self.tool_timeout_secs
            .map_or(DEFAULT_TOOL_TIMEOUT, Duration::from_secs_f64)
    }

    /// Whether the server's own tool `name` passes the allow-list.
    pub fn allows_tool(&self, name: &str) -> bool {
        self.tools
            .as_ref()
            .is_none_or(|globs| globs.iter().any(|g| wildcard_match(g, name)))
    }

    /// One line for listings: `stdio: uvx mcp-server-git` or `http: http://…`.
    pub fn describe(&self) -> String {
        match self.transport() {
            McpTransport::Stdio => {
                let mut line = self.command.clone().unwrap_or_default();
                for arg in &self.args {
                    line.push(' ');
                    line.push_str(arg);
                }
                format!("stdio: {line}")
            }
            transport => format!(
                "{}: {}",
                transport.as_str(),
                self.url.as_deref().unwrap_or_default()
            ),
        }
    }

    /// Everything a server definition can get wrong, before anything starts.
    pub fn check(&self) -> Result<(), String> {
        let transport = self.transport();
        match (transport, &self.command, &self.url) {
            (McpTransport::Stdio, None, _) => {
                return Err("a stdio server needs `command`".into());
            }
            (McpTransport::Stdio, Some(_), Some(_)) => {
                return Err("give `command` (stdio) or `url` (HTTP), not both".into());
            }
            (McpTransport::Http | McpTransport::Sse, _, None) => {
                return Err(format!("a {} server needs `url`", transport.as_str()));
            }
            (McpTransport::Http | McpTransport::Sse, Some(_), Some(_)) => {
                return Err("give `command` (stdio) or `url` (HTTP), not both".into());
            }
            _ => {}
        }
        if let Some(command) = &self.command
            && command.trim().is_empty()
        {
            return Err("`command` is empty".into());
        }
        if let Some(url) = &self.url {
            let scheme_ok = url.starts_with("http://") || url.starts_with("https://");
            if !scheme_ok {
                return Err(format!("`url` must be http:// or https://, got {url:?}"));
            }
        }
        if transport == McpTransport::Stdio
            && (!self.headers.is_empty() || self.bearer_token_env_var.is_some())
        {
            return Err("`headers` and `bearer_token_env_var` are for HTTP servers".into());
        }
        if transport != McpTransport::Stdio
            && (!self.args.is_empty()
                || !self.env.is_empty()
                || self.cwd.is_some()
                || !self.writable.is_empty())
        {
            return Err("`args`, `env`, `cwd` and `writable` are for stdio servers".into());
        }
        for (key, value) in &self.headers {
            let printable = |s: &str| s.chars().all(|c| c == '\t' || (' '..='~').contains(&c));
            if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
                return Err(format!(
                    "header name {key:?} is not a valid HTTP header name"
                ));
            }
            if !printable(value) {
                return Err(format!("header {key:?} has characters HTTP does not allow"));
            }
        }
        for key in self.env.keys() {
            if key.is_empty() || key.contains('=') || key.contains('\0') {
                return Err(format!("environment variable name {key:?} is not valid"));
            }
        }
        for (what, secs) in [
            ("startup_timeout_secs", self.startup_timeout_secs),
            ("tool_timeout_secs", self.tool_timeout_secs),
        ] {
            if let Some(secs) = secs
                && !(secs > 0.0 && secs <= 86_400.0)
            {
                return Err(format!(
                    "`{what}` must be above 0 and at most 86400, got {secs}"
                ));
            }
        }
        Ok(())
    }
}

/// A server name the model's tool names can carry: letters, digits, `-` and single `_`,
/// at most 32 characters, and never the `__` that separates it from the tool's name.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 32 {
        return Err("a server name has 1 to 32 characters".into());
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err("a server name has only letters, digits, '-' and '_'".into());
    }
    if name.contains(NAME_SEPARATOR) || name.starts_with('_') || name.ends_with('_') {
        return Err("a server name cannot hold \"__\" or start or end with '_'".into());
    }
    Ok(())
}

/// Checks every server of a map, naming the first bad one.
pub fn check_servers(servers: &McpServers) -> Result<(), McpConfigError> {
    for (name, server) in servers {
        check_name(name)
            .and_then(|()| server.check())
            .map_err(|message| McpConfigError::Server {
                name: name.clone(),
                message,
            })?;
    }
    Ok(())
}

/// The servers a JSON value defines: `{"mcpServers": {…}}`, `{"mcp_servers": {…}}`, or the
/// map itself.
pub fn servers_from_json(value: &serde_json::Value) -> Result<McpServers, String> {
    let map = value
        .get("mcpServers")
        .or_else(|| value.get("mcp_servers"))
        .unwrap_or(value);
    let servers: McpServers = serde_json::from_value(map.clone()).map_err(|e| e.to_string())?;
    check_servers(&servers).map_err(|e| e.to_string())?;
    Ok(servers)
}

/// `--mcp-config FILE`: JSON (`{"mcpServers": …}`) or TOML (`[mcp_servers.NAME]`).
pub fn load_file(path: &Path) -> Result<McpServers, McpConfigError> {
    let file_error = |message: String| McpConfigError::File {
        path: path.to_path_buf(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| file_error(e.to_string()))?;
    if text.trim_start().starts_with('{') {
        let value: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| file_error(e.to_string()))?;
        return servers_from_json(&value).map_err(file_error);
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        #[serde(default)]
        mcp_servers: McpServers,
    }
    let file: File = toml::from_str(&text).map_err(|e| file_error(e.message().to_string()))?;
    check_servers(&file.mcp_servers)?;
    Ok(file.mcp_servers)
}

/// `*` any run of characters, `?` one; everything else literal. Tool names carry no path
/// separators, so one wildcard suffices.
pub fn wildcard_match(pattern: &str, text: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = text.chars().collect();
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == '?' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == '*' {
            star = Some((p, t));
            p += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shapes_other_agents_write_are_read() {
        let json = serde_json::json!({"mcpServers": {
            "git": {"command": "uvx", "args": ["mcp-server-git"], "env": {"A": "1"}},
            "docs": {"type": "http", "url": "http://127.0.0.1:9000/mcp",
                     "headers": {"X-Team": "core"}},
            "old": {"type": "sse", "url": "http://127.0.0.1:9001/sse"}
        }});
        let servers = servers_from_json(&json).unwrap();
        assert_eq!(servers["git"].transport(), McpTransport::Stdio);
        assert_eq!(servers["docs"].transport(), McpTransport::Http);
        assert_eq!(servers["old"].transport(), McpTransport::Sse);
        assert_eq!(servers["git"].danger(), Danger::Dangerous);
        let toml_text = "[mcp_servers.docs]\nurl = \"http://x/mcp\"\ntools = [\"search_*\"]\n\
                         danger = \"moderate\"\n";
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mcp.toml");
        std::fs::write(&path, toml_text).unwrap();
        let servers = load_file(&path).unwrap();
        assert!(servers["docs"].allows_tool("search_docs"));
        assert!(!servers["docs"].allows_tool("delete_docs"));
        assert_eq!(servers["docs"].danger(), Danger::Moderate);
        assert_eq!(servers["docs"].min_danger(), Danger::Moderate);
    }

    #[test]
    fn bad_definitions_name_the_server_and_the_problem() {
        let bad = |json: serde_json::Value| servers_from_json(&json).unwrap_err();
        assert!(bad(serde_json::json!({"a": {}})).contains("needs `command`"));
        assert!(
            bad(serde_json::json!({"a": {"command": "x", "url": "http://y"}})).contains("not both")
        );
        assert!(bad(serde_json::json!({"a": {"url": "file:///etc"}})).contains("http://"));
        assert!(bad(serde_json::json!({"a__b": {"command": "x"}})).contains("\"__\""));
        assert!(bad(serde_json::json!({"a b": {"command": "x"}})).contains("letters"));
        assert!(
            bad(serde_json::json!({"a": {"command": "x", "surprise": 1}})).contains("surprise")
        );
        assert!(
            bad(serde_json::json!({"a": {"url": "http://y", "headers": {"X": "a\nb"}}}))
                .contains("characters")
        );
        assert!(
            bad(serde_json::json!({"a": {"command": "x", "startup_timeout_secs": -1}}))
                .contains("above 0")
        );
    }

    #[test]
    fn wildcards_match_whole_names() {
        assert!(wildcard_match("git__*", "git__status"));
        assert!(wildcard_match("*", ""));
        assert!(wildcard_match("a?c", "abc"));
        assert!(!wildcard_match("git__*", "gitx__status"));
        assert!(!wildcard_match("status", "git__status"));
        assert!(wildcard_match("*__status", "git__status"));
    }
}
