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
