//! codex's approval requests in corral's terms: a command becomes a `shell` call, a file
//! change a `write_file` call per path, so the preset's rules and a person's grants apply to
//! codex exactly as to corral's own tools.

use std::path::Path;

use serde_json::{Value, json};

use crate::backend::external::{Answer, ToolAsk};

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
    ToolAsk {
        tool_call_id: item_id,
        agent_tool: "commandExecution".into(),
        corral_tool: Some("shell"),
        args: json!({ "command": inner }),
        title: inner,
        kind: "execute",
        raw_input: params.clone(),
    }
}

/// `item/fileChange/requestApproval` as one `write_file` call per changed path, with the
/// content the file would have after the change where it can be worked out (for the diff
/// the person is shown).
pub fn file_asks(params: &Value, item: Option<&Value>, root: &Path) -> Vec<ToolAsk> {
    let item_id = params["itemId"].as_str().unwrap_or_default();
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
            }
        })
        .collect()
}

fn new_content(change: &Value, diff: &str, root: &Path, relative: &str) -> Option<String> {
    match change["kind"]["type"].as_str() {
        // codex describes a new file by its whole content.
        Some("add") => Some(diff.to_string()),
        Some("delete") => Some(String::new()),
        Some("update") => {
            let old = std::fs::read_to_string(root.join(relative)).ok()?;
            apply_unified(&old, diff)
        }
        _ => None,
    }
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
pub fn decision(answer: &Answer) -> &'static str {
    match answer {
        Answer::Allow { always: false } => "accept",
        Answer::Allow { always: true } => "acceptForSession",
        Answer::Deny { .. } => "decline",
        Answer::Cancel => "cancel",
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
    fn answers_map_to_decisions() {
        assert_eq!(
            decision(&Answer::Allow { always: true }),
            "acceptForSession"
        );
        assert_eq!(decision(&Answer::Cancel), "cancel");
        assert_eq!(
            decision(&Answer::Deny {
                message: "no".into()
            }),
            "decline"
        );
    }
}
