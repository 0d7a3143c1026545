//! The projection, envelope by envelope.

use std::sync::Arc;

use super::*;
use crate::event::*;

fn env(payload: Payload) -> Envelope {
    Envelope {
        seq: 1,
        ts: Timestamp::now(),
        session: Arc::from("a1"),
        turn: 1,
        payload,
    }
}

fn kinds(p: &mut Projector, payloads: Vec<Payload>, mode: TurnMode) -> Vec<Message> {
    payloads
        .into_iter()
        .flat_map(|pl| p.project(&env(pl), mode))
        .collect()
}

fn text(delta: bool, t: &str) -> Payload {
    Payload::AssistantText(TextData {
        delta,
        content: ContentBlock::text(t),
    })
}

fn result(stop: StopReason) -> Payload {
    Payload::Result(ResultData {
        stop_reason: stop,
        usage: Usage {
            input_tokens: 10,
            output_tokens: 5,
            ..Usage::default()
        },
        error: None,
    })
}

fn working() -> Payload {
    Payload::Status(StatusData {
        status: Status::Working,
    })
}

#[test]
fn a_plain_turn_is_thinking_writing_tokens_done() {
    let mut p = Projector::new(false);
    let out = kinds(
        &mut p,
        vec![
            working(),
            text(true, "Hi"),
            text(false, "Hi"),
            result(StopReason::EndTurn),
        ],
        TurnMode::Normal,
    );
    let types: Vec<&str> = out.iter().map(|m| m.kind).collect();
    assert_eq!(
        types,
        ["agent_state", "agent_state", "token", "agent_state", "done"]
    );
    assert_eq!(out[1].payload["state"], "writing");
    // No tool call in the turn: nothing is "the answer after the tools".
    assert_eq!(out[2].payload, json!({"text": "Hi", "final": false}));
    assert_eq!(out[4].payload["total_tokens"], 15);
    assert_eq!(p.state, "idle");
}

#[test]
fn tools_start_and_end_and_tokens_in_a_tool_step_are_not_final() {
    let mut p = Projector::new(false);
    let call = ToolCallInfo {
        tool_call_id: "c1".into(),
        title: "x".into(),
        kind: "other".into(),
        status: ToolCallStatus::Pending,
        content: vec![],
        locations: vec![],
        raw_input: None,
    };
    let mut full = call.clone();
    full.raw_input = Some(json!({"path": "a"}));
    let out = kinds(
        &mut p,
        vec![
            working(),
            Payload::ToolUse(ToolUseData::new("read_file", call)),
            Payload::ToolUse(ToolUseData::new("read_file", full)),
            text(true, "mid"),
            Payload::ToolResult(ToolResultData {
                update: ToolUpdate {
                    tool_call_id: "c1".into(),
                    status: ToolCallStatus::Failed,
                    content: vec![],
                },
                result: ToolResultRecord {
                    tool_call_id: "c1".into(),
                    tool: "read_file".into(),
                    success: false,
                    output: None,
                    error: Some("nope".into()),
                    duration_ms: 3,
                },
            }),
            text(true, "end"),
            result(StopReason::EndTurn),
        ],
        TurnMode::Normal,
    );
    let start = out.iter().find(|m| m.kind == "tool_start").unwrap();
    assert_eq!(start.payload["input"], json!({"path": "a"}));
    // The announce's own name, not its display title ("x").
    assert_eq!(start.payload["tool"], "read_file");
    let end = out.iter().find(|m| m.kind == "tool_end").unwrap();
    assert_eq!(end.payload["error"], "nope");
    assert_eq!(end.payload["tool"], "read_file");
    let finals: Vec<bool> = out
        .iter()
        .filter(|m| m.kind == "token")
        .map(|m| m.payload["final"].as_bool().unwrap())
        .collect();
    assert_eq!(finals, [false, true]);
    assert_eq!(out.last().unwrap().payload["tool_calls"], 1);
}

fn announce(id: &str, tool: &str, title: &str) -> Payload {
    Payload::ToolUse(ToolUseData::new(
        tool,
        ToolCallInfo {
            tool_call_id: id.into(),
            title: title.into(),
            kind: "other".into(),
            status: ToolCallStatus::InProgress,
            content: vec![],
            locations: vec![],
            raw_input: Some(json!({})),
        },
    ))
}

fn finished(id: &str, tool: &str) -> Payload {
    Payload::ToolResult(ToolResultData::finished(
        id,
        tool,
        Ok("ok".into()),
        1,
        vec![],
    ))
}

