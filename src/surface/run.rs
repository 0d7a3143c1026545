//! `corral run`: one task (or, with `-i`, a conversation) in the terminal.
//!
//! Order of business: configuration and model resolution (usage errors exit 2 before anything
//! starts), the session and its renderer, the model check, then turns. Ctrl-C once cancels the
//! running turn (the tool is killed, the turn ends `cancelled`); twice exits at once.

use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncBufReadExt;
use tokio_util::sync::CancellationToken;

use crate::agent::{Agent, AgentConfig, ToolChoiceMode, TurnOutcome};
use crate::config::Config;
use crate::event::{Envelope, Status, StopReason};
use crate::model::{self, ModelClient, ModelError, ModelSpec};
use crate::policy::{Policy, PolicyOverrides};
use crate::session::{Session, SessionMeta};
use crate::tool::{Danger, ToolRegistry, ToolSettings};

use super::approve;
use super::tty::{self, Style};
use super::worktree;

#[derive(Debug, Clone, Default)]
pub struct RunArgs {
    pub prompt: Option<String>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub cwd: Option<PathBuf>,
    pub json: bool,
    pub max_steps: Option<u32>,
    pub interactive: bool,
    pub resume: Option<String>,
    pub system: Option<String>,
    pub config_path: Option<PathBuf>,
    pub tool_choice: Option<ToolChoiceMode>,
    /// Preset name or path (`-p`).
    pub permission: Option<String>,
    pub auto_approve: Option<Danger>,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    /// Permission decisions arrive as NDJSON lines on stdin.
    pub approve_stdin: bool,
    /// Run in a new git worktree of the cwd's repository (`--worktree`).
    pub worktree: bool,
    /// `--sandbox`: how shell and python are confined (default: config, else best-effort).
    pub sandbox: Option<crate::sandbox::SandboxMode>,
    /// `--network`: whether shell and python may use the network.
    pub network: Option<crate::sandbox::NetworkMode>,
}

/// How `corral run` ends, as a process exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Ok = 0,
    Failure = 1,
    Usage = 2,
    Cancelled = 130,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Bad flags or configuration: exit 2.
    #[error("{0}")]
    Usage(String),
    /// Something failed at run time: exit 1.
    #[error("{0}")]
    Runtime(String),
}

impl RunError {
    pub fn exit(&self) -> Exit {
        match self {
            RunError::Usage(_) => Exit::Usage,
            RunError::Runtime(_) => Exit::Failure,
        }
    }
}

fn usage(e: impl ToString) -> RunError {
    RunError::Usage(e.to_string())
}

fn agents_dir() -> Result<PathBuf, RunError> {
    dirs::cache_dir()
        .map(|d| d.join("corral").join("agents"))
        .ok_or_else(|| usage("cannot find a cache directory: set XDG_CACHE_HOME or HOME"))
}

struct Prepared {
    client: Arc<dyn ModelClient>,
    spec: ModelSpec,
    root: PathBuf,
    config: Config,
    resumed: Option<(String, SessionMeta)>,
    policy: Policy,
    tools: ToolRegistry,
    worktree: Option<crate::session::WorktreeMeta>,
    sandbox: (crate::sandbox::SandboxMode, crate::sandbox::NetworkMode),
}

/// `$XDG_CONFIG_HOME/corral/policies`: user presets.
pub fn user_policy_dir() -> Option<PathBuf> {
    dirs::config_dir().map(|d| d.join("corral").join("policies"))
}

fn load_policy(args: &RunArgs, config: &Config, tools: &ToolRegistry) -> Result<Policy, RunError> {
    for name in args.allow.iter().chain(&args.deny) {
        if tools.get(name).is_none() {
            let known: Vec<&str> = tools.names().collect();
            return Err(usage(format!(
                "unknown tool {name:?} in --allow/--deny; tools: {}",
                known.join(", ")
            )));
        }
    }
    let spec = args
        .permission
        .clone()
        .or_else(|| config.permission.clone())
        .unwrap_or_else(|| "default".to_string());
    let overrides = PolicyOverrides {
        auto_approve: args.auto_approve,
        allow: args.allow.clone(),
        deny: args.deny.clone(),
    };
    Policy::load(&spec, user_policy_dir().as_deref(), &overrides).map_err(usage)
}

