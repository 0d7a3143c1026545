//! Paths no tool writes on its own, whatever the preset: git's own files and agent config.
//!
//! git runs what its files say (`core.fsmonitor`, `core.pager`, hooks, aliases) later, outside
//! the sandbox, when a person types `git status`; agent CLIs (claude, gemini, codex, opencode,
//! editors) run hooks, tasks and MCP servers from their project config the same way. So:
//! - **git's files** — anything within a component named `.git` (a directory or a gitdir
//!   file, at any depth: nested repositories, submodules, worktrees), or within a directory git
//!   would take for a git directory (`HEAD` plus `objects/` and `refs/`, or a `commondir`) —
//!   are never written by the file tools. Reading them is harmless and allowed.
//! - **agent config** (`.claude/`, `.mcp.json`, `opencode.json`, `.opencode/`, `.gemini/`,
//!   `.codex/`, `.vscode/`, `.cursor/`, `.zed/`, at any depth) is written only when a person
//!   said yes to that very call: the gate asks for it in every preset, bypass included, and the
//!   file tools refuse to reach it through a symbolic link (the person must see its real name).
//!
//! Instructions (`CLAUDE.md`, `AGENTS.md`, `GEMINI.md`) are not in the list: they are text the
//! model reads, not code anything runs, and editing them is ordinary work.
//!
//! Names are compared the way a case-insensitive filesystem would (vfat, exFAT, ext4 casefold
//! directories, NTFS and HFS+ mounts): ASCII case folded, trailing dots and spaces dropped
//! (NTFS), invisible code points dropped (HFS+), and NTFS's short name `git~1` taken for
//! `.git` — the same rules git itself applies when it checks out a tree (`verify_path`). On an
//! ordinary ext4 `.GIT` is harmless, but refusing it costs nothing and the root may not be
//! ordinary.

use std::ffi::OsStr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use super::{PathError, resolve_path};

/// What a guarded path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Guarded {
    /// git's own files: never written by a tool.
    Git,
    /// An agent's or editor's project config: written only with a person's yes.
    AgentConfig,
}

/// Agent and editor config, by the name of a path component (folded as [`fold`] does).
const AGENT_CONFIG: [&str; 11] = [
    ".claude",
    ".mcp.json",
    "opencode.json",
    "opencode.jsonc",
    ".opencode",
    ".gemini",
    ".codex",
    // tasks.json runs on folder open, settings.json names interpreters and shells, mcp.json
    // starts servers: the whole directory is config that runs things.
    ".vscode",
    ".cursor",
    ".zed",
    ".windsurf",
];

/// Code points HFS+ ignores in names (git's `is_hfs_dotgit` list).
fn hfs_ignorable(c: char) -> bool {
    matches!(c, '\u{200c}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{206a}'..='\u{206f}' | '\u{feff}')
}

/// `name` as a case-insensitive filesystem would match it.
fn fold(name: &OsStr) -> String {
    let text = String::from_utf8_lossy(name.as_bytes());
    let folded: String = text
        .chars()
        .filter(|c| !hfs_ignorable(*c))
        .map(|c| c.to_ascii_lowercase())
        .collect();
    folded.trim_end_matches(['.', ' ']).to_owned()
}

/// Whether `name` may fold to a guarded name at all: every one starts with `.`, `g` or `o`,
/// or with an invisible code point (UTF-8 lead bytes 0xE2, 0xEF). Walks of big trees call
/// this for every entry, so most names are ruled out without folding.
fn may_be_guarded(name: &OsStr) -> bool {
    matches!(
        name.as_bytes().first(),
        Some(b'.' | b'g' | b'G' | b'o' | b'O' | 0xe2 | 0xef)
    )
}

/// Whether git (on some filesystem) would take `name` for `.git`.
pub(crate) fn is_git_name(name: &OsStr) -> bool {
    component_class(name) == Some(Guarded::Git)
}

/// The class of one path component, if it is guarded.
pub(crate) fn component_class(name: &OsStr) -> Option<Guarded> {
    if !may_be_guarded(name) {
        return None;
    }
    let folded = fold(name);
    if matches!(folded.as_str(), ".git" | "git~1") {
        return Some(Guarded::Git);
    }
    AGENT_CONFIG
        .contains(&folded.as_str())
        .then_some(Guarded::AgentConfig)
}

/// The class of a path (relative to the root, or absolute within it) by its components: git
/// wins over agent config. Only names are looked at; [`looks_like_git_dir`] covers git
/// directories with other names.
pub(crate) fn classify(path: &Path) -> Option<Guarded> {
    let mut found = None;
    for part in path.components() {
        if let Component::Normal(name) = part {
            match component_class(name) {
                Some(Guarded::Git) => return Some(Guarded::Git),
                Some(class) => found = Some(class),
                None => {}
            }
        }
    }
    found
}

