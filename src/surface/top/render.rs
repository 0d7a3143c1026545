//! Drawing `corral top`: a header (source, counts, the bus's state), the list or one
//! session's feed, a footer of keys, and over them the history, an approval or a question.
//!
//! Every text that came from a session or the server goes through `feed::safe` (or is a
//! line `feed` built that way) before it becomes a span.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Block, Borders, Cell, Clear, Paragraph, Row as TableRow, Table, TableState,
};
use time::OffsetDateTime;

use super::app::{App, History, Overlay, Scroll, View};
use super::board::{Row, ago, count};
use super::feed::{feed_lines, message_lines, safe, wrap};
use crate::event::{PermissionRequest, Status};
use crate::surface::approve::request_body;

/// Lines of a feed or history, kept while what they were made from is unchanged.
#[derive(Default)]
pub(super) struct Cache {
    key: Option<(String, u16, usize, u64)>,
    lines: Vec<Line<'static>>,
}

impl Cache {
    fn get(
        &mut self,
        key: (String, u16, usize, u64),
        make: impl FnOnce() -> Vec<Line<'static>>,
    ) -> &[Line<'static>] {
        if self.key.as_ref() != Some(&key) {
            self.lines = make();
            self.key = Some(key);
        }
        &self.lines
    }
}

pub(super) fn draw(frame: &mut Frame, app: &mut App, caches: &mut [Cache; 2]) {
    let [header, body, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Fill(1),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    frame.render_widget(Paragraph::new(header_line(app)), header);
    let [feed_cache, history_cache] = caches;
    if matches!(app.view, View::List) {
        list(frame, app, body);
    } else {
        feed(frame, app, body, feed_cache);
    }
    frame.render_widget(Paragraph::new(footer_line(app)), footer);
    match app.overlay.take() {
        Some(Overlay::History {
            id,
            history,
            mut scroll,
        }) => {
            history_overlay(frame, &id, history.as_ref(), &mut scroll, history_cache);
            app.overlay = Some(Overlay::History {
                id,
                history,
                scroll,
            });
        }
        Some(Overlay::Approve {
            id,
            request,
            mut scroll,
        }) => {
            approve_overlay(frame, &id, request.as_deref(), &mut scroll);
            app.overlay = Some(Overlay::Approve {
                id,
                request,
                scroll,
            });
        }
        Some(Overlay::Close { id }) => {
            let area = frame
                .area()
                .centered(Constraint::Length(60), Constraint::Length(5));
            frame.render_widget(Clear, area);
            let text = vec![
                Line::from(format!("Close session {}?", safe(&id))),
                Line::from(""),
                Line::from("[y]es, close it   any other key: no"),
            ];
            let block = Block::bordered().title(" close ");
            frame.render_widget(Paragraph::new(text).block(block), area);
            app.overlay = Some(Overlay::Close { id });
        }
        None => {}
    }
}

fn status_style(status: Status) -> Style {
    match status {
        Status::WaitingApproval => Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD),
        Status::Working => Style::new().fg(Color::Green),
        Status::Starting => Style::new().fg(Color::Cyan),
        Status::Idle => Style::new(),
        Status::Dead => Style::new().add_modifier(Modifier::DIM),
    }
}

/// A status as the list shows it: a waiting one marked, so it reads without colour too.
fn status_text(status: Status) -> &'static str {
    match status {
        Status::WaitingApproval => "⚠ APPROVAL",
        other => other.as_str(),
    }
}

fn header_line(app: &App) -> Line<'static> {
    let mut spans = vec![
        Span::styled(
            " corral top ",
            Style::new().add_modifier(Modifier::BOLD | Modifier::REVERSED),
        ),
        Span::raw(format!(" {} ", safe(&app.source))),
    ];
    for (status, n) in app.board.counts() {
        spans.push(Span::raw("· "));
        spans.push(Span::styled(
            format!("{n} {}", status_text(status).to_lowercase()),
            status_style(status),
        ));
        spans.push(Span::raw(" "));
    }
    spans.push(Span::styled(
        format!("· sort: {} ", app.board.sort.name()),
        Style::new().add_modifier(Modifier::DIM),
    ));
    if !app.board.filter.is_empty() {
        spans.push(Span::raw(format!("· filter: {} ", safe(&app.board.filter))));
    }
    let red = Style::new().fg(Color::Red).add_modifier(Modifier::BOLD);
    if let Some(why) = &app.stream_down {
        spans.push(Span::styled(
            format!("· disconnected, retrying ({}) ", safe(why)),
            red,
        ));
    } else if let Some(why) = &app.listing_failed {
        spans.push(Span::styled(
            format!("· cannot list sessions ({}) ", safe(why)),
            red,
        ));
    }
    Line::from(spans)
}

