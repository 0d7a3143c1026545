//! External agents meet the same root as corral's own tools: every path a permission request
//! names (the file to write, the directory to search, a command's working directory) is
//! resolved beneath the session root — symlinks followed, `..` applied, a path that does not
//! exist yet judged by its deepest existing ancestor — before the gate looks at the call. A
//! path that leads out is refused whatever the preset would auto-approve, because the agent
//! does the write itself, outside corral's file tools and sandbox, once it is allowed.
//!
//! The gate then sees the resolved path, relative to the root, so the preset's path rules
//! match what the agent will really touch, not the spelling it chose.
//!
//! What this cannot hold: a path is checked when the agent asks, and the agent opens it
//! later, so a symlink swapped in between (by the agent's own shell, say) still leads out;
//! and calls the agent makes without asking are never seen.

use std::path::Path;

use serde_json::Value;

use super::ToolAsk;
use crate::sandbox::paths::{PathError, resolve_in_root};

/// Keys under which agents put the files and directories a call touches: claude's built-in
/// tools (`file_path`, `notebook_path`, `path`), opencode (`filePath`, `workdir`), gemini
/// (`absolute_path`, `dir_path`, `file_path`), codex (`cwd`, `grantRoot`).
pub const PATH_KEYS: &[&str] = &[
    "path",
    "paths",
    "file_path",
    "filePath",
    "file_paths",
    "notebook_path",
    "absolute_path",
    "dir_path",
    "directory",
    "cwd",
    "workdir",
    "grantRoot",
];

/// The values of [`PATH_KEYS`] at the top level of `input`: strings, or arrays of strings.
pub fn paths_in(input: &Value) -> Vec<String> {
    let mut paths = Vec::new();
    let Some(object) = input.as_object() else {
        return paths;
    };
    for key in PATH_KEYS {
        match object.get(*key) {
            Some(Value::String(path)) => paths.push(path.clone()),
            Some(Value::Array(items)) => {
                paths.extend(items.iter().filter_map(Value::as_str).map(str::to_owned));
            }
            _ => {}
        }
    }
    paths
}

/// The directory a glob pattern starts from: its components before the first one with a glob
/// character (`/etc/**/*.conf` → `/etc`, `../*.txt` → `..`). `None`: the pattern starts
/// where the search does.
pub fn glob_base(pattern: &str) -> Option<String> {
    let is_glob = |part: &str| part.contains(['*', '?', '[', '{']);
    let literal: Vec<&str> = pattern.split('/').take_while(|p| !is_glob(p)).collect();
    let all_literal = !pattern.split('/').any(is_glob);
    // A pattern with no glob character names a file; its directory is where it looks.
    let dir = if all_literal {
        &literal[..literal.len().saturating_sub(1)]
    } else {
        &literal[..]
    };
    let base = dir.join("/");
    if base.is_empty() {
        // `/x*`: the glob starts at the file system's root.
        return pattern.starts_with('/').then(|| "/".to_owned());
    }
    Some(base)
}

/// Resolves one path the agent named; the refusal is the message the agent gets.
fn resolve(root: &Path, path: &str) -> Result<std::path::PathBuf, String> {
    // The agents expand `~` to a home directory corral cannot know (a private one, in
    // hermetic mode); joined to the root it would name another file than the agent's.
    if path.starts_with('~') {
        return Err(format!(
            "refused by corral: {path:?} starts with `~`; name files by their path in the \
             session root {}",
            root.display()
        ));
    }
    resolve_in_root(root, path).map_err(|e| match e {
        PathError::OutsideRoot { .. } => format!("refused by corral: {e}"),
        // Unresolvable (a loop, an unreadable ancestor): nothing says it stays inside.
        other => format!("refused by corral: {other}"),
    })
}

