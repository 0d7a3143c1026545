//! Running one tool process: its own process group, exactly the environment it is given,
//! output streamed as it arrives and kept with bounded memory (head and tail), and a timeout or
//! cancellation that takes down the whole group, grandchildren included.

use std::collections::VecDeque;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};
use tokio::time::sleep_until;
use tokio_util::sync::CancellationToken;

use crate::event::OutputStream;
use crate::tool::OutputSink;

/// Between SIGTERM and SIGKILL: time for the group to clean up after itself.
const TERM_GRACE: Duration = Duration::from_secs(2);
/// After the direct child exits, how long output still in the pipes is read. Background
/// grandchildren may hold the pipes open forever; the call must not wait for them.
const EXIT_GRACE: Duration = Duration::from_millis(200);
/// Reaping a SIGKILLed child; only a process stuck in the kernel takes longer.
const REAP_WAIT: Duration = Duration::from_secs(1);
/// Per call, streamed chunks stop after this much so a flood doesn't flood the event stream.
const STREAM_LIMIT: usize = 1 << 20;
const STREAM_STOPPED: &str =
    "\n[… output continues; streaming stopped, the result keeps head and tail]\n";
const READ_BUF: usize = 16 * 1024;
/// Room kept for the omission marker so the joined output stays within `max_output_bytes`.
const MARKER_RESERVE: usize = 48;
/// How far a cut may move to land on a line break instead of mid-line.
const LINE_SNAP: usize = 200;

#[derive(Debug, Clone)]
pub(crate) struct ProcessSpec {
    pub program: String,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    /// The complete environment: nothing is inherited.
    pub env: Vec<(String, String)>,
    pub timeout: Duration,
    pub max_output_bytes: usize,
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
    let mut command = Command::new(&spec.program);
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
    };

    let mut collector = Collector::new(sink, spec.max_output_bytes);
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
    group.settled = true;
    collector.flush(OutputStream::Stdout);
    collector.flush(OutputStream::Stderr);
    let (output, omitted_bytes) = collector.capture.finish();
    Ok(ProcessOutcome {
        exit_code: status.and_then(|s| s.code()),
        signal: status.and_then(|s| s.signal()),
        output,
        omitted_bytes,
        timed_out,
        cancelled,
        duration: started.elapsed(),
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

async fn wait_child(child: &mut Option<Child>) -> io::Result<ExitStatus> {
    match child {
        Some(child) => child.wait().await,
        None => std::future::pending().await,
    }
}

fn signal_group(pgid: Pid, signal: Signal) {
    // Never 0 or 1: killpg(0) would signal our own group, and 1 is init's.
    if pgid.as_raw() > 1 {
        // ESRCH (the group is already gone) is the usual and expected failure.
        let _ = killpg(pgid, signal);
    }
}

/// The child's process group; if the run is abandoned (its future dropped, e.g. the turn was
/// cancelled), the group is terminated in the background.
struct Group {
    pgid: Pid,
    child: Option<Child>,
    settled: bool,
}

impl Drop for Group {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        let pgid = self.pgid;
        signal_group(pgid, Signal::SIGTERM);
        match (self.child.take(), tokio::runtime::Handle::try_current()) {
            (Some(mut child), Ok(handle)) => {
                handle.spawn(async move {
                    // Holding the unreaped child keeps the group id from being reused; the
                    // guard kills the group even if the runtime shuts down meanwhile.
                    let _kill = KillOnDrop(pgid);
                    let _ = tokio::time::timeout(TERM_GRACE, child.wait()).await;
                });
            }
            _ => signal_group(pgid, Signal::SIGKILL),
        }
    }
}

struct KillOnDrop(Pid);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        signal_group(self.0, Signal::SIGKILL);
    }
}

/// Decodes, captures and streams the output of both pipes.
struct Collector<'a> {
    sink: &'a OutputSink,
    capture: Capture,
    /// Per stream (stdout, stderr): the bytes of a character split across reads.
    carry: [Vec<u8>; 2],
    streamed: usize,
    stream_stopped: bool,
}

impl<'a> Collector<'a> {
    fn new(sink: &'a OutputSink, max_output_bytes: usize) -> Self {
        Collector {
            sink,
            capture: Capture::new(max_output_bytes),
            carry: [Vec::new(), Vec::new()],
            streamed: 0,
            stream_stopped: false,
        }
    }

    fn push(&mut self, stream: OutputStream, bytes: &[u8]) {
        let text = decode(&mut self.carry[index(stream)], bytes);
        self.accept(stream, &text);
    }

    /// At the end, an incomplete character left over is shown as U+FFFD.
    fn flush(&mut self, stream: OutputStream) {
        let rest = std::mem::take(&mut self.carry[index(stream)]);
        if !rest.is_empty() {
            self.accept(stream, &String::from_utf8_lossy(&rest));
        }
    }

    fn accept(&mut self, stream: OutputStream, text: &str) {
        if text.is_empty() {
            return;
        }
        self.capture.push(text);
        if self.streamed < STREAM_LIMIT {
            self.streamed += text.len();
            self.sink.emit(stream, text);
        } else if !self.stream_stopped {
            self.stream_stopped = true;
            self.sink.emit(stream, STREAM_STOPPED);
        }
    }
}

fn index(stream: OutputStream) -> usize {
    match stream {
        OutputStream::Stdout => 0,
        OutputStream::Stderr => 1,
    }
}

