//! Which program an ACP spec runs, with what environment, and what corral's preset can and
//! cannot hold the agent to.

use std::path::{Path, PathBuf};

use crate::backend::agent_process::Launch;
use crate::backend::external::ExternalContext;
use crate::backend::external::voucher::VoucherError;
use crate::backend::external::voucher::agents::{self, AgentKey};
use crate::error::Error;
use crate::model::ExternalSpec;
use crate::policy::Policy;
use crate::sandbox::programs::{self, Program, Source};

/// The agent as messages name it: `gemini`, `claude-agent-acp`, or the command's program.
pub(super) fn agent_name(spec: &ExternalSpec) -> String {
    match spec.agent.as_deref() {
        Some("claude") => "claude-agent-acp".into(),
        Some(command) if command.starts_with("cmd=") => command
            .trim_start_matches("cmd=")
            .split_whitespace()
            .next()
            .map(|p| p.rsplit('/').next().unwrap_or(p).to_owned())
            .unwrap_or_else(|| "the ACP agent".into()),
        Some(agent) => agent.to_owned(),
        None => "the ACP agent".into(),
    }
}

pub(super) fn launch_for(context: &ExternalContext) -> Result<Launch, Error> {
    let (program, args) = command_for(context.spec.agent.as_deref())?;
    Ok(Launch {
        program,
        args,
        cwd: context.root.clone(),
        env: agent_env(context.project_settings, context.home.as_deref()),
        env_remove: Vec::new(),
        env_clear: false,
        stderr_log: context.stderr_log.clone(),
        kind: "acp",
        display_name: None,
    })
}

/// The key an agent gets, as a voucher: claude-agent-acp reads claude's `ANTHROPIC_*`,
/// gemini `GEMINI_API_KEY`. opencode and `acp:cmd=` agents read keys corral cannot map to one
/// upstream (opencode has a provider per key), so they keep the environment as it is.
pub(super) async fn agent_key(context: &ExternalContext) -> Result<AgentKey, VoucherError> {
    let session = context.session.id();
    match context.spec.agent.as_deref() {
        Some("claude") => agents::claude(session).await,
        Some("gemini") => agents::gemini(session).await,
        Some("kimi") => {
            agents::openai_compatible(
                session,
                "KIMI_API_KEY",
                "KIMI_BASE_URL",
                Some("https://api.moonshot.ai/v1"),
            )
            .await
        }
        _ => Ok(AgentKey::default()),
    }
}

/// The program and arguments an ACP spec's agent runs as.
pub(super) fn command_for(agent: Option<&str>) -> Result<(PathBuf, Vec<String>), Error> {
    let usage = |m: String| Error::Usage(m);
    Ok(match agent {
        Some("opencode") => (find_program("opencode", "opencode-ai")?, vec!["acp".into()]),
        Some("gemini") => (
            find_program("gemini", "@google/gemini-cli")?,
            vec!["--acp".into()],
        ),
        Some("claude") => (
            find_program("claude-agent-acp", "@agentclientprotocol/claude-agent-acp")?,
            Vec::new(),
        ),
        Some("kimi") => (
            programs::find_installed(crate::backend::per_turn::runtimes::KIMI)
                .map_err(|e| Error::Usage(e.to_string()))?,
            vec!["acp".into()],
        ),
        Some(command) if command.starts_with("cmd=") => {
            let line = command.trim_start_matches("cmd=");
            let mut words = super::words::split(line)
                .map_err(|e| usage(format!("acp:cmd={line}: {e}")))?
                .into_iter();
            let Some(program) = words.next() else {
                return Err(usage("acp:cmd= needs a command line".into()));
            };
            let program = if program.contains('/') {
                PathBuf::from(program)
            } else {
                programs::on_path(&program, |var| std::env::var(var).ok())
                    .ok_or_else(|| usage(format!("acp:cmd=: {program} is not on PATH")))?
            };
            (program, words.collect())
        }
        other => {
            return Err(usage(format!(
                "acp: unknown agent {:?}: use opencode, gemini, claude, kimi or cmd=<command line>",
                other.unwrap_or_default()
            )));
        }
    })
}

