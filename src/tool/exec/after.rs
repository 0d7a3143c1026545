//! What a shell or python call may not leave behind in the root, undone once it ended:
//! repositories it made (git would run their config outside the sandbox) are taken apart, and
//! agent config it made or changed without a person's yes to this very call is moved to a
//! quarantine directory outside the root (an agent CLI would run its hooks and MCP servers
//! outside the sandbox). Either way the call fails, saying what was done and why.

use std::path::PathBuf;

use super::{ToolContext, ToolError, ToolOutput};
use crate::sandbox::paths::quarantine::{self, Snapshot};

/// The agent config found before the call; `None` when nothing is checked (no sandbox spec:
/// tests and one-off calls) or a person approved this call.
pub(super) struct Before(Option<Snapshot>);

impl Before {
    pub(super) async fn take(ctx: &ToolContext) -> Before {
        if ctx.settings.sandbox.is_none() || ctx.person_approved {
            return Before(None);
        }
        let root = ctx.root.clone();
        let snapshot = tokio::task::spawn_blocking(move || Snapshot::take(&root))
            .await
            .unwrap_or_default();
        Before(Some(snapshot))
    }
}

/// Where quarantined config goes.
fn quarantine_dir(ctx: &ToolContext) -> PathBuf {
    ctx.settings
        .quarantine
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join("corral-quarantine"))
}

pub(super) async fn undo(
    ctx: &ToolContext,
    before: Before,
    result: Result<ToolOutput, ToolError>,
) -> Result<ToolOutput, ToolError> {
    let Some(spec) = ctx.settings.sandbox.as_ref() else {
        return result;
    };
    let (root, known) = (ctx.root.clone(), spec.protected.clone());
    let (jail, call) = (quarantine_dir(ctx), ctx.call_id.clone());
    let (removed, moved) = tokio::task::spawn_blocking(move || {
        let removed = crate::sandbox::paths::scan::remove_planted(&root, &known);
        let moved = before
            .0
            .map(|snapshot| quarantine::quarantine_changes(&root, &snapshot, &jail, &call))
            .unwrap_or_default();
        (removed, moved)
    })
    .await
    .unwrap_or_default();
    if removed.is_empty() && moved.is_empty() {
        return result;
    }
    let mut text = match result {
        Ok(out) => out.text,
        Err(e) => e.to_string(),
    };
    if !removed.is_empty() {
        text.push_str(&format!(
            "\n[the sandbox removed the git directories this call made: {}. No tool may make a \
             repository in the session root (git would later run its config outside the \
             sandbox); use $TMPDIR for scratch repositories]",
            removed.join(", ")
        ));
    }
    if !moved.is_empty() {
        let list: Vec<String> = moved
            .iter()
            .map(|m| {
                let what = if m.changed { "changed" } else { "new" };
                match &m.to {
                    Ok(to) => format!("{} ({what}) quarantined to {}", m.shown, to.display()),
                    Err(e) => format!("{} ({what}) could not be moved: {e}", m.shown),
                }
            })
            .collect();
        text.push_str(&format!(
            "\n[the sandbox moved agent config this call made or changed out of the root: {}. \
             Agent config (.claude/, .mcp.json, opencode.json, .vscode/ …) runs hooks and \
             servers outside the sandbox, so only a person approving the very call may create \
             or change it; use write_file (which asks) or ask the person]",
            list.join("; ")
        ));
    }
    Err(ToolError::SandboxDenied(text))
}
