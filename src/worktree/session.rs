//! A `--worktree` session's worktree: planned before the session exists, created once its id
//! is known (the worktree is named after it), kept or removed when it ends, with the lines a
//! person reads about it.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::{Ending, Record, StartPoint, Store, WorktreeError};
use crate::error::Error;
use crate::session::WorktreeMeta;

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// The worktree of a running `corral run --worktree` session.
#[derive(Debug)]
pub struct RunWorktree {
    record: Record,
    store: Store,
    /// The session's root inside the worktree.
    pub root: PathBuf,
}

impl RunWorktree {
    pub fn meta(&self) -> WorktreeMeta {
        self.record.meta.clone()
    }
}

fn run_error(e: WorktreeError) -> Error {
    if e.is_usage() {
        Error::Usage(e.to_string())
    } else {
        Error::Runtime(format!("cannot set up the worktree: {e}"))
    }
}

/// Checks, before the session exists, that `--worktree` can work from `root`.
pub(crate) fn plan_for_run(
    enabled: bool,
    resuming: bool,
    root: &Path,
) -> Result<Option<(StartPoint, Store)>, Error> {
    if !enabled {
        return Ok(None);
    }
    if resuming {
        return Err(Error::Usage(
            "--worktree starts a new worktree; a resumed session keeps its own directory".into(),
        ));
    }
    let store = Store::default_location().map_err(run_error)?;
    let plan = super::plan(root).map_err(run_error)?;
    Ok(Some((plan, store)))
}

/// Creates the session's worktree and says where it is (the first line on `err`), plus what
/// it does not contain.
pub(crate) fn start_for_run(
    plan: Option<(StartPoint, Store)>,
    session: &str,
    err: &mut (impl Write + ?Sized),
) -> Result<Option<RunWorktree>, Error> {
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
pub(crate) fn end_for_run(worktree: Option<&RunWorktree>, err: &mut (impl Write + ?Sized)) {
    let Some(wt) = worktree else { return };
    let id = &wt.record.session;
    let _ = match super::finish(&wt.record, &wt.store) {
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
