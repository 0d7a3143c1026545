//! Tool processes this runtime started and has not reaped yet, so that an exiting runtime
//! (the server's shutdown, the end of `corral run`) can wait for them to be gone.
//!
//! A call abandoned mid-way (its session closed) is terminated by a background task; without
//! this count the runtime could exit while that task still waited, and the call's processes
//! would outlive it by however long the kernel took to end them. The helper exits only after
//! the namespace's init has reaped everything inside (boundary.rs), so a reaped helper means
//! the call is over.
//!
//! This wait is the orderly part; the guarantee is `reaper::end_own_children`, which the
//! binary runs synchronously after the async runtime is done and which ends (and confirms
//! gone) whatever pids.json still lists for this process, a lost background task's group too.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

/// How long an exiting runtime waits: past a SIGTERM's grace and a SIGKILL's reaping.
pub(crate) const EXIT_WAIT: Duration = Duration::from_secs(5);

static LIVE: AtomicUsize = AtomicUsize::new(0);
static GONE: Notify = Notify::const_new();

/// Held for as long as one tool process may be unreaped.
#[derive(Debug)]
pub(crate) struct Live(());

impl Live {
    pub(crate) fn new() -> Live {
        LIVE.fetch_add(1, Ordering::SeqCst);
        Live(())
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::SeqCst);
        GONE.notify_waiters();
    }
}

/// Waits up to `limit` until every tool process started by this runtime has been reaped.
/// False if some were still there when the time ran out.
pub(crate) async fn wait_for_tool_processes(limit: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        // Registered before the count is read, so a drop in between still wakes us.
        let gone = GONE.notified();
        tokio::pin!(gone);
        gone.as_mut().enable();
        if LIVE.load(Ordering::SeqCst) == 0 {
            return true;
        }
        if tokio::time::timeout_at(deadline, gone).await.is_err() {
            let left = LIVE.load(Ordering::SeqCst);
            if left > 0 {
                tracing::warn!(left, "tool processes still running at exit");
            }
            return left == 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waits_until_the_last_one_is_dropped_and_gives_up_at_the_limit() {
        let live = Live::new();
        assert!(!wait_for_tool_processes(Duration::from_millis(50)).await);
        let dropper = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            drop(live);
        });
        assert!(wait_for_tool_processes(Duration::from_secs(10)).await);
        dropper.await.unwrap();
    }
}
