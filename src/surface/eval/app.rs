//! A desktop task's program: started before the turn in its own process group (recorded for
//! the reaper, so it never outlives the eval), waited for until its window is on the screen,
//! and stopped after the check.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use tokio::process::{Child, Command};

use super::task::{App, Task};

/// How long a program gets to put its window up.
const WINDOW_WAIT: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(100);

pub struct RunningApp {
    child: Child,
    _tracked: Option<crate::sandbox::reaper::TrackGuard>,
}

impl RunningApp {
    /// Starts the program with `CORRAL_EVAL_TASK` and `CORRAL_EVAL_STATE` (where it records
    /// what it saw) and waits for its window.
    pub async fn start(app: &App, task: &Task, state: &Path) -> Result<RunningApp, String> {
        let mut child = Command::new("sh")
            .args(["-c", &app.command])
            .current_dir(&task.dir)
            .env("CORRAL_EVAL_TASK", &task.dir)
            .env("CORRAL_EVAL_STATE", state)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start the task's program: {e}"))?;
        let tracked = child
            .id()
            .and_then(|pid| crate::sandbox::reaper::track(pid, pid, "eval-app"));
        let stderr = child.stderr.take();
        let mut running = RunningApp {
            child,
            _tracked: tracked,
        };
        let Some(title) = &app.window else {
            return Ok(running);
        };
        let env: Vec<(String, String)> = std::env::vars().collect();
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = running.child.try_wait() {
                let mut said = String::new();
                if let Some(mut stderr) = stderr {
                    use tokio::io::AsyncReadExt as _;
                    let _ = stderr.read_to_string(&mut said).await;
                }
                return Err(format!(
                    "the task's program exited ({status}) before its window {title:?} showed: {}",
                    said.lines().last().unwrap_or_default()
                ));
            }
            let titles = {
                let env = env.clone();
                tokio::task::spawn_blocking(move || crate::tool::desktop_window_titles(&env))
                    .await
                    .map_err(|e| e.to_string())?
            };
            match titles {
                Ok(titles) if titles.iter().any(|t| t == title) => return Ok(running),
                Err(e) if started.elapsed() > WINDOW_WAIT => {
                    return Err(format!("cannot list the desktop's windows: {e}"));
                }
                _ if started.elapsed() > WINDOW_WAIT => {
                    return Err(format!(
                        "the window {title:?} did not show within {} s",
                        WINDOW_WAIT.as_secs()
                    ));
                }
                _ => tokio::time::sleep(POLL).await,
            }
        }
    }

    /// SIGTERM to its group, SIGKILL if it is still there a second later.
    pub async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            let group = nix::unistd::Pid::from_raw(pid as i32);
            let _ = killpg(group, Signal::SIGTERM);
            if tokio::time::timeout(Duration::from_secs(1), self.child.wait())
                .await
                .is_err()
            {
                let _ = killpg(group, Signal::SIGKILL);
                let _ = self.child.wait().await;
            }
        }
    }
}
