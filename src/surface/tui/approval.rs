//! The approval modal: the oldest open permission request over the conversation — tool,
//! danger, reason, the full command, code or diff (escaped as the line prompt escapes it, see
//! `approve::request_body`), what "always" would cover — and its six decisions on single
//! keys, the same keys as `corral run`'s prompt. A desktop action's marked screenshot is saved
//! to a private file while the modal shows its request, and the body says where.

use std::time::{Duration, Instant};

use crossterm::event::{KeyCode, KeyEvent};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Clear, Paragraph};

use crate::event::PermissionRequest;
use crate::policy::Decision;
use crate::surface::desktop_preview::Screenshot;

use super::app::App;
use super::theme::Theme;
use super::wrap::{clean_line, wrap_text};

/// Keys pressed this soon after a request appears are not taken as its answer: the person was
/// typing into the input (a `y` or an `a` of a word) when the modal opened over it.
pub const SETTLE: Duration = Duration::from_millis(500);

/// The modal's state for the request it shows: when it first showed, how far its body is
/// scrolled, whether the person has seen its end, and its lines for the last width.
///
/// An approval (`y`, `a`) waits for [`SETTLE`] and, when the body is taller than the modal,
/// for the person to have scrolled to its end: what a long command or diff does last (the
/// commands bash really runs, the file a patch touches, what "always" covers) is never
/// approved unseen. Refusals (`n`, `d`, `f`, `c`) are always taken.
#[derive(Debug, Default)]
pub struct Modal {
    shown: Option<(String, Instant)>,
    pub scroll: usize,
    seen_end: bool,
    cache: Option<(String, usize, Vec<Line<'static>>)>,
    /// The shown request's saved screenshot, removed when another request takes the modal.
    screenshot: Option<(String, Screenshot)>,
}

impl Modal {
    /// Starts over when another request takes the modal.
    fn show(&mut self, request_id: &str, now: Instant) {
        if self.shown.as_ref().is_none_or(|(id, _)| id != request_id) {
            *self = Modal {
                shown: Some((request_id.to_string(), now)),
                ..Modal::default()
            };
        }
    }

    /// Up, down and page keys on the body; false for any other key.
    pub fn scroll_key(&mut self, key: &KeyEvent, page: usize) -> bool {
        match key.code {
            KeyCode::Up => self.scroll = self.scroll.saturating_sub(1),
            KeyCode::Down => self.scroll = self.scroll.saturating_add(1),
            KeyCode::PageUp => self.scroll = self.scroll.saturating_sub(page),
            KeyCode::PageDown => self.scroll = self.scroll.saturating_add(page),
            KeyCode::End => self.scroll = usize::MAX / 2,
            KeyCode::Home => self.scroll = 0,
            _ => return false,
        }
        true
    }

    /// Whether `decision` may answer `request` now; else why not, for the person.
    pub fn permits(
        &mut self,
        request: &PermissionRequest,
        decision: Decision,
        now: Instant,
    ) -> Result<(), &'static str> {
        let Some((id, at)) = &self.shown else {
            self.show(&request.request_id, now);
            return Err("the approval just opened: read it, then press the key again");
        };
        if id != &request.request_id {
            self.show(&request.request_id, now);
            return Err("the approval just opened: read it, then press the key again");
        }
        if now.duration_since(*at) < SETTLE {
            return Err("the approval just opened: read it, then press the key again");
        }
        let approves = matches!(decision, Decision::Allow | Decision::AllowAll);
        if approves && !self.seen_end {
            return Err("read the whole request first: ↓ or PgDn to its end, then approve");
        }
        if decision == Decision::AllowAll && !request.always_offered() {
            return Err("\"always\" is not offered for this call");
        }
        Ok(())
    }

