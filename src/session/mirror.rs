//! A session another process runs, followed here from its envelopes (`corral serve --nats`
//! follows the sessions of its nodes). The envelopes keep the `seq`, `ts` and `turn` the
//! running process stamped, so every follower numbers them alike; status, turn and the open
//! permission requests are read from them rather than decided here.

use std::path::Path;
use std::sync::Arc;

use super::{Session, SessionError, validate_id};
use crate::event::{Envelope, Event, Payload, PermissionData, SharedEvent};

impl Session {
    /// An empty copy of session `id`, logging what it takes in under `log_dir` (a directory
    /// of the follower's own; `None`: in memory only).
    pub fn mirror(id: &str, log_dir: Option<&Path>) -> Result<Arc<Session>, SessionError> {
        validate_id(id)?;
        Self::open(id.to_string(), log_dir, 0, 0, None, false)
    }

    /// Takes in the running process's next envelope (`json` is its serialized form, as it
    /// was sent). One already taken in (a redelivery) is ignored: `None`.
    pub fn ingest(&self, envelope: Envelope, json: Box<str>) -> Option<SharedEvent> {
        let mut state = self.state();
        if envelope.seq <= state.seq {
            return None;
        }
        if envelope.seq > state.seq + 1 {
            tracing::warn!(
                session = %self.id, after = state.seq, got = envelope.seq,
                "envelopes missing from the stream"
            );
        }
        state.seq = envelope.seq;
        state.turn = state.turn.max(envelope.turn);
        match &envelope.payload {
            Payload::Status(s) => state.status = s.status,
            Payload::Result(_) => state.finished_turn = envelope.turn,
            Payload::Permission(PermissionData::Request(request)) => {
                // Answered through the follower's own channel, not this one: the receiver
                // is not waited on.
                drop(
                    self.approvals
                        .open(request.request_id.clone(), (**request).clone()),
                );
            }
            Payload::Permission(PermissionData::Resolution(resolution)) => {
                self.approvals.withdraw(&resolution.request_id);
            }
            _ => {}
        }
        if envelope.payload.is_from_model() {
            self.heard_model
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        let event = Arc::new(Event { envelope, json });
        if !event.envelope.payload.is_liveness_only()
            && let Some(writer) = self.log.lock().unwrap_or_else(|p| p.into_inner()).as_ref()
        {
            writer.append(event.clone());
        }
        state.bus.publish(event.clone());
        Some(event)
    }

    /// Whether permission request `request_id` is open (a follower forwards only those).
    pub fn has_open_request(&self, request_id: &str) -> bool {
        self.approvals
            .open_requests()
            .iter()
            .any(|r| r.request_id == request_id)
    }
}
