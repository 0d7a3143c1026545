//! Drawing the session view: the conversation (scrolled), the input box, the status line, and
//! over them the `@path` popup, an overlay or the approval modal.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Position, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Clear, Paragraph};

use crate::event::Status;

use super::app::App;
use super::wrap::{clean, clean_line, text_width};
use crate::surface::sessions_cli::tokens;

const SPINNER: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
/// Rows of input shown before the editor scrolls.
const INPUT_ROWS: usize = 8;

pub fn draw(frame: &mut Frame, app: &mut App) {
    let area = frame.area();
    let rows = app.editor.lines().len().clamp(1, INPUT_ROWS) as u16;
    let [conversation, input, status] = Layout::vertical([
        Constraint::Min(1),
        Constraint::Length(rows + 2),
        Constraint::Length(1),
    ])
    .areas(area);
    app.page = (conversation.height as usize).saturating_sub(2).max(1);
    let theme = app.theme.clone();
    app.conversation.draw(frame, conversation, &theme);
    draw_input(frame, input, app);
    draw_status(frame, status, app);
    if app.completion.is_some() {
        draw_completion(frame, input, app);
    }
    if app.overlay.is_some() {
        draw_overlay(frame, conversation, app);
    }
    if !app.conversation.transcript.pending().is_empty() {
        super::approval::draw(frame, conversation, app);
    }
}

/// What the session is doing, for the input box's title.
fn activity(app: &App) -> Span<'static> {
    let spin = SPINNER[app.frame % SPINNER.len()];
    let elapsed = app
        .conversation
        .transcript
        .turn_started
        .map(|t| format!(" {:.0}s", t.elapsed().as_secs_f64()))
        .unwrap_or_default();
    match app.conversation.transcript.status {
        Some(Status::WaitingApproval) => {
            Span::styled(" waiting for your approval ".to_string(), app.theme.warning)
        }
        Some(Status::Working) => Span::styled(
            format!(" {spin} working{elapsed} · Esc cancels "),
            app.theme.running,
        ),
        Some(Status::Starting) => Span::styled(format!(" {spin} starting "), app.theme.running),
        Some(Status::Dead) => Span::styled(
            " session ended · /clear starts a new one ".to_string(),
            app.theme.error,
        ),
        _ => Span::styled(
            " Enter send · Alt-Enter new line · @ file · /help ".to_string(),
            app.theme.dim,
        ),
    }
}

fn draw_input(frame: &mut Frame, area: Rect, app: &mut App) {
    let block = Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Rounded)
        .border_style(app.theme.dim)
        .title(activity(app));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let prompt = "› ";
    let prompt_width = text_width(prompt);
    let avail = (inner.width as usize).saturating_sub(prompt_width).max(1);
    let (row, col) = app.editor.cursor();
    let rows = inner.height as usize;
    let first = row.saturating_sub(rows.saturating_sub(1));
    let mut lines = Vec::new();
    let mut cursor = None;
    for (i, chars) in app.editor.lines().iter().enumerate().skip(first).take(rows) {
        let text: String = chars.iter().collect();
        // Typed or pasted text is shown escaped too: a paste can carry anything.
        let before = clean(&chars[..col.min(chars.len())].iter().collect::<String>()).into_owned();
        let shown = clean(&text).into_owned();
        let before_width = text_width(&before);
        // A line wider than the box scrolls to keep the cursor in view.
        let skip = if i == row && before_width >= avail {
            before_width + 1 - avail
        } else {
            0
        };
        let visible = skip_columns(&shown, skip);
        let lead = if i == 0 { prompt } else { "  " };
        lines.push(Line::from(vec![
            Span::styled(lead, app.theme.user),
            Span::raw(visible),
        ]));
        if i == row {
            cursor = Some(Position {
                x: inner.x.saturating_add(
                    u16::try_from(prompt_width + before_width - skip).unwrap_or(u16::MAX),
                ),
                y: inner
                    .y
                    .saturating_add(u16::try_from(i - first).unwrap_or(u16::MAX)),
            });
        }
    }
    frame.render_widget(Paragraph::new(lines), inner);
    let modal = !app.conversation.transcript.pending().is_empty() || app.overlay.is_some();
    if let Some(cursor) = cursor
        && !modal
    {
        frame.set_cursor_position(cursor);
    }
}

fn skip_columns(text: &str, columns: usize) -> String {
    let mut skipped = 0;
    text.chars()
        .skip_while(|c| {
            if skipped < columns {
                skipped += super::wrap::char_width(*c);
                true
            } else {
                false
            }
        })
        .collect()
}