    /// The modal for `request` over `area` (`more` requests waiting after it). `corral top`
    /// draws its approvals with it too.
    pub fn draw(
        &mut self,
        frame: &mut Frame,
        area: Rect,
        request: &PermissionRequest,
        more: usize,
        theme: &Theme,
    ) {
        self.show(&request.request_id, Instant::now());
        let width = area.width.saturating_sub(4).max(20);
        let inner_width = width.saturating_sub(2) as usize;
        let fresh = self
            .cache
            .as_ref()
            .is_some_and(|(id, w, _)| id == &request.request_id && *w == inner_width);
        if !fresh {
            let saved = self
                .screenshot
                .take()
                .filter(|(id, _)| id == &request.request_id)
                .unwrap_or_else(|| (request.request_id.clone(), Screenshot::save(request)));
            let body = lines(request, inner_width, theme, &saved.1);
            self.screenshot = Some(saved);
            self.cache = Some((request.request_id.clone(), inner_width, body));
        }
        let body: &[Line<'static>] = self.cache.as_ref().map_or(&[], |(_, _, b)| b.as_slice());
        let rows = u16::try_from(body.len()).unwrap_or(u16::MAX);
        let height = rows
            .saturating_add(4)
            .min(area.height.saturating_sub(2))
            .max(6);
        let modal = Rect {
            x: area.x + (area.width.saturating_sub(width)) / 2,
            y: area.y + (area.height.saturating_sub(height)) / 2,
            width,
            height,
        }
        .intersection(frame.area());
        let visible = modal.height.saturating_sub(3) as usize;
        let max_scroll = body.len().saturating_sub(visible);
        self.scroll = self.scroll.min(max_scroll);
        if self.scroll >= max_scroll {
            self.seen_end = true;
        }
        let mut shown: Vec<Line<'static>> = body
            .iter()
            .skip(self.scroll)
            .take(visible)
            .cloned()
            .collect();
        shown.push(keys(request, theme));
        let mut title = format!(
            " approval · {} · {} ",
            clean_line(&request.tool),
            clean_line(&request.danger)
        );
        if more > 0 {
            title.push_str(&format!("· {more} more waiting "));
        }
        if max_scroll > 0 && !self.seen_end {
            title.push_str(&format!(
                "· {} more line{} below: ↓ PgDn to read before approving ",
                max_scroll - self.scroll,
                if max_scroll - self.scroll == 1 {
                    ""
                } else {
                    "s"
                }
            ));
        } else if max_scroll > 0 {
            title.push_str("· ↑↓ scroll ");
        }
        let block = Block::default()
            .borders(Borders::ALL)
            .border_type(BorderType::Rounded)
            .border_style(theme.warning)
            .title(Span::styled(title, theme.warning));
        frame.render_widget(Clear, modal);
        frame.render_widget(
            Paragraph::new(shown).block(block).style(Style::default()),
            modal,
        );
    }
}

pub fn key(app: &mut App, key: &KeyEvent) {
    if app.modal.scroll_key(key, app.page) {
        return;
    }
    let Some(request) = app.conversation.transcript.pending().first().cloned() else {
        return;
    };
    let Some(decision) = crate::surface::approve::decision_for(key) else {
        return;
    };
    if let Err(why) = app.modal.permits(&request, decision, Instant::now()) {
        app.flash(why);
        return;
    }
    if let Err(e) = app
        .manager
        .answer(app.handle.id(), &request.request_id, decision)
    {
        // Answered elsewhere, timed out, or left over from a process that died: nobody can
        // answer it any more, so it must not hold the view.
        app.conversation
            .transcript
            .forget_request(&request.request_id);
        app.flash(e.to_string());
    }
}

/// The request's lines for a width: the prompt's own text, diff lines coloured.
pub fn lines(
    request: &PermissionRequest,
    width: usize,
    theme: &Theme,
    screenshot: &Screenshot,
) -> Vec<Line<'static>> {
    let body = crate::surface::approve::request_body(request, screenshot);
    let mut out = Vec::new();
    let none = Span::raw("");
    for line in body.trim_matches('\n').split('\n') {
        let style = if line.starts_with('⚠') {
            theme.warning
        } else {
            theme.diff_line(line)
        };
        out.extend(wrap_text(line, style, width, &none, &none));
    }
    out
}

fn keys(request: &PermissionRequest, theme: &Theme) -> Line<'static> {
    let mut spans = Vec::new();
    let mut key = |k: &str, what: &str| {
        spans.push(Span::styled(format!("[{k}]"), theme.user));
        spans.push(Span::raw(format!(" {what}  ")));
    };
    key("y", "yes");
    key("n", "no");
    if request.always_offered() {
        key("a", "always");
    }
    key("d", "disable tool");
    key("f", "forbid all this turn");
    key("c", "cancel turn");
    Line::from(spans)
}