/// Decodes `carry + bytes` lossily, keeping an incomplete character at the end in `carry`
/// for the next read, so no character is split (and mangled) between two chunks.
fn decode(carry: &mut Vec<u8>, bytes: &[u8]) -> String {
    let mut data = std::mem::take(carry);
    data.extend_from_slice(bytes);
    let keep = incomplete_tail(&data);
    *carry = data.split_off(data.len() - keep);
    match String::from_utf8(data) {
        Ok(text) => text,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

/// Length of a UTF-8 sequence started but not finished at the end of `data` (0 to 3).
fn incomplete_tail(data: &[u8]) -> usize {
    for back in 1..=data.len().min(3) {
        let byte = data[data.len() - back];
        if byte & 0xC0 == 0x80 {
            continue; // a continuation byte: the lead is further back
        }
        let needed = match byte {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1, // ASCII, or invalid: lossy decoding replaces it now
        };
        return if needed > back { back } else { 0 };
    }
    0
}

/// The combined output in bounded memory: the first ~60% kept as it came, then a rolling
/// window of the last ~40%; what falls between is counted.
struct Capture {
    head: String,
    head_cap: usize,
    /// Once output went past the head, the head is closed so order is kept.
    head_closed: bool,
    tail: VecDeque<u8>,
    tail_cap: usize,
    omitted: u64,
}

impl Capture {
    fn new(max_bytes: usize) -> Self {
        let budget = max_bytes.saturating_sub(MARKER_RESERVE);
        let head_cap = budget * 3 / 5;
        Capture {
            head: String::new(),
            head_cap,
            head_closed: false,
            tail: VecDeque::new(),
            tail_cap: budget - head_cap,
            omitted: 0,
        }
    }

    fn push(&mut self, mut text: &str) {
        if !self.head_closed {
            let take = floor_boundary(text, self.head_cap - self.head.len());
            self.head.push_str(&text[..take]);
            text = &text[take..];
            if text.is_empty() {
                return;
            }
            self.head_closed = true;
        }
        self.tail.extend(text.as_bytes());
        let excess = self.tail.len().saturating_sub(self.tail_cap);
        self.tail.drain(..excess);
        self.omitted += excess as u64;
    }

    /// The output, with `[… N bytes omitted …]` on its own line where bytes were dropped.
    fn finish(self) -> (String, u64) {
        let Capture {
            mut head,
            tail,
            mut omitted,
            ..
        } = self;
        let tail = Vec::from(tail);
        if omitted == 0 {
            // Nothing dropped: the tail continues the head on a character boundary.
            head.push_str(&String::from_utf8_lossy(&tail));
            return (head, 0);
        }
        // The rolling window may begin inside a character.
        let start = tail.iter().take_while(|b| **b & 0xC0 == 0x80).count();
        omitted += start as u64;
        let tail = String::from_utf8_lossy(&tail[start..]);
        let mut tail = tail.as_ref();
        // Whole lines read better: snap both cuts to a nearby line break.
        if let Some(nl) = head.rfind('\n')
            && head.len() - (nl + 1) <= LINE_SNAP
        {
            omitted += (head.len() - (nl + 1)) as u64;
            head.truncate(nl + 1);
        }
        if let Some(nl) = tail.find('\n')
            && nl < LINE_SNAP
            && nl + 1 < tail.len()
        {
            omitted += (nl + 1) as u64;
            tail = &tail[nl + 1..];
        }
        let sep = if head.is_empty() || head.ends_with('\n') {
            ""
        } else {
            "\n"
        };
        (
            format!("{head}{sep}[… {omitted} bytes omitted …]\n{tail}"),
            omitted,
        )
    }
}

fn floor_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
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
        let mut carry = Vec::new();
        assert_eq!(decode(&mut carry, b"a\xf0\x9f"), "a");
        assert_eq!(decode(&mut carry, b"\xa6"), "");
        assert_eq!(decode(&mut carry, b"\x80\xffz"), "🦀\u{fffd}z");
        assert!(carry.is_empty());
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
        assert!(out.duration < Duration::from_secs(3), "{:?}", out.duration);
        assert_gone(&pid).await;
    }

    #[tokio::test]
    async fn a_background_grandchild_holding_the_pipes_does_not_hang_the_call() {
        let script = "sleep 100 & echo $! > pid; echo hi";
        let (out, pid) = with_grandchild(script, Duration::from_secs(20)).await;
        assert_eq!((out.output.as_str(), out.exit_code), ("hi\n", Some(0)));
        assert!(!out.timed_out && out.duration < Duration::from_secs(2));
        assert_gone(&pid).await;
    }

    #[tokio::test]
    async fn cancel_terminates_the_group() {
        let cancel = CancellationToken::new();
        let trigger = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            trigger.cancel();
        });
        let sink = OutputSink::none();
        let out = run(bash("echo going; sleep 30"), &sink, &cancel)
            .await
            .unwrap();
        assert!(out.cancelled && !out.timed_out && out.output == "going\n");
        assert!(out.duration < Duration::from_secs(3), "{:?}", out.duration);
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

    #[test]
    fn a_short_output_is_kept_whole_and_a_long_one_cut_on_lines() {
        let mut small = Capture::new(1000);
        small.push("héllo\n");
        assert_eq!(small.finish(), ("héllo\n".to_owned(), 0));
        let mut big = Capture::new(1000);
        (0..1000).for_each(|i| big.push(&format!("line {i:04}\n")));
        let (out, omitted) = big.finish();
        assert!(out.starts_with("line 0000\n") && out.ends_with("line 0999\n"));
        assert!(out.len() <= 1000 && out.lines().all(|l| l.len() == 9 || l.starts_with("[…")));
        let marker = format!("[… {omitted} bytes omitted …]\n");
        assert_eq!(out.replace(&marker, "").len() as u64 + omitted, 10_000);
    }
}
