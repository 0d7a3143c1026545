//! `corral sessions`, `corral logs`, `corral completions` and `corral man`: the sessions and
//! logs of real runs against the fake model, logs written by hand (damage, hostile text, a log
//! that grows while it is followed), and the generated script and page.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::openai_run;
use crate::support::{FakeModel, Harness, Reply};

fn agents(h: &Harness) -> PathBuf {
    let dir = h.cache_dir().join("corral").join("agents");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One envelope line as corral writes it.
fn envelope(id: &str, seq: u64, turn: u32, kind: &str, data: Value) -> String {
    let line = serde_json::json!({
        "seq": seq, "ts": format!("2026-12-01T12:00:{:02}.000Z", seq % 60), "agent": id,
        "turn": turn, "kind": kind, "data": data,
    });
    format!("{line}\n")
}

fn text(kind: &str, id: &str, seq: u64, text: &str) -> String {
    let data = match kind {
        "user_text" => serde_json::json!({"content": {"type": "text", "text": text}}),
        _ => serde_json::json!({"delta": false, "content": {"type": "text", "text": text}}),
    };
    envelope(id, seq, 1, kind, data)
}

fn status(id: &str, seq: u64, status: &str) -> String {
    envelope(id, seq, 1, "status", serde_json::json!({"status": status}))
}

fn append(path: &std::path::Path, text: &str) {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    file.write_all(text.as_bytes()).unwrap();
}

async fn run_once(h: &Harness, server: &FakeModel, prompt: &str, answer: &str) -> String {
    server.push(Reply::new().text(answer).usage(100, 7));
    let out = openai_run(h, server, prompt).run().await;
    assert!(out.success(), "{out:?}");
    out.events()[0]["agent"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn two_runs_are_listed_newest_first_with_their_titles() {
    let h = Harness::new();
    let empty = h.corral().arg("sessions").run().await;
    assert!(empty.success(), "{empty:?}");
    assert!(
        empty.stdout.starts_with("No sessions in ") && empty.stdout.contains("corral run"),
        "{empty:?}"
    );
    let none = h.corral().args(["sessions", "--json"]).run().await;
    assert_eq!(none.stdout.trim(), "[]", "{none:?}");

    let server = FakeModel::start().await;
    let first = run_once(&h, &server, "count the\nfiles here", "Three.").await;
    let second = run_once(&h, &server, "now the tests", "Two.").await;

    let table = h.corral().arg("sessions").run().await;
    assert!(table.success(), "{table:?}");
    let lines: Vec<&str> = table.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", table.stdout);
    assert!(
        lines[0].starts_with("ID") && lines[0].contains("TITLE"),
        "{}",
        table.stdout
    );
    assert!(
        lines[1].starts_with(&second) && lines[1].contains("now the tests"),
        "{}",
        table.stdout
    );
    assert!(
        lines[2].starts_with(&first) && lines[2].contains("count the files here"),
        "{}",
        table.stdout
    );
    assert!(
        lines[1].contains("llamacpp:fake-model") && lines[1].contains(" dead "),
        "{}",
        table.stdout
    );

    let json = h.corral().args(["sessions", "--json"]).run().await;
    let listed: Vec<Value> = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert_eq!(listed[0]["id"], second.as_str());
    assert_eq!(listed[1]["title"], "count the files here");
    for s in &listed {
        assert_eq!(s["status"], "dead", "{s}");
        assert_eq!(s["turns"], 1, "{s}");
        assert_eq!(s["backend"], "native", "{s}");
        assert_eq!(s["usage"]["inputTokens"], 100, "{s}");
        assert_eq!(s["usage"]["outputTokens"], 7, "{s}");
        assert_eq!(s["cwd"], h.work().display().to_string().as_str(), "{s}");
        assert!(s["events"].as_u64().unwrap() >= 8, "{s}");
    }
}

#[tokio::test]
async fn logs_shows_a_turn_by_prefix_and_its_envelopes_as_the_file_has_them() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    let id = run_once(&h, &server, "say apple", "It says\napple.").await;

    let out = h.corral().args(["logs", &id[..4]]).run().await;
    assert!(out.success(), "{out:?}");
    let shown = &out.stdout;
    assert!(
        shown.contains("t1    user_text      say apple\n"),
        "{shown}"
    );
    assert!(shown.contains("t1    assistant_text It says\n"), "{shown}");
    assert!(
        shown.contains("\n                               apple.\n"),
        "{shown}"
    );
    assert!(
        shown.contains("t1    result         end_turn · 100 in · 7 out tokens"),
        "{shown}"
    );
    assert!(shown.trim_end().ends_with("status         dead"), "{shown}");

    let json = h.corral().args(["logs", &id, "--json"]).run().await;
    assert!(json.success(), "{json:?}");
    let file = std::fs::read_to_string(agents(&h).join(format!("{id}.events.jsonl"))).unwrap();
    assert_eq!(json.stdout, file);
}

#[tokio::test]
async fn an_unknown_or_ambiguous_id_is_a_usage_error() {
    let h = Harness::new();
    let dir = agents(&h);
    for id in ["aa11", "aa22"] {
        append(
            &dir.join(format!("{id}.events.jsonl")),
            &status(id, 1, "dead"),
        );
    }
    let ambiguous = h.corral().args(["logs", "aa"]).run().await;
    assert_eq!(ambiguous.code, Some(2), "{ambiguous:?}");
    assert!(
        ambiguous.stderr.contains("aa11, aa22") && ambiguous.stdout.is_empty(),
        "{ambiguous:?}"
    );
    let unknown = h.corral().args(["logs", "zz", "--follow"]).run().await;
    assert_eq!(unknown.code, Some(2), "{unknown:?}");
    assert!(unknown.stderr.contains("no session \"zz\""), "{unknown:?}");
    let exact = h.corral().args(["logs", "aa11"]).run().await;
    assert!(
        exact.success() && exact.stdout.contains("dead"),
        "{exact:?}"
    );
}

/// A session that is still running: its log is followed while the model is still answering,
/// and the follow ends by itself when the session closes.
#[tokio::test]
async fn follow_prints_what_a_running_session_appends_and_ends_with_it() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(
        Reply::new()
            .text("first part")
            .stall(Duration::from_secs(3))
            .text(", then the rest"),
    );
    let run = openai_run(&h, &server, "take your time").spawn().await;
    let started = run
        .wait_for_event(0, |e| e["kind"] == "assistant_text")
        .await;
    let id = started["agent"].as_str().unwrap().to_owned();

    let follow = h
        .corral()
        .args(["logs", &id, "--follow", "--json"])
        .spawn()
        .await;
    follow.wait_for_event(0, |e| e["kind"] == "user_text").await;
    let early = follow.events_so_far();
    assert!(
        !early.iter().any(|e| e["kind"] == "result"),
        "the turn is still running: {early:?}"
    );
    let ran = run.wait().await;
    assert!(ran.success(), "{ran:?}");
    let followed = follow.wait().await;
    assert!(followed.success(), "{followed:?}");
    let events = followed.events();
    let answer: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "assistant_text")
        .collect();
    assert_eq!(answer.len(), 1, "{events:?}");
    assert_eq!(
        answer[0]["data"]["content"]["text"],
        "first part, then the rest"
    );
    assert_eq!(events.last().unwrap()["data"]["status"], "dead");
}

