//! Starting one server and opening its MCP session: a stdio process inside the session's
//! sandbox (its own process group, in pids.json, stderr to a log beside the event log), or
//! an HTTP endpoint (streamable HTTP, or legacy SSE); then its tool list.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::service::{RunningService, serve_client};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

use super::handler::Handler;
use super::naming::ListedTool;
use super::sse::{LegacySse, header_map};
use crate::config::{McpServer, McpTransport};
use crate::sandbox::SandboxSpec;
use crate::sandbox::agent_process::{AgentProcess, Launch};
use crate::sandbox::programs::{is_executable, on_path};

/// Where a session's servers run and what they get.
#[derive(Debug, Clone)]
pub struct McpEnvironment {
    /// The session root (canonical): a stdio server's default working directory.
    pub root: PathBuf,
    /// The session's confinement; `None`: servers run unconfined (`--sandbox off`).
    pub sandbox: Option<SandboxSpec>,
    /// The environment tool processes get (corral's secrets are not in it).
    pub env: Vec<(String, String)>,
    /// `<dir>/<session>.mcp-<server>.stderr.log`; `None`: stderr goes to tracing only.
    pub log_dir: Option<PathBuf>,
    pub session_id: String,
}

pub struct Connection {
    pub service: RunningService<RoleClient, Handler>,
    pub process: Option<AgentProcess>,
    pub tools: Vec<ListedTool>,
}

/// How long a server whose stdin was closed may take to exit before it is signalled.
const EXIT_GRACE: Duration = Duration::from_secs(1);

impl Connection {
    /// Whether the server is gone: its process exited or its transport closed.
    pub fn is_gone(&mut self) -> bool {
        self.service.peer().is_transport_closed()
            || self
                .process
                .as_mut()
                .is_some_and(|process| process.try_status().is_some())
    }

    /// Why it is gone, with the last lines it wrote on stderr.
    pub async fn crash_report(&mut self) -> String {
        match self.process.as_mut() {
            Some(process) => process.crash_report().await,
            None => "the connection closed".to_string(),
        }
    }

    /// The MCP stdio shutdown: stdin is closed, the server gets [`EXIT_GRACE`] to read what
    /// was sent last (a call's `notifications/cancelled`) and exit by itself, and only then
    /// is it signalled. Signalled at once, a server on a loaded machine died before it read
    /// the cancellation already in its pipe.
    pub async fn stop(mut self) {
        let _ = self
            .service
            .close_with_timeout(Duration::from_millis(500))
            .await;
        if let Some(process) = self.process.as_mut() {
            let _ = process.wait_exit(EXIT_GRACE).await;
            process.stop(None).await;
        }
    }
}

/// Starts `server` and completes the handshake and the tool listing within `limit`.
pub async fn connect(
    name: &str,
    server: &McpServer,
    env: &McpEnvironment,
    handler: Handler,
    limit: Duration,
) -> Result<Connection, String> {
    let mut process = None;
    let started = tokio::time::timeout(limit, open(name, server, env, handler, &mut process)).await;
    let failed = |message: String, process: Option<AgentProcess>| async move {
        match process {
            Some(mut process) => {
                let report = process.crash_report().await;
                process.stop(None).await;
                format!("{message} ({report})")
            }
            None => message,
        }
    };
    match started {
        Ok(Ok(mut connection)) => {
            connection.process = process;
            Ok(connection)
        }
        Ok(Err(message)) => Err(failed(message, process).await),
        Err(_) => Err(failed(
            format!("did not start within {} s", limit.as_secs_f64()),
            process,
        )
        .await),
    }
}

async fn open(
    name: &str,
    server: &McpServer,
    env: &McpEnvironment,
    handler: Handler,
    process: &mut Option<AgentProcess>,
) -> Result<Connection, String> {
    let service = match server.transport() {
        McpTransport::Stdio => {
            let launch = launch(name, server, env)?;
            let (child, pipes) = AgentProcess::spawn(&launch).map_err(|e| e.to_string())?;
            *process = Some(child);
            serve_client(handler, (pipes.stdout, pipes.stdin))
                .await
                .map_err(|e| format!("the MCP handshake failed: {e}"))?
        }
        McpTransport::Http => {
            let url = server.url.clone().unwrap_or_default();
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            if let Some(token) = bearer_token(server)? {
                config = config.auth_header(token);
            }
            let headers: HashMap<_, _> = header_map(&server.headers)?
                .into_iter()
                .filter_map(|(k, v)| Some((k?, v)))
                .collect();
            config = config.custom_headers(headers);
            let transport = StreamableHttpClientTransport::from_config(config);
            serve_client(handler, transport)
                .await
                .map_err(|e| format!("the MCP handshake with {url} failed: {e}"))?
        }
        McpTransport::Sse => {
            let url = server.url.clone().unwrap_or_default();
            let mut headers = server.headers.clone();
            if let Some(token) = bearer_token(server)? {
                headers.insert("Authorization".into(), format!("Bearer {token}"));
            }
            let transport =
                LegacySse::connect(&url, header_map(&headers)?, server.startup_timeout())
                    .await
                    .map_err(|e| e.to_string())?;
            serve_client(handler, transport)
                .await
                .map_err(|e| format!("the MCP handshake with {url} failed: {e}"))?
        }
    };
    check_protocol(&service)?;
    let tools = list_tools(service.peer()).await?;
    Ok(Connection {
        service,
        process: None,
        tools,
    })
}

