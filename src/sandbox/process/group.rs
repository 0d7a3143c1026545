//! The process group of one call: signalled as a whole, and ended in the background when the
//! call is abandoned, its pids.json entry kept until the group is confirmed gone.

use std::io;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::Child;

use super::{REAP_WAIT, TERM_GRACE, live};
use crate::sandbox::reaper;

/// How often a killed group is looked for in /proc until it is gone.
const GONE_POLL: Duration = Duration::from_millis(10);

pub(super) async fn wait_child(child: &mut Option<Child>) -> io::Result<ExitStatus> {
    match child {
        Some(child) => child.wait().await,
        None => std::future::pending().await,
    }
}

/// Waits until nothing of a tracked group is alive, or [`reaper::KILL_WAIT`] passed.
pub(super) async fn confirm_gone(tracked: Option<&reaper::TrackGuard>) {
    let Some(tracked) = tracked else { return };
    let deadline = Instant::now() + reaper::KILL_WAIT;
    while !tracked.gone() && Instant::now() < deadline {
        tokio::time::sleep(GONE_POLL).await;
    }
}

pub(super) fn signal_group(pgid: Pid, signal: Signal) {
    // Never 0 or 1: killpg(0) would signal our own group, and 1 is init's.
    if pgid.as_raw() > 1 {
        // ESRCH (the group is already gone) is the usual and expected failure.
        let _ = killpg(pgid, signal);
    }
}

/// The child's process group; if the run is abandoned (its future dropped, e.g. the turn was
/// cancelled), the group is terminated in the background. Its pids.json entry goes with the
/// group, not before: if the background task is lost (the runtime shut down), the exiting
/// runtime's synchronous `reaper::end_own_children` still finds it.
pub(super) struct Group {
    pub(super) pgid: Pid,
    pub(super) child: Option<Child>,
    pub(super) settled: bool,
    pub(super) tracked: Option<reaper::TrackGuard>,
    /// Until the child is reaped; moved into the background task when the run is abandoned.
    pub(super) _live: live::Live,
}

impl Drop for Group {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        let pgid = self.pgid;
        signal_group(pgid, Signal::SIGTERM);
        let tracked = self.tracked.take();
        match (self.child.take(), tokio::runtime::Handle::try_current()) {
            (Some(mut child), Ok(handle)) => {
                // A fresh count for the task: this one goes with the group being dropped.
                let live = live::Live::new();
                handle.spawn(async move {
                    // Holding the unreaped child keeps the group id from being reused; the
                    // guard kills the group even if the runtime shuts down meanwhile.
                    let _kill = KillOnDrop(pgid);
                    if tokio::time::timeout(TERM_GRACE, child.wait())
                        .await
                        .is_err()
                    {
                        signal_group(pgid, Signal::SIGKILL);
                        let _ = tokio::time::timeout(REAP_WAIT, child.wait()).await;
                    }
                    signal_group(pgid, Signal::SIGKILL);
                    confirm_gone(tracked.as_ref()).await;
                    drop(tracked);
                    drop(live);
                });
            }
            // No runtime to wait in: the entry stays for end_own_children or the next start.
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