/// A log written by hand while it is followed: a line is shown only once its newline is
/// there, and the follow stops at the closing `status`.
#[tokio::test]
async fn follow_waits_for_a_whole_line_and_stops_at_dead() {
    let h = Harness::new();
    let log = agents(&h).join("f0110w00.events.jsonl");
    append(&log, &status("f0110w00", 1, "working"));
    let follow = h.corral().args(["logs", "f011", "--follow"]).spawn().await;
    let line = text("assistant_text", "f0110w00", 2, "halfway there");
    let (head, rest) = line.split_at(40);
    append(&log, head);
    tokio::time::sleep(Duration::from_millis(600)).await;
    append(&log, rest);
    append(&log, &status("f0110w00", 3, "dead"));
    let out = follow.wait().await;
    assert!(out.success(), "{out:?}");
    assert!(
        out.stdout.contains("assistant_text halfway there\n"),
        "{out:?}"
    );
    assert!(out.stdout.trim_end().ends_with("dead"), "{out:?}");
    // Nobody runs this session: the follow said it waits for one that does.
    assert!(
        out.stderr.contains("no process runs session f0110w00"),
        "{out:?}"
    );
}

#[tokio::test]
async fn follow_ends_when_its_reader_goes_or_on_ctrl_c() {
    let h = Harness::new();
    let log = agents(&h).join("c0ffee00.events.jsonl");
    let lines: String = (1..=5).map(|n| status("c0ffee00", n, "working")).collect();
    append(&log, &lines);

    // `| head -3`: the reader leaves while the log has nothing more to print.
    let exe = env!("CARGO_BIN_EXE_corral");
    let started = Instant::now();
    let piped = tokio::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "timeout 30 '{exe}' logs c0ffee00 --follow | head -3; echo \"status=${{PIPESTATUS[0]}}\""
        ))
        .env("XDG_CACHE_HOME", h.cache_dir())
        .env("HOME", h.home_dir())
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&piped.stdout);
    let stderr = String::from_utf8_lossy(&piped.stderr);
    assert_eq!(stdout.lines().count(), 4, "{stdout}\n{stderr}");
    assert!(stdout.ends_with("status=0\n"), "{stdout}\n{stderr}");
    assert!(started.elapsed() < Duration::from_secs(20), "{stdout}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    let follow = h.corral().args(["logs", "c0ffee00", "-f"]).spawn().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    follow.sigint().await;
    let out = follow.wait().await;
    assert!(
        out.signal == Some(2) || out.code == Some(130),
        "Ctrl-C ends it: {out:?}"
    );
    assert_eq!(out.stdout.lines().count(), 6, "{out:?}");
    assert!(!out.stderr.contains("panicked"), "{out:?}");
}

