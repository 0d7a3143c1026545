//! The agent runtimes corral drives, as data: how each is found, how long its process lives,
//! how messages reach it while it works, and (for the per-turn ones) the command line of one
//! turn. `corral doctor` lists this table; the per-turn backend runs from it.

use crate::policy::Policy;
use crate::sandbox::programs::{Program, Source};
use crate::tool::Danger;

/// How long a runtime's process lives (seed 003's lifecycle kinds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Lifecycle {
    pub kind: LifecycleKind,
    /// No process until the first message (nothing starts when the session opens).
    pub defer_spawn: bool,
    /// The process is ended as soon as its turn's last event is in, instead of waiting for
    /// it to exit by itself (opencode keeps its server up for a while after answering).
    pub terminate_on_end: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LifecycleKind {
    /// One process for many turns; messages go to its stdin.
    Persistent,
    /// A process per turn that exits; the conversation goes on through the runtime's own
    /// session id.
    PerTurn,
}

/// How a message sent while a turn runs reaches the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Steering {
    /// Held until a safe boundary (claude: no streamed block open, no tool use outstanding).
    Gated,
    /// Written at once (codex `turn/steer`).
    Direct,
    /// Not at all: it waits for the turn's end and becomes the next turn.
    None,
}

/// What the runtime writes on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// claude's stream-json (`system`/`assistant`/`user`/`result` lines): qwen-code.
    ClaudeStream,
    /// cursor-agent's stream-json: claude's line types plus `tool_call` started/completed.
    CursorStream,
    /// gemini's `-o stream-json` (`init`, `message`, `tool_use`, `tool_result`, `result`).
    GeminiStream,
    /// `opencode run --format json` (`step_start`, `text`, `tool_use`, `step_finish`).
    OpencodeJson,
    /// copilot's `--output-format json` (`assistant.message_delta`, `tool.execution_*`,
    /// `result`).
    CopilotJson,
    /// Plain text lines: the answer itself.
    PlainText,
    /// pi's RPC mode (persistent): `message_update`, `tool_execution_*`, `agent_end`.
    PiRpc,
}

/// How the prompt reaches a per-turn process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptVia {
    /// Written to stdin, which is then closed.
    Stdin,
    /// The last argument, after `--` so it is never read as a flag.
    AfterDashes,
    /// The value of this flag (`-p=<prompt>`), in the `=` form so it is never read as one.
    Flag(&'static str),
}

/// One runtime.
#[derive(Debug, Clone, Copy)]
pub struct Runtime {
    /// The spec's first word (`gemini`, `copilot`, …) and the name in listings.
    pub name: &'static str,
    pub program: Program,
    pub lifecycle: Lifecycle,
    pub steering: Steering,
    /// For per-turn runtimes; persistent ones speak their own protocols.
    pub format: Format,
    pub prompt_via: PromptVia,
    /// Takes a model after the name (`gemini:<model>`).
    pub takes_model: bool,
    /// Takes standing instructions of its own every turn (`--append-system-prompt`); the
    /// others get them in front of a conversation's first prompt.
    pub takes_instructions: bool,
    /// Why it cannot be installed from a package registry, and how it is installed instead.
    pub not_on_registries: Option<&'static str>,
}

pub const PERSISTENT: Lifecycle = Lifecycle {
    kind: LifecycleKind::Persistent,
    defer_spawn: false,
    terminate_on_end: false,
};
const PER_TURN: Lifecycle = Lifecycle {
    kind: LifecycleKind::PerTurn,
    defer_spawn: true,
    terminate_on_end: false,
};

const fn npm(name: &'static str, package: &'static str, var: &'static str) -> Program {
    Program {
        name,
        package,
        override_var: Some(var),
        source: Source::Npm,
    }
}

