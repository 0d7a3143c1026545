//! What a person sees before approving: the exact command, the code, or a unified diff of a
//! file write against the file as it is now.

use std::io::Read;
use std::path::Path;

use serde_json::{Value, json};
use similar::TextDiff;

use crate::event::ApprovalPreview;
use crate::sandbox::paths::{PathError, RootDir};

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
        _ => ApprovalPreview::default(),
    }
}

/// A `write_file` call as an ACP `diff` content block (`path` absolute, `oldText` null for a
/// new file) and its location; `None` when the path is outside the root or not readable text.
pub fn write_diff_block(args: &Value, root: &Path) -> Option<(Value, Value)> {
    let path = args.get("path").and_then(Value::as_str)?;
    let content = args.get("content").and_then(Value::as_str)?;
    let old = match RootDir::open(root).and_then(|dir| dir.open_file(path)) {
        Err(PathError::Io { .. }) => None,
        Err(_) => return None,
        Ok(file) => Some(current_text(file).ok()?),
    };
    let absolute = root.join(path).display().to_string();
    Some((
        json!({"type": "diff", "path": absolute, "oldText": old, "newText": content}),
        json!({"path": absolute}),
    ))
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
    let old = old.unwrap_or_default();
    let diff = TextDiff::from_lines(&old, content)
        .unified_diff()
        .context_radius(3)
        .header(
            &if exists {
                format!("a/{path}")
            } else {
                "/dev/null".into()
            },
            &format!("b/{path}"),
        )
        .to_string();
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
