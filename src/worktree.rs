//! Isolated git worktrees for risky sessions (`corral run --worktree`).
//!
//! A session gets a linked worktree at `<data>/corral/worktrees/<id>` on a new branch
//! `corral/<id>` made from HEAD, so nothing it does touches the person's own working tree.
//! When the session ends the worktree is kept if it holds changes and removed if not; the
//! kept ones are reviewed, merged and removed later by id.
//!
//! Every worktree also has a small record beside its directory (`<id>.json`): the session's
//! meta lives in the cache directory and is written only once the model answers, while the
//! record must survive both, or a kept worktree could no longer be found or merged.

mod inspect;
mod links;
mod merge;
pub(crate) mod session;
pub(crate) mod snapshot;
mod store;
#[cfg(test)]
mod tests;

use std::path::{Component, Path, PathBuf};

use git2::{BranchType, ErrorCode, Repository, WorktreeAddOptions, WorktreePruneOptions};
use serde::{Deserialize, Serialize};

use crate::event::Timestamp;
use crate::session::WorktreeMeta;

pub(crate) use inspect::{Changes, changes, unmerged, write_diff};
pub(crate) use links::check as check_links;
pub(crate) use merge::{MergeKind, merge};
pub use session::RunWorktree;
pub(crate) use store::{Entry, PruneAction, Store, entries, entry as store_entry, prune};

#[derive(Debug, thiserror::Error)]
pub(crate) enum WorktreeError {
    #[error(
        "{} is not inside a git repository: --worktree needs one (run without --worktree, or `git init` and commit first)",
        .0.display()
    )]
    NotARepo(PathBuf),
    #[error("{} is a bare repository: it has no working tree to branch from", .0.display())]
    Bare(PathBuf),
    #[error(
        "the repository at {} has no commits yet (HEAD is unborn): commit once, then use --worktree",
        .0.display()
    )]
    Unborn(PathBuf),
    #[error("{} is inside a .git directory: run from the working tree", .0.display())]
    InsideGitDir(PathBuf),
    #[error("{0:?} is not a session id")]
    BadId(String),
    #[error("no worktree for session {0} (see `corral worktree list`)")]
    NotFound(String),
    #[error("cannot find a data directory: set XDG_DATA_HOME or HOME")]
    NoDataDir,
    /// The operation would lose or clobber work; nothing was changed.
    #[error("{0}")]
    Refused(String),
    #[error("git: {0}")]
    Git(#[from] git2::Error),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl WorktreeError {
    /// Usage and configuration problems (exit 2), as opposed to refusals and failures.
    pub(crate) fn is_usage(&self) -> bool {
        matches!(
            self,
            WorktreeError::NotARepo(_)
                | WorktreeError::Bare(_)
                | WorktreeError::Unborn(_)
                | WorktreeError::InsideGitDir(_)
                | WorktreeError::BadId(_)
                | WorktreeError::NotFound(_)
                | WorktreeError::NoDataDir
        )
    }
}

pub(crate) fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> WorktreeError + '_ {
    move |source| WorktreeError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What the store keeps about one worktree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Record {
    pub session: String,
    pub created_at: Timestamp,
    #[serde(flatten)]
    pub meta: WorktreeMeta,
}

impl Record {
    /// The worktree's name inside the repository (`.git/worktrees/<name>`): it cannot hold
    /// a '/', so it is not the branch name.
    pub(crate) fn name(&self) -> String {
        worktree_name(&self.session)
    }

    pub(crate) fn base(&self) -> Result<git2::Oid, WorktreeError> {
        Ok(git2::Oid::from_str(&self.meta.base)?)
    }

    pub(crate) fn short_base(&self) -> &str {
        self.meta.base.get(..7).unwrap_or(&self.meta.base)
    }
}

pub(crate) fn worktree_name(session: &str) -> String {
    format!("corral-{session}")
}

pub(crate) fn branch_name(session: &str) -> String {
    format!("corral/{session}")
}

/// Ids become path components and ref names: the session id rule.
pub(crate) fn validate_id(id: &str) -> Result<(), WorktreeError> {
    if crate::session::is_valid_id(id) {
        Ok(())
    } else {
        Err(WorktreeError::BadId(id.to_string()))
    }
}