/// The per-turn runtimes corral runs itself (the `per_turn` backend).
pub const PER_TURN_RUNTIMES: &[Runtime] = &[
    Runtime {
        name: "gemini",
        program: npm("gemini", "@google/gemini-cli", "CORRAL_GEMINI"),
        lifecycle: PER_TURN,
        steering: Steering::None,
        format: Format::GeminiStream,
        prompt_via: PromptVia::Stdin,
        takes_model: true,
        takes_instructions: false,
        not_on_registries: None,
    },
    Runtime {
        name: "qwen",
        program: npm("qwen", "@qwen-code/qwen-code", "CORRAL_QWEN"),
        lifecycle: PER_TURN,
        steering: Steering::None,
        format: Format::ClaudeStream,
        prompt_via: PromptVia::Stdin,
        takes_model: true,
        takes_instructions: true,
        not_on_registries: None,
    },
    Runtime {
        name: "copilot",
        program: npm("copilot", "@github/copilot", "CORRAL_COPILOT"),
        lifecycle: PER_TURN,
        steering: Steering::None,
        format: Format::CopilotJson,
        prompt_via: PromptVia::Flag("--prompt"),
        takes_model: true,
        takes_instructions: false,
        not_on_registries: None,
    },
    Runtime {
        name: "opencode",
        program: npm("opencode", "opencode-ai", "CORRAL_OPENCODE"),
        lifecycle: Lifecycle {
            terminate_on_end: true,
            ..PER_TURN
        },
        steering: Steering::None,
        format: Format::OpencodeJson,
        prompt_via: PromptVia::AfterDashes,
        takes_model: true,
        takes_instructions: false,
        not_on_registries: None,
    },
    Runtime {
        name: "cursor",
        program: Program {
            name: "cursor-agent",
            package: "cursor-agent (from https://cursor.com/install)",
            override_var: Some("CORRAL_CURSOR"),
            source: Source::Vendor,
        },
        lifecycle: PER_TURN,
        steering: Steering::None,
        format: Format::CursorStream,
        prompt_via: PromptVia::AfterDashes,
        takes_model: true,
        takes_instructions: false,
        not_on_registries: Some(
            "Cursor ships cursor-agent only from its own site (`curl https://cursor.com/install \
             -fsS | bash`); the npm package of that name is someone else's",
        ),
    },
    Runtime {
        name: "antigravity",
        program: Program {
            name: "antigravity",
            package: "Google Antigravity (from https://antigravity.google)",
            override_var: Some("CORRAL_ANTIGRAVITY"),
            source: Source::Vendor,
        },
        lifecycle: PER_TURN,
        steering: Steering::None,
        format: Format::PlainText,
        prompt_via: PromptVia::Stdin,
        takes_model: false,
        takes_instructions: false,
        not_on_registries: Some(
            "Antigravity is installed from Google's own site, not from a package registry",
        ),
    },
];

/// The runtimes corral drives over their own protocols, for listings.
pub const PERSISTENT_RUNTIMES: &[(&str, Lifecycle, Steering)] = &[
    ("claude", PERSISTENT, Steering::Gated),
    ("codex", PERSISTENT, Steering::Direct),
    ("pi", PERSISTENT, Steering::Direct),
    // Over ACP, which has no steering.
    ("kimi", PERSISTENT, Steering::None),
    ("acp", PERSISTENT, Steering::None),
];

impl Lifecycle {
    /// `per-turn, defer-spawn, terminate-on-end`, as listings show it.
    pub fn describe(self) -> String {
        let mut text = match self.kind {
            LifecycleKind::PerTurn => "per-turn".to_string(),
            LifecycleKind::Persistent => "persistent".to_string(),
        };
        if self.defer_spawn {
            text.push_str(", defer-spawn");
        }
        if self.terminate_on_end {
            text.push_str(", terminate-on-end");
        }
        text
    }
}

impl Steering {
    pub fn name(self) -> &'static str {
        match self {
            Steering::Gated => "gated",
            Steering::Direct => "direct",
            Steering::None => "none",
        }
    }
}

/// pi, kept alive in its RPC mode (`backend::pi`).
pub const PI: Program = npm("pi", "@mariozechner/pi-coding-agent", "CORRAL_PI");

/// Kimi CLI, driven over its ACP mode (`kimi acp`). It needs Python 3.12 or newer, which
/// Debian 12 (this project's CI) does not have, so it cannot be installed here.
pub const KIMI: Program = Program {
    name: "kimi",
    package: "kimi-cli from PyPI (`uv tool install kimi-cli` or `pipx install kimi-cli`; it \
              needs Python >= 3.12)",
    override_var: Some("CORRAL_KIMI"),
    source: Source::Vendor,
};

pub fn per_turn(name: &str) -> Option<&'static Runtime> {
    PER_TURN_RUNTIMES.iter().find(|r| r.name == name)
}

/// What the session's preset lets a per-turn agent do without asking. Such an agent cannot
/// ask corral in the middle of its turn (its headless mode has no way to), so what the preset
/// would ask about is simply not allowed, and what it never offers is taken away where the
/// runtime can be told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unasked {
    pub edits: bool,
    pub shell: bool,
    pub fetch: bool,
    /// Tools the preset does not offer at all.
    pub no_edits: bool,
    pub no_shell: bool,
    pub no_fetch: bool,
}

