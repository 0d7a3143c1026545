//! Drawing `corral top`: a header (source, counts, the bus's state), the list or one
//! session's feed, a footer of keys, and over them the history, an approval or a question.
//! A session's conversation and an approval are drawn as the session view draws them
//! (`tui::Conversation`, `tui::approval`).
//!
//! Every other text that came from a session or the server (ids, models, directories, errors)
//! goes through `clean_line` before it becomes a span: ratatui writes a cell's symbol to the
//! terminal as it is.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Block, Borders, Cell, Clear, Paragraph, Row as TableRow, Table, TableState,
};
use time::OffsetDateTime;

use super::app::{App, Overlay, View};
use super::board::{Row, ago, count};
use crate::event::Status;
use crate::surface::tui::Conversation;
use crate::surface::tui::theme::Theme;
use crate::surface::tui::wrap::clean_line;

pub(super) fn draw(frame: &mut Frame, app: &mut App) {
    let [header, body, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Fill(1),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    frame.render_widget(Paragraph::new(header_line(app)), header);
    if matches!(app.view, View::List) {
        list(frame, app, body);
    } else {
        feed(frame, app, body);
    }
    frame.render_widget(Paragraph::new(footer_line(app)), footer);
    let theme = &app.theme;
    match &mut app.overlay {
        Some(Overlay::History { id, history }) => {
            let area = frame.area().inner(ratatui::layout::Margin::new(1, 1));
            frame.render_widget(Clear, area);
            let title = format!(" history · {} (Esc closes) ", clean_line(id));
            let block = Block::bordered().title(title);
            let inner = block.inner(area);
            frame.render_widget(block, area);
            match history {
                Some(view) => conversation(frame, view, inner, theme),
                None => frame.render_widget(Paragraph::new("loading…"), inner),
            }
        }
        Some(Overlay::Approve { request, modal, .. }) => match request {
            Some(request) => modal.draw(frame, body, request, 0, theme),
            None => {
                let area = body.centered(Constraint::Length(40), Constraint::Length(3));
                frame.render_widget(Clear, area);
                let block = Block::bordered().border_style(theme.warning);
                frame.render_widget(Paragraph::new("loading the request…").block(block), area);
            }
        },
        Some(Overlay::Close { id }) => {
            let area = frame
                .area()
                .centered(Constraint::Length(60), Constraint::Length(5));
            frame.render_widget(Clear, area);
            let text = vec![
                Line::from(format!("Close session {}?", clean_line(id))),
                Line::from(""),
                Line::from("[y]es, close it   any other key: no"),
            ];
            let block = Block::bordered().title(" close ");
            frame.render_widget(Paragraph::new(text).block(block), area);
        }
        None => {}
    }
}

/// A conversation in `area`; an empty one says so (the session view's empty text invites
/// typing, which `top` has no place for).
fn conversation(frame: &mut Frame, view: &mut Conversation, area: Rect, theme: &Theme) {
    if view.transcript.blocks().is_empty() {
        frame.render_widget(Paragraph::new(Span::styled("nothing yet", theme.dim)), area);
    } else {
        view.draw(frame, area, theme);
    }
}

fn status_style(status: Status, theme: &Theme) -> Style {
    match status {
        Status::WaitingApproval => theme.warning,
        Status::Working => theme.ok,
        Status::Starting => theme.running,
        Status::Idle => theme.text,
        Status::Dead => theme.dim,
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
    let theme = &app.theme;
    let mut spans = vec![
        Span::styled(" corral top ", theme.status.add_modifier(Modifier::BOLD)),
        Span::raw(format!(" {} ", clean_line(&app.source))),
    ];
    for (status, n) in app.board.counts() {
        spans.push(Span::raw("· "));
        spans.push(Span::styled(
            format!("{n} {}", status_text(status).to_lowercase()),
            status_style(status, theme),
        ));
        spans.push(Span::raw(" "));
    }
    spans.push(Span::styled(
        format!("· sort: {} ", app.board.sort.name()),
        theme.dim,
    ));
    if !app.board.filter.is_empty() {
        spans.push(Span::raw(format!(
            "· filter: {} ",
            clean_line(&app.board.filter)
        )));
    }
    if let Some(why) = &app.stream_down {
        spans.push(Span::styled(
            format!("· disconnected, retrying ({}) ", clean_line(why)),
            theme.error,
        ));
    } else if let Some(why) = &app.listing_failed {
        spans.push(Span::styled(
            format!("· cannot list sessions ({}) ", clean_line(why)),
            theme.error,
        ));
    }
    Line::from(spans)
}

fn footer_line(app: &App) -> Line<'static> {
    if app.editing_filter {
        return Line::from(format!(
            " filter: {}▏  (Enter keeps it, Esc clears it)",
            clean_line(&app.board.filter)
        ));
    }
    if let Some(notice) = app.notice() {
        return Line::styled(format!(" {}", clean_line(notice)), app.theme.running);
    }
    let keys = match (&app.overlay, &app.view) {
        (Some(Overlay::History { .. }), _) => {
            " Esc/q close  ↑↓ PgUp PgDn Home End, wheel: scroll  Ctrl-T thoughts"
        }
        (Some(Overlay::Approve { .. }), _) => {
            " Esc: answer later (it stays open)  ↑↓ PgUp PgDn: scroll  Ctrl-C quit"
        }
        (Some(Overlay::Close { .. }), _) => "",
        (None, View::Feed { .. }) => {
            " Esc/q back  a answer  h history  i interrupt  x close  ↑↓ PgUp PgDn End: scroll  Ctrl-T thoughts"
        }
        (None, View::List) => {
            " Enter feed  a answer  h history  i interrupt  x close  d dismiss  s sort  / filter  q quit  ↑↓ select"
        }
    };
    Line::styled(keys, app.theme.dim)
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
        "TITLE",
        "WORKTREE / DIR",
    ])
    .style(Style::new().add_modifier(Modifier::BOLD | Modifier::UNDERLINED));
    let table_rows: Vec<TableRow> = rows
        .iter()
        .map(|row| table_row(row, now, &app.theme))
        .collect();
    let widths = [
        Constraint::Length(u16::try_from(id_width).unwrap_or(36)),
        Constraint::Length(model_width),
        Constraint::Length(10),
        Constraint::Length(4),
        Constraint::Length(11),
        Constraint::Length(4),
        Constraint::Length(6),
        Constraint::Fill(3),
        Constraint::Fill(2),
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

fn table_row(row: &Row, now: OffsetDateTime, theme: &Theme) -> TableRow<'static> {
    let place = row
        .worktree
        .as_deref()
        .map_or_else(|| row.cwd.clone(), |w| format!("⎇ {w}"));
    let cells = vec![
        Cell::from(clean_line(&row.id)),
        Cell::from(clean_line(&match &row.node {
            Some(node) => format!("{} · {} @ {node}", row.backend, row.model),
            None => format!("{} · {}", row.backend, row.model),
        })),
        Cell::from(status_text(row.status)).style(status_style(row.status, theme)),
        Cell::from(row.turn.to_string()),
        Cell::from(format!(
            "{}/{}",
            count(row.usage.input_tokens),
            count(row.usage.output_tokens)
        )),
        Cell::from(ago(&row.created_at, now)),
        Cell::from(ago(&row.last_activity, now)),
        Cell::from(clean_line(row.title.as_deref().unwrap_or_default())),
        Cell::from(clean_line(&place)),
    ];
    let style = match row.status {
        Status::WaitingApproval | Status::Dead => status_style(row.status, theme),
        _ => Style::new(),
    };
    TableRow::new(cells).style(style)
}

