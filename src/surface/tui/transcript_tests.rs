use serde_json::json;

use super::*;
use crate::event::Envelope;

fn envelope(turn: u32, kind: &str, data: serde_json::Value) -> Envelope {
    serde_json::from_value(json!({
        "seq": 1, "ts": "2026-12-02T10:00:00.000Z", "agent": "s1", "turn": turn,
        "kind": kind, "data": data
    }))
    .unwrap()
}

fn text(kind: &str, delta: bool, text: &str) -> Envelope {
    envelope(
        1,
        kind,
        json!({"delta": delta, "content": {"type": "text", "text": text}}),
    )
}

fn kinds(t: &Transcript) -> Vec<&BlockKind> {
    t.blocks().iter().map(|b| &b.kind).collect()
}

#[test]
fn deltas_build_a_block_that_the_final_text_replaces() {
    let mut t = Transcript::default();
    t.apply(&text("assistant_text", true, "Hel"));
    t.apply(&text("assistant_text", true, "lo"));
    assert_eq!(kinds(&t), [&BlockKind::Assistant("Hello".into())]);
    assert!(t.blocks()[0].open);
    t.apply(&text("assistant_text", false, "Hello!"));
    assert_eq!(kinds(&t), [&BlockKind::Assistant("Hello!".into())]);
    assert!(!t.blocks()[0].open);
}

#[test]
fn a_log_read_back_has_only_final_blocks_and_gets_the_same_conversation() {
    let mut t = Transcript::default();
    t.apply(&text("thought", false, "hmm"));
    t.apply(&text("assistant_text", false, "answer"));
    assert_eq!(
        kinds(&t),
        [
            &BlockKind::Thought("hmm".into()),
            &BlockKind::Assistant("answer".into())
        ]
    );
    assert!(t.blocks()[0].folded, "thoughts start folded");
}

#[test]
fn a_tool_call_is_one_card_from_announce_to_result() {
    let mut t = Transcript::default();
    t.apply(&envelope(1, "tool_use", json!({"call": {"toolCallId": "c1", "title": "shell", "kind": "execute", "status": "pending"}, "tool": "shell"})));
    t.apply(&envelope(1, "tool_use", json!({"call": {"toolCallId": "c1", "title": "Run ls", "kind": "execute", "status": "in_progress", "rawInput": {"command": "ls"}}, "tool": "shell"})));
    t.apply(&envelope(
        1,
        "tool_output",
        json!({"toolCallId": "c1", "stream": "stdout", "text": "a\nb\n"}),
    ));
    t.apply(&envelope(1, "tool_result", json!({
        "update": {"toolCallId": "c1", "status": "completed", "content": []},
        "result": {"toolCallId": "c1", "tool": "shell", "success": true, "output": "a\nb\n", "error": null, "durationMs": 1500}
    })));
    assert_eq!(t.blocks().len(), 1);
    let BlockKind::Tool(card) = &t.blocks()[0].kind else {
        panic!("{:?}", t.blocks())
    };
    assert_eq!(card.title, "Run ls");
    assert_eq!(card.args, Some(json!({"command": "ls"})));
    assert_eq!(card.output, "a\nb\n");
    assert_eq!(card.result, Some((true, "a\nb\n".into())));
    assert_eq!(card.duration_ms, Some(1500));
}

#[test]
fn a_cards_output_is_capped_to_its_tail() {
    let mut t = Transcript::default();
    let chunk = "é".repeat(1000);
    for _ in 0..40 {
        t.apply(&envelope(
            1,
            "tool_output",
            json!({"toolCallId": "c1", "stream": "stdout", "text": chunk}),
        ));
    }
    let BlockKind::Tool(card) = &t.blocks()[0].kind else {
        panic!()
    };
    assert!(card.output.len() <= OUTPUT_CAP);
    assert!(card.output_dropped > 0);
    assert!(card.output.chars().all(|c| c == 'é'));
}

#[test]
fn an_edits_diff_comes_from_its_diff_content() {
    let mut t = Transcript::default();
    t.apply(&envelope(1, "tool_use", json!({"call": {"toolCallId": "c1", "title": "Write a.txt", "kind": "edit", "status": "pending",
        "content": [{"type": "diff", "path": "/w/a.txt", "oldText": "one\n", "newText": "two\n"}]}, "tool": "write_file"})));
    let BlockKind::Tool(card) = &t.blocks()[0].kind else {
        panic!()
    };
    let diff = card.diff.as_deref().unwrap();
    assert!(diff.contains("-one") && diff.contains("+two"), "{diff}");
}

