//! Kernel-checked opens beneath the session root.
//!
//! Every open starts from a descriptor of the root and goes through openat2 with
//! RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS: the kernel refuses (EXDEV) any resolution that
//! leaves the root (`..` above it, a symlink leading out, one swapped in mid-call), while
//! symlinks that stay inside still work. Later steps go through the opened descriptors (`*at`
//! calls), so nothing checked is looked up by path again.
//!
//! Without openat2 (Linux < 5.6, or a seccomp filter that denies it) opens fall back to
//! [`resolve_path`] and a plain open of the resolved path: the same rule, but checked before
//! the open, so a symlink swapped in between can still lead out. [`openat2_supported`] says
//! which is in use (`corral doctor` reports it).

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use super::guard;
use super::{MAX_SYMLINK_HOPS, PathError, openat2_supported, resolve_path};

/// Stay beneath the root; magic links (/proc/…/fd/N) could name any open file.
const RESOLVE: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_MAGICLINKS);
/// Directory handles: enough to look up and create entries, not to read.
const DIR_FLAGS: OFlags = OFlags::PATH.union(OFlags::DIRECTORY).union(OFlags::CLOEXEC);
/// EAGAIN from openat2 means a concurrent rename kept the kernel from ruling out a `..`
/// escape; it asks callers to retry.
const EAGAIN_RETRIES: usize = 32;

/// The session root, opened once per tool call; every path a file tool touches is opened
/// through it.
#[derive(Debug)]
pub(crate) struct RootDir {
    fd: OwnedFd,
    /// Canonical; used for messages, for absolute paths the model gives, and for walks.
    path: PathBuf,
    /// False where openat2 is missing: opens are checked by `resolve_path` instead.
    kernel: bool,
}

/// A path found beneath the root, for tools that walk the tree by path.
#[derive(Debug)]
pub(crate) struct Located {
    /// Where the kernel found it (symlinks already followed), inside the root.
    pub(crate) path: PathBuf,
    pub(crate) is_dir: bool,
}

/// What the name a write replaces is now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Existing {
    Nothing,
    /// A regular file; `mode` holds its permission bits, which the new content keeps.
    File {
        mode: u32,
    },
    Directory,
    /// A FIFO, socket or device node: replaced like a file, without keeping its mode.
    Other,
}

/// Where a write lands: a directory opened beneath the root and a single name in it.
#[derive(Debug)]
pub(crate) struct WriteTarget {
    pub(crate) dir: OwnedFd,
    pub(crate) name: OsString,
    pub(crate) existing: Existing,
}

impl RootDir {
    /// Opens `root` (canonical) for one call.
    pub(crate) fn open(root: &Path) -> Result<RootDir, PathError> {
        RootDir::with_kernel(root, openat2_supported())
    }

