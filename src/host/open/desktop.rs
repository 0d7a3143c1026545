//! Desktop tools a session cannot use are not offered: the session's tool environment is
//! probed for a display and a session bus, and one note says what was withheld and why.
//!
//! The note is a start-up line (`notes`: stderr under `corral run`, the session view's notes)
//! and a `tracing` warning, not an event: on a headless box it is said at every start, and
//! what a session's events carry is what happened in it.

use crate::tool::{Presence, ToolRegistry};

/// Withholds from `tools` what the desktop of `env` (the session's tool environment) cannot
/// serve, and says so once.
pub(super) async fn withhold_unusable(
    tools: &mut ToolRegistry,
    env: &[(String, String)],
    notes: &mut (dyn std::io::Write + Send),
) {
    let presence = Presence::probe(env).await;
    let withheld = tools.withhold_unusable(&presence);
    if withheld.is_empty() {
        return;
    }
    // One clause per reason: "screenshot, clipboard_read (no display: DISPLAY is not set)".
    let mut clauses: Vec<(String, Vec<&str>)> = Vec::new();
    for (name, why) in &withheld {
        match clauses.iter_mut().find(|(reason, _)| reason == why) {
            Some((_, names)) => names.push(name),
            None => clauses.push((why.clone(), vec![name])),
        }
    }
    let said: Vec<String> = clauses
        .iter()
        .map(|(why, names)| format!("{} ({why})", names.join(", ")))
        .collect();
    let message = format!("desktop tools not offered: {}", said.join("; "));
    tracing::warn!(%message, "withholding desktop tools");
    let _ = writeln!(notes, "{message}");
}
