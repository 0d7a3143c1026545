//! Nothing a tool starts outlives its call: processes that leave the process group (`setsid`,
//! `setpgid` in a double fork, `nohup … & disown`) die with the call, under every sandbox
//! mode, and after a crashed runtime the next start reaps them; a worktree under review cannot
//! be rewritten behind the reviewer's back, and `merge` refuses what changed since the session
//! ended.

use std::time::Duration;

use serde_json::json;

use crate::common::*;
use crate::support::{FakeModel, Harness, Reply, Running};

/// Fails if anything holding `word` is alive (killing it first, so a failure leaves nothing).
async fn assert_none_left(word: &str, what: &str) {
    // A SIGKILLed namespace takes a moment to be torn down.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while tokio::time::Instant::now() < deadline {
        if holding(word).is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let left = holding(word);
    let described: Vec<String> = left
        .iter()
        .map(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            format!(
                "{pid}: {}",
                String::from_utf8_lossy(&cmd).replace('\0', " ")
            )
        })
        .collect();
    for pid in &left {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    panic!("{what}: processes outlived the call: {described:?}");
}

/// The three ways out of a process group, each touching `ready-<how>` and then holding `word`
/// for 1000 s: far longer than a test runs, so one that is gone was killed. The call ends once
/// all three run.
fn escapes(word: &str) -> String {
    format!(
        "setsid sh -c ': {word}; touch ready-setsid; sleep 1000' >/dev/null 2>&1 &\n\
         ( set -m; ( : {word}; touch ready-setpgid; sleep 1000 ) >/dev/null 2>&1 & ) &\n\
         nohup sh -c ': {word}; touch ready-nohup; sleep 1000' >/dev/null 2>&1 & disown\n\
         until [ -e ready-setsid ] && [ -e ready-setpgid ] && [ -e ready-nohup ]; do \
         sleep 0.02; done\n\
         echo started"
    )
}

fn shell(id: &str, command: &str) -> Reply {
    let args = json!({ "command": command }).to_string();
    Reply::new().tool_call(id, "shell", &args)
}

async fn run_escapes(sandbox: &str) {
    let h = Harness::new();
    let word = marker(sandbox);
    let server = FakeModel::start().await;
    server.push(shell("c1", &escapes(&word)));
    server.push(Reply::new().text("done"));
    let out = openai_run(&h, &server, "detach")
        .args(["-p", "bypass", "--sandbox", sandbox])
        .timeout(Duration::from_secs(60))
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let rec = &out.of_kind("tool_result")[0]["data"]["result"];
    assert_eq!(rec["success"], true, "{rec}");
    assert!(rec["output"].as_str().unwrap().contains("started"), "{rec}");
    assert_none_left(&word, &format!("--sandbox {sandbox}")).await;
}

#[tokio::test]
async fn detached_processes_die_with_the_call_in_the_sandbox() {
    run_escapes("best-effort").await;
}

#[tokio::test]
async fn detached_processes_die_with_the_call_without_the_sandbox() {
    run_escapes("off").await;
}

/// `corral run -p bypass` with `prompt`, returned once the call's detached process holding
/// `word` runs.
async fn spawn_detached(h: &Harness, server: &FakeModel, prompt: &str, word: &str) -> Running {
    let running = openai_run(h, server, prompt)
        .args(["-p", "bypass"])
        .timeout(Duration::from_secs(60))
        .spawn()
        .await;
    wait_until("the detached process to start", || {
        !holding(word).is_empty()
    })
    .await;
    running
}

/// A call that times out takes down all it started, the detached process that ignores SIGTERM
/// included.
#[tokio::test]
async fn a_timeout_ends_detached_processes_that_ignore_sigterm() {
    let h = Harness::new();
    let word = marker("timeout");
    let server = FakeModel::start().await;
    let script =
        format!("setsid sh -c 'trap \"\" TERM; : {word}; sleep 1000' >/dev/null 2>&1 &\nsleep 60");
    let args = json!({ "command": script, "timeout": 1 }).to_string();
    server.push(Reply::new().tool_call("c1", "shell", &args));
    server.push(Reply::new().text("done"));
    let out = openai_run(&h, &server, "wait")
        .args(["-p", "bypass"])
        .timeout(Duration::from_secs(60))
        .run()
        .await;
    let rec = &out.of_kind("tool_result")[0]["data"]["result"];
    assert!(rec.to_string().contains("timed out"), "{rec}");
    assert_none_left(&word, "after the timeout").await;
}

/// Ctrl-C cancels the turn: the call's boundary goes with it, detached processes included.
#[tokio::test]
async fn an_interrupted_call_ends_its_detached_processes() {
    let h = Harness::new();
    let word = marker("cancel");
    let server = FakeModel::start().await;
    let script = format!("setsid sh -c ': {word}; sleep 1000' >/dev/null 2>&1 &\nsleep 60");
    server.push(shell("c1", &script));
    let running = spawn_detached(&h, &server, "wait", &word).await;
    running.sigint().await;
    let _ = running.wait().await;
    assert_none_left(&word, "after Ctrl-C").await;
}

