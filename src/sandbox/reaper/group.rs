//! A recorded process group, found again in `/proc` and ended: SIGTERM, a grace period,
//! SIGKILL, then waiting until the kernel confirms no member is left.
//!
//! Members are found by process group id, not only through the recorded leader: a leader that
//! exited leaves its group's other members running under the same pgid. Only processes that
//! started no earlier than the recorded leader count, and nothing at all when the leader's pid
//! now belongs to another process (then the pgid was recycled and the group is someone else's):
//! so a recycled pid is never signalled.

use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

use super::{Tracked, start_time};

/// After SIGKILL, how long the kernel may take to tear a group down (a PID namespace's init
/// waits for everything inside); only a process stuck in the kernel takes longer.
pub const KILL_WAIT: Duration = Duration::from_secs(5);
const POLL: Duration = Duration::from_millis(10);

/// Fields of `/proc/<pid>/stat` this module reads.
struct Stat {
    zombie: bool,
    pgid: u32,
    start: u64,
}

fn stat(pid: u32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    let fields: Vec<&str> = text[text.rfind(')')? + 1..].split_whitespace().collect();
    Some(Stat {
        zombie: *fields.first()? == "Z",
        pgid: fields.get(2)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

/// What is left of a recorded group.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Members {
    /// Live members started no earlier than the recorded leader: ours.
    pub ours: Vec<u32>,
    /// Live processes in the group that cannot be ours (started before the leader).
    pub others: usize,
}

/// The live (not zombie) members of `entry`'s group that belong to it.
pub fn members(entry: &Tracked) -> Members {
    if entry.pid == entry.pgid
        && let Some(now) = start_time(entry.pid)
        && now != entry.start_time
    {
        // The leader's pid is another process now: the pgid is not ours any more.
        return Members::default();
    }
    let mut found = Members::default();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return found;
    };
    for pid in dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()) {
        match stat(pid) {
            Some(s) if !s.zombie && s.pgid == entry.pgid && s.start >= entry.start_time => {
                found.ours.push(pid);
            }
            Some(s) if !s.zombie && s.pgid == entry.pgid => found.others += 1,
            _ => {}
        }
    }
    found
}

/// Sends `signal` to what is ours of the group: the whole group at once when every member is
/// ours (so a fork in between is caught too), else each member by pid.
fn signal(entry: &Tracked, members: &Members, signal: Signal) {
    // Never 0 or 1: killpg(0) would be our own group, 1 is init's.
    if entry.pgid <= 1 || members.ours.is_empty() {
        return;
    }
    if members.others == 0 {
        let _ = killpg(Pid::from_raw(entry.pgid as i32), signal);
    } else {
        for pid in &members.ours {
            let _ = kill(Pid::from_raw(*pid as i32), signal);
        }
    }
}

/// Ends every group of `entries` (SIGTERM, up to `grace`, SIGKILL, up to [`KILL_WAIT`]) and
/// blocks until each is confirmed gone or the time is up. Returns, per entry, whether it is
/// gone, and how many had anything left to end.
pub fn end_all(entries: &[Tracked], grace: Duration) -> (Vec<bool>, usize) {
    let mut ended = 0;
    let mut left: Vec<Option<Members>> = entries.iter().map(alive).collect();
    if grace > Duration::ZERO {
        for (entry, members) in entries.iter().zip(&left) {
            if let Some(members) = members {
                ended += 1;
                signal(entry, members, Signal::SIGTERM);
            }
        }
        left = wait(entries, left, Instant::now() + grace);
    } else {
        ended = left.iter().flatten().count();
    }
    let deadline = Instant::now() + KILL_WAIT;
    while left.iter().any(Option::is_some) && Instant::now() < deadline {
        // Again each round: a member may have forked since the last one.
        for (entry, members) in entries.iter().zip(&left) {
            if let Some(members) = members {
                signal(entry, members, Signal::SIGKILL);
            }
        }
        std::thread::sleep(POLL);
        left = entries.iter().map(alive).collect();
    }
    (left.iter().map(Option::is_none).collect(), ended)
}

/// What is ours of the group, `None` when nothing is.
fn alive(entry: &Tracked) -> Option<Members> {
    let members = members(entry);
    (!members.ours.is_empty()).then_some(members)
}

fn wait(
    entries: &[Tracked],
    mut left: Vec<Option<Members>>,
    until: Instant,
) -> Vec<Option<Members>> {
    while left.iter().any(Option::is_some) && Instant::now() < until {
        std::thread::sleep(POLL);
        left = entries.iter().map(alive).collect();
    }
    left
}

/// True when nothing of the group is left alive.
pub fn gone(entry: &Tracked) -> bool {
    members(entry).ours.is_empty()
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt;

    use super::*;

    fn entry(pid: u32, start: u64) -> Tracked {
        Tracked {
            pid,
            pgid: pid,
            start_time: start,
            owner_pid: 0,
            owner_start_time: 0,
            kind: "tool".into(),
        }
    }

    #[test]
    fn a_group_that_ignores_sigterm_is_killed_and_confirmed_gone() {
        let mut child = std::process::Command::new("bash")
            .args(["-c", "trap '' TERM; sleep 30 & sleep 30; :"])
            .process_group(0)
            .spawn()
            .unwrap();
        let tracked = entry(child.id(), start_time(child.id()).unwrap());
        // Both the shell and its background sleep.
        while members(&tracked).ours.len() < 3 {
            std::thread::sleep(POLL);
        }
        let (gone_now, ended) = end_all(std::slice::from_ref(&tracked), POLL * 5);
        assert_eq!((gone_now, ended), (vec![true], 1));
        assert!(gone(&tracked));
        child.wait().unwrap();
    }

    #[test]
    fn a_recycled_leader_pid_or_an_older_member_is_not_ours() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let start = start_time(child.id()).unwrap();
        assert_eq!(members(&entry(child.id(), start)).ours, vec![child.id()]);
        assert_eq!(members(&entry(child.id(), start + 1)), Members::default());
        // The leader gone (another pid recorded), the live member older than the record.
        let mut older = entry(child.id(), start + 1);
        older.pid = u32::MAX;
        let found = members(&older);
        assert_eq!((found.ours.len(), found.others), (0, 1));
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
