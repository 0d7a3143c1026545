//! The conversation pane: a session's [`Transcript`], its cached lines, and where it is
//! scrolled to. The session view and `corral top`'s feed draw a session through it.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::event::Envelope;

use super::render::Rendered;
use super::theme::Theme;
use super::transcript::Transcript;
use super::wrap::text_width;

#[derive(Default)]
pub struct Conversation {
    pub transcript: Transcript,
    rendered: Rendered,
    /// Lines scrolled up from the bottom (0: following the conversation).
    pub scroll: usize,
    /// The height in lines at the last draw, to keep a scrolled view still.
    last_total: usize,
    /// The pane's height at the last draw (a page).
    pub height: usize,
}

impl Conversation {
    pub fn apply(&mut self, envelope: &Envelope) {
        self.transcript.apply(envelope);
    }

    pub fn scroll_by(&mut self, lines: isize) {
        self.scroll = self.scroll.saturating_add_signed(lines);
    }

    pub fn draw(&mut self, frame: &mut Frame, area: Rect, theme: &Theme) {
        self.height = area.height as usize;
        let width = area.width as usize;
        let height = area.height as usize;
        let blocks = self.rendered.layout(&self.transcript, width.max(10), theme);
        let total: usize = blocks.iter().map(|b| b.len()).sum();
        // Scrolled up: what was on screen stays there while more arrives below.
        if self.scroll > 0 && total > self.last_total {
            self.scroll += total - self.last_total;
        }
        self.last_total = total;
        self.scroll = self.scroll.min(total.saturating_sub(height));
        let end = total - self.scroll;
        let start = end.saturating_sub(height);
        let mut lines: Vec<Line<'static>> = Vec::with_capacity(height);
        let mut at = 0;
        for block in blocks {
            let next = at + block.len();
            if next > start && at < end {
                let from = start.saturating_sub(at);
                let to = (end - at).min(block.len());
                lines.extend(block[from..to].iter().cloned());
            }
            at = next;
            if at >= end {
                break;
            }
        }
        if total == 0 {
            lines.push(Line::from(Span::styled(
                "Type a message and press Enter. /help lists commands and keys.",
                theme.dim,
            )));
        }
        frame.render_widget(Paragraph::new(lines), area);
        if self.scroll > 0 {
            let note = format!(
                " ↓ {} more line{} (PgDn, Ctrl-End) ",
                self.scroll,
                if self.scroll == 1 { "" } else { "s" }
            );
            let w = (text_width(&note) as u16).min(area.width);
            let spot = Rect {
                x: area.x + area.width.saturating_sub(w),
                y: area.y + area.height.saturating_sub(1),
                width: w,
                height: 1,
            };
            frame.render_widget(Paragraph::new(Span::styled(note, theme.status)), spot);
        }
    }
}
