//! What a started session is linked to: the delegator its `delegate` tool runs through, and
//! the metadata saved beside its log.

use std::path::Path;
use std::sync::Arc;

use super::{OpenSpec, mcp};
use crate::config::Config;
use crate::session::{Session, SessionMeta, WorktreeMeta};

/// What runs `delegate` for this session: none for a sub-session (no delegating again) or
/// outside a git repository (each task needs a worktree).
pub(super) fn delegator(
    spec: &OpenSpec,
    config: &Config,
    root: &Path,
    session: &Arc<Session>,
) -> crate::tool::DelegateLink {
    // A cheap look for a repository (no status scan on every open); a task's worktree is
    // planned, and refused with the reason, when it starts.
    if spec.parent.is_some() || crate::worktree::working_tree_of(root).is_none() {
        return crate::tool::DelegateLink::default();
    }
    let manager = match (
        &spec.delegate_host,
        session.log_path().and_then(Path::parent),
    ) {
        (Some(manager), _) => manager.clone(),
        (None, Some(dir)) => crate::host::manager::SessionManager::new(config.clone(), dir.into()),
        (None, None) => return crate::tool::DelegateLink::default(),
    };
    crate::tool::DelegateLink(Some(Arc::new(crate::host::delegate::HostDelegator::new(
        session.clone(),
        spec,
        root.to_path_buf(),
        manager,
        config.delegate.max_parallel(),
    ))))
}

/// The session's metadata: a resumed session's as it was recorded, else what a new one was
/// opened with, saved for `--resume` and listings.
pub(super) fn session_meta(
    spec: &OpenSpec,
    session: &Session,
    resumed: Option<SessionMeta>,
    root: &Path,
    model: String,
    base_url: String,
    worktree: Option<WorktreeMeta>,
) -> SessionMeta {
    if let Some(meta) = resumed {
        return meta;
    }
    let meta = SessionMeta {
        id: session.id().to_string(),
        model,
        base_url,
        cwd: root.to_path_buf(),
        created_at: crate::event::Timestamp::now().to_string(),
        system: spec.system.clone(),
        worktree,
        external_id: None,
        owner: spec.owner.clone(),
        permission: spec.permission.clone(),
        mcp_servers: mcp::chosen(spec),
        effort: spec.effort,
        parent: spec.parent.clone(),
    };
    if let Some(dir) = session.log_path().and_then(Path::parent)
        && let Err(e) = meta.save(dir)
    {
        tracing::warn!(error = %e, "cannot save session metadata");
    }
    meta
}
