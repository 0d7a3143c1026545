//! The ACP agents corral knows, one line each: the name and version an installed agent gives
//! at `initialize` (asked in the sandbox, the agent stopped after), `missing` with how to
//! install it, or `warn` when it is there but does not answer.

use std::time::Duration;

use super::{Report, State};
use crate::backend::acp_probe::{self, KNOWN_AGENTS, Probe};
use crate::surface::safe_text::escape_line;

/// gemini and opencode take about 7 s to answer `initialize` on two busy cores; an agent
/// that needs three times that is as good as broken here.
const PROBE_TIMEOUT: Duration = Duration::from_secs(20);

pub(super) async fn acp_agents(report: &mut Report) {
    // Side by side: the slowest agent sets the wait, not the sum of them.
    let probes = KNOWN_AGENTS
        .iter()
        .map(|(agent, _)| acp_probe::probe(agent, PROBE_TIMEOUT));
    let found = futures_util::future::join_all(probes).await;
    for ((agent, program), probe) in KNOWN_AGENTS.iter().zip(found) {
        let what = format!("acp agent {program} (acp:{agent})");
        let (state, detail) = line(probe);
        report.line(state, &what, detail);
    }
}

fn line(probe: Probe) -> (State, String) {
    match probe {
        Probe::Answered {
            name,
            version,
            took,
        } => {
            // The agent's own words: shown, never obeyed, and kept to one plain line.
            let name = if name.is_empty() {
                "no agentInfo name".to_owned()
            } else {
                escape_line(&name)
            };
            let version = if version.is_empty() {
                "no version".to_owned()
            } else {
                escape_line(&version)
            };
            (
                State::Ok,
                format!(
                    "{name} {version} (answered initialize in {:.1} s)",
                    took.as_secs_f64()
                ),
            )
        }
        Probe::Missing(how) => (State::Missing, how),
        Probe::NoAnswer(waited) => (
            State::Warn,
            format!(
                "installed, but did not answer initialize within {} s",
                waited.as_secs()
            ),
        ),
        Probe::Failed(why) => (
            State::Warn,
            format!(
                "installed, but failed to answer initialize: {}",
                escape_line(&why)
            ),
        ),
    }
}
