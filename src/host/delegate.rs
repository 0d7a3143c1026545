//! The host side of `delegate`: each task becomes a sub-session, hosted by a session manager
//! (the surface's own, so it is listed with its parent id; a private one under `corral run`),
//! opened in a git worktree made from the parent root's HEAD, with the parent's model and
//! preset (or `readonly`), asking the parent's person through the parent's desk. Up to
//! `max_parallel` run at once. A sub-session runs one turn and is closed: its worktree is
//! kept when it changed something, for `delegate_merge` (or `corral worktree merge`).

mod desk;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::manager::{SessionManager, TurnRequest};
use super::open::OpenSpec;
use crate::policy::DeskLink;
use crate::session::{Session, turn_end};
use crate::tool::{DelegateFuture, Delegated, Delegator, SubPreset};

pub(crate) struct HostDelegator {
    inner: Arc<Inner>,
}

struct Inner {
    parent: Arc<Session>,
    /// The parent's request, the template of every sub-session's.
    template: OpenSpec,
    /// The parent's root, where worktrees are made from.
    root: PathBuf,
    manager: SessionManager,
    owner: String,
    slots: Arc<Semaphore>,
    next: AtomicU32,
    /// The sub-sessions this session made (only these may be merged by it).
    children: std::sync::Mutex<Vec<String>>,
    /// Tools the parent was not offered when it last delegated.
    denied: std::sync::Mutex<Vec<String>>,
    desk: Arc<desk::DelegatedDesk>,
}

impl HostDelegator {
    pub(crate) fn new(
        parent: Arc<Session>,
        template: &OpenSpec,
        root: PathBuf,
        manager: SessionManager,
        max_parallel: usize,
    ) -> HostDelegator {
        let mut template = template.clone();
        // Not the parent's: its own id and resume, an editor's buffers (the worktree is
        // another directory), and the host link (set per sub-session).
        template.id = None;
        template.resume = None;
        template.editor = None;
        template.delegate_host = None;
        template.hermetic = false;
        let inner = Inner {
            desk: Arc::new(desk::DelegatedDesk::new(parent.clone())),
            owner: template.owner.clone().unwrap_or_else(|| "run".to_string()),
            parent,
            template,
            root,
            manager,
            slots: Arc::new(Semaphore::new(max_parallel.max(1))),
            next: AtomicU32::new(1),
            children: std::sync::Mutex::new(Vec::new()),
            denied: std::sync::Mutex::new(Vec::new()),
        };
        HostDelegator {
            inner: Arc::new(inner),
        }
    }
}

impl Inner {
    fn sub_spec(&self, id: &str, preset: SubPreset) -> OpenSpec {
        let mut spec = self.template.clone();
        spec.id = Some(id.to_string());
        // A sub-session is always new, and kept: its parent's result names it.
        spec.resume = None;
        spec.continue_last = false;
        spec.discard_unused = false;
        spec.cwd = Some(self.root.clone());
        spec.worktree = true;
        spec.parent = Some(self.parent.id().to_string());
        spec.desk = Some(DeskLink(Arc::new(self.desk.for_sub(id))));
        // The parent's preset as it is now: switched since it opened (an editor's mode
        // change), the new one, as `set_preset` applies it (without opening overrides).
        if let Some(current) = self
            .manager
            .get(self.parent.id())
            .and_then(|h| h.current_preset())
        {
            use_preset(&mut spec, current);
        }
        spec.deny.extend(
            self.denied
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .cloned(),
        );
        if preset == SubPreset::Readonly {
            use_preset(&mut spec, "readonly".to_string());
        }
        spec
    }

    /// One task, start to end; never fails as a whole (a failure is that task's result).
    async fn run_one(
        &self,
        task: String,
        preset: SubPreset,
        cancel: CancellationToken,
    ) -> Delegated {
        let id = self.fresh_id();
        let failed = |error: String| Delegated {
            session: id.clone(),
            task: task.clone(),
            stop_reason: "error".into(),
            error: Some(error),
            answer: String::new(),
            files: Vec::new(),
            worktree: None,
        };
        let Ok(_slot) = self.slots.clone().acquire_owned().await else {
            return failed("the delegator is shutting down".into());
        };
        if cancel.is_cancelled() {
            return failed("cancelled before it started".into());
        }
        if let Some(refusal) = self.over_the_owners_cap() {
            return failed(refusal);
        }
        let handle = match self
            .manager
            .open(self.sub_spec(&id, preset), &self.owner)
            .await
        {
            Ok(handle) => handle,
            Err(e) => return failed(format!("could not start: {e}")),
        };
        if cancel.is_cancelled() {
            let _ = self.manager.close(&id).await;
            return failed("cancelled while it started".into());
        }
        self.children
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(id.clone());
        // Tapped before the turn is sent, so its result cannot slip past.
        let mut events = handle.session.tap(handle.session.last_seq());
        let turn = match self.manager.send(&id, &task, TurnRequest::default()) {
            Ok(turn) => turn,
            Err(e) => {
                let _ = self.manager.close(&id).await;
                return failed(format!("could not start its turn: {e}"));
            }
        };
        let (stop_reason, error, answer) = tokio::select! {
            end = turn_end(&mut events, turn) => match end {
                Some((result, text)) => {
                    (result.stop_reason.as_str().to_string(), result.error, text)
                }
                None => ("error".into(), Some("the sub-session ended".into()), String::new()),
            },
            () = cancel.cancelled() => {
                let _ = self.manager.cancel(&id);
                ("cancelled".into(), Some("cancelled".into()), String::new())
            }
        };
        let files = changed_files(&id);
        let worktree = handle
            .meta
            .worktree
            .as_ref()
            .map(|w| w.path.display().to_string());
        let _ = self.manager.close(&id).await;
        Delegated {
            session: id,
            task,
            stop_reason,
            error,
            answer,
            worktree: if files.is_empty() { None } else { worktree },
            files,
        }
    }
}

