//! Presets: `policies/<name>.toml`, embedded at build time; a file of the same name in
//! `$XDG_CONFIG_HOME/corral/policies/` replaces the embedded one, and `-p PATH` loads any file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Deserialize;

use super::pattern::CommandPattern;
use super::readonly::{CommandFile, CommandSpec};
use crate::config::mcp::wildcard_match;
use crate::sandbox::{NetworkMode, SandboxMode};
use crate::tool::Danger;

/// Whether a list of tool names (globs allowed: `git__*`) names `tool`.
pub(crate) fn names(list: &[String], tool: &str) -> bool {
    list.iter().any(|pattern| wildcard_match(pattern, tool))
}

const EMBEDDED: &[(&str, &str)] = &[
    ("default", include_str!("../../policies/default.toml")),
    ("readonly", include_str!("../../policies/readonly.toml")),
    ("auto", include_str!("../../policies/auto.toml")),
    ("specialist", include_str!("../../policies/specialist.toml")),
    ("bypass", include_str!("../../policies/bypass.toml")),
    ("notebook", include_str!("../../policies/notebook.toml")),
    ("lab", include_str!("../../policies/lab.toml")),
];

/// Which tools a preset offers the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Offer {
    All,
    /// Only the tools the session names with `--allow`.
    Allowed,
    Only(Vec<String>),
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum AutoApprove {
    None,
    Safe,
    Moderate,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
enum OfferText {
    Word(String),
    List(Vec<String>),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct PresetFile {
    /// Shown by `corral policies`; a preset of one's own may go without.
    #[serde(default)]
    description: String,
    #[serde(default = "default_auto")]
    auto_approve: AutoApprove,
    #[serde(default = "default_offer")]
    offer: OfferText,
    #[serde(default)]
    bypass: bool,
    /// An ACP agent's `fs/*` reads and writes run without asking (rules still hold).
    #[serde(default)]
    allow_acp_fs: bool,
    #[serde(default)]
    warning: Option<String>,
    #[serde(default)]
    max_timeout_secs: Option<u64>,
    #[serde(default)]
    url_schemes: Option<Vec<String>>,
    /// Environment variables passed to tool processes beyond the built-in allow-list.
    #[serde(default)]
    env: Vec<String>,
    /// The least sandbox this preset accepts (`"strict"` requires strict).
    #[serde(default)]
    sandbox: Option<SandboxMode>,
    #[serde(default)]
    network: Option<NetworkMode>,
    /// Extra paths tool processes may write to (`~/` is the home directory, relative paths
    /// are under the session root).
    #[serde(default)]
    writable: Vec<String>,
    /// Paths tool processes may not see, beyond the built-in list (written like `writable`).
    #[serde(default)]
    hidden: Vec<String>,
    /// Pathname Unix sockets outside the root tool processes may connect to.
    #[serde(default)]
    sockets: Vec<String>,
    #[serde(default)]
    danger: BTreeMap<String, Danger>,
    /// Tools that ask a person whatever `auto_approve` says (they carry data off the machine
    /// or read the desktop). `--allow`, a rule or a grant still lets them run.
    #[serde(default)]
    always_ask: Vec<String>,
    #[serde(default)]
    rules: Vec<RuleFile>,
    /// Read-only shell commands that run without asking, with the options known to be safe
    /// for each (see `readonly`).
    #[serde(default)]
    commands: BTreeMap<String, CommandFile>,
}

fn default_auto() -> AutoApprove {
    AutoApprove::Safe
}

fn default_offer() -> OfferText {
    OfferText::Word("all".into())
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    tool: String,
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    ask: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
}

/// Per-tool argument rules. Patterns are globs over the call's subject: for `shell`, each
/// simple command, program word alone then the quoted arguments (see `pattern`); the path
/// relative to the root, after symlinks, for file tools; the URL for `open_url`.
#[derive(Debug, Clone)]
pub struct Rule {
    pub tool: String,
    pub allow: Vec<String>,
    pub ask: Vec<String>,
    pub deny: Vec<String>,
    pub(crate) allow_set: GlobSet,
    pub(crate) ask_set: GlobSet,
    pub(crate) deny_set: GlobSet,
    pub(crate) allow_commands: Vec<CommandPattern>,
    pub(crate) ask_commands: Vec<CommandPattern>,
    pub(crate) deny_commands: Vec<CommandPattern>,
}

/// A preset with the session's own flags applied.
#[derive(Debug, Clone)]
pub struct Policy {
    pub name: String,
    pub description: String,
    /// Highest danger that runs without asking; `None`: everything asks.
    pub auto_approve: Option<Danger>,
    pub offer: Offer,
    /// Nothing asks (the bypass preset). Deny rules still hold.
    pub bypass: bool,
    /// An ACP agent's `fs/read_text_file` and `fs/write_text_file` (confined to the root) run
    /// without asking, as `--allow` would let them; deny and ask rules still hold (the lab
    /// preset).
    pub allow_acp_fs: bool,
    pub warning: Option<String>,
    pub max_timeout_secs: Option<u64>,
    pub url_schemes: Option<Vec<String>>,
    /// Variables passed through to tool processes by name.
    pub env: Vec<String>,
    /// The least sandbox mode the preset accepts.
    pub sandbox: Option<SandboxMode>,
    /// `Some(Off)`: tools get no network whatever the flags say.
    pub network: Option<NetworkMode>,
    /// Extra writable paths for tool processes, as written in the preset.
    pub writable: Vec<String>,
    /// Extra paths hidden from tool processes, as written in the preset.
    pub hidden: Vec<String>,
    /// Unix sockets outside the root tool processes may connect to, as written.
    pub sockets: Vec<String>,
    pub danger_overrides: BTreeMap<String, Danger>,
    /// Tools that ask whatever the danger level (`always_ask`).
    pub always_ask: Vec<String>,
    pub rules: Vec<Rule>,
    /// Read-only shell commands and their safe options, by program (`"git status"` for a
    /// subcommand).
    pub(crate) commands: BTreeMap<String, CommandSpec>,
    /// `--allow`: offered and run without asking.
    pub allowed: Vec<String>,
    /// `--deny`: never offered.
    pub denied: Vec<String>,
    /// The recursion guard is off: the agent may open and drive agents (see `guard`).
    pub nested_agents: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("unknown permission preset {name:?}: known presets are {known}")]
    Unknown { name: String, known: String },
    #[error("cannot read the preset {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the preset {name} is invalid: {message}")]
    Invalid { name: String, message: String },
}

/// What a session adds on top of its preset (`--auto-approve`, `--allow`, `--deny`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PolicyOverrides {
    pub auto_approve: Option<Danger>,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    /// Lifts the recursion guard (MCP `agent_open` with `disallowed_tools: []`); default: the
    /// guard holds.
    pub nested_agents: bool,
}

