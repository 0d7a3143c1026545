//! Runs the `corral` binary in a hermetic environment: a temp home with its own XDG dirs.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tempfile::TempDir;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

/// Default limit for one run of the binary.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// A temp home holding `cache/ config/ data/ work/`; removed on drop.
pub struct Harness {
    pub home: TempDir,
}

impl Default for Harness {
    fn default() -> Self {
        Harness::new()
    }
}

impl Harness {
    pub fn new() -> Harness {
        let home = tempfile::Builder::new()
            .prefix("corral-it-")
            .tempdir()
            .unwrap_or_else(|e| panic!("harness: create temp home: {e}"));
        for dir in ["cache", "config", "data", "work"] {
            let path = home.path().join(dir);
            std::fs::create_dir_all(&path)
                .unwrap_or_else(|e| panic!("harness: create {}: {e}", path.display()));
        }
        Harness { home }
    }

    pub fn home_dir(&self) -> PathBuf {
        self.home.path().to_path_buf()
    }

    /// A working directory for `-C`; also the process's current directory.
    pub fn work(&self) -> PathBuf {
        self.home.path().join("work")
    }

    /// `XDG_CONFIG_HOME`.
    pub fn config_dir(&self) -> PathBuf {
        self.home.path().join("config")
    }

    /// `XDG_CACHE_HOME`.
    pub fn cache_dir(&self) -> PathBuf {
        self.home.path().join("cache")
    }

    /// `XDG_DATA_HOME`.
    pub fn data_dir(&self) -> PathBuf {
        self.home.path().join("data")
    }

    /// Writes `config_dir/corral/config.toml`.
    pub fn write_config(&self, toml: &str) {
        let dir = self.config_dir().join("corral");
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("harness: create {}: {e}", dir.display()));
        let path = dir.join("config.toml");
        std::fs::write(&path, toml)
            .unwrap_or_else(|e| panic!("harness: write {}: {e}", path.display()));
    }

    /// A command for the `corral` binary with the hermetic environment.
    pub fn corral(&self) -> Cmd {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_corral"));
        let path =
            std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
        cmd.env_clear()
            .env("PATH", path)
            .env("HOME", self.home.path())
            .env("XDG_CACHE_HOME", self.cache_dir())
            .env("XDG_CONFIG_HOME", self.config_dir())
            .env("XDG_DATA_HOME", self.data_dir())
            .env("NO_COLOR", "1")
            .current_dir(self.work())
            .kill_on_drop(true);
        Cmd {
            cmd,
            args: Vec::new(),
            stdin: None,
            live_stdin: false,
            timeout: RUN_TIMEOUT,
        }
    }

    /// `cache_dir/corral/agents/*.events.jsonl`, sorted.
    pub fn event_logs(&self) -> Vec<PathBuf> {
        let dir = self.cache_dir().join("corral").join("agents");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return Vec::new();
        };
        let mut logs: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.ends_with(".events.jsonl"))
            })
            .collect();
        logs.sort();
        logs
    }
}

/// Builder around `tokio::process::Command` for the binary.
pub struct Cmd {
    cmd: Command,
    args: Vec<String>,
    stdin: Option<String>,
    live_stdin: bool,
    timeout: Duration,
}

