//! A worktree's links to its repository are as corral made them.
//!
//! A linked worktree is found by git through its `.git` file (`gitdir: <repo>/.git/worktrees/
//! <name>`), and the admin dir points back (`gitdir`) and to the repository (`commondir`). A
//! session that rewrote its `.git` file could send the review and the merge to a repository it
//! made (with its own config and commits), and a `.git` planted deeper in the tree is a
//! repository the person's git would run config from. The sandbox keeps these read-only and
//! removes planted ones after each call; this is the check at finish, diff and merge that
//! holds even where the sandbox was off or could not mount.

use std::path::{Path, PathBuf};

use git2::Repository;

use super::{Record, WorktreeError};
use crate::sandbox::paths::guard::{Guarded, gitdir_of_file};
use crate::sandbox::paths::scan;

/// Refuses, with what is wrong, a worktree whose git links changed or that holds a `.git` of
/// its own beneath its root. A worktree whose directory is gone has nothing to check.
pub(crate) fn check(record: &Record) -> Result<(), WorktreeError> {
    let wt = &record.meta.path;
    if !wt.is_dir() {
        return Ok(());
    }
    let problems = problems(record, wt)?;
    if problems.is_empty() {
        return Ok(());
    }
    Err(WorktreeError::Refused(format!(
        "the worktree of session {} was tampered with: {}. corral will not review or merge it; \
         do not run git inside it (its config may run programs). Look at the files by hand, \
         then `corral worktree remove --force {}`",
        record.session,
        problems.join("; "),
        record.session
    )))
}

fn problems(record: &Record, wt: &Path) -> Result<Vec<String>, WorktreeError> {
    let mut problems = Vec::new();
    let repo = Repository::open(&record.meta.repo)?;
    let common = canonical(repo.path());
    let admin = common.join("worktrees").join(record.name());
    let dot_git = wt.join(".git");
    match std::fs::symlink_metadata(&dot_git) {
        Ok(meta) if meta.is_file() => match gitdir_of_file(&dot_git) {
            Some(target) if canonical(&target) == admin => {}
            Some(target) => problems.push(format!(
                "its .git points at {} instead of {}",
                target.display(),
                admin.display()
            )),
            None => problems.push("its .git file names no git directory".into()),
        },
        Ok(_) => problems.push("its .git is no longer a file".into()),
        Err(_) => problems.push("its .git file is gone".into()),
    }
    let read = |name: &str| std::fs::read_to_string(admin.join(name)).ok();
    match read("gitdir") {
        Some(back) if canonical(Path::new(back.trim())) == canonical(&dot_git) => {}
        _ => problems.push(format!(
            "{} no longer points back at the worktree",
            admin.join("gitdir").display()
        )),
    }
    match read("commondir") {
        Some(c) if canonical(&admin.join(c.trim())) == common => {}
        _ => problems.push(format!(
            "{} no longer names the repository",
            admin.join("commondir").display()
        )),
    }
    // corral never makes one; a worktree config would apply to this worktree alone.
    if admin.join("config.worktree").exists() {
        problems.push(format!(
            "{} appeared",
            admin.join("config.worktree").display()
        ));
    }
    // A git directory committed as a test fixture (`testdata/x.git/`) came with the base;
    // only what the session added counts.
    let base = repo.find_commit(record.base()?)?.tree()?;
    let (found, _) = scan::walk(wt);
    let planted: Vec<String> = found
        .iter()
        .filter(|f| f.class == Guarded::Git && f.path != dot_git)
        .map(|f| f.path.strip_prefix(wt).unwrap_or(&f.path))
        .filter(|rel| base.get_path(&rel.join("HEAD")).is_err())
        .map(|rel| rel.display().to_string())
        .collect();
    if !planted.is_empty() {
        problems.push(format!(
            "it holds git directories of its own: {}",
            planted.join(", ")
        ));
    }
    Ok(problems)
}

fn canonical(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_path_buf())
}
