use std::path::Path;

use super::*;
use crate::session::WorktreeMeta;
use crate::session::lock::SessionLock;

fn line(id: &str, seq: u64, minute: u32, turn: u32, kind: &str, data: &str) -> String {
    format!(
        r#"{{"seq":{seq},"ts":"2026-12-01T12:{minute:02}:00.000Z","agent":"{id}","turn":{turn},"kind":"{kind}","data":{data}}}"#
    ) + "\n"
}

fn result(input: u64, output: u64, cost: f64) -> String {
    format!(
        r#"{{"stopReason":"end_turn","usage":{{"inputTokens":{input},"outputTokens":{output},"cacheReadTokens":0,"cacheCreationTokens":0,"costUsd":{cost}}}}}"#
    )
}

fn user(text: &str) -> String {
    serde_json::json!({"content": {"type": "text", "text": text}}).to_string()
}

fn status(s: &str) -> String {
    format!(r#"{{"status":"{s}"}}"#)
}

/// A finished two-turn session `id` whose last envelope is at minute `last`.
fn two_turns(id: &str, last: u32) -> String {
    [
        line(id, 1, 0, 0, "status", &status("starting")),
        line(id, 2, 0, 0, "status", &status("idle")),
        line(id, 3, 1, 1, "status", &status("working")),
        line(id, 4, 1, 1, "user_text", &user("fix\n  the   tests")),
        line(id, 5, 2, 1, "result", &result(100, 20, 0.5)),
        line(id, 6, 2, 1, "status", &status("idle")),
        line(id, 7, 3, 2, "user_text", &user("and the docs")),
        line(id, 8, last, 2, "result", &result(1000, 200, 0.25)),
        line(id, 9, last, 2, "status", &status("idle")),
    ]
    .concat()
}

fn write(dir: &Path, id: &str, text: &str) {
    std::fs::write(log_path(dir, id), text).unwrap();
}

fn meta(id: &str) -> SessionMeta {
    SessionMeta {
        id: id.into(),
        model: "claude:sonnet".into(),
        base_url: String::new(),
        cwd: "/src/project".into(),
        created_at: "2026-12-01T11:59:59.000Z".into(),
        system: None,
        worktree: Some(WorktreeMeta {
            path: "/src/project-wt".into(),
            branch: format!("corral/{id}"),
            base: "0".repeat(40),
            repo: "/src/project".into(),
        }),
        external_id: None,
        owner: Some("alice".into()),
        permission: None,
        mcp_servers: None,
        effort: None,
        parent: Some("00000000".into()),
    }
}

#[test]
fn a_session_is_summed_up_from_its_log_and_metadata() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a1", &two_turns("a1", 9));
    meta("a1").save(dir.path()).unwrap();
    let s = summarize(dir.path(), "a1");
    assert_eq!(s.title, "fix the tests");
    assert_eq!(s.model.as_deref(), Some("claude:sonnet"));
    assert_eq!(s.backend, Some("claude"));
    assert_eq!(s.cwd.as_deref(), Some("/src/project"));
    assert_eq!(s.worktree.as_deref(), Some("/src/project-wt"));
    assert_eq!(s.owner.as_deref(), Some("alice"));
    assert_eq!(s.parent.as_deref(), Some("00000000"));
    assert_eq!(s.created_at.as_deref(), Some("2026-12-01T11:59:59.000Z"));
    assert_eq!(
        s.last_activity.unwrap().to_string(),
        "2026-12-01T12:09:00.000Z"
    );
    assert_eq!((s.turns, s.events, s.unreadable_lines), (2, 9, 0));
    assert_eq!((s.usage.input_tokens, s.usage.output_tokens), (1100, 220));
    assert!((s.usage.cost_usd - 0.75).abs() < 1e-9);
    // Idle in the log, but nobody runs it: it was not closed.
    assert_eq!(s.status, LocalStatus::Stopped);
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["status"], "stopped");
    assert_eq!(json["usage"]["inputTokens"], 1100);
    assert_eq!(json["last_activity"], "2026-12-01T12:09:00.000Z");
}

#[test]
fn status_comes_from_the_lock_and_the_last_status_envelope() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        d,
        "live",
        &line("live", 1, 0, 0, "status", &status("starting")),
    );
    write(d, "fresh", &line("fresh", 1, 0, 0, "turn_started", "{}"));
    let closed = two_turns("closed", 5) + &line("closed", 10, 6, 2, "status", &status("dead"));
    write(d, "closed", &closed);
    let working = two_turns("busy", 5) + &line("busy", 10, 6, 3, "status", &status("working"));
    write(d, "busy", &working);
    let _locks: Vec<SessionLock> = ["live", "fresh", "closed", "busy"]
        .iter()
        .map(|id| SessionLock::acquire(d, id).unwrap())
        .collect();
    let status_of = |id| summarize(d, id).status;
    assert_eq!(status_of("live"), LocalStatus::Starting);
    assert_eq!(status_of("fresh"), LocalStatus::Idle);
    assert_eq!(status_of("closed"), LocalStatus::Dead);
    assert_eq!(status_of("busy"), LocalStatus::Working);
    drop(_locks);
    assert_eq!(status_of("closed"), LocalStatus::Dead);
    assert_eq!(status_of("busy"), LocalStatus::Stopped);
}

