//! Opening a session, whatever surface asks for it (`corral run`, the server, MCP, ACP):
//! [`plan`] resolves everything that can be wrong with the request before anything starts
//! (usage errors: model spec, directory, preset, sandbox modes, worktree); [`start`] creates
//! the session, its worktree, checks the model, sets up the sandbox and builds the agent;
//! [`OpenedSession::finish`] stops what the session owns.
//!
//! Submodules: `limits` (what a caller who is not the host's owner may open), `settings` (the
//! request, the config and the defaults resolved once), `start_agent` (an external agent for
//! the session), `instructions` (the project's AGENTS.md for the native loop), `sandbox`,
//! `secrets`, `tmpdir`.

mod desktop;
mod instructions;
mod limits;
mod links;
mod mcp;
pub mod mcp_request;
mod resume;
mod sandbox;
mod secrets;
mod settings;
mod spec;
mod start_agent;
mod tmpdir;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::backend::Backend;
use crate::backend::native::{Fallback, NativeBackend, model_client};
use crate::config::Config;
use crate::error::{Error, runtime, usage};
use crate::event::{Envelope, Status};
use crate::llm_loop::LlmLoop;
use crate::model::{self, ExternalSpec, ModelChoice, ModelClient, ModelSpec, ToolChoiceMode};
use crate::policy::{DeskLink, Policy, PolicyOverrides};
use crate::sandbox::{NetworkMode, SandboxMode};
use crate::session::{Session, SessionMeta, WorktreeMeta};
use crate::tool::ToolRegistry;

pub use crate::worktree::RunWorktree;
use crate::worktree::session as worktree;
pub use limits::Limits;
use links::{delegator, session_meta};
pub(crate) use mcp::start_standalone;
use settings::Settings;
pub(crate) use settings::permission;
pub use spec::OpenSpec;

/// A session that cannot be created or resumed: held by another process, or the request.
fn session_error(e: crate::session::SessionError) -> Error {
    match e {
        crate::session::SessionError::InUse(e) => Error::InUse(e.to_string()),
        e => usage(e),
    }
}

/// Everything resolved, nothing started.
pub struct OpenPlan {
    spec: OpenSpec,
    config: Config,
    settings: Settings,
    engine: Engine,
    root: PathBuf,
    resumed: Option<SessionMeta>,
    policy: Policy,
    tools: ToolRegistry,
    sandbox: (SandboxMode, NetworkMode),
    worktree: Option<(crate::worktree::StartPoint, crate::worktree::Store)>,
}

impl OpenPlan {
    pub fn policy(&self) -> &Policy {
        &self.policy
    }
}

/// What runs the turns: a model client for corral's own loop, or an external agent.
enum Engine {
    Native {
        client: Arc<dyn ModelClient>,
        model: ModelSpec,
    },
    External(ExternalSpec),
}

/// `$XDG_CACHE_HOME/corral/agents`: event logs, session metadata, pids.json.
pub fn agents_dir() -> Result<PathBuf, Error> {
    dirs::cache_dir()
        .map(|d| d.join("corral").join("agents"))
        .ok_or_else(|| usage("cannot find a cache directory: set XDG_CACHE_HOME or HOME"))
}

/// `$XDG_CONFIG_HOME/corral/policies`: user presets.
pub fn user_policy_dir() -> Option<PathBuf> {
    dirs::config_dir().map(|d| d.join("corral").join("policies"))
}

/// The model text of a request, parsed where it comes in: a usage error, or for a bounded
/// caller a refusal when it names an agent (see [`Limits::parse_model`]).
pub fn parse_model(text: &str, limits: Option<&Limits>) -> Result<ModelChoice, Error> {
    match limits {
        Some(limits) => limits.parse_model(text),
        None => text.parse().map_err(usage),
    }
}

/// A request's model text with an effort suffix (`claude:sonnet/high`) split off: the choice,
/// and the effort, where the request's own `effort` field (which wins) did not name one.
pub fn parse_model_and_effort(
    text: &str,
    effort: Option<crate::model::Effort>,
    limits: Option<&Limits>,
) -> Result<(ModelChoice, Option<crate::model::Effort>), Error> {
    let (text, suffix) = crate::model::split_effort_suffix(text);
    Ok((parse_model(text, limits)?, effort.or(suffix)))
}

