//! Running one tool process: its own process group, exactly the environment it is given,
//! output streamed as it arrives and kept with bounded memory (head and tail), and a timeout or
//! cancellation that takes down the whole group, grandchildren included. A session's tool
//! process starts through the `__sandbox-exec` helper (confine.rs), also under `--sandbox off`:
//! the helper holds the call in a PID namespace (boundary.rs), so processes that leave the
//! group (`setsid`, double forks) still end with the call, and signalling the helper's group
//! reaches them all.

mod capture;
mod group;
mod live;
mod sink;

pub use sink::OutputSink;

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::unistd::Pid;
use tokio::io::AsyncReadExt;
use tokio::process::Command;
use tokio::time::sleep_until;
use tokio_util::sync::CancellationToken;

use super::confine::{EXEC_FAILED, REFUSAL_PREFIX, REFUSED_EXIT};
use super::env::Redactor;
use super::reaper;
use super::spec::SandboxSpec;
use crate::event::OutputStream;
use capture::Collector;
#[cfg(test)]
use capture::{STREAM_LIMIT, STREAM_STOPPED};
use group::{Group, confirm_gone, signal_group, wait_child};
pub(crate) use live::{EXIT_WAIT, wait_for_tool_processes};

/// Between SIGTERM and SIGKILL: time for the group to clean up after itself.
const TERM_GRACE: Duration = Duration::from_secs(2);
/// After the direct child exits, how long output still in the pipes is read. Background
/// grandchildren may hold the pipes open forever; the call must not wait for them.
const EXIT_GRACE: Duration = Duration::from_millis(200);
/// Reaping a SIGKILLed child; only a process stuck in the kernel takes longer.
const REAP_WAIT: Duration = Duration::from_secs(1);
const READ_BUF: usize = 16 * 1024;

