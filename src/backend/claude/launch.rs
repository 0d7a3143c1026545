//! How the claude CLI is found and started: the program, the stream-json flags, the
//! environment that keeps it on the machine, and corral's preset as claude's own permission
//! flags.
//!
//! | corral policy                      | claude flags                                          |
//! |------------------------------------|-------------------------------------------------------|
//! | `bypass = true` (bypass)           | `--permission-mode bypassPermissions` (+ `IS_SANDBOX=1` as root) |
//! | auto-approves moderate tools (auto)| `--permission-mode acceptEdits`                       |
//! | anything else (default, readonly, specialist) | `--permission-mode default`                |
//! | a tool not offered (readonly, specialist, `--deny`) | its claude tools in `--disallowedTools` |
//! | `--allow TOOL`                     | its claude tools in `--allowedTools`                  |
//! | recursion guard (unless the opener lifted it) | `Task`, `Agent`, `Workflow` in `--disallowedTools` |
//! | any other offered tool (not bypass)| its claude tools in `permissions.ask` (`--settings`)  |
//! | always, unless `[agents] project_settings = true` | `--setting-sources user`           |
//!
//! corral's default preset asks before edits, so it maps to claude's `default` mode rather than
//! `acceptEdits`: every edit claude would make comes to corral's gate as a `can_use_tool`
//! request (`--permission-prompt-tool stdio`), exactly like a native `write_file`. For the same
//! reason claude's own shortcuts (read-only commands, reads outside the root) are turned off
//! with `ask` rules: the gate answers those at once when its rules allow them.
//!
//! The project's own settings (`.claude/settings.json`, `.claude/settings.local.json`,
//! `.mcp.json`) are not loaded unless the person opts in: their hooks and MCP server commands
//! would run as the person, outside corral's sandbox, and anything corral's tools (or an
//! earlier agent) wrote into the project could plant them. claude `-p` skips its own trust
//! prompt, so nothing else would stop them.

use std::path::PathBuf;

use crate::backend::agent_process::Launch;
use crate::backend::external::ExternalContext;
use crate::policy::Policy;
use crate::sandbox::programs::{Program, Source};
use crate::tool::Danger;

/// The environment variable naming the claude program to run.
pub const PROGRAM_ENV: &str = "CORRAL_CLAUDE";

/// What keeps claude (the CLI, and claude-agent-acp on its SDK) from phoning home.
pub(crate) const QUIET_ENV: [(&str, &str); 2] = [
    ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
    ("DISABLE_AUTOUPDATER", "1"),
];

/// corral tools and the claude tools that amount to them.
const TOOL_MAP: &[(&str, &[&str])] = &[
    ("shell", &["Bash"]),
    ("read_file", &["Read"]),
    (
        "write_file",
        &["Write", "Edit", "MultiEdit", "NotebookEdit"],
    ),
    ("search_files", &["Glob", "Grep"]),
    ("list_directory", &["LS"]),
    ("open_url", &["WebFetch"]),
];

/// Subagent spawners: a claude agent owned by corral may not multiply itself (the recursion
/// guard; `Policy::nested_agents` lifts it). claude-agent-acp runs the same tools.
pub(crate) const RECURSION_GUARD: &[&str] = &["Task", "Agent", "Workflow"];

/// The recursion guard's tools, unless the session's opener lifted it.
pub(crate) fn recursion_guard(policy: &Policy) -> &'static [&'static str] {
    if policy.nested_agents {
        &[]
    } else {
        RECURSION_GUARD
    }
}

/// The claude CLI: `$CORRAL_CLAUDE`, else on PATH, else the copy scripts/install-agent-clis
/// installs.
pub const PROGRAM: Program = Program {
    name: "claude",
    package: "@anthropic-ai/claude-code",
    override_var: Some(PROGRAM_ENV),
    source: Source::Npm,
};

/// claude's permission flags for a corral policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionFlags {
    pub mode: &'static str,
    pub allowed: Vec<String>,
    pub disallowed: Vec<String>,
    /// Tools claude must ask about even when it would not (`permissions.ask` in `--settings`).
    pub ask: Vec<String>,
}

pub fn permission_flags(policy: &Policy) -> PermissionFlags {
    let mode = if policy.bypass {
        "bypassPermissions"
    } else if policy.auto_approve.is_some_and(|d| d >= Danger::Moderate) {
        "acceptEdits"
    } else {
        "default"
    };
    let mut allowed = Vec::new();
    let mut ask = Vec::new();
    let mut disallowed: Vec<String> = recursion_guard(policy)
        .iter()
        .map(|t| t.to_string())
        .collect();
    for (corral, claude) in TOOL_MAP {
        let names = claude.iter().map(|t| t.to_string());
        if !policy.offers(corral) {
            disallowed.extend(names);
        } else if policy.allowed.iter().any(|a| a == corral) {
            allowed.extend(names);
        } else if !policy.bypass {
            // claude runs read-only commands and reads anywhere without asking; corral's gate
            // has its own rules for them (confinement to the root, say), so claude must ask.
            ask.extend(names);
        }
    }
    PermissionFlags {
        mode,
        allowed,
        disallowed,
        ask,
    }
}

