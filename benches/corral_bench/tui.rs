//! The session view's drawing cost: a streamed answer applied token by token, each token
//! followed by a full frame (layout of every block, the visible lines drawn into a terminal
//! buffer) at 80×24 and 240×70; and the memory a 10,000-event history takes once drawn.

use std::time::Instant;

use corral::{Conversation, Envelope, TuiTheme};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::json;

use super::Row;

const TOKENS: usize = 5_000;
const HISTORY_EVENTS: usize = 10_000;

fn envelope(seq: u64, turn: u32, kind: &str, data: serde_json::Value) -> Envelope {
    serde_json::from_value(json!({
        "seq": seq, "ts": "2026-12-02T10:00:00.000Z", "agent": "bench", "turn": turn,
        "kind": kind, "data": data
    }))
    .unwrap()
}

fn token(seq: u64, i: usize) -> Envelope {
    // Words in paragraphs, a code block now and then, as answers look.
    let text = match i % 120 {
        0 => "\n\n```rust\nfn main() { let x = 1; }\n```\n\n".to_string(),
        n if n % 40 == 0 => "\n\n".to_string(),
        n if n % 9 == 0 => "**bold** ".to_string(),
        _ => format!("word{i} "),
    };
    envelope(
        seq,
        1,
        "assistant_text",
        json!({"delta": true, "content": {"type": "text", "text": text}}),
    )
}

/// Microseconds per streamed token, each drawn in a full frame of `width`×`height`.
fn per_token(width: u16, height: u16) -> f64 {
    let theme = TuiTheme::colored();
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    let mut view = Conversation::default();
    // Some history above, as a session in use has.
    let mut seq = 0;
    for e in history(200) {
        seq += 1;
        view.apply(&e);
    }
    let start = Instant::now();
    for i in 0..TOKENS {
        seq += 1;
        view.apply(&token(seq, i));
        terminal
            .draw(|frame| {
                let area = frame.area();
                view.draw(frame, area, &theme);
            })
            .unwrap();
    }
    start.elapsed().as_secs_f64() * 1e6 / TOKENS as f64
}

/// A session's worth of events: prompts, thoughts, tool calls with output, answers.
fn history(events: usize) -> Vec<Envelope> {
    let mut out = Vec::with_capacity(events);
    let mut seq = 0u64;
    let mut turn = 0u32;
    while out.len() < events {
        turn += 1;
        let mut push = |kind: &str, data: serde_json::Value| {
            seq += 1;
            out.push(envelope(seq, turn, kind, data));
        };
        push(
            "user_text",
            json!({"content": {"type": "text", "text": format!("task {turn}: fix the tests")}}),
        );
        push(
            "thought",
            json!({"delta": false, "content": {"type": "text", "text": "Let me look at the failing test first.\nThen the code."}}),
        );
        let id = format!("c{turn}");
        push(
            "tool_use",
            json!({"call": {"toolCallId": id, "title": "Run cargo test", "kind": "execute", "status": "in_progress", "rawInput": {"command": "cargo test"}}, "tool": "shell"}),
        );
        for line in 0..5 {
            push(
                "tool_output",
                json!({"toolCallId": id, "stream": "stdout", "text": format!("test case_{line} ... ok\n")}),
            );
        }
        push(
            "tool_result",
            json!({"update": {"toolCallId": id, "status": "completed", "content": []},
            "result": {"toolCallId": id, "tool": "shell", "success": true, "output": "test result: ok. 5 passed", "error": null, "durationMs": 1200}}),
        );
        push(
            "assistant_text",
            json!({"delta": false, "content": {"type": "text", "text": "All **five** tests pass now.\n\n```rust\nassert_eq!(add(2, 2), 4);\n```\n"}}),
        );
        push(
            "result",
            json!({"stopReason": "end_turn", "usage": {"inputTokens": 1200, "outputTokens": 80, "cacheReadTokens": 0, "cacheCreationTokens": 0, "costUsd": 0.0}}),
        );
    }
    out.truncate(events);
    out
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

pub fn tui(rows: &mut Vec<Row>) {
    for (width, height) in [(80u16, 24u16), (240, 70)] {
        let micros = per_token(width, height);
        rows.push(Row {
            name: if width == 80 {
                "session view: one streamed token applied and drawn, 80×24"
            } else {
                "session view: one streamed token applied and drawn, 240×70"
            },
            figure: format!("{micros:.0} µs ({:.0} tokens/s)", 1e6 / micros),
            goal: "well under a frame (16 ms)",
        });
    }
    let events = history(HISTORY_EVENTS);
    let before = rss_kib();
    let theme = TuiTheme::colored();
    let mut terminal = Terminal::new(TestBackend::new(240, 70)).unwrap();
    let mut view = Conversation::default();
    for e in &events {
        view.apply(e);
    }
    let mut frame_time = || {
        let start = Instant::now();
        terminal
            .draw(|frame| {
                let area = frame.area();
                view.draw(frame, area, &theme);
            })
            .unwrap();
        start.elapsed()
    };
    let first_frame = frame_time();
    let next_frame = frame_time();
    let after = rss_kib();
    drop(events);
    rows.push(Row {
        name: "session view: memory of a 10,000-event history, drawn (RSS growth)",
        figure: format!("{:.1} MiB", after.saturating_sub(before) as f64 / 1024.0),
        goal: "tens of MiB at most",
    });
    rows.push(Row {
        name: "session view: first frame / next frame of that history, 240×70",
        figure: format!(
            "{:.1} ms / {:.2} ms",
            first_frame.as_secs_f64() * 1e3,
            next_frame.as_secs_f64() * 1e3
        ),
        goal: "first under 1 s, next under a frame",
    });
}