    /// The root is canonical (made so at session start), so no component of it is a symlink.
    /// It is opened refusing symlinks on the way: a session whose root lies inside another
    /// session's writable root must not be redirected by that session swapping a component
    /// of the path for a symlink. Without openat2 the kernel's name for the opened directory
    /// is compared with the root instead.
    fn with_kernel(root: &Path, kernel: bool) -> Result<RootDir, PathError> {
        let shown = root.to_string_lossy();
        let fd = if kernel {
            let resolve = ResolveFlags::NO_SYMLINKS.union(ResolveFlags::NO_MAGICLINKS);
            let mut retries = 0;
            loop {
                match rustix::fs::openat2(rustix::fs::CWD, root, DIR_FLAGS, Mode::empty(), resolve)
                {
                    Err(Errno::AGAIN) if retries < EAGAIN_RETRIES => retries += 1,
                    Err(Errno::LOOP) => return Err(moved_root(root)),
                    opened => break opened.map_err(|e| errno_error(&shown, e))?,
                }
            }
        } else {
            let fd = rustix::fs::open(root, DIR_FLAGS, Mode::empty())
                .map_err(|e| errno_error(&shown, e))?;
            // No /proc: nothing to compare with; the opens below still resolve by hand.
            if let Ok(opened) = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
                && opened != root
            {
                return Err(moved_root(root));
            }
            fd
        };
        Ok(RootDir {
            fd,
            path: root.to_path_buf(),
            kernel,
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Opens a file (or directory) for reading. Symlinks are followed while they stay inside.
    pub(crate) fn open_file(&self, requested: impl AsRef<Path>) -> Result<File, PathError> {
        let requested = requested.as_ref();
        let shown = requested.to_string_lossy();
        let rel = self.relative(requested, &shown)?;
        // NONBLOCK: opening a FIFO must not hang the call (regular files ignore the flag);
        // NOCTTY: a terminal device must not become the controlling terminal.
        let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK;
        self.open_beneath(&rel, flags, &shown).map(File::from)
    }

    /// Opens directory `rel` (relative to the root) beneath it, for `*at` calls.
    pub(crate) fn open_dir(&self, rel: &Path) -> Result<OwnedFd, PathError> {
        self.open_beneath(rel, DIR_FLAGS, &rel.to_string_lossy())
    }

    /// Finds a file or directory to walk. The walk itself goes by path (see `walker`), so it
    /// starts from the path the kernel resolved, not from the one the model gave.
    pub(crate) fn locate(&self, requested: impl AsRef<Path>) -> Result<Located, PathError> {
        let requested = requested.as_ref();
        let shown = requested.to_string_lossy();
        let rel = self.relative(requested, &shown)?;
        let fd = self.open_beneath(&rel, OFlags::PATH | OFlags::CLOEXEC, &shown)?;
        let stat = rustix::fs::fstat(&fd).map_err(|e| errno_error(&shown, e))?;
        let is_dir = FileType::from_raw_mode(stat.st_mode) == FileType::Directory;
        // The kernel's name for what it opened; without /proc, the same resolution by hand.
        let path = match std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())) {
            Ok(path) => path,
            Err(_) => resolve_path(&self.path, &self.path.join(&rel), &shown)?,
        };
        if !path.starts_with(&self.path) {
            return Err(self.outside(&shown));
        }
        Ok(Located { path, is_dir })
    }

    /// Prepares a write to `requested`: creates missing parent directories beneath the root
    /// and opens the one the file goes in. A symlink as the last component is followed by
    /// hand, hop by hop, each hop opened beneath the root again, so writing through a link
    /// updates its target when that is inside, and is refused when it is not.
    ///
    /// git's own files are refused on every hop and where the write really lands; agent config
    /// only where it lands, and only when `requested` did not name it (see `guard`).
    pub(crate) fn prepare_write(&self, requested: &str) -> Result<WriteTarget, PathError> {
        let mut rel = self.relative(Path::new(requested), requested)?;
        let asked = guard::asked_agent_config(&rel);
        for _ in 0..MAX_SYMLINK_HOPS {
            guard::refuse_named(&rel, requested, asked.as_deref())?;
            let (parent, name) = split_name(&rel, requested)?;
            guard::refuse_parent(&self.path, parent, requested, asked.as_deref())?;
            let dir = self.create_dir_all(parent, requested)?;
            let landing = |dir: &OwnedFd| {
                guard::check_landing(&self.path, dir, parent, name, requested, asked.as_deref())
            };
            let stat = match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(stat) => stat,
                Err(Errno::NOENT) => {
                    landing(&dir)?;
                    return Ok(WriteTarget {
                        dir,
                        name: name.to_owned(),
                        existing: Existing::Nothing,
                    });
                }
                Err(e) => return Err(errno_error(requested, e)),
            };
            let existing = match FileType::from_raw_mode(stat.st_mode) {
                FileType::Symlink => {
                    let target = rustix::fs::readlinkat(&dir, name, Vec::new())
                        .map_err(|e| errno_error(requested, e))?;
                    let target = PathBuf::from(OsString::from_vec(target.into_bytes()));
                    rel = if target.is_absolute() {
                        self.relative(&target, requested)?
                    } else {
                        parent.join(target)
                    };
                    continue;
                }
                FileType::Directory => Existing::Directory,
                FileType::RegularFile => Existing::File {
                    mode: stat.st_mode & 0o7777,
                },
                _ => Existing::Other,
            };
            landing(&dir)?;
            return Ok(WriteTarget {
                dir,
                name: name.to_owned(),
                existing,
            });
        }
        Err(PathError::Io {
            requested: requested.to_owned(),
            kind: io::ErrorKind::Other,
            message: "too many levels of symbolic links".into(),
        })
    }

    /// Opens directory `dir` (relative to the root), creating what is missing.
    fn create_dir_all(&self, dir: &Path, shown: &str) -> Result<OwnedFd, PathError> {
        match self.open_beneath(dir, DIR_FLAGS, shown) {
            Err(PathError::Io {
                kind: io::ErrorKind::NotFound,
                ..
            }) => {}
            opened => return opened,
        }
        // Refuse an escape before creating anything on the way to it; the kernel still checks
        // every step below.
        resolve_path(&self.path, &self.path.join(dir), shown)?;
        // One component at a time: each directory is made inside one just opened beneath the
        // root, then reopened from the root, so a symlink swapped into the middle of the path
        // cannot redirect creation outside.
        let mut current = self.open_beneath(Path::new(""), DIR_FLAGS, shown)?;
        let mut prefix = PathBuf::new();
        for part in dir.components() {
            prefix.push(part);
            if let Component::Normal(name) = part {
                match rustix::fs::mkdirat(&current, name, Mode::from_raw_mode(0o777)) {
                    // EEXIST: there already, or made concurrently; the open below decides.
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(errno_error(shown, e)),
                }
            }
            current = self.open_beneath(&prefix, DIR_FLAGS, shown)?;
        }
        Ok(current)
    }

