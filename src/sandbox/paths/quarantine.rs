//! Agent config a shell or python call made or changed without a person's yes to that very
//! call is moved out of the root into a quarantine directory.
//!
//! The file tools ask a person before they write agent config ([`super::guard`]), and what
//! existed at the session start is bind-mounted read-only; but a process can create a new
//! `.claude/settings.json` (landlock cannot forbid one name in a writable tree), and with the
//! sandbox off or without mount namespaces it can change an existing one. So the agent config
//! entries beneath the root are fingerprinted before each call ([`Snapshot::take`], the same
//! walk as for planted `.git`, and only the names in the guard's list) and compared after it
//! ([`quarantine_changes`]): an entry that is new, or whose fingerprint differs, is moved whole
//! to `<quarantine>/<call>/<its path>`, through a directory handle opened beneath the root.
//!
//! A fingerprint is `lstat` data (inode, size, mtime, ctime; ctime moves on every write,
//! rename into, chmod) of the entry and, for a directory, of up to [`MAX_FINGERPRINT`] entries
//! inside it; changes past that bound in a huge config directory are not seen.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::RootDir;
use super::guard::Guarded;
use super::scan;

/// Entries looked at inside one config directory for its fingerprint.
pub(crate) const MAX_FINGERPRINT: usize = 1024;

/// The agent config entries beneath a root, by path, with their fingerprints.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Snapshot(BTreeMap<PathBuf, u64>);

impl Snapshot {
    pub(crate) fn take(root: &Path) -> Snapshot {
        let (found, _) = scan::walk(root);
        Snapshot(
            found
                .into_iter()
                .filter(|f| f.class == Guarded::AgentConfig)
                .map(|f| {
                    let print = fingerprint(&f.path);
                    (f.path, print)
                })
                .collect(),
        )
    }
}

/// `lstat` data of `path` and of what is inside it (bounded, symlinks not followed).
fn fingerprint(path: &Path) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    let mut stack = vec![path.to_path_buf()];
    let mut seen = 0;
    while let Some(next) = stack.pop() {
        seen += 1;
        if seen > MAX_FINGERPRINT {
            break;
        }
        next.hash(&mut hasher);
        let Ok(meta) = std::fs::symlink_metadata(&next) else {
            0u8.hash(&mut hasher);
            continue;
        };
        (
            meta.ino(),
            meta.mode(),
            meta.len(),
            meta.mtime(),
            meta.mtime_nsec(),
        )
            .hash(&mut hasher);
        (meta.ctime(), meta.ctime_nsec()).hash(&mut hasher);
        if meta.is_dir()
            && let Ok(listing) = std::fs::read_dir(&next)
        {
            let mut children: Vec<PathBuf> = listing.flatten().map(|e| e.path()).collect();
            children.sort();
            stack.extend(children);
        }
    }
    hasher.finish()
}

/// One entry moved (or not) out of the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Moved {
    /// Relative to the root.
    pub shown: String,
    pub changed: bool,
    pub to: Result<PathBuf, String>,
}

/// Compares the tree with `before` and moves every agent config entry that is new or changed
/// into `quarantine/<call>/`. Entries that vanished are not anyone's concern here.
pub(crate) fn quarantine_changes(
    root: &Path,
    before: &Snapshot,
    quarantine: &Path,
    call: &str,
) -> Vec<Moved> {
    let after = Snapshot::take(root);
    let call: String = call
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut moved = Vec::new();
    for (path, print) in after.0 {
        let changed = match before.0.get(&path) {
            Some(old) if *old == print => continue,
            Some(_) => true,
            None => false,
        };
        let Ok(rel) = path.strip_prefix(root) else {
            continue;
        };
        let dest = quarantine.join(&call).join(rel);
        let to = move_out(root, rel, &dest).map(|()| dest).map_err(|e| {
            tracing::warn!(path = %path.display(), error = %e, "cannot quarantine agent config");
            e.to_string()
        });
        moved.push(Moved {
            shown: rel.display().to_string(),
            changed,
            to,
        });
    }
    moved
}

/// Moves `rel` (beneath `root`) to `dest`. The parent is opened beneath the root by the kernel
/// and the rename goes through that handle, so a directory swapped for a symlink since the
/// walk cannot make this move anything from outside the root. Across filesystems the entry is
/// copied (symlinks as symlinks) and then removed through the same handle.
fn move_out(root: &Path, rel: &Path, dest: &Path) -> std::io::Result<()> {
    let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
        return Err(std::io::Error::other("not beneath the root"));
    };
    let outside = |e: super::PathError| std::io::Error::other(e.to_string());
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    let dir = RootDir::open(root)
        .and_then(|d| d.open_dir(parent))
        .map_err(outside)?;
    if let Some(up) = dest.parent() {
        std::fs::create_dir_all(up)?;
    }
    match rustix::fs::renameat(&dir, name, rustix::fs::CWD, dest) {
        Ok(()) => return Ok(()),
        Err(rustix::io::Errno::XDEV) => {}
        Err(e) => return Err(e.into()),
    }
    use std::os::fd::AsRawFd;
    let source = Path::new(&format!("/proc/self/fd/{}", dir.as_raw_fd())).join(name);
    copy_tree(&source, dest, &mut 0)?;
    match std::fs::symlink_metadata(&source) {
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(&source),
        Ok(_) => std::fs::remove_file(&source),
        Err(e) => Err(e),
    }
}

