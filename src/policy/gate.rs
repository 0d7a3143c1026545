//! The decision for one call: the preset's offer and rules, the danger level, and what a
//! person decided earlier in the session. Deny beats ask beats allow.
//!
//! Shell commands are parsed with a real shell parser: a compound command runs on its own
//! only when every simple command in it would; a command whose program or arguments are only
//! known at run time (`$CMD`, `$(…)`), or that writes to a file through a redirection, is never
//! taken as matching an allow rule; anything the parser cannot read asks.

use std::collections::HashSet;
use std::path::Path;

use serde_json::Value;

use super::decision::Decision;
use super::preset::{Policy, Rule};
use super::shell::{self, SimpleCommand};
use crate::tool::Danger;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allow { reason: String },
    Ask { reason: String },
    Deny { reason: String },
}

pub struct Gate {
    policy: Policy,
    /// Tools a person allowed for the session (`allow_all`), shell excluded.
    granted_tools: HashSet<String>,
    /// Shell grants keyed by program and subcommand ("git status", "cargo test").
    granted_commands: HashSet<String>,
    disabled: HashSet<String>,
    forbidden_this_turn: bool,
}

impl Gate {
    pub fn new(policy: Policy) -> Gate {
        Gate {
            policy,
            granted_tools: HashSet::new(),
            granted_commands: HashSet::new(),
            disabled: HashSet::new(),
            forbidden_this_turn: false,
        }
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// A new turn lifts `forbid_all`.
    pub fn begin_turn(&mut self) {
        self.forbidden_this_turn = false;
    }

    /// Whether the model is offered the tool at all right now.
    pub fn offers(&self, tool: &str) -> bool {
        !self.forbidden_this_turn && !self.disabled.contains(tool) && self.policy.offers(tool)
    }

    pub fn check(&self, tool: &str, manifest_danger: Danger, args: &Value, root: &Path) -> Verdict {
        if self.disabled.contains(tool) {
            return deny(format!("the {tool} tool was disabled for this session"));
        }
        if self.forbidden_this_turn {
            return deny("tool calls are forbidden for the rest of this turn".into());
        }
        if !self.policy.offers(tool) {
            return deny(format!(
                "{tool} is not available under the '{}' permission preset",
                self.policy.name
            ));
        }
        let danger = self.policy.danger_of(tool, manifest_danger);
        let rules: Vec<&Rule> = self.policy.rules_for(tool).collect();
        if tool == "shell" {
            return self.check_shell(danger, args, &rules);
        }
        let subject = subject_of(tool, args, root);
        if let Some(rule) = rules.iter().find(|r| r.deny_set.is_match(&subject)) {
            return deny(format!(
                "{tool} on {subject:?} is denied by the preset rule ({})",
                rule.deny.join(", ")
            ));
        }
        if self.policy.bypass {
            return allow("bypass preset");
        }
        if rules.iter().any(|r| r.ask_set.is_match(&subject)) {
            return ask(format!("{tool} on {subject:?} matches an ask rule"));
        }
        if rules.iter().any(|r| r.allow_set.is_match(&subject)) {
            return allow("allowed by a preset rule");
        }
        if self.policy.allowed.iter().any(|a| a == tool) {
            return allow("allowed with --allow");
        }
        if self.granted_tools.contains(tool) {
            return allow("allowed for this session");
        }
        if self
            .policy
            .auto_approve
            .is_some_and(|level| danger <= level)
        {
            return allow(format!("{} tools run without asking", danger_word(danger)));
        }
        ask(format!("{tool} is a {} tool", danger_word(danger)))
    }

    fn check_shell(&self, danger: Danger, args: &Value, rules: &[&Rule]) -> Verdict {
        let command = args.get("command").and_then(Value::as_str).unwrap_or("");
        let commands = match shell::simple_commands(command) {
            Ok(commands) => commands,
            Err(e) if self.policy.bypass || self.allowed_whole("shell") => {
                return allow(format!("allowed although unparsed ({e})"));
            }
            Err(e) => return ask(format!("the command cannot be analysed ({e})")),
        };
        for cmd in &commands {
            let text = cmd.words.join(" ");
            if let Some(rule) = rules.iter().find(|r| r.deny_set.is_match(&text)) {
                return deny(format!(
                    "`{text}` is denied by the preset rule ({})",
                    rule.deny.join(", ")
                ));
            }
        }
        if self.policy.bypass {
            return allow("bypass preset");
        }
        if self.allowed_whole("shell") {
            return allow("allowed with --allow");
        }
        if self
            .policy
            .auto_approve
            .is_some_and(|level| danger <= level)
        {
            return allow(format!("{} tools run without asking", danger_word(danger)));
        }
        let unapproved: Vec<String> = commands
            .iter()
            .filter(|cmd| !self.command_approved(cmd, rules))
            .map(|cmd| format!("`{}`", cmd.words.join(" ")))
            .collect();
        if unapproved.is_empty() {
            allow("every command in it is allowed")
        } else {
            ask(format!("needs approval: {}", unapproved.join(", ")))
        }
    }

    fn allowed_whole(&self, tool: &str) -> bool {
        self.policy.allowed.iter().any(|a| a == tool)
    }

    fn command_approved(&self, cmd: &SimpleCommand, rules: &[&Rule]) -> bool {
        if cmd.dynamic || !harmless_redirects(cmd) || cmd.words.is_empty() {
            return false;
        }
        let text = cmd.words.join(" ");
        if rules.iter().any(|r| r.ask_set.is_match(&text)) {
            return false;
        }
        rules.iter().any(|r| r.allow_set.is_match(&text))
            || shell::grant_key(cmd).is_some_and(|key| self.granted_commands.contains(&key))
    }

    /// Applies what a person decided. Returns a note on what was granted, if anything.
    pub fn record(&mut self, tool: &str, args: &Value, decision: Decision) -> Option<String> {
        match decision {
            Decision::AllowAll if tool == "shell" => {
                let command = args.get("command").and_then(Value::as_str).unwrap_or("");
                // Only a single, static command is granted: approving `git status && rm -rf x`
                // once says nothing about `rm` in general.
                match shell::simple_commands(command).as_deref() {
                    Ok([single]) if !single.dynamic => {
                        let key = shell::grant_key(single)?;
                        self.granted_commands.insert(key.clone());
                        Some(format!("`{key}` commands allowed for this session"))
                    }
                    _ => Some("a compound command is allowed this once only".into()),
                }
            }
            Decision::AllowAll => {
                self.granted_tools.insert(tool.to_string());
                Some(format!("{tool} allowed for this session"))
            }
            Decision::Disable => {
                self.disabled.insert(tool.to_string());
                Some(format!("{tool} disabled for this session"))
            }
            Decision::ForbidAll => {
                self.forbidden_this_turn = true;
                Some("no more tool calls this turn".into())
            }
            Decision::Allow | Decision::Deny | Decision::Cancel => None,
        }
    }
}

/// Redirections to `/dev/null` or between descriptors (`2>&1`) write nothing.
fn harmless_redirects(cmd: &SimpleCommand) -> bool {
    cmd.redirects.iter().all(|target| {
        target == "/dev/null"
            || target.starts_with('&')
            || target.chars().all(|c| c.is_ascii_digit() || c == '-')
    })
}

/// What argument rules match against, per tool.
fn subject_of(tool: &str, args: &Value, root: &Path) -> String {
    let field = |name: &str| args.get(name).and_then(Value::as_str).unwrap_or("");
    match tool {
        "read_file" | "write_file" => relative(field("path"), root),
        "list_directory" | "search_files" => {
            let path = field("path");
            relative(if path.is_empty() { "." } else { path }, root)
        }
        "open_url" => field("url").to_string(),
        "python" => field("code").to_string(),
        _ => String::new(),
    }
}

fn relative(path: &str, root: &Path) -> String {
    let as_path = Path::new(path);
    let stripped = as_path.strip_prefix(root).unwrap_or(as_path);
    let text = stripped.to_string_lossy();
    let text = text.trim_start_matches("./");
    if text.is_empty() {
        ".".into()
    } else {
        text.to_string()
    }
}

fn danger_word(danger: Danger) -> &'static str {
    match danger {
        Danger::Safe => "safe",
        Danger::Moderate => "moderate",
        Danger::Dangerous => "dangerous",
    }
}

fn allow(reason: impl Into<String>) -> Verdict {
    Verdict::Allow {
        reason: reason.into(),
    }
}

fn ask(reason: String) -> Verdict {
    Verdict::Ask { reason }
}

fn deny(reason: String) -> Verdict {
    Verdict::Deny { reason }
}

#[cfg(test)]
mod tests;
