//! The "## Message Notifications" section of an agent's standing instructions, generated from
//! its runtime's lifecycle and steering mode (seed 003's `buildCliSystemPrompt`): no runtime
//! writes its own. A per-turn agent has to know that messages sent while it works wait for
//! its next turn, or it sits in a turn waiting for a reply that cannot come.

use super::runtimes::{Lifecycle, LifecycleKind, Steering};

pub fn section(lifecycle: Lifecycle, steering: Steering) -> String {
    let mut lines = vec!["## Message Notifications".to_string(), String::new()];
    match lifecycle.kind {
        LifecycleKind::PerTurn => {
            lines.push(
                "You work one turn at a time. Your process ends when you end your turn, and the \
                 next message starts a new one that continues this conversation."
                    .into(),
            );
            lines.push(
                "- Messages sent to you while you work are not shown to you during the turn. \
                 They arrive together, in the order they were sent, as your next turn."
                    .into(),
            );
            lines.push(
                "- So never wait, sleep or poll for a reply inside a turn: do what you can, say \
                 what you need, and end the turn."
                    .into(),
            );
            lines.push(
                "- Nothing you start in the background outlives your turn: it is stopped when \
                 the turn ends."
                    .into(),
            );
        }
        LifecycleKind::Persistent => {
            lines.push(match steering {
                Steering::Gated => {
                    "Messages sent to you while you work are added to your conversation at the \
                     next safe point (between tool calls), in the order they were sent."
                        .to_string()
                }
                Steering::Direct => {
                    "Messages sent to you while you work are added to your conversation as they \
                     arrive, in the order they were sent."
                        .to_string()
                }
                Steering::None => "Messages sent to you while you work arrive together as your \
                                   next turn, in the order they were sent."
                    .to_string(),
            });
        }
    }
    lines.join("\n")
}

/// The first prompt of a conversation, with the standing instructions in front of it, for
/// runtimes that take no instructions of their own.
pub fn first_prompt(instructions: &str, prompt: &str) -> String {
    format!("<instructions>\n{instructions}\n</instructions>\n\n{prompt}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::per_turn::runtimes::PER_TURN_RUNTIMES;

    #[test]
    fn every_per_turn_runtime_is_told_its_messages_wait_for_the_next_turn() {
        for runtime in PER_TURN_RUNTIMES {
            let text = section(runtime.lifecycle, runtime.steering);
            assert!(text.starts_with("## Message Notifications\n"), "{text}");
            assert!(
                text.contains("as your next turn"),
                "{}: {text}",
                runtime.name
            );
            assert!(text.contains("never wait"), "{text}");
        }
    }
}