    /// `requested` relative to the root. Absolute paths must name something inside it.
    fn relative(&self, requested: &Path, shown: &str) -> Result<PathBuf, PathError> {
        if requested.as_os_str().as_bytes().contains(&0) {
            return Err(PathError::Invalid {
                requested: shown.to_owned(),
                reason: "it contains a NUL byte".into(),
            });
        }
        if requested.is_relative() {
            return Ok(requested.to_path_buf());
        }
        if let Ok(rest) = requested.strip_prefix(&self.path) {
            return Ok(rest.to_path_buf());
        }
        // The root may be named through a symlinked prefix (/tmp -> /private/tmp); resolve
        // that by hand. The relative path that comes out is still opened by the kernel.
        let resolved = resolve_path(&self.path, requested, shown)?;
        resolved
            .strip_prefix(&self.path)
            .map(Path::to_path_buf)
            .map_err(|_| self.outside(shown))
    }

    /// Opens `rel` beneath the root with `flags`; EXDEV (it would leave the root) becomes
    /// [`PathError::OutsideRoot`].
    fn open_beneath(&self, rel: &Path, flags: OFlags, shown: &str) -> Result<OwnedFd, PathError> {
        if !self.kernel {
            let resolved = resolve_path(&self.path, &self.path.join(rel), shown)?;
            return rustix::fs::open(&resolved, flags, Mode::empty())
                .map_err(|e| errno_error(shown, e));
        }
        match self.openat2(rel, flags) {
            Err(Errno::XDEV) => {}
            opened => return opened.map_err(|e| errno_error(shown, e)),
        }
        // RESOLVE_BENEATH refuses every absolute symlink, even one pointing back inside the
        // root. Resolve by hand once, and let the kernel check the symlink-free result.
        let resolved = resolve_path(&self.path, &self.path.join(rel), shown)?;
        let inside = resolved
            .strip_prefix(&self.path)
            .map_err(|_| self.outside(shown))?;
        match self.openat2(inside, flags) {
            Err(Errno::XDEV) => Err(self.outside(shown)),
            opened => opened.map_err(|e| errno_error(shown, e)),
        }
    }

    fn openat2(&self, rel: &Path, flags: OFlags) -> Result<OwnedFd, Errno> {
        let rel = if rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            rel
        };
        let mut retries = 0;
        loop {
            match rustix::fs::openat2(&self.fd, rel, flags, Mode::empty(), RESOLVE) {
                Err(Errno::AGAIN) if retries < EAGAIN_RETRIES => retries += 1,
                opened => return opened,
            }
        }
    }

    fn outside(&self, shown: &str) -> PathError {
        PathError::OutsideRoot {
            requested: shown.to_owned(),
            root: self.path.clone(),
        }
    }
}

/// Splits `rel` into its directory and final name, which must be a single plain component.
fn split_name<'a>(rel: &'a Path, shown: &str) -> Result<(&'a Path, &'a OsStr), PathError> {
    let invalid = |reason: &str| PathError::Invalid {
        requested: shown.to_owned(),
        reason: reason.into(),
    };
    match rel.components().next_back() {
        Some(Component::Normal(name)) => Ok((rel.parent().unwrap_or(Path::new("")), name)),
        None | Some(Component::CurDir) => {
            Err(invalid("it names the working directory itself, not a file"))
        }
        Some(_) => Err(invalid("it does not end in a file name")),
    }
}

/// The root's path now leads through a symlink, somewhere else than where the session started.
fn moved_root(root: &Path) -> PathError {
    PathError::Io {
        requested: root.to_string_lossy().into_owned(),
        kind: io::ErrorKind::Other,
        message: format!(
            "the session root {} no longer resolves to the directory the session started in \
             (a component of its path was replaced by a symbolic link); refusing to touch it",
            root.display()
        ),
    }
}

fn errno_error(shown: &str, e: Errno) -> PathError {
    let e = io::Error::from(e);
    PathError::Io {
        requested: shown.to_owned(),
        kind: e.kind(),
        message: e.to_string(),
    }
}

#[cfg(test)]
mod tests;