/// The variables set for the agent: what keeps it from the project's settings, and a private
/// home (hermetic mode) where its config, caches and history stay.
pub(super) fn agent_env(project_settings: bool, home: Option<&Path>) -> Vec<(String, String)> {
    let mut env = project_settings_env(project_settings);
    if let Some(home) = home {
        let dir = |rel: &str| home.join(rel).to_string_lossy().into_owned();
        env.push(("HOME".to_owned(), home.to_string_lossy().into_owned()));
        env.push(("XDG_CONFIG_HOME".to_owned(), dir(".config")));
        env.push(("XDG_DATA_HOME".to_owned(), dir(".local/share")));
        env.push(("XDG_STATE_HOME".to_owned(), dir(".local/state")));
        env.push(("XDG_CACHE_HOME".to_owned(), dir(".cache")));
    }
    env
}

/// What keeps each agent from loading the settings planted in the project (hooks and MCP
/// commands that would run outside corral's sandbox), unless the person opted in. Set for every
/// ACP agent, `acp:cmd=` ones too: corral cannot tell which program a command line runs, and
/// the variables mean nothing to others. opencode: its project `opencode.json`, `.opencode/`
/// and `AGENTS.md`; gemini: an untrusted workspace, whose `.gemini/settings.json` it ignores
/// (in ACP mode an untrusted folder is not refused, only not read).
fn project_settings_env(project_settings: bool) -> Vec<(String, String)> {
    if project_settings {
        return Vec::new();
    }
    vec![
        ("OPENCODE_DISABLE_PROJECT_CONFIG".to_owned(), "1".to_owned()),
        ("GEMINI_CLI_TRUST_WORKSPACE".to_owned(), "false".to_owned()),
    ]
}

/// `session/new`'s `_meta`: claude-agent-acp takes its SDK options there — the tools the
/// preset does not offer and the recursion guard's as a deny list, and which settings files
/// to load (the project's only when the person opted in). Other agents ignore `_meta`.
pub(super) fn session_meta(context: &ExternalContext) -> serde_json::Value {
    let mut options = serde_json::Map::new();
    if takes_deny_list(context.spec.agent.as_deref()) {
        options.insert(
            "disallowedTools".into(),
            serde_json::json!(claude_disallowed(&context.policy)),
        );
    }
    if !context.project_settings {
        options.insert("settingSources".into(), serde_json::json!(["user"]));
    }
    serde_json::json!({"claudeCode": {"options": options}})
}

fn find_program(name: &'static str, package: &'static str) -> Result<PathBuf, Error> {
    let program = Program {
        name,
        package,
        override_var: None,
        source: Source::Npm,
    };
    programs::find_installed(program).map_err(|e| Error::Usage(e.to_string()))
}

/// The tools an agent has of its own, in corral's names.
const AGENT_TOOLS: [&str; 6] = [
    "shell",
    "read_file",
    "write_file",
    "search_files",
    "list_directory",
    "open_url",
];

/// claude-agent-acp's own tools for each of corral's.
fn claude_tools(tool: &str) -> &'static [&'static str] {
    match tool {
        "shell" => &["Bash", "BashOutput", "KillShell"],
        "read_file" => &["Read"],
        "write_file" => &["Write", "Edit", "MultiEdit", "NotebookEdit"],
        "search_files" => &["Grep", "Glob"],
        "list_directory" => &["LS"],
        "open_url" => &["WebFetch", "WebSearch"],
        _ => &[],
    }
}

/// Whether the agent takes a deny list on `session/new` (`_meta.claudeCode.options`): only
/// claude-agent-acp publishes that extension.
pub(super) fn takes_deny_list(agent: Option<&str>) -> bool {
    agent == Some("claude")
}

/// claude-agent-acp's tools the preset does not offer, and its subagent spawners unless the
/// session's opener lifted the recursion guard: never offered to its model.
pub(super) fn claude_disallowed(policy: &Policy) -> Vec<&'static str> {
    let mut denied: Vec<&'static str> = crate::backend::claude::recursion_guard(policy).to_vec();
    denied.extend(
        AGENT_TOOLS
            .iter()
            .filter(|tool| !policy.offers(tool))
            .flat_map(|tool| claude_tools(tool).iter().copied()),
    );
    denied
}

