//! Starting an external agent for a session (claude, codex, an ACP agent): its metadata, its
//! approver, its private HOME, then the backend's own start.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::settings::Settings;
use super::{OpenSpec, session_meta, tmpdir};
use crate::backend::Backend;
use crate::backend::external::ExternalContext;
use crate::error::{Error, runtime};
use crate::event::Status;
use crate::model::ExternalSpec;
use crate::policy::Approver;
use crate::policy::Policy;
use crate::session::{Session, SessionMeta, WorktreeMeta};
use crate::tool::ToolRegistry;

/// Starts an external agent for the session: its process, handshake and session.
#[allow(clippy::too_many_arguments)]
pub(super) async fn start(
    spec: &OpenSpec,
    settings: &Settings,
    external: ExternalSpec,
    resumed: Option<SessionMeta>,
    policy: Policy,
    tools: ToolRegistry,
    root: PathBuf,
    worktree: Option<WorktreeMeta>,
    session: &Arc<Session>,
) -> Result<(Box<dyn Backend>, SessionMeta, tmpdir::SessionTmp), Error> {
    let tmpdir = tmpdir::SessionTmp::create(session.id())
        .map_err(|e| runtime(format!("cannot create the session's temp dir: {e}")))?;
    let log_dir = session
        .log_path()
        .and_then(Path::parent)
        .map(Path::to_path_buf);
    let meta = session_meta(
        spec,
        session,
        resumed,
        &root,
        external.to_string(),
        String::new(),
        worktree,
    );
    let record_external_id: Box<dyn Fn(&str) + Send + Sync> = {
        let (meta, dir) = (meta.clone(), log_dir.clone());
        Box::new(move |id: &str| {
            let mut meta = meta.clone();
            meta.external_id = Some(id.to_string());
            if let Some(dir) = &dir
                && let Err(e) = meta.save(dir)
            {
                tracing::warn!(error = %e, "cannot save the agent's session id");
            }
        })
    };
    let approver = Arc::new(Approver::new(
        policy.clone(),
        tools,
        root.clone(),
        settings.loop_config.attended,
        // The request's, else the config's `approval_timeout_secs`, as for the native loop.
        settings.loop_config.approval_timeout,
        session.clone(),
    ));
    let home = spec.hermetic.then(|| tmpdir.path().join("home"));
    if let Some(home) = &home {
        std::fs::create_dir_all(home)
            .map_err(|e| runtime(format!("cannot create the agent's HOME: {e}")))?;
    }
    let context = ExternalContext {
        session: session.clone(),
        spec: external,
        root,
        policy,
        approver,
        resume: meta.external_id.clone(),
        home,
        tmpdir: tmpdir.path().to_path_buf(),
        stderr_log: log_dir.map(|d| d.join(format!("{}.stderr.log", session.id()))),
        record_external_id,
        project_settings: settings.project_settings,
        system: spec.system.clone().filter(|text| !text.trim().is_empty()),
        effort: settings.effort,
        acp_permission_timeout: settings.acp_permission_timeout,
    };
    let backend = crate::backend::start_external(context)
        .await
        .inspect_err(|e| {
            session.emit_error(e.to_string(), serde_json::Value::Null);
        })?;
    session.transition(Status::Idle).map_err(runtime)?;
    Ok((backend, meta, tmpdir))
}