fn footer_line(app: &App) -> Line<'static> {
    if app.editing_filter {
        return Line::from(format!(
            " filter: {}▏  (Enter keeps it, Esc clears it)",
            safe(&app.board.filter)
        ));
    }
    if let Some(notice) = app.notice() {
        return Line::styled(format!(" {}", safe(notice)), Style::new().fg(Color::Yellow));
    }
    let keys = match (&app.overlay, &app.view) {
        (Some(Overlay::History { .. }), _) => {
            " ↑↓ PgUp PgDn Home End, wheel: scroll   Esc/q: close"
        }
        (Some(_), _) => "",
        (None, View::Feed { .. }) => {
            " Esc/q back  a answer  h history  i interrupt  x close  ↑↓ PgUp PgDn End: scroll"
        }
        (None, View::List) => {
            " Enter feed  a answer  h history  i interrupt  x close  d dismiss  s sort  / filter  q quit  ↑↓ select"
        }
    };
    Line::styled(keys, Style::new().add_modifier(Modifier::DIM))
}

fn list(frame: &mut Frame, app: &App, area: Rect) {
    let now = OffsetDateTime::now_utc();
    let rows = app.board.visible();
    // Whole ids when there is room for them beside the rest; their first 8 characters
    // (as unique as a git short hash, in practice) when not.
    let (id_width, model_width) = match area.width {
        w if w >= 140 => {
            let longest = rows.iter().map(|r| r.id.chars().count()).max();
            (longest.unwrap_or(8).clamp(8, 36), 28)
        }
        w if w >= 100 => (8, 28),
        _ => (8, 16),
    };
    let header = TableRow::new([
        "ID",
        "BACKEND · MODEL",
        "STATUS",
        "TURN",
        "TOKENS I/O",
        "AGE",
        "ACTIVE",
        "WORKTREE / DIR",
    ])
    .style(Style::new().add_modifier(Modifier::BOLD | Modifier::UNDERLINED));
    let table_rows: Vec<TableRow> = rows.iter().map(|row| table_row(row, now)).collect();
    let widths = [
        Constraint::Length(u16::try_from(id_width).unwrap_or(36)),
        Constraint::Length(model_width),
        Constraint::Length(10),
        Constraint::Length(4),
        Constraint::Length(11),
        Constraint::Length(4),
        Constraint::Length(6),
        Constraint::Fill(1),
    ];
    let table = Table::new(table_rows, widths)
        .header(header)
        .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED))
        .highlight_symbol("▶ ");
    let mut state =
        TableState::default().with_selected((!rows.is_empty()).then(|| app.selected_index()));
    frame.render_stateful_widget(table, area, &mut state);
    if rows.is_empty() {
        let text = if app.board.filter.is_empty() {
            "no sessions"
        } else {
            "no session matches the filter (Esc clears it)"
        };
        let [_, below] = Layout::vertical([Constraint::Length(2), Constraint::Fill(1)]).areas(area);
        frame.render_widget(Paragraph::new(format!("  {text}")), below);
    }
}

fn table_row(row: &Row, now: OffsetDateTime) -> TableRow<'static> {
    let place = row
        .worktree
        .as_deref()
        .map_or_else(|| row.cwd.clone(), |w| format!("⎇ {w}"));
    let cells = vec![
        Cell::from(safe(&row.id)),
        Cell::from(safe(&format!("{} · {}", row.backend, row.model))),
        Cell::from(status_text(row.status)).style(status_style(row.status)),
        Cell::from(row.turn.to_string()),
        Cell::from(format!(
            "{}/{}",
            count(row.usage.input_tokens),
            count(row.usage.output_tokens)
        )),
        Cell::from(ago(&row.created_at, now)),
        Cell::from(ago(&row.last_activity, now)),
        Cell::from(safe(&place)),
    ];
    let style = match row.status {
        Status::WaitingApproval => Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD),
        Status::Dead => Style::new().add_modifier(Modifier::DIM),
        _ => Style::new(),
    };
    TableRow::new(cells).style(style)
}

