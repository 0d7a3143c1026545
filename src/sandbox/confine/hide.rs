//! Hiding paths in the helper's private mount namespace: an empty read-only tmpfs over each
//! hidden directory, `/dev/null` over each hidden file or socket (a connect to it is refused).
//!
//! A writable path (the session root, a worktree under corral's data directory) or an allowed
//! socket inside a hidden directory stays usable: that directory is not covered, its other
//! entries are, level by level down to the kept path. Everything is planned before the first
//! mount, since a mount changes what later lookups see.
//!
//! Pathname sockets: where landlock cannot refuse connecting to them (RESOLVE_UNIX, ABI 9),
//! every socket the kernel lists in `/proc/net/unix` when the tool starts (read before the
//! network namespace is left) that lies outside the writable paths and the allowed sockets is
//! hidden, plus the usual socket places (the session's hidden list, `/tmp/ssh-*` …).

use std::collections::BTreeSet;
use std::os::unix::fs::FileTypeExt as _;
use std::path::{Path, PathBuf};

use nix::mount::{MsFlags, mount};

use crate::sandbox::spec::SandboxSpec;

/// Directories in `/tmp` that hold per-user sockets under a variable name.
const TMP_SOCKET_PREFIXES: &[&str] = &["ssh-", "tmux-", "screens", "emacs", "pulse-", "vscode-"];

/// What to mount over a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cover {
    /// An empty read-only tmpfs.
    Dir,
    /// `/dev/null`, bound over a file, socket or device.
    Null,
}

/// The pathname sockets bound in the current network namespace, as the kernel lists them.
/// Read before unsharing the network: afterwards `/proc/net` shows the new, empty one.
pub(super) fn bound_sockets() -> Vec<PathBuf> {
    std::fs::read_to_string("/proc/net/unix")
        .map(|text| parse_proc_net_unix(&text))
        .unwrap_or_default()
}

/// The `Path` column: absolute names only (abstract ones start with `@`; relative ones were
/// bound against a directory nobody can tell now).
fn parse_proc_net_unix(text: &str) -> Vec<PathBuf> {
    let mut paths = BTreeSet::new();
    for line in text.lines().skip(1) {
        let mut rest = line.trim_start();
        // Num RefCount Protocol Flags Type St Inode, then the path (which may hold spaces).
        for _ in 0..7 {
            rest = rest
                .find(char::is_whitespace)
                .map_or("", |i| rest[i..].trim_start());
        }
        if rest.starts_with('/') {
            paths.insert(PathBuf::from(rest));
        }
    }
    paths.into_iter().collect()
}

/// `/tmp/ssh-XXXX` and the like: agents and terminal multiplexers that obey commands.
fn tmp_socket_dirs() -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir("/tmp") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            TMP_SOCKET_PREFIXES.iter().any(|p| name.starts_with(p))
        })
        .map(|e| e.path())
        .collect()
}

/// Hides what `spec` asks plus the sockets outside it (`bound`: from [`bound_sockets`]).
/// Returns how many mounts were made; an error names the first path that could not be hidden
/// (the others are still hidden).
pub(super) fn hide(spec: &SandboxSpec, bound: &[PathBuf]) -> Result<usize, String> {
    let keep: Vec<PathBuf> = spec
        .writable
        .iter()
        .chain(&spec.sockets)
        .filter_map(|p| p.canonicalize().ok())
        .collect();
    let writable: Vec<PathBuf> = spec
        .writable
        .iter()
        .filter_map(|p| p.canonicalize().ok())
        .collect();
    let mut wanted: Vec<PathBuf> = spec.hidden.clone();
    wanted.extend(tmp_socket_dirs());
    // A socket under a writable path is the session's own; an allowed one is kept anyway. A
    // path that is no socket here was bound in another mount namespace: not ours to cover.
    wanted.extend(
        bound
            .iter()
            .filter(|s| !writable.iter().any(|w| s.starts_with(w)))
            .filter(|s| std::fs::metadata(s).is_ok_and(|m| m.file_type().is_socket()))
            .cloned(),
    );
    let plan = plan(&wanted, &keep);
    if plan.is_empty() {
        return Ok(0);
    }
    let none: Option<&str> = None;
    // Nothing done here may propagate back to the parent namespace.
    mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none)
        .map_err(|e| format!("making / private: {e}"))?;
    let mut first_error = None;
    let mut failed = 0;
    for (path, cover) in &plan {
        if let Err(e) = cover_one(path, *cover) {
            failed += 1;
            first_error.get_or_insert(format!("{}: {e}", path.display()));
        }
    }
    // A working directory inside a hidden one was entered before the mount and would still
    // show the original; entered again by path it is the empty cover. Deeper inside, the path
    // is gone: the tool starts at `/` rather than in the original.
    if let Ok(cwd) = std::env::current_dir()
        && let Err(e) = std::env::set_current_dir(&cwd)
    {
        let _ = std::env::set_current_dir("/");
        return Err(format!(
            "the working directory {} is hidden: {e}",
            cwd.display()
        ));
    }
    match first_error {
        None => Ok(plan.len()),
        Some(e) if failed == 1 => Err(format!("cannot hide {e}")),
        Some(e) => Err(format!("cannot hide {e} (and {} more)", failed - 1)),
    }
}

