//! `@path` in the input: completion of the files under the session root, and at send time
//! each mentioned file inlined after the prompt as a resource block, so every backend (a
//! native model, claude, an ACP agent) gets the same text.
//!
//! Only files beneath the root are offered or read: the index is a walk of the root (hidden
//! and git-ignored files left out, no symlinks followed) and each read opens the path
//! through the root with the kernel refusing `..` and symlinks that leave it, so a mention —
//! or a symlink planted in the repository — cannot inline a file from elsewhere.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::sandbox::paths::RootDir;

/// Files indexed for completion, at most.
const INDEX_LIMIT: usize = 20_000;
/// Entries (files and directories) the walk looks at, at most.
const VISIT_LIMIT: usize = 100_000;
/// Bytes of one file inlined, at most; the rest is cut with a note.
pub const INLINE_LIMIT: u64 = 128 * 1024;
/// Candidates shown at once.
pub const SHOWN: usize = 8;

/// Relative paths of the files under a root, for completion.
#[derive(Debug, Default)]
pub struct FileIndex {
    paths: Vec<String>,
}

impl FileIndex {
    pub fn build(root: &Path) -> FileIndex {
        let mut paths = Vec::new();
        let walk = ignore::WalkBuilder::new(root)
            .hidden(true)
            .follow_links(false)
            .git_ignore(true)
            .build();
        // Every entry counts, directories too: a tree of empty directories must not make
        // the walk endless.
        for entry in walk.flatten().take(VISIT_LIMIT) {
            if paths.len() >= INDEX_LIMIT {
                break;
            }
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            if let Ok(rel) = entry.path().strip_prefix(root)
                && let Some(rel) = rel.to_str()
            {
                paths.push(rel.to_string());
            }
        }
        paths.sort();
        FileIndex { paths }
    }

    /// Paths matching what follows the `@`: those starting with it first, then those
    /// containing it (case-insensitive), shortest first within each.
    pub fn matches(&self, typed: &str) -> Vec<String> {
        let needle = typed.to_lowercase();
        let mut starts: Vec<&String> = Vec::new();
        let mut contains: Vec<&String> = Vec::new();
        for path in &self.paths {
            let lower = path.to_lowercase();
            if lower.starts_with(&needle) {
                starts.push(path);
            } else if lower.contains(&needle) {
                contains.push(path);
            }
        }
        starts.sort_by_key(|p| p.len());
        contains.sort_by_key(|p| p.len());
        starts
            .into_iter()
            .chain(contains)
            .take(SHOWN)
            .cloned()
            .collect()
    }
}

/// The `@path` words of a prompt, in order, each once.
pub fn mentioned(prompt: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in prompt.split_whitespace() {
        if let Some(path) = word.strip_prefix('@') {
            let path = path.trim_end_matches([',', '.', ';', ':', ')', '!', '?']);
            if !path.is_empty() && !out.iter().any(|p| p == path) {
                out.push(path.to_string());
            }
        }
    }
    out
}

/// The prompt with each mentioned file that exists beneath the root appended as a resource
/// block, and a note for each that could not be inlined (the person sees it; the model does
/// not).
pub fn inline(prompt: &str, root: &Path) -> (String, Vec<String>) {
    let mut text = prompt.to_string();
    let mut notes = Vec::new();
    let mentions = mentioned(prompt);
    if mentions.is_empty() {
        return (text, notes);
    }
    let dir = match std::fs::canonicalize(root)
        .map_err(|e| e.to_string())
        .and_then(|root| RootDir::open(&root).map_err(|e| e.to_string()))
    {
        Ok(dir) => dir,
        Err(e) => {
            notes.push(format!("cannot open the session root to inline files: {e}"));
            return (text, notes);
        }
    };
    for path in mentions {
        match read_beneath(&dir, &path) {
            Ok((content, cut)) => {
                let uri = format!("file://{}", dir.path().join(&path).display());
                text.push_str(&format!(
                    "\n\n<resource uri=\"{uri}\" path=\"{path}\">\n{content}{}</resource>",
                    if content.ends_with('\n') { "" } else { "\n" }
                ));
                if cut {
                    notes.push(format!(
                        "@{path}: only its first {} KiB are inlined",
                        INLINE_LIMIT / 1024
                    ));
                }
            }
            Err(Unreadable::NotAFile) => {}
            Err(Unreadable::Refused(why)) => notes.push(format!("@{path} not inlined: {why}")),
        }
    }
    (text, notes)
}