fn draw_status(frame: &mut Frame, area: Rect, app: &App) {
    let info = app.handle.info();
    let posture = &app.handle.posture;
    let preset = app
        .handle
        .current_preset()
        .unwrap_or_else(|| posture.preset.clone());
    let mut left = format!(
        " {} · {} · sandbox {}{}",
        clean_line(&info.model),
        clean_line(&preset),
        posture.sandbox,
        if posture.network == crate::sandbox::NetworkMode::Off {
            ", no network"
        } else {
            ""
        }
    );
    if let Some(worktree) = &app.handle.meta.worktree {
        left.push_str(&format!(" · worktree {}", clean_line(&worktree.branch)));
    }
    let t = &app.conversation.transcript;
    let mut right = String::new();
    if let Some((flash, _)) = &app.flash {
        right.push_str(&format!("{} · ", clean_line(flash)));
    }
    match (t.context_tokens, t.context_window) {
        (Some(used), Some(window)) if window > 0 => right.push_str(&format!(
            "ctx {}/{} ({}%) · ",
            tokens(used),
            tokens(window),
            used.saturating_mul(100) / window
        )),
        (Some(used), _) => right.push_str(&format!("ctx {} · ", tokens(used))),
        _ => {}
    }
    let usage = &t.usage;
    right.push_str(&format!(
        "↑{} ↓{}",
        tokens(usage.input_tokens),
        tokens(usage.output_tokens)
    ));
    if usage.cost_usd > 0.0 {
        right.push_str(&format!(" · ${:.4}", usage.cost_usd));
    }
    right.push_str(&format!(" · {} ", clean_line(app.handle.id())));
    let width = area.width as usize;
    let right_width = text_width(&right);
    let left: String = {
        let room = width.saturating_sub(right_width);
        let mut out = String::new();
        let mut used = 0;
        for c in left.chars() {
            let w = super::wrap::char_width(c);
            if used + w > room {
                break;
            }
            used += w;
            out.push(c);
        }
        out
    };
    let gap = width.saturating_sub(text_width(&left) + right_width);
    let line = Line::from(vec![
        Span::raw(left),
        Span::raw(" ".repeat(gap)),
        Span::raw(right),
    ]);
    frame.render_widget(Paragraph::new(line).style(app.theme.status), area);
}

fn draw_completion(frame: &mut Frame, input: Rect, app: &App) {
    let Some(completion) = &app.completion else {
        return;
    };
    let height = completion.items.len() as u16 + 2;
    let width = completion
        .items
        .iter()
        .map(|i| text_width(i) as u16 + 4)
        .max()
        .unwrap_or(10)
        .clamp(20, input.width.max(20));
    let area = Rect {
        x: input.x + 2,
        y: input.y.saturating_sub(height),
        width: width.min(input.width.saturating_sub(2)),
        height: height.min(input.y),
    }
    .intersection(frame.area());
    let lines: Vec<Line<'static>> = completion
        .items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let style = if i == completion.selected {
                app.theme.status
            } else {
                Style::default()
            };
            Line::from(Span::styled(format!("@{}", clean_line(item)), style))
        })
        .collect();
    let block = Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Rounded)
        .border_style(app.theme.dim)
        .title(Span::styled(" files · Tab picks ", app.theme.dim));
    frame.render_widget(Clear, area);
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

fn draw_overlay(frame: &mut Frame, area: Rect, app: &mut App) {
    let Some(overlay) = &mut app.overlay else {
        return;
    };
    let modal = Rect {
        x: area.x + 1,
        y: area.y,
        width: area.width.saturating_sub(2),
        height: area.height,
    };
    let visible = modal.height.saturating_sub(2) as usize;
    if let Some((_, selected)) = &overlay.pick {
        // Keep the selection in view.
        if *selected < overlay.scroll {
            overlay.scroll = *selected;
        } else if *selected >= overlay.scroll + visible {
            overlay.scroll = selected + 1 - visible;
        }
    }
    overlay.scroll = overlay
        .scroll
        .min(overlay.lines.len().saturating_sub(visible));
    let lines: Vec<Line<'static>> = overlay
        .lines
        .iter()
        .enumerate()
        .skip(overlay.scroll)
        .take(visible)
        .map(|(i, line)| match &overlay.pick {
            Some((_, selected)) if *selected == i => line.clone().style(app.theme.status),
            _ => line.clone(),
        })
        .collect();
    let block = Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Rounded)
        .title(Span::styled(
            format!(" {} ", overlay.title),
            app.theme.heading,
        ));
    frame.render_widget(Clear, modal);
    frame.render_widget(Paragraph::new(lines).block(block), modal);
}
