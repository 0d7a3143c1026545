//! A desktop notification when an approval waits and nobody is looking: the terminal lost
//! focus (focus reports), or nobody answered within `[tui] notify_after_secs`. Opt-in
//! (`[tui] notify_approvals = true`); sent through the `notify` tool's own D-Bus call, once
//! per request.

use std::collections::HashSet;
use std::time::Instant;

use crate::config::Tui;
use crate::event::PermissionRequest;

pub struct Notifier {
    config: Tui,
    focused: bool,
    /// When each open request was first seen.
    seen: Vec<(String, Instant)>,
    notified: HashSet<String>,
    warned: bool,
}

impl Notifier {
    pub fn new(config: Tui) -> Notifier {
        Notifier {
            config,
            focused: true,
            seen: Vec::new(),
            notified: HashSet::new(),
            warned: false,
        }
    }

    pub fn focus(&mut self, focused: bool) {
        self.focused = focused;
    }

    /// Notes the requests open now.
    pub fn saw(&mut self, pending: &[PermissionRequest]) {
        self.seen
            .retain(|(id, _)| pending.iter().any(|p| &p.request_id == id));
        for request in pending {
            if !self.seen.iter().any(|(id, _)| id == &request.request_id) {
                self.seen.push((request.request_id.clone(), Instant::now()));
            }
        }
    }

    /// Sends what is due.
    pub fn tick(&mut self, pending: &[PermissionRequest], session: &str) {
        if !self.config.notify_approvals {
            return;
        }
        self.saw(pending);
        let after = self.config.notify_after();
        let due: Vec<&PermissionRequest> = pending
            .iter()
            .filter(|p| !self.notified.contains(&p.request_id))
            .filter(|p| {
                !self.focused
                    || self
                        .seen
                        .iter()
                        .any(|(id, at)| id == &p.request_id && at.elapsed() >= after)
            })
            .collect();
        if due.is_empty() {
            return;
        }
        let Some(address) = std::env::var("DBUS_SESSION_BUS_ADDRESS").ok() else {
            if !self.warned {
                self.warned = true;
                tracing::warn!("approval notifications need DBUS_SESSION_BUS_ADDRESS");
            }
            return;
        };
        for request in due {
            self.notified.insert(request.request_id.clone());
            let title = format!(
                "corral: approval needed ({})",
                crate::surface::safe_text::escape_line(session)
            );
            let message = describe(request);
            let address = address.clone();
            tokio::spawn(async move {
                if let Err(e) = crate::tool::notify_person(&address, &title, &message).await {
                    tracing::warn!(error = %e, "cannot notify about a waiting approval");
                }
            });
        }
    }
}

/// One line about the call: the tool, its danger and what it would touch. Model text in a
/// notification is escaped and cut short like any other line.
fn describe(request: &PermissionRequest) -> String {
    let preview = &request.preview;
    let what = preview
        .command
        .as_deref()
        .or(preview.path.as_deref())
        .or(preview.url.as_deref())
        .or(preview.desktop.as_ref().map(|d| d.description.as_str()))
        .unwrap_or(&request.tool_call.title);
    let what: String = crate::surface::safe_text::escape_line(what)
        .chars()
        .take(160)
        .collect();
    markup_escape(&format!(
        "{} ({}): {what}",
        crate::surface::safe_text::escape_line(&request.tool),
        crate::surface::safe_text::escape_line(&request.danger)
    ))
}

/// Notification bodies are markup to many servers (`<a href>`, `<img>`): shown as text.
fn markup_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notification_body_carries_no_markup_or_control_characters() {
        let mut request = PermissionRequest::sample("shell", serde_json::json!({"command": "x"}));
        request.preview.command = Some("rm <a href=\"http://x\">me</a> \u{1b}[2J".into());
        let text = describe(&request);
        assert!(!text.contains('<') && !text.contains('\u{1b}'), "{text}");
        assert!(text.contains("&lt;a href"), "{text}");
        // A desktop action is named by its description, as untrusted as a command.
        let mut click = PermissionRequest::sample("computer", serde_json::json!({}));
        click.preview.desktop = Some(Box::new(crate::event::DesktopPreview {
            description: "left click in <b>Calc</b>\u{202e}".into(),
            ..Default::default()
        }));
        let text = describe(&click);
        assert!(
            text.contains("left click in &lt;b&gt;Calc&lt;/b&gt;\\u{202e}"),
            "{text}"
        );
    }
}
