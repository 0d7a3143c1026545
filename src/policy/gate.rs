//! The decision for one call: the preset's offer and rules, the danger level, and what a
//! person decided earlier in the session. Deny beats ask beats allow.
//!
//! File tools' path rules see the path the call would really touch: relative to the root,
//! after symlinks and `..` (a link `docs -> .git` makes `docs/config` the `.git/config` it is).
//! Shell commands are judged in `commands`; a grant there is keyed on the resolved program.

mod commands;

use std::collections::HashSet;
use std::path::Path;

use serde_json::Value;

use super::approver::CallTarget;
use super::decision::Decision;
use super::grant::{self, Grant};
use super::preset::{Policy, Rule};
use super::program;
use super::shell;
use crate::event::{AlwaysOffer, PermissionOption};
use crate::sandbox::paths::resolve_in_root;
use crate::tool::{Danger, write_paths};

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
    /// Shell grants: a resolved program and its subcommand (see `grant`).
    granted_commands: HashSet<Grant>,
    /// Desktop grants: a [`CallTarget::grant`] key (an action in one application's windows).
    granted_targets: HashSet<String>,
    disabled: HashSet<String>,
    forbidden_this_turn: bool,
}

impl Gate {
    pub fn new(policy: Policy) -> Gate {
        Gate {
            policy,
            granted_tools: HashSet::new(),
            granted_commands: HashSet::new(),
            granted_targets: HashSet::new(),
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

    #[cfg(test)]
    pub fn check(&self, tool: &str, manifest_danger: Danger, args: &Value, root: &Path) -> Verdict {
        self.judge(tool, manifest_danger, args, root, false, None)
    }

    /// [`Gate::check`] for a call whose target was found first (a desktop action): rules
    /// match the target's subjects, and "allow always" grants hold for the same target key.
    pub fn check_target(
        &self,
        tool: &str,
        manifest_danger: Danger,
        args: &Value,
        root: &Path,
        target: Option<&CallTarget>,
    ) -> Verdict {
        self.judge(tool, manifest_danger, args, root, false, target)
    }

    /// An ACP agent's `fs/*` read or write: as [`Gate::check`], and where the preset says
    /// `allow_acp_fs` it runs without asking, as `--allow` would let it (after deny and ask
    /// rules, which still hold).
    pub fn check_acp_fs(
        &self,
        tool: &str,
        manifest_danger: Danger,
        args: &Value,
        root: &Path,
    ) -> Verdict {
        self.judge(
            tool,
            manifest_danger,
            args,
            root,
            self.policy.allow_acp_fs,
            None,
        )
    }

    fn judge(
        &self,
        tool: &str,
        manifest_danger: Danger,
        args: &Value,
        root: &Path,
        acp_fs_allowed: bool,
        target: Option<&CallTarget>,
    ) -> Verdict {
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
            return self.check_shell(danger, args, &rules, root);
        }
        // Every name the call goes by: a rule that refuses or asks for any of them holds; an
        // allow rule must cover all of them.
        let subjects = match target {
            Some(target) => target.subjects.clone(),
            None => subjects_of(tool, args, root),
        };
        for subject in &subjects {
            if let Some(rule) = rules.iter().find(|r| r.deny_set.is_match(subject)) {
                return deny(format!(
                    "{tool} on {subject:?} is denied by the preset rule ({})",
                    rule.deny.join(", ")
                ));
            }
        }
        if self.policy.bypass {
            return allow("bypass preset");
        }
        if let Some(subject) = subjects
            .iter()
            .find(|s| rules.iter().any(|r| r.ask_set.is_match(s)))
        {
            return ask(format!("{tool} on {subject:?} matches an ask rule"));
        }
        // A desktop target's subjects name it several ways (the action, the application, the
        // title): an allow rule for any of them covers it, as deny and ask rules above hold
        // for any. A path call's subjects are all the paths it touches: each must be allowed.
        let covered = |s: &String| rules.iter().any(|r| r.allow_set.is_match(s));
        let allowed_by_rule = match target {
            Some(_) => subjects.iter().any(covered),
            None => !subjects.is_empty() && subjects.iter().all(covered),
        };
        if allowed_by_rule {
            return allow("allowed by a preset rule");
        }
        if super::preset::names(&self.policy.allowed, tool) {
            return allow("allowed with --allow");
        }
        if acp_fs_allowed {
            return allow(format!(
                "the '{}' preset lets an ACP agent's fs/* calls run",
                self.policy.name
            ));
        }
        match target {
            Some(target) if self.granted_targets.contains(&target.grant) => {
                return allow("allowed for this session");
            }
            Some(_) => {}
            None if self.granted_tools.contains(tool) => {
                return allow("allowed for this session");
            }
            None => {}
        }
        if super::preset::names(&self.policy.always_ask, tool) {
            return ask(format!(
                "the '{}' preset asks for {tool} every time: {}",
                self.policy.name,
                why_always_ask(tool)
            ));
        }
        if self
            .policy
            .auto_approve
            .is_some_and(|level| danger <= level)
        {
            return allow(format!("{} tools run without asking", danger.as_str()));
        }
        ask(format!("{tool} is a {} tool", danger.as_str()))
    }

    /// Applies what a person decided. Returns a note on what was granted, if anything.
    pub fn record(
        &mut self,
        tool: &str,
        args: &Value,
        root: &Path,
        target: Option<&CallTarget>,
        decision: Decision,
    ) -> Option<String> {
        if let (Decision::AllowAll, Some(target)) = (decision, target) {
            return Some(match &target.always {
                Ok(covers) => {
                    self.granted_targets.insert(target.grant.clone());
                    format!("always: {covers}")
                }
                Err(why) => format!("allowed this once: always is not offered ({why})"),
            });
        }
        match decision {
            Decision::AllowAll if tool == "shell" => match self.shell_grant(args, root) {
                Ok(grant) => {
                    let note = format!("`{}` commands allowed for this session", grant.label());
                    self.granted_commands.insert(grant);
                    Some(note)
                }
                Err(why) => Some(format!("allowed this once: always is not offered ({why})")),
            },
            Decision::AllowAll => match tool_always(tool) {
                Ok(_) => {
                    self.granted_tools.insert(tool.to_string());
                    Some(format!("{tool} allowed for this session"))
                }
                Err(why) => Some(format!("allowed this once: always is not offered ({why})")),
            },
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

    /// What "allow always" would cover for this call, for the permission request: the person
    /// reads exactly this before choosing it, and where it is not offered, why.
    pub fn always(
        &self,
        tool: &str,
        args: &Value,
        root: &Path,
        target: Option<&CallTarget>,
    ) -> Always {
        let scope = if let Some(target) = target {
            target.always.clone()
        } else if tool == "shell" {
            self.shell_grant(args, root).map(|g| g.covers())
        } else {
            tool_always(tool)
        };
        match scope {
            Ok(covers) => Always {
                offered: true,
                text: format!("always: {covers}"),
            },
            Err(why) => Always {
                offered: false,
                text: format!("always is not offered: {why}"),
            },
        }
    }

    /// The grant "always" gives for a shell call: only a single, static command, since
    /// approving `git status && rm -rf x` once says nothing about `rm` in general.
    fn shell_grant(&self, args: &Value, root: &Path) -> Result<Grant, String> {
        let command = args.get("command").and_then(Value::as_str).unwrap_or("");
        let cwd = commands::shell_cwd(args, root)?;
        let dirs = program::Dirs { root, cwd: &cwd };
        match shell::simple_commands(command) {
            Ok(commands) => match commands.as_slice() {
                [single] => grant::grant_for(single, dirs, program::search_path().as_deref()),
                _ => Err("it is more than one command; each needs its own approval".into()),
            },
            Err(e) => Err(format!("the command cannot be analysed ({e})")),
        }
    }
}

/// What "always" means for a tool other than shell.
fn tool_always(tool: &str) -> Result<String, String> {
    match tool {
        "python" => Err("python runs whatever code it is given".into()),
        "computer" => Err("each desktop action is approved where it lands".into()),
        "write_file" | "edit_file" | "apply_patch" | "read_file" | "list_directory"
        | "search_files" => Ok(format!(
            "{tool} on any path in the session root, for this session"
        )),
        "open_url" => Ok("open_url with any URL, for this session".into()),
        _ => Ok(format!("{tool} with any arguments, for this session")),
    }
}

/// What "allow always" covers for one permission request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Always {
    pub offered: bool,
    /// "always: `git status` with any arguments, run as /usr/bin/git, for this session", or
    /// "always is not offered: find can run other programs or code".
    pub text: String,
}

impl Always {
    /// The decisions a person may choose from: "allow always" only where it applies.
    pub fn options(&self) -> Vec<PermissionOption> {
        Decision::ALL
            .iter()
            .filter(|d| self.offered || **d != Decision::AllowAll)
            .map(|d| d.option())
            .collect()
    }

    /// The request's `always` field.
    pub fn offer(&self) -> AlwaysOffer {
        AlwaysOffer {
            offered: self.offered,
            scope: self.text.clone(),
        }
    }
}

/// Why a preset's `always_ask` names a tool, for the person.
fn why_always_ask(tool: &str) -> &'static str {
    match tool {
        "open_url" => "a URL can carry data off the machine",
        "clipboard_read" | "screenshot" | "windows" => "it reads the desktop",
        "clipboard_write" => "another program may paste it anywhere",
        _ => "the preset lists it",
    }
}

/// What argument rules match against, per tool: for paths, the path as given (relative to the
/// root) and, where it resolves inside the root, the path it really names. A call that writes
/// several paths (a patch: each file, where it moves to) has all of them as subjects, so a
/// rule holds for every one.
fn subjects_of(tool: &str, args: &Value, root: &Path) -> Vec<String> {
    let field = |name: &str| args.get(name).and_then(Value::as_str).unwrap_or("");
    let paths = match tool {
        "read_file" => vec![field("path").to_string()],
        "list_directory" | "search_files" => vec![match field("path") {
            "" => ".".to_string(),
            path => path.to_string(),
        }],
        "open_url" => return vec![field("url").to_string()],
        _ if crate::tool::is_mcp_name(tool) => return mcp_subjects(args),
        "python" => return vec![field("code").to_string()],
        _ => match write_paths(tool, args) {
            Some(paths) if !paths.is_empty() => paths,
            _ => return vec![String::new()],
        },
    };
    let mut subjects = Vec::new();
    for path in &paths {
        let named = relative(Path::new(path), root);
        let real = resolve_in_root(root, path).map(|resolved| relative(&resolved, root));
        for subject in std::iter::once(named).chain(real) {
            if !subjects.contains(&subject) {
                subjects.push(subject);
            }
        }
    }
    subjects
}

/// An MCP tool's subjects: each argument as `name=value` (a string as it is, anything else as
/// compact JSON), so `deny = ["path=/etc/*"]` reads naturally. An array gives one subject per
/// element too (`paths=/etc/passwd` for `paths: ["/etc/passwd"]`), and a string that looks
/// like a path also gives its lexically normalised form (`/tmp/../etc/x` is `/etc/x`), so
/// neither hides a path from a rule. No arguments: one empty subject.
fn mcp_subjects(args: &Value) -> Vec<String> {
    let mut subjects: Vec<String> = Vec::new();
    let mut add = |subject: String| {
        if !subjects.contains(&subject) {
            subjects.push(subject);
        }
    };
    for (name, value) in args.as_object().into_iter().flatten() {
        let mut scalar = |value: &Value| match value {
            Value::String(text) => {
                add(format!("{name}={text}"));
                if let Some(normal) = normalised_path(text) {
                    add(format!("{name}={normal}"));
                }
            }
            other => add(format!("{name}={other}")),
        };
        match value {
            Value::Array(items) => {
                scalar(value);
                items.iter().for_each(&mut scalar);
            }
            other => scalar(other),
        }
    }
    if subjects.is_empty() {
        subjects.push(String::new());
    }
    subjects
}

/// `text` with `.`, `..` and repeated slashes resolved, when it looks like a path (starts
/// with `/`, `./`, `../` or `~/`, or holds `/./` or `/../`) and that changes it.
fn normalised_path(text: &str) -> Option<String> {
    let looks = ["/", "./", "../", "~/"].iter().any(|p| text.starts_with(p))
        || text.contains("/./")
        || text.contains("/../")
        || text.contains("//");
    if !looks {
        return None;
    }
    let absolute = text.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in text.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|p| *p != "..") {
                    parts.pop();
                } else if !absolute {
                    parts.push("..");
                }
            }
            other => parts.push(other),
        }
    }
    let joined = parts.join("/");
    let normal = if absolute {
        format!("/{joined}")
    } else {
        joined
    };
    (normal != text).then_some(normal)
}

fn relative(path: &Path, root: &Path) -> String {
    let stripped = path.strip_prefix(root).unwrap_or(path);
    let text = stripped.to_string_lossy();
    let text = text.trim_start_matches("./");
    if text.is_empty() {
        ".".into()
    } else {
        text.to_string()
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
mod desktop_tests;
#[cfg(test)]
mod tests;
