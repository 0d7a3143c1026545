//! An eval task: `TASK/task.toml` (the prompt and the check), `TASK/repo/` (the tiny
//! repository the agent works in, copied fresh for each run) and anything else the check
//! needs, kept outside the copy so the agent cannot rewrite the check to pass it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::error::Error;

/// Longest a turn may take when the task names no limit.
const DEFAULT_TURN_SECS: u64 = 600;
/// Longest a check command may take when the task names no limit.
const DEFAULT_CHECK_SECS: u64 = 120;
/// Most steps a turn may take when neither the task nor `--max-steps` says.
const DEFAULT_MAX_STEPS: u32 = 20;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskFile {
    prompt: String,
    /// A shell command run in the working copy after the turn: exit 0 means the task passed.
    /// `$CORRAL_EVAL_TASK` is the task's directory, where hidden checks live.
    check: String,
    /// For people reading the task; the model sees only the prompt.
    #[serde(default, rename = "description")]
    _description: Option<String>,
    max_steps: Option<u32>,
    timeout_secs: Option<u64>,
    check_timeout_secs: Option<u64>,
    /// A desktop program the task is done in: a shell command run in the task's directory
    /// before the turn, and stopped after the check.
    app: Option<String>,
    /// The title of the program's window: the turn starts once it is on the screen.
    app_window: Option<String>,
    /// Tools the turn may use without asking (`--allow`): `computer` for a desktop task.
    #[serde(default)]
    allow: Vec<String>,
}

/// A desktop program a task is done in.
#[derive(Debug, Clone)]
pub struct App {
    pub command: String,
    pub window: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Task {
    pub name: String,
    pub dir: PathBuf,
    pub prompt: String,
    pub check: String,
    pub max_steps: u32,
    pub timeout: Duration,
    pub check_timeout: Duration,
    pub app: Option<App>,
    pub allow: Vec<String>,
}

impl Task {
    pub fn repo(&self) -> PathBuf {
        self.dir.join("repo")
    }
}

/// The tasks under `dir`, one per subdirectory holding a `task.toml`, sorted by name; those
/// whose name contains none of `only` (when given) are left out.
pub fn load(dir: &Path, only: &[String], max_steps: Option<u32>) -> Result<Vec<Task>, Error> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| Error::Usage(format!("cannot read tasks in {}: {e}", dir.display())))?;
    let mut tasks = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if !path.join("task.toml").is_file() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        if !only.is_empty() && !only.iter().any(|o| name.contains(o.as_str())) {
            continue;
        }
        tasks.push(read(&path, name, max_steps)?);
    }
    if tasks.is_empty() {
        return Err(Error::Usage(format!(
            "no tasks in {} (each is a directory with task.toml and repo/){}",
            dir.display(),
            if only.is_empty() {
                String::new()
            } else {
                format!(" matching {}", only.join(", "))
            }
        )));
    }
    tasks.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(tasks)
}

fn read(dir: &Path, name: String, max_steps: Option<u32>) -> Result<Task, Error> {
    let file = dir.join("task.toml");
    let bad = |why: String| Error::Usage(format!("{}: {why}", file.display()));
    let text = std::fs::read_to_string(&file).map_err(|e| bad(e.to_string()))?;
    let parsed: TaskFile = toml::from_str(&text).map_err(|e| bad(e.to_string()))?;
    if parsed.prompt.trim().is_empty() || parsed.check.trim().is_empty() {
        return Err(bad("prompt and check must not be empty".into()));
    }
    if !dir.join("repo").is_dir() {
        return Err(bad("the task has no repo/ directory beside it".into()));
    }
    let seconds = |value: Option<u64>, default: u64, key: &str| match value {
        Some(0) => Err(bad(format!("{key} must be at least 1"))),
        Some(s) => Ok(Duration::from_secs(s)),
        None => Ok(Duration::from_secs(default)),
    };
    Ok(Task {
        name,
        dir: dir.to_path_buf(),
        prompt: parsed.prompt,
        check: parsed.check,
        max_steps: max_steps
            .or(parsed.max_steps)
            .unwrap_or(DEFAULT_MAX_STEPS)
            .max(1),
        timeout: seconds(parsed.timeout_secs, DEFAULT_TURN_SECS, "timeout_secs")?,
        check_timeout: seconds(
            parsed.check_timeout_secs,
            DEFAULT_CHECK_SECS,
            "check_timeout_secs",
        )?,
        app: match (parsed.app, parsed.app_window) {
            (Some(command), window) if !command.trim().is_empty() => Some(App { command, window }),
            (None, None) => None,
            _ => return Err(bad("app_window needs app: the program that opens it".into())),
        },
        allow: parsed.allow,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(root: &Path, name: &str, toml: &str) {
        let dir = root.join(name);
        std::fs::create_dir_all(dir.join("repo")).unwrap();
        std::fs::write(dir.join("task.toml"), toml).unwrap();
    }

    #[test]
    fn tasks_load_sorted_and_filtered_with_defaults() {
        let root = tempfile::tempdir().unwrap();
        task(
            root.path(),
            "b-two",
            "prompt = \"p\"\ncheck = \"true\"\nmax_steps = 3\n",
        );
        task(root.path(), "a-one", "prompt = \"p\"\ncheck = \"true\"\n");
        std::fs::create_dir(root.path().join("not-a-task")).unwrap();
        let all = load(root.path(), &[], None).unwrap();
        let names: Vec<&str> = all.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["a-one", "b-two"]);
        assert_eq!(all[0].max_steps, DEFAULT_MAX_STEPS);
        assert_eq!(all[1].max_steps, 3);
        let forced = load(root.path(), &["two".into()], Some(7)).unwrap();
        assert_eq!(forced.len(), 1);
        assert_eq!(forced[0].max_steps, 7);
    }

    #[test]
    fn a_bad_task_file_is_a_usage_error_naming_it() {
        let root = tempfile::tempdir().unwrap();
        task(
            root.path(),
            "x",
            "prompt = \"p\"\ncheck = \"true\"\nsurprise = 1\n",
        );
        let err = load(root.path(), &[], None).unwrap_err().to_string();
        assert!(
            err.contains("task.toml") && err.contains("surprise"),
            "{err}"
        );
        task(
            root.path(),
            "y",
            "prompt = \"p\"\ncheck = \"true\"\napp_window = \"w\"\n",
        );
        let err = load(root.path(), &["y".into()], None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("app_window needs app"), "{err}");
        let empty = tempfile::tempdir().unwrap();
        let err = load(empty.path(), &[], None).unwrap_err().to_string();
        assert!(err.contains("no tasks"), "{err}");
    }
}
