//! One task, start to end: a fresh git repository holding the task's `repo/`, `corral run` in
//! it as a child process (the same binary, so what is measured is what people run), the
//! task's check, and the figures read from the run's events.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use serde::Serialize;
use serde_json::Value;
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};
use tokio_util::sync::CancellationToken;

use super::app::RunningApp;
use super::task::Task;
use crate::sandbox::env::Redactor;
use crate::sandbox::process::{self, ProcessSpec};
use crate::sandbox::{NetworkMode, OutputSink, SandboxMode, SandboxSpec};

/// Kept of a check's output (its end, where test runners say what failed).
const CHECK_TAIL_BYTES: usize = 2048;
/// How long a stopped `corral run` gets to end its tools and model server before SIGKILL
/// (it gives them 10 s itself).
const GRACE: Duration = Duration::from_secs(12);

/// How a run is started: the model and where everything else comes from.
#[derive(Debug, Clone)]
pub struct Runner {
    pub corral: PathBuf,
    pub model: String,
    pub base_url: Option<String>,
    pub config: Option<PathBuf>,
    pub permission: String,
    pub keep: bool,
    /// A signal asked the eval to stop: the running turn is stopped the way `corral run`
    /// stops on SIGTERM (its tools and model server end with it) and no check runs.
    pub stop: CancellationToken,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskResult {
    pub task: String,
    pub passed: bool,
    /// Model replies (one `usage` event each).
    pub steps: u32,
    pub tool_calls: u32,
    /// Calls taken from the reply's text (a server that returned no native call).
    pub recovered_calls: u32,
    /// Calls refused as malformed (unknown tool, invalid arguments), which the model was told.
    pub malformed_calls: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub seconds: f64,
    /// The turn's `stopReason`, or why there was none.
    pub stop_reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The end of the check's output.
    pub check_output: String,
    /// The working copy, when `--keep` asked for it to stay.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept: Option<PathBuf>,
}

impl Runner {
    pub async fn run(&self, task: &Task) -> TaskResult {
        let mut result = TaskResult {
            task: task.name.clone(),
            ..TaskResult::default()
        };
        let work = match working_copy(task) {
            Ok(work) => work,
            Err(e) => {
                result.stop_reason = "setup".into();
                result.error = Some(e);
                return result;
            }
        };
        // A desktop task's program records what it saw here, outside the agent's copy.
        let state = match tempfile::Builder::new()
            .prefix(&format!("corral-eval-state-{}-", task.name))
            .tempdir()
        {
            Ok(state) => state,
            Err(e) => {
                result.stop_reason = "setup".into();
                result.error = Some(format!("cannot make a state directory: {e}"));
                return result;
            }
        };
        let app = match &task.app {
            None => None,
            Some(app) => match RunningApp::start(app, task, state.path()).await {
                Ok(running) => Some(running),
                Err(e) => {
                    result.stop_reason = "setup".into();
                    result.error = Some(e);
                    return result;
                }
            },
        };
        let mut result = self.run_in(task, &work, state.path(), result).await;
        if let Some(app) = app {
            app.stop().await;
        }
        if self.keep && result.stop_reason != "stopped" {
            result.kept = Some(work.keep());
        }
        result
    }

    async fn run_in(
        &self,
        task: &Task,
        work: &tempfile::TempDir,
        state: &Path,
        mut result: TaskResult,
    ) -> TaskResult {
        let started = Instant::now();
        match self.turn(task, work.path()).await {
            Ok(events) => tally(&events, &mut result),
            Err(e) => {
                result.stop_reason = "not run".into();
                result.error = Some(e);
            }
        }
        result.seconds = started.elapsed().as_secs_f64();
        if self.stop.is_cancelled() {
            result.stop_reason = "stopped".into();
            result.error = Some("the eval was stopped during this task".into());
            return result;
        }
        match check(task, work.path(), state).await {
            Ok((passed, output)) => {
                result.passed = passed;
                result.check_output = output;
            }
            Err(e) => {
                result.check_output = e.clone();
                result.error.get_or_insert(e);
            }
        }
        result
    }

