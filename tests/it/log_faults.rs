//! The event log under faults: a full disk (a real, small tmpfs as the cache directory), the
//! file size limit (`prlimit --fsize`, so SIGXFSZ), and a second process on a session that one
//! process runs.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::common::{
    mcp_call, mcp_call_result, mcp_initialize, mcp_wait_dead, openai_run, run_through,
};
use crate::support::{Cmd, FakeModel, Harness, Outcome, Reply};

/// A tmpfs of a given size mounted over a directory for the test's life; lazily unmounted on
/// drop, panics included, so the harness can remove its home.
struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Tmpfs {
        let options = format!("size={size},mode=0700");
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &options, "corral-it-full"])
            .arg(dir)
            .output()
            .unwrap_or_else(|e| panic!("cannot run mount: {e}"));
        assert!(
            out.status.success(),
            "cannot mount a {size} tmpfs on {} (these tests need root): {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        Tmpfs {
            dir: dir.to_path_buf(),
        }
    }

    /// Space returns: the same file system, grown.
    fn grow(&self, size: &str) {
        let options = format!("remount,size={size}");
        let out = std::process::Command::new("mount")
            .args(["-o", &options])
            .arg(&self.dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "cannot grow the tmpfs: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.dir)
            .status();
    }
}

fn log_of(h: &Harness, id: &str) -> PathBuf {
    h.cache_dir()
        .join("corral/agents")
        .join(format!("{id}.events.jsonl"))
}

/// The log as a reader sees it, strictly: every line a whole envelope (none torn, none glued
/// to another), the file ending with a newline, seqs strictly increasing.
fn strict_log(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    assert!(
        text.ends_with('\n'),
        "{} ends mid-line: …{}",
        path.display(),
        &text[text.len().saturating_sub(120)..]
    );
    let envelopes: Vec<Value> = text
        .lines()
        .enumerate()
        .map(|(i, line)| {
            serde_json::from_str(line).unwrap_or_else(|e| {
                let start: String = line.chars().take(160).collect();
                panic!(
                    "line {} of {} is not an envelope ({e}): {start}",
                    i + 1,
                    path.display()
                )
            })
        })
        .collect();
    let seqs: Vec<u64> = envelopes
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "seqs not strictly increasing: {seqs:?}"
    );
    envelopes
}

/// `corral run --json --resume ID PROMPT` against the fake server.
fn resume_run(h: &Harness, server: &FakeModel, id: &str, prompt: &str) -> Cmd {
    h.corral().args([
        "run",
        "--json",
        "-m",
        "llamacpp:fake-model",
        "--base-url",
        &server.openai_base(),
        "--resume",
        id,
        prompt,
    ])
}

/// A run whose log could not be written: it exits 1 saying so, its client got an `error` that
/// says it is not in the log, the turn did not end well, and the session ended dead.
fn assert_stopped_on_log_failure(out: &Outcome, reason: &str) -> String {
    // The runs print hundreds of KB of text: show what happened, not all of it.
    let kinds = out.kinds();
    let shown = format!(
        "code {:?}, kinds {kinds:?}, stderr: {}",
        out.code, out.stderr
    );
    assert_eq!(
        out.code,
        Some(1),
        "exit 1, not success or a signal: {shown}"
    );
    let errors = out.of_kind("error");
    let failure = errors
        .iter()
        .find(|e| e["data"]["data"]["logged"] == false)
        .unwrap_or_else(|| panic!("no error envelope about the log: {shown}"));
    let message = failure["data"]["message"].as_str().unwrap();
    assert!(
        message.contains("cannot write the event log") && message.contains(reason),
        "{message}"
    );
    let result = out.of_kind("result");
    assert_eq!(result.len(), 1, "{shown}");
    assert_eq!(result[0]["data"]["stopReason"], "error", "{shown}");
    let statuses = crate::common::statuses(out);
    assert_eq!(
        statuses.last().map(String::as_str),
        Some("dead"),
        "{statuses:?}"
    );
    assert!(
        out.stderr.contains("cannot write the event log") && out.stderr.contains("--resume"),
        "stderr: {}",
        out.stderr
    );
    failure["agent"].as_str().unwrap().to_owned()
}

/// After the failure the log parses line by line, and a resume appends clean lines: its new
/// turn is complete and seqs go on increasing.
async fn assert_resume_appends_cleanly(h: &Harness, server: &FakeModel, id: &str) {
    let log = log_of(h, id);
    let before = strict_log(&log);
    server.push(Reply::new().text("after the fault"));
    let again = resume_run(h, server, id, "again").run().await;
    assert!(again.success(), "{again:?}");
    let after = strict_log(&log);
    assert_eq!(&after[..before.len()], &before[..], "the old lines changed");
    let added = &after[before.len()..];
    let kinds: Vec<&str> = added.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert!(
        kinds.contains(&"turn_started") && kinds.contains(&"result"),
        "{kinds:?}"
    );
    assert!(
        added
            .iter()
            .any(|e| e["data"]["content"]["text"] == "after the fault"),
        "{added:?}"
    );
}

#[tokio::test]
async fn a_full_disk_stops_the_session_with_an_error_and_leaves_a_clean_log() {
    let h = Harness::new();
    let disk = Tmpfs::mount(&h.cache_dir(), "256k");
    let server = FakeModel::start().await;
    // Its authoritative text block alone is larger than the whole file system.
    server.push(Reply::new().text(&"x".repeat(400 * 1024)));
    let out = openai_run(&h, &server, "fill the disk").run().await;
    let id = assert_stopped_on_log_failure(&out, "No space left on device");
    disk.grow("16m");
    assert_resume_appends_cleanly(&h, &server, &id).await;
}

