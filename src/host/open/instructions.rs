//! Project instructions for corral's own loop: `AGENTS.md` (or the names `instructions` lists)
//! from the config directory, then from the repository root down to the session's directory,
//! nearer ones last, appended to the system prompt, and an `instructions` event naming them.
//! External agents (claude, codex, ACP agents) read their own files; this is not for them.
//!
//! The repository is untrusted, so its files are opened the way `read_file` opens: those in the
//! session root beneath the root, those in the directories above it beneath the repository's
//! top (openat2 RESOLVE_BENEATH), so a symlink leading out of the tree (to `~/.ssh/id_rsa`,
//! corral's `jwt-secret`, `/etc/shadow`) is not followed. Opens do not block (a FIFO cannot
//! hang the start) and only a regular file is read (a device never is), and never more of it
//! than its share of the cap. Directories above the session root are looked at only when the
//! root is in a repository's working tree, and only up to its top.
//!
//! The cap: [`MAX_FILE_BYTES`] of one file, [`MAX_TOTAL_BYTES`] of all. Nearer files get
//! their share first, since they are the specific ones; a file cut short ends with a note
//! saying so, and one left without any share is named in a note instead of its text.

use std::collections::HashSet;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};

use crate::event::{InstructionFile, InstructionsData, Payload};
use crate::sandbox::paths::{PathError, RootDir};
use crate::session::Session;

/// Most bytes of one file that go into the prompt.
pub(crate) const MAX_FILE_BYTES: usize = 16 * 1024;
/// Most bytes of all the files together.
pub(crate) const MAX_TOTAL_BYTES: usize = 32 * 1024;
/// How far (in bytes) a cut moves back to end at a line break instead of mid-line.
const LINE_SNAP: usize = 200;

/// A file found and opened, not read yet.
struct Found {
    path: PathBuf,
    file: File,
}

/// One file as it goes into the prompt.
struct Piece {
    shown: String,
    text: String,
    /// The file's size, when only part of it (or none) went in.
    cut_from: Option<u64>,
}

/// What a session's prompt gets: the text to append, and the files it came from.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Instructions {
    pub text: Option<String>,
    pub files: Vec<InstructionFile>,
}

/// Loads the instructions for a native session whose root is `root` (canonical), puts them
/// after the request's own `system` text and announces them with an `instructions` event.
pub(crate) fn load_into(
    names: &[String],
    root: &Path,
    system: &mut Option<String>,
    session: &Session,
) {
    let loaded = load(names, crate::config::Config::dir().as_deref(), root);
    if let Some(text) = loaded.text {
        *system = Some(match system.take().filter(|s| !s.trim().is_empty()) {
            Some(own) => format!("{own}\n\n{text}"),
            None => text,
        });
    }
    if !loaded.files.is_empty() {
        session.emit(Payload::Instructions(InstructionsData {
            files: loaded.files,
        }));
    }
}

/// The instructions under `names` in `global` (the config directory), then in each
/// directory from the repository's top down to `root`.
pub(crate) fn load(names: &[String], global: Option<&Path>, root: &Path) -> Instructions {
    if names.is_empty() {
        return Instructions::default();
    }
    let found = find(names, global, root);
    // Nearest first: each takes its share of what is left.
    let mut left = MAX_TOTAL_BYTES;
    let mut pieces: Vec<Piece> = found
        .into_iter()
        .rev()
        .filter_map(|found| {
            let piece = read(found, left)?;
            left = left.saturating_sub(piece.text.len());
            Some(piece)
        })
        .collect();
    pieces.reverse();
    compose(pieces)
}

fn find(names: &[String], global: Option<&Path>, root: &Path) -> Vec<Found> {
    let mut found = Vec::new();
    let mut seen = HashSet::new();
    let mut keep = |path: PathBuf, opened: Result<File, PathError>| match opened {
        Ok(file) => match file.metadata() {
            // The same file under two names (CLAUDE.md -> AGENTS.md) counts once.
            Ok(meta) if meta.is_file() => {
                if seen.insert((meta.dev(), meta.ino())) {
                    found.push(Found { path, file });
                }
            }
            Ok(_) => {
                tracing::warn!(path = %path.display(), "instructions: not a regular file; skipped")
            }
            Err(e) => tracing::warn!(path = %path.display(), error = %e, "instructions: skipped"),
        },
        Err(PathError::Io {
            kind: std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory,
            ..
        }) => {}
        Err(e) => tracing::warn!(path = %path.display(), error = %e, "instructions: skipped"),
    };
    // The user's own directory: whatever its files link to is theirs to choose.
    if let Some(dir) = global {
        for name in names {
            let path = dir.join(name);
            let opened = open_own(&path);
            keep(path, opened);
        }
    }
    let top = crate::worktree::working_tree_of(root).unwrap_or_else(|| root.to_path_buf());
    let mut dirs: Vec<&Path> = root
        .ancestors()
        .take_while(|d| d.starts_with(&top))
        .collect();
    dirs.reverse();
    let (Ok(top_dir), Ok(root_dir)) = (RootDir::open(&top), RootDir::open(root)) else {
        tracing::warn!(root = %root.display(), "instructions: cannot open the session root");
        return found;
    };
    for dir in dirs {
        // Beneath the session root where it can be; beneath the repository's top above it.
        let (base, rel) = match dir.strip_prefix(&top) {
            Ok(_) if dir == root => (&root_dir, PathBuf::new()),
            Ok(rel) => (&top_dir, rel.to_path_buf()),
            Err(_) => continue,
        };
        for name in names {
            keep(dir.join(name), base.open_file(rel.join(name)));
        }
    }
    found
}

