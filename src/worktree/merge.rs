//! `corral worktree merge`: a worktree's changes onto the current branch of the original
//! working tree, all or nothing.
//!
//! Everything is decided in memory first (the worktree's uncommitted changes become a commit
//! object no ref points at yet, the merge is computed with `merge_commits`, the original tree's
//! uncommitted changes are checked against the paths the merge touches); only when all of that
//! is clean are files checked out and refs moved. A refusal leaves both sides as they were
//! (at most some unreachable objects in the object database, which gc collects).

use std::collections::BTreeSet;

use git2::{
    BranchType, Commit, IndexAddOption, Oid, Repository, Signature, Tree, build::CheckoutBuilder,
};

use super::inspect::dirty_paths;
use super::{Record, WorktreeError};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MergeKind {
    /// The current branch already contains everything.
    UpToDate,
    FastForward,
    MergeCommit,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MergeOutcome {
    pub kind: MergeKind,
    /// The branch of the original working tree that received the changes.
    pub into: String,
    /// Its new tip.
    pub head: Oid,
    /// Paths the merge changed in the original working tree.
    pub files: Vec<String>,
}

fn corral_signature() -> Result<Signature<'static>, git2::Error> {
    Signature::now("corral", "corral@localhost")
}

/// The worktree's uncommitted changes as a commit on top of its branch, not yet referenced:
/// returns the commit to merge and whether it is new.
pub(super) fn snapshot(record: &Record) -> Result<(Repository, Oid, bool), WorktreeError> {
    let repo = Repository::open(&record.meta.path)?;
    let tip_id = repo.head()?.peel_to_commit()?.id();
    if dirty_paths(&repo)?.is_empty() {
        return Ok((repo, tip_id, false));
    }
    // The repository's index object is only written to disk by `write()`, which happens after
    // the merge succeeded.
    let mut index = repo.index()?;
    index.add_all(["*"], IndexAddOption::DEFAULT, None)?;
    index.update_all(["*"], None)?;
    let tree = repo.find_tree(index.write_tree()?)?;
    let sig = corral_signature()?;
    let message = format!("corral session {}", record.session);
    let tip = repo.find_commit(tip_id)?;
    let commit = repo.commit(None, &sig, &sig, &message, &tree, &[&tip])?;
    drop((tree, tip));
    Ok((repo, commit, true))
}

/// Paths that differ between two trees (both sides of renames).
fn touched(repo: &Repository, from: &Tree, to: &Tree) -> Result<Vec<String>, git2::Error> {
    let diff = repo.diff_tree_to_tree(Some(from), Some(to), None)?;
    let mut paths = BTreeSet::new();
    for delta in diff.deltas() {
        for file in [delta.old_file(), delta.new_file()] {
            if let Some(path) = file.path() {
                paths.insert(path.display().to_string());
            }
        }
    }
    Ok(paths.into_iter().collect())
}

/// `a` and `b` name the same path, or one is a directory holding the other.
pub(super) fn overlaps(a: &str, b: &str) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    let short = short.trim_end_matches('/');
    long == short
        || long
            .strip_prefix(short)
            .is_some_and(|rest| rest.starts_with('/'))
}

