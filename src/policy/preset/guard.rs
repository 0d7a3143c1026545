//! The recursion guard: an agent corral runs may not open, drive or close agents of its own,
//! so one prompt cannot grow into a tree of processes (a fork bomb). For corral's own loop
//! that means the agent-control tools of any MCP server it was given: corral's own `corral
//! mcp` (agent_open, agent_send, agent_run, …) and Kaimon's, both spelled `agent_*`. Which
//! server a session's tools come from is the person's configuration, and a server may be
//! named anything, so the guard goes by the tool's name on every server. External agents get
//! the same guard as their own settings (claude's subagent tools in `--disallowedTools` and
//! claude-agent-acp's `disallowedTools`; see the backends).
//!
//! The guard holds whatever the preset, `--allow` or a rule says; only the session's opener
//! lifts it (MCP `agent_open` with `disallowed_tools: []`, as Kaimon's agent_open).

use crate::config::mcp::{NAME_SEPARATOR, wildcard_match};

/// The agent-control tools, as a glob over an MCP tool's own name.
const AGENT_TOOLS: &str = "agent_*";

/// How `corral policies show` states the guard.
pub(super) const DESCRIBED: &str = "recursion guard: on (MCP tools named agent_* are withheld)\n";

/// Whether the guard withholds `tool` (`SERVER__TOOL` for an MCP server's tool).
pub(super) fn withholds(tool: &str) -> bool {
    tool.split_once(NAME_SEPARATOR)
        .is_some_and(|(_, name)| wildcard_match(AGENT_TOOLS, name))
}

#[cfg(test)]
mod tests {
    use crate::policy::{Policy, PolicyOverrides};

    fn load(name: &str, nested_agents: bool) -> Policy {
        let overrides = PolicyOverrides {
            nested_agents,
            ..PolicyOverrides::default()
        };
        Policy::load(name, None, &overrides).unwrap()
    }

    #[test]
    fn agent_tools_of_any_server_are_withheld_until_the_opener_lifts_the_guard() {
        for preset in ["default", "bypass", "notebook", "lab", "auto"] {
            let guarded = load(preset, false);
            for tool in ["corral__agent_open", "kaimon__agent_send", "x__agent_close"] {
                assert!(!guarded.offers(tool), "{preset}: {tool} offered");
            }
            // Only the agent_* tools: a server's other tools are the preset's.
            assert!(guarded.offers("git__status"), "{preset}");
            let nested = load(preset, true);
            assert!(nested.offers("corral__agent_open"), "{preset}");
        }
    }

    #[test]
    fn allow_does_not_lift_the_guard() {
        let overrides = PolicyOverrides {
            allow: vec!["corral__agent_open".into(), "corral__*".into()],
            ..PolicyOverrides::default()
        };
        let policy = Policy::load("specialist", None, &overrides).unwrap();
        assert!(!policy.offers("corral__agent_open"));
        assert!(policy.offers("corral__read_notes"));
    }
}