/// Whether git would use `dir` as a git directory (its `is_git_directory`): a `HEAD` file and
/// either `objects/` and `refs/`, or a `commondir` file (a linked worktree's admin dir).
pub(crate) fn looks_like_git_dir(dir: &Path) -> bool {
    let is = |name: &str, dir_wanted: bool| {
        std::fs::symlink_metadata(dir.join(name)).is_ok_and(|m| {
            if dir_wanted {
                m.is_dir()
            } else {
                m.is_file() || m.file_type().is_symlink()
            }
        })
    };
    is("HEAD", false) && ((is("objects", true) && is("refs", true)) || is("commondir", false))
}

/// The git directory a `.git` *file* names (`gitdir: <path>`, relative to the file's
/// directory), if it is one.
pub(crate) fn gitdir_of_file(dot_git: &Path) -> Option<std::path::PathBuf> {
    let meta = std::fs::symlink_metadata(dot_git).ok()?;
    if !meta.is_file() || meta.len() > 4096 {
        return None;
    }
    let text = std::fs::read_to_string(dot_git).ok()?;
    let target = text.strip_prefix("gitdir:")?.trim();
    if target.is_empty() {
        return None;
    }
    Some(dot_git.parent()?.join(target))
}

/// Why a write to a guarded path is refused or asked about, for the model and the person.
pub(crate) fn reason(class: Guarded) -> &'static str {
    match class {
        Guarded::Git => {
            "it is inside git's own files (a .git directory or file, or a git directory); git \
             runs what they say (hooks, core.fsmonitor, aliases) outside the sandbox, so no tool \
             writes them in any preset"
        }
        Guarded::AgentConfig => {
            "it is agent or editor config (.claude/, .mcp.json, opencode.json, .opencode/, \
             .gemini/, .codex/, .vscode/ …); the next agent or editor started here runs what it \
             says (hooks, MCP servers, tasks) outside the sandbox, so a person decides every \
             write to it, in every preset"
        }
    }
}

/// The agent config a write path names (relative to the root, `.` and `..` applied by name),
/// which is what the gate showed a person; `None` when it names none.
pub(crate) fn asked_agent_config(rel: &Path) -> Option<PathBuf> {
    if classify(rel) != Some(Guarded::AgentConfig) {
        return None;
    }
    let mut normal = PathBuf::new();
    for part in rel.components() {
        match part {
            Component::Normal(name) => normal.push(name),
            Component::ParentDir => {
                normal.pop();
            }
            _ => {}
        }
    }
    Some(normal)
}

/// Refuses a write path (relative to the root) by its names, before anything on the way to
/// it is created: git's files always, agent config unless the path asked for named some.
/// Checked again on every symlink hop.
pub(crate) fn refuse_named(
    rel: &Path,
    requested: &str,
    asked: Option<&Path>,
) -> Result<(), PathError> {
    match classify(rel) {
        Some(Guarded::Git) => Err(refusal(requested, Guarded::Git, None)),
        Some(Guarded::AgentConfig) if asked.is_none() => Err(refusal(
            requested,
            Guarded::AgentConfig,
            Some(rel.display().to_string()),
        )),
        _ => Ok(()),
    }
}

/// Refuses, before missing directories are made, a parent that already resolves into a
/// guarded place (a symlink `docs -> .git`, a git directory by another name): nothing may be
/// created inside. The check of the kernel's answer in [`check_landing`] is the one that
/// counts; this one keeps `create_dir_all` from making directories there first.
pub(crate) fn refuse_parent(
    root: &Path,
    parent: &Path,
    requested: &str,
    asked: Option<&Path>,
) -> Result<(), PathError> {
    let Ok(resolved) = resolve_path(root, &root.join(parent), requested) else {
        // Confinement errors are reported by the open that follows, in its own words.
        return Ok(());
    };
    let rel = resolved.strip_prefix(root).unwrap_or(&resolved);
    refuse_named(rel, requested, asked)?;
    if in_git_dir(root, &resolved) {
        return Err(refusal(
            requested,
            Guarded::Git,
            Some(rel.display().to_string()),
        ));
    }
    Ok(())
}

/// Whether `dir` or a directory above it, up to and including `root`, is a git directory.
/// Missing directories are skipped.
pub(crate) fn in_git_dir(root: &Path, dir: &Path) -> bool {
    dir.ancestors()
        .take_while(|a| a.starts_with(root))
        .any(looks_like_git_dir)
}