async fn prepare(args: &RunArgs) -> Result<Prepared, RunError> {
    let config_path = args.config_path.clone().or_else(Config::default_path);
    let config = match &config_path {
        Some(path) => Config::load(path).map_err(usage)?,
        None => Config::default(),
    };
    let resumed = match &args.resume {
        Some(id) => {
            let dir = agents_dir()?;
            let meta = SessionMeta::load(&dir, id).map_err(|e| {
                usage(format!(
                    "cannot resume session {id}: {e} (looked in {})",
                    dir.display()
                ))
            })?;
            Some((id.clone(), meta))
        }
        None => None,
    };
    let env = |name: &str| std::env::var(name).ok();
    let settings = config.http_settings();
    let spec_text = match args
        .model
        .clone()
        .or_else(|| resumed.as_ref().map(|(_, m)| m.model.clone()))
        .or_else(|| config.model.clone())
    {
        Some(text) => text,
        None => {
            let (base, _) = model::resolve_base_url(
                model::Provider::Ollama,
                args.base_url.as_deref(),
                config.provider(model::Provider::Ollama).base_url.as_deref(),
                &env,
            );
            let name = model::find_ollama_tool_model(&base, &settings)
                .await
                .map_err(usage)?;
            format!("ollama:{name}")
        }
    };
    let spec: ModelSpec = spec_text.parse().map_err(usage)?;
    let provider_config = config.provider(spec.provider);
    let (base_url, _) = model::resolve_base_url(
        spec.provider,
        args.base_url.as_deref(),
        provider_config.base_url.as_deref(),
        &env,
    );
    let key_var = provider_config
        .api_key_env
        .clone()
        .or_else(|| spec.provider.api_key_env().map(str::to_string));
    let api_key = key_var.as_deref().and_then(env).filter(|k| !k.is_empty());
    if spec.provider == model::Provider::OpenAi
        && api_key.is_none()
        && args.base_url.is_none()
        && provider_config.base_url.is_none()
    {
        return Err(usage(format!(
            "{spec} needs an API key: set {}",
            key_var.as_deref().unwrap_or("OPENAI_API_KEY")
        )));
    }
    let window = match spec.provider.wire() {
        model::Wire::OllamaNative => provider_config.num_ctx,
        model::Wire::OpenAiChat => provider_config.context_window,
    };
    let client: Arc<dyn ModelClient> = if spec.provider == model::Provider::Gguf {
        let progress: model::Progress = Arc::new(|line: &str| {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "{line}");
        });
        Arc::new(
            model::GgufClient::new(spec.clone(), config.local.settings(), settings, progress)
                .map_err(usage)?,
        )
    } else {
        model::connect(spec.clone(), base_url, api_key, settings, window)
            .map_err(|e| RunError::Runtime(e.to_string()))?
    };
    let cwd = match (&args.cwd, &resumed) {
        (Some(cwd), _) => cwd.clone(),
        (None, Some((_, meta))) => meta.cwd.clone(),
        (None, None) => std::env::current_dir().map_err(usage)?,
    };
    let root = canonical_dir(&cwd)?;
    let tools = ToolRegistry::builtin().map_err(|e| RunError::Runtime(e.to_string()))?;
    let policy = load_policy(args, &config, &tools)?;
    let sandbox = super::sandbox::modes(args.sandbox, args.network, &config, &policy)?;
    if args.approve_stdin && (args.prompt.is_none() || args.interactive) {
        return Err(usage(
            "with --approve-stdin, stdin carries decisions: give the prompt as an argument (and no -i)",
        ));
    }
    Ok(Prepared {
        client,
        spec,
        root,
        config,
        resumed,
        policy,
        tools,
        worktree: None,
        sandbox,
    })
}

fn canonical_dir(path: &Path) -> Result<PathBuf, RunError> {
    let root = path.canonicalize().map_err(|e| {
        usage(format!(
            "working directory {} cannot be used: {e}",
            path.display()
        ))
    })?;
    if !root.is_dir() {
        return Err(usage(format!(
            "working directory {} is not a directory",
            path.display()
        )));
    }
    Ok(root)
}

/// Reads the prompt from the argument, else from a piped stdin.
fn initial_prompt(args: &RunArgs) -> Result<Option<String>, RunError> {
    if let Some(prompt) = &args.prompt {
        return Ok(Some(prompt.clone()));
    }
    if args.interactive {
        return Ok(None);
    }
    if std::io::stdin().is_terminal() {
        return Err(usage(
            "no prompt: pass it as an argument, pipe it on stdin, or use -i for a conversation",
        ));
    }
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| usage(format!("cannot read the prompt from stdin: {e}")))?;
    if text.trim().is_empty() {
        return Err(usage("the prompt on stdin is empty"));
    }
    Ok(Some(text))
}