#[test]
fn permissions_open_and_resolve_and_usage_adds_up() {
    let mut t = Transcript::default();
    let request = PermissionRequest::sample("shell", json!({"command": "ls"}));
    let id = request.request_id.clone();
    t.apply(&envelope(
        1,
        "permission",
        serde_json::to_value(&request).unwrap(),
    ));
    assert_eq!(t.pending().len(), 1);
    t.apply(&envelope(
        1,
        "permission",
        json!({"requestId": id, "resolved": true, "decision": "deny"}),
    ));
    assert!(t.pending().is_empty());
    assert!(matches!(&t.blocks()[0].kind, BlockKind::Notice(n) if n == "shell → denied"));
    t.apply(&envelope(1, "usage", json!({"usage": {"inputTokens": 10, "outputTokens": 2, "cacheReadTokens": 0, "cacheCreationTokens": 0, "costUsd": 0.0}, "contextTokens": 900, "contextWindow": 8192})));
    t.apply(&envelope(1, "result", json!({"stopReason": "end_turn", "usage": {"inputTokens": 10, "outputTokens": 2, "cacheReadTokens": 0, "cacheCreationTokens": 0, "costUsd": 0.01}})));
    assert_eq!(t.context_tokens, Some(900));
    assert_eq!(t.usage.input_tokens, 10);
    assert!(
        matches!(&t.blocks().last().unwrap().kind, BlockKind::Notice(n) if n.starts_with("turn 1 done"))
    );
}

#[test]
fn versions_change_with_every_edit_so_caches_refresh() {
    let mut t = Transcript::default();
    t.apply(&text("assistant_text", true, "a"));
    let first = t.blocks()[0].version;
    t.apply(&text("assistant_text", true, "b"));
    assert!(t.blocks()[0].version > first);
    let before = t.blocks()[0].version;
    t.toggle_thoughts();
    assert_eq!(t.blocks()[0].version, before, "not a thought");
}

#[test]
fn a_hostile_flood_stays_bounded() {
    let mut t = Transcript::default();
    let chunk = "x".repeat(64 * 1024);
    for _ in 0..64 {
        t.apply(&text("assistant_text", true, &chunk));
    }
    let BlockKind::Assistant(answer) = &t.blocks()[0].kind else {
        panic!()
    };
    assert!(answer.len() < TEXT_CAP + 200, "{}", answer.len());
    assert!(answer.ends_with("`corral logs` has them]"));
    let huge = "y".repeat(1 << 20);
    t.apply(&envelope(1, "tool_use", json!({"call": {"toolCallId": "c9", "title": "t", "kind": "other", "status": "pending", "rawInput": {"content": huge}}, "tool": "write_file"})));
    let BlockKind::Tool(card) = &t.blocks()[1].kind else {
        panic!()
    };
    assert!(card.args.as_ref().unwrap().to_string().len() < 20 * 1024);
    // Many calls: each found by id, not by a search through every block.
    for i in 0..5000 {
        t.apply(&envelope(
            1,
            "tool_output",
            json!({"toolCallId": format!("k{i}"), "stream": "stdout", "text": "."}),
        ));
    }
    assert_eq!(t.blocks().len(), 5002);
}

#[test]
fn a_turns_duration_comes_from_its_envelopes_times() {
    let mut t = Transcript::default();
    let at = |ts: &str, kind: &str, data: serde_json::Value| -> Envelope {
        serde_json::from_value(json!({
            "seq": 1, "ts": ts, "agent": "s1", "turn": 1, "kind": kind, "data": data
        }))
        .unwrap()
    };
    t.apply(&at("2026-12-02T10:00:00.000Z", "turn_started", json!({})));
    t.apply(&at("2026-12-02T10:00:12.500Z", "result", json!({"stopReason": "end_turn", "usage": {"inputTokens": 1, "outputTokens": 1, "cacheReadTokens": 0, "cacheCreationTokens": 0, "costUsd": 0.0}})));
    assert!(
        matches!(&t.blocks().last().unwrap().kind, BlockKind::Notice(n) if n.starts_with("turn 1 done in 12.5s")),
        "{:?}",
        t.blocks()
    );
}
