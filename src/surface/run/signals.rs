//! How `corral run` takes signals: SIGTERM and SIGHUP end the run the orderly way, with a
//! watchdog behind it; Ctrl-C cancels the running turn, and a second press leaves.

use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use crate::backend::Backend;
use crate::session::{Session, TurnOutcome};

use super::Exit;

/// How long stopping what the session owns may take after SIGTERM or SIGHUP before every
/// tracked child is killed and corral exits anyway.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// SIGTERM and SIGHUP, caught from the start of the run so the default action (exit at once,
/// the agent's process group left running) never applies.
pub(crate) struct Stops {
    term: Option<tokio::signal::unix::Signal>,
    hup: Option<tokio::signal::unix::Signal>,
}

impl Stops {
    pub(crate) fn install() -> Stops {
        use tokio::signal::unix::{SignalKind, signal};
        let catch = |kind: SignalKind, name: &str| {
            signal(kind)
                .inspect_err(|e| tracing::warn!(error = %e, "cannot catch {name}"))
                .ok()
        };
        Stops {
            term: catch(SignalKind::terminate(), "SIGTERM"),
            hup: catch(SignalKind::hangup(), "SIGHUP"),
        }
    }

    pub(crate) async fn next(&mut self) -> Exit {
        async fn recv(signal: &mut Option<tokio::signal::unix::Signal>) {
            match signal {
                Some(signal) => {
                    signal.recv().await;
                }
                None => std::future::pending().await,
            }
        }
        tokio::select! {
            () = recv(&mut self.term) => Exit::Terminated,
            () = recv(&mut self.hup) => Exit::HungUp,
        }
    }
}

/// A thread, not a task: it must fire even when the orderly stop blocks the runtime.
pub(crate) fn watchdog(exit: Exit) {
    std::thread::spawn(move || {
        std::thread::sleep(STOP_GRACE);
        crate::sandbox::reaper::end_own_children(std::time::Duration::ZERO);
        std::process::exit(exit as i32);
    });
}

/// Ctrl-C handling: the first press cancels the running turn, a second press while it is
/// still winding down exits at once (after flushing the event log).
pub(super) struct Interrupts {
    current: Arc<Mutex<Option<CancellationToken>>>,
    pub(super) session: Arc<Session>,
}

impl Interrupts {
    pub(super) fn install(session: Arc<Session>) -> Interrupts {
        let current: Arc<Mutex<Option<CancellationToken>>> = Arc::new(Mutex::new(None));
        let watched = current.clone();
        let closing = session.clone();
        tokio::spawn(async move {
            while tokio::signal::ctrl_c().await.is_ok() {
                let token = watched.lock().unwrap_or_else(|p| p.into_inner()).clone();
                match token {
                    Some(token) if !token.is_cancelled() => token.cancel(),
                    // A second press, or one with no turn running: leave now.
                    _ => {
                        // Leaving without unwinding: children in their own process groups
                        // (tools, a local model server) would outlive us otherwise.
                        crate::sandbox::reaper::end_own_children(std::time::Duration::ZERO);
                        closing.close();
                        std::process::exit(Exit::Cancelled as i32);
                    }
                }
            }
        });
        Interrupts { current, session }
    }

    pub(super) async fn run_turn(&self, agent: &mut dyn Backend, prompt: &str) -> TurnOutcome {
        // A failed event log stops the turn as Ctrl-C would.
        let token = self.session.halted().child_token();
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Some(token.clone());
        let outcome = agent.run_turn(prompt, token).await;
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = None;
        outcome
    }
}
