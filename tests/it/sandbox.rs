//! The kernel sandbox around shell and python, end to end: escape attempts fail and are
//! reported as the sandbox's doing; allowed work succeeds; `--sandbox off` lets the same
//! escape through (so these tests can fail). Landlock must exist on the machine: where the
//! probe finds none, each test that needs it fails, unless `CORRAL_TEST_SKIP=landlock` says to
//! skip them.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::*;
use crate::support::{FakeModel, Harness, Outcome, Reply};

const BLOCKED: &str = "[the sandbox blocked this:";

/// The helper's own probe, as a session runs it: `true` when the kernel has landlock; when it
/// has none the test fails, or with `CORRAL_TEST_SKIP=landlock` this is `false` (said on
/// stderr) and the test returns.
pub(crate) async fn landlock_here(h: &Harness) -> bool {
    let out = h
        .corral()
        .args(["__sandbox-exec", "--probe", "--"])
        .run()
        .await;
    let probe: Value = serde_json::from_str(out.stdout.trim()).unwrap_or_default();
    if probe["landlock_abi"].is_number() {
        return true;
    }
    !skip_without(
        "landlock",
        &format!(
            "this kernel has no usable landlock ({}): {out:?}",
            probe["landlock_error"]
        ),
    )
}

/// A run whose model makes the calls one after the other, then answers "done".
pub(crate) async fn run_calls(h: &Harness, calls: &[(&str, Value)], flags: &[&str]) -> Outcome {
    let server = FakeModel::start().await;
    for (i, (name, args)) in calls.iter().enumerate() {
        server.push(Reply::new().tool_call(&format!("c{}", i + 1), name, &args.to_string()));
    }
    server.push(Reply::new().text("done"));
    let out = openai_run(h, &server, "try it")
        .args(["-p", "bypass"])
        .args(flags)
        .timeout(Duration::from_secs(60))
        .run()
        .await;
    assert_well_formed(&out);
    let recs = records(&out);
    let all_blocked = !recs.is_empty()
        && recs.iter().all(|r| {
            r["success"] == false && r["error"].as_str().is_some_and(|e| e.contains(BLOCKED))
        });
    if all_blocked {
        assert_turn_blocked(&out);
    } else {
        assert_eq!(out.code, Some(0), "{out:?}");
    }
    out
}

/// A turn whose every call the sandbox stopped is not a success, and says how to widen it.
pub(crate) fn assert_turn_blocked(out: &Outcome) {
    assert_eq!(out.code, Some(1), "{out:?}");
    let result = result_of(out);
    assert_eq!(result["stopReason"], "error");
    let error = result["error"].as_str().unwrap();
    assert!(
        error.contains("the sandbox blocked every tool call of this turn"),
        "{error}"
    );
    assert!(
        error.contains("writable") && error.contains("--sandbox off"),
        "{error}"
    );
}

/// The `{toolCallId, tool, success, output, error, durationMs}` records, in call order.
pub(crate) fn records(out: &Outcome) -> Vec<Value> {
    out.of_kind("tool_result")
        .iter()
        .map(|e| e["data"]["result"].clone())
        .collect()
}

pub(crate) fn shell(command: &str) -> (&'static str, Value) {
    ("shell", json!({ "command": command }))
}

/// A failed call whose error carries `denial` and the sandbox's note.
pub(crate) fn assert_blocked(record: &Value, denial: &str) -> String {
    assert_eq!(record["success"], false, "{record}");
    let error = record["error"].as_str().unwrap_or_default().to_owned();
    assert!(error.contains(denial), "{error}");
    assert!(error.contains(BLOCKED), "{error}");
    error
}

fn work(h: &Harness) -> PathBuf {
    h.work().canonicalize().unwrap()
}

/// A directory outside the session root (and outside its temp dir).
pub(crate) fn outside() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("corral-outside-")
        .tempdir()
        .unwrap()
}

#[tokio::test]
async fn a_shell_write_outside_the_root_is_blocked_and_reported() {
    let h = Harness::new();
    if !landlock_here(&h).await {
        return;
    }
    let dir = outside();
    let target = dir.path().join("f");
    let out = run_calls(&h, &[shell(&format!("echo x > {}", target.display()))], &[]).await;
    let error = assert_blocked(&records(&out)[0], "Permission denied");
    let note = format!(
        "writes are allowed only under {} and $TMPDIR]",
        work(&h).display()
    );
    assert!(error.ends_with(&note), "{error}");
    assert!(!target.exists());
    // Everything is enforced here: the only error is the turn's own (every call blocked),
    // no start-up gap.
    assert_eq!(out.of_kind("error").len(), 1, "{out:?}");
}

#[tokio::test]
async fn a_python_write_outside_the_root_is_blocked_and_reported() {
    let h = Harness::new();
    if !landlock_here(&h).await {
        return;
    }
    let dir = outside();
    let target = dir.path().join("f");
    let code = format!("open({:?}, 'w').write('x')", target.display().to_string());
    let out = run_calls(&h, &[("python", json!({ "code": code }))], &[]).await;
    assert_blocked(&records(&out)[0], "PermissionError");
    assert!(!target.exists());
}