#[tokio::test]
async fn the_file_size_limit_fails_the_write_instead_of_killing_corral() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text(&"y".repeat(200 * 1024)));
    // Files corral writes may not grow past 64 KiB; the answer's line would.
    let mut limit = tokio::process::Command::new("prlimit");
    limit.arg("--fsize=65536");
    let exe = Path::new(env!("CARGO_BIN_EXE_corral"));
    let out = run_through(&h, limit, exe, &server, &[]).await;
    let id = assert_stopped_on_log_failure(&out, "File too large");
    assert!(std::fs::metadata(log_of(&h, &id)).unwrap().len() <= 65536);
    assert_resume_appends_cleanly(&h, &server, &id).await;
}

#[tokio::test]
async fn a_served_session_whose_log_fails_is_closed_with_the_error_and_refuses_turns() {
    let h = Harness::new();
    let _disk = Tmpfs::mount(&h.cache_dir(), "256k");
    let server = FakeModel::start().await;
    server.push(Reply::new().text(&"z".repeat(400 * 1024)));
    // `corral mcp` runs its sessions in the session manager `serve` uses.
    let mut mcp = h.corral().arg("mcp").live_stdin().spawn().await;
    mcp_initialize(&mut mcp).await;
    let open = json!({"cwd": h.work(), "model": "llamacpp:fake-model",
                      "base_url": server.openai_base()});
    let opened = mcp_call(&mut mcp, 1, "agent_open", open).await;
    let agent = opened["agent_id"].as_str().unwrap().to_owned();
    let send = json!({"agent_id": agent, "text": "fill the disk"});
    mcp_call(&mut mcp, 2, "agent_send", send).await;
    mcp_wait_dead(&mut mcp, &agent, 3).await;
    let ask = json!({"agent_id": agent, "which": "full_turn", "include_tools": true,
                     "max_chars": 4000});
    let output = mcp_call(&mut mcp, 5000, "agent_output", ask).await;
    let text = output["text"].as_str().unwrap();
    assert!(
        text.contains("[error] cannot write the event log") && text.contains("No space left"),
        "{text}"
    );
    let again = json!({"agent_id": agent, "text": "more"});
    let refused = mcp_call_result(&mut mcp, 5001, "agent_send", again).await;
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(
        refused["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("is closed"),
        "{refused}"
    );
}

/// One `agent_open` over `corral mcp` (the session manager `serve` uses too); its result.
async fn mcp_open(h: &Harness, server: &FakeModel, id: &str) -> Value {
    let mut mcp = h.corral().arg("mcp").live_stdin().spawn().await;
    mcp_initialize(&mut mcp).await;
    let args = json!({"cwd": h.work(), "id": id, "model": "llamacpp:fake-model",
                      "base_url": server.openai_base()});
    let result = mcp_call_result(&mut mcp, 1, "agent_open", args).await;
    mcp.close_stdin();
    let _ = mcp.wait().await;
    result
}

#[tokio::test]
async fn a_second_process_on_a_session_is_refused_naming_the_holder_until_it_dies() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("first answer"));
    let mut holder = h
        .corral()
        .args(["run", "-i", "--json", "-m", "llamacpp:fake-model"])
        .args(["--base-url", &server.openai_base()])
        .live_stdin()
        .spawn()
        .await;
    holder.send_line("first").await;
    let result = holder.wait_for_event(0, |e| e["kind"] == "result").await;
    let id = result["agent"].as_str().unwrap().to_owned();
    let log = log_of(&h, &id);
    let before = std::fs::read(&log).unwrap();
    let asked = server.chat_requests().len();

    let second = resume_run(&h, &server, &id, "second").run().await;
    assert_eq!(second.code, Some(1), "{second:?}");
    let named = format!("session {id} is in use by pid {}", holder.pid());
    assert!(
        second.stderr.contains(&named) && second.stderr.contains("run -i"),
        "{}",
        second.stderr
    );
    // A server's session manager (here `corral mcp`'s) is refused the same way.
    let opened = mcp_open(&h, &server, &id).await;
    assert_eq!(opened["isError"], true, "{opened}");
    let text = opened["content"][0]["text"].as_str().unwrap();
    assert!(text.contains(&named), "{text}");
    assert_eq!(
        std::fs::read(&log).unwrap(),
        before,
        "a refused process wrote"
    );
    assert_eq!(
        server.chat_requests().len(),
        asked,
        "a refused process asked"
    );

    // kill -9 leaves no stale lock: the kernel dropped it with the process.
    holder.signal("KILL").await;
    let killed = holder.wait().await;
    assert_eq!(killed.signal, Some(9), "{killed:?}");
    server.push(Reply::new().text("third answer"));
    let third = resume_run(&h, &server, &id, "third").run().await;
    assert!(third.success(), "{third:?}");
    let turns: Vec<u64> = strict_log(&log)
        .iter()
        .filter(|e| e["kind"] == "turn_started")
        .map(|e| e["turn"].as_u64().unwrap())
        .collect();
    assert_eq!(turns, [1, 2], "one turn per process, numbered on");
}