/// Opens the repository containing `dir`, honouring `GIT_CEILING_DIRECTORIES` like git does
/// (without it a temp dir inside someone's home repository would be taken for that repository).
fn discover(dir: &Path) -> Result<Repository, WorktreeError> {
    let ceilings: Vec<PathBuf> = std::env::var_os("GIT_CEILING_DIRECTORIES")
        .map(|v| std::env::split_paths(&v).collect())
        .unwrap_or_default();
    match Repository::open_ext(dir, git2::RepositoryOpenFlags::empty(), ceilings) {
        Ok(repo) => Ok(repo),
        Err(e) if e.code() == ErrorCode::NotFound => Err(WorktreeError::NotARepo(dir.into())),
        Err(e) => Err(e.into()),
    }
}

/// The working tree of the repository `dir` (canonical) lies in: its top directory, when `dir`
/// is in the working tree proper (not in the git directory). A `.git` that is no repository
/// libgit2 will open (garbage, another user's) makes none.
pub(crate) fn working_tree_of(dir: &Path) -> Option<PathBuf> {
    let repo = discover(dir).ok()?;
    let top = repo
        .workdir()
        .filter(|_| !repo.is_bare())?
        .canonicalize()
        .ok()?;
    let inside = dir.strip_prefix(&top).ok()?;
    let in_git_dir = inside.components().next() == Some(Component::Normal(".git".as_ref()));
    (!in_git_dir).then_some(top)
}

/// What a new worktree will start from; checked before the session exists so that usage
/// problems end the run before anything is created.
#[derive(Debug, Clone)]
pub(crate) struct StartPoint {
    /// The original working tree (canonical).
    pub repo: PathBuf,
    /// Where the session started, relative to `repo`.
    pub subdir: PathBuf,
    pub base: git2::Oid,
    /// The checked-out branch; `None` when HEAD is detached.
    pub branch: Option<String>,
    /// The original tree has uncommitted changes (which the worktree will not have).
    pub dirty: bool,
    /// Submodule paths: the worktree gets them as empty directories.
    pub submodules: Vec<String>,
}

pub(crate) fn plan(cwd: &Path) -> Result<StartPoint, WorktreeError> {
    let repo = discover(cwd)?;
    let Some(workdir) = repo.workdir().filter(|_| !repo.is_bare()) else {
        return Err(WorktreeError::Bare(repo.path().to_path_buf()));
    };
    let workdir = workdir.canonicalize().map_err(io_error(workdir))?;
    let cwd = cwd.canonicalize().map_err(io_error(cwd))?;
    let subdir = cwd
        .strip_prefix(&workdir)
        .map_err(|_| WorktreeError::InsideGitDir(cwd.clone()))?
        .to_path_buf();
    if subdir.components().next() == Some(Component::Normal(".git".as_ref())) {
        return Err(WorktreeError::InsideGitDir(cwd));
    }
    let head = match repo.head() {
        Ok(head) => head,
        Err(e) if matches!(e.code(), ErrorCode::UnbornBranch | ErrorCode::NotFound) => {
            return Err(WorktreeError::Unborn(workdir));
        }
        Err(e) => return Err(e.into()),
    };
    let base = head.peel_to_commit()?.id();
    let branch = if repo.head_detached()? {
        None
    } else {
        head.shorthand().ok().map(str::to_string)
    };
    let dirty = !inspect::dirty_paths(&repo)?.is_empty();
    let submodules = repo
        .submodules()?
        .iter()
        .map(|s| s.path().display().to_string())
        .collect();
    Ok(StartPoint {
        repo: workdir,
        subdir,
        base,
        branch,
        dirty,
        submodules,
    })
}

/// A worktree made for a running session.
#[derive(Debug, Clone)]
pub(crate) struct Created {
    pub record: Record,
    /// The session's root: the worktree, at the subdirectory the session started in.
    pub root: PathBuf,
    /// The subdirectory is not in HEAD (untracked or ignored), so it was made empty.
    pub made_subdir: bool,
}

