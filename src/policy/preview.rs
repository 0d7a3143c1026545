//! What a person sees before approving: the exact command, the code, or a unified diff of a
//! file write, an edit or a patch against the files as they are now.

use std::io::Read;
use std::path::Path;

use serde_json::{Value, json};

use crate::event::ApprovalPreview;
use crate::sandbox::paths::{PathError, RootDir};
use crate::tool::{FileChange, planned_changes, write_paths};

/// Files bigger than this are not diffed; the preview says how big they are instead.
const MAX_DIFF_BYTES: u64 = 512 * 1024;

pub fn approval_preview(tool: &str, args: &Value, root: &Path) -> ApprovalPreview {
    let field = |name: &str| args.get(name).and_then(Value::as_str).unwrap_or("");
    match tool {
        "shell" => ApprovalPreview {
            command: Some(field("command").into()),
            ..ApprovalPreview::default()
        },
        "python" => ApprovalPreview {
            code: Some(field("code").into()),
            ..ApprovalPreview::default()
        },
        "open_url" => ApprovalPreview {
            url: Some(field("url").into()),
            ..ApprovalPreview::default()
        },
        "write_file" => write_preview(field("path"), field("content"), root),
        "edit_file" | "apply_patch" => change_preview(tool, args, root),
        _ => ApprovalPreview::default(),
    }
}

/// A call that writes files as ACP `diff` content blocks, one per file (`path` absolute,
/// `oldText` null for a new file, `newText` empty for a deleted one), each with its location;
/// none when a path is outside the root, a file is not readable text, or an edit would fail.
pub fn diff_blocks(tool: &str, args: &Value, root: &Path) -> Vec<(Value, Value)> {
    if tool == "write_file" {
        return write_diff_block(args, root).into_iter().collect();
    }
    match planned_changes(tool, args, root) {
        Some(Ok(changes)) => changes
            .iter()
            .map(|c| diff_block(root, &c.path, c.old.as_deref(), c.new.as_deref()))
            .collect(),
        _ => Vec::new(),
    }
}

fn write_diff_block(args: &Value, root: &Path) -> Option<(Value, Value)> {
    let path = args.get("path").and_then(Value::as_str)?;
    let content = args.get("content").and_then(Value::as_str)?;
    let old = match RootDir::open(root).and_then(|dir| dir.open_file(path)) {
        Err(PathError::Io { .. }) => None,
        Err(_) => return None,
        Ok(file) => Some(current_text(file).ok()?),
    };
    Some(diff_block(root, path, old.as_deref(), Some(content)))
}

fn diff_block(root: &Path, path: &str, old: Option<&str>, new: Option<&str>) -> (Value, Value) {
    let absolute = root.join(path).display().to_string();
    (
        json!({"type": "diff", "path": absolute, "oldText": old, "newText": new.unwrap_or("")}),
        json!({"path": absolute}),
    )
}

/// An `edit_file` or `apply_patch` call: the diff of every file it would change, computed as
/// the tool computes it, against the files as they are now; or why it would fail.
fn change_preview(tool: &str, args: &Value, root: &Path) -> ApprovalPreview {
    let paths = write_paths(tool, args).unwrap_or_default();
    let mut preview = ApprovalPreview {
        path: (!paths.is_empty()).then(|| paths.join(", ")),
        ..ApprovalPreview::default()
    };
    let changes = match planned_changes(tool, args, root) {
        Some(Ok(changes)) => changes,
        Some(Err(e)) => {
            preview.note = Some(format!("the call would fail: {e}"));
            return preview;
        }
        None => return preview,
    };
    let too_big = |text: &Option<String>| {
        text.as_ref()
            .is_some_and(|t| t.len() as u64 > MAX_DIFF_BYTES)
    };
    let (shown, big): (Vec<&FileChange>, Vec<&FileChange>) = changes
        .iter()
        .partition(|c| !too_big(&c.old) && !too_big(&c.new));
    if let [only] = changes.as_slice() {
        preview.exists = Some(only.old.is_some());
    }
    preview.bytes = Some(
        changes
            .iter()
            .filter_map(|c| c.new.as_ref())
            .map(|t| t.len() as u64)
            .sum(),
    );
    preview.diff = Some(shown.iter().map(|c| c.diff()).collect());
    if !big.is_empty() {
        let names: Vec<&str> = big.iter().map(|c| c.path.as_str()).collect();
        preview.note = Some(format!("too large to diff: {}", names.join(", ")));
    }
    preview
}

fn write_preview(path: &str, content: &str, root: &Path) -> ApprovalPreview {
    let noted = |exists: Option<bool>, note: String| ApprovalPreview {
        path: Some(path.into()),
        exists,
        note: Some(note),
        ..ApprovalPreview::default()
    };
    // Opened the way write_file opens it (beneath the root, links followed while inside), so
    // the diff is against the file the write would replace.
    let old = match RootDir::open(root).and_then(|dir| dir.open_file(path)) {
        Err(PathError::OutsideRoot { .. }) => {
            return noted(None, "the path is outside the session root".into());
        }
        Err(PathError::Invalid { reason, .. }) => {
            return noted(None, format!("the path is not valid: {reason}"));
        }
        Err(e @ PathError::Guarded { .. }) => return noted(None, e.to_string()),
        // Missing (or unreachable): the write would create it.
        Err(PathError::Io { .. }) => None,
        Ok(file) => match current_text(file) {
            Ok(text) => Some(text),
            Err(note) => return noted(Some(true), note),
        },
    };
    let exists = old.is_some();
    let change = FileChange {
        path: path.into(),
        old,
        new: Some(content.into()),
    };
    let diff = change.diff();
    ApprovalPreview {
        path: Some(path.into()),
        exists: Some(exists),
        bytes: Some(content.len() as u64),
        diff: Some(diff),
        ..ApprovalPreview::default()
    }
}

