//! The write guard: what a call that writes files by path needs, whatever the preset says —
//! git's files are refused, agent config needs a person (see `sandbox::paths::guard`). The
//! approver applies it over the gate's verdict; the tools check again where the kernel
//! really opens each path.

use std::path::Path;

use serde_json::Value;

use crate::sandbox::paths::guard::{self, Guarded};

/// What a write to a guarded path needs, whatever the preset says (see
/// `sandbox::paths::guard`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Guard {
    /// git's own files: refused, bypass included.
    Never(String),
    /// Agent config named by its path: a person decides this very call; an "allow" from the
    /// preset, a rule or a session grant does not count.
    Person(String),
}

/// The guard for one call, checked before the gate's verdict is used: for every path the
/// call writes (`write_file`'s and `edit_file`'s path, each path of an `apply_patch`, moves'
/// destinations and deletions included; see [`super::edit::write_paths`]), and the strictest
/// of them counts. External agents' edits are mapped onto `write_file`. A path is judged by
/// its name and, for git's files, also where it resolves (symlinks followed, inside the
/// root); the tools check again where the kernel really opens it, and refuse to reach agent
/// config through a link, so what a person is shown is where the write goes.
pub(crate) fn guard(tool: &str, args: &Value, root: &Path) -> Option<Guard> {
    guard_paths(&super::edit::write_paths(tool, args)?, root)
}

/// The strictest guard over `paths`: git's files anywhere refuse the lot.
pub(crate) fn guard_paths(paths: &[String], root: &Path) -> Option<Guard> {
    let guards: Vec<Guard> = paths.iter().filter_map(|p| guard_path(p, root)).collect();
    let never = guards.iter().find(|g| matches!(g, Guard::Never(_)));
    never.or(guards.first()).cloned()
}

fn guard_path(requested: &str, root: &Path) -> Option<Guard> {
    let path = Path::new(requested);
    let rel = path.strip_prefix(root).unwrap_or(path);
    let resolved = crate::sandbox::paths::resolve_in_root(root, requested).ok();
    let resolved_rel = resolved.as_deref().and_then(|r| r.strip_prefix(root).ok());
    let in_git_dir = resolved
        .as_deref()
        .and_then(Path::parent)
        .is_some_and(|dir| guard::in_git_dir(root, dir));
    if guard::classify(rel) == Some(Guarded::Git)
        || resolved_rel.is_some_and(|r| guard::classify(r) == Some(Guarded::Git))
        || in_git_dir
    {
        return Some(Guard::Never(format!(
            "{requested}: {}",
            guard::reason(Guarded::Git)
        )));
    }
    (guard::classify(rel) == Some(Guarded::AgentConfig)).then(|| {
        Guard::Person(format!(
            "{requested} is agent config: {}; \"always\" does not cover it",
            guard::reason(Guarded::AgentConfig)
        ))
    })
}
