//! Open permission requests of a session. The approver (`policy::Approver`, through the
//! session's `PermissionDesk`) asks and waits on a oneshot; any surface (terminal,
//! `--approve-stdin`, the server, MCP, ACP) answers by request id.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::oneshot;

use crate::event::PermissionRequest;
use crate::policy::Answer;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    #[error("no open permission request {0:?}")]
    UnknownRequest(String),
}

struct Pending {
    request: PermissionRequest,
    reply: oneshot::Sender<Answer>,
}

#[derive(Default)]
pub(super) struct Approvals {
    pending: Mutex<HashMap<String, Pending>>,
}

impl Approvals {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn open(&self, id: String, request: PermissionRequest) -> oneshot::Receiver<Answer> {
        let (reply, receiver) = oneshot::channel();
        self.lock().insert(id, Pending { request, reply });
        receiver
    }

    pub(super) fn answer(&self, id: &str, answer: Answer) -> Result<(), AnswerError> {
        let pending = self
            .lock()
            .remove(id)
            .ok_or_else(|| AnswerError::UnknownRequest(id.to_string()))?;
        // The asker may have given up (cancel, timeout) in the meantime: then it is no longer
        // open, which is what the caller is told.
        pending
            .reply
            .send(answer)
            .map_err(|_| AnswerError::UnknownRequest(id.to_string()))
    }

    pub(super) fn withdraw(&self, id: &str) {
        self.lock().remove(id);
    }

    pub(super) fn open_requests(&self) -> Vec<PermissionRequest> {
        self.lock().values().map(|p| p.request.clone()).collect()
    }
}
