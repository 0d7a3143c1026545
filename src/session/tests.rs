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

fn writer_on(path: &std::path::Path) -> (log::LogWriter, std::sync::mpsc::Receiver<LogFailure>) {
    let (report, failures) = std::sync::mpsc::channel();
    let on_failure = Box::new(move |f: &LogFailure| {
        let _ = report.send(f.clone());
    });
    (
        log::LogWriter::open(path.to_path_buf(), on_failure).unwrap(),
        failures,
    )
}

fn event(session: &Session, t: &str) -> SharedEvent {
    session.emit(text(false, t))
}

#[test]
fn a_torn_line_is_terminated_before_the_next_envelope() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("torn.events.jsonl");
    std::fs::write(&path, "{\"seq\":1}\n{\"seq\":2,\"ts\":\"20").unwrap();
    let (mut writer, failures) = writer_on(&path);
    let source = Session::create(None).unwrap();
    writer.append(event(&source, "next"));
    writer.close().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert_eq!(lines[1], "{\"seq\":2,\"ts\":\"20");
    assert!(serde_json::from_str::<Envelope>(lines[2]).is_ok(), "{text}");
    assert!(failures.try_recv().is_err());
}

#[tokio::test]
async fn a_failed_write_is_reported_once_and_flushes_still_return() {
    // Every write to /dev/full fails with ENOSPC, and it cannot be truncated either.
    let (writer, failures) = writer_on(std::path::Path::new("/dev/full"));
    let source = Session::create(None).unwrap();
    writer.append(event(&source, "lost"));
    let _ = writer.flush().await;
    writer.append(event(&source, "dropped"));
    let _ = writer.flush().await;
    let failure = failures.try_recv().unwrap();
    assert!(
        failure.reason.contains("No space left on device"),
        "{failure}"
    );
    assert_eq!(failure.kept_bytes, 0);
    assert!(failure.repaired.is_err(), "{failure:?}");
    assert!(
        failure
            .to_string()
            .starts_with("cannot write the event log /dev/full: "),
        "{failure}"
    );
    assert!(failures.try_recv().is_err(), "reported once");
}

/// Reports a full disk to `session`'s log, as its writer would.
pub(super) fn fill_the_disk(session: &Session, kept_bytes: u64) -> LogFailure {
    let failure = LogFailure {
        path: session.log_path().unwrap().to_path_buf(),
        reason: "No space left on device (os error 28)".into(),
        kept_bytes,
        repaired: Ok(()),
    };
    session.log_failed(failure.clone());
    failure
}

#[tokio::test]
async fn a_session_whose_log_failed_takes_no_turn_and_halts() {
    let dir = tempfile::tempdir().unwrap();
    let session = Session::create(Some(dir.path())).unwrap();
    session.transition(Status::Idle).unwrap();
    let mut live = session.tap(0);
    let failure = fill_the_disk(&session, 10);
    assert!(session.halted().is_cancelled());
    assert_eq!(session.flush_log().await, Err(failure.clone()));
    assert_eq!(
        session.begin_turn(),
        Err(TurnRefused::LogFailed(failure.clone()))
    );
    let mut error = None;
    while let Ok(event) = live.try_recv() {
        if let Payload::Error(data) = &event.envelope.payload {
            error = Some(data.clone());
        }
    }
    let error = error.expect("an error envelope on the bus");
    assert_eq!(error.data["logged"], false);
    assert!(error.message.contains("not in the event log"), "{error:?}");
    session.close();
    // Nothing after the failure was queued for the log.
    let logged = read_log(session.log_path().unwrap()).unwrap();
    assert!(logged.iter().all(|e| e.payload.kind_name() == "status"));
    assert_eq!(logged.len(), 2, "starting and idle only");
}

#[test]
fn a_running_session_is_locked_until_closed() {
    let dir = tempfile::tempdir().unwrap();
    let session = Session::create(Some(dir.path())).unwrap();
    let id = session.id().to_string();
    assert!(matches!(
        Session::resume(&id, dir.path()),
        Err(SessionError::InUse(LockError::Held { .. }))
    ));
    assert!(matches!(
        Session::create_with_id(&id, Some(dir.path())),
        Err(SessionError::InUse(_))
    ));
    session.close();
    assert!(Session::resume(&id, dir.path()).is_ok());
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
