//! "Allow always" for shell commands: what a grant is keyed on, and when none is offered.
//!
//! A grant names a resolved program (see `program`) and, for programs whose first argument
//! picks what they do, that subcommand: approving `git status` always covers `git status` with
//! any arguments, run by the same `git` file, and nothing else. No grant is offered where "any
//! arguments" would mean "any program": wrappers that run the program they are given
//! (`timeout 10 ls` is not `ls`), interpreters and tools whose options run code (`find -exec`,
//! `rg --pre`), builtins that change what later commands run, files inside the session root
//! (the model can rewrite them), and anything dynamic or compound.

use std::ffi::OsStr;

use super::pattern::shell_quote;
use super::program::{self, Dirs, Program};
use super::shell::SimpleCommand;

/// Programs whose first argument picks what they do, so a grant covers that subcommand only.
#[rustfmt::skip]
const WITH_SUBCOMMANDS: &[&str] = &[
    "git", "cargo", "npm", "pnpm", "yarn", "go", "docker", "podman", "kubectl", "pip",
    "pip3", "uv", "apt", "apt-get", "brew", "systemctl", "rustup", "gh", "dotnet", "npx",
    "poetry", "bundle", "pipx",
];

/// Subcommands that run a script or package named next, so the grant names that too
/// (`npm run lint` does not cover `npm run anything`).
#[rustfmt::skip]
const RUNS_NAMED: &[(&str, &str)] = &[
    ("npm", "run"), ("npm", "exec"), ("pnpm", "run"), ("pnpm", "exec"), ("pnpm", "dlx"),
    ("yarn", "run"), ("yarn", "exec"), ("yarn", "dlx"), ("uv", "run"), ("uv", "tool"),
    ("poetry", "run"), ("bundle", "exec"), ("pipx", "run"),
];

/// Programs that run another program or code they are handed.
#[rustfmt::skip]
const RUNS_WHAT_IT_IS_GIVEN: &[&str] = &[
    // wrappers
    "env", "timeout", "nice", "nohup", "xargs", "sudo", "doas", "su", "pkexec", "runuser",
    "command", "exec", "builtin", "eval", "source", ".", "time", "stdbuf", "ionice", "chrt",
    "taskset", "chroot", "unshare", "nsenter", "setsid", "setpriv", "flock", "watch",
    "strace", "ltrace", "gdb", "valgrind", "parallel", "busybox", "script", "expect", "sg",
    "newgrp", "systemd-run", "firejail", "bwrap", "fakeroot", "catchsegv", "entr",
    // shells and interpreters
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "csh", "tcsh", "node", "nodejs",
    "deno", "bun", "perl", "ruby", "irb", "php", "lua", "luajit", "tclsh", "wish", "Rscript",
    "julia", "awk", "gawk", "mawk", "nawk", "sed", "find", "make", "gmake", "cmake", "ninja",
    "just", "vim", "vi", "nvim", "emacs", "ed", "ex", "less", "more", "man", "xdg-open",
    // options that run programs or code
    "rg", "tar", "rsync", "ssh", "scp", "sftp", "sort", "zip", "unzip", "wget", "curl",
    "openssl", "gpg", "dpkg", "rpm", "tree", "git-shell",
];

/// Builtins that change how later commands in the same shell run. (`cd` is not one of them
/// here: grants name absolute files, and read-only approval stops at a `cd` in the script.)
#[rustfmt::skip]
const CHANGES_THE_SHELL: &[&str] = &[
    "alias", "hash", "enable", "export", "declare", "typeset", "local", "readonly", "set",
    "shopt", "trap", "unset", "ulimit", "umask", "mapfile", "readarray",
    "read", "let", "[[", "fc", "bind", "complete", "getopts",
];

/// Subcommands whose options run programs (`git rebase --exec`, `git push --receive-pack`
/// on a local remote, `git config core.fsmonitor`) or containers that can reach anything.
#[rustfmt::skip]
const SUBCOMMANDS_THAT_RUN_CODE: &[(&str, &str)] = &[
    ("git", "config"), ("git", "rebase"), ("git", "bisect"), ("git", "submodule"),
    ("git", "filter-branch"), ("git", "difftool"), ("git", "mergetool"), ("git", "grep"),
    ("git", "archive"), ("git", "fetch"), ("git", "pull"), ("git", "clone"), ("git", "push"),
    ("git", "ls-remote"), ("git", "remote"), ("git", "send-email"), ("git", "daemon"),
    ("git", "instaweb"), ("git", "credential"), ("git", "upload-pack"), ("git", "receive-pack"),
    ("docker", "run"), ("docker", "exec"), ("docker", "compose"), ("podman", "run"),
    ("podman", "exec"), ("kubectl", "exec"), ("kubectl", "run"), ("cargo", "install"),
    ("pip", "install"), ("pip3", "install"), ("npm", "install"), ("npm", "i"),
    ("uv", "pip"),
];