/// Runs `corral run` to its end and returns the exit code.
pub async fn run(args: RunArgs) -> Result<Exit, RunError> {
    let prepared = prepare(&args).await?;
    let first_prompt = initial_prompt(&args)?;
    let worktree_plan =
        worktree::plan_for_run(args.worktree, prepared.resumed.is_some(), &prepared.root)?;
    let dir = agents_dir()?;
    // Children a crashed runtime left behind go first; then ours are recorded.
    match crate::sandbox::reaper::install(crate::sandbox::reaper::pids_path(&dir)) {
        Ok(0) => {}
        Ok(killed) => tracing::warn!(killed, "killed leftover processes of a dead runtime"),
        Err(e) => tracing::warn!(error = %e, "cannot use pids.json; leftovers are not reaped"),
    }
    let (session, history) = match &prepared.resumed {
        Some((id, _)) => Session::resume(id, &dir).map_err(usage)?,
        None => (
            Session::create(Some(&dir)).map_err(|e| RunError::Runtime(e.to_string()))?,
            Vec::new(),
        ),
    };
    // The worktree is named after the session, so it comes now; from here on it is the root.
    let started = worktree::start_for_run(worktree_plan, session.id(), &mut std::io::stderr());
    let worktree = match started {
        Ok(worktree) => worktree,
        Err(e) => {
            session.close();
            return Err(e);
        }
    };
    let prepared = match &worktree {
        Some(wt) => Prepared {
            root: wt.root.clone(),
            worktree: Some(wt.meta()),
            ..prepared
        },
        None => prepared,
    };
    if let Some(warning) = &prepared.policy.warning {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "warning: {warning}");
    }
    let events = session.tap(session.last_seq().saturating_sub(1));
    let terminal_approvals = !args.json && !args.approve_stdin && approve::terminal_available();
    let renderer = if args.json {
        tokio::spawn(tty::render_json(events))
    } else {
        let style = Style {
            interactive: std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        };
        let prompter = terminal_approvals.then(|| session.clone());
        tokio::spawn(tty::render_terminal(events, style, prompter))
    };
    if args.approve_stdin {
        tokio::spawn(approve::answer_from_stdin(session.clone()));
    }
    let client = prepared.client.clone();
    let result = drive(&args, prepared, &session, &history, first_prompt).await;
    if let Err(e) = client.shutdown().await {
        tracing::warn!(error = %e, "stopping the model server");
    }
    session.close();
    if let Err(e) = renderer.await {
        tracing::error!(error = %e, "renderer task failed");
    }
    worktree::end_for_run(worktree.as_ref(), &mut std::io::stderr());
    result
}

async fn drive(
    args: &RunArgs,
    prepared: Prepared,
    session: &Arc<Session>,
    history: &[Envelope],
    first_prompt: Option<String>,
) -> Result<Exit, RunError> {
    let info = match prepared.client.prepare().await {
        Ok(info) => info,
        Err(e) => {
            session.emit_error(e.to_string(), serde_json::Value::Null);
            return Err(match e {
                ModelError::ModelNotFound { .. } => RunError::Usage(e.to_string()),
                _ => RunError::Runtime(e.to_string()),
            });
        }
    };
    session
        .transition(Status::Idle)
        .map_err(|e| RunError::Runtime(e.to_string()))?;
    if prepared.resumed.is_none()
        && let Some(dir) = session.log_path().and_then(Path::parent)
    {
        let meta = SessionMeta {
            id: session.id().to_string(),
            model: prepared.spec.to_string(),
            base_url: prepared.client.base_url().to_string(),
            cwd: prepared.root.clone(),
            created_at: crate::event::Timestamp::now().to_string(),
            system: args.system.clone(),
            worktree: prepared.worktree.clone(),
        };
        if let Err(e) = meta.save(dir) {
            tracing::warn!(error = %e, "cannot save session metadata");
        }
    }
    let mut config = agent_config(args, &prepared.config);
    config.attended = args.approve_stdin || (!args.json && approve::terminal_available());
    // A private temp dir per session, exported to tools as TMPDIR; removed with the session.
    let tmpdir = tempfile::Builder::new()
        .prefix(&format!("corral-{}-", session.id()))
        .tempdir()
        .map_err(|e| RunError::Runtime(format!("cannot create the session's temp dir: {e}")))?;
    let mut settings = tool_settings(&prepared.config, &prepared.policy, tmpdir.path());
    let (policy, root) = (&prepared.policy, &prepared.root);
    settings.sandbox =
        super::sandbox::start(prepared.sandbox, policy, root, tmpdir.path(), session).await?;
    let mut agent = Agent::new(
        session.clone(),
        prepared.client.clone(),
        prepared.tools.clone(),
        prepared.policy.clone(),
        prepared.root.clone(),
        config,
        info.context_window,
    );
    agent.set_tool_settings(settings);
    if !history.is_empty() {
        agent.restore(history);
    }
    let interrupts = Interrupts::install(session.clone());
    let mut last: Option<TurnOutcome> = None;
    if let Some(prompt) = first_prompt {
        last = Some(interrupts.run_turn(&mut agent, &prompt).await);
    }
    if args.interactive {
        return converse(&interrupts, &mut agent).await;
    }
    Ok(match last.map(|o| o.stop_reason) {
        Some(StopReason::EndTurn) | None => Exit::Ok,
        Some(StopReason::Cancelled) => Exit::Cancelled,
        Some(StopReason::MaxSteps) | Some(StopReason::Error) => Exit::Failure,
    })
}

