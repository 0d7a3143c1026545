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
use crate::event::{ContentBlock, Payload};
use crate::policy::DeskLink;
use crate::session::Session;
use crate::tool::{DelegateFuture, Delegated, Delegator, SubPreset};

pub(crate) struct HostDelegator {
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
        HostDelegator {
            desk: Arc::new(desk::DelegatedDesk::new(parent.clone())),
            owner: template.owner.clone().unwrap_or_else(|| "run".to_string()),
            parent,
            template,
            root,
            manager,
            slots: Arc::new(Semaphore::new(max_parallel.max(1))),
            next: AtomicU32::new(1),
            children: std::sync::Mutex::new(Vec::new()),
        }
    }

    fn sub_spec(&self, id: &str, preset: SubPreset) -> OpenSpec {
        let mut spec = self.template.clone();
        spec.id = Some(id.to_string());
        spec.cwd = Some(self.root.clone());
        spec.worktree = true;
        spec.parent = Some(self.parent.id().to_string());
        spec.desk = Some(DeskLink(Arc::new(self.desk.for_sub(id))));
        if preset == SubPreset::Readonly {
            spec.permission = Some("readonly".to_string());
            spec.auto_approve = None;
            spec.allow.clear();
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
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        let id = format!("{}-d{n}", self.parent.id());
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
        let handle = match self
            .manager
            .open(self.sub_spec(&id, preset), &self.owner)
            .await
        {
            Ok(handle) => handle,
            Err(e) => return failed(format!("could not start: {e}")),
        };
        self.children
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(id.clone());
        // Dropped unfinished (the parent's turn or session went away mid-call): the
        // sub-session is stopped and closed anyway, never left running.
        let mut closer = Closer {
            manager: Some(self.manager.clone()),
            id: id.clone(),
        };
        let mut events = handle.session.tap(handle.session.last_seq());
        if let Err(e) = self.manager.send(&id, &task, TurnRequest::default()) {
            let _ = self.manager.close(&id).await;
            return failed(format!("could not start its turn: {e}"));
        }
        let mut answer = String::new();
        let mut outcome = None;
        loop {
            let event = tokio::select! {
                event = events.recv() => event,
                () = cancel.cancelled() => {
                    let _ = self.manager.cancel(&id);
                    outcome = Some(("cancelled".to_string(), Some("cancelled".to_string())));
                    break;
                }
            };
            let Some(event) = event else { break };
            match &event.envelope.payload {
                Payload::AssistantText(t) if !t.delta => {
                    if let ContentBlock::Text { text } = &t.content {
                        answer = text.clone();
                    }
                }
                Payload::Result(r) => {
                    let stop = serde_json::to_value(r.stop_reason)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_else(|| "end_turn".to_string());
                    outcome = Some((stop, r.error.clone()));
                    break;
                }
                _ => {}
            }
        }
        closer.manager = None;
        let files = changed_files(&id);
        let worktree = handle
            .meta
            .worktree
            .as_ref()
            .map(|w| w.path.display().to_string());
        let _ = self.manager.close(&id).await;
        let (stop_reason, error) =
            outcome.unwrap_or_else(|| ("error".into(), Some("the sub-session ended".into())));
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

/// Closes a sub-session whose run was dropped before it ended.
struct Closer {
    manager: Option<SessionManager>,
    id: String,
}

impl Drop for Closer {
    fn drop(&mut self) {
        let (Some(manager), Ok(runtime)) =
            (self.manager.take(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let id = std::mem::take(&mut self.id);
        runtime.spawn(async move {
            let _ = manager.cancel(&id);
            let _ = manager.close(&id).await;
        });
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
            let runs = tasks
                .into_iter()
                .map(|task| self.run_one(task, preset, cancel.clone()));
            Ok(futures_util::future::join_all(runs).await)
        })
    }

    fn merge(&self, session: String) -> DelegateFuture<'_, Vec<String>> {
        Box::pin(async move {
            let mine = self
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