fn cover_one(path: &Path, cover: Cover) -> Result<(), nix::Error> {
    let none: Option<&str> = None;
    match cover {
        Cover::Dir => mount(
            Some("tmpfs"),
            path,
            Some("tmpfs"),
            MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            Some("size=4k,nr_inodes=1,mode=0555"),
        ),
        Cover::Null => mount(Some("/dev/null"), path, none, MsFlags::MS_BIND, none),
    }
}

/// The mounts that hide `wanted` (as given: resolved here; missing paths skipped) while every
/// `keep` path (resolved) stays reachable. Sorted, so parents come before children.
pub(super) fn plan(wanted: &[PathBuf], keep: &[PathBuf]) -> Vec<(PathBuf, Cover)> {
    let targets: BTreeSet<PathBuf> = wanted
        .iter()
        .filter_map(|p| p.canonicalize().ok())
        .filter(|p| !keep.contains(p))
        .collect();
    let mut plan = Vec::new();
    for target in &targets {
        let covered = targets.iter().any(|other| {
            other != target
                && target.starts_with(other)
                // Inside a kept path under `other`, `other`'s split does not reach it.
                && !keep.iter().any(|k| k.starts_with(other) && target.starts_with(k) && k != target)
        });
        if !covered {
            cover_or_split(target, keep, &mut plan);
        }
    }
    plan
}

fn cover_or_split(path: &Path, keep: &[PathBuf], plan: &mut Vec<(PathBuf, Cover)>) {
    let Ok(meta) = std::fs::metadata(path) else {
        return;
    };
    if !keep.iter().any(|k| k.starts_with(path)) {
        let cover = if meta.is_dir() {
            Cover::Dir
        } else {
            Cover::Null
        };
        plan.push((path.to_path_buf(), cover));
        return;
    }
    if keep.iter().any(|k| k == path) {
        return;
    }
    // An ancestor of a kept path: cover its other entries instead. A symlink among them
    // leads somewhere that is hidden (or not) by its own path.
    let Ok(entries) = std::fs::read_dir(path) else {
        return;
    };
    let mut children: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| !t.is_symlink()))
        .map(|e| e.path())
        .collect();
    children.sort();
    for child in children {
        cover_or_split(&child, keep, plan);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_net_unix_paths_are_the_absolute_ones() {
        let text = "Num       RefCount Protocol Flags    Type St Inode Path\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 20001 /run/user/1000/bus\n\
            0000000000000000: 00000003 00000000 00000000 0001 03 20002 /run/user/1000/bus\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 20003 @/tmp/.X11-unix/X0\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 20004 rel.sock\n\
            0000000000000000: 00000003 00000000 00000000 0001 03 20005\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 20006 /tmp/with space\n";
        assert_eq!(
            parse_proc_net_unix(text),
            [
                PathBuf::from("/run/user/1000/bus"),
                PathBuf::from("/tmp/with space")
            ]
        );
    }

    fn tree() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        for d in [
            "data/corral/worktrees/mine/src",
            "data/corral/worktrees/other",
            "data/corral/llama",
            "home/.ssh",
            "home/work/.aws",
        ] {
            std::fs::create_dir_all(base.join(d)).unwrap();
        }
        for f in ["home/.netrc", "home/.ssh/id", "data/corral/pids.json"] {
            std::fs::write(base.join(f), "x").unwrap();
        }
        std::os::unix::fs::symlink("/etc", base.join("data/corral/etc-link")).unwrap();
        (dir, base)
    }

    #[test]
    fn hidden_paths_are_covered_and_missing_ones_skipped() {
        let (_dir, base) = tree();
        let wanted = [
            base.join("home/.ssh"),
            base.join("home/.ssh/id"),
            base.join("home/.netrc"),
            base.join("home/.gnupg"),
        ];
        let plan = plan(&wanted, &[base.join("home/work")]);
        assert_eq!(
            plan,
            [
                (base.join("home/.netrc"), Cover::Null),
                (base.join("home/.ssh"), Cover::Dir),
            ]
        );
    }

    #[test]
    fn a_kept_path_inside_a_hidden_one_stays_and_its_siblings_go() {
        let (_dir, base) = tree();
        let root = base.join("data/corral/worktrees/mine");
        let plan = plan(&[base.join("data/corral")], std::slice::from_ref(&root));
        assert_eq!(
            plan,
            [
                (base.join("data/corral/llama"), Cover::Dir),
                (base.join("data/corral/pids.json"), Cover::Null),
                (base.join("data/corral/worktrees/other"), Cover::Dir),
            ]
        );
        // The root itself asked to be hidden: the root wins.
        assert!(super::plan(std::slice::from_ref(&root), std::slice::from_ref(&root)).is_empty());
    }

    #[test]
    fn a_hidden_path_inside_a_kept_one_inside_a_hidden_one_is_still_hidden() {
        let (_dir, base) = tree();
        let work = base.join("home/work");
        let wanted = [base.join("home"), work.join(".aws")];
        let plan = plan(&wanted, std::slice::from_ref(&work));
        assert!(plan.contains(&(work.join(".aws"), Cover::Dir)), "{plan:?}");
        assert!(
            plan.contains(&(base.join("home/.ssh"), Cover::Dir)),
            "{plan:?}"
        );
        assert!(
            !plan
                .iter()
                .any(|(p, _)| p == &work || p == &base.join("home"))
        );
    }
}