/// `-i`: one turn per line of stdin until EOF or `/exit`.
async fn converse(interrupts: &Interrupts, agent: &mut Agent) -> Result<Exit, RunError> {
    {
        let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
        let show_prompt = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
        loop {
            if show_prompt {
                use std::io::Write;
                let mut err = std::io::stderr();
                let _ = write!(err, "› ");
                let _ = err.flush();
            }
            let line = match lines.next_line().await {
                Ok(Some(line)) => line,
                Ok(None) => break,
                Err(e) => return Err(RunError::Runtime(format!("reading stdin: {e}"))),
            };
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            if line == "/exit" || line == "/quit" {
                break;
            }
            interrupts.run_turn(agent, line).await;
        }
        // A conversation that ended at the person's request ended normally.
        Ok(Exit::Ok)
    }
}

/// Tool settings for a session: limits from config and policy, the scrubbed environment with
/// the session's private temp dir, and the secrets to redact.
fn tool_settings(config: &Config, policy: &Policy, tmpdir: &Path) -> ToolSettings {
    let defaults = ToolSettings::default();
    let runtime_env: Vec<(String, String)> = std::env::vars().collect();
    let max_timeout = policy
        .max_timeout_secs
        .map_or(defaults.max_timeout, Duration::from_secs);
    ToolSettings {
        default_timeout: config
            .shell_timeout_secs
            .map_or(defaults.default_timeout, Duration::from_secs)
            .min(max_timeout),
        max_timeout,
        screenshot_max_long_edge: config
            .screenshot_max_long_edge
            .unwrap_or(defaults.screenshot_max_long_edge),
        open_url_command: config.open_url_command.clone(),
        url_schemes: policy
            .url_schemes
            .clone()
            .unwrap_or(defaults.url_schemes.clone()),
        env: crate::sandbox::env::tool_env(runtime_env.clone(), &policy.env, Some(tmpdir)),
        redactor: crate::sandbox::env::Redactor::from_env(runtime_env, []),
        ..defaults
    }
}

fn agent_config(args: &RunArgs, config: &Config) -> AgentConfig {
    let defaults = AgentConfig::default();
    AgentConfig {
        max_steps: args
            .max_steps
            .or(config.max_steps)
            .unwrap_or(defaults.max_steps),
        max_tokens: config.max_tokens.unwrap_or(defaults.max_tokens),
        temperature: config.temperature,
        tool_choice: args
            .tool_choice
            .or_else(|| {
                config
                    .tool_choice
                    .as_deref()
                    .and_then(ToolChoiceMode::parse)
            })
            .unwrap_or(defaults.tool_choice),
        compaction_threshold: config
            .compaction_threshold
            .unwrap_or(defaults.compaction_threshold),
        system: args.system.clone().or_else(|| config.system.clone()),
        tool_output_cap: config.tool_output_cap,
        approval_timeout: config.approval_timeout_secs.map(Duration::from_secs),
        ..defaults
    }
}

/// Ctrl-C handling: the first press cancels the running turn, a second press while it is
/// still winding down exits at once (after flushing the event log).
struct Interrupts {
    current: Arc<Mutex<Option<CancellationToken>>>,
}

impl Interrupts {
    fn install(session: Arc<Session>) -> Interrupts {
        let current: Arc<Mutex<Option<CancellationToken>>> = Arc::new(Mutex::new(None));
        let watched = current.clone();
        tokio::spawn(async move {
            while tokio::signal::ctrl_c().await.is_ok() {
                let token = watched.lock().unwrap_or_else(|p| p.into_inner()).clone();
                match token {
                    Some(token) if !token.is_cancelled() => token.cancel(),
                    // A second press, or one with no turn running: leave now.
                    _ => {
                        // Leaving without unwinding: children in their own process groups
                        // (tools, a local model server) would outlive us otherwise.
                        crate::sandbox::reaper::kill_own_children();
                        session.close();
                        std::process::exit(Exit::Cancelled as i32);
                    }
                }
            }
        });
        Interrupts { current }
    }

    async fn run_turn(&self, agent: &mut Agent, prompt: &str) -> TurnOutcome {
        let token = CancellationToken::new();
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Some(token.clone());
        let outcome = agent.run_turn(prompt, token).await;
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = None;
        outcome
    }
}
