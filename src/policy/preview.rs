//! What a person sees before approving: the exact command, the code, or a unified diff of a
//! file write against the file as it is now.

use std::path::Path;

use serde_json::{Value, json};
use similar::TextDiff;

use crate::sandbox::paths::resolve_in_root;

/// Files bigger than this are not diffed; the preview says how big they are instead.
const MAX_DIFF_BYTES: u64 = 512 * 1024;

pub fn approval_preview(tool: &str, args: &Value, root: &Path) -> Value {
    let field = |name: &str| args.get(name).and_then(Value::as_str).unwrap_or("");
    match tool {
        "shell" => json!({"command": field("command")}),
        "python" => json!({"code": field("code")}),
        "open_url" => json!({"url": field("url")}),
        "write_file" => write_preview(field("path"), field("content"), root),
        _ => json!({}),
    }
}

fn write_preview(path: &str, content: &str, root: &Path) -> Value {
    let Ok(resolved) = resolve_in_root(root, path) else {
        return json!({"path": path, "note": "the path is outside the session root"});
    };
    let old = match std::fs::metadata(&resolved) {
        Ok(meta) if meta.len() > MAX_DIFF_BYTES => {
            return json!({"path": path, "exists": true,
                "note": format!("the file has {} bytes; too large to diff", meta.len())});
        }
        Ok(_) => match std::fs::read(&resolved) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(text) => Some(text),
                Err(_) => {
                    return json!({"path": path, "exists": true,
                        "note": "the current file is binary; it would be replaced"});
                }
            },
            Err(e) => return json!({"path": path, "note": format!("cannot read it: {e}")}),
        },
        Err(_) => None,
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
    json!({"path": path, "exists": exists, "bytes": content.len(), "diff": diff})
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
        let diff = preview["diff"].as_str().unwrap();
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
        assert_eq!(new["exists"], false);
        assert!(new["diff"].as_str().unwrap().contains("--- /dev/null"));
        let shell = approval_preview("shell", &json!({"command": "rm -rf x"}), &root);
        assert_eq!(shell["command"], "rm -rf x");
    }
}
