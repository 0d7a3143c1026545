//! The MCP servers of a session being opened: the config's (all, or those the request
//! picks), with the request's own on top, started inside the session's sandbox.

use std::path::Path;
use std::sync::Arc;

use super::OpenSpec;
use crate::config::{Config, McpServers};
use crate::session::Session;
use crate::tool::ToolSettings;
use crate::tool::mcp::{McpEnvironment, McpHub, Notice};

/// The servers a session gets: the config's (only those `mcp_select` names, when it names
/// any), then the request's, which win a name both have.
pub fn servers_for(spec: &OpenSpec, config: &Config) -> McpServers {
    let mut servers: McpServers = config
        .mcp_servers
        .iter()
        .filter(|(name, _)| {
            spec.mcp_select
                .as_ref()
                .is_none_or(|picked| picked.iter().any(|p| p == *name))
        })
        .map(|(name, server)| (name.clone(), server.clone()))
        .collect();
    servers.extend(spec.mcp_servers.clone());
    servers.retain(|_, server| server.enabled());
    servers
}

/// Starts the session's servers in the background; `None` when it has none.
pub fn start(
    spec: &OpenSpec,
    config: &Config,
    tools: &ToolSettings,
    root: &Path,
    session: &Arc<Session>,
) -> Option<McpHub> {
    let servers = servers_for(spec, config);
    if servers.is_empty() {
        return None;
    }
    let env = McpEnvironment {
        root: root.to_path_buf(),
        sandbox: tools.sandbox.clone(),
        env: tools.env.clone(),
        log_dir: session
            .log_path()
            .and_then(Path::parent)
            .map(Path::to_path_buf),
        session_id: session.id().to_string(),
    };
    let notice_session = session.clone();
    let notice: Notice = Arc::new(move |server: &str, message: String| {
        tracing::warn!(server, "{message}");
        notice_session.emit_error(message, serde_json::json!({"mcpServer": server}));
    });
    Some(McpHub::start(servers, env, notice))
}