pub(crate) fn merge(record: &Record) -> Result<MergeOutcome, WorktreeError> {
    super::links::check(record)?;
    // What was reviewed is what is merged: nothing that changed after the session ended.
    let reviewed = super::snapshot::require_unchanged(record)?;
    let (worktree, theirs, snapshotted) = if record.meta.path.is_dir() {
        let (repo, oid, new) = snapshot(record)?;
        (Some(repo), oid, new)
    } else {
        // The directory is gone but its branch may still hold commits.
        let repo = Repository::open(&record.meta.repo)?;
        let branch = repo.find_branch(&record.meta.branch, BranchType::Local)?;
        let tip = branch.get().peel_to_commit()?.id();
        (None, tip, false)
    };
    let theirs = reviewed.unwrap_or(theirs);
    let repo = Repository::open(&record.meta.repo)?;
    if repo.head_detached()? {
        return Err(WorktreeError::Refused(format!(
            "{} has a detached HEAD: check out the branch to merge into, then run merge again",
            record.meta.repo.display()
        )));
    }
    let head = repo.head()?;
    let into = head.shorthand().unwrap_or("HEAD").to_string();
    if head.name().ok() == Some(format!("refs/heads/{}", record.meta.branch).as_str()) {
        return Err(WorktreeError::Refused(format!(
            "{} has {} itself checked out: check out the branch to merge into",
            record.meta.repo.display(),
            record.meta.branch
        )));
    }
    let ours = head.peel_to_commit()?;
    let theirs_commit = repo.find_commit(theirs)?;
    if ours.id() == theirs || repo.graph_descendant_of(ours.id(), theirs)? {
        return Ok(MergeOutcome {
            kind: MergeKind::UpToDate,
            into,
            head: ours.id(),
            files: Vec::new(),
        });
    }
    let (kind, tree) = if repo.graph_descendant_of(theirs, ours.id())? {
        (MergeKind::FastForward, theirs_commit.tree()?)
    } else {
        (
            MergeKind::MergeCommit,
            merged_tree(&repo, &ours, &theirs_commit, &record.meta.branch)?,
        )
    };
    let files = touched(&repo, &ours.tree()?, &tree)?;
    let dirty = dirty_paths(&repo)?;
    let clobbered: Vec<&String> = dirty
        .iter()
        .filter(|d| files.iter().any(|f| overlaps(d, f)))
        .collect();
    if !clobbered.is_empty() {
        let list: Vec<&str> = clobbered.iter().map(|s| s.as_str()).collect();
        return Err(WorktreeError::Refused(format!(
            "uncommitted changes in {} would be overwritten: {}; commit or stash them first (nothing was changed)",
            record.meta.repo.display(),
            list.join(", ")
        )));
    }
    let new_head = match kind {
        MergeKind::FastForward => theirs,
        _ => {
            let sig = repo.signature().or_else(|_| corral_signature())?;
            let message = format!(
                "Merge {} (corral session {})",
                record.meta.branch, record.session
            );
            repo.commit(None, &sig, &sig, &message, &tree, &[&ours, &theirs_commit])?
        }
    };
    // Safe checkout: libgit2 finds every conflict before writing any file, so a surprise
    // (a file changed since the check above) still leaves the tree untouched.
    let mut checkout = CheckoutBuilder::new();
    checkout.safe();
    repo.checkout_tree(tree.as_object(), Some(&mut checkout))?;
    let message = format!("corral: merge session {}", record.session);
    head.resolve()?.set_target(new_head, &message)?;
    if snapshotted && let Some(worktree) = worktree {
        // The snapshot becomes the branch's tip, and the worktree's index matches it.
        let mut index = worktree.index()?;
        index.add_all(["*"], IndexAddOption::DEFAULT, None)?;
        index.update_all(["*"], None)?;
        index.write()?;
        worktree
            .head()?
            .resolve()?
            .set_target(theirs, &format!("corral session {}", record.session))?;
    }
    Ok(MergeOutcome {
        kind,
        into,
        head: new_head,
        files,
    })
}

/// The three-way merge of two commits in memory; conflicts refuse with their paths.
fn merged_tree<'r>(
    repo: &'r Repository,
    ours: &Commit,
    theirs: &Commit,
    branch: &str,
) -> Result<Tree<'r>, WorktreeError> {
    let mut index = repo.merge_commits(ours, theirs, None)?;
    if index.has_conflicts() {
        let mut paths = BTreeSet::new();
        for conflict in index.conflicts()? {
            let conflict = conflict?;
            for entry in [conflict.our, conflict.their, conflict.ancestor]
                .into_iter()
                .flatten()
            {
                paths.insert(String::from_utf8_lossy(&entry.path).into_owned());
            }
        }
        let list: Vec<String> = paths.into_iter().collect();
        return Err(WorktreeError::Refused(format!(
            "the merge has conflicts in: {}; nothing was changed (to resolve by hand, commit in the worktree, then `git merge {}` in the original repository)",
            list.join(", "),
            branch,
        )));
    }
    let oid = index.write_tree_to(repo)?;
    Ok(repo.find_tree(oid)?)
}