#[derive(Debug, Clone)]
pub(crate) struct ProcessSpec {
    pub program: String,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    /// The complete environment: nothing is inherited.
    pub env: Vec<(String, String)>,
    pub timeout: Duration,
    pub max_output_bytes: usize,
    /// Confinement through the helper; `None`: the program runs as it is.
    pub sandbox: Option<SandboxSpec>,
    /// Secrets cut out of the output before it is streamed or kept.
    pub redactor: Redactor,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ProcessOutcome {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// stdout and stderr interleaved in arrival order, cut head+tail to `max_output_bytes`.
    pub output: String,
    pub omitted_bytes: u64,
    pub timed_out: bool,
    pub cancelled: bool,
    pub duration: Duration,
    /// The sandbox helper refused to run the program; why.
    pub refused: Option<String>,
}

/// Runs `spec` to completion, timeout or cancellation. Only a failure to start (or to wait
/// for) the process is an error; how it ended is in the outcome. Dropping the future kills
/// the process group too (SIGTERM, then SIGKILL two seconds later).
pub(crate) async fn run(
    spec: ProcessSpec,
    sink: &OutputSink,
    cancel: &CancellationToken,
) -> io::Result<ProcessOutcome> {
    let started = Instant::now();
    let mut command = match &spec.sandbox {
        Some(sandbox) => {
            let helper = sandbox.helper_path();
            let mut command = Command::new(helper);
            command.args(sandbox.helper_args(false)).arg(&spec.program);
            command
        }
        None => Command::new(&spec.program),
    };
    command
        .args(&spec.args)
        .current_dir(&spec.cwd)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = command.spawn()?;
    // Recorded in pids.json until the group is gone, so a crashed runtime's tools get reaped
    // and an exiting one ends them (reaper::end_own_children).
    let tracked = child.id().and_then(|pid| reaper::track(pid, pid, "tool"));
    let (Some(mut stdout), Some(mut stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(io::Error::other("the process has no output pipes"));
    };
    // With process_group(0) the child's pid is its group id.
    let pgid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(Pid::from_raw)
        .ok_or_else(|| io::Error::other("the process has no pid"))?;
    let mut group = Group {
        pgid,
        child: Some(child),
        settled: false,
        tracked,
        _live: live::Live::new(),
    };

    let mut collector = Collector::new(sink, spec.max_output_bytes, &spec.redactor);
    let (mut out_buf, mut err_buf) = (vec![0u8; READ_BUF], vec![0u8; READ_BUF]);
    let (mut out_open, mut err_open) = (true, true);
    let mut status: Option<ExitStatus> = None;
    let (mut timed_out, mut cancelled) = (false, false);
    let mut phase = Phase::Running;
    let mut deadline = tokio::time::Instant::now() + spec.timeout;
    loop {
        if status.is_some() && !out_open && !err_open {
            break;
        }
        tokio::select! {
            read = stdout.read(&mut out_buf), if out_open => match read {
                Ok(n @ 1..) => collector.push(OutputStream::Stdout, &out_buf[..n]),
                _ => out_open = false,
            },
            read = stderr.read(&mut err_buf), if err_open => match read {
                Ok(n @ 1..) => collector.push(OutputStream::Stderr, &err_buf[..n]),
                _ => err_open = false,
            },
            waited = wait_child(&mut group.child), if status.is_none() => {
                status = Some(waited?);
                if phase == Phase::Running {
                    phase = Phase::Draining;
                    deadline = tokio::time::Instant::now() + EXIT_GRACE;
                }
            }
            () = sleep_until(deadline) => {
                if phase != Phase::Running {
                    break;
                }
                timed_out = true;
                signal_group(pgid, Signal::SIGTERM);
                phase = Phase::Terminating;
                deadline = tokio::time::Instant::now() + TERM_GRACE;
            }
            () = cancel.cancelled(), if phase == Phase::Running => {
                cancelled = true;
                signal_group(pgid, Signal::SIGTERM);
                phase = Phase::Terminating;
                deadline = tokio::time::Instant::now() + TERM_GRACE;
            }
        }
    }
    // Whatever is left of the group (grandchildren in the background, a child that ignored
    // SIGTERM) must not outlive the call.
    signal_group(pgid, Signal::SIGKILL);
    if status.is_none() {
        status = tokio::time::timeout(REAP_WAIT, wait_child(&mut group.child))
            .await
            .ok()
            .and_then(Result::ok);
    }
    // The entry goes when the group is confirmed gone (a namespace takes a moment to empty).
    confirm_gone(group.tracked.as_ref()).await;
    group.settled = true;
    collector.flush(OutputStream::Stdout);
    collector.flush(OutputStream::Stderr);
    let (output, omitted_bytes) = collector.capture.finish();
    let exit_code = status.and_then(|s| s.code());
    let mut refused = None;
    if spec.sandbox.is_some()
        && let Some(line) = output.strip_prefix(REFUSAL_PREFIX)
    {
        let line = line.lines().next().unwrap_or_default();
        match (exit_code, line.strip_prefix(EXEC_FAILED)) {
            (Some(REFUSED_EXIT), _) => refused = Some(line.to_owned()),
            // The helper could not exec the program: the same error as a failed spawn.
            (Some(127), Some(_)) => return Err(io::Error::new(io::ErrorKind::NotFound, line)),
            (Some(126), Some(_)) => {
                return Err(io::Error::new(io::ErrorKind::PermissionDenied, line));
            }
            _ => {}
        }
    }
    Ok(ProcessOutcome {
        exit_code,
        signal: status.and_then(|s| s.signal()),
        output,
        omitted_bytes,
        timed_out,
        cancelled,
        duration: started.elapsed(),
        refused,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Until the child exits or the timeout passes.
    Running,
    /// The child exited; reading what is still buffered until EOF or a short grace.
    Draining,
    /// SIGTERM sent; SIGKILL follows at the deadline.
    Terminating,
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    type Chunks = Arc<Mutex<Vec<(OutputStream, String)>>>;

    fn bash(script: &str) -> ProcessSpec {
        ProcessSpec {
            program: "bash".into(),
            args: vec!["-c".into(), script.into()],
            cwd: std::env::temp_dir(),
            env: vec![("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into())],
            timeout: Duration::from_secs(20),
            max_output_bytes: 32 * 1024,
            sandbox: None,
            redactor: Redactor::default(),
        }
    }

    /// Runs `spec`, recording what was streamed.
    async fn go(spec: ProcessSpec) -> (ProcessOutcome, Vec<(OutputStream, String)>) {
        let chunks = Chunks::default();
        let seen = chunks.clone();
        let sink = OutputSink::new(move |s, t| seen.lock().unwrap().push((s, t.to_owned())));
        let out = run(spec, &sink, &CancellationToken::new()).await.unwrap();
        (out, chunks.lock().unwrap().clone())
    }

    /// Runs a script that writes a background grandchild's pid to `pid` in its cwd.
    async fn with_grandchild(script: &str, timeout: Duration) -> (ProcessOutcome, String) {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = bash(script);
        (spec.cwd, spec.timeout) = (dir.path().to_path_buf(), timeout);
        let (out, _) = go(spec).await;
        (
            out,
            std::fs::read_to_string(dir.path().join("pid")).unwrap(),
        )
    }

    /// Gone: /proc has no entry for it, or it is a zombie waiting for its reaper.
    async fn assert_gone(pid: &str) {
        for _ in 0..50 {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())) else {
                return;
            };
            if stat.rsplit(") ").next().unwrap().starts_with('Z') {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("process {pid} outlived the call");
    }

    #[tokio::test]
    async fn chunks_stream_in_arrival_order_across_both_pipes() {
        let (out, chunks) = go(bash(
            "echo a; sleep 0.2; echo b >&2; sleep 0.2; echo c; exit 4",
        ))
        .await;
        assert_eq!(out.output, "a\nb\nc\n");
        let ended = (
            out.exit_code,
            out.signal,
            out.omitted_bytes,
            out.timed_out,
            out.cancelled,
        );
        assert_eq!(ended, (Some(4), None, 0, false, false));
        use OutputStream::{Stderr, Stdout};
        let expected = [(Stdout, "a\n"), (Stderr, "b\n"), (Stdout, "c\n")];
        assert_eq!(chunks, expected.map(|(s, t)| (s, t.to_owned())));
    }

    #[tokio::test]
    async fn a_character_split_across_reads_is_never_split_across_chunks() {
        // 日 is E6 97 A5; the pipe delivers it in two reads.
        let (out, chunks) = go(bash(r"printf 'x\xe6\x97'; sleep 0.3; printf '\xa5\n'")).await;
        assert_eq!(out.output, "x日\n");
        assert!(chunks.len() == 2 && chunks.iter().all(|(_, t)| !t.contains('\u{fffd}')));
    }

    #[tokio::test]
    async fn a_flood_keeps_head_and_tail_in_bounded_memory() {
        let mut spec = bash("echo first; yes | head -c 20000000; echo; echo last");
        spec.max_output_bytes = 10_000;
        let (out, chunks) = go(spec).await;
        assert_eq!(out.exit_code, Some(0));
        assert!(out.output.len() <= 10_000, "{}", out.output.len());
        assert!(out.output.starts_with("first\ny\n") && out.output.ends_with("y\n\nlast\n"));
        let marker = format!("[… {} bytes omitted …]\n", out.omitted_bytes);
        let kept = out.output.replace(&marker, "").len() as u64;
        assert_eq!(kept + out.omitted_bytes, 20_000_000 + 12);
        let streamed: usize = chunks.iter().map(|(_, t)| t.len()).sum();
        assert!(
            streamed <= STREAM_LIMIT + READ_BUF + STREAM_STOPPED.len(),
            "{streamed}"
        );
        assert_eq!(chunks.last().unwrap().1, STREAM_STOPPED);
    }

    #[tokio::test]
    async fn a_timeout_kills_the_whole_group() {
        let script = "sleep 300 & echo $! > pid; echo started; sleep 300";
        let (out, pid) = with_grandchild(script, Duration::from_millis(500)).await;
        assert!(out.timed_out && !out.cancelled);
        assert_eq!(
            (out.output.as_str(), out.exit_code, out.signal),
            ("started\n", None, Some(15))
        );
        assert_gone(&pid).await;
    }

    #[tokio::test]
    async fn a_background_grandchild_holding_the_pipes_does_not_hang_the_call() {
        let script = "sleep 100 & echo $! > pid; echo hi";
        let (out, pid) = with_grandchild(script, Duration::from_secs(20)).await;
        assert_eq!((out.output.as_str(), out.exit_code), ("hi\n", Some(0)));
        // Not held until the timeout by the grandchild's copy of the pipes.
        assert!(!out.timed_out);
        assert_gone(&pid).await;
    }

    #[tokio::test]
    async fn cancel_terminates_the_group() {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = bash("sleep 300 & echo $! > pid; echo going; sleep 300");
        spec.cwd = dir.path().to_path_buf();
        let cancel = CancellationToken::new();
        let trigger = cancel.clone();
        // Cancelled once the process is under way, as a person would.
        let sink = OutputSink::new(move |_, text| {
            if text.contains("going") {
                trigger.cancel();
            }
        });
        let out = run(spec, &sink, &cancel).await.unwrap();
        assert!(out.cancelled && !out.timed_out && out.output == "going\n");
        assert_gone(&std::fs::read_to_string(dir.path().join("pid")).unwrap()).await;
    }

    #[tokio::test]
    async fn dropping_the_run_kills_the_group() {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = bash("sleep 300 & echo $! > pid; sleep 300");
        spec.cwd = dir.path().to_path_buf();
        let sink = OutputSink::none();
        let cancel = CancellationToken::new();
        let abandoned = tokio::time::timeout(Duration::from_millis(500), run(spec, &sink, &cancel));
        assert!(abandoned.await.is_err());
        assert_gone(&std::fs::read_to_string(dir.path().join("pid")).unwrap()).await;
    }

    #[tokio::test]
    async fn a_missing_program_is_an_error_and_the_environment_is_exact() {
        let mut spec = bash("");
        spec.program = "corral-no-such-program".into();
        let err = run(spec.clone(), &OutputSink::none(), &CancellationToken::new()).await;
        assert_eq!(err.unwrap_err().kind(), io::ErrorKind::NotFound);
        (spec.program, spec.args) = ("/usr/bin/env".into(), Vec::new());
        spec.env = vec![("FOO".into(), "bar baz".into()), ("ZED".into(), "1".into())];
        assert_eq!(go(spec).await.0.output, "FOO=bar baz\nZED=1\n");
    }

    /// A stand-in for `corral __sandbox-exec`: `script` runs with the helper's arguments.
    fn fake_helper(dir: &std::path::Path, script: &str) -> ProcessSpec {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join("helper");
        std::fs::write(&path, format!("#!/bin/bash\n{script}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut sandbox = SandboxSpec::new(
            super::super::spec::SandboxMode::Strict,
            super::super::spec::NetworkMode::Off,
        );
        sandbox.helper = Some(path);
        let mut spec = bash("echo inside");
        spec.sandbox = Some(sandbox);
        spec
    }

    #[tokio::test]
    async fn the_helper_runs_the_program_after_its_arguments_or_refuses() {
        let dir = tempfile::tempdir().unwrap();
        // Drops everything up to `--`, then becomes the program, as the real helper does.
        let through = fake_helper(
            dir.path(),
            "echo \"$1 $3 $5\"; while [ \"$1\" != -- ]; do shift; done; shift; exec \"$@\"",
        );
        let (out, _) = go(through).await;
        assert_eq!(out.output, "__sandbox-exec strict off\ninside\n");
        assert_eq!(out.refused, None);
        let refusing = fake_helper(
            dir.path(),
            "echo 'corral sandbox: cannot enforce the strict sandbox: no landlock' >&2; exit 125",
        );
        let (out, _) = go(refusing).await;
        let why = "cannot enforce the strict sandbox: no landlock";
        assert_eq!(out.refused.as_deref(), Some(why));
        let missing = fake_helper(
            dir.path(),
            "echo 'corral sandbox: cannot run nope: No such file or directory' >&2; exit 127",
        );
        let err = run(missing, &OutputSink::none(), &CancellationToken::new()).await;
        assert_eq!(err.unwrap_err().kind(), io::ErrorKind::NotFound);
    }
}