/// The named preset alone, without the opening request's `--auto-approve` and `--allow`
/// (as `set_preset` applies one).
fn use_preset(spec: &mut OpenSpec, preset: String) {
    spec.permission = Some(preset);
    spec.auto_approve = None;
    spec.allow.clear();
}

/// Ends a `run` however it ends: its work is told to stop, and questions it left open on
/// the parent are withdrawn.
struct Guard {
    stop: CancellationToken,
    desk: Arc<desk::DelegatedDesk>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.stop.cancel();
        self.desk.withdraw_all();
    }
}

impl Inner {
    /// `<parent>-d<N>` with the first N no session, log or worktree has (a resumed parent
    /// starts counting again).
    fn fresh_id(&self) -> String {
        let worktrees = crate::worktree::Store::default_location().ok();
        let logs = self
            .parent
            .log_path()
            .and_then(|p| p.parent())
            .map(PathBuf::from);
        loop {
            let n = self.next.fetch_add(1, Ordering::SeqCst);
            let id = format!("{}-d{n}", self.parent.id());
            let taken = self.manager.get(&id).is_some()
                || worktrees.as_ref().is_some_and(|s| s.dir_of(&id).exists())
                || logs
                    .as_ref()
                    .is_some_and(|dir| crate::session::SessionMeta::path(dir, &id).exists());
            if !taken {
                return id;
            }
        }
    }

    /// A bounded owner (a `user` token) may not hold more live sessions through delegation
    /// than it may open itself.
    fn over_the_owners_cap(&self) -> Option<String> {
        self.template.limits.as_ref()?;
        let cap = self.manager.config().server.max_sessions();
        let live = self
            .manager
            .list()
            .iter()
            .filter(|h| h.owner == self.owner && h.session.status() != crate::event::Status::Dead)
            .count();
        (live >= cap).then(|| {
            format!(
                "not started: {} already has {live} live sessions, its limit",
                self.owner
            )
        })
    }
}

/// The files a sub-session's worktree changed against the HEAD it started from.
fn changed_files(id: &str) -> Vec<String> {
    let Ok(store) = crate::worktree::Store::default_location() else {
        return Vec::new();
    };
    store
        .load(id)
        .and_then(|record| crate::worktree::changes(&record))
        .map(|changes| changes.files)
        .unwrap_or_default()
}

impl Delegator for HostDelegator {
    fn run(
        &self,
        tasks: Vec<String>,
        preset: SubPreset,
        cancel: CancellationToken,
    ) -> DelegateFuture<'_, Vec<Delegated>> {
        Box::pin(async move {
            // The work runs in a task of its own, which sees every cancel through `stop`:
            // dropped midway (the parent's turn cancelled or gone), this call stops it, and
            // it still stops and closes each sub-session it started. The parent's questions
            // it left open are withdrawn at once, before the parent's turn winds down.
            let stop = cancel.child_token();
            let _guard = Guard {
                stop: stop.clone(),
                desk: self.inner.desk.clone(),
            };
            let inner = self.inner.clone();
            let work = tokio::spawn(async move {
                let runs = tasks
                    .into_iter()
                    .map(|task| inner.run_one(task, preset, stop.clone()));
                futures_util::future::join_all(runs).await
            });
            work.await
                .map_err(|e| format!("the delegated work stopped: {e}"))
        })
    }

    fn narrow(&self, denied: Vec<String>) {
        *self.inner.denied.lock().unwrap_or_else(|p| p.into_inner()) = denied;
    }

    fn merge(&self, session: String) -> DelegateFuture<'_, Vec<String>> {
        Box::pin(async move {
            let mine = self
                .inner
                .children
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(&session);
            if !mine {
                return Err(format!(
                    "{session:?} is not a sub-agent this session delegated to"
                ));
            }
            let store = crate::worktree::Store::default_location().map_err(|e| e.to_string())?;
            let record = store.load(&session).map_err(|e| e.to_string())?;
            // git work off the async threads: a merge checks files out.
            tokio::task::spawn_blocking(move || crate::worktree::merge(&record))
                .await
                .map_err(|e| format!("the merge stopped: {e}"))?
                .map(|merged| merged.files)
                .map_err(|e| e.to_string())
        })
    }
}
