//! `corral worktree …` and the worktree part of `corral run --worktree`: the messages around
//! the library's git work. Everything writes to the writers it is given.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::sandbox::worktree::{
    self, Ending, Entry, MergeKind, Plan, PruneAction, Record, Store, WorktreeError,
};
use crate::session::WorktreeMeta;

use super::run::{Exit, RunError};

/// The `corral worktree` subcommands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorktreeCommand {
    List,
    Diff { id: String },
    Merge { id: String },
    Remove { id: String, force: bool },
    Prune { force: bool },
}

/// Session metas live beside the event logs; their absence marks an orphan.
fn agents_dir() -> Option<PathBuf> {
    dirs::cache_dir().map(|d| d.join("corral").join("agents"))
}

fn exit_for(e: &WorktreeError) -> Exit {
    if e.is_usage() {
        Exit::Usage
    } else {
        Exit::Failure
    }
}

/// Runs one `corral worktree` subcommand: results on `out` (the diff, the listing), messages
/// on `err`. Returns the exit code.
pub fn worktree_main(
    command: &WorktreeCommand,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Exit {
    match dispatch(command, out, err) {
        Ok(exit) => exit,
        Err(e) => {
            let _ = writeln!(err, "corral: {e}");
            exit_for(&e)
        }
    }
}

fn dispatch(
    command: &WorktreeCommand,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<Exit, WorktreeError> {
    let store = Store::default_location()?;
    let agents = agents_dir();
    match command {
        WorktreeCommand::List => {
            let entries = worktree::entries(&store, agents.as_deref())?;
            write_list(&entries, out).map_err(stdout_error)?;
        }
        WorktreeCommand::Diff { id } => {
            let record = store.load(id)?;
            worktree::write_diff(&record, out)?;
        }
        WorktreeCommand::Merge { id } => {
            let record = store.load(id)?;
            // A snapshot of a session still at work would be half of its changes.
            if worktree::store_entry(record.clone(), agents.as_deref()).running {
                return Err(WorktreeError::Refused(format!(
                    "session {id} is still running; merge it when it has ended"
                )));
            }
            let merged = worktree::merge(&record)?;
            let short = merged.head.to_string();
            let short = short.get(..7).unwrap_or(&short);
            let n = merged.files.len();
            let line = match merged.kind {
                MergeKind::UpToDate => format!(
                    "{} already contains everything from {}",
                    merged.into, record.meta.branch
                ),
                MergeKind::FastForward => format!(
                    "fast-forwarded {} to {short}: {n} file{} from {}",
                    merged.into,
                    plural(n),
                    record.meta.branch
                ),
                MergeKind::MergeCommit => format!(
                    "merged {} into {} with merge commit {short}: {n} file{}",
                    record.meta.branch,
                    merged.into,
                    plural(n)
                ),
            };
            let _ = writeln!(
                err,
                "{line} (in {}); the worktree is kept: `corral worktree remove {id}` when done",
                record.meta.repo.display()
            );
        }
        WorktreeCommand::Remove { id, force } => {
            let record = store.load(id)?;
            let entry = worktree::store_entry(record.clone(), agents.as_deref());
            if entry.running && !force {
                return Err(WorktreeError::Refused(format!(
                    "session {id} is still running; not removing its worktree (--force to do it anyway)"
                )));
            }
            if entry.unmerged && !force {
                return Err(WorktreeError::Refused(format!(
                    "worktree {id} has unmerged changes: review with `corral worktree diff {id}`, \
                     then `corral worktree merge {id}`, or remove with --force to discard them"
                )));
            }
            worktree::remove(&record, &store)?;
            let _ = writeln!(
                err,
                "removed worktree {} and branch {}",
                record.meta.path.display(),
                record.meta.branch
            );
        }
        WorktreeCommand::Prune { force } => {
            let actions = worktree::prune(&store, agents.as_deref(), *force)?;
            if actions.is_empty() {
                let _ = writeln!(err, "no worktrees");
            }
            for action in actions {
                let _ = match action {
                    PruneAction::Removed { session, why } => {
                        writeln!(err, "removed {session} ({why})")
                    }
                    PruneAction::Kept { session, why } => writeln!(err, "kept {session}: {why}"),
                };
            }
        }
    }
    Ok(Exit::Ok)
}

fn stdout_error(e: std::io::Error) -> WorktreeError {
    WorktreeError::Io {
        path: PathBuf::from("<stdout>"),
        source: e,
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn age(record: &Record) -> String {
    let secs = (time::OffsetDateTime::now_utc() - record.created_at.0)
        .whole_seconds()
        .max(0);
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        3600..86400 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86400),
    }
}

fn write_list(entries: &[Entry], out: &mut impl Write) -> std::io::Result<()> {
    if entries.is_empty() {
        return Ok(());
    }
    let rows: Vec<[String; 7]> = entries
        .iter()
        .map(|e| {
            let state = if e.running {
                "running"
            } else if !e.dir_exists {
                "orphaned (directory gone)"
            } else if !e.meta_exists {
                "orphaned (no session)"
            } else {
                ""
            };
            [
                e.record.session.clone(),
                e.record.meta.branch.clone(),
                e.record.short_base().to_string(),
                e.changed.map_or("?".to_string(), |n| n.to_string()),
                age(&e.record),
                e.record.meta.path.display().to_string(),
                state.to_string(),
            ]
        })
        .collect();
    let header = [
        "SESSION", "BRANCH", "BASE", "CHANGED", "AGE", "PATH", "STATE",
    ];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in std::iter::once(header.map(str::to_string)).chain(rows) {
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(widths).enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:w$}  "));
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

/// The worktree of a running `corral run --worktree` session.
#[derive(Debug)]
pub(crate) struct RunWorktree {
    record: Record,
    store: Store,
    /// The session's root inside the worktree.
    pub root: PathBuf,
}

impl RunWorktree {
    pub(crate) fn meta(&self) -> WorktreeMeta {
        self.record.meta.clone()
    }
}

fn run_error(e: WorktreeError) -> RunError {
    if e.is_usage() {
        RunError::Usage(e.to_string())
    } else {
        RunError::Runtime(format!("cannot set up the worktree: {e}"))
    }
}

/// Checks, before the session exists, that `--worktree` can work from `root`.
pub(crate) fn plan_for_run(
    enabled: bool,
    resuming: bool,
    root: &Path,
) -> Result<Option<(Plan, Store)>, RunError> {
    if !enabled {
        return Ok(None);
    }
    if resuming {
        return Err(RunError::Usage(
            "--worktree starts a new worktree; a resumed session keeps its own directory".into(),
        ));
    }
    let store = Store::default_location().map_err(run_error)?;
    let plan = worktree::plan(root).map_err(run_error)?;
    Ok(Some((plan, store)))
}

/// Creates the session's worktree and says where it is (the first line on `err`), plus what
/// it does not contain.
pub(crate) fn start_for_run(
    plan: Option<(Plan, Store)>,
    session: &str,
    err: &mut impl Write,
) -> Result<Option<RunWorktree>, RunError> {
    let Some((plan, store)) = plan else {
        return Ok(None);
    };
    let created = plan.create(session, &store).map_err(run_error)?;
    let short = plan.base.to_string();
    let short = short.get(..7).unwrap_or(&short).to_string();
    let from = match &plan.branch {
        Some(branch) => format!("{branch} at {short}"),
        None => format!("detached HEAD at {short}"),
    };
    let _ = writeln!(
        err,
        "corral: worktree {} on branch {} (from {from})",
        created.record.meta.path.display(),
        created.record.meta.branch
    );
    if plan.branch.is_none() {
        let _ = writeln!(
            err,
            "note: HEAD is detached; the worktree's branch starts from commit {short}"
        );
    }
    if plan.dirty {
        let _ = writeln!(
            err,
            "warning: your uncommitted changes are not in the worktree; it starts from HEAD {short}"
        );
    }
    if !plan.submodules.is_empty() {
        let _ = writeln!(
            err,
            "note: submodules are not initialized in the worktree (empty directories): {}",
            plan.submodules.join(", ")
        );
    }
    if created.made_subdir {
        let _ = writeln!(
            err,
            "note: {} is not in HEAD; it starts empty in the worktree",
            plan.subdir.display()
        );
    }
    Ok(Some(RunWorktree {
        root: created.root,
        record: created.record,
        store,
    }))
}

/// At the end of the run: keeps the worktree if it holds changes (and says how to review
/// them), removes it if not.
pub(crate) fn end_for_run(worktree: Option<&RunWorktree>, err: &mut impl Write) {
    let Some(wt) = worktree else { return };
    let id = &wt.record.session;
    let _ = match worktree::finish(&wt.record, &wt.store) {
        Ok(Ending::Kept(changes)) => {
            let n = changes.files.len();
            writeln!(
                err,
                "corral: worktree kept with {n} changed file{}: {} (branch {}); review with \
                 `corral worktree diff {id}`, then `corral worktree merge {id}` or `corral worktree remove {id}`",
                plural(n),
                wt.record.meta.path.display(),
                wt.record.meta.branch
            )
        }
        Ok(Ending::Removed) => writeln!(
            err,
            "corral: no changes; removed worktree {} and branch {}",
            wt.record.meta.path.display(),
            wt.record.meta.branch
        ),
        Err(e) => writeln!(
            err,
            "corral: cannot clean up worktree {} ({e}); it is kept: see `corral worktree list`",
            wt.record.meta.path.display()
        ),
    };
}