fn load_policy(
    spec: &OpenSpec,
    settings: &Settings,
    tools: &ToolRegistry,
) -> Result<Policy, Error> {
    for name in spec.allow.iter().chain(&spec.deny) {
        // An MCP server's tools are known once it runs; their names (or globs) pass here.
        if tools.get(name).is_none() && !crate::tool::is_mcp_name(name) {
            let known: Vec<&str> = tools.names().collect();
            return Err(usage(format!(
                "unknown tool {name:?} in --allow/--deny; tools: {}",
                known.join(", ")
            )));
        }
    }
    let overrides = PolicyOverrides {
        auto_approve: spec.auto_approve,
        allow: spec.allow.clone(),
        deny: spec.deny.clone(),
        nested_agents: spec.nested_agents,
    };
    Policy::load(
        &settings.permission,
        user_policy_dir().as_deref(),
        &overrides,
    )
    .map_err(usage)
}

fn canonical_dir(path: &Path) -> Result<PathBuf, Error> {
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

/// Resolves a request. `progress` receives start-up lines of a local model server.
pub async fn plan(
    mut spec: OpenSpec,
    config: Config,
    progress: model::Progress,
) -> Result<OpenPlan, Error> {
    // A bounded caller is judged before anything is read, contacted or started.
    if let Some(limits) = &spec.limits {
        limits.check_request(&spec, &config)?;
    }
    spec.resume = resume::which(&spec)?;
    let resumed = match &spec.resume {
        Some(id) => {
            let dir = agents_dir()?;
            let meta = SessionMeta::load(&dir, id).map_err(|e| {
                usage(format!(
                    "cannot resume session {id}: {e} (looked in {})",
                    dir.display()
                ))
            })?;
            if let Some(limits) = &spec.limits {
                limits.check_resumed(&meta, spec.owner.as_deref())?;
            }
            Some(meta)
        }
        None => None,
    };
    let cwd = match (&spec.cwd, &resumed) {
        (Some(cwd), _) => cwd.clone(),
        (None, Some(meta)) => meta.cwd.clone(),
        (None, None) => std::env::current_dir().map_err(usage)?,
    };
    let bounded_root = match &spec.limits {
        Some(limits) => Some(limits.check_root(&cwd)?),
        None => None,
    };
    // The request's model, else the resumed session's, else the config's.
    let model = match (&spec.model, &resumed) {
        (Some(model), _) => Some(model.clone()),
        (None, Some(meta)) => Some(meta.model.parse().map_err(usage)?),
        (None, None) => config.model.clone(),
    };
    // What sessions this one delegates to are opened with: a resumed session's model too.
    if spec.model.is_none() && resumed.is_some() {
        spec.model = model.clone();
    }
    let engine = match model {
        Some(ModelChoice::External(external)) => Engine::External(external),
        Some(ModelChoice::Native(model)) => {
            native_engine(Some(model), &spec, &config, progress).await?
        }
        None => native_engine(None, &spec, &config, progress).await?,
    };
    let root = match bounded_root {
        Some(root) => root,
        None => canonical_dir(&cwd)?,
    };
    let mut settings = Settings::resolve(&spec, &config);
    // Small local models rarely call a tool on their own: unless someone chose otherwise,
    // a gguf model's turns start with a required call.
    if spec.tool_choice.is_none()
        && config.tool_choice.is_none()
        && matches!(&engine, Engine::Native { model, .. } if model.provider == model::Provider::Gguf)
    {
        settings.loop_config.tool_choice = ToolChoiceMode::FirstRequired;
    }
    if spec.effort.is_none()
        && let Some(effort) = resumed.as_ref().and_then(|meta| meta.effort)
    {
        settings.effort = Some(effort);
    }
    let tools = ToolRegistry::builtin().map_err(runtime)?;
    let policy = load_policy(&spec, &settings, &tools)?;
    if let Some(limits) = &spec.limits {
        limits.check_policy(&policy)?;
    }
    let sandbox = sandbox::modes(settings.sandbox, settings.network, &policy)?;
    let worktree = worktree::plan_for_run(spec.worktree, resumed.is_some(), &root)?;
    if let (Some(limits), Some((plan, _))) = (&spec.limits, &worktree) {
        limits.check_repository(&plan.repo)?;
    }
    Ok(OpenPlan {
        spec,
        config,
        settings,
        engine,
        root,
        resumed,
        policy,
        tools,
        sandbox,
        worktree,
    })
}

async fn native_engine(
    model: Option<ModelSpec>,
    spec: &OpenSpec,
    config: &Config,
    progress: model::Progress,
) -> Result<Engine, Error> {
    let fallback = match spec.limits {
        Some(_) => Fallback::RunningServersOnly,
        None => Fallback::Embedded,
    };
    let (client, model) =
        model_client(model, spec.base_url.as_deref(), config, progress, fallback).await?;
    Ok(Engine::Native { client, model })
}

/// A session that is ready for turns.
pub struct OpenedSession {
    pub session: Arc<Session>,
    pub backend: Box<dyn Backend>,
    pub worktree: Option<RunWorktree>,
    pub meta: SessionMeta,
    /// The effort its turns run at unless a turn asks for another; `None`: the model's own.
    pub effort: Option<crate::model::Effort>,
    /// The preset and sandbox it opened with, for status lines.
    pub posture: Posture,
    /// The session's private TMPDIR, removed when this is dropped.
    _tmpdir: tmpdir::SessionTmp,
}

/// What a session was opened under: its preset and its tools' confinement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Posture {
    pub preset: String,
    pub sandbox: SandboxMode,
    pub network: NetworkMode,
}

