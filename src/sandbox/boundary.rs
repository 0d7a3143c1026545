//! The lifetime boundary of one tool call: nothing the program starts outlives it.
//!
//! A process group is not a boundary: `setsid`, `setpgid` and a double fork leave it, and a
//! daemon that did so kept running after the session, rewriting a worktree under review. So
//! the helper puts the program in a PID namespace of its own (after the user namespace, which
//! makes that possible without privileges) and forks twice:
//!
//! ```text
//! runtime ─ helper (outer: relays signals and the exit status)
//!             └─ init (pid 1 of the namespace: reaps, forwards signals to everyone)
//!                  └─ the program and whatever it starts, however it detaches
//! ```
//!
//! When the program exits, init exits with it and the kernel SIGKILLs everything left in the
//! namespace. Init also dies with the outer helper (`PR_SET_PDEATHSIG`), so killing the helper
//! (the runtime's SIGKILL after a timeout, the reaper's after a crash) ends the namespace too.
//! A fresh `/proc` is mounted where a private mount namespace exists, so tools see only their
//! own processes.
//!
//! Without a PID namespace (no user namespace and no privileges), the helper becomes a child
//! subreaper instead: orphans of the program are re-parented to it rather than to the
//! system's init, and it kills them when the program exits. That holds while the helper lives;
//! a SIGKILL of the helper itself lets them go, which is why it is reported as a gap.

use std::os::fd::OwnedFd;

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, kill, sigprocmask};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, fork, pipe2};

/// What the boundary achieved, for the support report.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Entered {
    /// Why there is no PID namespace (the subreaper fallback holds the call instead).
    pub pidns_error: Option<String>,
    /// Why the tool sees the host's `/proc` (its own could not be mounted).
    pub proc_error: Option<String>,
}

/// Signals a person or the runtime sends to end or interrupt a call: passed on to every
/// process inside, however it detached.
const FORWARDED: [Signal; 4] = [
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

/// Puts the rest of the helper's work into a boundary. Must run single-threaded, after the
/// user namespace and before landlock (which forbids mounting). Returns only in the process
/// that goes on to confine and exec the program; the processes around it never return, they
/// exit with the program's status. `private_mounts`: a mount namespace of our own exists, so
/// `/proc` may be replaced; `mount_ns`: unshare one here too (the unconfined path, as root).
pub(crate) fn enter(private_mounts: bool, mount_ns: bool) -> Entered {
    let mut blocked = SigSet::empty();
    FORWARDED.iter().for_each(|s| blocked.add(*s));
    blocked.add(Signal::SIGCHLD);
    let mut original = SigSet::empty();
    // Blocked from here so that none is lost between fork and the wait loops; the program
    // gets the original mask back.
    if sigprocmask(SigmaskHow::SIG_BLOCK, Some(&blocked), Some(&mut original)).is_err() {
        return Entered {
            pidns_error: Some("cannot block signals".into()),
            proc_error: None,
        };
    }
    let mut flags = CloneFlags::CLONE_NEWPID;
    if mount_ns {
        flags |= CloneFlags::CLONE_NEWNS;
    }
    let entered = match unshare(flags) {
        Ok(()) => Entered {
            pidns_error: None,
            proc_error: namespace(private_mounts || mount_ns, &blocked),
        },
        Err(e) => Entered {
            pidns_error: Some(subreaper(e, &blocked)),
            proc_error: Some("no PID namespace of its own".into()),
        },
    };
    let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&original), None);
    entered
}