fn feed(frame: &mut Frame, app: &mut App, area: Rect) {
    let View::Feed { id } = &app.view else {
        return;
    };
    let title = match app.board.get(id) {
        Some(r) => match r.title.as_deref() {
            Some(t) => format!(
                " {} · {} · {} · {} ",
                clean_line(id),
                clean_line(t),
                clean_line(&r.model),
                status_text(r.status)
            ),
            None => format!(
                " {} · {} · {} ",
                clean_line(id),
                clean_line(&r.model),
                status_text(r.status)
            ),
        },
        None => format!(" {} ", clean_line(id)),
    };
    let block = Block::new().borders(Borders::TOP).title(title);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    conversation(frame, &mut app.feed, inner, &app.theme);
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use serde_json::json;

    use super::*;
    use crate::event::{
        ContentBlock, Envelope, ErrorData, Payload, PermissionRequest, TextData, Timestamp,
        ToolResultData, Usage,
    };
    use crate::surface::safe_text::is_unsafe;
    use crate::surface::top::app::{History, Update};

    /// Controls and a bidi override (ratatui drops those itself), and tag characters, which
    /// it would write: they cling to the character before them, hiding text in plain sight.
    const HOSTILE: &str = "x\u{e0041}\u{e0042}\u{1b}]52;c;aGk=\u{7}\u{1b}[2J\r\u{202e}\u{9b}1A\ty";

    fn hostile_row(id: &str, status: Status) -> Row {
        Row {
            id: format!("{id}{HOSTILE}"),
            status,
            backend: "native".into(),
            model: format!("llamacpp:{HOSTILE}"),
            cwd: format!("/work/{HOSTILE}"),
            turn: 1,
            usage: Usage::default(),
            created_at: "2026-12-01T00:00:00.000Z".into(),
            last_activity: "2026-12-01T00:00:00.000Z".into(),
            worktree: Some(HOSTILE.into()),
            node: Some(HOSTILE.into()),
            title: Some(HOSTILE.into()),
            pending: 1,
        }
    }

    fn envelope(seq: u64, session: &str, payload: Payload) -> Envelope {
        Envelope {
            seq,
            ts: Timestamp::now(),
            session: Arc::from(session),
            turn: 1,
            payload,
        }
    }

    /// Draws the app and fails if any cell holds a character a terminal would act on.
    fn assert_cells_safe(app: &mut App, what: &str) {
        let mut terminal = Terminal::new(TestBackend::new(100, 30)).unwrap();
        terminal.draw(|frame| draw(frame, app)).unwrap();
        for cell in terminal.backend().buffer().content() {
            assert!(
                !cell.symbol().chars().any(|c| is_unsafe(c) || c == '\t'),
                "{what}: {:?} reached a cell",
                cell.symbol()
            );
        }
    }

    #[test]
    fn no_session_text_reaches_a_cell_raw_in_any_view() {
        let waiting = format!("w{HOSTILE}");
        let mut app = App::new(
            HOSTILE.into(),
            false,
            vec![
                hostile_row("w", Status::WaitingApproval),
                hostile_row("d", Status::Dead),
            ],
        );
        app.board.filter = String::new();
        app.say(HOSTILE);
        app.update(Update::Stream(Some(HOSTILE.into())));
        assert_cells_safe(&mut app, "the list");
        let text = |t: &str| {
            Payload::AssistantText(TextData {
                delta: false,
                content: ContentBlock::text(t),
            })
        };
        let error = Payload::Error(ErrorData {
            message: HOSTILE.into(),
            data: json!(null),
        });
        let result = Payload::ToolResult(ToolResultData::sample("c1", HOSTILE, HOSTILE));
        for (seq, payload) in [(1, text(HOSTILE)), (2, error), (3, result)] {
            app.update(Update::Bus(Box::new(envelope(seq, &waiting, payload))));
        }
        app.open_feed(waiting.clone());
        assert_cells_safe(&mut app, "the feed");
        app.overlay = Some(Overlay::Approve {
            id: waiting.clone(),
            request: None,
            modal: Box::default(),
        });
        let request = PermissionRequest {
            reason: HOSTILE.into(),
            ..PermissionRequest::sample(HOSTILE, json!({"command": HOSTILE}))
        };
        app.update(Update::Permissions(waiting.clone(), vec![request]));
        assert_cells_safe(&mut app, "the approval");
        app.overlay = Some(Overlay::History {
            id: waiting.clone(),
            history: None,
        });
        let messages = vec![
            json!({"role": "user", "text": HOSTILE}),
            json!({"role": "tool", "text": HOSTILE, "tool": {"title": HOSTILE, "input": HOSTILE}}),
        ];
        app.update(Update::History(
            waiting.clone(),
            History::Messages(messages),
        ));
        assert_cells_safe(&mut app, "the history");
        app.overlay = Some(Overlay::Close { id: waiting });
        assert_cells_safe(&mut app, "the close question");
    }
}
