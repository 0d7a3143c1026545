//! The approval modal: the oldest open permission request over the conversation — tool,
//! danger, reason, the full command, code or diff (escaped as the line prompt escapes it, see
//! `approve::request_body`), what "always" would cover — and its six decisions on single
//! keys, the same keys as `corral run`'s prompt.

use std::time::{Duration, Instant};

use crossterm::event::{KeyCode, KeyEvent};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Clear, Paragraph};

use crate::event::PermissionRequest;
use crate::policy::Decision;

use super::app::App;
use super::theme::Theme;
use super::wrap::{clean_line, wrap_text};

/// Keys pressed this soon after a request appears are not taken as its answer: the person was
/// typing into the input (a `y` or an `a` of a word) when the modal opened over it.
pub const SETTLE: Duration = Duration::from_millis(500);

/// When the request on screen first showed, so its answer waits for [`SETTLE`].
#[derive(Debug, Default)]
pub struct Settle {
    shown: Option<(String, Instant)>,
}

impl Settle {
    /// Whether a key at `now` may answer `request_id`.
    pub fn admits(&mut self, request_id: &str, now: Instant) -> bool {
        match &self.shown {
            Some((id, at)) if id == request_id => now.duration_since(*at) >= SETTLE,
            _ => {
                self.shown = Some((request_id.to_string(), now));
                false
            }
        }
    }

    /// Notes the request drawn now (the clock starts when the person can first see it).
    pub fn drawn(&mut self, request_id: &str) {
        if self.shown.as_ref().is_none_or(|(id, _)| id != request_id) {
            self.shown = Some((request_id.to_string(), Instant::now()));
        }
    }
}

pub fn key(app: &mut App, key: &KeyEvent) {
    match key.code {
        KeyCode::Up => return app.modal_scroll = app.modal_scroll.saturating_sub(1),
        KeyCode::Down => return app.modal_scroll += 1,
        KeyCode::PageUp => return app.modal_scroll = app.modal_scroll.saturating_sub(app.page),
        KeyCode::PageDown => return app.modal_scroll += app.page,
        _ => {}
    }
    let Some(request) = app.conversation.transcript.pending().first().cloned() else {
        return;
    };
    let Some(decision) = crate::surface::approve::decision_for(key) else {
        return;
    };
    if !app.settle.admits(&request.request_id, Instant::now()) {
        app.flash("the approval just opened: read it, then press the key again");
        return;
    }
    if decision == Decision::AllowAll && !request.always_offered() {
        app.flash("\"always\" is not offered for this call");
        return;
    }
    app.modal_scroll = 0;
    if let Err(e) = app
        .manager
        .answer(app.handle.id(), &request.request_id, decision)
    {
        // Answered elsewhere or timed out meanwhile: its resolution will clear it.
        app.flash(e.to_string());
    }
}

/// The request's lines for a width: the prompt's own text, diff lines coloured.
pub fn lines(request: &PermissionRequest, width: usize, theme: &Theme) -> Vec<Line<'static>> {
    let body = crate::surface::approve::request_body(request);
    let mut out = Vec::new();
    let none = Span::raw("");
    for line in body.trim_matches('\n').split('\n') {
        let style = if line.starts_with('+') && !line.starts_with("+++") {
            theme.added
        } else if line.starts_with('-') && !line.starts_with("---") {
            theme.removed
        } else if line.starts_with("@@") {
            theme.hunk
        } else if line.starts_with('⚠') {
            theme.warning
        } else {
            theme.text
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
    let Some(request) = app.conversation.transcript.pending().first() else {
        return;
    };
    app.settle.drawn(&request.request_id);
    let more = app.conversation.transcript.pending().len() - 1;
    draw_request(
        frame,
        area,
        request,
        more,
        &mut app.modal_scroll,
        &app.theme,
    );
}

/// The modal for `request` over `area` (`more` requests waiting after it), its body
/// scrolled down `scroll` lines (kept within the body). `corral top` draws its approvals
/// with it too.
pub fn draw_request(
    frame: &mut Frame,
    area: Rect,
    request: &PermissionRequest,
    more: usize,
    scroll: &mut usize,
    theme: &Theme,
) {
    let width = area.width.saturating_sub(4).max(20);
    let inner_width = width.saturating_sub(2) as usize;
    let body = lines(request, inner_width, theme);
    let height = (body.len() as u16 + 4)
        .min(area.height.saturating_sub(2))
        .max(6);
    let modal = Rect {
        x: area.x + (area.width.saturating_sub(width)) / 2,
        y: area.y + (area.height.saturating_sub(height)) / 2,
        width,
        height,
    }
    .intersection(frame.area());
    let visible = height.saturating_sub(3) as usize;
    let max_scroll = body.len().saturating_sub(visible);
    *scroll = (*scroll).min(max_scroll);
    let mut shown: Vec<Line<'static>> = body.into_iter().skip(*scroll).take(visible).collect();
    shown.push(keys(request, theme));
    let mut title = format!(
        " approval · {} · {} ",
        clean_line(&request.tool),
        clean_line(&request.danger)
    );
    if more > 0 {
        title.push_str(&format!("· {more} more waiting "));
    }
    if max_scroll > 0 {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_typed_as_the_modal_opens_does_not_answer_it() {
        let mut settle = Settle::default();
        let opened = Instant::now();
        settle.drawn("r1");
        assert!(!settle.admits("r1", opened + Duration::from_millis(100)));
        assert!(settle.admits("r1", opened + SETTLE + Duration::from_millis(1)));
        // The next request starts its own wait.
        assert!(!settle.admits("r2", opened + SETTLE * 3));
        assert!(settle.admits("r2", opened + SETTLE * 5));
    }
}