/// Opens a file of the user's config directory the way `RootDir` opens: without blocking on
/// a FIFO, without taking a terminal as the controlling one.
fn open_own(path: &Path) -> Result<File, PathError> {
    let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK;
    rustix::fs::open(path, flags, Mode::empty())
        .map(File::from)
        .map_err(|e| {
            let e = std::io::Error::from(e);
            PathError::Io {
                requested: path.display().to_string(),
                kind: e.kind(),
                message: e.to_string(),
            }
        })
}

/// Reads at most `allowed` (and [`MAX_FILE_BYTES`]) bytes of a file, and one more to know
/// whether it goes on. `None`: nothing in it, or it cannot be read.
fn read(found: Found, allowed: usize) -> Option<Piece> {
    let allowed = allowed.min(MAX_FILE_BYTES);
    let shown = found.path.to_string_lossy().into_owned();
    let size = found.file.metadata().map(|m| m.len()).unwrap_or_default();
    let mut bytes = Vec::new();
    if let Err(e) = found.file.take(allowed as u64 + 1).read_to_end(&mut bytes) {
        tracing::warn!(path = %shown, error = %e, "instructions: cannot read; skipped");
        return None;
    }
    let mut cut = bytes.len() > allowed;
    let kept = if cut {
        &bytes[..cut_point(&bytes, allowed)]
    } else {
        &bytes[..]
    };
    let mut text = String::from_utf8_lossy(kept).into_owned();
    // Each invalid byte became a three-byte U+FFFD: the cap holds for what the prompt gets.
    if text.len() > allowed {
        let mut end = allowed;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        cut = true;
    }
    if !cut && text.trim().is_empty() {
        return None;
    }
    Some(Piece {
        shown,
        text,
        cut_from: cut.then_some(size),
    })
}

/// Where to cut `bytes` to keep at most `max`: not inside a UTF-8 sequence, and at a line
/// break when one is near.
fn cut_point(bytes: &[u8], max: usize) -> usize {
    let head = &bytes[..max.min(bytes.len())];
    let end = match std::str::from_utf8(head) {
        // An incomplete sequence at the end is the cut's doing: leave it out.
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        _ => head.len(),
    };
    match head[..end].iter().rposition(|&b| b == b'\n') {
        Some(nl) if end - (nl + 1) <= LINE_SNAP => nl + 1,
        _ => end,
    }
}

fn compose(pieces: Vec<Piece>) -> Instructions {
    if pieces.is_empty() {
        return Instructions::default();
    }
    let mut text = String::from(
        "# Project instructions\n\
         The files below hold instructions for this project, from the most general to the \
         most specific: where they disagree, the later one wins, and the user's request wins \
         over all of them.",
    );
    let mut files = Vec::new();
    for piece in pieces {
        text.push_str(&format!("\n\n## {}\n", piece.shown));
        text.push_str(piece.text.trim_end());
        match piece.cut_from {
            Some(_) if piece.text.is_empty() => text.push_str(&format!(
                "[left out: the project instructions reached corral's cap of \
                 {MAX_TOTAL_BYTES} bytes]"
            )),
            Some(size) => text.push_str(&format!(
                "\n[… cut: the file has {size} bytes; the first {} are shown (corral's cap: \
                 {MAX_FILE_BYTES} bytes per file, {MAX_TOTAL_BYTES} in all)]",
                piece.text.len()
            )),
            None => {}
        }
        files.push(InstructionFile {
            path: piece.shown,
            bytes: piece.text.len() as u64,
            truncated: piece.cut_from.is_some(),
        });
    }
    Instructions {
        text: Some(text),
        files,
    }
}

#[cfg(test)]
#[path = "instructions_tests.rs"]
mod tests;
