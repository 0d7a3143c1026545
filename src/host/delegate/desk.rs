//! Sub-sessions ask the person watching their parent: each request is opened on the parent
//! session (so every surface attached to it shows it and may answer), labelled with the
//! sub-session's id, one at a time (a session holds one open request: the parent waits in
//! `waiting_approval` for exactly that one). Requests from parallel sub-sessions queue; a
//! request given up on while queued (its timeout, a cancel) never reaches the person.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedMutexGuard, oneshot};
use tokio_util::sync::CancellationToken;

use crate::event::PermissionRequest;
use crate::policy::{Decision, PermissionDesk};
use crate::session::Session;

enum Pending {
    /// Waiting for its turn at the parent.
    Queued(CancellationToken),
    /// Open at the parent under this id; the guard keeps the others queued.
    Open(String, OwnedMutexGuard<()>),
}

struct Inner {
    parent: Arc<Session>,
    one_at_a_time: Arc<tokio::sync::Mutex<()>>,
    pending: Mutex<HashMap<String, Pending>>,
    next: AtomicU64,
}

impl Inner {
    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The parent's desk, shared by its sub-sessions.
pub(super) struct DelegatedDesk {
    inner: Arc<Inner>,
}

impl DelegatedDesk {
    pub(super) fn new(parent: Arc<Session>) -> DelegatedDesk {
        DelegatedDesk {
            inner: Arc::new(Inner {
                parent,
                one_at_a_time: Arc::new(tokio::sync::Mutex::new(())),
                pending: Mutex::new(HashMap::new()),
                next: AtomicU64::new(1),
            }),
        }
    }

    /// Withdraws every question still open or queued (the delegating call ended): the
    /// parent goes back to working at once, and a sub-session's late resolve finds nothing.
    pub(super) fn withdraw_all(&self) {
        let drained: Vec<Pending> = self.inner.pending().drain().map(|(_, p)| p).collect();
        for pending in drained {
            match pending {
                Pending::Open(parent_id, guard) => {
                    self.inner.parent.resolve(
                        &parent_id,
                        Decision::Cancel,
                        Some("the delegating turn ended".to_string()),
                    );
                    drop(guard);
                }
                Pending::Queued(given_up) => given_up.cancel(),
            }
        }
    }

    /// The desk one sub-session asks through, its requests labelled with its id.
    pub(super) fn for_sub(&self, sub: &str) -> SubDesk {
        SubDesk {
            inner: self.inner.clone(),
            label: sub.to_string(),
        }
    }
}

pub(super) struct SubDesk {
    inner: Arc<Inner>,
    label: String,
}

impl PermissionDesk for SubDesk {
    fn open(
        &self,
        mut request: PermissionRequest,
    ) -> Result<(String, oneshot::Receiver<crate::policy::Answer>), String> {
        let local = format!(
            "{}_ask{}",
            self.label,
            self.inner.next.fetch_add(1, Ordering::SeqCst)
        );
        request.tool_call.title = format!("[{}] {}", self.label, request.tool_call.title);
        request.reason = format!("sub-agent {}: {}", self.label, request.reason);
        request.sub_session = Some(self.label.clone());
        let given_up = CancellationToken::new();
        self.inner
            .pending()
            .insert(local.clone(), Pending::Queued(given_up.clone()));
        let (tx, rx) = oneshot::channel();
        let inner = self.inner.clone();
        let id = local.clone();
        tokio::spawn(async move {
            let guard = tokio::select! {
                guard = inner.one_at_a_time.clone().lock_owned() => guard,
                () = given_up.cancelled() => return,
            };
            let answer = {
                let mut pending = inner.pending();
                if !matches!(pending.get(&id), Some(Pending::Queued(_))) {
                    return;
                }
                match inner.parent.open(request) {
                    Ok((parent_id, answer)) => {
                        pending.insert(id, Pending::Open(parent_id, guard));
                        answer
                    }
                    // The parent cannot ask now (it ended): the sender drops, the
                    // sub-session's approver treats that as no answer.
                    Err(e) => {
                        tracing::warn!(error = %e, "a sub-session's request could not be asked");
                        pending.remove(&id);
                        return;
                    }
                }
            };
            if let Ok(decision) = answer.await {
                let _ = tx.send(decision);
            }
        });
        Ok((local, rx))
    }

    fn resolve(&self, request_id: &str, decision: Decision, note: Option<String>) {
        let entry = self.inner.pending().remove(request_id);
        match entry {
            Some(Pending::Open(parent_id, guard)) => {
                self.inner.parent.resolve(&parent_id, decision, note);
                drop(guard);
            }
            Some(Pending::Queued(given_up)) => given_up.cancel(),
            None => {}
        }
    }
}
