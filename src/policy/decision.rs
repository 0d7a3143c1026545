//! What a person can answer to a permission request.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::event::PermissionOption;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Run this call once.
    Allow,
    /// Refuse this call; the model gets an error result and goes on.
    Deny,
    /// Run it, and this tool from now on in this session (for shell: this program, resolved
    /// to its file, and subcommand only; not offered where that would cover any program).
    AllowAll,
    /// Refuse it and take the tool away for the rest of the session.
    Disable,
    /// Refuse it and every further tool call in this turn.
    ForbidAll,
    /// End the turn now.
    Cancel,
}

impl Decision {
    pub const ALL: [Decision; 6] = [
        Decision::Allow,
        Decision::AllowAll,
        Decision::Deny,
        Decision::Disable,
        Decision::ForbidAll,
        Decision::Cancel,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Deny => "deny",
            Decision::AllowAll => "allow_all",
            Decision::Disable => "disable",
            Decision::ForbidAll => "forbid_all",
            Decision::Cancel => "cancel",
        }
    }

    /// The option as ACP and the permission event describe it.
    pub fn option(self) -> PermissionOption {
        let (name, kind) = match self {
            Decision::Allow => ("Allow once", "allow_once"),
            Decision::AllowAll => ("Allow always", "allow_always"),
            Decision::Deny => ("Deny", "reject_once"),
            Decision::Disable => ("Disable this tool", "reject_always"),
            Decision::ForbidAll => ("No more tools this turn", "reject_always"),
            Decision::Cancel => ("Cancel the turn", "reject_once"),
        };
        PermissionOption {
            option_id: self.as_str().into(),
            name: name.into(),
            kind: kind.into(),
        }
    }

    pub fn runs(self) -> bool {
        matches!(self, Decision::Allow | Decision::AllowAll)
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown decision {0:?}: expected allow, deny, allow_all, disable, forbid_all or cancel")]
pub struct UnknownDecision(pub String);

impl FromStr for Decision {
    type Err = UnknownDecision;

    /// Accepts the snake_case names and the ACP option kinds a client might send back.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Ok(match text.trim() {
            "allow" | "allow_once" | "approve" | "yes" => Decision::Allow,
            "deny" | "reject_once" | "reject" | "no" => Decision::Deny,
            "allow_all" | "allow_always" | "always" => Decision::AllowAll,
            "disable" | "reject_always" => Decision::Disable,
            "forbid_all" => Decision::ForbidAll,
            "cancel" | "cancelled" => Decision::Cancel,
            other => return Err(UnknownDecision(other.to_string())),
        })
    }
}

/// A person's answer: the decision, and for a denial the reason they gave, which the model
/// is told with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub decision: Decision,
    pub reason: Option<String>,
}

impl From<Decision> for Answer {
    fn from(decision: Decision) -> Self {
        Answer {
            decision,
            reason: None,
        }
    }
}
