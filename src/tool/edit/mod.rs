//! The edit tools: `edit_file` (replace text in a file, found exactly or by tolerant passes
//! that never pick a wrong place; see `matching`) and `apply_patch` (codex's patch format,
//! several files, all or none; see `patch`).
//!
//! What keeps them as safe as `write_file`: every write goes through `files`, which writes
//! through the editor link or `write::write_text` (the directory opened beneath the root by the
//! kernel, git's files refused on every hop, agent config only by its own name), and deletes
//! through the same path resolution. Before a call runs, [`write_paths`] names every path it
//! would write (each path of a patch, `Move to` destinations and deletions included) for the
//! write guard and for the preset's path rules, and [`planned_changes`] computes what it
//! would change, without writing, for the approval's diff.

mod diff;
mod edit_file;
mod files;
mod lines;
mod matching;
mod numbers;
mod patch;

use std::path::Path;

use serde_json::Value;

pub(crate) use edit_file::EditFile;
pub(crate) use numbers::number_lines;
pub(crate) use patch::ApplyPatch;

use super::ToolError;
use crate::sandbox::paths::RootDir;

/// One file as a call would leave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileChange {
    /// As the call names it.
    pub(crate) path: String,
    /// `None`: it does not exist now (the call creates it).
    pub(crate) old: Option<String>,
    /// `None`: the call deletes it.
    pub(crate) new: Option<String>,
}

impl FileChange {
    /// The change as a unified diff.
    pub(crate) fn diff(&self) -> String {
        diff::unified(&self.path, self.old.as_deref(), self.new.as_deref())
    }
}

/// Every path a call of `tool` writes (creates, changes, moves to or deletes); `None` for a
/// tool that writes no file by path, or a patch that does not parse (it fails before it
/// writes anything).
pub(crate) fn write_paths(tool: &str, args: &Value) -> Option<Vec<String>> {
    match tool {
        "write_file" | "edit_file" => {
            let path = args.get("path").and_then(Value::as_str).unwrap_or("");
            Some(vec![path.to_owned()])
        }
        "apply_patch" => {
            let text = args.get("patch").and_then(Value::as_str)?;
            patch::parse::parse(text).ok().map(|p| p.paths())
        }
        _ => None,
    }
}

/// What an `edit_file` or `apply_patch` call would change, computed from the files on disk as
/// they are now, without writing anything; `None` for other tools. Err: why the call would
/// fail, in the words the model would get.
pub(crate) fn planned_changes(
    tool: &str,
    args: &Value,
    root: &Path,
) -> Option<Result<Vec<FileChange>, String>> {
    let planned = match tool {
        "edit_file" => plan_edit(args, root),
        "apply_patch" => plan_patch(args, root),
        _ => return None,
    };
    Some(planned.map_err(|e| e.to_string()))
}

fn plan_edit(args: &Value, root: &Path) -> Result<Vec<FileChange>, ToolError> {
    let args = edit_file::EditArgs::parse(args.clone())?;
    let dir = RootDir::open(root)?;
    let current = files::read_disk(&dir, &args.path)?;
    Ok(vec![edit_file::change(&args, current)?])
}

fn plan_patch(args: &Value, root: &Path) -> Result<Vec<FileChange>, ToolError> {
    let text = args.get("patch").and_then(Value::as_str).unwrap_or("");
    let parsed = patch::parse::parse(text).map_err(ToolError::InvalidArguments)?;
    let dir = RootDir::open(root)?;
    let mut contents = patch::Contents::new();
    for path in patch::confined(&parsed, root)? {
        let at = patch::key(root, &path);
        if let std::collections::btree_map::Entry::Vacant(slot) = contents.entry(at) {
            slot.insert(files::read_disk(&dir, &path)?);
        }
    }
    Ok(patch::plan(&parsed, root, &contents)?.0)
}
