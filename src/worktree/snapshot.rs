//! The state a person reviews is the state that gets merged: when a session ends, its worktree
//! (commits and uncommitted files alike) is recorded as a commit under
//! `refs/corral/snapshots/<id>`; `diff` shows that commit and `merge` refuses when the
//! worktree no longer matches it.
//!
//! A ref rather than a commit on the session's branch: the branch stays what the session made
//! of it, and the ref lives in the original repository's common directory, which tools never
//! get to write (the worktree's own admin data lies outside the session's root).

use git2::{Oid, Repository};

use super::{Record, WorktreeError};

pub(crate) fn ref_name(session: &str) -> String {
    format!("refs/corral/snapshots/{session}")
}

/// Records the worktree's current state as its snapshot, replacing any earlier one.
pub(crate) fn take(record: &Record) -> Result<Oid, WorktreeError> {
    let (repo, state) = current(record)?;
    repo.reference(
        &ref_name(&record.session),
        state,
        true,
        &format!("corral: snapshot of session {}", record.session),
    )?;
    Ok(state)
}

/// The snapshot, if one was taken (worktrees of older versions and running sessions have
/// none).
pub(crate) fn recorded(record: &Record) -> Result<Option<Oid>, WorktreeError> {
    let repo = Repository::open(&record.meta.repo)?;
    match repo.find_reference(&ref_name(&record.session)) {
        Ok(reference) => Ok(reference.target()),
        Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Forgets the snapshot (the worktree is being removed).
pub(crate) fn forget(repo: &Repository, session: &str) -> Result<(), git2::Error> {
    match repo.find_reference(&ref_name(session)) {
        Ok(mut reference) => reference.delete(),
        Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// The worktree as it is now, as a commit (its branch tip when nothing is uncommitted, or when
/// its directory is gone).
fn current(record: &Record) -> Result<(Repository, Oid), WorktreeError> {
    if record.meta.path.is_dir() {
        let (repo, state, _) = super::merge::snapshot(record)?;
        return Ok((repo, state));
    }
    let repo = Repository::open(&record.meta.repo)?;
    let branch = repo.find_branch(&record.meta.branch, git2::BranchType::Local)?;
    let tip = branch.get().peel_to_commit()?.id();
    drop(branch);
    Ok((repo, tip))
}

/// Paths that differ between the snapshot and the worktree now; empty when they match.
pub(crate) fn changed_since(record: &Record, snapshot: Oid) -> Result<Vec<String>, WorktreeError> {
    let (repo, state) = current(record)?;
    let then = repo.find_commit(snapshot)?.tree()?;
    let now = repo.find_commit(state)?.tree()?;
    if then.id() == now.id() {
        return Ok(Vec::new());
    }
    let diff = repo.diff_tree_to_tree(Some(&then), Some(&now), None)?;
    let mut paths = super::inspect::changed_paths(&diff);
    paths.dedup();
    Ok(paths)
}

/// Merge takes the snapshot, never what the worktree became after it: refuses, naming the
/// paths, when they differ.
pub(crate) fn require_unchanged(record: &Record) -> Result<Option<Oid>, WorktreeError> {
    let Some(snapshot) = recorded(record)? else {
        return Ok(None);
    };
    let changed = changed_since(record, snapshot)?;
    if changed.is_empty() {
        return Ok(Some(snapshot));
    }
    let id = &record.session;
    Err(WorktreeError::Refused(format!(
        "worktree {id} changed since its snapshot {} was taken when the session ended: {}; \
         nothing was merged. To accept the new state, take a new snapshot with `corral worktree \
         snapshot {id}`, review it with `corral worktree diff {id}`, then merge again",
        short(snapshot),
        changed.join(", ")
    )))
}

/// The diff from the base to the snapshot: what `merge` would bring in.
pub(crate) fn diff<'r>(
    repo: &'r Repository,
    record: &Record,
    snapshot: Oid,
) -> Result<git2::Diff<'r>, WorktreeError> {
    let base = repo.find_commit(record.base()?)?.tree()?;
    let then = repo.find_commit(snapshot)?.tree()?;
    let mut opts = git2::DiffOptions::new();
    opts.include_typechange(true).ignore_submodules(true);
    let mut diff = repo.diff_tree_to_tree(Some(&base), Some(&then), Some(&mut opts))?;
    diff.find_similar(None)?;
    Ok(diff)
}

pub(crate) fn short(oid: Oid) -> String {
    let text = oid.to_string();
    text.get(..12).unwrap_or(&text).to_owned()
}