/// What of the preset an ACP agent is not held to (seed: "Where an ACP preset is enforced").
/// The agent runs its own tools; corral sees a call only when the agent asks
/// (`session/request_permission`) or reads and writes through corral's `fs/*`. gemini and
/// claude-agent-acp (in its "default" mode, which corral sets) ask before every edit, so the
/// preset's `write_file` rules hold for them; claude-agent-acp also takes the tools the preset
/// does not offer as a deny list. Everything else is advisory. `None`: nothing is.
pub(super) fn advisory(policy: &Policy, agent: Option<&str>, shown: &str) -> Option<String> {
    if policy.bypass && policy.rules.iter().all(|r| r.deny.is_empty()) {
        return None;
    }
    let asks_about_edits = matches!(agent, Some("gemini" | "claude"));
    let mut limits = Vec::new();
    for tool in AGENT_TOOLS {
        if !policy.offers(tool) {
            if !takes_deny_list(agent) {
                limits.push(format!("{tool} is not offered"));
            }
            continue;
        }
        if tool == "write_file" && asks_about_edits {
            continue;
        }
        let denied: Vec<&str> = policy
            .rules_for(tool)
            .flat_map(|r| r.deny.iter().map(String::as_str))
            .collect();
        if !denied.is_empty() {
            limits.push(format!("{tool} denies {}", denied.join(", ")));
        }
    }
    if limits.is_empty() {
        return None;
    }
    Some(format!(
        "the '{}' preset is advisory for {shown}'s own tools ({}): ACP cannot tell an agent what \
         it may not do, so corral enforces these only on the calls the agent asks permission for \
         and on files it reads and writes through corral (fs/*, confined to the session root); \
         tools the agent runs without asking are not held to them",
        policy.name,
        limits.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn preset(name: &str) -> Policy {
        Policy::load(name, None, &Default::default()).unwrap()
    }

    #[test]
    fn what_is_advisory_depends_on_the_agent() {
        let default = preset("default");
        // gemini and claude ask before every edit: the .git rule holds.
        assert_eq!(advisory(&default, Some("gemini"), "gemini"), None);
        assert_eq!(advisory(&default, Some("claude"), "claude"), None);
        let opencode = advisory(&default, Some("opencode"), "opencode").unwrap();
        assert!(opencode.contains("write_file denies .git"), "{opencode}");
        let readonly = preset("readonly");
        let gemini = advisory(&readonly, Some("gemini"), "gemini").unwrap();
        assert!(gemini.contains("shell is not offered"), "{gemini}");
        // claude is handed the tools it may not use.
        assert_eq!(advisory(&readonly, Some("claude"), "claude"), None);
        let denied = claude_disallowed(&readonly);
        assert!(
            denied.contains(&"Bash") && denied.contains(&"Write"),
            "{denied:?}"
        );
        assert!(!denied.contains(&"Read"), "{denied:?}");
        assert_eq!(claude_disallowed(&default), ["Task", "Agent", "Workflow"]);
    }

    #[test]
    fn the_recursion_guard_reaches_claude_agent_acp_unless_lifted() {
        for name in ["default", "lab", "bypass", "auto"] {
            let denied = claude_disallowed(&preset(name));
            for spawner in ["Task", "Agent", "Workflow"] {
                assert!(denied.contains(&spawner), "{name}: {denied:?}");
            }
        }
        let nested = Policy::load(
            "default",
            None,
            &crate::policy::PolicyOverrides {
                nested_agents: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert!(claude_disallowed(&nested).is_empty());
    }

    #[test]
    fn the_notebook_preset_takes_claude_agent_acps_file_and_shell_tools_away() {
        let denied = claude_disallowed(&preset("notebook"));
        for tool in [
            "Bash",
            "Read",
            "Write",
            "Edit",
            "Glob",
            "Grep",
            "NotebookEdit",
            "Task",
        ] {
            assert!(denied.contains(&tool), "{tool}: {denied:?}");
        }
        assert!(!denied.contains(&"WebFetch"), "{denied:?}");
        // lab is default's posture for the agent's own tools.
        assert_eq!(
            claude_disallowed(&preset("lab")),
            claude_disallowed(&preset("default"))
        );
    }
}