/// Checks where a write really lands — the directory the kernel opened (named by
/// `/proc/self/fd`, the resolved path when that is missing) plus the final name: nothing
/// within git's files, and agent config only where the path asked for named it (`asked`),
/// since that is what the gate showed a person.
pub(crate) fn check_landing(
    root: &Path,
    dir: &OwnedFd,
    parent: &Path,
    name: &OsStr,
    requested: &str,
    asked: Option<&Path>,
) -> Result<(), PathError> {
    let dir_path = match std::fs::read_link(format!("/proc/self/fd/{}", dir.as_raw_fd())) {
        Ok(path) => path,
        Err(_) => resolve_path(root, &root.join(parent), requested)?,
    };
    let Ok(rel_dir) = dir_path.strip_prefix(root) else {
        return Err(PathError::OutsideRoot {
            requested: requested.to_owned(),
            root: root.to_path_buf(),
        });
    };
    let landing = rel_dir.join(name);
    let shown = || Some(landing.display().to_string());
    match classify(&landing) {
        Some(Guarded::Git) => return Err(refusal(requested, Guarded::Git, shown())),
        Some(Guarded::AgentConfig) if asked != Some(landing.as_path()) => {
            return Err(refusal(requested, Guarded::AgentConfig, shown()));
        }
        _ => {}
    }
    if in_git_dir(root, &dir_path) {
        return Err(refusal(requested, Guarded::Git, shown()));
    }
    Ok(())
}

/// `landed`: where the write would really have gone, when that is not what was asked.
fn refusal(requested: &str, class: Guarded, landed: Option<String>) -> PathError {
    let landed = landed.filter(|l| l != requested.trim_start_matches("./"));
    let message = match (class, landed) {
        (Guarded::AgentConfig, Some(landed)) => format!(
            "it leads to {landed} through a symbolic link, and {}. Write it by its own name so \
             the person is asked",
            reason(class)
        ),
        (_, Some(landed)) => format!("it leads to {landed}, and {}", reason(class)),
        (_, None) => reason(class).to_owned(),
    };
    PathError::Guarded {
        requested: requested.to_owned(),
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_names_are_matched_as_case_insensitive_filesystems_would() {
        for name in [
            ".git",
            ".GIT",
            ".Git",
            ".git.",
            ".git ",
            ".git. .",
            "git~1",
            "GIT~1",
            ".g\u{200c}it",
            "\u{feff}.git",
        ] {
            assert!(is_git_name(OsStr::new(name)), "{name:?}");
        }
        for name in [".gitignore", ".github", "git", ".gitx", "x.git", "..git"] {
            assert!(!is_git_name(OsStr::new(name)), "{name:?}");
        }
        assert!(is_git_name(OsStr::from_bytes(b".GIT")));
        // Not UTF-8: still compared (lossily), never panics.
        assert!(!is_git_name(OsStr::from_bytes(b".g\xffit")));
    }

    #[test]
    fn paths_are_classified_by_any_component() {
        let class = |p: &str| classify(Path::new(p));
        assert_eq!(class(".git/config"), Some(Guarded::Git));
        assert_eq!(class("sub/.git/hooks/pre-commit"), Some(Guarded::Git));
        assert_eq!(class("docs/.git"), Some(Guarded::Git));
        assert_eq!(class("/r/a/.GIT/x"), Some(Guarded::Git));
        assert_eq!(class(".claude/.git/x"), Some(Guarded::Git));
        assert_eq!(class(".claude/settings.json"), Some(Guarded::AgentConfig));
        assert_eq!(class("pkg/.mcp.json"), Some(Guarded::AgentConfig));
        assert_eq!(class("opencode.json"), Some(Guarded::AgentConfig));
        assert_eq!(class(".vscode/tasks.json"), Some(Guarded::AgentConfig));
        assert_eq!(class(".Claude/settings.json"), Some(Guarded::AgentConfig));
        assert_eq!(class("CLAUDE.md"), None);
        assert_eq!(class("AGENTS.md"), None);
        assert_eq!(class("src/.gitignore"), None);
        assert_eq!(class(".github/workflows/ci.yml"), None);
        assert_eq!(class("src/main.rs"), None);
    }

    #[test]
    fn git_directories_are_recognised_by_their_contents() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("planted");
        std::fs::create_dir_all(dir.join("objects")).unwrap();
        assert!(!looks_like_git_dir(&dir));
        std::fs::write(dir.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        assert!(!looks_like_git_dir(&dir));
        std::fs::create_dir(dir.join("refs")).unwrap();
        assert!(looks_like_git_dir(&dir));
        let admin = tmp.path().join("admin");
        std::fs::create_dir(&admin).unwrap();
        std::fs::write(admin.join("HEAD"), "x").unwrap();
        std::fs::write(admin.join("commondir"), "../..").unwrap();
        assert!(looks_like_git_dir(&admin));
    }

    #[test]
    fn gitdir_files_name_their_target_relative_to_themselves() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join(".git");
        std::fs::write(&file, "gitdir: ../elsewhere/x\n").unwrap();
        assert_eq!(
            gitdir_of_file(&file).unwrap(),
            tmp.path().join("../elsewhere/x")
        );
        std::fs::write(&file, "gitdir: /abs/x\n").unwrap();
        assert_eq!(gitdir_of_file(&file).unwrap(), Path::new("/abs/x"));
        std::fs::write(&file, "not a pointer").unwrap();
        assert!(gitdir_of_file(&file).is_none());
        assert!(gitdir_of_file(tmp.path()).is_none());
    }
}
