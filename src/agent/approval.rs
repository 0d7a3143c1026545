//! Asking the gate, and when it says "ask", a person: the permission request goes out as an
//! event, the session waits in `waiting_approval`, and the answer is applied (granted for the
//! session, tool disabled, tools forbidden for the turn, or the turn cancelled).

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::Agent;
use super::execute::ValidCall;
use crate::policy::{Decision, Verdict, approval_preview};
use crate::tool::Guard;

pub enum Authorized {
    /// `by_person`: a person answered this call's prompt with yes.
    Run {
        by_person: bool,
    },
    Refuse(String),
    CancelTurn,
}

impl Agent {
    pub(super) async fn authorize(
        &mut self,
        valid: &ValidCall,
        cancel: &CancellationToken,
    ) -> Authorized {
        let call = &valid.call;
        let manifest = valid.tool.manifest;
        let mut verdict = self
            .gate
            .check(&call.name, manifest.danger, &call.arguments, &self.root);
        // git's files are never a tool's to write, and agent config is a person's, in every
        // preset: that overrides the gate's "allow" (bypass, a rule, a grant).
        match crate::tool::write_guard(&call.name, &call.arguments, &self.root) {
            Some(Guard::Never(reason)) => verdict = Verdict::Deny { reason },
            Some(Guard::Person(reason)) if matches!(verdict, Verdict::Allow { .. }) => {
                verdict = Verdict::Ask { reason };
            }
            _ => {}
        }
        let reason = match verdict {
            Verdict::Allow { .. } => return Authorized::Run { by_person: false },
            Verdict::Deny { reason } => return Authorized::Refuse(format!("refused: {reason}")),
            Verdict::Ask { reason } => reason,
        };
        if !self.config.attended {
            return Authorized::Refuse(format!(
                "refused: this call needs a person's approval ({reason}) and nobody can answer \
                 here. Allow it with a policy rule, `--allow {}`, another preset (-p), or answer \
                 requests with --approve-stdin",
                call.name
            ));
        }
        let danger = self.gate.policy().danger_of(&call.name, manifest.danger);
        let always = self.gate.always(&call.name, &call.arguments, &self.root);
        let mut request = json!({
            "toolCall": {
                "toolCallId": call.id,
                "title": manifest.title,
                "kind": manifest.kind,
                "status": "pending",
                "rawInput": call.arguments,
            },
            "tool": call.name,
            "danger": danger,
            "reason": reason,
            "always": always.to_json(),
            "options": always.options(),
        });
        if let (Value::Object(target), Value::Object(preview)) = (
            &mut request,
            approval_preview(&call.name, &call.arguments, &self.root),
        ) {
            target.extend(preview);
        }
        let (id, answer) = match self.session.request_permission(request) {
            Ok(opened) => opened,
            Err(e) => return Authorized::Refuse(format!("cannot ask for approval: {e}")),
        };
        let timeout = self.config.approval_timeout;
        let (decision, timed_out) = tokio::select! {
            answer = answer => (answer.unwrap_or(Decision::Deny), false),
            _ = cancel.cancelled() => (Decision::Cancel, false),
            _ = sleep_or_forever(timeout) => (Decision::Deny, true),
        };
        let note = if timed_out {
            Some(format!(
                "nobody answered within {} s; denied",
                timeout.map(|t| t.as_secs()).unwrap_or_default()
            ))
        } else {
            self.gate
                .record(&call.name, &call.arguments, &self.root, decision)
        };
        self.session
            .resolve_permission(&id, decision.as_str(), note.clone());
        match decision {
            Decision::Allow | Decision::AllowAll => Authorized::Run { by_person: true },
            Decision::Deny if timed_out => {
                Authorized::Refuse(format!("denied: {}", note.unwrap_or_default()))
            }
            Decision::Deny => Authorized::Refuse("the user denied this call".into()),
            Decision::Disable => Authorized::Refuse(format!(
                "the user disabled {} for the rest of this session",
                call.name
            )),
            Decision::ForbidAll => Authorized::Refuse(
                "the user forbade tool calls for the rest of this turn; answer without tools"
                    .into(),
            ),
            Decision::Cancel => Authorized::CancelTurn,
        }
    }
}

async fn sleep_or_forever(timeout: Option<std::time::Duration>) {
    match timeout {
        Some(t) => tokio::time::sleep(t).await,
        None => std::future::pending().await,
    }
}
