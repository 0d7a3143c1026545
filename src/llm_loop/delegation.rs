//! When the loop offers `delegate` and `delegate_merge`: only in a session that can delegate
//! (it has a delegator: corral's own loop in a git repository, not itself a sub-session), and
//! then in a delegate-mode turn, or in any turn when the preset allows the tool by name
//! (`--allow delegate`, a preset's `allow`). A delegate-mode turn's first step is offered
//! `delegate` alone, and a tool call is required: the task is split before anything else.

use super::LlmLoop;

const TOOLS: [&str; 2] = ["delegate", "delegate_merge"];

pub(super) fn is_delegation(tool: &str) -> bool {
    TOOLS.contains(&tool)
}

impl LlmLoop {
    /// Whether the model is offered `tool` now.
    pub(super) fn offers(&self, tool: &str) -> bool {
        self.approver.offers(tool) && (!is_delegation(tool) || self.delegation_open(tool))
    }

    fn delegation_open(&self, tool: &str) -> bool {
        self.tool_settings.delegator.0.is_some()
            && (self.delegating || self.approver.lists_allowed(tool))
    }

    /// Whether `tool` is the only one the `step`th step may call (the first of a delegate
    /// turn).
    pub(super) fn forced_delegation(&self, step: u32) -> bool {
        self.delegating && step == 0 && self.tool_settings.delegator.0.is_some()
    }

    /// A delegate-mode turn follows (or a normal one, `false`). `Err`: why this session
    /// cannot delegate; the turn then runs normally.
    pub fn set_delegating(&mut self, on: bool) -> Result<(), String> {
        if on && self.tool_settings.delegator.0.is_none() {
            self.delegating = false;
            self.rebuild_prompt();
            return Err(
                "delegate mode is not available here: delegating needs a git \
                        repository (each task runs in a worktree of it), and a sub-session \
                        does not delegate again; this turn runs normally"
                    .to_string(),
            );
        }
        if on && !self.approver.offers("delegate") {
            self.delegating = false;
            self.rebuild_prompt();
            return Err(
                "delegate mode is not available: the permission preset does not offer the \
                 delegate tool; this turn runs normally"
                    .to_string(),
            );
        }
        self.delegating = on;
        self.rebuild_prompt();
        Ok(())
    }

    /// Hands the delegator what this session may not do now, so a sub-session is never
    /// offered a tool its parent is not (a person's `disable`, a `forbid_all`, the preset).
    pub(super) fn narrow_delegation(&self) {
        if let Some(delegator) = &self.tool_settings.delegator.0 {
            let denied = self
                .builtin_tools
                .names()
                .filter(|name| !is_delegation(name) && !self.approver.offers(name))
                .map(str::to_string)
                .collect();
            delegator.narrow(denied);
        }
    }

    /// The refusal for a delegation tool the model called though it was not offered.
    pub(super) fn check_offered(&self, tool: &str) -> Result<(), String> {
        if is_delegation(tool) && !self.offers(tool) {
            return Err(format!(
                "{tool} is not available in this turn (it is offered in delegate mode, or when \
                 the preset allows it); do the work yourself"
            ));
        }
        Ok(())
    }
}