    /// The turn's events, as `corral run --json` printed them.
    async fn turn(&self, task: &Task, work: &Path) -> Result<Vec<Value>, String> {
        let mut command = Command::new(&self.corral);
        command
            .args(["run", "--json", "--network", "off", "-p", &self.permission])
            .args(["--max-steps", &task.max_steps.to_string()])
            .arg("-m")
            .arg(&self.model)
            .arg("-C")
            .arg(work);
        if let Some(base) = &self.base_url {
            command.arg("--base-url").arg(base);
        }
        if let Some(config) = &self.config {
            command.arg("--config").arg(config);
        }
        for tool in &task.allow {
            command.arg("--allow").arg(tool);
        }
        command
            .arg("--")
            .arg(&task.prompt)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let (status, stdout, stderr) = run_bounded(command, task.timeout, &self.stop).await?;
        let events: Vec<Value> = String::from_utf8_lossy(&stdout)
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect();
        if events.iter().any(|e| e["kind"] == "result") {
            return Ok(events);
        }
        let stderr = String::from_utf8_lossy(&stderr);
        Err(match status {
            Some(code) => format!(
                "corral run exited {code} without a result: {}",
                last_line(&stderr)
            ),
            None => format!(
                "the turn took longer than {} s and was stopped",
                task.timeout.as_secs()
            ),
        })
    }
}

/// A fresh repository holding the task's files, committed, so `git diff` and `git status`
/// show the agent's own changes.
fn working_copy(task: &Task) -> Result<tempfile::TempDir, String> {
    let work = tempfile::Builder::new()
        .prefix(&format!("corral-eval-{}-", task.name))
        .tempdir()
        .map_err(|e| format!("cannot make a working directory: {e}"))?;
    copy_tree(&task.repo(), work.path())
        .map_err(|e| format!("cannot copy {}: {e}", task.repo().display()))?;
    commit_all(work.path()).map_err(|e| format!("cannot commit the task's files: {e}"))?;
    Ok(work)
}

fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type()?;
        if kind.is_dir() {
            std::fs::create_dir(&target)?;
            copy_tree(&source, &target)?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&source)?, &target)?;
        } else {
            std::fs::copy(&source, &target)?;
        }
    }
    Ok(())
}

fn commit_all(dir: &Path) -> Result<(), git2::Error> {
    let repo = git2::Repository::init(dir)?;
    let mut index = repo.index()?;
    index.add_all(["*"], git2::IndexAddOption::DEFAULT, None)?;
    index.write()?;
    let tree = repo.find_tree(index.write_tree()?)?;
    let who = git2::Signature::now("corral eval", "eval@corral.invalid")?;
    repo.commit(Some("HEAD"), &who, &who, "task", &tree, &[])?;
    Ok(())
}

/// The task's check in the working copy: passed, and the end of what it printed. It runs what
/// the agent wrote (a test imports the agent's module), so it runs confined as the agent's own
/// tools were: writes only in the copy and a private temp dir, git's files read-only, corral's
/// state and the credential stores hidden, no network, the scrubbed environment.
async fn check(task: &Task, work: &Path, state: &Path) -> Result<(bool, String), String> {
    let tmp = tempfile::Builder::new()
        .prefix("corral-eval-check-")
        .tempdir()
        .map_err(|e| format!("the check did not run: no temp dir: {e}"))?;
    let mut sandbox = SandboxSpec::new(SandboxMode::BestEffort, NetworkMode::Off);
    sandbox.writable = vec![
        work.to_path_buf(),
        tmp.path().to_path_buf(),
        PathBuf::from("/dev/null"),
    ];
    sandbox.protected = vec![work.join(".git")];
    sandbox.hidden = crate::sandbox::default_hidden();
    let mut env = crate::sandbox::env::tool_env(std::env::vars(), &[], Some(tmp.path()));
    env.push(("CORRAL_EVAL_TASK".into(), task.dir.display().to_string()));
    env.push(("CORRAL_EVAL_STATE".into(), state.display().to_string()));
    env.retain(|(name, _)| name != "HOME");
    env.push(("HOME".into(), tmp.path().display().to_string()));
    let spec = ProcessSpec {
        program: "sh".into(),
        args: vec!["-c".into(), task.check.clone()],
        cwd: work.to_path_buf(),
        env,
        timeout: task.check_timeout,
        max_output_bytes: CHECK_TAIL_BYTES,
        sandbox: Some(sandbox),
        redactor: Redactor::default(),
    };
    let outcome = process::run(spec, &OutputSink::none(), &CancellationToken::new())
        .await
        .map_err(|e| format!("the check did not run: {e}"))?;
    if let Some(refused) = outcome.refused {
        return Err(format!("the sandbox refused the check: {refused}"));
    }
    let mut text = outcome.output;
    if outcome.timed_out {
        text.push_str(&format!(
            "\n(the check took longer than {} s and was stopped)",
            task.check_timeout.as_secs()
        ));
    }
    Ok((outcome.exit_code == Some(0) && !outcome.timed_out, text))
}

