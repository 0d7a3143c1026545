//! `delegate` and `delegate_merge`: the model splits work into tasks that sub-sessions run in
//! parallel, each in a git worktree of its own, and later merges the work it wants. The tools
//! only check arguments and shape results; running sessions is the host's job (a layer above),
//! reached through the [`Delegator`] the session was opened with. A session without one (a
//! sub-session itself, an external agent) has neither tool.

use std::fmt;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::output::parse_args;
use super::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};

/// Most tasks one call may delegate (the manifest says the same).
pub const MAX_TASKS: usize = 8;
/// Longest task, in characters.
const MAX_TASK_CHARS: usize = 8_000;
/// Longest answer of one sub-session handed back, in characters (its end is kept).
const MAX_ANSWER_CHARS: usize = 3_000;

pub type DelegateFuture<'a, T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, String>> + Send + 'a>>;

/// The sub-sessions' permissions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SubPreset {
    /// The delegating session's own preset.
    #[default]
    Same,
    /// Read-only, whatever the delegating session may do.
    Readonly,
}

/// What one sub-session did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delegated {
    pub session: String,
    pub task: String,
    /// `end_turn`, `max_steps`, `error`, `cancelled`.
    pub stop_reason: String,
    pub error: Option<String>,
    /// The sub-session's final answer.
    pub answer: String,
    /// Files changed in its worktree, against the HEAD it started from.
    pub files: Vec<String>,
    /// The kept worktree (`None`: it changed nothing and the worktree was removed).
    pub worktree: Option<String>,
}

/// Runs sub-sessions for a session (implemented by the host).
pub trait Delegator: Send + Sync {
    /// Runs every task, at most the configured number at once; the results in task order.
    fn run(
        &self,
        tasks: Vec<String>,
        preset: SubPreset,
        cancel: CancellationToken,
    ) -> DelegateFuture<'_, Vec<Delegated>>;

    /// Merges a sub-session's worktree into the session's working tree; the files it changed.
    fn merge(&self, session: String) -> DelegateFuture<'_, Vec<String>>;

    /// The tools the delegating session is not offered right now (disabled by the person,
    /// forbidden this turn, not in its preset): sub-sessions started from now on are denied
    /// them too.
    fn narrow(&self, denied: Vec<String>);
}

/// The session's delegator, if it may delegate.
#[derive(Clone, Default)]
pub struct DelegateLink(pub Option<Arc<dyn Delegator>>);

impl fmt::Debug for DelegateLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "DelegateLink(..)"
        } else {
            "DelegateLink(none)"
        })
    }
}

