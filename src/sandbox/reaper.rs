//! Child processes outliving a crashed runtime: every child the runtime starts (tool process
//! groups, model servers, agent CLIs) is recorded in `$XDG_CACHE_HOME/corral/agents/pids.json`
//! with its start time; the next runtime kills the groups whose owner is gone.
//!
//! For a tool the recorded pid is the sandbox helper, the outside of the call's boundary
//! (boundary.rs): SIGTERM is passed on to every process inside, and the SIGKILL that follows
//! takes the namespace's init with it (it dies with the helper), which ends the namespace.
//! So the processes that left the group are reaped through the helper's pid too.
//!
//! A pid alone is not an identity — the kernel reuses them — so a group is acted on only while
//! its recorded leader's pid is the same process (start time, field 22 of `/proc/<pid>/stat`)
//! or gone; then every live member of the group that started no earlier than the leader is
//! ended, also when the leader itself exited (group.rs). Several runtimes share the file; every
//! read-modify-write holds an exclusive file lock.
//!
//! An entry leaves the file only once its group is confirmed gone: when the runtime waited for
//! it ([`TrackGuard`]), when it ended its own children at exit ([`end_own_children`]: SIGTERM,
//! [`EXIT_GRACE`], SIGKILL, up to [`KILL_WAIT`] for the kernel), or when the next start reaped
//! it. A group still not gone stays listed, for the next start to try again.

mod group;

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

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

pub use group::KILL_WAIT;

/// Between SIGTERM and SIGKILL when an exiting runtime ends its own children.
pub const EXIT_GRACE: Duration = Duration::from_secs(2);
/// The same for leftovers of a dead runtime: they get a shorter one, the start waits for it.
const REAP_GRACE: Duration = Duration::from_millis(200);

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

/// Kills what dead runtimes left behind and forgets their entries once their groups are
/// confirmed gone. Entries of live runtimes stay. Returns how many groups had to be ended.
pub fn reap(path: &Path) -> std::io::Result<usize> {
    let leftovers = with_locked(path, |entries| {
        entries
            .iter()
            .filter(|e| !alive_as(e.owner_pid, e.owner_start_time))
            .cloned()
            .collect::<Vec<Tracked>>()
    })?;
    if leftovers.is_empty() {
        return Ok(0);
    }
    for entry in leftovers.iter().filter(|e| !group::gone(e)) {
        tracing::warn!(pid = entry.pid, pgid = entry.pgid, kind = %entry.kind,
            "killing a leftover child of a dead runtime");
    }
    let (gone, ended) = group::end_all(&leftovers, REAP_GRACE);
    forget_gone(path, &leftovers, &gone)?;
    Ok(ended)
}

/// Removes the entries whose groups are gone; the others stay for the next start.
fn forget_gone(path: &Path, ended: &[Tracked], gone: &[bool]) -> std::io::Result<()> {
    let forget: Vec<&Tracked> = ended
        .iter()
        .zip(gone)
        .filter_map(|(entry, gone)| gone.then_some(entry))
        .collect();
    for entry in ended.iter().zip(gone).filter(|(_, gone)| !**gone) {
        tracing::warn!(pid = entry.0.pid, pgid = entry.0.pgid, kind = %entry.0.kind,
            "a child's process group is still not gone after SIGKILL; it stays in pids.json");
    }
    with_locked(path, |entries| entries.retain(|e| !forget.contains(&e)))
}

/// Makes [`track`] record into `path` for the rest of the process, after reaping leftovers.
/// Only the first call does anything: a server reaps once, at start.
pub fn install(path: PathBuf) -> std::io::Result<usize> {
    if REGISTRY.get().is_some() {
        return Ok(0);
    }
    let killed = reap(&path)?;
    let _ = REGISTRY.set(path);
    Ok(killed)
}

/// Ends every tracked child of this runtime and blocks until each group is confirmed gone:
/// SIGTERM, up to `grace` for them to go, SIGKILL, up to [`KILL_WAIT`] for the kernel
/// (`Duration::ZERO`: SIGKILL at once, for exits that cannot wait). Synchronous on purpose: it
/// runs after the async runtime is done (or instead of it), so no task can be lost. Returns
/// how many groups had to be ended.
pub fn end_own_children(grace: Duration) -> usize {
    let Some(path) = REGISTRY.get() else {
        return 0;
    };
    let me = std::process::id();
    let my_start = start_time(me);
    let mine = with_locked(path, |entries| {
        entries
            .iter()
            .filter(|e| e.owner_pid == me && Some(e.owner_start_time) == my_start)
            .cloned()
            .collect::<Vec<Tracked>>()
    })
    .unwrap_or_else(|e| {
        tracing::warn!(error = %e, "reading pids.json at exit");
        Vec::new()
    });
    if mine.is_empty() {
        return 0;
    }
    let (gone, ended) = group::end_all(&mine, grace);
    if let Err(e) = forget_gone(path, &mine, &gone) {
        tracing::warn!(error = %e, "updating pids.json at exit");
    }
    ended
}

/// Removes the entry when dropped, if the group is gone by then (the child was waited for);
/// otherwise it stays for [`end_own_children`] or the next start.
#[derive(Debug)]
pub struct TrackGuard {
    entry: Tracked,
}

impl TrackGuard {
    /// True when nothing of the tracked group is alive any more.
    pub fn gone(&self) -> bool {
        group::gone(&self.entry)
    }
}

impl Drop for TrackGuard {
    fn drop(&mut self) {
        let Some(path) = REGISTRY.get() else {
            return;
        };
        if !self.gone() {
            tracing::debug!(pgid = self.entry.pgid, "a tracked group outlives its guard");
            return;
        }
        let entry = &self.entry;
        if let Err(e) = with_locked(path, |entries| entries.retain(|e| e != entry)) {
            tracing::warn!(error = %e, "updating pids.json");
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
    if let Err(e) = with_locked(path, |entries| entries.push(entry.clone())) {
        tracing::warn!(error = %e, "recording a child in pids.json");
        return None;
    }
    Some(TrackGuard { entry })
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
