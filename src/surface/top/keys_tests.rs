use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseEvent, MouseEventKind};

use super::super::app::{App, Command, Overlay, Update, View};
use super::super::board::Row;
use crate::event::{AlwaysOffer, PermissionRequest, Status, Usage};
use crate::policy::Decision;

fn row(id: &str, status: Status, active: &str) -> Row {
    Row {
        id: id.into(),
        status,
        backend: "native".into(),
        model: "llamacpp:m".into(),
        cwd: "/work".into(),
        turn: 1,
        usage: Usage::default(),
        created_at: "2026-12-01T00:00:00.000Z".into(),
        last_activity: format!("2026-12-01T00:00:{active}.000Z"),
        worktree: None,
        node: None,
        title: None,
        pending: usize::from(status == Status::WaitingApproval),
    }
}

fn app(read_only: bool) -> App {
    App::new(
        "http://127.0.0.1:7777".into(),
        read_only,
        vec![
            row("idle", Status::Idle, "30"),
            row("waits", Status::WaitingApproval, "10"),
            row("gone", Status::Dead, "20"),
        ],
    )
}

fn press(app: &mut App, code: KeyCode) -> Vec<Command> {
    app.key(KeyEvent::new(code, KeyModifiers::NONE))
}

/// Draws the approval once and waits out its settle time, as a person reading it would.
fn read_the_approval(app: &mut App) {
    let mut terminal = ratatui::Terminal::new(ratatui::backend::TestBackend::new(100, 40)).unwrap();
    terminal
        .draw(|frame| super::super::render::draw(frame, app))
        .unwrap();
    std::thread::sleep(crate::surface::tui::APPROVAL_SETTLE);
}

fn request(always: bool) -> PermissionRequest {
    PermissionRequest {
        always: Some(AlwaysOffer {
            offered: always,
            scope: String::new(),
        }),
        ..PermissionRequest::sample("shell", serde_json::json!({"command": "ls"}))
    }
}

#[test]
fn the_waiting_session_is_selected_first_and_answered_with_one_key() {
    let mut app = app(false);
    assert_eq!(app.target().as_deref(), Some("waits"));
    assert_eq!(
        press(&mut app, KeyCode::Char('a')),
        [Command::Permissions("waits".into())]
    );
    // Keys before the request arrives answer nothing.
    assert!(press(&mut app, KeyCode::Char('y')).is_empty());
    app.update(Update::Permissions("waits".into(), vec![request(false)]));
    read_the_approval(&mut app);
    // "always" not offered: the key is refused and the question stays.
    assert!(press(&mut app, KeyCode::Char('a')).is_empty());
    assert!(matches!(app.overlay, Some(Overlay::Approve { .. })));
    assert_eq!(
        press(&mut app, KeyCode::Char('f')),
        [Command::Answer {
            id: "waits".into(),
            request: "perm_c1".into(),
            decision: Decision::ForbidAll,
        }]
    );
    assert!(app.overlay.is_none());
    // Esc leaves the question open.
    press(&mut app, KeyCode::Char('a'));
    app.update(Update::Permissions("waits".into(), vec![request(true)]));
    assert!(press(&mut app, KeyCode::Esc).is_empty());
    assert!(app.overlay.is_none());
}

#[test]
fn closing_asks_first_and_a_dead_session_is_dismissed() {
    let mut app = app(false);
    press(&mut app, KeyCode::Down);
    assert_eq!(app.target().as_deref(), Some("idle"));
    assert!(press(&mut app, KeyCode::Char('x')).is_empty());
    assert!(press(&mut app, KeyCode::Char('n')).is_empty());
    press(&mut app, KeyCode::Char('x'));
    assert_eq!(
        press(&mut app, KeyCode::Char('y')),
        [Command::Close("idle".into())]
    );
    press(&mut app, KeyCode::Down);
    assert_eq!(app.target().as_deref(), Some("gone"));
    press(&mut app, KeyCode::Char('d'));
    assert_eq!(app.board.visible().len(), 2);
    assert_eq!(
        app.target().as_deref(),
        Some("idle"),
        "the next one up is selected"
    );
}

#[test]
fn local_sessions_are_read_only_but_can_be_watched() {
    let mut app = app(true);
    for key in ['a', 'i', 'x'] {
        assert!(press(&mut app, KeyCode::Char(key)).is_empty());
        assert!(app.notice().unwrap().contains("--server"), "{key}");
        assert!(app.overlay.is_none());
    }
    assert_eq!(
        press(&mut app, KeyCode::Enter),
        [Command::Watch(Some("waits".into()))]
    );
    assert!(matches!(app.view, View::Feed { .. }));
    assert_eq!(
        press(&mut app, KeyCode::Char('h')),
        [Command::History("waits".into())]
    );
    press(&mut app, KeyCode::Esc);
    assert_eq!(press(&mut app, KeyCode::Esc), [Command::Watch(None)]);
    assert!(matches!(app.view, View::List));
}

#[test]
fn the_filter_is_typed_and_cleared_and_sorting_cycles() {
    let mut app = app(false);
    press(&mut app, KeyCode::Char('/'));
    for c in "gon".chars() {
        press(&mut app, KeyCode::Char(c));
    }
    press(&mut app, KeyCode::Enter);
    assert_eq!(app.board.visible().len(), 1);
    assert_eq!(app.target().as_deref(), Some("gone"));
    press(&mut app, KeyCode::Esc);
    assert_eq!(app.board.visible().len(), 3);
    press(&mut app, KeyCode::Char('s'));
    assert_eq!(app.notice(), Some("sorted by status"));
    // A paste is text for the filter, never keys.
    app.paste("xy");
    assert!(app.overlay.is_none() && app.board.filter.is_empty());
    press(&mut app, KeyCode::Char('/'));
    app.paste("wai\x1b[2Jts\nmore");
    assert_eq!(app.board.filter, "wai[2Jts");
    press(&mut app, KeyCode::Esc);
    assert!(
        app.key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL))
            .is_empty()
    );
    assert!(app.quit);
}

#[test]
fn ctrl_c_in_the_approval_quits_without_answering() {
    let mut app = app(false);
    press(&mut app, KeyCode::Char('a'));
    app.update(Update::Permissions("waits".into(), vec![request(true)]));
    let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
    assert!(app.key(ctrl_c).is_empty());
    assert!(app.quit);
}

fn wheel(app: &mut App, kind: MouseEventKind) {
    app.mouse(MouseEvent {
        kind,
        column: 0,
        row: 0,
        modifiers: KeyModifiers::NONE,
    });
}

#[test]
fn the_wheel_moves_the_selection_or_scrolls_what_is_open() {
    let mut app = app(false);
    wheel(&mut app, MouseEventKind::ScrollDown);
    assert_eq!(app.target().as_deref(), Some("idle"));
    wheel(&mut app, MouseEventKind::ScrollUp);
    assert_eq!(app.target().as_deref(), Some("waits"));
    press(&mut app, KeyCode::Enter);
    assert_eq!(app.feed.scroll, 0, "the feed follows what arrives");
    wheel(&mut app, MouseEventKind::ScrollUp);
    assert_eq!(app.feed.scroll, 3);
    press(&mut app, KeyCode::Down);
    assert_eq!(app.feed.scroll, 2);
    press(&mut app, KeyCode::End);
    assert_eq!(app.feed.scroll, 0);
}
