//! The status machine: `starting → idle ⇄ working → dead`, plus `working ⇄ waiting_approval`.
//! An illegal transition is a bug in the caller and is rejected, never silently applied.
//!
//! A failed event log has no status of its own: the session's running turn is cancelled, it
//! goes back to `idle` with an `error` (not logged) and `result` `error`, refuses every new
//! turn (`Session::begin_turn`), and whoever runs it closes it, to `dead`. Every surface already
//! knows `dead` as "takes no more turns".

use crate::event::Status;

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("illegal status transition {from} → {to}")]
pub struct IllegalTransition {
    pub from: Status,
    pub to: Status,
}

/// Status and turn read together, under the session's one lock: a reader never pairs a turn's
/// number with the status from before that turn began (`idle` with a running turn's number).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Snapshot {
    pub status: Status,
    pub turn: u32,
    /// The last turn whose `result` has been published.
    pub finished_turn: u32,
}

impl Snapshot {
    /// As a client is shown it, given the last turn accepted for the session (`accepted`):
    /// a turn accepted but not begun yet already counts as `working` with its number, so
    /// `idle` always means the next message is taken, never refused as a turn in progress.
    pub fn with_accepted(self, accepted: u32) -> Snapshot {
        if self.status == Status::Idle && accepted > self.turn {
            Snapshot {
                status: Status::Working,
                turn: accepted,
                ..self
            }
        } else {
            self
        }
    }
}

pub fn check_transition(from: Status, to: Status) -> Result<(), IllegalTransition> {
    use Status::*;
    let legal = matches!(
        (from, to),
        (Starting, Idle)
            | (Starting, Dead)
            | (Idle, Working)
            | (Idle, Dead)
            | (Working, Idle)
            | (Working, WaitingApproval)
            | (Working, Dead)
            | (WaitingApproval, Working)
            | (WaitingApproval, Dead)
    );
    if legal {
        Ok(())
    } else {
        Err(IllegalTransition { from, to })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Status::*;

    #[test]
    fn the_documented_paths_are_legal() {
        for (from, to) in [
            (Starting, Idle),
            (Idle, Working),
            (Working, WaitingApproval),
            (WaitingApproval, Working),
            (Working, Idle),
            (Idle, Dead),
        ] {
            assert!(check_transition(from, to).is_ok(), "{from} → {to}");
        }
    }

    #[test]
    fn an_accepted_turn_shows_as_working_with_its_number() {
        let idle = Snapshot {
            status: Idle,
            turn: 3,
            finished_turn: 3,
        };
        assert_eq!(idle.with_accepted(3), idle);
        let queued = idle.with_accepted(4);
        assert_eq!((queued.status, queued.turn), (Working, 4));
        let running = Snapshot {
            status: Working,
            turn: 4,
            finished_turn: 3,
        };
        assert_eq!(running.with_accepted(4), running);
        let dead = Snapshot {
            status: Dead,
            ..idle
        };
        assert_eq!(dead.with_accepted(4), dead, "a dead session stays dead");
    }

    #[test]
    fn everything_else_is_rejected() {
        for (from, to) in [
            (Dead, Idle),
            (Dead, Working),
            (Idle, Idle),
            (Idle, WaitingApproval),
            (Starting, Working),
            (WaitingApproval, Idle),
        ] {
            assert_eq!(
                check_transition(from, to),
                Err(IllegalTransition { from, to })
            );
        }
    }
}