/// A model answer that would set the clipboard (OSC 52) and clear the screen, a C1 CSI and a
/// bidi override: `logs` shows each as an escape, never writes one raw; `--json` keeps the
/// same JSON with `\uXXXX` for what JSON allows raw; `sessions` escapes the title.
#[tokio::test]
async fn hostile_text_in_a_log_is_shown_escaped() {
    let h = Harness::new();
    let id = "bad0bad0";
    let log = agents(&h).join(format!("{id}.events.jsonl"));
    let hostile = "copy \x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07 then \x1b[2J\u{9b}2J\u{202e}gnp.exe";
    let file = [
        text("user_text", id, 1, hostile),
        text("assistant_text", id, 2, hostile),
        envelope(id, 3, 1, "error", serde_json::json!({"message": hostile})),
        status(id, 4, "dead"),
    ]
    .concat();
    append(&log, &file);

    let out = h.corral().args(["logs", id]).run().await;
    assert!(out.success(), "{out:?}");
    assert!(
        !out.stdout.contains('\x1b'),
        "a raw ESC reached the terminal: {out:?}"
    );
    assert!(
        !out.stdout.contains('\u{9b}') && !out.stdout.contains('\u{202e}'),
        "{out:?}"
    );
    let shown = r"copy \x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07 then \x1b[2J\u{9b}2J\u{202e}gnp.exe";
    assert_eq!(out.stdout.matches(shown).count(), 3, "{}", out.stdout);

    let json = h.corral().args(["logs", id, "--json"]).run().await;
    assert!(
        !json.stdout.contains('\u{9b}') && !json.stdout.contains('\u{202e}'),
        "{json:?}"
    );
    let file_values: Vec<Value> = file
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(json.events(), file_values, "the same envelopes");

    let table = h.corral().arg("sessions").run().await;
    assert!(
        !table.stdout.contains('\x1b') && !table.stdout.contains('\u{9b}'),
        "{table:?}"
    );
    assert!(table.stdout.contains(r"copy \x1b]52;c;"), "{table:?}");
    let listed = h.corral().args(["sessions", "--json"]).run().await;
    assert!(!listed.stdout.contains('\u{9b}'), "{listed:?}");
    let listed: Vec<Value> = serde_json::from_str(&listed.stdout).unwrap();
    assert!(
        listed[0]["title"]
            .as_str()
            .unwrap()
            .starts_with("copy \x1b]52;c;")
    );
}

#[tokio::test]
async fn completions_load_in_bash_and_the_man_page_covers_the_commands() {
    let h = Harness::new();
    let exe = env!("CARGO_BIN_EXE_corral");
    let loaded = tokio::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source <('{exe}' completions bash) && complete -p corral"
        ))
        .output()
        .await
        .unwrap();
    let spec = String::from_utf8_lossy(&loaded.stdout);
    assert!(
        loaded.status.success(),
        "{spec}\n{}",
        String::from_utf8_lossy(&loaded.stderr)
    );
    assert!(spec.contains("corral"), "{spec}");
    let bash = h.corral().args(["completions", "bash"]).run().await;
    assert!(
        bash.stdout.contains("sessions") && bash.stdout.contains("logs"),
        "{bash:?}"
    );
    for shell in ["zsh", "fish"] {
        let script = h.corral().args(["completions", shell]).run().await;
        assert!(
            script.success() && script.stdout.contains("sessions"),
            "{script:?}"
        );
    }
    let wrong = h.corral().args(["completions", "cmd.exe"]).run().await;
    assert_eq!(wrong.code, Some(2), "{wrong:?}");

    let man = h.corral().arg("man").run().await;
    assert!(man.success(), "{man:?}");
    assert!(
        man.stdout.starts_with(".TH corral 1"),
        "{}",
        &man.stdout[..200]
    );
    for section in [
        "CORRAL SESSIONS",
        "CORRAL LOGS",
        "CORRAL RUN",
        "CORRAL WORKTREE LIST",
    ] {
        assert!(
            man.stdout.contains(&format!(".SH \"{section}\"")),
            "{section}"
        );
    }
    assert!(
        !man.stdout.contains("__clipboard"),
        "hidden commands stay out"
    );
}