/// `ask` with every path it names checked against `root`, and its `path` argument replaced by
/// the resolved path relative to the root. `Err`: the refusal for the agent.
pub fn confine(ask: &ToolAsk, root: &Path) -> Result<ToolAsk, String> {
    for path in ask.paths.iter().filter(|p| !p.is_empty()) {
        resolve(root, path)?;
    }
    let mut ask = ask.clone();
    if let Some(path) = ask.args.get("path").and_then(Value::as_str)
        && !path.is_empty()
    {
        let resolved = resolve(root, path)?;
        let relative = resolved.strip_prefix(root).unwrap_or(Path::new(""));
        let shown = if relative.components().next().is_none() {
            ".".to_owned()
        } else {
            relative.to_string_lossy().into_owned()
        };
        ask.args["path"] = Value::String(shown);
    }
    Ok(ask)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::os::unix::fs::symlink;

    fn ask(args: Value, paths: &[&str]) -> ToolAsk {
        ToolAsk {
            tool_call_id: "c1".into(),
            agent_tool: "Write".into(),
            corral_tool: Some("write_file"),
            args,
            title: "Write".into(),
            kind: "edit",
            raw_input: Value::Null,
            paths: paths.iter().map(|p| p.to_string()).collect(),
        }
    }

    /// `<tmp>/root` with `sub/` and a link `out` to `<tmp>/outside`.
    fn setup() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let (root, outside) = (base.join("root"), base.join("outside"));
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        symlink(&outside, root.join("out")).unwrap();
        symlink("sub", root.join("alias")).unwrap();
        (tmp, root, outside)
    }

    #[test]
    fn paths_inside_are_shown_resolved_and_relative() {
        let (_t, root, _) = setup();
        let abs = root.join("sub/new.txt").display().to_string();
        let got = confine(&ask(json!({"path": abs, "content": "x"}), &[&abs]), &root).unwrap();
        assert_eq!(got.args["path"], "sub/new.txt");
        assert_eq!(got.args["content"], "x");
        let got = confine(&ask(json!({"path": "alias/../sub/./f"}), &[]), &root).unwrap();
        assert_eq!(got.args["path"], "sub/f");
        let got = confine(&ask(json!({"path": "alias/deep/new"}), &[]), &root).unwrap();
        assert_eq!(got.args["path"], "sub/deep/new");
        let got = confine(
            &ask(json!({"path": root.display().to_string()}), &[]),
            &root,
        )
        .unwrap();
        assert_eq!(got.args["path"], ".");
    }

    #[test]
    fn every_way_out_is_refused_with_the_path_in_the_message() {
        let (_t, root, outside) = setup();
        let abs_out = outside.join("outside.txt").display().to_string();
        for path in [
            abs_out.as_str(),
            "../outside.txt",
            "sub/../../outside.txt",
            "out/outside.txt",
            "out/not/yet/there.txt",
            "/etc/passwd",
            "~/.bashrc",
            "~",
        ] {
            let refused = confine(&ask(json!({"path": path}), &[]), &root).unwrap_err();
            assert!(
                refused.starts_with("refused by corral"),
                "{path}: {refused}"
            );
            assert!(refused.contains(path), "{path}: {refused}");
            // Also when only the extra paths name it (a command's cwd, a second file).
            let refused = confine(&ask(json!({"command": "ls"}), &[path]), &root).unwrap_err();
            assert!(
                refused.starts_with("refused by corral"),
                "{path}: {refused}"
            );
        }
    }

    #[test]
    fn path_keys_are_collected_from_the_agents_input() {
        let input = json!({"file_path": "/a", "content": "x", "paths": ["/b", "c"],
            "cwd": "/d", "pattern": "*.rs", "nested": {"path": "/ignored"}});
        assert_eq!(paths_in(&input), ["/b", "c", "/a", "/d"]);
        assert!(paths_in(&json!("just text")).is_empty());
    }

    #[test]
    fn a_globs_base_is_its_literal_prefix() {
        assert_eq!(glob_base("/etc/**/*.conf").as_deref(), Some("/etc"));
        assert_eq!(glob_base("../*.txt").as_deref(), Some(".."));
        assert_eq!(glob_base("src/**/*.rs").as_deref(), Some("src"));
        assert_eq!(glob_base("**/*.rs"), None);
        assert_eq!(glob_base("/x*").as_deref(), Some("/"));
        assert_eq!(glob_base("../../etc/passwd").as_deref(), Some("../../etc"));
        assert_eq!(glob_base("notes.txt"), None);
    }
}
