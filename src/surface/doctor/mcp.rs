//! The MCP servers of the config, as sessions would get them: name, transport line, for a
//! stdio server whether its command is found the way a session looks it up, and the name and
//! version each gives at `initialize` — the servers whose command is there (and is not a
//! program of the current directory) are started together, as a session would start them
//! (inside its sandbox, rooted in an empty scratch directory), for at most [`START_TIMEOUT`],
//! and stopped. One that does not come up is reported, not an
//! error; `corral mcp-servers check NAME` says more.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::{Report, State};
use crate::config::{Config, McpServers, McpTransport};
use crate::host::open::{OpenSpec, start_standalone};
use crate::surface::safe_text::escape_line;
use crate::tool::mcp::{Notice, ServerReport, find_program};

/// How long the servers get, together, to come up and answer `initialize`.
const START_TIMEOUT: Duration = Duration::from_secs(15);

pub(super) async fn mcp_servers(report: &mut Report, config: &Config) {
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
    // Each server's line, with its place kept for the version the start adds.
    let mut lines: Vec<(State, String, String)> = Vec::new();
    let mut to_start = McpServers::new();
    for (name, server) in &config.mcp_servers {
        let what = format!("MCP server {name}");
        let describe = escape_line(&server.describe());
        if !server.enabled() {
            lines.push((State::Ok, what, format!("{describe} (enabled = false)")));
            continue;
        }
        if server.transport() != McpTransport::Stdio {
            lines.push((State::Ok, what, describe));
            to_start.insert(name.clone(), server.clone());
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
            // A program of the project (under the current directory) is not run by doctor.
            Some(found) if found.starts_with(&here) => lines.push((
                State::Ok,
                what,
                format!(
                    "{describe} ({} found: {}; a program of this directory, not started)",
                    escape_line(command),
                    escape_line(&found.display().to_string())
                ),
            )),
            Some(found) => {
                lines.push((
                    State::Ok,
                    what,
                    format!(
                        "{describe} ({} found: {})",
                        escape_line(command),
                        escape_line(&found.display().to_string())
                    ),
                ));
                to_start.insert(name.clone(), server.clone());
            }
            None => lines.push((
                State::Missing,
                what,
                format!(
                    "{describe} ({} not found on PATH; `corral mcp-servers check {name}` \
                     says more)",
                    escape_line(command)
                ),
            )),
        }
    }
    let started = started_reports(config, to_start).await;
    for (state, what, detail) in lines {
        let name = what.trim_start_matches("MCP server ");
        match (&started, state) {
            (Ok(reports), State::Ok) => match reports.iter().find(|r| r.name == name) {
                Some(server) if server.status == "up" => {
                    let version = server.version.as_deref().unwrap_or("no serverInfo");
                    report.line(
                        State::Ok,
                        &what,
                        format!("{} — {detail}", escape_line(version)),
                    );
                }
                Some(server) => report.line(
                    State::Warn,
                    &what,
                    format!("{detail}; did not come up: {}", escape_line(&server.status)),
                ),
                None => report.line(state, &what, detail),
            },
            (Err(why), State::Ok) => report.line(
                State::Warn,
                &what,
                format!("{detail}; not started: {}", escape_line(why)),
            ),
            _ => report.line(state, &what, detail),
        }
    }
}

/// Starts `servers` as a session here would, waits for them (within [`START_TIMEOUT`]),
/// reports and stops them.
async fn started_reports(
    config: &Config,
    servers: McpServers,
) -> Result<Vec<ServerReport>, String> {
    if servers.is_empty() {
        return Ok(Vec::new());
    }
    let notice: Notice = Arc::new(|server: &str, message: String| {
        tracing::info!(server, "{message}");
    });
    // Rooted in an empty scratch directory, not the project: inside their sandbox the
    // servers can write nothing doctor's directory holds.
    let scratch = tempfile::Builder::new()
        .prefix("corral-doctor-mcp-")
        .tempdir()
        .map_err(|e| format!("no scratch directory: {e}"))?;
    let spec = OpenSpec {
        cwd: Some(scratch.path().to_path_buf()),
        ..OpenSpec::default()
    };
    let started = start_standalone(&spec, config, servers, notice)
        .await
        .map_err(|e| e.to_string())?;
    let _ = tokio::time::timeout(START_TIMEOUT, started.hub.wait_started()).await;
    let reports = started.hub.report().await;
    started.hub.shutdown().await;
    Ok(reports)
}
