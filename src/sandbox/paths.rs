//! Path confinement: every path a file tool touches must resolve inside the session root.
//!
//! Two layers. [`RootDir`] (in `beneath`) opens paths with the kernel's help, openat2 with
//! RESOLVE_BENEATH, so the rule holds at the moment of the open even if a symlink is swapped in
//! mid-call; the file tools go through it. [`resolve_in_root`] is the portable, check-then-use
//! resolution: it explains refusals, names paths for the gate and for tools that hand a
//! directory to a process (`cwd`), and is the fallback where openat2 is missing. `guard`
//! says which paths no tool writes on its own (git's files, agent config).

mod beneath;
pub(crate) mod guard;
pub(crate) mod quarantine;
pub(crate) mod scan;

pub(crate) use beneath::{Existing, RootDir};

use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

/// Dangling symlinks followed by hand before giving up (the kernel's own limit is 40).
const MAX_SYMLINK_HOPS: usize = 40;

/// Whether openat2 works here; probed once. When false, file tools fall back to the
/// check-then-open resolution of [`resolve_in_root`].
pub(crate) fn openat2_supported() -> bool {
    static SUPPORTED: OnceLock<bool> = OnceLock::new();
    *SUPPORTED.get_or_init(|| {
        let probe = rustix::fs::openat2(
            rustix::fs::CWD,
            "/",
            OFlags::PATH | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::NO_MAGICLINKS,
        );
        // ENOSYS: too old a kernel; EPERM: a seccomp filter that predates openat2; EINVAL:
        // flags it does not know. Anything else (say ENOENT) means the call itself works.
        !matches!(probe, Err(Errno::NOSYS | Errno::PERM | Errno::INVAL))
    })
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum PathError {
    #[error("path {requested} is outside the session root {}", root.display())]
    OutsideRoot { requested: String, root: PathBuf },
    #[error("path {requested:?} is not valid: {reason}")]
    Invalid { requested: String, reason: String },
    /// git's own files, or agent config reached other than by its name (see `guard`).
    #[error("{requested} is not written by corral's tools: {message}")]
    Guarded { requested: String, message: String },
    #[error("cannot resolve path {requested}: {message}")]
    Io {
        requested: String,
        kind: io::ErrorKind,
        message: String,
    },
}

/// Resolves `requested` (relative to `root`, or absolute) to a path inside `root`, following
/// symlinks. `root` must be canonical. The path need not exist yet: the longest existing
/// prefix is canonicalized and the rest appended, so files about to be created resolve too.
pub(crate) fn resolve_in_root(root: &Path, requested: &str) -> Result<PathBuf, PathError> {
    resolve_path(root, Path::new(requested), requested)
}

/// [`resolve_in_root`] for any path; errors name `shown`.
fn resolve_path(root: &Path, path: &Path, shown: &str) -> Result<PathBuf, PathError> {
    if path.as_os_str().as_bytes().contains(&0) {
        return Err(PathError::Invalid {
            requested: shown.to_owned(),
            reason: "it contains a NUL byte".into(),
        });
    }
    let requested = shown;
    let io_err = |e: io::Error| PathError::Io {
        requested: requested.to_owned(),
        kind: e.kind(),
        message: e.to_string(),
    };
    // An absolute path replaces the root here; the final check decides if it is inside.
    let mut candidate = root.join(path);
    for _ in 0..MAX_SYMLINK_HOPS {
        let (base, rest) = split_existing(&candidate).map_err(io_err)?;
        let mut parts = rest.components();
        if let Some(Component::Normal(first)) = parts.next() {
            let link = base.join(first);
            // canonicalize stops at a dangling symlink; its target must be checked as well,
            // or creating "link" would write wherever it points.
            if std::fs::symlink_metadata(&link).is_ok_and(|m| m.file_type().is_symlink()) {
                let mut next = base.join(std::fs::read_link(&link).map_err(io_err)?);
                next.push(parts.as_path());
                candidate = next;
                continue;
            }
        }
        let resolved = append_lexically(base, &rest);
        return if resolved.starts_with(root) {
            Ok(resolved)
        } else {
            Err(PathError::OutsideRoot {
                requested: requested.to_owned(),
                root: root.to_path_buf(),
            })
        };
    }
    Err(PathError::Io {
        requested: requested.to_owned(),
        kind: io::ErrorKind::Other,
        message: "too many levels of symbolic links".into(),
    })
}

/// Splits an absolute path into its longest existing prefix, canonicalized, and the rest.
fn split_existing(path: &Path) -> io::Result<(PathBuf, PathBuf)> {
    for ancestor in path.ancestors() {
        match std::fs::canonicalize(ancestor) {
            Ok(base) => {
                let rest = path.strip_prefix(ancestor).unwrap_or(Path::new(""));
                return Ok((base, rest.to_path_buf()));
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        "no part of the path exists",
    ))
}

/// Appends components that do not exist yet; none of them can be a symlink, so `..` may be
/// applied lexically.
fn append_lexically(mut base: PathBuf, rest: &Path) -> PathBuf {
    for part in rest.components() {
        match part {
            Component::Normal(name) => base.push(name),
            Component::ParentDir => {
                base.pop();
            }
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    base
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// `<tmp>/root` (the session root, with `a.txt` and `sub/`) next to `<tmp>/outside/secret`.
    fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let root = base.join("root");
        let outside = base.join("outside");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(root.join("a.txt"), "a").unwrap();
        std::fs::write(outside.join("secret"), "s").unwrap();
        (tmp, root, outside)
    }

    fn is_outside(r: Result<PathBuf, PathError>) -> bool {
        matches!(r, Err(PathError::OutsideRoot { .. }))
    }

    #[test]
    fn relative_paths_join_onto_the_root() {
        let (_t, root, _) = setup();
        assert_eq!(resolve_in_root(&root, "a.txt").unwrap(), root.join("a.txt"));
        assert_eq!(
            resolve_in_root(&root, "./sub/../a.txt").unwrap(),
            root.join("a.txt")
        );
        assert_eq!(resolve_in_root(&root, "").unwrap(), root);
        assert_eq!(resolve_in_root(&root, ".").unwrap(), root);
    }

    #[test]
    fn missing_files_and_directories_resolve() {
        let (_t, root, _) = setup();
        let got = resolve_in_root(&root, "new/dir/f.txt").unwrap();
        assert_eq!(got, root.join("new/dir/f.txt"));
        let got = resolve_in_root(&root, "new/../sub/x").unwrap();
        assert_eq!(got, root.join("sub/x"));
    }

    #[test]
    fn dot_dot_escapes_are_refused_with_a_clear_message() {
        let (_t, root, _) = setup();
        let err = resolve_in_root(&root, "../x").unwrap_err();
        let expected = format!("path ../x is outside the session root {}", root.display());
        assert_eq!(err.to_string(), expected);
        assert!(is_outside(resolve_in_root(
            &root,
            "sub/../../outside/secret"
        )));
        assert!(is_outside(resolve_in_root(&root, "new/../../x")));
        // A sibling sharing the root's name as a prefix is still outside.
        assert!(is_outside(resolve_in_root(&root, "../root2/f")));
    }

    #[test]
    fn absolute_paths_must_be_inside() {
        let (_t, root, outside) = setup();
        let inside = root.join("sub/new.txt");
        assert_eq!(
            resolve_in_root(&root, inside.to_str().unwrap()).unwrap(),
            inside
        );
        assert!(is_outside(resolve_in_root(
            &root,
            outside.join("secret").to_str().unwrap()
        )));
        assert!(is_outside(resolve_in_root(&root, "/etc/passwd")));
    }

    #[test]
    fn symlinks_leading_out_are_refused() {
        let (_t, root, outside) = setup();
        symlink(&outside, root.join("out")).unwrap();
        symlink(outside.join("secret"), root.join("secret-link")).unwrap();
        assert!(is_outside(resolve_in_root(&root, "out")));
        assert!(is_outside(resolve_in_root(&root, "out/secret")));
        assert!(is_outside(resolve_in_root(&root, "out/not-yet.txt")));
        assert!(is_outside(resolve_in_root(&root, "secret-link")));
    }

    #[test]
    fn symlinks_staying_inside_are_followed() {
        let (_t, root, _) = setup();
        symlink("sub", root.join("alias")).unwrap();
        symlink("a.txt", root.join("a-link")).unwrap();
        assert_eq!(
            resolve_in_root(&root, "alias/f").unwrap(),
            root.join("sub/f")
        );
        assert_eq!(
            resolve_in_root(&root, "a-link").unwrap(),
            root.join("a.txt")
        );
    }

    #[test]
    fn dangling_symlinks_are_checked_by_their_target() {
        let (_t, root, outside) = setup();
        symlink(outside.join("nope"), root.join("dangling-out")).unwrap();
        symlink("sub/later.txt", root.join("dangling-in")).unwrap();
        assert!(is_outside(resolve_in_root(&root, "dangling-out")));
        let got = resolve_in_root(&root, "dangling-in").unwrap();
        assert_eq!(got, root.join("sub/later.txt"));
    }

    #[test]
    fn symlink_loops_and_nul_bytes_are_errors() {
        let (_t, root, _) = setup();
        symlink("loop-b", root.join("loop-a")).unwrap();
        symlink("loop-a", root.join("loop-b")).unwrap();
        assert!(matches!(
            resolve_in_root(&root, "loop-a"),
            Err(PathError::Io { .. })
        ));
        assert!(matches!(
            resolve_in_root(&root, "a\0b"),
            Err(PathError::Invalid { .. })
        ));
    }
}
