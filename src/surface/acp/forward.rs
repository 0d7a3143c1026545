//! A session's envelopes to the ACP client as they come, the gate's questions to the client
//! and its answers back, and each turn's result to the prompt waiting for it.

use std::sync::Arc;

use agent_client_protocol::v1::schema::{RequestPermissionRequest, RequestPermissionResponse};
use serde_json::{Value, json};

use super::updates::{Projection, permission_options};
use super::{Acp, AcpSession, Connection, lock, notify, typed, wire};
use crate::event::{Payload, PermissionData, PermissionRequest, Status};
use crate::policy::Decision;

/// A session's envelopes, as they come, to the client; permission requests to the client and
/// its answers back to the gate; the turn's result to the prompt waiting for it.
pub(super) async fn forward(
    acp: Arc<Acp>,
    session: Arc<AcpSession>,
    mut events: tokio::sync::mpsc::UnboundedReceiver<crate::event::SharedEvent>,
    cx: Connection,
) {
    let mut projection = Projection::default();
    while let Some(event) = events.recv().await {
        let envelope = &event.envelope;
        for update in projection.updates(envelope, false) {
            if let Err(e) = notify(&cx, &session.id, update) {
                tracing::debug!(error = %e, "the ACP client is gone");
                return;
            }
        }
        match &envelope.payload {
            Payload::Permission(PermissionData::Request(request)) => {
                let diffs = projection.diffs_of(&request.tool_call.tool_call_id);
                ask_client(&acp, &session.id, request, diffs, &cx);
            }
            Payload::Result(result) => {
                if let Some(done) = lock(&session.waiting).take() {
                    let _ = done.send(Some(result.clone()));
                }
            }
            Payload::Status(s) if s.status == Status::Dead => {
                if let Some(done) = lock(&session.waiting).take() {
                    let _ = done.send(None);
                }
                return;
            }
            _ => {}
        }
    }
}

/// Sends a gate question to the client; its choice is applied like a terminal answer.
fn ask_client(
    acp: &Arc<Acp>,
    session: &str,
    request: &PermissionRequest,
    diffs: Vec<Value>,
    cx: &Connection,
) {
    let request_id = request.request_id.clone();
    let mut tool_call = json!(request.tool_call);
    if !diffs.is_empty() {
        tool_call["content"] = json!(diffs);
    }
    let question: Result<RequestPermissionRequest, _> = typed(json!({
        "sessionId": session,
        "toolCall": tool_call,
        "options": permission_options(request),
    }));
    let question = match question {
        Ok(question) => question,
        Err(e) => {
            tracing::error!(error = %e, "cannot ask the client");
            return;
        }
    };
    let (acp, session, cx2) = (acp.clone(), session.to_string(), cx.clone());
    let asked = cx.spawn(async move {
        let decision = match cx2.send_request(question).block_task().await {
            Ok(answer) => decision_of(&answer),
            Err(e) => {
                tracing::warn!(error = %e, "permission request failed; denying");
                Decision::Deny
            }
        };
        // Already resolved (a cancel, a timeout) is fine: the answer is simply late.
        let _ = acp.manager.answer(&session, &request_id, decision);
        Ok(())
    });
    if let Err(e) = asked {
        tracing::error!(error = %e, "cannot ask the client");
    }
}

fn decision_of(answer: &RequestPermissionResponse) -> Decision {
    let answer = wire(answer);
    match (
        answer["outcome"]["outcome"].as_str(),
        answer["outcome"]["optionId"].as_str(),
    ) {
        (Some("selected"), Some("allow")) => Decision::Allow,
        (Some("selected"), Some("allow_all")) => Decision::AllowAll,
        (Some("selected"), Some("disable")) => Decision::Disable,
        (Some("selected"), _) => Decision::Deny,
        _ => Decision::Cancel,
    }
}