/// Every preset name: embedded ones and the user's, sorted.
pub fn preset_names(user_dir: Option<&Path>) -> Vec<String> {
    let mut names: Vec<String> = EMBEDDED.iter().map(|(n, _)| n.to_string()).collect();
    if let Some(dir) = user_dir
        && let Ok(entries) = std::fs::read_dir(dir)
    {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "toml")
                && let Some(stem) = path.file_stem().and_then(|s| s.to_str())
                && !names.iter().any(|n| n == stem)
            {
                names.push(stem.to_string());
            }
        }
    }
    names.sort();
    names
}

impl Policy {
    /// Whether a preset value names a file rather than a preset.
    pub fn is_path(spec: &str) -> bool {
        spec.contains('/') || spec.ends_with(".toml")
    }

    /// `spec` is a preset name, or a path to a preset file (see [`Policy::is_path`]).
    pub fn load(
        spec: &str,
        user_dir: Option<&Path>,
        overrides: &PolicyOverrides,
    ) -> Result<Policy, PolicyError> {
        let (name, text) = if Self::is_path(spec) {
            let path = PathBuf::from(spec);
            let text = std::fs::read_to_string(&path).map_err(|source| PolicyError::Read {
                path: path.clone(),
                source,
            })?;
            (spec.to_string(), text)
        } else {
            let user_file = user_dir.map(|d| d.join(format!("{spec}.toml")));
            match user_file.filter(|p| p.is_file()) {
                Some(path) => {
                    let text =
                        std::fs::read_to_string(&path).map_err(|source| PolicyError::Read {
                            path: path.clone(),
                            source,
                        })?;
                    (spec.to_string(), text)
                }
                None => match EMBEDDED.iter().find(|(n, _)| *n == spec) {
                    Some((_, text)) => (spec.to_string(), text.to_string()),
                    None => {
                        return Err(PolicyError::Unknown {
                            name: spec.to_string(),
                            known: preset_names(user_dir).join(", "),
                        });
                    }
                },
            }
        };
        Self::parse(&name, &text, overrides)
    }

