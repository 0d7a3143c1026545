//! Which program a command word runs: a bash builtin, or a file found the way bash finds it.
//!
//! Grants and read-only approvals are about programs, not spellings: `ls` is the `ls` on PATH,
//! `./ls` is a file in the project. A word with a `/` is a path (relative to the session root,
//! where the shell starts); a bare word is a builtin or the first executable in PATH. A PATH
//! entry that is relative (or empty, meaning the working directory) makes the answer depend on
//! where the shell has `cd`'d to, so such a lookup resolves to nothing.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// bash builtins and keywords: bash runs these itself whatever PATH holds.
#[rustfmt::skip]
const BUILTINS: &[&str] = &[
    ".", ":", "[", "alias", "bg", "bind", "break", "builtin", "caller", "cd", "command",
    "compgen", "complete", "compopt", "continue", "declare", "dirs", "disown", "echo", "enable",
    "eval", "exec", "exit", "export", "false", "fc", "fg", "getopts", "hash", "help", "history",
    "jobs", "kill", "let", "local", "logout", "mapfile", "popd", "printf", "pushd", "pwd", "read",
    "readarray", "readonly", "return", "set", "shift", "shopt", "source", "suspend", "test",
    "times", "trap", "true", "type", "typeset", "ulimit", "umask", "unalias", "unset", "wait",
    "[[", "]]", "time", "coproc",
];

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Program {
    Builtin(String),
    /// The file as found: its directory canonicalized, its own name kept, since a multi-call
    /// binary (busybox) does what the name says and `ls` → busybox must not equal `rm` →
    /// busybox.
    File(PathBuf),
}

impl Program {
    /// Whether the file lies beneath `root`, where the model may have written it.
    pub(crate) fn inside(&self, root: &Path) -> bool {
        matches!(self, Program::File(path) if path.starts_with(root))
    }

    pub(crate) fn describe(&self) -> String {
        match self {
            Program::Builtin(name) => format!("the shell builtin {name}"),
            Program::File(path) => path.display().to_string(),
        }
    }
}

/// Where a shell call runs: the session root, and the directory it starts in (the call's
/// `cwd`, inside the root). Relative paths and `./prog` are looked up from `cwd`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Dirs<'a> {
    pub root: &'a Path,
    pub cwd: &'a Path,
}

impl<'a> Dirs<'a> {
    #[cfg(test)]
    pub(crate) fn at_root(root: &'a Path) -> Dirs<'a> {
        Dirs { root, cwd: root }
    }
}

/// The PATH tool processes get (they inherit corral's).
pub(crate) fn search_path() -> Option<std::ffi::OsString> {
    std::env::var_os("PATH")
}

/// What `word` runs when the shell starts in `cwd` with `path` as PATH; `None` when that
/// cannot be known (not found, or found only through a relative PATH entry).
pub(crate) fn resolve(word: &str, cwd: &Path, path: Option<&OsStr>) -> Option<Program> {
    if word.is_empty() || word.chars().any(|c| c.is_control()) {
        return None;
    }
    if word.contains('/') {
        return file_at(&cwd.join(word));
    }
    if BUILTINS.contains(&word) {
        return Some(Program::Builtin(word.to_string()));
    }
    for dir in std::env::split_paths(path?) {
        if dir.is_relative() || dir.as_os_str().is_empty() {
            return None;
        }
        if let Some(found) = file_at(&dir.join(word)) {
            return Some(found);
        }
    }
    None
}

/// An executable regular file at `path` (following links to decide), named by its canonical
/// directory and its own file name.
fn file_at(path: &Path) -> Option<Program> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return None;
    }
    let name = path.file_name()?;
    let dir = path.parent()?.canonicalize().ok()?;
    Some(Program::File(dir.join(name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn executable(path: &Path) {
        std::fs::write(path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn bare_words_are_builtins_or_found_on_path_and_paths_are_files() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let (bin, root) = (base.join("bin"), base.join("root"));
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&root).unwrap();
        executable(&bin.join("ls"));
        executable(&root.join("ls"));
        std::fs::write(bin.join("plain"), "not executable").unwrap();
        let path = bin.as_os_str();
        assert_eq!(
            resolve("ls", &root, Some(path)),
            Some(Program::File(bin.join("ls")))
        );
        let local = resolve("./ls", &root, Some(path)).unwrap();
        assert_eq!(local, Program::File(root.join("ls")));
        assert!(local.inside(&root));
        assert_eq!(
            resolve("cd", &root, Some(path)),
            Some(Program::Builtin("cd".into()))
        );
        assert_eq!(resolve("plain", &root, Some(path)), None);
        assert_eq!(resolve("nope", &root, Some(path)), None);
        // A relative entry before the real one: which file runs depends on the shell's cwd.
        let relative = std::env::join_paths([Path::new("."), &bin]).unwrap();
        assert_eq!(resolve("ls", &root, Some(&relative)), None);
        let relative_after = std::env::join_paths([&bin, Path::new("")]).unwrap();
        assert!(resolve("ls", &root, Some(&relative_after)).is_some());
    }

    #[test]
    fn links_keep_their_own_name() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        executable(&base.join("busybox"));
        std::os::unix::fs::symlink("busybox", base.join("ls")).unwrap();
        std::os::unix::fs::symlink("busybox", base.join("rm")).unwrap();
        let path = base.as_os_str();
        let ls = resolve("ls", &base, Some(path)).unwrap();
        assert_eq!(ls, Program::File(base.join("ls")));
        assert_ne!(ls, resolve("rm", &base, Some(path)).unwrap());
    }
}