#[test]
fn damage_is_counted_and_never_stops_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let id = "dmg";
    let long = "y".repeat(200_000);
    let text = [
        line(id, 1, 0, 1, "user_text", &user(&"word ".repeat(40))),
        "not json at all\n".to_string(),
        "\n".to_string(),
        // A huge line of a kind the summary skips: only its head is looked at.
        line(id, 2, 1, 1, "tool_output", &format!(
            r#"{{"toolCallId":"c","stream":"stdout","text":"{long}"}}"#
        )),
        // A tool call's own "kind" inside data is not the envelope's.
        line(id, 3, 2, 1, "tool_use", r#"{"call":{"toolCallId":"c","title":"t","kind":"result","status":"pending"}}"#),
        // Another writer's order: data first, parsed whole.
        format!(
            r#"{{"data":{},"kind":"result","turn":1,"agent":"{id}","ts":"2026-12-01T12:03:00.000Z","seq":4}}"#,
            result(5, 6, 0.0)
        ) + "\n",
        r#"{"seq":5,"ts":"2026-12-01T12:04:00.000Z","agent":"dmg","turn":1,"kind":"result","data":{"trunc"#.to_string() + "\n",
        // Torn by a crash: not an event, not damage.
        r#"{"seq":6,"ts":"2026-12-01T12:05:00.000Z","agent":"dmg","tu"#.to_string(),
    ]
    .concat();
    write(dir.path(), id, &text);
    let s = summarize(dir.path(), id);
    assert_eq!(s.events, 4, "{s:?}");
    assert_eq!(s.unreadable_lines, 2, "{s:?}");
    assert_eq!(s.title.chars().count(), TITLE_CHARS + 1);
    assert!(s.title.ends_with('…'), "{}", s.title);
    assert_eq!((s.usage.input_tokens, s.usage.output_tokens), (5, 6));
    assert_eq!(
        s.last_activity.unwrap().to_string(),
        "2026-12-01T12:03:00.000Z"
    );
    assert_eq!(s.model, None);
    assert_eq!(s.created_at.as_deref(), Some("2026-12-01T12:00:00.000Z"));
}

#[test]
fn a_listing_is_newest_first_and_reads_only_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    assert!(list(&d.join("missing")).unwrap().is_empty());
    write(d, "old", &two_turns("old", 5));
    write(d, "new", &two_turns("new", 30));
    write(d, "empty", "");
    std::fs::write(d.join("pids.json"), "{}").unwrap();
    std::fs::write(d.join("stray.meta.json"), "{").unwrap();
    // Metadata that names another session is not taken for this one's.
    let mut other = meta("someone-else");
    other.id = "someone-else".into();
    std::fs::write(
        SessionMeta::path(d, "old"),
        serde_json::to_string(&other).unwrap(),
    )
    .unwrap();
    let listed: Vec<String> = list(d).unwrap().into_iter().map(|s| s.id).collect();
    assert_eq!(listed, ["new", "old", "empty"]);
    assert_eq!(summarize(d, "old").model, None);
    let empty = summarize(d, "empty");
    assert_eq!((empty.events, empty.title.as_str()), (0, ""));
}

#[test]
fn an_id_resolves_by_whole_id_or_unique_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for id in ["ab12", "ab1234", "cd34"] {
        write(d, id, "");
    }
    assert_eq!(resolve(d, "cd").unwrap(), "cd34");
    assert_eq!(resolve(d, "ab12").unwrap(), "ab12");
    assert_eq!(resolve(d, "ab123").unwrap(), "ab1234");
    match resolve(d, "ab") {
        Err(ResolveError::Ambiguous { candidates, .. }) => {
            assert_eq!(candidates, ["ab12", "ab1234"]);
        }
        other => panic!("{other:?}"),
    }
    for n in 0..10 {
        write(d, &format!("ef{n}"), "");
    }
    let many = resolve(d, "ef").unwrap_err().to_string();
    assert_eq!(
        many,
        "\"ef\" is the start of 10 session ids: ef0, ef1, ef2, ef3, ef4, ef5, ef6, ef7 and 2 \
         more; give more of it"
    );
    let unknown = resolve(d, "zz").unwrap_err();
    assert!(matches!(unknown, ResolveError::Unknown { .. }), "{unknown}");
    assert!(unknown.to_string().contains("corral sessions"), "{unknown}");
    assert!(matches!(resolve(d, ""), Err(ResolveError::Unknown { .. })));
    assert!(matches!(
        resolve(&d.join("none"), "ab"),
        Err(ResolveError::Unknown { .. })
    ));
}

#[test]
fn a_title_is_the_prompt_on_one_line_cut_at_sixty_characters() {
    assert_eq!(title_of("  fix\r\n the\ttests \n"), "fix the tests");
    // Not whitespace, so kept: the listing escapes it.
    assert_eq!(title_of("a\x1b[2J  b"), "a\x1b[2J b");
    let sixty = "x".repeat(TITLE_CHARS);
    assert_eq!(title_of(&sixty), sixty);
    assert_eq!(title_of(&format!("{sixty} more")), format!("{sixty}…"));
    assert_eq!(title_of(""), "");
}