/// The PID namespace path: forks the outer helper's child, which becomes pid 1 and forks the
/// program's process. Returns in the latter, with why `/proc` could not be replaced.
fn namespace(private_mounts: bool, blocked: &SigSet) -> Option<String> {
    // Init tells the outer helper how the program ended: init itself cannot die by a signal
    // it sends itself (pid 1 ignores those), so its own status says nothing.
    let Ok((status_read, status_write)) = pipe2(OFlag::O_CLOEXEC) else {
        relay(WaitStatus::Exited(Pid::from_raw(0), EXIT_BOUNDARY));
    };
    match fork_now() {
        Err(_) => relay(WaitStatus::Exited(Pid::from_raw(0), EXIT_BOUNDARY)),
        Ok(ForkResult::Parent { child }) => {
            drop(status_write);
            outer(child, status_read, blocked)
        }
        Ok(ForkResult::Child) => {
            drop(status_read);
            // If the outer helper is killed, so is the namespace.
            let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
            let proc_error = if private_mounts {
                mount_proc().err()
            } else {
                Some("no private mount namespace".into())
            };
            match fork_now() {
                Err(_) => std::process::exit(EXIT_BOUNDARY),
                Ok(ForkResult::Child) => proc_error,
                Ok(ForkResult::Parent { child }) => init(child, &status_write, blocked),
            }
        }
    }
}

/// `fork` without `exec`: sound only while one thread exists, which holds for the helper (it
/// runs from `main` before anything starts a thread, and the boundary comes before landlock
/// and exec).
#[allow(unsafe_code)]
fn fork_now() -> nix::Result<ForkResult> {
    // SAFETY: the process is single-threaded (see above), so the child cannot inherit a lock
    // held by another thread; the children only make system calls and allocate.
    unsafe { fork() }
}

/// Exit code when the boundary itself could not be set up and the program did not run.
const EXIT_BOUNDARY: i32 = 125;

fn mount_proc() -> Result<(), String> {
    let none: Option<&str> = None;
    // Nothing mounted here may propagate to the parent namespace.
    mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none)
        .map_err(|e| format!("making / private: {e}"))?;
    mount(
        Some("proc"),
        "/proc",
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        none,
    )
    .map_err(|e| format!("mounting /proc: {e}"))
}

/// The outer helper: waits for init, passes signals on, and ends the way the program did.
fn outer(init: Pid, status: OwnedFd, blocked: &SigSet) -> ! {
    loop {
        match blocked.wait() {
            Ok(Signal::SIGCHLD) => match waitpid(init, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) | Err(Errno::EINTR) => {}
                Ok(own) => relay(reported(&status).unwrap_or(own)),
                Err(_) => relay(WaitStatus::Exited(init, EXIT_BOUNDARY)),
            },
            Ok(signal) => {
                let _ = kill(init, signal);
            }
            Err(_) => {}
        }
    }
}

/// Pid 1 of the namespace: reaps every orphan, forwards signals to all processes inside, and
/// exits when the program does, which ends the namespace.
fn init(program: Pid, status: &OwnedFd, blocked: &SigSet) -> ! {
    loop {
        match blocked.wait() {
            Ok(Signal::SIGCHLD) => loop {
                match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                    Ok(ended @ (WaitStatus::Exited(pid, _) | WaitStatus::Signaled(pid, _, _)))
                        if pid == program =>
                    {
                        let code = encode(ended).to_ne_bytes();
                        let _ = nix::unistd::write(status, &code);
                        std::process::exit(0);
                    }
                    Ok(WaitStatus::StillAlive) => break,
                    Ok(_) => {}
                    Err(Errno::EINTR) => {}
                    // ECHILD: the program is gone and was reaped; nothing can report it.
                    Err(_) => std::process::exit(EXIT_BOUNDARY),
                }
            },
            // In a PID namespace, -1 from init is everyone inside but init.
            Ok(signal) => {
                let _ = kill(Pid::from_raw(-1), signal);
            }
            Err(_) => {}
        }
    }
}

/// The fallback: the helper stays the parent of everything the program leaves behind.
/// Returns (in the program's process) why there is no PID namespace.
fn subreaper(unshare_error: Errno, blocked: &SigSet) -> String {
    let why = format!("no PID namespace ({unshare_error}); a subreaper holds the call instead");
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        return format!("no PID namespace ({unshare_error}) and no subreaper ({e})");
    }
    match fork_now() {
        Err(_) => relay(WaitStatus::Exited(Pid::from_raw(0), EXIT_BOUNDARY)),
        Ok(ForkResult::Child) => why,
        Ok(ForkResult::Parent { child }) => reap_around(child, blocked),
    }
}

