//! What a message asks of its turn besides the text: the mode (the WebSocket API's normal,
//! think and delegate), an effort for this turn alone, and whether a message sent while a turn
//! runs may wait for it (or steer it).

use crate::model::Effort;

/// The turn's flavour, as the WebSocket API knows it. `think` runs the turn at high effort
/// (the model reasons before it answers) and shows its phases (analyzing, researching,
/// deep_thinking, writing); `delegate` gives corral's own loop the `delegate` tool and has it
/// split the task first (see `llm_loop::delegation`), shown as `delegating`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnMode {
    #[default]
    Normal,
    Think,
    Delegate,
}

/// How a message is to be run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TurnRequest {
    pub mode: TurnMode,
    /// This turn's effort; `None`: think mode's high, else the session's.
    pub effort: Option<Effort>,
    /// While a turn runs, the message waits instead of being refused: a backend that steers
    /// takes it into the running turn (claude, codex), others get it, coalesced with whatever
    /// else waits, as the next turn. Without this the answer is TURN_IN_PROGRESS (seed 002).
    pub queue: bool,
}

impl TurnRequest {
    pub fn mode(mode: TurnMode) -> TurnRequest {
        TurnRequest {
            mode,
            ..TurnRequest::default()
        }
    }

    /// The effort this turn asks for, if it asks for one.
    pub fn turn_effort(&self) -> Option<Effort> {
        self.effort.or(match self.mode {
            TurnMode::Think => Some(Effort::High),
            TurnMode::Normal | TurnMode::Delegate => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn think_mode_asks_for_high_effort_unless_the_message_names_one() {
        assert_eq!(
            TurnRequest::mode(TurnMode::Think).turn_effort(),
            Some(Effort::High)
        );
        let low = TurnRequest {
            mode: TurnMode::Think,
            effort: Some(Effort::Low),
            queue: false,
        };
        assert_eq!(low.turn_effort(), Some(Effort::Low));
        assert_eq!(TurnRequest::default().turn_effort(), None);
    }
}
