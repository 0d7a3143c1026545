//! `corral mcp-servers list|check NAME`: the MCP servers sessions take tools from (the
//! config's `[mcp_servers]` plus `--mcp-config`), each started the way a session rooted at
//! `-C DIR` would start it — same preset, sandbox and tool environment — then its status and
//! the tools the model would see, and every server stopped again.
//!
//! Everything a server says (tool names, descriptions, errors, its stderr) is untrusted: it is
//! escaped for the terminal before it is returned, and in `--json` every character a terminal
//! would act on is a `\uXXXX` escape, so neither rendering can carry a raw escape sequence.

use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;

use super::run::{Exit, load_config};
use super::safe_text::{escape, escape_json, escape_line};
use crate::config::{McpServer, McpServers};
use crate::error::{Error, usage};
use crate::host::open::{OpenSpec, start_standalone};
use crate::tool::mcp::{Notice, ServerReport};

/// What `corral mcp-servers` was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpServersCommand {
    /// Every configured server.
    List,
    /// One server: exit 0 when it starts, 1 when it does not.
    Check { name: String },
}

#[derive(Debug, Clone)]
pub struct McpServersArgs {
    pub command: McpServersCommand,
    /// `--config`, else the default location.
    pub config_path: Option<PathBuf>,
    /// `--mcp-config FILE`: servers on top of the config's (same name: this one wins).
    pub mcp_config: Option<PathBuf>,
    /// `-C DIR`: the session root the servers start in (default: the current directory).
    pub cwd: Option<PathBuf>,
    pub json: bool,
}

/// What the binary prints, and the code it exits with.
#[derive(Debug, Clone)]
pub struct McpServersOutput {
    pub stdout: String,
    pub stderr: String,
    pub exit: Exit,
}

/// One server as shown.
#[derive(Debug, Clone, Serialize)]
struct Shown {
    name: String,
    transport: String,
    describe: String,
    enabled: bool,
    /// `up`, `starting`, `down: …`, `disabled`.
    status: String,
    tools: Vec<ShownTool>,
}

#[derive(Debug, Clone, Serialize)]
struct ShownTool {
    name: String,
    danger: String,
    description: String,
}

const HOW_TO_ADD: &str = "No MCP servers are configured.\n\
    Add one to config.toml (see `corral doctor` for where it is):\n\
    \n\
    [mcp_servers.time]\n\
    command = \"uvx\"\n\
    args = [\"mcp-server-time\"]\n\
    \n\
    or pass --mcp-config FILE (TOML, or JSON {\"mcpServers\": {...}}).\n";

pub async fn mcp_servers(args: McpServersArgs) -> Result<McpServersOutput, Error> {
    let config = load_config(args.config_path.as_ref())?;
    let mut servers = config.mcp_servers.clone();
    if let Some(path) = &args.mcp_config {
        servers.extend(crate::config::mcp::load_file(path).map_err(usage)?);
    }
    let (to_start, disabled) = match &args.command {
        McpServersCommand::List => {
            if servers.is_empty() {
                return Ok(McpServersOutput {
                    stdout: if args.json {
                        "[]\n".into()
                    } else {
                        HOW_TO_ADD.into()
                    },
                    stderr: String::new(),
                    exit: Exit::Ok,
                });
            }
            let (enabled, disabled): (McpServers, McpServers) =
                servers.into_iter().partition(|(_, s)| s.enabled());
            (enabled, disabled)
        }
        McpServersCommand::Check { name } => {
            let Some(server) = servers.get(name) else {
                let known: Vec<&str> = servers.keys().map(String::as_str).collect();
                return Err(usage(if known.is_empty() {
                    format!("unknown MCP server {name:?}: none are configured")
                } else {
                    format!(
                        "unknown MCP server {name:?}; configured: {}",
                        known.join(", ")
                    )
                }));
            };
            // Asked for by name: checked even when `enabled = false` keeps sessions from it.
            let server = McpServer {
                enabled: None,
                ..server.clone()
            };
            (
                McpServers::from([(name.clone(), server)]),
                McpServers::new(),
            )
        }
    };
    let spec = OpenSpec {
        cwd: args.cwd.clone(),
        ..OpenSpec::default()
    };
    // The report carries every failure; the notices are for the debug log only.
    let notice: Notice = Arc::new(|server: &str, message: String| {
        tracing::info!(server, "{message}");
    });
    let started = start_standalone(&spec, &config, to_start.clone(), notice).await?;
    started.hub.wait_started().await;
    let reports = started.hub.report().await;
    started.hub.shutdown().await;
    drop(started);

    let mut shown: Vec<Shown> = reports
        .into_iter()
        .map(|report| shown(report, &to_start))
        .collect();
    shown.extend(disabled.iter().map(|(name, server)| Shown {
        name: name.clone(),
        transport: server.transport().as_str().into(),
        describe: server.describe(),
        enabled: false,
        status: "disabled".into(),
        tools: Vec::new(),
    }));
    shown.sort_by(|a, b| a.name.cmp(&b.name));

    let stdout = if args.json {
        json_lines(&shown)
    } else {
        text(&shown)
    };
    let (exit, stderr) = match &args.command {
        McpServersCommand::Check { name } => match shown.first() {
            Some(server) if server.status == "up" => (Exit::Ok, String::new()),
            _ => (
                Exit::Failure,
                format!("MCP server {} did not start\n", escape_line(name)),
            ),
        },
        McpServersCommand::List => (Exit::Ok, String::new()),
    };
    Ok(McpServersOutput {
        stdout,
        stderr,
        exit,
    })
}