/// The revision the server answered must be one corral knows: its messages are read by
/// that revision's rules.
fn check_protocol(service: &RunningService<RoleClient, Handler>) -> Result<(), String> {
    let Some(info) = service.peer().peer_info() else {
        return Ok(());
    };
    let known = rmcp::model::ProtocolVersion::KNOWN_VERSIONS;
    if known.contains(&info.protocol_version) {
        return Ok(());
    }
    let names: Vec<String> = known.iter().map(ToString::to_string).collect();
    Err(format!(
        "the server speaks MCP revision {}, which corral does not know (it speaks {})",
        info.protocol_version,
        names.join(", ")
    ))
}

/// Pages of `tools/list` read at most: a server handing out cursors forever is cut off.
const MAX_PAGES: usize = 20;
/// Tools read at most, over all pages (corral offers far fewer; see the hub's cap).
const MAX_LISTED: usize = 1024;

/// Every tool the server lists (its pages, within [`MAX_PAGES`] and [`MAX_LISTED`]); none
/// when it offers no tools.
pub async fn list_tools(peer: &rmcp::Peer<RoleClient>) -> Result<Vec<ListedTool>, String> {
    let offers_tools = peer
        .peer_info()
        .is_none_or(|info| info.capabilities.tools.is_some());
    if !offers_tools {
        return Ok(Vec::new());
    }
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    let mut seen_cursors: Vec<String> = Vec::new();
    for _ in 0..MAX_PAGES {
        let params = cursor
            .clone()
            .map(|c| rmcp::model::PaginatedRequestParams::default().with_cursor(Some(c)));
        let page = peer
            .list_tools(params)
            .await
            .map_err(|e| format!("tools/list failed: {e}"))?;
        tools.extend(
            page.tools
                .iter()
                .filter_map(|tool| ListedTool::from_wire(&serde_json::to_value(tool).ok()?)),
        );
        match page.next_cursor {
            Some(next) if tools.len() < MAX_LISTED && !seen_cursors.contains(&next) => {
                seen_cursors.push(next.clone());
                cursor = Some(next);
            }
            _ => break,
        }
    }
    tools.truncate(MAX_LISTED);
    Ok(tools)
}

fn bearer_token(server: &McpServer) -> Result<Option<String>, String> {
    let Some(var) = &server.bearer_token_env_var else {
        return Ok(None);
    };
    match std::env::var(var) {
        Ok(token) if !token.is_empty() => Ok(Some(token)),
        _ => Err(format!(
            "bearer_token_env_var names {var}, which is not set"
        )),
    }
}

/// The process to start: the server's command through the sandbox helper (unless the
/// session runs unconfined or the server says `sandbox = false`), with the tool environment
/// plus the server's own variables and nothing else.
fn launch(name: &str, server: &McpServer, env: &McpEnvironment) -> Result<Launch, String> {
    let command = server.command.as_deref().unwrap_or_default();
    let mut vars = env.env.clone();
    for (key, value) in &server.env {
        vars.retain(|(k, _)| k != key);
        vars.push((key.clone(), value.clone()));
    }
    let path = vars
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let cwd = match &server.cwd {
        Some(cwd) if cwd.is_absolute() => cwd.clone(),
        Some(cwd) => env.root.join(cwd),
        None => env.root.clone(),
    };
    let program = find_program(command, &path, &cwd)
        .ok_or_else(|| format!("command {command:?} was not found (PATH={path})"))?;
    let program = program.canonicalize().unwrap_or(program);
    let confined = server.sandbox.unwrap_or(true) && env.sandbox.is_some();
    // The root is the model's to write: an unconfined server must not be a program from it.
    if !confined && program.starts_with(&env.root) {
        return Err(format!(
            "{} is inside the session root, which the model can change; an unconfined \
             server (sandbox = false, or the session's sandbox off) must be a program from \
             outside it",
            program.display()
        ));
    }
    let (program, args) = match (&env.sandbox, confined) {
        (Some(spec), true) => {
            let mut spec = spec.clone();
            if let Some(network) = server.network {
                spec.network = network;
            }
            spec.writable
                .extend(writable_paths(&server.writable, &env.root));
            spec.wrap(&program, server.args.iter().cloned())
        }
        _ => (program, server.args.clone()),
    };
    Ok(Launch {
        program,
        args,
        cwd,
        env: vars,
        env_remove: Vec::new(),
        env_clear: true,
        stderr_log: env
            .log_dir
            .as_ref()
            .map(|dir| dir.join(format!("{}.mcp-{name}.stderr.log", env.session_id))),
        kind: "mcp-server",
        display_name: Some(command.to_string()),
    })
}

/// A server's extra writable paths that exist (`~/` is the home directory, relative paths
/// are under the root); the helper refuses paths it cannot open.
fn writable_paths(paths: &[String], root: &Path) -> Vec<PathBuf> {
    paths
        .iter()
        .filter_map(|path| {
            let full = match path.strip_prefix("~/") {
                Some(rest) => dirs::home_dir()?.join(rest),
                None if Path::new(path).is_absolute() => PathBuf::from(path),
                None => root.join(path),
            };
            if full.exists() {
                Some(full)
            } else {
                tracing::warn!(path = %full.display(), "an MCP server's writable path does not exist; left out");
                None
            }
        })
        .collect()
}

/// A command with a slash is a path (relative to `cwd`); else the first executable of that
/// name on `path`.
pub fn find_program(command: &str, path: &str, cwd: &Path) -> Option<PathBuf> {
    if command.contains('/') {
        let candidate = cwd.join(command);
        return is_executable(&candidate).then_some(candidate);
    }
    on_path(command, |_| Some(path.to_string()))
}