fn feed(frame: &mut Frame, app: &mut App, area: Rect, cache: &mut Cache) {
    let View::Feed { id, scroll } = &mut app.view else {
        return;
    };
    let row = app.board.get(id);
    let title = match row {
        Some(r) => format!(
            " {} · {} · {} ",
            safe(id),
            safe(&r.model),
            status_text(r.status)
        ),
        None => format!(" {} ", safe(id)),
    };
    let block = Block::new().borders(Borders::TOP).title(title);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let empty = std::collections::VecDeque::new();
    let events = app.events.get(id.as_str()).unwrap_or(&empty);
    let earlier = app.earlier.get(id.as_str());
    let first = events.front();
    let last_seq = events.back().map_or(0, |e| e.seq);
    let key = (
        id.clone(),
        inner.width,
        events.len() + earlier.map_or(0, Vec::len),
        last_seq,
    );
    let lines = cache.get(key, || {
        // What the server said came before the first envelope held, when the bus's ring no
        // longer reached back to the session's start.
        let before: Vec<serde_json::Value> = match (earlier, first) {
            (Some(messages), Some(first)) if first.seq > 1 => {
                let cut = first.ts.to_string();
                messages
                    .iter()
                    .filter(|m| m["ts"].as_str().is_some_and(|ts| ts < cut.as_str()))
                    .cloned()
                    .collect()
            }
            (Some(messages), None) => messages.clone(),
            _ => Vec::new(),
        };
        let mut lines = message_lines(&before, inner.width);
        let events: Vec<_> = events.iter().cloned().collect();
        lines.extend(feed_lines(&events, inner.width));
        lines
    });
    scrolled(frame, lines, inner, scroll);
}

/// The lines of a scrolled view that fit in `area`.
fn scrolled(frame: &mut Frame, lines: &[Line<'static>], area: Rect, scroll: &mut Scroll) {
    let height = usize::from(area.height);
    let top = scroll.place(lines.len(), height);
    let shown: Vec<Line> = lines.iter().skip(top).take(height).cloned().collect();
    frame.render_widget(Paragraph::new(shown), area);
}

fn history_overlay(
    frame: &mut Frame,
    id: &str,
    history: Option<&History>,
    scroll: &mut Scroll,
    cache: &mut Cache,
) {
    let area = frame.area().inner(ratatui::layout::Margin::new(1, 1));
    frame.render_widget(Clear, area);
    let block = Block::bordered().title(format!(" history · {} (Esc closes) ", safe(id)));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let Some(history) = history else {
        frame.render_widget(Paragraph::new("loading…"), inner);
        return;
    };
    let size = match history {
        History::Messages(m) => m.len(),
        History::Log(e) => e.len(),
    };
    let lines = cache.get((id.to_string(), inner.width, size, 0), || match history {
        History::Messages(messages) => message_lines(messages, inner.width),
        History::Log(envelopes) => feed_lines(envelopes, inner.width),
    });
    if lines.is_empty() {
        frame.render_widget(Paragraph::new("nothing yet"), inner);
        return;
    }
    scrolled(frame, lines, inner, scroll);
}

fn approve_overlay(
    frame: &mut Frame,
    id: &str,
    request: Option<&PermissionRequest>,
    scroll: &mut Scroll,
) {
    let full = frame.area();
    let width = full.width.saturating_mul(9) / 10;
    // `request_body` escaped everything already; `safe` again only turns tabs to spaces.
    let lines: Vec<Line<'static>> = match request {
        Some(request) => request_body(request)
            .trim_matches('\n')
            .split('\n')
            .flat_map(|line| {
                wrap(
                    vec![Span::raw(safe(line))],
                    usize::from(width.saturating_sub(2)),
                )
            })
            .collect(),
        None => vec![Line::from("loading the request…")],
    };
    // As tall as the request needs (borders and the keys around it), up to most of the screen.
    let wanted = u16::try_from(lines.len())
        .unwrap_or(u16::MAX)
        .saturating_add(4);
    let height = wanted.min(full.height.saturating_mul(17) / 20);
    let area = full.centered(Constraint::Length(width), Constraint::Length(height));
    frame.render_widget(Clear, area);
    let block = Block::bordered()
        .title(format!(" approval · {} ", safe(id)))
        .border_style(Style::new().fg(Color::Yellow));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let [body, keys] = Layout::vertical([Constraint::Fill(1), Constraint::Length(2)]).areas(inner);
    scrolled(frame, &lines, body, scroll);
    let Some(request) = request else {
        return;
    };
    let choices = if request.always_offered() {
        "[y]es [n]o [a]lways [d]isable [f]orbid-all [c]ancel   Esc: later"
    } else {
        "[y]es [n]o [d]isable [f]orbid-all [c]ancel   Esc: later (\"always\" not offered)"
    };
    let keys_text = vec![
        Line::from(""),
        Line::styled(choices, Style::new().add_modifier(Modifier::BOLD)),
    ];
    frame.render_widget(Paragraph::new(keys_text), keys);
}