enum Unreadable {
    /// Not a file under the root at all: the `@` was just text (an email, a handle).
    NotAFile,
    Refused(String),
}

fn read_beneath(dir: &RootDir, path: &str) -> Result<(String, bool), Unreadable> {
    let relative = PathBuf::from(path);
    let file = dir.open_file(&relative).map_err(|e| {
        use crate::sandbox::paths::PathError;
        match e {
            PathError::Io {
                kind: std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory,
                ..
            } => Unreadable::NotAFile,
            other => Unreadable::Refused(other.to_string()),
        }
    })?;
    let meta = file
        .metadata()
        .map_err(|e| Unreadable::Refused(e.to_string()))?;
    if !meta.is_file() {
        return Err(Unreadable::NotAFile);
    }
    let mut bytes = Vec::new();
    file.take(INLINE_LIMIT)
        .read_to_end(&mut bytes)
        .map_err(|e| Unreadable::Refused(e.to_string()))?;
    let cut = meta.len() > INLINE_LIMIT;
    match String::from_utf8(bytes) {
        Ok(text) => Ok((text, cut)),
        // Cut mid-character at the limit: keep the whole characters before it.
        Err(e) if cut && e.utf8_error().error_len().is_none() => {
            let valid = e.utf8_error().valid_up_to();
            let mut bytes = e.into_bytes();
            bytes.truncate(valid);
            Ok((String::from_utf8_lossy(&bytes).into_owned(), cut))
        }
        Err(_) => Err(Unreadable::Refused("it is not text".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_are_found_once_without_trailing_punctuation() {
        assert_eq!(
            mentioned("look at @src/a.rs, and @b.txt. again @src/a.rs me@host"),
            ["src/a.rs", "b.txt"]
        );
    }

    #[test]
    fn completion_prefers_prefixes_and_skips_ignored_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/main.rs"), "").unwrap();
        std::fs::write(root.join("src/lib.rs"), "").unwrap();
        std::fs::write(root.join("README.md"), "").unwrap();
        std::fs::write(root.join(".secret"), "").unwrap();
        let index = FileIndex::build(root);
        assert_eq!(index.matches("src/m"), ["src/main.rs"]);
        assert_eq!(index.matches("main"), ["src/main.rs"]);
        assert!(index.matches("secret").is_empty());
        assert_eq!(index.matches("").len(), 3);
    }

    #[test]
    fn a_mentioned_file_is_inlined_and_text_mentions_are_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
        let (text, notes) = inline("see @a.txt and @nobody", dir.path());
        assert!(text.starts_with("see @a.txt and @nobody\n\n<resource uri=\"file://"));
        assert!(
            text.contains("path=\"a.txt\">\nalpha\n</resource>"),
            "{text}"
        );
        assert!(notes.is_empty(), "{notes:?}");
    }

    #[test]
    fn a_symlink_out_of_the_root_or_a_dotdot_path_is_never_read() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("id_rsa"), "PRIVATE KEY").unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path().join("id_rsa"), dir.path().join("key")).unwrap();
        let escape = format!(
            "@../{}/id_rsa",
            outside.path().file_name().unwrap().to_str().unwrap()
        );
        let (text, notes) = inline(&format!("@key {escape}"), dir.path());
        assert!(!text.contains("PRIVATE KEY"), "{text}");
        assert_eq!(notes.len(), 2, "{notes:?}");
        // The index does not offer it either.
        assert!(FileIndex::build(dir.path()).matches("key").is_empty());
    }

    #[test]
    fn binary_files_are_refused_and_big_ones_cut() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("bin"), [0xff, 0xfe, 0x00]).unwrap();
        std::fs::write(
            dir.path().join("big"),
            "x".repeat(INLINE_LIMIT as usize + 10),
        )
        .unwrap();
        let (text, notes) = inline("@bin @big", dir.path());
        assert!(
            notes
                .iter()
                .any(|n| n.contains("@bin not inlined: it is not text"))
        );
        assert!(notes.iter().any(|n| n.contains("@big: only its first")));
        assert!(text.len() < INLINE_LIMIT as usize + 300);
    }
}
