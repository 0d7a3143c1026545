//! The approval gate: for each tool call, whether it runs, asks a person, or is refused.
//!
//! A preset (`policies/*.toml`, overridable from the user's config directory) says which tools
//! are offered, which danger levels run on their own, and per-tool rules on arguments (shell
//! command patterns, paths, URLs). The gate adds what a person decided during the session
//! (allow always, disable, forbid for the turn). Deny always wins. The [`Approver`] puts a
//! call that asks to a person and applies the answer, for corral's loop and external agents.

mod approver;
mod decision;
mod gate;
mod grant;
mod pattern;
mod preset;
mod preview;
mod program;
mod readonly;
mod report;
pub(crate) mod shell;

pub use approver::{Approval, Approver, Call, CallTarget, Caller, DeskLink, PermissionDesk};
pub use decision::{Answer, Decision, UnknownDecision};
pub use gate::{Gate, Verdict};
pub use preset::{Policy, PolicyError, PolicyOverrides, preset_names};
pub use preview::{approval_preview, diff_blocks};
pub use report::doctor_lines;
