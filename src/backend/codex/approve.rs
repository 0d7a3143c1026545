//! codex's approval requests in corral's terms: a command becomes a `shell` call, a file
//! change a `write_file` call per path, so the preset's rules and a person's grants apply to
//! codex exactly as to corral's own tools.

use std::io::Read;
use std::path::Path;

use serde_json::{Value, json};

use crate::backend::external::ToolAsk;
use crate::policy::Approval;
use crate::sandbox::paths::RootDir;

/// Largest file whose new content is worked out for the diff a person is shown.
const MAX_PREVIEW_BYTES: u64 = 512 * 1024;

/// codex runs its commands through a login shell (`/bin/bash -lc '<cmd>'`); the rules are
/// written for the command itself.
pub fn inner_command(command: &str) -> String {
    for prefix in [
        "/bin/bash -lc ",
        "bash -lc ",
        "/bin/bash -c ",
        "bash -c ",
        "/bin/sh -c ",
        "sh -c ",
    ] {
        if let Some(rest) = command.strip_prefix(prefix)
            && let Some(inner) = single_quoted(rest.trim())
        {
            return inner;
        }
    }
    command.to_string()
}

/// `'a'\''b'` → `a'b`; `None` unless the whole text is one single-quoted word.
fn single_quoted(text: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    let mut any = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (false, '\'') => {
                quoted = true;
                any = true;
            }
            (true, '\'') => quoted = false,
            (true, c) => out.push(c),
            (false, '\\') => out.push(chars.next()?),
            (false, _) => return None,
        }
    }
    (any && !quoted).then_some(out)
}

/// `item/commandExecution/requestApproval` as a corral `shell` call. `item` is what
/// `item/started` said about the command, if it came first.
pub fn command_ask(params: &Value, item: Option<&Value>) -> ToolAsk {
    let item_id = params["itemId"].as_str().unwrap_or_default().to_string();
    let command = params["command"]
        .as_str()
        .or_else(|| item.and_then(|i| i["command"].as_str()))
        .unwrap_or_default();
    let inner = inner_command(command);
    // Where the command runs; codex names it in the request, or said it in `item/started`.
    let cwd = params["cwd"]
        .as_str()
        .or_else(|| item.and_then(|i| i["cwd"].as_str()));
    ToolAsk {
        tool_call_id: item_id,
        agent_tool: "commandExecution".into(),
        corral_tool: Some("shell"),
        args: json!({ "command": inner }),
        title: inner,
        kind: "execute",
        raw_input: params.clone(),
        paths: cwd.map(str::to_owned).into_iter().collect(),
    }
}

/// `item/fileChange/requestApproval` as one `write_file` call per changed path, with the
/// content the file would have after the change where it can be worked out (for the diff
/// the person is shown).
pub fn file_asks(params: &Value, item: Option<&Value>, root: &Path) -> Vec<ToolAsk> {
    let item_id = params["itemId"].as_str().unwrap_or_default();
    // A root codex wants writes under for the rest of the session: it must be inside too.
    let grant_root: Vec<String> = params["grantRoot"]
        .as_str()
        .map(str::to_owned)
        .into_iter()
        .collect();
    let changes = item
        .and_then(|i| i["changes"].as_array())
        .cloned()
        .unwrap_or_default();
    if changes.is_empty() {
        // Nothing known about the change: still asked, as an edit of the agent's own.
        return vec![ToolAsk {
            tool_call_id: item_id.to_string(),
            agent_tool: "fileChange".into(),
            corral_tool: None,
            args: json!({}),
            title: "codex wants to change files".into(),
            kind: "edit",
            raw_input: params.clone(),
            paths: grant_root,
        }];
    }
    changes
        .iter()
        .map(|change| {
            let path = change["path"].as_str().unwrap_or_default();
            let relative = Path::new(path)
                .strip_prefix(root)
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| path.to_string());
            let diff = change["diff"].as_str().unwrap_or_default();
            let mut args = json!({ "path": relative });
            let mut paths = grant_root.clone();
            // A move names where the file goes as well.
            let kind = &change["kind"];
            if let Some(to) = kind["move_path"].as_str().or(kind["movePath"].as_str()) {
                paths.push(to.to_owned());
            }
            if let Some(content) = new_content(change, diff, root, &relative) {
                args["content"] = Value::String(content);
            }
            ToolAsk {
                tool_call_id: item_id.to_string(),
                agent_tool: "fileChange".into(),
                corral_tool: Some("write_file"),
                args,
                title: format!("edit {relative}"),
                kind: "edit",
                raw_input: json!({ "path": path, "diff": diff, "kind": change["kind"] }),
                paths,
            }
        })
        .collect()
}

fn new_content(change: &Value, diff: &str, root: &Path, relative: &str) -> Option<String> {
    match change["kind"]["type"].as_str() {
        // codex describes a new file by its whole content.
        Some("add") => Some(diff.to_string()),
        Some("delete") => Some(String::new()),
        Some("update") => apply_unified(&current_text(root, relative)?, diff),
        _ => None,
    }
}

