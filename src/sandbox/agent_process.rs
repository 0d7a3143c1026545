//! A long-lived child (an external agent, an MCP server): its own process group (so what it
//! starts dies with it, and the descendants that left the group are found through /proc and
//! killed as well), tracked in pids.json for reaping, stderr kept in a file beside the
//! session's event log and its last lines in memory for the error a crash reports.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};

use super::reaper;

/// How many stderr lines a crash report carries.
const STDERR_TAIL: usize = 20;

/// What to start.
#[derive(Debug, Clone)]
pub struct Launch {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    /// Set on top of the inherited environment.
    pub env: Vec<(String, String)>,
    /// Variables removed from the inherited environment.
    pub env_remove: Vec<String>,
    /// Nothing is inherited: `env` is the whole environment (a sandboxed MCP server).
    pub env_clear: bool,
    /// `<log_dir>/<session>.stderr.log`; `None`: stderr goes to tracing only.
    pub stderr_log: Option<PathBuf>,
    /// Names the process in pids.json and in messages (`claude`, `codex`, `acp`).
    pub kind: &'static str,
    /// What messages call it; `None`: the program's path. A confined server's program is the
    /// sandbox helper, which says nothing to whoever reads its crash report.
    pub display_name: Option<String>,
}

pub struct AgentProcess {
    child: Child,
    pgid: i32,
    name: String,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    _tracked: Option<reaper::TrackGuard>,
}

/// The pipes the backend talks over.
pub struct Pipes {
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
}

#[derive(Debug, thiserror::Error)]
#[error("cannot start {program}: {source}")]
pub struct SpawnError {
    program: String,
    source: std::io::Error,
}

impl AgentProcess {
    pub fn spawn(launch: &Launch) -> Result<(AgentProcess, Pipes), SpawnError> {
        let name = launch
            .display_name
            .clone()
            .unwrap_or_else(|| launch.program.display().to_string());
        let mut command = tokio::process::Command::new(&launch.program);
        command
            .args(&launch.args)
            .current_dir(&launch.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        if launch.env_clear {
            command.env_clear();
        }
        for name in &launch.env_remove {
            command.env_remove(name);
        }
        command.envs(launch.env.iter().map(|(k, v)| (k, v)));
        let mut child = command.spawn().map_err(|source| SpawnError {
            program: name.clone(),
            source,
        })?;
        let pid = child.id().unwrap_or_default();
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(SpawnError {
                program: name,
                source: std::io::Error::other("its pipes were not set up"),
            });
        };
        let stderr_tail = Arc::new(Mutex::new(VecDeque::with_capacity(STDERR_TAIL)));
        tokio::spawn(keep_stderr(
            stderr,
            stderr_tail.clone(),
            launch.stderr_log.clone(),
            launch.kind,
        ));
        Ok((
            AgentProcess {
                child,
                pgid: pid as i32,
                name,
                stderr_tail,
                _tracked: reaper::track(pid, pid, launch.kind),
            },
            Pipes { stdin, stdout },
        ))
    }

    /// The last stderr lines, oldest first.
    pub fn stderr_tail(&self) -> String {
        let tail = self.stderr_tail.lock().unwrap_or_else(|p| p.into_inner());
        tail.iter().cloned().collect::<Vec<_>>().join("\n")
    }

    /// The process has exited: its status.
    pub fn try_status(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Resolves when the process has exited (cancel-safe).
    pub async fn exited(&mut self) {
        let _ = self.child.wait().await;
    }

    /// Waits for the exit (after its stdout closed, say) for at most `grace`.
    pub async fn wait_exit(&mut self, grace: Duration) -> Option<ExitStatus> {
        tokio::time::timeout(grace, self.child.wait())
            .await
            .ok()
            .and_then(Result::ok)
    }

    /// "claude exited with exit status: 3; its last stderr lines: …" — for a crash.
    pub async fn crash_report(&mut self) -> String {
        // stderr may still be draining: a moment for the last lines to arrive.
        let status = self.wait_exit(Duration::from_secs(2)).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        let status = status.map_or("is not answering".to_string(), |s| format!("exited ({s})"));
        let tail = self.stderr_tail();
        if tail.is_empty() {
            format!("{} {status}", self.name)
        } else {
            format!("{} {status}; its last stderr lines:\n{tail}", self.name)
        }
    }

    /// Stops the whole group: SIGTERM, a moment's grace, then SIGKILL; then whatever the
    /// agent started that left its group.
    pub async fn stop(&mut self, stdin: Option<ChildStdin>) {
        if let Some(mut stdin) = stdin {
            let _ = stdin.shutdown().await;
        }
        // Taken first: once the agent is gone its children are the init process's, and
        // nothing leads to them any more.
        let family = descendants(self.pgid);
        if self.pgid > 1 {
            let group = Pid::from_raw(self.pgid);
            let _ = killpg(group, Signal::SIGTERM);
            if self.wait_exit(Duration::from_secs(2)).await.is_none() {
                let _ = killpg(group, Signal::SIGKILL);
                let _ = self.wait_exit(Duration::from_secs(2)).await;
            } else {
                // The leader is gone; anything left in its group goes too.
                let _ = killpg(group, Signal::SIGKILL);
            }
        }
        kill_all(&family);
    }
}

/// Every live process below `pid`, with its start time, as /proc shows them now. An agent's
/// own children may leave its process group (claude starts each shell command in a session
/// of its own), so killing the group alone would leave them running.
fn descendants(pid: i32) -> Vec<(u32, u64)> {
    let Ok(root) = u32::try_from(pid) else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let parents: Vec<(u32, u32)> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|child| Some((child, parent_of(child)?)))
        .collect();
    let mut found: Vec<u32> = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        let children: Vec<u32> = parents
            .iter()
            .filter(|(c, p)| *p == parent && !found.contains(c))
            .map(|(c, _)| *c)
            .collect();
        found.extend(&children);
        frontier.extend(children);
    }
    found
        .into_iter()
        .filter_map(|child| Some((child, reaper::start_time(child)?)))
        .collect()
}

