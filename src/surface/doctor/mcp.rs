//! The MCP servers of the config, as sessions would get them, without starting any (that is
//! `corral mcp-servers check NAME`): name, transport line, and for a stdio server whether its
//! command is found the way a session looks it up.

use std::path::Path;

use super::{Report, State};
use crate::config::{Config, McpTransport};
use crate::surface::safe_text::escape_line;
use crate::tool::mcp::find_program;

pub(super) fn mcp_servers(report: &mut Report, config: &Config) {
    if config.mcp_servers.is_empty() {
        report.line(
            State::Ok,
            "MCP servers",
            "none configured ([mcp_servers.NAME] in config.toml, or --mcp-config FILE)",
        );
        return;
    }
    let here = std::env::current_dir().unwrap_or_else(|_| "/".into());
    let runtime_path = std::env::var("PATH").unwrap_or_default();
    for (name, server) in &config.mcp_servers {
        let what = format!("MCP server {name}");
        let describe = escape_line(&server.describe());
        if !server.enabled() {
            report.line(State::Ok, &what, format!("{describe} (enabled = false)"));
            continue;
        }
        if server.transport() != McpTransport::Stdio {
            report.line(State::Ok, &what, describe);
            continue;
        }
        // As the session's launch resolves it: the server's own PATH wins, a relative
        // command or cwd is under the session root (here: the current directory).
        let path = server.env.get("PATH").unwrap_or(&runtime_path);
        let cwd = match &server.cwd {
            Some(cwd) => here.join(cwd),
            None => here.clone(),
        };
        let command = server.command.as_deref().unwrap_or_default();
        match find_program(command, path, Path::new(&cwd)) {
            Some(found) => report.line(
                State::Ok,
                &what,
                format!(
                    "{describe} ({} found: {})",
                    escape_line(command),
                    escape_line(&found.display().to_string())
                ),
            ),
            None => report.line(
                State::Missing,
                &what,
                format!(
                    "{describe} ({} not found on PATH; `corral mcp-servers check {name}` \
                     says more)",
                    escape_line(command)
                ),
            ),
        }
    }
}