impl StartPoint {
    pub(crate) fn create(&self, session: &str, store: &Store) -> Result<Created, WorktreeError> {
        validate_id(session)?;
        let repo = Repository::open(&self.repo)?;
        let commit = repo.find_commit(self.base)?;
        store.ensure()?;
        let path = store.dir_of(session);
        if path.exists() {
            return Err(WorktreeError::Refused(format!(
                "{} already exists; not reusing it",
                path.display()
            )));
        }
        let branch = branch_name(session);
        let name = worktree_name(session);
        let made = repo.branch(&branch, &commit, false)?;
        // Always name the branch: without a reference libgit2 invents one after the worktree.
        let added = (|| -> Result<(), git2::Error> {
            let mut opts = WorktreeAddOptions::new();
            opts.reference(Some(made.get()));
            let wt = repo.worktree(&name, &path, Some(&opts))?;
            // Locked while the session runs, so a concurrent `prune` leaves it alone.
            wt.lock(Some(&lock_reason(session)))
        })();
        let record = Record {
            session: session.to_string(),
            created_at: Timestamp::now(),
            meta: WorktreeMeta {
                path: path.clone(),
                branch,
                base: self.base.to_string(),
                repo: self.repo.clone(),
            },
        };
        if let Err(e) = added {
            let _ = remove(&record, store);
            return Err(e.into());
        }
        if let Err(e) = store.save(&record) {
            let _ = remove(&record, store);
            return Err(e);
        }
        // The root is compared with resolved paths by the sandbox: no symlinks in it.
        let mut root = path.canonicalize().map_err(io_error(&path))?;
        // `join("")` would leave a trailing '/'.
        if !self.subdir.as_os_str().is_empty() {
            root.push(&self.subdir);
        }
        let made_subdir = !root.is_dir();
        if made_subdir {
            std::fs::create_dir_all(&root).map_err(io_error(&root))?;
        }
        Ok(Created {
            record,
            root,
            made_subdir,
        })
    }
}

/// The lock reason names the process, so a lock left by a crashed run can be told apart from
/// a live session.
fn lock_reason(session: &str) -> String {
    format!(
        "corral session {session} running (pid {})",
        std::process::id()
    )
}

/// Whether the session owning this worktree is still running.
pub(crate) fn running(repo: &Repository, name: &str) -> bool {
    let Ok(wt) = repo.find_worktree(name) else {
        return false;
    };
    match wt.is_locked() {
        Ok(git2::WorktreeLockStatus::Locked(Some(reason))) => {
            lock_pid(&reason).is_some_and(|pid| {
                pid != std::process::id() && Path::new(&format!("/proc/{pid}")).exists()
            })
        }
        _ => false,
    }
}

fn lock_pid(reason: &str) -> Option<u32> {
    let start = reason.rfind("(pid ")? + "(pid ".len();
    reason[start..].trim_end_matches(')').parse().ok()
}

/// How a session's worktree ended.
#[derive(Debug)]
pub(crate) enum Ending {
    Kept(Changes),
    Removed,
}

/// At the end of a session: keep the worktree if it holds changes, else remove it.
pub(crate) fn finish(record: &Record, store: &Store) -> Result<Ending, WorktreeError> {
    let repo = Repository::open(&record.meta.repo)?;
    if let Ok(wt) = repo.find_worktree(&record.name())
        && matches!(wt.is_locked(), Ok(git2::WorktreeLockStatus::Locked(_)))
    {
        wt.unlock()?;
    }
    // A tampered worktree is kept, whatever it holds, for the person to look at.
    links::check(record)?;
    let found = changes(record)?;
    if found.any() {
        // Everything the session started is gone by now: this is what will be reviewed.
        snapshot::take(record)?;
        Ok(Ending::Kept(found))
    } else {
        remove(record, store)?;
        Ok(Ending::Removed)
    }
}

/// Removes the worktree's directory, its admin dir in the repository and its branch, then the
/// record. No questions asked: callers decide whether the changes may go.
pub(crate) fn remove(record: &Record, store: &Store) -> Result<(), WorktreeError> {
    // The original repository may be gone; then only our own files are left to delete.
    if let Ok(repo) = Repository::open(&record.meta.repo) {
        if let Ok(wt) = repo.find_worktree(&record.name()) {
            // A live worktree is "valid" and maybe locked: prune refuses it without these.
            let mut opts = WorktreePruneOptions::new();
            opts.valid(true).locked(true).working_tree(true);
            wt.prune(Some(&mut opts))?;
        }
        snapshot::forget(&repo, &record.session)?;
        // Pruning leaves the branch behind.
        match repo.find_branch(&record.meta.branch, BranchType::Local) {
            Ok(mut branch) => branch.delete()?,
            Err(e) if e.code() == ErrorCode::NotFound => {}
            Err(e) => return Err(e.into()),
        }
    }
    let path = &record.meta.path;
    if path.exists() && store.owns(path) {
        std::fs::remove_dir_all(path).map_err(io_error(path))?;
    }
    store.delete_record(&record.session)
}
