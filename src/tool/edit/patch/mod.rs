//! `apply_patch`: several files changed by one patch (see `parse` for the format), all or
//! none.
//!
//! First every path is confined beneath the root, then every file the patch touches is read
//! and every new content computed in memory (a file named twice sees the earlier change);
//! only when all of that succeeded is anything written. Writes go one file at a time through
//! the same atomic write as `write_file`; if one fails, the files already written are put
//! back as they were (their old text written again, files the patch created deleted, files
//! it deleted written back), last first, and the error says whether that worked.

mod hunks;
pub(crate) mod parse;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::super::guard::{self, Guard};
use super::super::output::parse_args;
use super::super::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use super::{FileChange, diff, files};
use crate::sandbox::paths::resolve_in_root;
use parse::{Op, Patch};

pub(crate) struct ApplyPatch;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PatchArgs {
    patch: String,
}

/// A file the patch touches, by where it really is.
struct Entry {
    /// The path as the patch first names it.
    shown: String,
    before: Option<String>,
    after: Option<String>,
}

/// The files of a patch as read now, by where they really are.
pub(super) type Contents = BTreeMap<PathBuf, Option<String>>;

/// Where `path` really is, so two names for one file are one file.
pub(super) fn key(root: &Path, path: &str) -> PathBuf {
    resolve_in_root(root, path).unwrap_or_else(|_| root.join(path))
}

/// The files a patch has touched so far, in the order it first named them.
struct Touched<'a> {
    root: &'a Path,
    contents: &'a Contents,
    order: Vec<PathBuf>,
    entries: BTreeMap<PathBuf, Entry>,
}

impl Touched<'_> {
    fn entry(&mut self, path: &str) -> &mut Entry {
        let at = key(self.root, path);
        if !self.entries.contains_key(&at) {
            self.order.push(at.clone());
        }
        let before = self.contents.get(&at).cloned().flatten();
        self.entries.entry(at).or_insert_with(|| Entry {
            shown: path.to_owned(),
            after: before.clone(),
            before,
        })
    }
}

/// Every file the patch changes, as it would leave them, and a line per operation.
pub(super) fn plan(
    patch: &Patch,
    root: &Path,
    contents: &Contents,
) -> Result<(Vec<FileChange>, Vec<String>), ToolError> {
    let mut touched = Touched {
        root,
        contents,
        order: Vec::new(),
        entries: BTreeMap::new(),
    };
    let mut summary = Vec::new();
    for op in &patch.ops {
        match op {
            Op::Add { path, content } => {
                let file = touched.entry(path);
                let verb = if file.after.is_some() {
                    "replaced"
                } else {
                    "added"
                };
                file.after = Some(content.clone());
                let lines = content.split_inclusive('\n').count();
                summary.push(format!("{verb} {path} ({lines} lines)"));
            }
            Op::Delete { path } => {
                if touched.entry(path).after.take().is_none() {
                    return Err(missing(path, "delete"));
                }
                summary.push(format!("deleted {path}"));
            }
            Op::Update {
                path,
                move_to,
                hunks,
            } => {
                let Some(old) = touched.entry(path).after.clone() else {
                    return Err(missing(path, "update"));
                };
                let new = if hunks.is_empty() {
                    old.clone()
                } else {
                    hunks::apply(&old, hunks, path).map_err(ToolError::Failed)?
                };
                let changed = diff::changed_lines(&old, &new);
                let mut line = match move_to {
                    Some(to) => {
                        touched.entry(path).after = None;
                        touched.entry(to).after = Some(new);
                        format!("moved {path} to {to}")
                    }
                    None => {
                        touched.entry(path).after = Some(new);
                        format!("updated {path}")
                    }
                };
                if let Some(changed) = changed {
                    line.push_str(&format!(": {changed}"));
                }
                summary.push(line);
            }
        }
    }
    let Touched {
        order, mut entries, ..
    } = touched;
    let changes = order
        .into_iter()
        .filter_map(|at| entries.remove(&at))
        .filter(|e| e.before != e.after)
        .map(|e| FileChange {
            path: e.shown,
            old: e.before,
            new: e.after,
        })
        .collect();
    Ok((changes, summary))
}