impl Unasked {
    pub fn of(policy: &Policy) -> Unasked {
        let runs = |tool: &str, manifest: Danger| {
            policy.offers(tool)
                && (policy.bypass
                    || policy.allowed.iter().any(|a| a == tool)
                    || (!policy.always_ask.iter().any(|a| a == tool)
                        && policy
                            .auto_approve
                            .is_some_and(|most| policy.danger_of(tool, manifest) <= most)))
        };
        Unasked {
            edits: runs("write_file", manifest_danger("write_file")),
            shell: runs("shell", manifest_danger("shell")),
            fetch: runs("open_url", manifest_danger("open_url")),
            no_edits: !policy.offers("write_file"),
            no_shell: !policy.offers("shell"),
            no_fetch: !policy.offers("open_url"),
        }
    }
}

/// A built-in tool's danger as its manifest (tools/*.toml) has it; dangerous if unknown.
fn manifest_danger(tool: &str) -> Danger {
    crate::tool::manifests()
        .ok()
        .and_then(|all| all.iter().find(|m| m.name == tool))
        .map_or(Danger::Dangerous, |m| m.danger)
}

/// What one turn's process is started with, besides the program.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TurnCommand {
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// Written to stdin, which is then closed; `None`: stdin is closed at once.
    pub stdin: Option<String>,
}

/// What a turn's command line is made from.
pub struct Invocation<'a> {
    pub prompt: &'a str,
    pub model: Option<&'a str>,
    /// The runtime's own session id, to continue.
    pub resume: Option<&'a str>,
    pub unasked: Unasked,
    pub system: Option<&'a str>,
    pub project_settings: bool,
}

impl Runtime {
    /// The command line of one turn.
    pub fn command(&self, inv: &Invocation<'_>) -> TurnCommand {
        let mut cmd = TurnCommand::default();
        let args = &mut cmd.args;
        let mut push = |a: &str| args.push(a.to_string());
        let u = inv.unasked;
        match self.name {
            "gemini" => {
                push("--output-format=stream-json");
                let mode = if u.edits && u.shell && u.fetch {
                    "yolo"
                } else if u.edits {
                    "auto_edit"
                } else {
                    "default"
                };
                push(&format!("--approval-mode={mode}"));
                if u.shell && mode != "yolo" {
                    push("--allowed-tools=run_shell_command");
                }
                if let Some(model) = inv.model {
                    push(&format!("--model={model}"));
                }
                if let Some(id) = inv.resume {
                    push(&format!("--resume={id}"));
                }
                // gemini reads the prompt from stdin when `-p` is empty.
                push("--prompt=");
                // Headless gemini refuses an untrusted folder. Trust loads the project's
                // `.gemini/` settings, which corral checks for before each turn instead.
                cmd.env
                    .push(("GEMINI_CLI_TRUST_WORKSPACE".into(), "true".into()));
            }
            "qwen" => {
                push("--output-format=stream-json");
                push("--include-partial-messages");
                let mode = if u.edits && u.shell && u.fetch {
                    "yolo"
                } else if u.edits {
                    "auto-edit"
                } else {
                    "default"
                };
                push(&format!("--approval-mode={mode}"));
                let mut excluded = Vec::new();
                if u.no_shell {
                    excluded.push("run_shell_command");
                }
                if u.no_edits {
                    excluded.extend(["write_file", "edit"]);
                }
                if u.no_fetch {
                    excluded.push("web_fetch");
                }
                if !excluded.is_empty() {
                    push(&format!("--exclude-tools={}", excluded.join(",")));
                }
                if u.shell && mode != "yolo" {
                    push("--allowed-tools=run_shell_command");
                }
                if let Some(system) = inv.system {
                    push(&format!("--append-system-prompt={system}"));
                }
                if let Some(model) = inv.model {
                    push(&format!("--model={model}"));
                }
                if let Some(id) = inv.resume {
                    push(&format!("--resume={id}"));
                }
            }
            "copilot" => {
                push("--output-format=json");
                push("--no-auto-update");
                push("--no-ask-user");
                push("--disable-builtin-mcps");
                if !inv.project_settings {
                    push("--no-custom-instructions");
                }
                if u.edits && u.shell && u.fetch {
                    push("--allow-all-tools");
                } else {
                    if u.edits {
                        push("--allow-tool=write");
                    }
                    if u.shell {
                        push("--allow-tool=shell");
                    }
                    if u.fetch {
                        push("--allow-tool=url");
                    }
                }
                if u.no_shell {
                    push("--deny-tool=shell");
                }
                if u.no_edits {
                    push("--deny-tool=write");
                }
                if u.no_fetch {
                    push("--deny-tool=url");
                }
                if let Some(model) = inv.model {
                    push(&format!("--model={model}"));
                }
                if let Some(id) = inv.resume {
                    push(&format!("--resume={id}"));
                }
                cmd.env.push(("COPILOT_OFFLINE".into(), "true".into()));
            }
            "opencode" => {
                push("run");
                push("--format=json");
                if let Some(model) = inv.model {
                    push(&format!("--model={model}"));
                }
                if let Some(id) = inv.resume {
                    push(&format!("--session={id}"));
                }
                cmd.env
                    .push(("OPENCODE_PERMISSION".into(), opencode_permission(u)));
            }
            "cursor" => {
                push("--print");
                push("--output-format=stream-json");
                push("--trust");
                if u.edits && u.shell && u.fetch {
                    push("--force");
                }
                if let Some(model) = inv.model {
                    push(&format!("--model={model}"));
                }
                if let Some(id) = inv.resume {
                    push(&format!("--resume={id}"));
                }
            }
            _ => {}
        }
        match self.prompt_via {
            PromptVia::Stdin => cmd.stdin = Some(inv.prompt.to_string()),
            PromptVia::AfterDashes => {
                cmd.args.push("--".into());
                cmd.args.push(inv.prompt.to_string());
            }
            PromptVia::Flag(flag) => cmd.args.push(format!("{flag}={}", inv.prompt)),
        }
        cmd
    }
}

