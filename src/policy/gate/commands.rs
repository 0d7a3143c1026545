//! Shell calls: parsed with a real shell parser into simple commands, each judged on its own.
//! A compound command runs without asking only when every simple command in it would; anything
//! the parser cannot read asks.
//!
//! A simple command runs without asking when it is static (no `$…` in what runs, no
//! environment prefix), writes nothing through a redirection (only `/dev/null` and descriptor
//! duplications are harmless), and either an allow rule matches it word by word, the preset
//! lists it as read-only with every option it uses (see `readonly`), or a person granted its
//! program "always" (see `grant`).

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{Gate, allow, ask, deny};
use crate::policy::pattern::{Match, render};
use crate::policy::preset::Rule;
use crate::policy::program::Dirs;
use crate::policy::shell::{self, SimpleCommand};
use crate::policy::{Verdict, grant, program, readonly};
use crate::sandbox::paths::resolve_in_root;
use crate::tool::Danger;

impl Gate {
    pub(super) fn check_shell(
        &self,
        danger: Danger,
        args: &Value,
        rules: &[&Rule],
        root: &Path,
    ) -> Verdict {
        let command = args.get("command").and_then(Value::as_str).unwrap_or("");
        let commands = match shell::simple_commands(command) {
            Ok(commands) => commands,
            Err(e) if self.policy.bypass || self.allowed_whole("shell") => {
                return allow(format!("allowed although unparsed ({e})"));
            }
            Err(e) => return ask(format!("the command cannot be analysed ({e})")),
        };
        for cmd in &commands {
            let hit = rules.iter().find(|r| {
                r.deny_commands
                    .iter()
                    .any(|p| p.matches(&cmd.words, Match::Broad))
            });
            if let Some(rule) = hit {
                return deny(format!(
                    "`{}` is denied by the preset rule ({})",
                    render(&cmd.words),
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
            return allow(format!("{} tools run without asking", danger.as_str()));
        }
        let cwd = match shell_cwd(args, root) {
            Ok(cwd) => cwd,
            Err(why) => return ask(why),
        };
        let dirs = Dirs { root, cwd: &cwd };
        // After a `cd` relative paths no longer start where they are checked from.
        let moves = commands.iter().any(|c| {
            matches!(
                c.words.first().map(String::as_str),
                Some("cd" | "pushd" | "popd")
            )
        });
        let unapproved: Vec<String> = commands
            .iter()
            .filter_map(|cmd| {
                self.command_approved(cmd, rules, dirs, moves)
                    .err()
                    .map(|why| format!("`{}` ({why})", render(&cmd.words)))
            })
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

    /// Ok when `cmd` may run without asking; otherwise why not.
    fn command_approved(
        &self,
        cmd: &SimpleCommand,
        rules: &[&Rule],
        dirs: Dirs<'_>,
        moves: bool,
    ) -> Result<(), String> {
        if cmd.words.is_empty() {
            return Err("a redirection with no command".into());
        }
        let asks = rules.iter().any(|r| {
            r.ask_commands
                .iter()
                .any(|p| p.matches(&cmd.words, Match::Broad))
        });
        if asks {
            return Err("it matches an ask rule".into());
        }
        let path = program::search_path();
        if self.rule_allows(cmd, rules, dirs, path.as_deref()) {
            return Ok(());
        }
        let grant = grant::grant_for(cmd, dirs, path.as_deref());
        if grant
            .as_ref()
            .is_ok_and(|g| self.granted_commands.contains(g))
        {
            return Ok(());
        }
        if self.policy.commands.is_empty() {
            return Err("no rule allows it".into());
        }
        if moves {
            return Err("the command changes directory, so its paths cannot be checked".into());
        }
        readonly::check(&self.policy.commands, cmd, dirs, path.as_deref())
    }

    /// An allow rule matches the words, and the program they name is what the rule means: not
    /// a file in the root posing under a bare name.
    fn rule_allows(
        &self,
        cmd: &SimpleCommand,
        rules: &[&Rule],
        dirs: Dirs<'_>,
        path: Option<&std::ffi::OsStr>,
    ) -> bool {
        if cmd.dynamic || cmd.redirects.iter().any(|r| !r.harmless()) {
            return false;
        }
        let matched = rules.iter().any(|r| {
            r.allow_commands
                .iter()
                .any(|p| p.matches(&cmd.words, Match::Exact))
        });
        matched
            && program::resolve(&cmd.words[0], dirs.cwd, path).is_some_and(|p| {
                // A rule naming a path (`./build.sh *`) means that file; a bare name means
                // what PATH finds, never a file the model could have written.
                cmd.words[0].contains('/') || !p.inside(dirs.root)
            })
    }
}

/// The directory a shell call starts in: its `cwd` argument resolved inside the root.
pub(super) fn shell_cwd(args: &Value, root: &Path) -> Result<PathBuf, String> {
    match args.get("cwd").and_then(Value::as_str) {
        None | Some("") => Ok(root.to_path_buf()),
        Some(cwd) => {
            resolve_in_root(root, cwd).map_err(|e| format!("the call's cwd cannot be used ({e})"))
        }
    }
}