#[tokio::test]
async fn the_git_directory_stays_read_only_even_from_inside_it() {
    let h = Harness::new();
    if !landlock_here(&h).await {
        return;
    }
    let init = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(h.work())
        .status()
        .unwrap();
    assert!(init.success());
    let hooks = h.work().join(".git/hooks");
    let calls = [
        shell("touch .git/hooks/evil"),
        // Started inside .git: the working directory must not be the writable original.
        (
            "shell",
            json!({"command": "touch hooks/evil2", "cwd": ".git"}),
        ),
        shell("echo fine > tracked.txt && git status --short"),
    ];
    let out = run_calls(&h, &calls, &[]).await;
    let results = records(&out);
    let error = assert_blocked(&results[0], "Read-only file system");
    assert!(
        error.contains("(git's files and agent config are read-only)"),
        "{error}"
    );
    assert_blocked(&results[1], "Read-only file system");
    assert!(!hooks.join("evil").exists() && !hooks.join("evil2").exists());
    // Reading the repository still works, and so does writing beside it.
    assert_eq!(results[2]["success"], true, "{}", results[2]);
    assert_eq!(results[2]["output"], "?? tracked.txt\n");
}

#[tokio::test]
async fn leaving_the_root_with_cd_does_not_escape() {
    let h = Harness::new();
    if !landlock_here(&h).await {
        return;
    }
    let out = run_calls(&h, &[shell("cd .. && echo x > escaped")], &[]).await;
    assert_blocked(&records(&out)[0], "Permission denied");
    assert!(!h.home_dir().join("escaped").exists());
}

const SECRET: &str = "sk-test-secret-123456";

/// One shell call `command` with the runtime's `OPENAI_API_KEY` set to [`SECRET`], under
/// `flags`; fails unless the key reached neither the tool's environment, nor the run's
/// output, event log or model requests.
async fn run_with_the_key(h: &Harness, command: &str, flags: &[&str]) -> Outcome {
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c1", "shell", &json!({ "command": command }).to_string()));
    server.push(Reply::new().text("done"));
    let out = openai_run(h, &server, "show me")
        .args(["-p", "bypass"])
        .args(flags)
        .env("OPENAI_API_KEY", SECRET)
        .run()
        .await;
    let record = &records(&out)[0];
    let text = |field: &str| record[field].as_str().unwrap_or_default().to_owned();
    let said = text("output") + &text("error");
    assert!(said.starts_with("key=\n"), "{record}");
    // Not even redacted: it never got there.
    assert!(
        !said.contains("OPENAI_API_KEY") && !said.contains("REDACTED"),
        "{record}"
    );
    assert!(!out.stdout.contains(SECRET) && !out.stderr.contains(SECRET));
    for log in h.event_logs() {
        assert!(!std::fs::read_to_string(log).unwrap().contains(SECRET));
    }
    let sent = serde_json::to_string(&server.chat_requests()).unwrap();
    assert!(!sent.contains(SECRET));
    out
}

/// Scrubbing is not the sandbox's doing: it holds with the sandbox off, on any kernel.
#[tokio::test]
async fn the_runtime_api_key_never_reaches_a_tool_environment() {
    let h = Harness::new();
    let out = run_with_the_key(&h, "echo key=$OPENAI_API_KEY; env", &["--sandbox", "off"]).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let record = &records(&out)[0];
    assert_eq!(record["success"], true, "{record}");
    let output = record["output"].as_str().unwrap();
    assert!(output.starts_with("key=\n"), "{output}");
}

/// Nor through /proc: the runtime's environment (the tool's parent) cannot be read.
#[tokio::test]
async fn the_runtime_api_key_never_reaches_a_tool() {
    let h = Harness::new();
    if !landlock_here(&h).await {
        return;
    }
    let command = "echo key=$OPENAI_API_KEY; env; cat /proc/$PPID/environ";
    let out = run_with_the_key(&h, command, &[]).await;
    assert_turn_blocked(&out);
    assert_blocked(&records(&out)[0], "Permission denied");
}

/// A loopback listener; the kernel completes connections into its backlog.
fn listener() -> (std::net::TcpListener, u16) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    (listener, port)
}

fn connect(port: u16) -> (&'static str, Value) {
    let code = format!(
        "import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=5)\nprint('connected')"
    );
    ("python", json!({ "code": code }))
}

#[tokio::test]
async fn a_tcp_connect_fails_with_network_off_and_works_with_it_on() {
    let h = Harness::new();
    if !landlock_here(&h).await {
        return;
    }
    let (_listener, port) = listener();
    let off = run_calls(&h, &[connect(port)], &["--network", "off"]).await;
    let error = assert_blocked(&records(&off)[0], "Error");
    assert!(error.ends_with("network is off]"), "{error}");
    let on = run_calls(&h, &[connect(port)], &["--network", "on"]).await;
    let record = &records(&on)[0];
    assert_eq!(record["success"], true, "{record}");
    assert_eq!(record["output"], "connected\n");
}