/// opencode's permission table (`OPENCODE_PERMISSION`): what runs, what is refused. `ask` is
/// never used: `opencode run` has nobody to ask.
fn opencode_permission(u: Unasked) -> String {
    let rule = |allowed: bool| if allowed { "allow" } else { "deny" };
    serde_json::json!({
        "edit": rule(u.edits),
        "bash": rule(u.shell),
        "webfetch": rule(u.fetch),
        "external_directory": "deny",
        "doom_loop": "deny",
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inv<'a>(unasked: Unasked) -> Invocation<'a> {
        Invocation {
            prompt: "--yolo do it",
            model: Some("m"),
            resume: Some("--help"),
            unasked,
            system: None,
            project_settings: false,
        }
    }

    const NOTHING: Unasked = Unasked {
        edits: false,
        shell: false,
        fetch: false,
        no_edits: false,
        no_shell: false,
        no_fetch: false,
    };

    #[test]
    fn a_prompt_or_id_that_looks_like_a_flag_is_never_read_as_one() {
        for runtime in PER_TURN_RUNTIMES {
            let cmd = runtime.command(&inv(NOTHING));
            let dashes = cmd.args.iter().position(|a| a == "--");
            for (at, arg) in cmd.args.iter().enumerate() {
                if arg == "--yolo do it" || arg == "--help" {
                    assert!(
                        dashes.is_some_and(|d| d < at),
                        "{}: {:?}",
                        runtime.name,
                        cmd.args
                    );
                }
            }
            assert!(
                !cmd.args.iter().any(|a| a == "--yolo" || a == "--force"),
                "{}: {:?}",
                runtime.name,
                cmd.args
            );
        }
    }

    #[test]
    fn nothing_runs_unasked_unless_the_preset_says_so() {
        let gemini = per_turn("gemini").unwrap().command(&inv(NOTHING));
        assert!(gemini.args.contains(&"--approval-mode=default".to_string()));
        let all = Unasked {
            edits: true,
            shell: true,
            fetch: true,
            ..NOTHING
        };
        let gemini = per_turn("gemini").unwrap().command(&inv(all));
        assert!(gemini.args.contains(&"--approval-mode=yolo".to_string()));
        let copilot = per_turn("copilot").unwrap().command(&inv(NOTHING));
        assert!(!copilot.args.iter().any(|a| a.starts_with("--allow")));
        let opencode = per_turn("opencode").unwrap().command(&inv(NOTHING));
        let perm = &opencode
            .env
            .iter()
            .find(|(k, _)| k == "OPENCODE_PERMISSION")
            .unwrap()
            .1;
        assert!(perm.contains(r#""bash":"deny""#), "{perm}");
        let cursor = per_turn("cursor").unwrap().command(&inv(NOTHING));
        assert!(!cursor.args.contains(&"--force".to_string()));
    }
}