/// Opening failed after the session existed: its events (an error among them) are still
/// there for the caller to show.
pub struct OpenFailure {
    pub error: Error,
    pub session: Option<Arc<Session>>,
}

impl From<Error> for OpenFailure {
    fn from(error: Error) -> Self {
        OpenFailure {
            error,
            session: None,
        }
    }
}

/// What crashed runtimes left goes first, once per process (later calls do nothing): their
/// children (pids.json, from then on recording ours) and their sessions' temp dirs.
pub(crate) fn clean_up_after_crashes(log_dir: &Path) {
    match crate::sandbox::reaper::install(crate::sandbox::reaper::pids_path(log_dir)) {
        Ok(0) => {}
        Ok(killed) => tracing::warn!(killed, "killed leftover processes of a dead runtime"),
        Err(e) => tracing::warn!(error = %e, "cannot use pids.json; leftovers are not reaped"),
    }
    tmpdir::sweep_once();
}

/// Starts a planned session. `notes` gets the human lines about a worktree.
pub async fn start(
    plan: OpenPlan,
    log_dir: &Path,
    notes: &mut (dyn std::io::Write + Send),
) -> Result<OpenedSession, OpenFailure> {
    clean_up_after_crashes(log_dir);
    let (session, history) = match (&plan.spec.resume, &plan.spec.id) {
        (Some(id), _) => Session::resume(id, log_dir).map_err(session_error)?,
        (None, Some(id)) => (
            Session::create_with_id(id, Some(log_dir)).map_err(session_error)?,
            Vec::new(),
        ),
        (None, None) => (Session::create(Some(log_dir)).map_err(runtime)?, Vec::new()),
    };
    if plan.spec.discard_unused && plan.spec.resume.is_none() {
        session.discard_if_unheard();
    }
    let fail = |error: Error, session: &Arc<Session>| {
        session.close();
        OpenFailure {
            error,
            session: Some(session.clone()),
        }
    };
    // The worktree is named after the session, so it comes now; from here on it is the root.
    let worktree = match worktree::start_for_run(plan.worktree, session.id(), notes) {
        Ok(worktree) => worktree,
        Err(e) => return Err(fail(e, &session)),
    };
    let root = worktree
        .as_ref()
        .map_or(plan.root.clone(), |w| w.root.clone());
    let effort = plan.settings.effort;
    let posture = Posture {
        preset: plan.policy.name.clone(),
        sandbox: plan.sandbox.0,
        network: plan.sandbox.1,
    };
    match finish_start(
        &plan.spec,
        plan.config,
        plan.settings,
        plan.engine,
        plan.resumed,
        plan.policy,
        plan.tools,
        plan.sandbox,
        root,
        worktree.as_ref().map(RunWorktree::meta),
        &session,
        &history,
        notes,
    )
    .await
    {
        Ok((mut backend, meta, tmpdir)) => {
            // The opening effort counts as applied either way: the note is said once.
            let _ = apply_effort(backend.as_mut(), effort, &session).await;
            Ok(OpenedSession {
                session,
                backend,
                worktree,
                meta,
                effort,
                posture,
                _tmpdir: tmpdir,
            })
        }
        Err(error) => {
            worktree::end_for_run(worktree.as_ref(), notes);
            Err(fail(error, &session))
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn finish_start(
    spec: &OpenSpec,
    config: Config,
    settings: Settings,
    engine: Engine,
    resumed: Option<SessionMeta>,
    policy: Policy,
    mut tools: ToolRegistry,
    modes: (SandboxMode, NetworkMode),
    root: PathBuf,
    worktree: Option<WorktreeMeta>,
    session: &Arc<Session>,
    history: &[Envelope],
    notes: &mut (dyn std::io::Write + Send),
) -> Result<(Box<dyn Backend>, SessionMeta, tmpdir::SessionTmp), Error> {
    let (client, model) = match engine {
        Engine::Native { client, model } => (client, model),
        Engine::External(external) => {
            return start_agent::start(
                spec, &settings, external, resumed, policy, tools, root, worktree, session,
            )
            .await;
        }
    };
    let info = match client.prepare().await {
        Ok(info) => info,
        Err(e) => {
            session.emit_error(e.to_string(), serde_json::Value::Null);
            let _ = client.shutdown().await;
            // Exit 1 like the same failure in a turn on any wire (a model the server lacks
            // is the server's state: the same spec works once it is pulled).
            return Err(runtime(e));
        }
    };
    session.transition(Status::Idle).map_err(runtime)?;
    let meta = session_meta(
        spec,
        session,
        resumed,
        &root,
        model.to_string(),
        client.base_url().to_string(),
        worktree,
    );
    // A private temp dir per session, exported to tools as TMPDIR.
    let tmpdir = tmpdir::SessionTmp::create(session.id())
        .map_err(|e| runtime(format!("cannot create the session's temp dir: {e}")))?;
    let mut tool_settings = settings.tools(&config, &policy, tmpdir.path());
    desktop::withhold_unusable(&mut tools, &tool_settings.env, notes).await;
    tool_settings.editor = spec.editor.clone();
    tool_settings.sandbox = sandbox::start(modes, &policy, &root, tmpdir.path(), session).await?;
    // The session's own directory is hidden from tools: they cannot put quarantined config back.
    tool_settings.quarantine = session
        .log_path()
        .and_then(Path::parent)
        .map(|dir| dir.join("quarantine").join(session.id()));
    let mut loop_config = settings.loop_config;
    instructions::load_into(
        &settings.instructions,
        &root,
        &mut loop_config.system,
        session,
    );
    let mcp = mcp::start(spec, &config, &mut tool_settings, &root, session);
    tool_settings.delegator = delegator(spec, &config, &root, session);
    let mut agent = LlmLoop::new(
        session.clone(),
        client.clone(),
        tools,
        policy,
        root,
        loop_config,
        info.context_window,
    );
    if let Some(DeskLink(desk)) = &spec.desk {
        agent.ask_through(desk.clone());
    }
    agent.set_tool_settings(tool_settings);
    if let Some(hub) = mcp {
        // In parallel, each bounded by its startup timeout; a slow one joins later.
        hub.wait_started().await;
        agent.set_mcp(hub);
    }
    if !history.is_empty() {
        agent.restore(history);
    }
    let backend = NativeBackend::new(agent, client, spec.base_url.clone(), config);
    Ok((Box::new(backend), meta, tmpdir))
}

/// How long an agent may take to change its effort (an ACP agent that never answers must not
/// hold the session).
const EFFORT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

/// Sets the backend's effort; where it cannot take it, the session says so (an `error` whose
/// data names the effort) and the turns run at the agent's own default. Whether it took it.
pub async fn apply_effort(
    backend: &mut dyn Backend,
    effort: Option<crate::model::Effort>,
    session: &Session,
) -> bool {
    let shown = effort.map_or("default", crate::model::Effort::as_str);
    let outcome = match tokio::time::timeout(EFFORT_TIMEOUT, backend.set_effort(effort)).await {
        Ok(outcome) => outcome,
        Err(_) => Err(format!(
            "effort {shown} is not applied: the agent did not answer within {} s",
            EFFORT_TIMEOUT.as_secs()
        )),
    };
    match outcome {
        Ok(()) => true,
        Err(note) => {
            tracing::info!(%note, "effort not applied");
            session.emit_error(
                note,
                serde_json::json!({"code": "EFFORT_NOT_APPLIED", "effort": effort}),
            );
            false
        }
    }
}

impl OpenedSession {
    /// Stops what the session owns (a local model server), closes it (status dead, log
    /// flushed), and keeps or removes its worktree (a line about it goes to `notes`).
    pub async fn finish(mut self, notes: &mut (dyn std::io::Write + Send)) {
        self.backend.shutdown().await;
        self.session.close();
        worktree::end_for_run(self.worktree.as_ref(), notes);
    }
}

/// The secrets corral holds itself (the server's JWT secret from the config, the environment
/// or its file; API key variables): tool output is redacted of them as well as of every
/// secret-named variable.
pub(crate) fn held_secrets(config: &Config) -> Vec<(String, String)> {
    secrets::held(
        config,
        |name| std::env::var(name).ok(),
        Config::jwt_secret_path().as_deref(),
    )
}