/// A runtime killed mid-call leaves its tool running; the next start ends all of it, the
/// processes that left the group included.
#[tokio::test]
async fn the_next_start_reaps_what_a_crashed_runtime_left() {
    let h = Harness::new();
    let word = marker("crash");
    let server = FakeModel::start().await;
    let script = format!("setsid sh -c ': {word}; sleep 120' >/dev/null 2>&1 &\nsleep 120");
    server.push(shell("c1", &script));
    let running = spawn_detached(&h, &server, "hang", &word).await;
    running.signal("KILL").await;
    let _ = running.wait().await;
    assert!(
        !holding(&word).is_empty(),
        "a SIGKILLed runtime kills nothing"
    );

    let next = FakeModel::start().await;
    next.push(Reply::new().text("hello"));
    let out = openai_run(&h, &next, "hi").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_none_left(&word, "after the next start").await;
}

/// The trap from the issue: a daemon waits for the review, then rewrites the file merge would
/// take. It is dead when the session ends; and a change made after the session anyway (by
/// anything) makes `merge` refuse, naming the file, until a new snapshot is reviewed.
#[tokio::test]
async fn a_worktree_cannot_be_changed_between_review_and_merge() {
    let h = Harness::new();
    let dir = git_repo(&h, "one\n");
    let word = marker("trap");
    let server = FakeModel::start().await;
    let script = format!(
        "echo good > a.txt\n\
         setsid sh -c ': {word}; touch .ready; sleep 1000; echo evil > a.txt' >/dev/null 2>&1 &\n\
         until [ -e .ready ]; do sleep 0.02; done; rm .ready"
    );
    server.push(shell("c1", &script));
    server.push(Reply::new().text("done"));
    let out = openai_run(&h, &server, "edit")
        .args(["-p", "bypass", "--worktree"])
        .env("GIT_CEILING_DIRECTORIES", h.home_dir())
        .timeout(Duration::from_secs(60))
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let id = out.events()[0]["agent"].as_str().unwrap().to_owned();
    let wt = h.data_dir().join("corral/worktrees").join(&id);
    assert_none_left(&word, "the worktree daemon").await;
    assert_eq!(std::fs::read_to_string(wt.join("a.txt")).unwrap(), "good\n");

    let diff = h.corral().args(["worktree", "diff", &id]).run().await;
    assert_eq!(diff.code, Some(0), "{diff:?}");
    let snapshot = git(&dir, &["rev-parse", &format!("refs/corral/snapshots/{id}")]);
    assert!(
        diff.stderr.contains(&snapshot[..12]) || diff.stdout.contains(&snapshot[..12]),
        "the diff names its snapshot {snapshot}: {diff:?}"
    );
    assert!(diff.stdout.contains("+good"), "{diff:?}");

    // Changed after the review, by anything at all.
    std::fs::write(wt.join("a.txt"), "evil\n").unwrap();
    let merge = h.corral().args(["worktree", "merge", &id]).run().await;
    assert_ne!(merge.code, Some(0), "{merge:?}");
    assert!(
        merge.stderr.contains("a.txt") && merge.stderr.contains("snapshot"),
        "{merge:?}"
    );
    assert_eq!(std::fs::read_to_string(dir.join("a.txt")).unwrap(), "one\n");

    // Accepting the new state is explicit: a new snapshot, reviewed, then merged.
    let again = h.corral().args(["worktree", "snapshot", &id]).run().await;
    assert_eq!(again.code, Some(0), "{again:?}");
    let diff = h.corral().args(["worktree", "diff", &id]).run().await;
    assert!(diff.stdout.contains("+evil"), "{diff:?}");
    let merge = h.corral().args(["worktree", "merge", &id]).run().await;
    assert_eq!(merge.code, Some(0), "{merge:?}");
    assert_eq!(
        std::fs::read_to_string(dir.join("a.txt")).unwrap(),
        "evil\n"
    );
}

/// A turn cancelled through the server while its tool runs: the tool's whole group ends, the
/// members that ignore SIGTERM included, and its pids.json entry goes, while the server (whose
/// exit would end them anyway) lives on.
#[tokio::test]
async fn a_cancelled_turn_ends_its_tools_group_while_the_server_lives_on() {
    use crate::shutdown_faults::{listed, pids_json, serve_mid_tool};
    use crate::support::procs::members;
    let h = Harness::new();
    let word = marker("serve-cancel");
    let model = FakeModel::start().await;
    let (mut server, token, id, pgid) = serve_mid_tool(&h, &model, &word).await;
    let pids = members(pgid);
    // The helper, the call's init, the shell and its twenty sleeps.
    assert!(pids.len() > 20, "{pids:?}");
    let cancel = format!("/api/v1/sessions/{id}/cancel");
    let (status, body) = server.post(&cancel, &token, &json!({})).await;
    assert_eq!((status, body), (200, json!({"cancelled": true})));
    crate::support::assert_all_gone(&pids, "after the cancel").await;
    wait_until("the group to leave pids.json", || {
        !listed(&pids_json(&h), pgid)
    })
    .await;
    assert_eq!(server.child.try_wait().unwrap(), None, "serve exited");
}