fn shown(report: ServerReport, configs: &McpServers) -> Shown {
    let transport = configs
        .get(&report.name)
        .map_or("stdio", |s| s.transport().as_str());
    let status = match report.status.as_str() {
        "starting" => "starting: not up within its startup_timeout".to_string(),
        _ => report.status,
    };
    Shown {
        transport: transport.into(),
        name: report.name,
        describe: report.describe,
        enabled: true,
        status,
        tools: report
            .tools
            .into_iter()
            .map(|(name, danger, description)| ShownTool {
                name,
                danger: danger.as_str().into(),
                description: description.lines().next().unwrap_or_default().to_string(),
            })
            .collect(),
    }
}

/// For people: each server, its transport line and status, then its tools one a line.
fn text(servers: &[Shown]) -> String {
    let mut out = String::new();
    for server in servers {
        out.push_str(&format!(
            "{}  {}\n",
            escape_line(&server.name),
            escape_line(&server.describe)
        ));
        // An error carries the server's stderr tail over several lines: kept, indented.
        let status = escape(&server.status).replace('\n', "\n          ");
        out.push_str(&format!("  status: {status}\n"));
        if server.status == "up" || !server.tools.is_empty() {
            out.push_str(&format!("  tools: {}\n", server.tools.len()));
        }
        let names: Vec<String> = server.tools.iter().map(|t| escape_line(&t.name)).collect();
        let width = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
        for (tool, name) in server.tools.iter().zip(names) {
            out.push_str(&format!(
                "    {name:<width$}  {:<9}  {}\n",
                tool.danger,
                escape_line(&tool.description),
            ));
        }
    }
    out
}

/// For programs: one JSON array; characters a terminal would act on become `\uXXXX`.
fn json_lines(servers: &[Shown]) -> String {
    let raw = serde_json::to_string(servers).unwrap_or_else(|_| "[]".into());
    escape_json(&raw).into_owned() + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::surface::safe_text::is_unsafe;

    fn hostile() -> Shown {
        Shown {
            name: "evil".into(),
            transport: "stdio".into(),
            describe: "stdio: python3 evil.py".into(),
            enabled: true,
            status: "down: exited 3; its last stderr lines:\n\u{1b}[2Jboom".into(),
            tools: vec![ShownTool {
                name: "evil__t".into(),
                danger: "dangerous".into(),
                description: "a \u{1b}]0;pwned\u{7} b \u{9b}31m \u{202e}x".into(),
            }],
        }
    }

    #[test]
    fn text_carries_no_raw_control_or_bidi_character() {
        let out = text(&[hostile()]);
        assert!(!out.chars().any(is_unsafe), "{out:?}");
        assert!(out.contains("\\x1b]0;pwned\\x07"), "{out}");
        assert!(out.contains("boom"), "{out}");
    }

    #[test]
    fn json_escapes_what_serde_leaves_raw_and_still_parses() {
        let out = json_lines(&[hostile()]);
        assert!(!out.trim_end().chars().any(is_unsafe), "{out:?}");
        let parsed: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            parsed[0]["tools"][0]["description"],
            "a \u{1b}]0;pwned\u{7} b \u{9b}31m \u{202e}x"
        );
    }
}