#[tokio::test]
async fn writes_inside_the_root_and_tmpdir_and_reads_anywhere_succeed() {
    let h = Harness::new();
    if !landlock_here(&h).await {
        return;
    }
    let command = "echo in > inside.txt && mkdir -p sub && mv inside.txt sub/ && \
                   echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" && test -s /etc/hostname && \
                   cat /etc/hostname > /dev/null && echo quiet > /dev/null && \
                   echo to-stderr > /dev/stderr && echo read-ok";
    let code = "import os, tempfile\nwith tempfile.NamedTemporaryFile(dir=os.environ['TMPDIR']) as f:\n    f.write(b'x')\nopen('py.txt', 'w').write('py')\nprint(open('/etc/passwd').readline()[:5])";
    let calls = [shell(command), ("python", json!({ "code": code }))];
    let out = run_calls(&h, &calls, &["--sandbox", "strict"]).await;
    let results = records(&out);
    assert_eq!(results[0]["success"], true, "{}", results[0]);
    // stdout and stderr are two pipes with no common order.
    let mut lines: Vec<&str> = results[0]["output"].as_str().unwrap().lines().collect();
    lines.sort_unstable();
    assert_eq!(lines, ["read-ok", "t", "to-stderr"]);
    assert_eq!(results[1]["success"], true, "{}", results[1]);
    assert_eq!(results[1]["output"], "root:\n");
    assert!(h.work().join("sub/inside.txt").is_file() && h.work().join("py.txt").is_file());
    assert!(out.of_kind("error").is_empty(), "{out:?}");
}

#[tokio::test]
async fn sandbox_off_lets_the_outside_write_through() {
    let h = Harness::new();
    let dir = outside();
    let target = dir.path().join("f");
    let command = format!("echo x > {}", target.display());
    let out = run_calls(&h, &[shell(&command)], &["--sandbox", "off"]).await;
    assert_eq!(records(&out)[0]["success"], true, "{out:?}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "x\n");
}

#[tokio::test]
async fn a_preset_requiring_strict_refuses_weaker_flags() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    let preset = h.home_dir().join("strict.toml");
    std::fs::write(
        &preset,
        "description = \"strict\"\nbypass = true\nsandbox = \"strict\"\nnetwork = \"off\"\n",
    )
    .unwrap();
    let preset = preset.display().to_string();
    let cases = [
        (["--sandbox", "best-effort"], "requires --sandbox strict"),
        (["--network", "on"], "--network on is not allowed"),
    ];
    for (flags, complaint) in cases {
        let out = openai_run(&h, &server, "x")
            .args(["-p", &preset])
            .args(flags)
            .run()
            .await;
        assert_eq!(out.code, Some(2), "{out:?}");
        assert!(out.stderr.contains(complaint), "{out:?}");
    }
    assert!(server.chat_requests().is_empty());
}

#[tokio::test]
async fn doctor_reports_the_landlock_abi_and_the_rest() {
    let h = Harness::new();
    let out = h.corral().arg("doctor").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    for item in [
        "kernel:",
        "landlock network:",
        "user namespaces:",
        "sandbox strict:",
    ] {
        assert!(out.stdout.contains(item), "{item}: {}", out.stdout);
    }
    for item in [
        "display:",
        "session bus:",
        "notifications:",
        "ollama:",
        "config file:",
    ] {
        assert!(out.stdout.contains(item), "{item}: {}", out.stdout);
    }
    assert!(
        out.stdout.starts_with("ok       kernel: Linux "),
        "{}",
        out.stdout
    );
    let probe = h
        .corral()
        .args(["__sandbox-exec", "--probe", "--"])
        .run()
        .await;
    let probe: Value = serde_json::from_str(probe.stdout.trim()).unwrap();
    let landlock = out
        .stdout
        .lines()
        .find(|l| l.contains(" landlock: "))
        .unwrap_or_default();
    match probe["landlock_abi"].as_i64() {
        Some(abi) => {
            let rights = probe["fs_rights"].as_array().unwrap();
            let rights: Vec<&str> = rights.iter().map(|r| r.as_str().unwrap()).collect();
            let expected = format!(
                "ok       landlock: ABI {abi}; filesystem rights: {}",
                rights.join(", ")
            );
            assert_eq!(landlock, expected, "{}", out.stdout);
        }
        None => {
            let why = probe["landlock_error"].as_str().unwrap_or("unavailable");
            assert_eq!(
                landlock,
                format!("missing  landlock: {why}"),
                "{}",
                out.stdout
            );
        }
    }
    let config = h.config_dir().join("corral/config.toml");
    assert!(
        out.stdout.contains(&config.display().to_string()),
        "{}",
        out.stdout
    );
}
