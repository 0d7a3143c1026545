//! What was typed, per project: `$XDG_DATA_HOME/corral/history/<hash of the project
//! directory>.jsonl`, one JSON string per entry (an entry may span lines), newest last, the
//! last [`KEEP`] kept. Private to the user (0600 in a 0700 directory): prompts can hold
//! anything. A history that cannot be read or written never stops the UI; it is logged.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

const KEEP: usize = 1000;

#[derive(Debug, Default)]
pub struct History {
    entries: Vec<String>,
    file: Option<PathBuf>,
}

impl History {
    #[cfg(test)]
    pub fn in_memory() -> History {
        History::default()
    }

    /// The history of the project at `root` (its canonical path is the key).
    pub fn for_project(root: &Path) -> History {
        let Some(dir) = dirs::data_dir().map(|d| d.join("corral").join("history")) else {
            return History::default();
        };
        let key = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
        let file = dir.join(format!(
            "{:016x}.jsonl",
            fnv1a(key.as_os_str().as_encoded_bytes())
        ));
        let entries = match std::fs::read_to_string(&file) {
            Ok(text) => text
                .lines()
                .filter_map(|l| serde_json::from_str::<String>(l).ok())
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => {
                tracing::warn!(error = %e, path = %file.display(), "cannot read the input history");
                Vec::new()
            }
        };
        History {
            entries,
            file: Some(file),
        }
    }

    /// The `n`th entry back from the newest (0 is the newest).
    pub fn back(&self, n: usize) -> Option<&str> {
        self.entries
            .len()
            .checked_sub(n + 1)
            .map(|i| self.entries[i].as_str())
    }

    pub fn add(&mut self, entry: &str) {
        if self.entries.last().is_some_and(|last| last == entry) {
            return;
        }
        self.entries.push(entry.to_string());
        let overflow = self.entries.len().saturating_sub(KEEP);
        self.entries.drain(..overflow);
        if let Some(file) = &self.file
            && let Err(e) = self.save(file, overflow > 0, entry)
        {
            tracing::warn!(error = %e, path = %file.display(), "cannot save the input history");
        }
    }

    fn save(&self, file: &Path, rewrite: bool, entry: &str) -> std::io::Result<()> {
        if let Some(dir) = file.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        let mut options = std::fs::OpenOptions::new();
        options.create(true).mode(0o600);
        if rewrite {
            // Past the limit: write what is kept to a new file and move it over the old one.
            let temp = file.with_extension("jsonl.new");
            let mut out = options.write(true).truncate(true).open(&temp)?;
            for entry in &self.entries {
                writeln!(out, "{}", serde_json::Value::from(entry.as_str()))?;
            }
            out.sync_all()?;
            return std::fs::rename(&temp, file);
        }
        let mut out = options.append(true).open(file)?;
        writeln!(out, "{}", serde_json::Value::from(entry))
    }
}

/// A stable 64-bit hash (FNV-1a): file names must not change between builds, which std's
/// hasher does not promise.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_survive_a_restart_and_stay_private() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("h").join("x.jsonl");
        let mut history = History {
            entries: Vec::new(),
            file: Some(file.clone()),
        };
        history.add("one");
        history.add("two\nlines");
        history.add("two\nlines");
        let text = std::fs::read_to_string(&file).unwrap();
        assert_eq!(text.lines().count(), 2);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let entries: Vec<String> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(entries, ["one", "two\nlines"]);
    }

    #[test]
    fn only_the_newest_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("x.jsonl");
        let mut history = History {
            entries: Vec::new(),
            file: Some(file.clone()),
        };
        for i in 0..KEEP + 5 {
            history.add(&format!("e{i}"));
        }
        assert_eq!(history.back(0), Some(format!("e{}", KEEP + 4).as_str()));
        assert_eq!(history.back(KEEP), None);
        let lines = std::fs::read_to_string(&file).unwrap().lines().count();
        assert!((KEEP - 5..=KEEP + 5).contains(&lines), "{lines}");
    }

    #[test]
    fn the_hash_is_stable() {
        assert_eq!(fnv1a(b"/home/me/project"), fnv1a(b"/home/me/project"));
        assert_ne!(fnv1a(b"/a"), fnv1a(b"/b"));
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
    }
}
