//! Child processes outliving a crashed runtime: every child the runtime starts (tool process
//! groups, model servers, agent CLIs) is recorded in `$XDG_CACHE_HOME/corral/agents/pids.json`
//! with its start time; the next runtime kills the groups whose owner is gone.
//!
//! For a tool the recorded pid is the sandbox helper, the outside of the call's boundary
//! (boundary.rs): SIGTERM is passed on to every process inside, and the SIGKILL that follows
//! takes the namespace's init with it (it dies with the helper), which ends the namespace.
//! So the processes that left the group are reaped through the helper's pid too.
//!
//! A pid alone is not an identity — the kernel reuses them — so an entry is acted on only when
//! the process's start time (field 22 of `/proc/<pid>/stat`) still matches the recorded one.
//! Several runtimes share the file; every read-modify-write holds an exclusive file lock.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tracked {
    pub pid: u32,
    /// The process group killed on reaping (tool processes lead their own group).
    pub pgid: u32,
    pub start_time: u64,
    pub owner_pid: u32,
    pub owner_start_time: u64,
    /// What it is, for people reading the file: "tool", "model-server", "agent".
    pub kind: String,
}

static REGISTRY: OnceLock<PathBuf> = OnceLock::new();

pub fn pids_path(agents_dir: &Path) -> PathBuf {
    agents_dir.join("pids.json")
}

/// Start time of a live process in clock ticks since boot, `None` if it is gone.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    let after = &stat[stat.rfind(')')? + 1..];
    // After ')' come field 3 (state) onwards; start time is field 22.
    after.split_whitespace().nth(19)?.parse().ok()
}

fn alive_as(pid: u32, start: u64) -> bool {
    start_time(pid) == Some(start)
}

fn with_locked<T>(path: &Path, change: impl FnOnce(&mut Vec<Tracked>) -> T) -> std::io::Result<T> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    file.lock()?;
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    // A damaged file must not stop the runtime: start over (and say so).
    let mut entries: Vec<Tracked> = if text.trim().is_empty() {
        Vec::new()
    } else {
        serde_json::from_str(&text).unwrap_or_else(|e| {
            tracing::warn!(path = %path.display(), error = %e, "pids.json unreadable; starting fresh");
            Vec::new()
        })
    };
    let result = change(&mut entries);
    write_all(&mut file, &entries)?;
    file.unlock()?;
    Ok(result)
}

fn write_all(file: &mut File, entries: &[Tracked]) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(entries).map_err(std::io::Error::other)?;
    file.set_len(0)?;
    file.seek(SeekFrom::Start(0))?;
    file.write_all(text.as_bytes())?;
    file.sync_data()
}

/// Kills what dead runtimes left behind and forgets their entries. Entries of live runtimes
/// stay. Returns how many process groups were killed.
pub fn reap(path: &Path) -> std::io::Result<usize> {
    let leftovers = with_locked(path, |entries| {
        let (dead_owner, live_owner): (Vec<Tracked>, Vec<Tracked>) = entries
            .drain(..)
            .partition(|e| !alive_as(e.owner_pid, e.owner_start_time));
        *entries = live_owner;
        dead_owner
    })?;
    let mut killed = 0;
    for entry in leftovers {
        if alive_as(entry.pid, entry.start_time) {
            tracing::warn!(pid = entry.pid, kind = %entry.kind, "killing a leftover child of a dead runtime");
            let group = Pid::from_raw(entry.pgid as i32);
            let _ = killpg(group, Signal::SIGTERM);
            std::thread::sleep(Duration::from_millis(200));
            if alive_as(entry.pid, entry.start_time) {
                let _ = killpg(group, Signal::SIGKILL);
            }
            killed += 1;
        }
    }
    Ok(killed)
}

/// Makes [`track`] record into `path` for the rest of the process, after reaping leftovers.
/// Only the first call does anything: a server opening many sessions reaps once, at start.
pub fn install(path: PathBuf) -> std::io::Result<usize> {
    if REGISTRY.get().is_some() {
        return Ok(0);
    }
    let killed = reap(&path)?;
    let _ = REGISTRY.set(path);
    Ok(killed)
}