fn reap_around(program: Pid, blocked: &SigSet) -> ! {
    loop {
        match blocked.wait() {
            Ok(Signal::SIGCHLD) => loop {
                match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                    Ok(ended @ (WaitStatus::Exited(pid, _) | WaitStatus::Signaled(pid, _, _)))
                        if pid == program =>
                    {
                        kill_children();
                        relay(ended);
                    }
                    Ok(WaitStatus::StillAlive) => break,
                    Ok(_) | Err(Errno::EINTR) => {}
                    Err(_) => relay(WaitStatus::Exited(program, EXIT_BOUNDARY)),
                }
            },
            Ok(signal) => {
                for child in children() {
                    let _ = kill(child, signal);
                }
            }
            Err(_) => {}
        }
    }
}

/// Kills and reaps every child until none is left: a child killed while forking leaves an
/// orphan, which becomes ours and is found on the next round.
fn kill_children() {
    loop {
        let found = children();
        for child in &found {
            let _ = kill(*child, Signal::SIGKILL);
        }
        match waitpid(None, None) {
            Err(Errno::ECHILD) if found.is_empty() => return,
            Err(Errno::ECHILD) => std::thread::sleep(std::time::Duration::from_millis(10)),
            _ => {}
        }
    }
}

/// Our children, from /proc (every process whose parent we are).
fn children() -> Vec<Pid> {
    let me = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|entry| {
        let pid: u32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let ppid: u32 = stat[stat.rfind(')')? + 1..]
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()?;
        (ppid == me).then(|| Pid::from_raw(pid as i32))
    })
    .collect()
}

/// The program's end as one number for the pipe: an exit code, or minus the signal.
fn encode(status: WaitStatus) -> i32 {
    match status {
        WaitStatus::Exited(_, code) => code,
        WaitStatus::Signaled(_, signal, _) => -(signal as i32),
        _ => EXIT_BOUNDARY,
    }
}

fn decode(value: i32) -> WaitStatus {
    let pid = Pid::from_raw(0);
    match Signal::try_from(-value) {
        Ok(signal) if value < 0 => WaitStatus::Signaled(pid, signal, false),
        _ => WaitStatus::Exited(pid, value),
    }
}

/// What init wrote before it exited; `None` when it died before it could.
fn reported(status: &OwnedFd) -> Option<WaitStatus> {
    let mut buf = [0u8; 4];
    let n = nix::unistd::read(status, &mut buf).ok()?;
    (n == buf.len()).then(|| decode(i32::from_ne_bytes(buf)))
}

/// Ends this process the way the program ended, so the runtime sees its exit code or signal.
fn relay(status: WaitStatus) -> ! {
    match status {
        WaitStatus::Exited(_, code) => std::process::exit(code),
        WaitStatus::Signaled(_, signal, _) => {
            // The program may have dumped core already; the helper must not add another.
            let _ = nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_CORE, 0, 0);
            // The helper never installs handlers: the disposition is still the default.
            let mut only = SigSet::empty();
            only.add(signal);
            let _ = sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&only), None);
            let _ = nix::sys::signal::raise(signal);
            std::process::exit(128 + signal as i32)
        }
        _ => std::process::exit(EXIT_BOUNDARY),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exit_code_and_a_signal_survive_the_pipe() {
        for status in [
            WaitStatus::Exited(Pid::from_raw(0), 0),
            WaitStatus::Exited(Pid::from_raw(0), 3),
            WaitStatus::Signaled(Pid::from_raw(0), Signal::SIGTERM, false),
            WaitStatus::Signaled(Pid::from_raw(0), Signal::SIGKILL, false),
        ] {
            assert_eq!(decode(encode(status)), status);
        }
    }
}