pub fn draw(frame: &mut Frame, area: Rect, app: &mut App) {
    let pending = app.conversation.transcript.pending();
    let Some(request) = pending.first() else {
        return;
    };
    let more = pending.len() - 1;
    app.modal.draw(frame, area, request, more, &app.theme);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(lines: usize) -> PermissionRequest {
        let command = (0..lines)
            .map(|i| format!("echo {i}"))
            .collect::<Vec<_>>()
            .join("\n");
        let mut request =
            PermissionRequest::sample("shell", serde_json::json!({ "command": command }));
        request.preview.command = Some(command);
        request
    }

    fn draw(modal: &mut Modal, request: &PermissionRequest, height: u16) {
        let mut terminal =
            ratatui::Terminal::new(ratatui::backend::TestBackend::new(80, height)).unwrap();
        terminal
            .draw(|frame| {
                let area = frame.area();
                modal.draw(frame, area, request, 0, &Theme::plain());
            })
            .unwrap();
    }

    #[test]
    fn a_key_typed_as_the_modal_opens_does_not_answer_it() {
        let mut modal = Modal::default();
        let short = request(1);
        let opened = Instant::now();
        draw(&mut modal, &short, 40);
        let soon = opened + Duration::from_millis(100);
        assert!(modal.permits(&short, Decision::Allow, soon).is_err());
        let later = opened + SETTLE + Duration::from_millis(5);
        assert_eq!(modal.permits(&short, Decision::Allow, later), Ok(()));
        // Another request starts its own wait.
        let next = PermissionRequest {
            request_id: "other".into(),
            ..short.clone()
        };
        assert!(modal.permits(&next, Decision::Allow, later).is_err());
        // Never drawn: not seen, not approved.
        assert!(
            modal
                .permits(&next, Decision::Allow, later + SETTLE)
                .is_err()
        );
    }

    #[test]
    fn a_long_request_is_approved_only_after_its_end_was_shown() {
        let mut modal = Modal::default();
        let long = request(100);
        draw(&mut modal, &long, 24);
        let later = Instant::now() + SETTLE * 2;
        assert!(modal.permits(&long, Decision::Allow, later).is_err());
        assert!(modal.permits(&long, Decision::AllowAll, later).is_err());
        // Refusing needs no reading.
        assert_eq!(modal.permits(&long, Decision::Deny, later), Ok(()));
        let end = KeyEvent::new(KeyCode::End, crossterm::event::KeyModifiers::NONE);
        assert!(modal.scroll_key(&end, 10));
        draw(&mut modal, &long, 24);
        assert_eq!(modal.permits(&long, Decision::Allow, later), Ok(()));
    }

    #[test]
    fn a_newline_in_a_path_cannot_fake_a_line_of_the_diff() {
        let mut request = PermissionRequest::sample("write_file", serde_json::json!({}));
        request.preview.path = Some("notes.txt\n+ harmless".into());
        request.preview.diff = Some("--- a/x\n+++ b/x\n".into());
        let body = crate::surface::approve::request_body(&request, &Screenshot::None);
        assert!(body.contains("file: notes.txt\\n+ harmless"), "{body}");
    }

    /// The same lines as the terminal prompt, in the modal: the real point, the window and
    /// the saved screenshot's path, whose file lives while the modal shows the request.
    #[test]
    fn a_desktop_request_shows_its_point_window_and_screenshot_file() {
        let mut request = PermissionRequest::sample("computer", serde_json::json!({}));
        request.preview.desktop = Some(Box::new(crate::event::DesktopPreview {
            action: "left_click".into(),
            description: "left click on \x1b[2Jthe = key".into(),
            point: Some([412, 300]),
            window: Some(crate::event::DesktopWindow {
                id: "0x3a00007".into(),
                title: "Calculator\u{202e}".into(),
                app: "Gnome-calculator".into(),
                pid: Some(4242),
            }),
            image: Some(crate::event::PreviewImage {
                mime_type: "image/png".into(),
                data_base64: crate::surface::desktop_preview::tests::png_base64(),
            }),
            ..Default::default()
        }));
        let mut modal = Modal::default();
        let mut terminal =
            ratatui::Terminal::new(ratatui::backend::TestBackend::new(140, 30)).unwrap();
        let mut draw = |modal: &mut Modal, request: &PermissionRequest| {
            terminal
                .draw(|frame| {
                    let area = frame.area();
                    modal.draw(frame, area, request, 0, &Theme::plain());
                })
                .unwrap();
            let buffer = terminal.backend().buffer().clone();
            (0..buffer.area.height)
                .map(|y| {
                    (0..buffer.area.width)
                        .map(|x| buffer[(x, y)].symbol().to_string())
                        .collect::<String>()
                })
                .collect::<Vec<_>>()
                .join("\n")
        };
        let screen = draw(&mut modal, &request);
        assert!(
            screen.contains("action: left_click at (412, 300)"),
            "{screen}"
        );
        assert!(
            screen.contains("window: Gnome-calculator (pid 4242) “Calculator\\u{202e}”"),
            "{screen}"
        );
        assert!(
            screen.contains(r"what: left click on \x1b[2Jthe = key"),
            "{screen}"
        );
        let path = screen
            .split("screen (target marked): ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .map(|p| p.trim_end_matches('│').to_string())
            .unwrap_or_else(|| panic!("no screenshot line: {screen}"));
        assert!(std::path::Path::new(&path).is_file(), "{path}");
        // Another request takes the modal: the file goes.
        let next = PermissionRequest {
            request_id: "perm_next".into(),
            ..request.clone()
        };
        draw(&mut modal, &next);
        assert!(!std::path::Path::new(&path).exists(), "{path}");
    }
}