/// Kills every tracked child of this runtime, for exits that skip destructors (a second
/// Ctrl-C). Synchronous on purpose.
pub fn kill_own_children() {
    let Some(path) = REGISTRY.get() else {
        return;
    };
    let me = std::process::id();
    let mine = with_locked(path, |entries| {
        let (mine, others): (Vec<Tracked>, Vec<Tracked>) =
            entries.drain(..).partition(|e| e.owner_pid == me);
        *entries = others;
        mine
    })
    .unwrap_or_default();
    for entry in mine {
        if alive_as(entry.pid, entry.start_time) {
            let _ = killpg(Pid::from_raw(entry.pgid as i32), Signal::SIGKILL);
        }
    }
}

/// Removes the entry when dropped (the child was waited for).
#[derive(Debug)]
pub struct TrackGuard {
    pid: u32,
    start_time: u64,
}

impl Drop for TrackGuard {
    fn drop(&mut self) {
        if let Some(path) = REGISTRY.get() {
            let (pid, start) = (self.pid, self.start_time);
            if let Err(e) = with_locked(path, |entries| {
                entries.retain(|e| !(e.pid == pid && e.start_time == start));
            }) {
                tracing::warn!(error = %e, "updating pids.json");
            }
        }
    }
}

/// Records a child (leading its own process group `pgid`). A no-op until [`install`] ran,
/// so library users without a cache directory are not forced to have one.
pub fn track(pid: u32, pgid: u32, kind: &str) -> Option<TrackGuard> {
    let path = REGISTRY.get()?;
    let child_start = start_time(pid)?;
    let owner_pid = std::process::id();
    let owner_start_time = start_time(owner_pid)?;
    let entry = Tracked {
        pid,
        pgid,
        start_time: child_start,
        owner_pid,
        owner_start_time,
        kind: kind.to_string(),
    };
    if let Err(e) = with_locked(path, |entries| entries.push(entry)) {
        tracing::warn!(error = %e, "recording a child in pids.json");
        return None;
    }
    Some(TrackGuard {
        pid,
        start_time: child_start,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    #[test]
    fn start_time_parses_and_disappears_with_the_process() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let start = start_time(child.id()).unwrap();
        assert!(start > 0);
        assert!(start_time(std::process::id()).unwrap() <= start);
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(start_time(child.id()), None);
    }

    #[test]
    fn leftovers_of_a_dead_owner_are_killed_and_reused_pids_spared() {
        let dir = tempfile::tempdir().unwrap();
        let path = pids_path(dir.path());
        // An "owner" that already exited, and its child group still running.
        let mut owner = std::process::Command::new("true").spawn().unwrap();
        let owner_start = start_time(owner.id()).unwrap_or(1);
        owner.wait().unwrap();
        let mut orphan = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let mut bystander = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let entry = |pid: u32, start: u64| Tracked {
            pid,
            pgid: pid,
            start_time: start,
            owner_pid: owner.id(),
            owner_start_time: owner_start,
            kind: "tool".into(),
        };
        let me = std::process::id();
        let live_owner = Tracked {
            owner_pid: me,
            owner_start_time: start_time(me).unwrap(),
            ..entry(bystander.id(), start_time(bystander.id()).unwrap())
        };
        let entries = vec![
            entry(orphan.id(), start_time(orphan.id()).unwrap()),
            // Same pid as a live process but another start time: a reused pid, not ours.
            entry(bystander.id(), 1),
            live_owner.clone(),
        ];
        std::fs::write(&path, serde_json::to_string(&entries).unwrap()).unwrap();
        assert_eq!(reap(&path).unwrap(), 1);
        assert!(orphan.wait().unwrap().signal().is_some());
        assert!(
            bystander.try_wait().unwrap().is_none(),
            "a reused pid is never killed"
        );
        let left: Vec<Tracked> =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(left, vec![live_owner]);
        bystander.kill().unwrap();
        bystander.wait().unwrap();
    }

    use std::os::unix::process::ExitStatusExt;
}