/// The file's text, or why it is not diffed.
fn current_text(mut file: std::fs::File) -> Result<String, String> {
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read it: {e}"))?;
    if meta.is_dir() {
        return Err("it is a directory; the write would fail".into());
    }
    if meta.len() > MAX_DIFF_BYTES {
        return Err(format!(
            "the file has {} bytes; too large to diff",
            meta.len()
        ));
    }
    let mut bytes = Vec::new();
    // One byte past the limit is enough to know a file that grew since is too large.
    (&mut file)
        .take(MAX_DIFF_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read it: {e}"))?;
    if bytes.len() as u64 > MAX_DIFF_BYTES {
        return Err("the file is too large to diff".into());
    }
    String::from_utf8(bytes).map_err(|_| "the current file is binary; it would be replaced".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_preview_is_a_unified_diff_against_the_current_file() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::write(root.join("a.txt"), "one\ntwo\n").unwrap();
        let preview = approval_preview(
            "write_file",
            &json!({"path": "a.txt", "content": "one\nthree\n"}),
            &root,
        );
        let diff = preview.diff.unwrap();
        assert!(
            diff.contains("--- a/a.txt") && diff.contains("+++ b/a.txt"),
            "{diff}"
        );
        assert!(diff.contains("-two") && diff.contains("+three"), "{diff}");
        let new = approval_preview(
            "write_file",
            &json!({"path": "new.txt", "content": "x\n"}),
            &root,
        );
        assert_eq!(new.exists, Some(false));
        assert!(new.diff.unwrap().contains("--- /dev/null"));
        let shell = approval_preview("shell", &json!({"command": "rm -rf x"}), &root);
        assert_eq!(shell.command.as_deref(), Some("rm -rf x"));
    }

    #[test]
    fn edit_and_patch_previews_show_the_change_the_tool_would_make_or_why_not() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::write(root.join("a.txt"), "one\ntwo\n").unwrap();
        let edit = json!({"path": "a.txt", "old_text": "two", "new_text": "2"});
        let preview = approval_preview("edit_file", &edit, &root);
        assert_eq!(
            (preview.path.as_deref(), preview.exists),
            (Some("a.txt"), Some(true))
        );
        let diff = preview.diff.unwrap();
        assert!(
            diff.contains("--- a/a.txt\n+++ b/a.txt\n") && diff.contains("-two\n+2\n"),
            "{diff}"
        );
        let miss = json!({"path": "a.txt", "old_text": "three", "new_text": "3"});
        let note = approval_preview("edit_file", &miss, &root).note.unwrap();
        assert!(
            note.starts_with("the call would fail: a.txt: old_text was not found"),
            "{note}"
        );
        let patch = "*** Begin Patch\n*** Update File: a.txt\n-one\n+1\n*** Add File: b.txt\n+b\n*** End Patch";
        let args = json!({ "patch": patch });
        let preview = approval_preview("apply_patch", &args, &root);
        assert_eq!(preview.path.as_deref(), Some("a.txt, b.txt"));
        let diff = preview.diff.unwrap();
        assert!(
            diff.contains("+++ b/a.txt") && diff.contains("--- /dev/null\n+++ b/b.txt"),
            "{diff}"
        );
        let blocks = diff_blocks("apply_patch", &args, &root);
        let paths: Vec<&str> = blocks
            .iter()
            .map(|(b, _)| b["path"].as_str().unwrap())
            .collect();
        let at = |p: &str| root.join(p).display().to_string();
        assert_eq!(paths, [at("a.txt"), at("b.txt")]);
        assert_eq!(blocks[1].0["oldText"], Value::Null);
        assert_eq!(
            std::fs::read_to_string(root.join("a.txt")).unwrap(),
            "one\ntwo\n"
        );
    }

    #[test]
    fn write_preview_follows_links_inside_and_refuses_links_out() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let (root, outside) = (base.join("root"), base.join("outside"));
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret"), "s\n").unwrap();
        std::fs::write(root.join("real.txt"), "old\n").unwrap();
        std::os::unix::fs::symlink(outside.join("secret"), root.join("out")).unwrap();
        std::os::unix::fs::symlink("real.txt", root.join("in")).unwrap();
        let preview = |path: &str| {
            approval_preview(
                "write_file",
                &json!({"path": path, "content": "new\n"}),
                &root,
            )
        };
        assert_eq!(
            preview("out").note.as_deref(),
            Some("the path is outside the session root")
        );
        let inside = preview("in");
        assert_eq!(inside.exists, Some(true));
        let diff = inside.diff.unwrap();
        assert!(diff.contains("-old") && diff.contains("+new"), "{diff}");
    }
}