/// The launch for a session: program, flags, environment.
pub fn launch(context: &ExternalContext, program: PathBuf) -> Launch {
    let flags = permission_flags(&context.policy);
    let mut args: Vec<String> = [
        "-p",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--verbose",
        "--include-partial-messages",
        "--permission-prompt-tool",
        "stdio",
        "--permission-mode",
        flags.mode,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Some(system) = &context.system {
        args.push("--append-system-prompt".into());
        args.push(system.clone());
    }
    if !flags.allowed.is_empty() {
        args.push("--allowedTools".into());
        args.push(flags.allowed.join(","));
    }
    if !flags.disallowed.is_empty() {
        args.push("--disallowedTools".into());
        args.push(flags.disallowed.join(","));
    }
    if !flags.ask.is_empty() {
        args.push("--settings".into());
        args.push(serde_json::json!({"permissions": {"ask": flags.ask}}).to_string());
    }
    if !context.project_settings {
        args.push("--setting-sources".into());
        args.push("user".into());
    }
    if let Some(model) = &context.spec.model {
        // The `=` form: a model name can never be read as another flag.
        args.push(format!("--model={model}"));
    }
    if let Some(effort) = context.effort {
        // The `=` form, like `--resume=`: a value never reads as another flag.
        args.push(format!("--effort={effort}"));
    }
    if let Some(id) = &context.resume {
        // The `=` form: an id can never be read as another flag.
        args.push(format!("--resume={id}"));
    }
    let mut env: Vec<(String, String)> = QUIET_ENV
        .iter()
        .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
        .collect();
    if flags.mode == "bypassPermissions" && nix::unistd::geteuid().is_root() {
        // claude refuses to skip permissions as root unless told it is sandboxed.
        env.push(("IS_SANDBOX".into(), "1".into()));
    }
    if let Some(home) = &context.home {
        let home = home.display().to_string();
        env.push(("HOME".into(), home.clone()));
        env.push(("XDG_CONFIG_HOME".into(), format!("{home}/.config")));
        env.push(("CLAUDE_CONFIG_DIR".into(), format!("{home}/.claude")));
    }
    Launch {
        program,
        args,
        cwd: context.root.clone(),
        env,
        // Set when corral itself runs under claude code: the child would think it is nested.
        env_remove: vec!["CLAUDECODE".into(), "CLAUDE_CODE_ENTRYPOINT".into()],
        env_clear: false,
        stderr_log: context.stderr_log.clone(),
        kind: "claude",
        display_name: None,
    }
}

/// The corral tool a claude tool amounts to, and the call's arguments in its shape.
pub struct Mapped {
    pub corral_tool: Option<&'static str>,
    pub args: serde_json::Value,
    /// ACP tool kind.
    pub kind: &'static str,
    pub title: String,
}

pub fn map_tool(name: &str, input: &serde_json::Value) -> Mapped {
    use serde_json::json;
    let text = |key: &str| input.get(key).and_then(|v| v.as_str()).unwrap_or_default();
    let path = || {
        let p = text("file_path");
        if p.is_empty() { text("path") } else { p }
    };
    let (corral_tool, args, kind, title) = match name {
        "Bash" => (
            Some("shell"),
            json!({"command": text("command")}),
            "execute",
            text("command").to_string(),
        ),
        "Read" => (
            Some("read_file"),
            json!({"path": path()}),
            "read",
            format!("Read {}", path()),
        ),
        "Write" => (
            Some("write_file"),
            json!({"path": path(), "content": text("content")}),
            "edit",
            format!("Write {}", path()),
        ),
        "Edit" => (
            Some("write_file"),
            json!({"path": path(), "content": text("new_string")}),
            "edit",
            format!("Edit {}", path()),
        ),
        "MultiEdit" => {
            let content: Vec<&str> = input
                .get("edits")
                .and_then(|e| e.as_array())
                .map(|edits| {
                    edits
                        .iter()
                        .filter_map(|e| e.get("new_string").and_then(|s| s.as_str()))
                        .collect()
                })
                .unwrap_or_default();
            (
                Some("write_file"),
                json!({"path": path(), "content": content.join("\n")}),
                "edit",
                format!("Edit {}", path()),
            )
        }
        "NotebookEdit" => (
            Some("write_file"),
            json!({"path": text("notebook_path"), "content": text("new_source")}),
            "edit",
            format!("Edit {}", text("notebook_path")),
        ),
        "Glob" | "Grep" => {
            // Glob's pattern names files; Grep's is the text to find, its glob narrows files.
            let mut args = if name == "Glob" {
                json!({"pattern": text("pattern")})
            } else {
                json!({"query": text("pattern")})
            };
            if name == "Grep" && !text("glob").is_empty() {
                args["pattern"] = json!(text("glob"));
            }
            if !text("path").is_empty() {
                args["path"] = json!(text("path"));
            }
            (
                Some("search_files"),
                args,
                "search",
                format!("{name} {}", text("pattern")),
            )
        }
        "LS" => (
            Some("list_directory"),
            json!({"path": path()}),
            "read",
            format!("List {}", path()),
        ),
        "WebFetch" => (
            Some("open_url"),
            json!({"url": text("url")}),
            "fetch",
            format!("Fetch {}", text("url")),
        ),
        "WebSearch" => (
            None,
            input.clone(),
            "fetch",
            format!("Search {}", text("query")),
        ),
        _ => (None, input.clone(), "other", name.to_string()),
    };
    let title = if title.trim().is_empty() {
        name.to_string()
    } else {
        title.chars().take(200).collect()
    };
    Mapped {
        corral_tool,
        args,
        kind,
        title,
    }
}
