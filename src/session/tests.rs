use super::*;
use crate::event::{ContentBlock, TextData};

fn text(delta: bool, t: &str) -> Payload {
    Payload::AssistantText(TextData {
        delta,
        content: ContentBlock::text(t),
    })
}

#[test]
fn seq_strictly_increases_and_log_skips_deltas() {
    let dir = tempfile::tempdir().unwrap();
    let session = Session::create(Some(dir.path())).unwrap();
    session.transition(Status::Idle).unwrap();
    session.begin_turn().unwrap();
    let a = session.emit(text(true, "he"));
    let b = session.emit(text(false, "hello"));
    assert!(b.envelope.seq == a.envelope.seq + 1);
    session.transition(Status::Idle).unwrap();
    session.close();
    let logged = read_log(session.log_path().unwrap()).unwrap();
    let kinds: Vec<_> = logged.iter().map(|e| e.payload.kind_name()).collect();
    assert_eq!(
        kinds,
        [
            "status",
            "status",
            "status",
            "assistant_text",
            "status",
            "status"
        ]
    );
    assert!(logged.windows(2).all(|w| w[0].seq < w[1].seq));
    assert!(logged.iter().all(|e| !e.payload.is_liveness_only()));
}

#[test]
fn illegal_transitions_are_refused_and_not_announced() {
    let session = Session::create(None).unwrap();
    let before = session.last_seq();
    assert!(session.transition(Status::Working).is_err());
    assert_eq!(session.last_seq(), before);
    assert_eq!(session.status(), Status::Starting);
}

#[test]
fn torn_last_line_is_skipped_and_resume_continues_seq() {
    let dir = tempfile::tempdir().unwrap();
    let session = Session::create(Some(dir.path())).unwrap();
    session.transition(Status::Idle).unwrap();
    let id = session.id().to_string();
    session.close();
    let path = log_path(dir.path(), &id);
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("{\"seq\":99,\"ts\":\"2026-");
    std::fs::write(&path, text).unwrap();

    let (resumed, history) = Session::resume(&id, dir.path()).unwrap();
    assert_eq!(history.len(), 3);
    assert_eq!(resumed.last_seq(), 4, "3 logged + the new starting status");
}

#[test]
fn subscribers_replay_from_last_seq_without_gaps() {
    let session = Session::create(None).unwrap();
    session.transition(Status::Idle).unwrap();
    session.begin_turn().unwrap();
    for i in 0..5 {
        session.emit(text(true, &i.to_string()));
    }
    let mut sub = session.subscribe(Some(3));
    let seqs: Vec<u64> = sub.replay.iter().map(|e| e.envelope.seq).collect();
    assert_eq!(seqs, (4..=8).collect::<Vec<_>>());
    assert!(!sub.gap);
    session.emit(text(true, "live"));
    assert_eq!(sub.live.try_recv().unwrap().envelope.seq, 9);
}

#[test]
fn bad_ids_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        Session::resume("../etc", dir.path()),
        Err(SessionError::BadId(_))
    ));
    assert!(matches!(
        Session::resume("abc", dir.path()),
        Err(SessionError::NotFound(..))
    ));
}

/// Turns begin and end on one thread while another reads the status: a snapshot showing
/// `idle` never carries the number of a turn that has not finished.
#[test]
fn a_status_snapshot_never_pairs_idle_with_a_running_turn() {
    use crate::event::{ResultData, StopReason, Usage};
    let session = Session::create(None).unwrap();
    session.transition(Status::Idle).unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let turns = {
        let (session, stop) = (session.clone(), stop.clone());
        std::thread::spawn(move || {
            for _ in 0..20_000 {
                session.begin_turn().unwrap();
                session.emit(Payload::Result(ResultData {
                    stop_reason: StopReason::EndTurn,
                    usage: Usage::default(),
                    error: None,
                }));
                session.transition(Status::Idle).unwrap();
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        })
    };
    let mut torn = 0;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let now = session.snapshot();
        if now.status == Status::Idle && now.turn != now.finished_turn {
            torn += 1;
        }
    }
    turns.join().unwrap();
    assert_eq!(torn, 0, "idle shown with a turn still running");
}
