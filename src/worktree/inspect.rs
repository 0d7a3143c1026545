//! What a worktree changed against its base: for keeping, listing, diffing and removing.

use std::io::Write;

use git2::{BranchType, Diff, DiffFormat, DiffOptions, Oid, Repository, StatusOptions};

use super::{Record, WorktreeError, io_error};

/// A worktree's changes against its base commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Changes {
    /// Paths that differ from the base: committed, uncommitted and untracked alike.
    pub files: Vec<String>,
    /// The branch no longer points at the base (commits were made, or it was moved).
    pub moved: bool,
    /// The worktree has uncommitted (or untracked) changes.
    pub uncommitted: bool,
}

impl Changes {
    pub(crate) fn any(&self) -> bool {
        !self.files.is_empty() || self.moved || self.uncommitted
    }
}

/// The paths a diff touches, one a change: the new path, or the old one for a deletion.
pub(crate) fn changed_paths(diff: &Diff<'_>) -> Vec<String> {
    diff.deltas()
        .filter_map(|d| {
            d.new_file()
                .path()
                .or_else(|| d.old_file().path())
                .map(|p| p.display().to_string())
        })
        .collect()
}

/// Uncommitted changes in a working tree: modified, staged, deleted and untracked files, not
/// ignored ones.
pub(crate) fn dirty_paths(repo: &Repository) -> Result<Vec<String>, git2::Error> {
    let mut opts = StatusOptions::new();
    opts.include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_ignored(false)
        .exclude_submodules(true);
    let statuses = repo.statuses(Some(&mut opts))?;
    Ok(statuses
        .iter()
        .map(|s| String::from_utf8_lossy(s.path_bytes()).into_owned())
        .collect())
}

fn diff_options(content: bool) -> DiffOptions {
    let mut opts = DiffOptions::new();
    opts.include_untracked(true)
        .recurse_untracked_dirs(true)
        .show_untracked_content(content)
        .include_typechange(true)
        // Submodules are never initialized in a worktree: their empty directories are not
        // changes the session made.
        .ignore_submodules(true);
    opts
}

/// The worktree's repository, or `None` when its directory is gone.
fn open_worktree(record: &Record) -> Result<Option<Repository>, WorktreeError> {
    if !record.meta.path.is_dir() {
        return Ok(None);
    }
    Ok(Some(Repository::open(&record.meta.path)?))
}

/// The diff from the base to everything the worktree holds; when the directory is gone, to
/// its branch.
fn base_diff<'r>(
    repo: &'r Repository,
    worktree: bool,
    record: &Record,
    content: bool,
) -> Result<Diff<'r>, WorktreeError> {
    let base_tree = repo.find_commit(record.base()?)?.tree()?;
    let mut opts = diff_options(content);
    let mut diff = if worktree {
        repo.diff_tree_to_workdir_with_index(Some(&base_tree), Some(&mut opts))?
    } else {
        let tip = branch_tip(repo, record)?.unwrap_or(base_tree.id());
        let tip_tree = match repo.find_commit(tip) {
            Ok(commit) => commit.tree()?,
            Err(_) => base_tree.clone(),
        };
        repo.diff_tree_to_tree(Some(&base_tree), Some(&tip_tree), Some(&mut opts))?
    };
    // Renames are reported as delete + add by default; one path reads better.
    diff.find_similar(None)?;
    Ok(diff)
}

fn branch_tip(repo: &Repository, record: &Record) -> Result<Option<Oid>, WorktreeError> {
    match repo.find_branch(&record.meta.branch, BranchType::Local) {
        Ok(branch) => Ok(branch.get().target()),
        Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The worktree's changes; for a worktree whose directory is gone, its branch's.
pub(crate) fn changes(record: &Record) -> Result<Changes, WorktreeError> {
    let base = record.base()?;
    let (repo, worktree) = match open_worktree(record)? {
        Some(repo) => (repo, true),
        None => (Repository::open(&record.meta.repo)?, false),
    };
    let diff = base_diff(&repo, worktree, record, false)?;
    let files = changed_paths(&diff);
    let tip = if worktree {
        repo.head()?.target()
    } else {
        branch_tip(&repo, record)?
    };
    let uncommitted = worktree && !dirty_paths(&repo)?.is_empty();
    Ok(Changes {
        files,
        moved: tip.is_some_and(|tip| tip != base),
        uncommitted,
    })
}

/// A unified diff of everything the worktree changed against its base: committed,
/// uncommitted and untracked files, like `git diff <base>` plus the new files.
pub(crate) fn write_diff(record: &Record, out: &mut dyn Write) -> Result<(), WorktreeError> {
    super::links::check(record)?;
    let (repo, worktree) = match open_worktree(record)? {
        Some(repo) => (repo, true),
        None => (Repository::open(&record.meta.repo)?, false),
    };
    let diff = match super::snapshot::recorded(record)? {
        Some(snapshot) => super::snapshot::diff(&repo, record, snapshot)?,
        None => base_diff(&repo, worktree, record, true)?,
    };
    let mut failed: Option<std::io::Error> = None;
    diff.print(DiffFormat::Patch, |_, _, line| {
        // File and hunk headers carry their own text; content lines need their marker.
        let marker = match line.origin() {
            c @ ('+' | '-' | ' ') => Some(c),
            _ => None,
        };
        let written = match marker {
            Some(c) => write!(out, "{c}").and_then(|()| out.write_all(line.content())),
            None => out.write_all(line.content()),
        };
        match written {
            Ok(()) => true,
            Err(e) => {
                failed = Some(e);
                false
            }
        }
    })
    .or_else(|e| match &failed {
        // The callback stopped the walk because the writer failed: report that instead.
        Some(_) => Ok(()),
        None => Err(e),
    })?;
    match failed {
        Some(e) => Err(io_error(std::path::Path::new("<stdout>"))(e)),
        None => Ok(()),
    }
}

/// Whether removing the worktree would lose work: uncommitted changes, or commits no other
/// local branch contains.
pub(crate) fn unmerged(record: &Record) -> Result<bool, WorktreeError> {
    let changes = changes(record)?;
    if changes.uncommitted {
        return Ok(true);
    }
    if !changes.moved {
        return Ok(false);
    }
    let repo = Repository::open(&record.meta.repo)?;
    let Some(tip) = branch_tip(&repo, record)? else {
        return Ok(false);
    };
    for branch in repo.branches(Some(BranchType::Local))? {
        let (branch, _) = branch?;
        if branch.name()? == Some(record.meta.branch.as_str()) {
            continue;
        }
        if let Some(target) = branch.get().target()
            && (target == tip || repo.graph_descendant_of(target, tip)?)
        {
            return Ok(false);
        }
    }
    Ok(true)
}