#[test]
fn tokens_are_final_only_once_every_started_call_has_its_result() {
    let mut p = Projector::new(false);
    let out = kinds(
        &mut p,
        vec![
            working(),
            text(true, "pre"),
            announce("a", "shell", "Run ls"),
            announce("b", "read_file", "Read x"),
            finished("a", "shell"),
            text(true, "between"),
            finished("b", "read_file"),
            text(true, "answer"),
            result(StopReason::EndTurn),
        ],
        TurnMode::Normal,
    );
    let finals: Vec<(String, bool)> = out
        .iter()
        .filter(|m| m.kind == "token")
        .map(|m| {
            let t = m.payload["text"].as_str().unwrap().to_string();
            (t, m.payload["final"].as_bool().unwrap())
        })
        .collect();
    let expected = [("pre", false), ("between", false), ("answer", true)];
    let expected: Vec<(String, bool)> = expected.iter().map(|(t, f)| (t.to_string(), *f)).collect();
    assert_eq!(finals, expected);
}

#[test]
fn tool_end_names_the_tool_its_start_named() {
    let mut p = Projector::new(false);
    // An agent whose result record holds a title that changed since the announce.
    let out = kinds(
        &mut p,
        vec![
            working(),
            announce("c", "Read", "Read /a"),
            finished("c", "Read /a (3 lines)"),
            result(StopReason::EndTurn),
        ],
        TurnMode::Normal,
    );
    let start = out.iter().find(|m| m.kind == "tool_start").unwrap();
    let end = out.iter().find(|m| m.kind == "tool_end").unwrap();
    assert_eq!(start.payload["tool"], "Read");
    assert_eq!(end.payload["tool"], "Read");
}

#[test]
fn done_message_ids_are_uuids_and_differ_per_turn() {
    let mut p = Projector::new(false);
    let mut ids = Vec::new();
    for _ in 0..2 {
        let out = kinds(
            &mut p,
            vec![working(), result(StopReason::EndTurn)],
            TurnMode::Normal,
        );
        let id = out.last().unwrap().payload["message_id"]
            .as_str()
            .unwrap()
            .to_string();
        let groups: Vec<usize> = id.split('-').map(str::len).collect();
        assert_eq!(groups, [8, 4, 4, 4, 12], "{id}");
        assert!(
            id.chars().all(|c| c == '-' || c.is_ascii_hexdigit()),
            "{id}"
        );
        ids.push(id);
    }
    assert_ne!(ids[0], ids[1]);
}

#[test]
fn cancel_is_idle_then_cancelled_without_done() {
    let mut p = Projector::new(false);
    let out = kinds(
        &mut p,
        vec![working(), result(StopReason::Cancelled)],
        TurnMode::Normal,
    );
    let tail: Vec<(&str, Value)> = out[1..]
        .iter()
        .map(|m| (m.kind, m.payload.clone()))
        .collect();
    assert_eq!(tail[0], ("agent_state", json!({"state": "idle"})));
    assert_eq!(tail[1].1["code"], "CANCELLED");
    assert!(out.iter().all(|m| m.kind != "done"));
}

#[test]
fn a_failed_turn_is_error_then_error_idle_states_then_done() {
    let mut p = Projector::new(false);
    let out = kinds(
        &mut p,
        vec![working(), result(StopReason::Error)],
        TurnMode::Think,
    );
    let seen: Vec<String> = out
        .iter()
        .map(|m| match m.kind {
            "agent_state" => m.payload["state"].as_str().unwrap().to_string(),
            other => other.to_string(),
        })
        .collect();
    assert_eq!(
        seen,
        ["thinking", "analyzing", "error", "error", "idle", "done"]
    );
}