    pub fn parse(
        name: &str,
        text: &str,
        overrides: &PolicyOverrides,
    ) -> Result<Policy, PolicyError> {
        let invalid = |message: String| PolicyError::Invalid {
            name: name.to_string(),
            message,
        };
        let file: PresetFile =
            toml::from_str(text).map_err(|e| invalid(crate::config::toml_error(text, &e)))?;
        names::check(&file).map_err(invalid)?;
        let offer = match file.offer {
            OfferText::Word(w) if w == "all" => Offer::All,
            OfferText::Word(w) if w == "allowed" => Offer::Allowed,
            OfferText::Word(w) => {
                return Err(invalid(format!(
                    "offer must be \"all\", \"allowed\" or a list of tools, got {w:?}"
                )));
            }
            OfferText::List(list) => Offer::Only(list),
        };
        let mut rules = Vec::with_capacity(file.rules.len());
        for rule in file.rules {
            rules.push(compile_rule(rule).map_err(invalid)?);
        }
        let mut commands = BTreeMap::new();
        for (program, spec) in file.commands {
            let compiled = CommandSpec::compile(&program, spec).map_err(invalid)?;
            commands.insert(program, compiled);
        }
        let auto_approve = match overrides.auto_approve {
            Some(level) if level >= Danger::Dangerous => {
                return Err(invalid(
                    "--auto-approve covers safe or moderate; dangerous tools need a rule or the bypass preset".into(),
                ));
            }
            Some(level) => Some(level),
            None => match file.auto_approve {
                AutoApprove::None => None,
                AutoApprove::Safe => Some(Danger::Safe),
                AutoApprove::Moderate => Some(Danger::Moderate),
            },
        };
        // A preset that offers only what `--allow` names, given none, leaves the model with
        // no tools at all: legal (a chat without tools), but never what someone meant silently.
        let warning = match (&offer, overrides.allow.is_empty()) {
            (Offer::Allowed, true) => Some(join_warnings(
                file.warning,
                format!(
                    "preset {name} offers only the tools named with --allow, and none were: \
                     the model gets no tools"
                ),
            )),
            _ => file.warning,
        };
        Ok(Policy {
            name: name.to_string(),
            description: if file.description.trim().is_empty() {
                "(no description)".to_string()
            } else {
                file.description
            },
            auto_approve,
            offer,
            bypass: file.bypass,
            allow_acp_fs: file.allow_acp_fs,
            warning,
            max_timeout_secs: file.max_timeout_secs,
            url_schemes: file.url_schemes,
            env: file.env,
            sandbox: file.sandbox,
            network: file.network,
            writable: file.writable,
            hidden: file.hidden,
            sockets: file.sockets,
            danger_overrides: file.danger,
            always_ask: file.always_ask,
            rules,
            commands,
            allowed: overrides.allow.clone(),
            denied: overrides.deny.clone(),
            nested_agents: overrides.nested_agents,
        })
    }

    /// Whether the model is offered `tool` at all.
    pub fn offers(&self, tool: &str) -> bool {
        if names(&self.denied, tool) || (!self.nested_agents && guard::withholds(tool)) {
            return false;
        }
        match &self.offer {
            Offer::All => true,
            Offer::Allowed => names(&self.allowed, tool),
            Offer::Only(list) => names(list, tool) || names(&self.allowed, tool),
        }
    }

    /// The preset's level for the tool: its own name first, then the first glob that matches
    /// (`git__*` for every tool of the `git` MCP server), else the manifest's.
    pub fn danger_of(&self, tool: &str, manifest: Danger) -> Danger {
        self.danger_overrides
            .get(tool)
            .or_else(|| {
                self.danger_overrides
                    .iter()
                    .find(|(pattern, _)| wildcard_match(pattern, tool))
                    .map(|(_, danger)| danger)
            })
            .copied()
            .unwrap_or(manifest)
    }

