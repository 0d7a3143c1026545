use std::sync::Arc;

use super::*;
use crate::event::{StatusData, Timestamp};

fn row(id: &str, status: Status, created: &str, active: &str) -> Row {
    Row {
        id: id.into(),
        status,
        backend: "native".into(),
        model: format!("llamacpp:{id}-model"),
        cwd: format!("/work/{id}"),
        turn: 1,
        usage: Usage::default(),
        created_at: format!("2026-12-01T00:00:{created}.000Z"),
        last_activity: format!("2026-12-01T00:01:{active}.000Z"),
        worktree: None,
        node: None,
        title: None,
        pending: usize::from(status == Status::WaitingApproval),
    }
}

fn ids(board: &Board) -> Vec<&str> {
    board.visible().iter().map(|r| r.id.as_str()).collect()
}

fn board() -> Board {
    let mut board = Board::default();
    board.replace(vec![
        row("a", Status::Idle, "01", "50"),
        row("b", Status::WaitingApproval, "02", "10"),
        row("c", Status::Working, "03", "40"),
        row("d", Status::Dead, "04", "55"),
    ]);
    board
}

#[test]
fn waiting_sessions_come_first_then_each_sort_key_in_turn() {
    let mut board = board();
    assert_eq!(ids(&board), ["b", "d", "a", "c"]);
    board.sort = board.sort.next();
    assert_eq!(
        (board.sort.name(), ids(&board)),
        ("status", vec!["b", "c", "a", "d"])
    );
    board.sort = board.sort.next();
    assert_eq!(
        (board.sort.name(), ids(&board)),
        ("age", vec!["d", "c", "b", "a"])
    );
    board.sort = board.sort.next();
    assert_eq!(
        (board.sort.name(), ids(&board)),
        ("id", vec!["a", "b", "c", "d"])
    );
    assert_eq!(board.sort.next(), SortKey::Activity);
}

#[test]
fn the_filter_matches_id_model_directory_title_and_status() {
    let mut board = board();
    board.filter = "WAITING".into();
    assert_eq!(ids(&board), ["b"]);
    board.filter = "c-model".into();
    assert_eq!(ids(&board), ["c"]);
    board.filter = "/work/a".into();
    assert_eq!(ids(&board), ["a"]);
    board.filter = "nothing".into();
    assert!(ids(&board).is_empty());
}

#[test]
fn only_dead_sessions_are_dismissed_and_unlisted_ones_stay_as_dead() {
    let mut board = board();
    assert!(!board.dismiss("a"));
    assert!(board.dismiss("d"));
    assert!(!ids(&board).contains(&"d"));
    // The source drops `c`: kept, dead, until dismissed.
    board.replace(vec![
        row("a", Status::Idle, "01", "50"),
        row("b", Status::Idle, "02", "10"),
    ]);
    assert_eq!(board.get("c").map(|r| r.status), Some(Status::Dead));
    assert_eq!(
        board.counts(),
        [(Status::Idle, 2), (Status::Dead, 1)],
        "dismissed ones are not counted"
    );
    // Reopened on the server: listed again.
    board.replace(vec![row("d", Status::Idle, "04", "55")]);
    assert!(ids(&board).contains(&"d"));
}

#[test]
fn envelopes_move_status_turn_tokens_and_activity() {
    let mut board = board();
    let envelope = |session: &str, payload| Envelope {
        seq: 9,
        ts: Timestamp(time::macros::datetime!(2026-12-01 00:02:00 UTC)),
        session: Arc::from(session),
        turn: 2,
        payload,
    };
    let status = Payload::Status(StatusData {
        status: Status::Working,
    });
    assert!(board.apply(&envelope("a", status.clone())));
    assert!(!board.apply(&envelope("new", status)));
    let a = board.get("a").unwrap();
    assert_eq!((a.status, a.turn), (Status::Working, 2));
    assert_eq!(a.last_activity, "2026-12-01T00:02:00.000Z");
    // A listing with an older activity time keeps the envelope's.
    board.replace(vec![row("a", Status::Idle, "01", "50")]);
    assert_eq!(
        board.get("a").unwrap().last_activity,
        "2026-12-01T00:02:00.000Z"
    );
}

#[test]
fn ages_and_counts_are_short() {
    let now = time::macros::datetime!(2026-12-01 02:00:00 UTC);
    assert_eq!(ago("2026-12-01T01:59:48.000Z", now), "12s");
    assert_eq!(ago("2026-12-01T01:55:00.000Z", now), "5m");
    assert_eq!(ago("2026-11-29T01:00:00.000Z", now), "2d");
    assert_eq!(ago("not a time", now), "");
    assert_eq!(count(999), "999");
    assert_eq!(count(1234), "1.2k");
    assert_eq!(count(3_400_000), "3.4M");
}

#[test]
fn a_listed_empty_title_waits_for_the_first_prompt() {
    let listed: Row = serde_json::from_value(serde_json::json!({
        "id": "a", "status": "idle", "title": ""
    }))
    .unwrap();
    assert_eq!(listed.title, None);
    let mut board = Board::default();
    board.replace(vec![listed]);
    let prompt = Payload::UserText(crate::event::UserTextData {
        content: crate::event::ContentBlock::text("  fix\n the   tests "),
    });
    let envelope = Envelope {
        seq: 1,
        ts: Timestamp::now(),
        session: Arc::from("a"),
        turn: 1,
        payload: prompt,
    };
    assert!(board.apply(&envelope));
    // The one rule for titles, as the catalog and the server make them.
    assert_eq!(
        board.get("a").unwrap().title.as_deref(),
        Some("fix the tests")
    );
}