#[test]
fn confirm_requests_sort_large_values_last_and_describe_the_action() {
    let mut p = Projector::new(true);
    let mut request = PermissionRequest::sample(
        "write_file",
        json!({"content": "x".repeat(2048), "path": "/tmp/r.md"}),
    );
    request.request_id = "perm_1".into();
    let out = p.project(
        &env(Payload::Permission(PermissionData::Request(Box::new(
            request,
        )))),
        TurnMode::Normal,
    );
    assert_eq!(out[0].kind, "tool_confirm_request");
    assert_eq!(out[0].payload["confirmation_id"], "perm_1");
    assert_eq!(out[0].payload["message"], "Write 2 KB to /tmp/r.md");
    let keys: Vec<&String> = out[0].payload["parameters"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(keys, ["path", "content"]);
    let resolved = PermissionResolution::new("perm_1", "allow", None);
    assert!(
        p.project(
            &env(Payload::Permission(PermissionData::Resolution(resolved))),
            TurnMode::Normal
        )
        .is_empty()
    );
}

#[test]
fn memory_update_says_the_context_after_summarizing() {
    let compaction = |tokens_after| {
        Payload::Compaction(CompactionData {
            summary: "s".repeat(400),
            messages_compacted: 8,
            tokens_before: 9000,
            context_window: 8192,
            tokens_after,
        })
    };
    let mut p = Projector::new(false);
    let out = kinds(&mut p, vec![compaction(2100)], TurnMode::Normal);
    let update = out.iter().find(|m| m.kind == "memory_update").unwrap();
    assert_eq!(update.payload["tokens_used"], 2100);
    // A log from before tokensAfter was recorded: the summary's size.
    let out = kinds(&mut p, vec![compaction(0)], TurnMode::Normal);
    let update = out.iter().find(|m| m.kind == "memory_update").unwrap();
    assert_eq!(update.payload["tokens_used"], 100);
}

fn thought(t: &str) -> Payload {
    Payload::Thought(TextData {
        delta: true,
        content: ContentBlock::text(t),
    })
}

fn announced(tool: &str, id: &str) -> Payload {
    let call = ToolCallInfo {
        tool_call_id: id.into(),
        title: tool.into(),
        kind: "other".into(),
        status: ToolCallStatus::Pending,
        content: vec![],
        locations: vec![],
        raw_input: Some(json!({})),
    };
    Payload::ToolUse(ToolUseData::new(tool, call))
}

fn states(out: &[Message]) -> Vec<&str> {
    out.iter()
        .filter(|m| m.kind == "agent_state")
        .map(|m| m.payload["state"].as_str().unwrap())
        .collect()
}

#[test]
fn a_think_turn_follows_what_it_does_analyzing_researching_deep_thinking_writing() {
    let mut p = Projector::new(false);
    let out = kinds(
        &mut p,
        vec![
            working(),
            thought("what is asked"),
            thought(" here"),
            announced("search_files", "c1"),
            thought("found it"),
            text(true, "The answer"),
            text(true, " is 4"),
            result(StopReason::EndTurn),
        ],
        TurnMode::Think,
    );
    assert_eq!(
        states(&out),
        [
            "thinking",
            "analyzing",
            "deep_thinking",
            "researching",
            "deep_thinking",
            "writing",
            "done"
        ]
    );
    // A tool that does not look anything up is not research.
    let mut p = Projector::new(false);
    let out = kinds(
        &mut p,
        vec![working(), announced("write_file", "c2"), text(true, "ok")],
        TurnMode::Think,
    );
    assert_eq!(states(&out), ["thinking", "analyzing", "writing"]);
    // A normal turn never shows the think phases, whatever it does.
    let mut p = Projector::new(false);
    let out = kinds(
        &mut p,
        vec![
            working(),
            thought("hm"),
            announced("search_files", "c3"),
            text(true, "x"),
            result(StopReason::EndTurn),
        ],
        TurnMode::Normal,
    );
    assert_eq!(states(&out), ["thinking", "writing", "done"]);
}

#[test]
fn a_note_keeps_its_code_and_does_not_fail_the_turn() {
    let mut p = Projector::new(false);
    let note = Payload::Error(ErrorData {
        message: "effort high is not applied".into(),
        data: json!({"code": "EFFORT_NOT_APPLIED", "effort": "high"}),
    });
    let out = kinds(
        &mut p,
        vec![working(), note, result(StopReason::EndTurn)],
        TurnMode::Normal,
    );
    let error = out.iter().find(|m| m.kind == "error").unwrap();
    assert_eq!(error.payload["code"], "EFFORT_NOT_APPLIED");
    assert_eq!(states(&out), ["thinking", "done"]);
}

fn asked(id: &str, diff: Option<&str>) -> Payload {
    let mut request = PermissionRequest::sample("write_file", json!({"path": "a.txt"}));
    request.tool_call.tool_call_id = id.into();
    request.preview.diff = diff.map(str::to_string);
    Payload::Permission(PermissionData::Request(Box::new(request)))
}

#[test]
fn tool_end_carries_the_result_and_the_approved_diff() {
    let mut p = Projector::new(false);
    let long = "x".repeat(OUTPUT_PREVIEW * 3);
    let out = kinds(
        &mut p,
        vec![
            working(),
            announce("w", "write_file", "Write a.txt"),
            asked("w", Some("+hello")),
            finished("w", "write_file"),
            announce("d", "write_file", "Write a.txt"),
            asked("d", Some("+refused")),
            Payload::ToolResult(ToolResultData::finished(
                "d",
                "write_file",
                Err("denied".into()),
                1,
                vec![],
            )),
            announce("r", "read_file", "Read big"),
            Payload::ToolResult(ToolResultData::finished(
                "r",
                "read_file",
                Ok(long),
                1,
                vec![],
            )),
            result(StopReason::EndTurn),
        ],
        TurnMode::Normal,
    );
    let confirm = out
        .iter()
        .find(|m| m.kind == "tool_confirm_request")
        .unwrap();
    assert_eq!(confirm.payload["tool_call_id"], "w");
    assert_eq!(confirm.payload["diff"], "+hello");
    let ends: Vec<&Value> = out
        .iter()
        .filter(|m| m.kind == "tool_end")
        .map(|m| &m.payload)
        .collect();
    assert_eq!(ends[0]["output"], "ok");
    assert_eq!(ends[0]["diff"], "+hello");
    // A refused change did not happen: it is not shown as made.
    assert_eq!(ends[1]["diff"], Value::Null);
    assert_eq!(ends[1]["error"], "denied");
    let big = ends[2]["output"].as_str().unwrap();
    assert!(big.len() < OUTPUT_PREVIEW + 64, "{}", big.len());
    assert!(big.contains("bytes omitted"), "head and tail, marked");
}

#[test]
fn done_says_how_the_turn_ended() {
    let mut p = Projector::new(false);
    let ok = kinds(
        &mut p,
        vec![working(), result(StopReason::EndTurn)],
        TurnMode::Normal,
    );
    assert_eq!(ok.last().unwrap().payload["stop_reason"], "end_turn");
    let failed = kinds(
        &mut p,
        vec![working(), result(StopReason::Error)],
        TurnMode::Normal,
    );
    assert_eq!(failed.last().unwrap().kind, "done");
    assert_eq!(failed.last().unwrap().payload["stop_reason"], "error");
}

#[test]
fn a_preview_cuts_on_character_boundaries() {
    let text = "é".repeat(100);
    let cut = preview(&text, 51);
    assert!(cut.starts_with(&"é".repeat(12)), "{cut}");
    assert!(cut.ends_with(&"é".repeat(12)), "{cut}");
    assert_eq!(preview("short", 51), "short");
}

/// A desktop request reaches the page whole: its point, window, text and a ~300 KB marked
/// screenshot (the WebSocket's message limit is on what clients send, not on this).
#[test]
fn a_desktop_request_carries_its_preview_and_a_large_screenshot_whole() {
    let mut p = Projector::new(true);
    let mut request = PermissionRequest::sample(
        "computer",
        json!({"action": "left_click", "coordinate": [100, 75]}),
    );
    let data = "iVBORw0KGgo".to_string() + &"A".repeat(300 * 1024);
    request.preview.desktop = Some(Box::new(DesktopPreview {
        action: "left_click".into(),
        description: "left click at (412, 300) in <b>xterm</b>".into(),
        point: Some([412, 300]),
        window: Some(DesktopWindow {
            id: "0x1".into(),
            title: "<img src=x onerror=alert(1)>".into(),
            app: "XTerm".into(),
            pid: Some(9),
        }),
        image: Some(crate::event::PreviewImage {
            mime_type: "image/png".into(),
            data_base64: data.clone(),
        }),
        ..DesktopPreview::default()
    }));
    let out = p.project(
        &env(Payload::Permission(PermissionData::Request(Box::new(
            request,
        )))),
        TurnMode::Normal,
    );
    let desktop = &out[0].payload["desktop"];
    assert_eq!(desktop["point"], json!([412, 300]));
    assert_eq!(desktop["window"]["title"], "<img src=x onerror=alert(1)>");
    assert_eq!(desktop["window"]["pid"], 9);
    assert_eq!(desktop["image"]["mime_type"], "image/png");
    assert_eq!(
        desktop["image"]["data_base64"].as_str(),
        Some(data.as_str())
    );
    // And as the socket sends it: one text frame with all of it.
    let frame = serde_json::to_string(&out[0].payload).unwrap();
    assert!(frame.len() > 300 * 1024 && frame.contains(&data));
}
