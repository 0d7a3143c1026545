//! The MCP servers of a session being opened: the config's (all, or those the request
//! picks), with the request's own on top, started inside the session's sandbox.

use std::path::Path;
use std::sync::Arc;

use super::{OpenSpec, sandbox, settings::Settings, tmpdir::SessionTmp};
use crate::config::{Config, McpServers};
use crate::error::{Error, runtime, usage};
use crate::session::Session;
use crate::tool::mcp::{McpEnvironment, McpHub, Notice};
use crate::tool::{ToolRegistry, ToolSettings};

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

/// The names of the servers a request chose, if it chose (`SessionMeta::mcp_servers`): a
/// reopen picks these again.
pub(super) fn chosen(spec: &OpenSpec) -> Option<Vec<String>> {
    if spec.mcp_select.is_none() && spec.mcp_servers.is_empty() {
        return None;
    }
    let mut names: Vec<String> = spec.mcp_select.clone().unwrap_or_default();
    names.extend(spec.mcp_servers.keys().cloned());
    names.sort();
    names.dedup();
    Some(names)
}

/// Starts the session's servers in the background; `None` when it has none.
pub fn start(
    spec: &OpenSpec,
    config: &Config,
    tools: &mut ToolSettings,
    root: &Path,
    session: &Arc<Session>,
) -> Option<McpHub> {
    let servers = servers_for(spec, config);
    if servers.is_empty() {
        return None;
    }
    // What the servers' definitions hold in confidence is cut out of everything the session
    // shows, like corral's own secrets: a `user` token may read these events.
    tools.redactor = tools.redactor.with(secrets_of(&servers));
    let redactor = tools.redactor.clone();
    let notice_session = session.clone();
    let notice: Notice = Arc::new(move |server: &str, message: String| {
        let message = redactor.redact(&message).into_owned();
        tracing::warn!(server, "{message}");
        notice_session.emit_error(message, serde_json::json!({"mcpServer": server}));
    });
    Some(McpHub::start(
        servers,
        environment(tools, root, session),
        notice,
    ))
}

/// The confidences of server definitions: header values, bearer tokens, URL query strings
/// and user info, and `env` values whose names look secret.
pub(crate) fn secrets_of(servers: &McpServers) -> Vec<(String, String)> {
    let mut secrets = Vec::new();
    for (name, server) in servers {
        for (header, value) in &server.headers {
            secrets.push((
                format!("mcp_servers.{name}.headers.{header}"),
                value.clone(),
            ));
        }
        if let Some(var) = &server.bearer_token_env_var
            && let Ok(token) = std::env::var(var)
        {
            secrets.push((var.clone(), token));
        }
        if let Some(url) = &server.url {
            if let Some((_, query)) = url.split_once('?') {
                secrets.push((format!("mcp_servers.{name}.url query"), query.to_string()));
            }
            let authority = url
                .split("://")
                .nth(1)
                .and_then(|rest| rest.split('/').next());
            if let Some((userinfo, _)) = authority.and_then(|a| a.rsplit_once('@')) {
                secrets.push((format!("mcp_servers.{name}.url user"), userinfo.to_string()));
            }
        }
        for (var, value) in &server.env {
            if crate::sandbox::env::looks_secret(var) {
                secrets.push((var.clone(), value.clone()));
            }
        }
    }
    secrets
}

/// What a session's servers run with: its root, sandbox and tool environment; their stderr
/// logs beside its event log.
fn environment(tools: &ToolSettings, root: &Path, session: &Session) -> McpEnvironment {
    McpEnvironment {
        root: root.to_path_buf(),
        sandbox: tools.sandbox.clone(),
        env: tools.env.clone(),
        log_dir: session
            .log_path()
            .and_then(Path::parent)
            .map(Path::to_path_buf),
        session_id: session.id().to_string(),
    }
}

/// `servers` started outside any session, exactly as a session rooted at `spec.cwd` (default:
/// the current directory) with `config` would start them: the same preset, sandbox and tool
/// environment. For `corral mcp-servers`; what it owns is stopped when this is dropped after
/// [`McpHub::shutdown`].
pub(crate) struct Standalone {
    pub hub: McpHub,
    _session: Arc<Session>,
    _tmpdir: SessionTmp,
}

pub(crate) async fn start_standalone(
    spec: &OpenSpec,
    config: &Config,
    servers: McpServers,
    notice: Notice,
) -> Result<Standalone, Error> {
    let cwd = match &spec.cwd {
        Some(cwd) => cwd.clone(),
        None => std::env::current_dir().map_err(usage)?,
    };
    let root = super::canonical_dir(&cwd)?;
    let settings = Settings::resolve(spec, config);
    let tools = ToolRegistry::builtin().map_err(runtime)?;
    let policy = super::load_policy(spec, &settings, &tools)?;
    let modes = sandbox::modes(settings.sandbox, settings.network, &policy)?;
    if let Ok(dir) = super::agents_dir() {
        super::clean_up_after_crashes(&dir);
    }
    // No event log: nothing here is a session anyone resumes; stderr tails stay in memory.
    let session = Session::create(None).map_err(runtime)?;
    let tmpdir = SessionTmp::create(session.id())
        .map_err(|e| runtime(format!("cannot create a temp dir for the servers: {e}")))?;
    let mut tool_settings = settings.tools(config, &policy, tmpdir.path());
    tool_settings.sandbox = sandbox::start(modes, &policy, &root, tmpdir.path(), &session).await?;
    let env = environment(&tool_settings, &root, &session);
    Ok(Standalone {
        hub: McpHub::start(servers, env, notice),
        _session: session,
        _tmpdir: tmpdir,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::McpServer;

    fn server() -> McpServer {
        McpServer {
            command: Some("x".into()),
            ..McpServer::default()
        }
    }

    #[test]
    fn a_choice_is_kept_for_a_reopen_and_picks_no_more_than_it_named() {
        let mut config = Config::default();
        for name in ["time", "git", "docs"] {
            config.mcp_servers.insert(name.into(), server());
        }
        let all = OpenSpec::default();
        assert_eq!(chosen(&all), None);
        assert_eq!(servers_for(&all, &config).len(), 3);
        let mut picked = OpenSpec {
            mcp_select: Some(vec!["time".into()]),
            ..OpenSpec::default()
        };
        picked.mcp_servers.insert("own".into(), server());
        let names = chosen(&picked).unwrap();
        assert_eq!(names, vec!["own".to_string(), "time".to_string()]);
        // The reopen: the recorded names select; the definition itself is not kept, so only
        // the config's `time` comes back.
        let reopened = OpenSpec {
            mcp_select: Some(names),
            ..OpenSpec::default()
        };
        let servers = servers_for(&reopened, &config);
        assert_eq!(servers.keys().collect::<Vec<_>>(), vec!["time"]);
        let none = OpenSpec {
            mcp_select: Some(Vec::new()),
            ..OpenSpec::default()
        };
        assert_eq!(chosen(&none), Some(Vec::new()));
        assert!(servers_for(&none, &config).is_empty());
    }
}