    /// The rules for a tool: those naming it, or a glob over names that matches it.
    pub fn rules_for<'a>(&'a self, tool: &'a str) -> impl Iterator<Item = &'a Rule> + 'a {
        self.rules
            .iter()
            .filter(move |r| wildcard_match(&r.tool, tool))
    }

    /// The effective rules as text, for `corral policies show`.
    pub fn describe(&self) -> String {
        let mut out = format!("{}: {}\n", self.name, self.description);
        let auto = match (self.bypass, self.auto_approve) {
            (true, _) => "everything (bypass)".to_string(),
            (false, None) => "nothing".to_string(),
            (false, Some(Danger::Safe)) => "safe tools".to_string(),
            (false, Some(level)) => format!("safe … {level:?} tools").to_lowercase(),
        };
        out.push_str(&format!("runs without asking: {auto}\n"));
        let offer = match &self.offer {
            Offer::All => "all tools".to_string(),
            Offer::Allowed => "only the tools named with --allow".to_string(),
            Offer::Only(list) => list.join(", "),
        };
        out.push_str(&format!("tools offered: {offer}\n"));
        if !self.allowed.is_empty() {
            out.push_str(&format!("allowed (--allow): {}\n", self.allowed.join(", ")));
        }
        if !self.denied.is_empty() {
            out.push_str(&format!("denied (--deny): {}\n", self.denied.join(", ")));
        }
        out.push_str(if self.nested_agents {
            "recursion guard: off (the agent may open and drive agents)\n"
        } else {
            guard::DESCRIBED
        });
        if self.allow_acp_fs {
            out.push_str("an ACP agent's fs/* reads and writes in the root: run without asking\n");
        }
        for (tool, level) in &self.danger_overrides {
            out.push_str(&format!("danger of {tool}: {level:?}\n").to_lowercase());
        }
        if let Some(secs) = self.max_timeout_secs {
            out.push_str(&format!("longest tool timeout: {secs} s\n"));
        }
        if !self.env.is_empty() {
            out.push_str(&format!(
                "environment passed to tools: {}\n",
                self.env.join(", ")
            ));
        }
        if let Some(mode) = self.sandbox {
            out.push_str(&format!("sandbox: at least {mode}\n"));
        }
        if self.network == Some(NetworkMode::Off) {
            out.push_str("network: off for tools\n");
        }
        if !self.writable.is_empty() {
            out.push_str(&format!(
                "also writable by tools: {}\n",
                self.writable.join(", ")
            ));
        }
        if !self.hidden.is_empty() {
            out.push_str(&format!(
                "also hidden from tools: {}\n",
                self.hidden.join(", ")
            ));
        }
        if !self.sockets.is_empty() {
            out.push_str(&format!(
                "Unix sockets tools may connect to: {}\n",
                self.sockets.join(", ")
            ));
        }
        if !self.always_ask.is_empty() {
            out.push_str(&format!("always ask for: {}\n", self.always_ask.join(", ")));
        }
        if !self.commands.is_empty() {
            let listed: Vec<String> = self
                .commands
                .iter()
                .map(|(name, spec)| spec.summary(name))
                .collect();
            out.push_str(&format!(
                "shell allow: {} (listed options only, paths inside the root)\n",
                listed.join(" | ")
            ));
        }
        if let Some(schemes) = &self.url_schemes {
            out.push_str(&format!("URL schemes: {}\n", schemes.join(", ")));
        }
        for rule in &self.rules {
            for (what, list) in [
                ("allow", &rule.allow),
                ("ask", &rule.ask),
                ("deny", &rule.deny),
            ] {
                if !list.is_empty() {
                    out.push_str(&format!("{} {what}: {}\n", rule.tool, list.join(" | ")));
                }
            }
        }
        if let Some(warning) = &self.warning {
            out.push_str(&format!("warning: {warning}\n"));
        }
        out
    }
}

fn join_warnings(first: Option<String>, second: String) -> String {
    match first {
        Some(first) => format!("{first}; {second}"),
        None => second,
    }
}

fn compile_rule(rule: RuleFile) -> Result<Rule, String> {
    let commands = |patterns: &[String]| -> Result<Vec<CommandPattern>, String> {
        if rule.tool != "shell" && rule.tool != "*" {
            return Ok(Vec::new());
        }
        patterns
            .iter()
            .map(|p| {
                CommandPattern::new(p)
                    .map_err(|e| format!("rule for {}: bad pattern {p:?}: {e}", rule.tool))
            })
            .collect()
    };
    let build = |patterns: &[String]| -> Result<GlobSet, String> {
        let mut set = GlobSetBuilder::new();
        for pattern in patterns {
            let glob = Glob::new(pattern)
                .map_err(|e| format!("rule for {}: bad pattern {pattern:?}: {e}", rule.tool))?;
            set.add(glob);
        }
        set.build()
            .map_err(|e| format!("rule for {}: {e}", rule.tool))
    };
    Ok(Rule {
        allow_commands: commands(&rule.allow)?,
        ask_commands: commands(&rule.ask)?,
        deny_commands: commands(&rule.deny)?,
        allow_set: build(&rule.allow)?,
        ask_set: build(&rule.ask)?,
        deny_set: build(&rule.deny)?,
        tool: rule.tool,
        allow: rule.allow,
        ask: rule.ask,
        deny: rule.deny,
    })
}

mod guard;
mod names;
#[cfg(test)]
mod tests;
