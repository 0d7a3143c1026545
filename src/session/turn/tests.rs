use super::*;
use crate::event::SharedEvent;
use crate::session::tests::fill_the_disk;

fn idle_session() -> Arc<Session> {
    let session = Session::create(None).unwrap();
    session.transition(Status::Idle).unwrap();
    session
}

fn kinds(events: &mut tokio::sync::mpsc::UnboundedReceiver<SharedEvent>) -> Vec<String> {
    let mut out = Vec::new();
    while let Ok(event) = events.try_recv() {
        let payload = &event.envelope.payload;
        out.push(match payload {
            Payload::Status(data) => format!("status {}", data.status),
            Payload::Result(data) => format!(
                "result {} {}",
                serde_json::to_value(data.stop_reason).unwrap(),
                data.error.as_deref().unwrap_or("-")
            ),
            Payload::Error(data) => format!("error {}", data.message),
            other => other.kind_name().to_string(),
        });
    }
    out
}

fn usage(input_tokens: u64) -> Usage {
    Usage {
        input_tokens,
        ..Usage::default()
    }
}

#[test]
fn a_session_that_is_not_idle_refuses_the_turn_and_emits_nothing() {
    let session = Session::create(None).unwrap();
    let mut events = session.tap(session.last_seq());
    let refused = Turn::begin(&session, "hi", &[]).err().unwrap();
    assert_eq!(refused.stop_reason, StopReason::Error);
    assert_eq!(
        refused.error.as_deref(),
        Some("cannot start a turn: illegal status transition starting → working")
    );
    assert_eq!(refused.usage, Usage::default());
    assert!(kinds(&mut events).is_empty());
    assert_eq!(session.turn(), 0);
}

#[tokio::test]
async fn a_turn_announces_its_prompt_and_images_and_ends_idle_with_its_result() {
    let session = idle_session();
    let mut events = session.tap(session.last_seq());
    let image = Image {
        mime_type: "image/png".into(),
        data_base64: "iVBO".into(),
    };
    let turn = Turn::begin(&session, "look", std::slice::from_ref(&image)).unwrap();
    assert_eq!(session.turn(), 1);
    let outcome = turn
        .finish(TurnEnd::Stop(StopReason::EndTurn), usage(5), "seen".into())
        .await;
    assert_eq!(
        outcome,
        TurnOutcome {
            stop_reason: StopReason::EndTurn,
            usage: usage(5),
            error: None,
            text: "seen".into(),
        }
    );
    assert_eq!(
        kinds(&mut events),
        [
            "status working",
            "turn_started",
            "user_text",
            "user_text",
            "result \"end_turn\" -",
            "status idle"
        ]
    );
    assert_eq!(session.status(), Status::Idle);
    assert!(!session.turn_in_progress());
}

/// One turn of `session` finished with `end`: its outcome, and the events after its prompt.
async fn finished(session: &Arc<Session>, end: TurnEnd) -> (TurnOutcome, Vec<String>) {
    let mut events = session.tap(session.last_seq());
    let turn = Turn::begin(session, "a", &[]).unwrap();
    let outcome = turn.finish(end, usage(1), String::new()).await;
    (outcome, kinds(&mut events).split_off(3))
}

#[tokio::test]
async fn an_error_end_is_said_once_and_a_reported_one_not_again() {
    let session = idle_session();
    let (outcome, events) = finished(&session, TurnEnd::Error("it broke".into())).await;
    assert_eq!(outcome.error.as_deref(), Some("it broke"));
    assert_eq!(
        events,
        ["error it broke", "result \"error\" it broke", "status idle"]
    );

    let (outcome, events) = finished(&session, TurnEnd::ErrorReported("said already".into())).await;
    assert_eq!(outcome.stop_reason, StopReason::Error);
    assert_eq!(events, ["result \"error\" said already", "status idle"]);
}

#[tokio::test]
async fn a_crashed_turn_closes_the_session() {
    let session = idle_session();
    let mut events = session.tap(session.last_seq());
    let turn = Turn::begin(&session, "a", &[]).unwrap();
    let outcome = turn
        .crashed("the agent exited".into(), usage(2), "half".into())
        .await;
    assert_eq!(outcome.error.as_deref(), Some("the agent exited"));
    assert_eq!((outcome.usage, outcome.text.as_str()), (usage(2), "half"));
    assert_eq!(
        kinds(&mut events)[3..],
        ["result \"error\" the agent exited", "status dead"]
    );
    assert_eq!(session.status(), Status::Dead);
}

#[tokio::test]
async fn a_turn_whose_log_failed_ends_in_error_whatever_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let session = Session::create(Some(dir.path())).unwrap();
    session.transition(Status::Idle).unwrap();
    let turn = Turn::begin(&session, "a", &[]).unwrap();
    let failure = fill_the_disk(&session, 0);
    let outcome = turn
        .finish(TurnEnd::Stop(StopReason::EndTurn), usage(1), String::new())
        .await;
    assert_eq!(outcome.stop_reason, StopReason::Error);
    assert_eq!(outcome.error, Some(failure.to_string()));
    assert_eq!(session.status(), Status::Idle);
    session.close();
}

#[test]
fn a_turn_dropped_unfinished_reports_an_error_result_and_leaves_the_session_idle() {
    let session = idle_session();
    let mut events = session.tap(session.last_seq());
    let turn = Turn::begin(&session, "a", &[]).unwrap();
    drop(turn);
    assert_eq!(
        kinds(&mut events)[3..],
        [
            format!("error {UNFINISHED}"),
            format!("result \"error\" {UNFINISHED}"),
            "status idle".to_string()
        ]
    );
    assert_eq!(session.status(), Status::Idle);
    assert!(!session.turn_in_progress());
    assert!(
        Turn::begin(&session, "b", &[]).is_ok(),
        "the next turn is taken"
    );
}

#[test]
fn a_turn_dropped_while_a_person_is_asked_withdraws_the_question_first() {
    let session = idle_session();
    let turn = Turn::begin(&session, "a", &[]).unwrap();
    let (request_id, answer) = session
        .request_permission(crate::event::PermissionRequest::sample(
            "shell",
            serde_json::json!({}),
        ))
        .unwrap();
    let mut events = session.tap(session.last_seq());
    drop(turn);
    let seen = kinds(&mut events);
    assert_eq!(seen[..2], ["permission", "status working"], "{seen:?}");
    assert_eq!(seen.last().map(String::as_str), Some("status idle"));
    assert!(session.pending_permissions().is_empty());
    assert!(answer.blocking_recv().is_err(), "{request_id} withdrawn");
    assert_eq!(session.status(), Status::Idle);
}

#[tokio::test]
async fn a_turn_future_dropped_mid_turn_still_publishes_its_result() {
    let session = idle_session();
    let running = {
        let session = session.clone();
        tokio::spawn(async move {
            let turn = Turn::begin(&session, "a", &[]).unwrap();
            std::future::pending::<()>().await;
            turn.finish(
                TurnEnd::Stop(StopReason::EndTurn),
                Usage::default(),
                String::new(),
            )
            .await
        })
    };
    while session.turn() == 0 {
        tokio::task::yield_now().await;
    }
    running.abort();
    assert!(running.await.unwrap_err().is_cancelled());
    assert_eq!(session.finished_turn(), 1);
    assert_eq!(session.status(), Status::Idle);
}
