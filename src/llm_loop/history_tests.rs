use super::*;
use crate::event::{ToolCallInfo, ToolCallStatus, ToolUseData};

fn log(payloads: Vec<(u32, Payload)>) -> Vec<Envelope> {
    payloads
        .into_iter()
        .enumerate()
        .map(|(i, (turn, payload))| Envelope {
            seq: i as u64 + 1,
            ts: crate::event::Timestamp::now(),
            session: "a1".into(),
            turn,
            payload,
        })
        .collect()
}

fn user(text: &str) -> Payload {
    Payload::UserText(UserTextData {
        content: ContentBlock::text(text),
    })
}

fn answer(text: &str) -> Payload {
    Payload::AssistantText(TextData {
        delta: false,
        content: ContentBlock::text(text),
    })
}

fn call(id: &str, title: &str) -> Payload {
    Payload::ToolUse(ToolUseData::new(
        "shell",
        ToolCallInfo {
            tool_call_id: id.into(),
            title: title.into(),
            kind: "execute".into(),
            status: ToolCallStatus::Pending,
            content: Vec::new(),
            locations: Vec::new(),
            raw_input: Some(serde_json::json!({"command": "sleep 100"})),
        },
    ))
}

fn result() -> Payload {
    Payload::Result(ResultData {
        stop_reason: StopReason::EndTurn,
        usage: Usage::default(),
        error: None,
    })
}

fn names(title: &str) -> Option<String> {
    (title == "Run shell command").then(|| "shell".to_string())
}

fn roles(messages: &[Message]) -> Vec<Role> {
    messages.iter().map(|m| m.role).collect()
}

/// The repair, appended to the log and read back, gives the same messages and asks for
/// nothing more.
fn assert_repair_is_stable(envelopes: &[Envelope], rebuilt: &Rebuilt) {
    let turn = envelopes.last().map_or(0, |e| e.turn);
    let mut appended: Vec<(u32, Payload)> = envelopes
        .iter()
        .map(|e| (e.turn, e.payload.clone()))
        .collect();
    appended.extend(rebuilt.repair.iter().map(|p| (turn, p.clone())));
    let again = rebuild(&log(appended), &names);
    assert_eq!(again.messages, rebuilt.messages);
    assert!(again.repair.is_empty());
}

#[test]
fn a_turn_cut_off_mid_stream_is_closed_with_a_note() {
    let envelopes = log(vec![(1, user("write a poem"))]);
    let rebuilt = rebuild(&envelopes, &names);
    assert_eq!(roles(&rebuilt.messages), [Role::User, Role::Assistant]);
    assert_eq!(rebuilt.messages[1].content, INTERRUPTED_TURN);
    let kinds: Vec<&str> = rebuilt.repair.iter().map(Payload::kind_name).collect();
    assert_eq!(kinds, ["assistant_text", "result"]);
    assert_repair_is_stable(&envelopes, &rebuilt);
}

#[test]
fn a_call_cut_off_gets_an_interrupted_result_and_is_not_dropped() {
    let envelopes = log(vec![
        (1, user("run it")),
        (1, call("c1", "Run shell command")),
    ]);
    let rebuilt = rebuild(&envelopes, &names);
    let m = &rebuilt.messages;
    assert_eq!(
        roles(m),
        [Role::User, Role::Assistant, Role::Tool, Role::Assistant]
    );
    assert_eq!(m[1].tool_calls[0].name, "shell");
    assert_eq!(m[1].tool_calls[0].arguments["command"], "sleep 100");
    assert_eq!(m[2].tool_call_id.as_deref(), Some("c1"));
    assert_eq!(m[2].tool_name.as_deref(), Some("shell"));
    assert_eq!(m[2].content, format!("Error: {INTERRUPTED_CALL}"));
    let kinds: Vec<&str> = rebuilt.repair.iter().map(Payload::kind_name).collect();
    assert_eq!(kinds, ["tool_result", "assistant_text", "result"]);
    assert_repair_is_stable(&envelopes, &rebuilt);
}

#[test]
fn an_answer_cut_off_before_its_result_takes_the_note() {
    let envelopes = log(vec![(1, user("hi")), (1, answer("hello"))]);
    let rebuilt = rebuild(&envelopes, &names);
    assert_eq!(roles(&rebuilt.messages), [Role::User, Role::Assistant]);
    assert_eq!(
        rebuilt.messages[1].content,
        format!("hello\n\n{INTERRUPTED_TURN}")
    );
    assert_repair_is_stable(&envelopes, &rebuilt);
}

#[test]
fn an_earlier_cut_off_turn_is_closed_in_memory_only() {
    let envelopes = log(vec![
        (1, user("one")),
        (2, user("two")),
        (2, answer("done")),
        (2, result()),
    ]);
    let rebuilt = rebuild(&envelopes, &names);
    assert_eq!(
        roles(&rebuilt.messages),
        [Role::User, Role::Assistant, Role::User, Role::Assistant]
    );
    assert_eq!(rebuilt.messages[1].content, INTERRUPTED_TURN);
    assert!(rebuilt.repair.is_empty());
}

#[test]
fn a_finished_log_needs_no_repair_and_names_come_from_results() {
    let finished = Payload::ToolResult(ToolResultData::finished(
        "c1",
        "python",
        Ok("4".into()),
        1,
        Vec::new(),
    ));
    let envelopes = log(vec![
        (1, user("2+2")),
        (1, call("c1", "Some title")),
        (1, finished),
        (1, answer("4")),
        (1, result()),
        (2, user("thanks")),
        (2, answer("welcome")),
        (2, result()),
    ]);
    let rebuilt = rebuild(&envelopes, &names);
    assert!(rebuilt.repair.is_empty());
    let m = &rebuilt.messages;
    assert_eq!(
        roles(m),
        [
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::Assistant,
            Role::User,
            Role::Assistant
        ]
    );
    assert_eq!(m[1].tool_calls[0].name, "python");
    assert_eq!(m[2].content, "4");
}