/// Copies without following symlinks; gives up past [`scan::MAX_ENTRIES`] entries.
fn copy_tree(from: &Path, to: &Path, count: &mut usize) -> std::io::Result<()> {
    *count += 1;
    if *count > scan::MAX_ENTRIES {
        return Err(std::io::Error::other("too many entries to copy"));
    }
    let meta = std::fs::symlink_metadata(from)?;
    if meta.file_type().is_symlink() {
        std::os::unix::fs::symlink(std::fs::read_link(from)?, to)
    } else if meta.is_dir() {
        std::fs::create_dir(to)?;
        for entry in std::fs::read_dir(from)? {
            let entry = entry?;
            copy_tree(&entry.path(), &to.join(entry.file_name()), count)?;
        }
        Ok(())
    } else if meta.is_file() {
        std::fs::copy(from, to).map(drop)
    } else {
        // Sockets, fifos, devices: nothing an agent reads as config; removed with the rest.
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_and_changed_config_is_moved_out_and_the_rest_stays() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let (root, jail) = (base.join("root"), base.join("quarantine"));
        std::fs::create_dir_all(root.join(".vscode")).unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join(".vscode/tasks.json"), "{}").unwrap();
        std::fs::write(root.join("src/.mcp.json"), "{}").unwrap();
        let before = Snapshot::take(&root);
        assert!(quarantine_changes(&root, &before, &jail, "c1").is_empty());

        std::fs::create_dir(root.join(".claude")).unwrap();
        std::fs::write(root.join(".claude/settings.json"), "{\"hooks\":1}").unwrap();
        std::fs::write(root.join(".vscode/tasks.json"), "{\"tasks\":[1]}").unwrap();
        let mut moved = quarantine_changes(&root, &before, &jail, "call/1");
        moved.sort_by(|a, b| a.shown.cmp(&b.shown));
        let summary: Vec<(&str, bool)> = moved
            .iter()
            .map(|m| (m.shown.as_str(), m.changed))
            .collect();
        assert_eq!(summary, [(".claude", false), (".vscode", true)]);
        assert_eq!(moved[0].to, Ok(jail.join("call_1/.claude")));
        assert!(!root.join(".claude").exists() && !root.join(".vscode").exists());
        assert_eq!(
            std::fs::read_to_string(jail.join("call_1/.claude/settings.json")).unwrap(),
            "{\"hooks\":1}"
        );
        assert!(root.join("src/.mcp.json").is_file());
    }

    #[test]
    fn a_symlinked_parent_cannot_move_anything_from_outside() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let root = base.join("root");
        std::fs::create_dir_all(base.join("outside/.claude")).unwrap();
        std::fs::create_dir_all(&root).unwrap();
        std::os::unix::fs::symlink(base.join("outside"), root.join("link")).unwrap();
        let dest = base.join("q/x");
        assert!(move_out(&root, Path::new("link/.claude"), &dest).is_err());
        assert!(base.join("outside/.claude").is_dir());
    }

    /// /dev/shm is tmpfs where it exists: the rename fails with EXDEV and the copy takes over.
    #[test]
    fn across_filesystems_the_entry_is_copied_then_removed() {
        let shm = Path::new("/dev/shm");
        let tmp = tempfile::tempdir().unwrap();
        let Ok(other) = tempfile::tempdir_in(shm) else {
            return;
        };
        let root = tmp.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("a/.codex")).unwrap();
        std::fs::write(root.join("a/.codex/config.toml"), "x").unwrap();
        let dest = other.path().join("q/a/.codex");
        move_out(&root, Path::new("a/.codex"), &dest).unwrap();
        assert_eq!(
            std::fs::read_to_string(dest.join("config.toml")).unwrap(),
            "x"
        );
        assert!(!root.join("a/.codex").exists());
    }

    #[test]
    fn copies_keep_symlinks_as_symlinks() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path();
        std::fs::create_dir_all(base.join("a/d")).unwrap();
        std::fs::write(base.join("a/d/f"), "x").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", base.join("a/l")).unwrap();
        copy_tree(&base.join("a"), &base.join("b"), &mut 0).unwrap();
        assert_eq!(std::fs::read_to_string(base.join("b/d/f")).unwrap(), "x");
        assert!(
            std::fs::symlink_metadata(base.join("b/l"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }
}