/// Options a grant never covers, wherever they appear: they make the program run another
/// one (`cargo test --config 'target.x.runner=["sh","-c",…]'`, `go test -exec`,
/// `npm test --script-shell`).
#[rustfmt::skip]
const RECONFIGURING: &[(&str, &[&str])] = &[
    ("cargo", &["--config", "-Z"]),
    ("go", &["-exec", "--exec", "-toolexec", "--toolexec"]),
    ("npm", &["--script-shell", "--node-options", "--userconfig"]),
    ("pnpm", &["--script-shell", "--node-options"]),
    ("yarn", &["--script-shell"]),
    ("npx", &["--script-shell", "--node-options", "--call", "-c"]),
];

fn reconfiguring<'a>(name: &str, args: &'a [String]) -> Option<&'a str> {
    let (_, options) = RECONFIGURING.iter().find(|(p, _)| *p == name)?;
    args.iter()
        .find(|a| {
            options.iter().any(|o| {
                a.as_str() == *o
                    || a.strip_prefix(o).is_some_and(|rest| {
                        rest.starts_with('=') || (o.len() == 2 && !rest.is_empty())
                    })
            })
        })
        .map(String::as_str)
}

/// Options that may precede a subcommand without changing what it does. Any other leading
/// option (`git -C dir`, `git -c alias.x=…`, `cargo --config …`, `cargo +toolchain`) may take
/// a value or change behaviour, so such a command gets no grant.
fn neutral_option(program: &str, option: &str) -> bool {
    match program {
        "git" => matches!(option, "--no-pager" | "-P" | "--no-optional-locks"),
        "cargo" => matches!(
            option,
            "-q" | "--quiet" | "-v" | "--verbose" | "--locked" | "--offline" | "--frozen"
        ),
        _ => false,
    }
}

/// What an "allow always" for one command covers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Grant {
    pub program: Program,
    /// The program's name as typed, for messages.
    pub name: String,
    /// Subcommand words included in the grant (`["status"]`, `["run", "lint"]`).
    pub sub: Vec<String>,
}

impl Grant {
    /// The sentence a person reads before choosing "always".
    pub(crate) fn covers(&self) -> String {
        let mut command = vec![self.name.clone()];
        command.extend(self.sub.iter().cloned());
        let command = command
            .iter()
            .map(|w| shell_quote(w))
            .collect::<Vec<_>>()
            .join(" ");
        match &self.program {
            Program::Builtin(_) => {
                format!("`{command}` (the shell builtin) with any arguments, for this session")
            }
            Program::File(path) => {
                let except = RECONFIGURING
                    .iter()
                    .find(|(p, _)| *p == self.name)
                    .map(|(_, o)| format!(" except {}", o.join(", ")))
                    .unwrap_or_default();
                format!(
                    "`{command}` with any arguments{except}, run as {}, for this session",
                    path.display()
                )
            }
        }
    }

    /// The short name of the grant, as in "`git status` commands allowed".
    pub(crate) fn label(&self) -> String {
        let mut words = vec![self.name.as_str()];
        words.extend(self.sub.iter().map(String::as_str));
        words.join(" ")
    }
}

/// The grant "always" would give for `cmd`, or why none is offered.
pub(crate) fn grant_for(
    cmd: &SimpleCommand,
    dirs: Dirs<'_>,
    path: Option<&OsStr>,
) -> Result<Grant, String> {
    if cmd.dynamic {
        return Err("its words are only known when it runs".into());
    }
    if cmd.redirects.iter().any(|r| !r.harmless()) {
        return Err("it writes to a file through a redirection".into());
    }
    let Some((word, args)) = cmd.words.split_first() else {
        return Err("it runs no program".into());
    };
    let name = word.rsplit('/').next().unwrap_or(word);
    if RUNS_WHAT_IT_IS_GIVEN.contains(&name) || is_python(name) {
        return Err(format!("{name} can run other programs or code"));
    }
    if CHANGES_THE_SHELL.contains(&name) && !word.contains('/') {
        return Err(format!("{name} changes how later commands run"));
    }
    let program = program::resolve(word, dirs.cwd, path)
        .ok_or_else(|| format!("`{}` cannot be found for certain", shell_quote(word)))?;
    if program.inside(dirs.root) {
        return Err(format!(
            "{} is a file in the session root, which the model can change",
            program.describe()
        ));
    }
    if let Some(option) = reconfiguring(name, args) {
        return Err(format!("`{option}` can make {name} run other programs"));
    }
    let sub = subcommand(name, args)?;
    if let Some(first) = sub.first()
        && SUBCOMMANDS_THAT_RUN_CODE.contains(&(name, first.as_str()))
    {
        return Err(format!("`{name} {first}` has options that run programs"));
    }
    Ok(Grant {
        program,
        name: name.to_string(),
        sub,
    })
}