impl PartialEq for DelegateLink {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl DelegateLink {
    fn get(&self) -> Result<&Arc<dyn Delegator>, ToolError> {
        self.0.as_ref().ok_or_else(|| {
            ToolError::Refused(
                "this session cannot delegate (a sub-session, or no git repository)".into(),
            )
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DelegateArgs {
    tasks: Vec<String>,
    #[serde(default)]
    preset: SubPreset,
}

fn checked_tasks(tasks: Vec<String>) -> Result<Vec<String>, ToolError> {
    let invalid = |message: String| Err(ToolError::InvalidArguments(message));
    if tasks.is_empty() {
        return invalid("tasks is empty: give at least one task".into());
    }
    if tasks.len() > MAX_TASKS {
        return invalid(format!(
            "{} tasks; at most {MAX_TASKS} at once: merge small ones or delegate in rounds",
            tasks.len()
        ));
    }
    for (i, task) in tasks.iter().enumerate() {
        if task.trim().is_empty() {
            return invalid(format!(
                "tasks[{i}] is empty: say what the sub-agent is to do"
            ));
        }
        if task.chars().count() > MAX_TASK_CHARS {
            return invalid(format!(
                "tasks[{i}] is longer than {MAX_TASK_CHARS} characters"
            ));
        }
    }
    Ok(tasks.into_iter().map(|t| t.trim().to_string()).collect())
}

/// The end of a long answer (the conclusion is what the delegating model needs).
fn tail(text: &str) -> String {
    let count = text.chars().count();
    if count <= MAX_ANSWER_CHARS {
        return text.to_string();
    }
    let kept: String = text.chars().skip(count - MAX_ANSWER_CHARS).collect();
    format!("[… {} characters cut] {kept}", count - MAX_ANSWER_CHARS)
}

/// The result the model reads: one block per task.
fn report(results: &[Delegated]) -> String {
    let mut out = String::new();
    for (i, r) in results.iter().enumerate() {
        out.push_str(&format!(
            "## Task {} — sub-agent {} ({})\n",
            i + 1,
            r.session,
            r.stop_reason
        ));
        out.push_str(&format!("Task: {}\n", r.task));
        if let Some(error) = &r.error {
            out.push_str(&format!("Error: {error}\n"));
        }
        match (&r.worktree, r.files.is_empty()) {
            (Some(path), false) => out.push_str(&format!(
                "Changed {} file(s) in worktree {path}: {}\nMerge with delegate_merge \
                 {{\"session\": \"{}\"}}.\n",
                r.files.len(),
                r.files.join(", "),
                r.session
            )),
            _ => out.push_str("Changed no files.\n"),
        }
        out.push_str(&format!("Answer:\n{}\n\n", tail(r.answer.trim())));
    }
    out.trim_end().to_string()
}

pub struct Delegate;

impl Tool for Delegate {
    fn name(&self) -> &'static str {
        "delegate"
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let args: DelegateArgs = parse_args(args)?;
            let tasks = checked_tasks(args.tasks)?;
            let delegator = ctx.settings.delegator.get()?;
            // The delegator watches the cancel itself: it stops and closes its sub-sessions
            // before it returns.
            let results = delegator
                .run(tasks, args.preset, ctx.cancel.clone())
                .await
                .map_err(ToolError::Failed)?;
            if ctx.cancel.is_cancelled() {
                return Err(ToolError::Cancelled);
            }
            Ok(ToolOutput::text(report(&results)))
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MergeArgs {
    session: String,
}

pub struct DelegateMerge;

impl Tool for DelegateMerge {
    fn name(&self) -> &'static str {
        "delegate_merge"
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let args: MergeArgs = parse_args(args)?;
            let delegator = ctx.settings.delegator.get()?;
            let files = delegator
                .merge(args.session.trim().to_string())
                .await
                .map_err(ToolError::Failed)?;
            Ok(ToolOutput::text(if files.is_empty() {
                format!("{} had nothing new to merge", args.session.trim())
            } else {
                format!(
                    "merged {} file(s) from {}: {}",
                    files.len(),
                    args.session.trim(),
                    files.join(", ")
                )
            }))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_are_checked_and_trimmed() {
        assert!(checked_tasks(vec![]).is_err());
        assert!(checked_tasks(vec!["  ".into()]).is_err());
        assert!(checked_tasks(vec!["x".into(); MAX_TASKS + 1]).is_err());
        assert!(checked_tasks(vec!["y".repeat(MAX_TASK_CHARS + 1)]).is_err());
        assert_eq!(
            checked_tasks(vec![" fix a ".into(), "fix b".into()]).unwrap(),
            ["fix a", "fix b"]
        );
    }

    #[test]
    fn the_report_names_each_sub_agent_its_files_and_answer() {
        let results = vec![
            Delegated {
                session: "p-d1".into(),
                task: "write a".into(),
                stop_reason: "end_turn".into(),
                error: None,
                answer: "wrote a".into(),
                files: vec!["a.txt".into()],
                worktree: Some("/w/p-d1".into()),
            },
            Delegated {
                session: "p-d2".into(),
                task: "look".into(),
                stop_reason: "error".into(),
                error: Some("model down".into()),
                answer: String::new(),
                files: vec![],
                worktree: None,
            },
        ];
        let text = report(&results);
        assert!(text.contains("sub-agent p-d1 (end_turn)"), "{text}");
        assert!(
            text.contains("Changed 1 file(s) in worktree /w/p-d1: a.txt"),
            "{text}"
        );
        assert!(
            text.contains("delegate_merge {\"session\": \"p-d1\"}"),
            "{text}"
        );
        assert!(text.contains("Error: model down"), "{text}");
        assert!(text.contains("Changed no files."), "{text}");
        let long = tail(&"z".repeat(MAX_ANSWER_CHARS + 10));
        assert!(long.starts_with("[… 10 characters cut]"), "{long}");
    }
}