/// Runs `corral run` in its own process group with a deadline: its exit code (`None` when the
/// deadline passed or `stop` fired and the group was stopped), stdout and stderr. The group is
/// recorded in pids.json while it runs, so an eval that is killed outright leaves nothing
/// running past the next corral start.
async fn run_bounded(
    mut command: Command,
    deadline: Duration,
    stop: &CancellationToken,
) -> Result<(Option<i32>, Vec<u8>, Vec<u8>), String> {
    command.process_group(0).kill_on_drop(true);
    let mut child = command.spawn().map_err(|e| e.to_string())?;
    let _tracked = child
        .id()
        .and_then(|pid| crate::sandbox::reaper::track(pid, pid, "eval-run"));
    let (Some(mut stdout), Some(mut stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err("no pipes to the child".into());
    };
    let read_out = async {
        let mut buf = Vec::new();
        let _ = stdout.read_to_end(&mut buf).await;
        buf
    };
    let read_err = async {
        let mut buf = Vec::new();
        let _ = stderr.read_to_end(&mut buf).await;
        buf
    };
    let waited = async {
        let (out, err, status) = tokio::join!(read_out, read_err, child.wait());
        (out, err, status)
    };
    let finished = tokio::select! {
        finished = tokio::time::timeout(deadline, waited) => finished.ok(),
        () = stop.cancelled() => None,
    };
    match finished {
        Some((out, err, status)) => {
            let status = status.map_err(|e| e.to_string())?;
            Ok((Some(status.code().unwrap_or(-1)), out, err))
        }
        None => {
            stop_group(&mut child).await;
            Ok((None, Vec::new(), Vec::new()))
        }
    }
}

/// SIGTERM to the group (corral ends its tools and model server on it), SIGKILL after
/// [`GRACE`].
async fn stop_group(child: &mut Child) {
    let Some(pid) = child.id() else {
        return;
    };
    let group = nix::unistd::Pid::from_raw(pid as i32);
    let _ = killpg(group, Signal::SIGTERM);
    if tokio::time::timeout(GRACE, child.wait()).await.is_err() {
        let _ = killpg(group, Signal::SIGKILL);
        let _ = child.wait().await;
    }
}

/// The figures of a run, from its events.
fn tally(events: &[Value], result: &mut TaskResult) {
    // A call is announced while its arguments stream and again once they are whole.
    let mut calls = std::collections::HashSet::new();
    let mut recovered = std::collections::HashSet::new();
    for event in events {
        let data = &event["data"];
        match event["kind"].as_str() {
            Some("usage") => result.steps += 1,
            Some("tool_use") => {
                let id = data["call"]["toolCallId"]
                    .as_str()
                    .unwrap_or("")
                    .to_string();
                if data.get("recoveredFrom").is_some_and(|r| !r.is_null()) {
                    recovered.insert(id.clone());
                }
                calls.insert(id);
            }
            Some("tool_result") if is_malformed(data) => result.malformed_calls += 1,
            Some("result") => {
                result.stop_reason = data["stopReason"].as_str().unwrap_or("?").to_string();
                result.input_tokens = data["usage"]["inputTokens"].as_u64().unwrap_or(0);
                result.output_tokens = data["usage"]["outputTokens"].as_u64().unwrap_or(0);
                if let Some(error) = data["error"].as_str() {
                    result.error = Some(error.to_string());
                }
            }
            _ => {}
        }
    }
    result.tool_calls = u32::try_from(calls.len()).unwrap_or(u32::MAX);
    result.recovered_calls = u32::try_from(recovered.len()).unwrap_or(u32::MAX);
}

/// A result the loop gave a call it could not run as asked: an unknown tool or arguments the
/// schema refused (see `llm_loop::repair`).
fn is_malformed(data: &Value) -> bool {
    let result = &data["result"];
    let error = result["error"].as_str().unwrap_or("");
    result["success"] == false
        && (error.starts_with("unknown tool")
            || error.starts_with("invalid arguments for")
            || error.starts_with("the tool call has no name"))
}

fn last_line(text: &str) -> &str {
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
}