fn subcommand(name: &str, args: &[String]) -> Result<Vec<String>, String> {
    if !WITH_SUBCOMMANDS.contains(&name) {
        return Ok(Vec::new());
    }
    let mut rest = args.iter().skip_while(|a| neutral_option(name, a));
    let Some(sub) = rest.next() else {
        return Ok(Vec::new());
    };
    if sub.starts_with(['-', '+']) {
        return Err(format!(
            "`{sub}` before the subcommand may change what {name} runs"
        ));
    }
    let mut words = vec![sub.clone()];
    if name == "npx" {
        return Ok(words);
    }
    if RUNS_NAMED.contains(&(name, sub.as_str())) {
        match rest.next() {
            Some(target) if !target.starts_with('-') => words.push(target.clone()),
            _ => return Err(format!("`{name} {sub}` names no script")),
        }
    }
    Ok(words)
}

fn is_python(name: &str) -> bool {
    ["python", "pypy"].iter().any(|p| {
        name.strip_prefix(p)
            .is_some_and(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.'))
    })
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::path::PathBuf;

    use super::*;
    use crate::policy::shell::simple_commands;

    /// A PATH directory with fake programs, and a root with its own `ls`.
    struct Setup {
        _tmp: tempfile::TempDir,
        bin: PathBuf,
        root: PathBuf,
    }

    fn setup() -> Setup {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let (bin, root) = (base.join("bin"), base.join("root"));
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&root).unwrap();
        for name in [
            "ls", "git", "cargo", "npm", "find", "timeout", "touch", "python3",
        ] {
            let path = bin.join(name);
            std::fs::write(&path, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        std::fs::copy(bin.join("ls"), root.join("ls")).unwrap();
        Setup {
            _tmp: tmp,
            bin,
            root,
        }
    }

    fn grant(s: &Setup, script: &str) -> Result<Grant, String> {
        let cmds = simple_commands(script).unwrap();
        assert_eq!(cmds.len(), 1, "{script}");
        grant_for(&cmds[0], Dirs::at_root(&s.root), Some(s.bin.as_os_str()))
    }

    fn label(s: &Setup, script: &str) -> Option<String> {
        grant(s, script).ok().map(|g| g.label())
    }

    #[test]
    fn grants_name_the_program_and_subcommand() {
        let s = setup();
        assert_eq!(
            label(&s, "git status --short").as_deref(),
            Some("git status")
        );
        assert_eq!(label(&s, "ls -la src").as_deref(), Some("ls"));
        assert_eq!(label(&s, "cargo test -q").as_deref(), Some("cargo test"));
        assert_eq!(
            label(&s, "git --no-pager log -5").as_deref(),
            Some("git log")
        );
        assert_eq!(label(&s, "npm run lint").as_deref(), Some("npm run lint"));
        assert_eq!(label(&s, "git").as_deref(), Some("git"));
        assert_eq!(label(&s, "cd sub").as_deref(), Some("cd"));
        let cargo = grant(&s, "cargo test -q").unwrap();
        assert!(
            cargo
                .covers()
                .contains("with any arguments except --config, -Z")
        );
        assert_eq!(grant(&s, "cargo test --release").unwrap(), cargo);
        // The same program by its full path is the same grant; a file in the root is not.
        let ls = grant(&s, "ls").unwrap();
        let full = format!("{} -l", s.bin.join("ls").display());
        assert_eq!(grant(&s, &full).unwrap(), ls);
        let err = grant(&s, "./ls -l").unwrap_err();
        assert!(err.contains("session root"), "{err}");
        assert!(
            ls.covers()
                .contains(&s.bin.join("ls").display().to_string())
        );
    }

    #[test]
    fn no_grant_where_any_arguments_would_mean_any_program() {
        let s = setup();
        for script in [
            "find . -name '*.txt'",
            "timeout 10 ls",
            "python3 -m pytest",
            "env FOO=1 ls",
            "sudo ls",
            "bash -c ls",
            "git -C /tmp status",
            "cargo +nightly test",
            "git config core.pager cat",
            "git push origin",
            "npm run",
            "cargo test --config 'target.x.runner=[\"sh\"]'",
            "cargo test -Zbuild-std",
            "export X=1",
            "ls > out",
            "ls \"$HOME\"",
            "nope-not-installed",
        ] {
            assert!(grant(&s, script).is_err(), "{script}");
        }
        let why = grant(&s, "find . -name x").unwrap_err();
        assert_eq!(why, "find can run other programs or code");
    }
}