/// The file's text as it is now, read the way corral's own tools read: beneath the root (a
/// path or symlink leading out reads nothing, so the preview never shows an outside file),
/// regular files only, at most [`MAX_PREVIEW_BYTES`].
fn current_text(root: &Path, relative: &str) -> Option<String> {
    let file = RootDir::open(root)
        .and_then(|dir| dir.open_file(relative))
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() > MAX_PREVIEW_BYTES {
        return None;
    }
    let mut text = String::new();
    file.take(MAX_PREVIEW_BYTES)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// Applies a unified diff's hunks to `old`; `None` when they do not fit.
pub fn apply_unified(old: &str, diff: &str) -> Option<String> {
    let old_lines: Vec<&str> = old.split_inclusive('\n').collect();
    let mut out = String::new();
    let mut at = 0usize;
    let mut in_hunk = false;
    for line in diff.split_inclusive('\n') {
        if let Some(header) = line.strip_prefix("@@ -") {
            let start: usize = header.split([',', ' ']).next()?.parse().ok()?;
            let start = start.saturating_sub(1).max(at);
            out.extend(old_lines.get(at..start)?.iter().copied());
            at = start;
            in_hunk = true;
            continue;
        }
        if !in_hunk || line.starts_with("\\ ") {
            continue;
        }
        let body = line.get(1..).unwrap_or_default();
        match line.chars().next() {
            Some(' ') | Some('-') => {
                let current = old_lines.get(at)?;
                if current.trim_end_matches('\n') != body.trim_end_matches('\n') {
                    return None;
                }
                if line.starts_with(' ') {
                    out.push_str(current);
                }
                at += 1;
            }
            Some('+') => out.push_str(body),
            _ => {}
        }
    }
    if !in_hunk {
        return None;
    }
    out.extend(old_lines.get(at..)?.iter().copied());
    Some(out)
}

/// The decision codex understands for corral's answer.
pub fn decision(answer: &Approval) -> &'static str {
    match answer {
        Approval::Allow { always: false, .. } => "accept",
        Approval::Allow { always: true, .. } => "acceptForSession",
        Approval::Deny { .. } => "decline",
        Approval::Cancel => "cancel",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn login_shell_wrappers_are_taken_off() {
        assert_eq!(inner_command("/bin/bash -lc 'touch x'"), "touch x");
        assert_eq!(inner_command("bash -lc 'echo '\\''hi'\\'''"), "echo 'hi'");
        assert_eq!(inner_command("/bin/bash -lc ls"), "/bin/bash -lc ls");
        assert_eq!(inner_command("touch y"), "touch y");
    }

    #[test]
    fn unified_diffs_apply_or_refuse() {
        let old = "a\nb\nc\n";
        let diff = "@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n";
        assert_eq!(apply_unified(old, diff).as_deref(), Some("a\nB\nc\n"));
        let later = "@@ -3 +3,2 @@\n c\n+d\n";
        assert_eq!(apply_unified(old, later).as_deref(), Some("a\nb\nc\nd\n"));
        assert_eq!(apply_unified(old, "@@ -1 +1 @@\n-x\n+y\n"), None);
        assert_eq!(apply_unified(old, "no hunks"), None);
    }

    #[test]
    fn the_preview_reads_only_beneath_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let (root, outside) = (base.join("root"), base.join("outside"));
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret.txt"), "TOP SECRET\n").unwrap();
        std::fs::write(root.join("mine.txt"), "TOP SECRET\n").unwrap();
        std::os::unix::fs::symlink(outside.join("secret.txt"), root.join("link")).unwrap();
        let diff = "@@ -1 +1 @@\n-TOP SECRET\n+replaced\n";
        let content_for = |path: &Path| {
            let item = json!({"changes": [{"path": path.display().to_string(),
                "kind": {"type": "update", "move_path": null}, "diff": diff}]});
            let asks = file_asks(&json!({"itemId": "i1"}), Some(&item), &root);
            assert_eq!(asks.len(), 1);
            asks[0].args.get("content").cloned()
        };
        assert_eq!(
            content_for(&root.join("mine.txt")),
            Some(json!("replaced\n"))
        );
        assert_eq!(content_for(&outside.join("secret.txt")), None);
        assert_eq!(content_for(&root.join("link")), None);
        assert_eq!(content_for(&root.join("../outside/secret.txt")), None);
    }

    #[test]
    fn a_commands_cwd_and_a_moves_target_are_paths_to_check() {
        let ask = command_ask(
            &json!({"itemId": "c", "command": "/bin/bash -lc 'ls'", "cwd": "/elsewhere"}),
            None,
        );
        assert_eq!(ask.paths, ["/elsewhere"]);
        let item = json!({"changes": [{"path": "/r/a", "diff": "",
            "kind": {"type": "update", "move_path": "/elsewhere/b"}}]});
        let asks = file_asks(
            &json!({"itemId": "i", "grantRoot": "/g"}),
            Some(&item),
            Path::new("/r"),
        );
        assert_eq!(asks[0].paths, ["/g", "/elsewhere/b"]);
        assert_eq!(asks[0].args["path"], "a");
    }

    #[test]
    fn answers_map_to_decisions() {
        assert_eq!(
            decision(&Approval::Allow {
                by_person: true,
                always: true
            }),
            "acceptForSession"
        );
        assert_eq!(decision(&Approval::Cancel), "cancel");
        assert_eq!(
            decision(&Approval::Deny {
                message: "no".into()
            }),
            "decline"
        );
    }
}