impl Cmd {
    pub fn arg(mut self, arg: impl AsRef<str>) -> Cmd {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Cmd
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    pub fn env(mut self, key: &str, value: impl AsRef<std::ffi::OsStr>) -> Cmd {
        self.cmd.env(key, value);
        self
    }

    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Cmd {
        self.cmd.current_dir(dir);
        self
    }

    /// Text written to stdin, which is then closed (default: stdin is null).
    pub fn stdin_text(mut self, text: &str) -> Cmd {
        self.stdin = Some(text.to_owned());
        self
    }

    /// Keeps stdin open for [`Running::send_line`] (for `--approve-stdin` and the like).
    pub fn live_stdin(mut self) -> Cmd {
        self.live_stdin = true;
        self
    }

    /// Overrides the 60 s limit.
    pub fn timeout(mut self, timeout: Duration) -> Cmd {
        self.timeout = timeout;
        self
    }

    /// Runs to completion; on timeout kills the process and fails the test.
    pub async fn run(self) -> Outcome {
        self.spawn().await.wait().await
    }

    /// Starts the process (for signal tests).
    pub async fn spawn(mut self) -> Running {
        let desc = format!("corral {}", self.args.join(" "));
        self.cmd
            .args(&self.args)
            .stdin(if self.stdin.is_some() || self.live_stdin {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = self
            .cmd
            .spawn()
            .unwrap_or_else(|e| panic!("harness: spawn {desc}: {e}"));
        let mut live = None;
        if self.live_stdin {
            live = child.stdin.take();
        } else if let (Some(text), Some(mut stdin)) = (self.stdin, child.stdin.take()) {
            tokio::spawn(async move {
                // The binary may exit without reading everything; a broken pipe is fine.
                let _ = stdin.write_all(text.as_bytes()).await;
            });
        }
        let pid = child
            .id()
            .unwrap_or_else(|| panic!("harness: {desc} has no pid"));
        let stdout = Capture::start(child.stdout.take());
        let stderr = Capture::start(child.stderr.take());
        Running {
            child,
            pid,
            desc,
            timeout: self.timeout,
            stdout,
            stderr,
            stdin: live,
        }
    }
}

/// Collects a pipe in the background; keeps partial output if the pipe never closes.
struct Capture {
    buf: Arc<Mutex<Vec<u8>>>,
    task: JoinHandle<()>,
}

impl Capture {
    fn start<R: AsyncRead + Unpin + Send + 'static>(pipe: Option<R>) -> Capture {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let sink = buf.clone();
        let task = tokio::spawn(async move {
            let Some(mut pipe) = pipe else { return };
            let mut chunk = vec![0u8; 8192];
            while let Ok(n @ 1..) = pipe.read(&mut chunk).await {
                sink.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .extend_from_slice(&chunk[..n]);
            }
        });
        Capture { buf, task }
    }

    /// Waits briefly for EOF (a grandchild may hold the pipe), then returns what was read.
    async fn finish(self) -> String {
        let task = self.task;
        let abort = task.abort_handle();
        if tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .is_err()
        {
            abort.abort();
        }
        let bytes = self.buf.lock().unwrap_or_else(|p| p.into_inner()).clone();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// A started binary.
pub struct Running {
    child: Child,
    pid: u32,
    desc: String,
    timeout: Duration,
    stdout: Capture,
    stderr: Capture,
    stdin: Option<tokio::process::ChildStdin>,
}

impl Running {
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Writes one line to the live stdin (see [`Cmd::live_stdin`]).
    pub async fn send_line(&mut self, line: &str) {
        let stdin = self
            .stdin
            .as_mut()
            .unwrap_or_else(|| panic!("harness: {} has no live stdin", self.desc));
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap_or_else(|e| panic!("harness: write to {}: {e}", self.desc));
        let _ = stdin.flush().await;
    }

    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// The NDJSON events printed so far.
    pub fn events_so_far(&self) -> Vec<Value> {
        let bytes = self
            .stdout
            .buf
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        String::from_utf8_lossy(&bytes)
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// Waits (up to 20 s) for the `n`-th (0-based) event matching `pred` on stdout.
    pub async fn wait_for_event(&self, n: usize, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(found) = self.events_so_far().into_iter().filter(|e| pred(e)).nth(n) {
                return found;
            }
            if tokio::time::Instant::now() > deadline {
                let stderr = String::from_utf8_lossy(
                    &self.stderr.buf.lock().unwrap_or_else(|p| p.into_inner()),
                )
                .into_owned();
                panic!(
                    "harness: no matching event from {} within 20 s; events: {:?}\n--- stderr\n{stderr}",
                    self.desc,
                    self.events_so_far()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Sends SIGINT (`kill -INT <pid>`).
    pub async fn sigint(&self) {
        self.signal("INT").await;
    }

    /// Sends a signal by name (`INT`, `TERM`, …) with `kill`.
    pub async fn signal(&self, name: &str) {
        let status = std::process::Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid.to_string())
            .status()
            .unwrap_or_else(|e| panic!("harness: run kill: {e}"));
        assert!(
            status.success(),
            "harness: kill -{name} {} failed: {status}",
            self.pid
        );
    }

    /// Waits for exit; on timeout kills the process and fails the test with its output.
    pub async fn wait(mut self) -> Outcome {
        self.stdin.take();
        let status = match tokio::time::timeout(self.timeout, self.child.wait()).await {
            Ok(status) => status.unwrap_or_else(|e| panic!("harness: wait {}: {e}", self.desc)),
            Err(_) => {
                let _ = self.child.kill().await;
                let stdout = self.stdout.finish().await;
                let stderr = self.stderr.finish().await;
                panic!(
                    "harness: `{}` did not finish within {:?}; killed.\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
                    self.desc, self.timeout
                );
            }
        };
        Outcome {
            code: status.code(),
            signal: status.signal(),
            stdout: self.stdout.finish().await,
            stderr: self.stderr.finish().await,
        }
    }
}

/// How a run ended.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Exit code; `None` if killed by a signal.
    pub code: Option<i32>,
    /// The signal that ended the process, if any.
    pub signal: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Outcome {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// Stdout as NDJSON (blank lines skipped); panics with the offending line.
    pub fn events(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .enumerate()
            .filter(|(_, line)| !line.trim().is_empty())
            .map(|(i, line)| {
                serde_json::from_str(line).unwrap_or_else(|e| {
                    panic!(
                        "stdout line {} is not JSON ({e}): {line}\n--- stderr\n{}",
                        i + 1,
                        self.stderr
                    )
                })
            })
            .collect()
    }

    /// The `kind` of every event, in order (`""` when absent).
    pub fn kinds(&self) -> Vec<String> {
        self.events()
            .iter()
            .map(|e| e["kind"].as_str().unwrap_or("").to_owned())
            .collect()
    }

    /// Events whose `kind` equals `kind`.
    pub fn of_kind(&self, kind: &str) -> Vec<Value> {
        self.events()
            .into_iter()
            .filter(|e| e["kind"] == kind)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn outcome_parses_ndjson_events() {
        let out = Outcome {
            code: Some(0),
            signal: None,
            stdout: "{\"kind\":\"turn_started\",\"data\":{}}\n\n{\"kind\":\"result\",\"data\":{\"ok\":true}}\n".into(),
            stderr: String::new(),
        };
        assert!(out.success());
        assert_eq!(out.kinds(), ["turn_started", "result"]);
        assert_eq!(out.of_kind("result")[0]["data"]["ok"], true);
    }

    #[test]
    #[should_panic(expected = "stdout line 2 is not JSON")]
    fn outcome_rejects_non_json_lines() {
        let out = Outcome {
            code: Some(0),
            signal: None,
            stdout: "{}\nhello\n".into(),
            stderr: String::new(),
        };
        out.events();
    }

    #[tokio::test]
    async fn runs_the_binary_in_the_temp_home() {
        let h = Harness::new();
        for dir in [h.work(), h.config_dir(), h.cache_dir(), h.data_dir()] {
            assert!(dir.is_dir() && dir.starts_with(h.home.path()));
        }
        h.write_config("[model]\n");
        assert!(h.config_dir().join("corral/config.toml").is_file());
        assert!(h.event_logs().is_empty());
        let out = h.corral().arg("--help").stdin_text("ignored").run().await;
        assert_eq!(out.code, Some(0), "{out:?}");
    }
}