/// Field 4 of `/proc/<pid>/stat`, after the command name (which may hold spaces and `)`).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// SIGKILL for each process still alive as the same process (its start time unchanged: a
/// pid the kernel reused is spared).
fn kill_all(family: &[(u32, u64)]) {
    for &(pid, start) in family {
        if reaper::start_time(pid) == Some(start)
            && let Ok(raw) = i32::try_from(pid)
        {
            let _ = nix::sys::signal::kill(Pid::from_raw(raw), Signal::SIGKILL);
        }
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        if self.pgid > 1 && self.child.try_wait().ok().flatten().is_none() {
            let family = descendants(self.pgid);
            let _ = killpg(Pid::from_raw(self.pgid), Signal::SIGKILL);
            kill_all(&family);
        }
    }
}

/// A stderr line longer than this is cut (the rest of it is skipped): a process writing
/// without newlines must not grow corral's memory.
const MAX_STDERR_LINE: usize = 4096;
/// The stderr log stops growing here; a last line says so.
const MAX_STDERR_LOG: u64 = 16 * 1024 * 1024;

async fn keep_stderr(
    stderr: tokio::process::ChildStderr,
    tail: Arc<Mutex<VecDeque<String>>>,
    log: Option<PathBuf>,
    kind: &'static str,
) {
    let mut file = match &log {
        Some(path) => open_log(path).await,
        None => None,
    };
    let mut logged: u64 = 0;
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        line.clear();
        match read_capped_line(&mut reader, &mut line, MAX_STDERR_LINE).await {
            Ok(false) | Err(_) => break,
            Ok(true) => {}
        }
        let text = String::from_utf8_lossy(&line).into_owned();
        tracing::debug!(target: "corral::agent_stderr", agent = kind, "{text}");
        if let Some(f) = file.as_mut()
            && logged < MAX_STDERR_LOG
        {
            let entry = format!("{text}\n");
            logged += entry.len() as u64;
            let _ = f.write_all(entry.as_bytes()).await;
            if logged >= MAX_STDERR_LOG {
                let _ = f
                    .write_all(b"[corral: log full; later lines not kept]\n")
                    .await;
            }
        }
        let mut tail = tail.lock().unwrap_or_else(|p| p.into_inner());
        if tail.len() == STDERR_TAIL {
            tail.pop_front();
        }
        tail.push_back(text);
    }
    if let Some(mut file) = file {
        let _ = file.flush().await;
    }
}

/// Reads one line (without its newline) into `line`, keeping at most `max` bytes of it and
/// skipping the rest. `Ok(false)`: end of stream with nothing read.
pub async fn read_capped_line<R: tokio::io::AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<bool> {
    use tokio::io::AsyncBufReadExt as _;
    let mut any = false;
    loop {
        let chunk = reader.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(any);
        }
        any = true;
        let (used, done) = match memchr::memchr(b'\n', chunk) {
            Some(at) => (at + 1, true),
            None => (chunk.len(), false),
        };
        let content = &chunk[..if done { used - 1 } else { used }];
        let room = max.saturating_sub(line.len());
        line.extend_from_slice(&content[..content.len().min(room)]);
        reader.consume(used);
        if done {
            return Ok(true);
        }
    }
}

async fn open_log(path: &Path) -> Option<tokio::fs::File> {
    match tokio::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .await
    {
        Ok(file) => Some(file),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot keep the agent's stderr");
            None
        }
    }
}