fn missing(path: &str, verb: &str) -> ToolError {
    ToolError::NotFound(format!(
        "{path} does not exist, so the patch cannot {verb} it; nothing was changed"
    ))
}

/// The patch's paths, each confined beneath the root: the first that is not stops it.
pub(super) fn confined(patch: &Patch, root: &Path) -> Result<Vec<String>, ToolError> {
    let paths = patch.paths();
    for path in &paths {
        resolve_in_root(root, path)?;
    }
    Ok(paths)
}

impl Tool for ApplyPatch {
    fn name(&self) -> &'static str {
        "apply_patch"
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let args: PatchArgs = parse_args(args)?;
            let patch = parse::parse(&args.patch).map_err(ToolError::InvalidArguments)?;
            let paths = confined(&patch, &ctx.root)?;
            // The gate refused these already; refusing here too means no file of the patch
            // is written before the one that reaches into git's files is found.
            if let Some(Guard::Never(reason)) = guard::guard_paths(&paths, &ctx.root) {
                return Err(ToolError::Refused(reason));
            }
            let mut contents = Contents::new();
            for path in paths {
                let at = key(&ctx.root, &path);
                if let std::collections::btree_map::Entry::Vacant(slot) = contents.entry(at) {
                    slot.insert(files::current(ctx, &path).await?);
                }
            }
            let (changes, summary) = plan(&patch, &ctx.root, &contents)?;
            if changes.is_empty() {
                return Err(ToolError::Failed(
                    "the patch leaves every file as it was; nothing was changed".into(),
                ));
            }
            if ctx.cancel.is_cancelled() {
                return Err(ToolError::Cancelled);
            }
            // Once writing has begun it runs to the end (or is undone): a cancel half way
            // through must not leave half a patch.
            let mut steady = ctx.clone();
            steady.cancel = CancellationToken::new();
            commit(&steady, &changes).await?;
            let diffs: String = changes.iter().map(FileChange::diff).collect();
            Ok(ToolOutput::text(format!("{}\n{diffs}", summary.join("\n"))))
        })
    }
}

/// Leaves each file as `change.new` says (`None`: deleted).
async fn set(ctx: &ToolContext, path: &str, content: Option<&String>) -> Result<(), ToolError> {
    match content {
        Some(text) => files::put(ctx, path, text.clone()).await,
        None => files::delete(ctx, path).await,
    }
}

async fn commit(ctx: &ToolContext, changes: &[FileChange]) -> Result<(), ToolError> {
    for (done, change) in changes.iter().enumerate() {
        if let Err(e) = set(ctx, &change.path, change.new.as_ref()).await {
            let restored = undo(ctx, &changes[..done]).await;
            return Err(ToolError::Failed(format!(
                "the patch could not be applied: writing {} failed: {e}; {restored}",
                change.path
            )));
        }
    }
    Ok(())
}

/// Puts back the files in `done`, last first; says how that went.
async fn undo(ctx: &ToolContext, done: &[FileChange]) -> String {
    if done.is_empty() {
        return "nothing had been written, so nothing was changed".into();
    }
    let mut failed = Vec::new();
    for change in done.iter().rev() {
        if let Err(e) = set(ctx, &change.path, change.old.as_ref()).await {
            tracing::warn!(path = %change.path, error = %e, "apply_patch could not undo a write");
            failed.push(format!("{}: {e}", change.path));
        }
    }
    let names: Vec<&str> = done.iter().map(|c| c.path.as_str()).collect();
    if failed.is_empty() {
        format!(
            "{} already written {} put back as before, so nothing was changed",
            names.join(", "),
            if done.len() == 1 { "was" } else { "were" }
        )
    } else {
        format!(
            "putting back what was already written failed for {}; those files are as the \
             patch left them",
            failed.join("; ")
        )
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
