#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use git2::{BranchType, Oid, Repository, Signature};
use tempfile::TempDir;

use super::*;

/// A temp dir with a repository (`repo/`, one commit of `a.txt` on `main`) and a store.
struct Fixture {
    tmp: TempDir,
    repo: Repository,
}

impl Fixture {
    fn new() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().canonicalize().unwrap().join("repo");
        let mut opts = git2::RepositoryInitOptions::new();
        opts.initial_head("main");
        let repo = Repository::init_opts(&path, &opts).unwrap();
        let fixture = Fixture { tmp, repo };
        fixture.write("a.txt", "one\ntwo\nthree\n");
        fixture.commit("first");
        fixture
    }

    fn root(&self) -> PathBuf {
        self.repo.workdir().unwrap().canonicalize().unwrap()
    }

    fn store(&self) -> Store {
        Store::at(self.tmp.path().canonicalize().unwrap().join("worktrees"))
    }

    fn write(&self, path: &str, text: &str) {
        let full = self.root().join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, text).unwrap();
    }

    fn commit(&self, message: &str) -> Oid {
        commit_all(&self.repo, message)
    }

    fn head(&self) -> Oid {
        self.repo.head().unwrap().target().unwrap()
    }

    fn start(&self, id: &str) -> Created {
        plan(&self.root())
            .unwrap()
            .create(id, &self.store())
            .unwrap()
    }
}

fn commit_all(repo: &Repository, message: &str) -> Oid {
    let mut index = repo.index().unwrap();
    index
        .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
        .unwrap();
    index.update_all(["*"], None).unwrap();
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = Signature::now("t", "t@example.com").unwrap();
    let parents: Vec<git2::Commit> = repo
        .head()
        .ok()
        .and_then(|h| h.peel_to_commit().ok())
        .into_iter()
        .collect();
    let parents: Vec<&git2::Commit> = parents.iter().collect();
    repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &parents)
        .unwrap()
}

fn branch_exists(repo: &Repository, name: &str) -> bool {
    repo.find_branch(name, BranchType::Local).is_ok()
}

#[test]
fn plan_rejects_a_plain_directory_a_bare_repo_and_an_unborn_head() {
    let tmp = tempfile::tempdir().unwrap();
    let plain = tmp.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    assert!(matches!(plan(&plain), Err(WorktreeError::NotARepo(_))));
    let bare = tmp.path().join("bare.git");
    Repository::init_bare(&bare).unwrap();
    assert!(matches!(plan(&bare), Err(WorktreeError::Bare(_))));
    let empty = tmp.path().join("empty");
    Repository::init(&empty).unwrap();
    let e = plan(&empty).unwrap_err();
    assert!(matches!(e, WorktreeError::Unborn(_)), "{e}");
    assert!(
        e.is_usage() && e.to_string().contains("no commits yet"),
        "{e}"
    );
}

#[test]
fn plan_reads_branch_subdir_dirtiness_and_detached_head() {
    let f = Fixture::new();
    f.write("sub/dir/b.txt", "b\n");
    let base = f.commit("second");
    let p = plan(&f.root().join("sub/dir")).unwrap();
    assert_eq!(p.repo, f.root());
    assert_eq!(p.subdir, Path::new("sub/dir"));
    assert_eq!(
        (p.base, p.branch.as_deref(), p.dirty),
        (base, Some("main"), false)
    );
    f.write("a.txt", "changed\n");
    assert!(plan(&f.root()).unwrap().dirty);
    f.repo.set_head_detached(base).unwrap();
    assert_eq!(plan(&f.root()).unwrap().branch, None);
    let git_dir = f.root().join(".git");
    assert!(matches!(
        plan(&git_dir),
        Err(WorktreeError::InsideGitDir(_))
    ));
}

#[test]
fn a_clean_worktree_is_removed_with_its_admin_dir_and_branch() {
    let f = Fixture::new();
    let created = f.start("s1");
    let path = created.record.meta.path.clone();
    assert_eq!(created.root, path);
    assert!(path.join("a.txt").is_file());
    assert!(f.root().join(".git/worktrees/corral-s1").is_dir());
    assert!(branch_exists(&f.repo, "corral/s1"));
    // Locked while the session runs, by this process.
    let wt = f.repo.find_worktree("corral-s1").unwrap();
    assert!(matches!(
        wt.is_locked().unwrap(),
        git2::WorktreeLockStatus::Locked(_)
    ));
    assert!(
        !running(&f.repo, "corral-s1"),
        "our own lock is not another session"
    );
    assert!(matches!(
        finish(&created.record, &f.store()).unwrap(),
        Ending::Removed
    ));
    assert!(!path.exists());
    assert!(!f.root().join(".git/worktrees/corral-s1").exists());
    assert!(!branch_exists(&f.repo, "corral/s1"));
    assert!(f.store().all().unwrap().is_empty());
}

#[test]
fn a_worktree_with_changes_is_kept_and_the_original_tree_untouched() {
    let f = Fixture::new();
    let created = f.start("s2");
    std::fs::write(created.root.join("new.txt"), "hello\n").unwrap();
    std::fs::write(created.root.join("a.txt"), "one\nTWO\nthree\n").unwrap();
    let Ending::Kept(changes) = finish(&created.record, &f.store()).unwrap() else {
        panic!("removed a worktree with changes");
    };
    assert_eq!(changes.files, ["a.txt", "new.txt"]);
    assert!(changes.uncommitted && !changes.moved);
    assert!(!f.root().join("new.txt").exists());
    assert!(unmerged(&created.record).unwrap());
    // Unlocked once the session ended.
    let wt = f.repo.find_worktree("corral-s2").unwrap();
    assert!(matches!(
        wt.is_locked().unwrap(),
        git2::WorktreeLockStatus::Unlocked
    ));
    let mut diff = Vec::new();
    write_diff(&created.record, &mut diff).unwrap();
    let diff = String::from_utf8(diff).unwrap();
    assert!(
        diff.contains("+++ b/new.txt") && diff.contains("+hello"),
        "{diff}"
    );
    assert!(diff.contains("-two\n+TWO\n"), "{diff}");
}

#[test]
fn commits_beyond_the_base_count_as_changes() {
    let f = Fixture::new();
    let created = f.start("s3");
    let wt = Repository::open(&created.record.meta.path).unwrap();
    std::fs::write(created.root.join("c.txt"), "c\n").unwrap();
    commit_all(&wt, "in the worktree");
    let changes = changes(&created.record).unwrap();
    assert!(changes.moved && !changes.uncommitted);
    assert_eq!(changes.files, ["c.txt"]);
}

#[test]
fn the_session_starts_in_the_same_subdirectory() {
    let f = Fixture::new();
    f.write("src/lib/x.txt", "x\n");
    f.commit("sub");
    std::fs::create_dir_all(f.root().join("untracked/dir")).unwrap();
    let store = f.store();
    let c = plan(&f.root().join("src/lib"))
        .unwrap()
        .create("s4", &store)
        .unwrap();
    assert_eq!(c.root, c.record.meta.path.join("src/lib"));
    assert!(c.root.join("x.txt").is_file() && !c.made_subdir);
    let c = plan(&f.root().join("untracked/dir"))
        .unwrap()
        .create("s5", &store)
        .unwrap();
    assert!(c.made_subdir && c.root.is_dir());
}

#[test]
fn merge_fast_forwards_and_commits_uncommitted_work_first() {
    let f = Fixture::new();
    let created = f.start("m1");
    std::fs::write(created.root.join("new.txt"), "hello\n").unwrap();
    finish(&created.record, &f.store()).unwrap();
    let outcome = merge(&created.record).unwrap();
    assert_eq!(outcome.kind, MergeKind::FastForward);
    assert_eq!(
        (outcome.into.as_str(), outcome.files.clone()),
        ("main", vec!["new.txt".to_string()])
    );
    assert_eq!(
        std::fs::read_to_string(f.root().join("new.txt")).unwrap(),
        "hello\n"
    );
    let head = f.repo.head().unwrap().peel_to_commit().unwrap();
    assert_eq!(head.message().ok(), Some("corral session m1"));
    assert_eq!(head.author().name().ok(), Some("corral"));
    assert!(super::inspect::dirty_paths(&f.repo).unwrap().is_empty());
    // The branch now holds the snapshot and the worktree is clean; nothing is unmerged.
    let wt = Repository::open(&created.record.meta.path).unwrap();
    assert!(super::inspect::dirty_paths(&wt).unwrap().is_empty());
    assert!(!unmerged(&created.record).unwrap());
    assert_eq!(merge(&created.record).unwrap().kind, MergeKind::UpToDate);
}

#[test]
fn merge_makes_a_merge_commit_when_both_sides_moved() {
    let f = Fixture::new();
    let created = f.start("m2");
    std::fs::write(created.root.join("theirs.txt"), "t\n").unwrap();
    f.write("ours.txt", "o\n");
    let ours = f.commit("ours");
    let outcome = merge(&created.record).unwrap();
    assert_eq!(outcome.kind, MergeKind::MergeCommit);
    let head = f.repo.head().unwrap().peel_to_commit().unwrap();
    assert_eq!(head.parent_count(), 2);
    assert_eq!(head.parent_id(0).unwrap(), ours);
    assert!(f.root().join("theirs.txt").is_file() && f.root().join("ours.txt").is_file());
}

#[test]
fn a_conflicting_merge_refuses_and_changes_nothing() {
    let f = Fixture::new();
    let created = f.start("m3");
    std::fs::write(created.root.join("a.txt"), "one\nTHEIRS\nthree\n").unwrap();
    f.write("a.txt", "one\nOURS\nthree\n");
    let ours = f.commit("ours");
    let e = merge(&created.record).unwrap_err();
    assert!(
        matches!(e, WorktreeError::Refused(_)) && e.to_string().contains("a.txt"),
        "{e}"
    );
    assert_eq!(f.head(), ours);
    assert_eq!(
        std::fs::read_to_string(f.root().join("a.txt")).unwrap(),
        "one\nOURS\nthree\n"
    );
    let wt = Repository::open(&created.record.meta.path).unwrap();
    assert_eq!(
        wt.head().unwrap().target().unwrap().to_string(),
        created.record.meta.base
    );
    assert_eq!(
        std::fs::read_to_string(created.root.join("a.txt")).unwrap(),
        "one\nTHEIRS\nthree\n"
    );
    assert_eq!(super::inspect::dirty_paths(&wt).unwrap(), ["a.txt"]);
}

#[test]
fn merge_refuses_when_it_would_overwrite_uncommitted_changes() {
    let f = Fixture::new();
    let created = f.start("m4");
    std::fs::write(created.root.join("a.txt"), "theirs\n").unwrap();
    std::fs::write(created.root.join("b.txt"), "theirs b\n").unwrap();
    let base = f.head();
    f.write("a.txt", "local edit\n");
    let e = merge(&created.record).unwrap_err();
    assert!(
        e.to_string().contains("a.txt") && !e.to_string().contains("b.txt"),
        "{e}"
    );
    assert_eq!(f.head(), base);
    assert_eq!(
        std::fs::read_to_string(f.root().join("a.txt")).unwrap(),
        "local edit\n"
    );
    assert!(!f.root().join("b.txt").exists());
    // An unrelated local edit does not stand in the way, and survives.
    f.write("a.txt", "one\ntwo\nthree\n");
    f.write("unrelated.txt", "mine\n");
    merge(&created.record).unwrap();
    assert_eq!(
        std::fs::read_to_string(f.root().join("b.txt")).unwrap(),
        "theirs b\n"
    );
    assert_eq!(
        std::fs::read_to_string(f.root().join("unrelated.txt")).unwrap(),
        "mine\n"
    );
}

#[test]
fn prune_removes_clean_and_orphaned_worktrees_but_keeps_unmerged_work() {
    let f = Fixture::new();
    let store = f.store();
    let agents = f.tmp.path().join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    // Left behind by sessions whose metas are gone: clean, with work, without a directory.
    let clean = f.start("p4");
    let dirty = f.start("p5");
    std::fs::write(dirty.root.join("work.txt"), "w\n").unwrap();
    let gone_dir = f.start("p6");
    std::fs::remove_dir_all(&gone_dir.record.meta.path).unwrap();
    let listed: Vec<String> = entries(&store, Some(&agents))
        .unwrap()
        .iter()
        .map(|e| format!("{}:{}:{}", e.record.session, e.orphaned(), e.unmerged))
        .collect();
    assert_eq!(listed, ["p4:true:false", "p5:true:true", "p6:true:false"]);
    let actions = prune(&store, Some(&agents), false).unwrap();
    let removed: Vec<&str> = actions
        .iter()
        .filter_map(|a| match a {
            PruneAction::Removed { session, .. } => Some(session.as_str()),
            PruneAction::Kept { .. } => None,
        })
        .collect();
    assert_eq!(removed, ["p4", "p6"]);
    assert!(!clean.record.meta.path.exists() && !branch_exists(&f.repo, "corral/p4"));
    assert!(!branch_exists(&f.repo, "corral/p6"));
    assert!(f.repo.find_worktree("corral-p6").is_err());
    assert!(dirty.root.join("work.txt").is_file());
    prune(&store, Some(&agents), true).unwrap();
    assert!(!dirty.record.meta.path.exists());
}

#[test]
fn a_record_is_rebuilt_from_a_worktree_directory() {
    let f = Fixture::new();
    let created = f.start("r1");
    f.store().delete_record("r1").unwrap();
    let record = f.store().load("r1").unwrap();
    assert_eq!(record.meta.branch, "corral/r1");
    assert_eq!(record.meta.repo, f.root());
    assert_eq!(record.meta.base, created.record.meta.base);
    assert!(matches!(
        f.store().load("nope"),
        Err(WorktreeError::NotFound(_))
    ));
    assert!(matches!(
        f.store().load("../x"),
        Err(WorktreeError::BadId(_))
    ));
}

#[test]
fn lock_reasons_name_the_process() {
    assert_eq!(lock_pid(&lock_reason("abc")), Some(std::process::id()));
    assert_eq!(lock_pid("something else"), None);
}

#[test]
fn overlapping_paths() {
    use super::merge::overlaps;
    assert!(overlaps("a.txt", "a.txt"));
    assert!(overlaps("dir/", "dir/x.txt"));
    assert!(overlaps("dir/x.txt", "dir"));
    assert!(!overlaps("dir2/x", "dir"));
}

#[test]
fn merge_takes_the_snapshot_and_refuses_a_worktree_changed_since() {
    let f = Fixture::new();
    let created = f.start("s9");
    std::fs::write(created.root.join("a.txt"), "good\n").unwrap();
    assert!(matches!(
        finish(&created.record, &f.store()).unwrap(),
        Ending::Kept(_)
    ));
    let taken = snapshot::recorded(&created.record).unwrap().unwrap();
    assert!(
        snapshot::changed_since(&created.record, taken)
            .unwrap()
            .is_empty()
    );
    // Changed after the session ended: the diff still shows what was snapshotted.
    std::fs::write(created.root.join("a.txt"), "evil\n").unwrap();
    std::fs::write(created.root.join("b.txt"), "new\n").unwrap();
    assert_eq!(
        snapshot::changed_since(&created.record, taken).unwrap(),
        ["a.txt", "b.txt"]
    );
    let mut diff = Vec::new();
    write_diff(&created.record, &mut diff).unwrap();
    let diff = String::from_utf8(diff).unwrap();
    assert!(diff.contains("+good") && !diff.contains("evil"), "{diff}");
    let Err(WorktreeError::Refused(why)) = merge(&created.record) else {
        panic!("merged a worktree changed since its snapshot");
    };
    assert!(
        why.contains("a.txt, b.txt") && why.contains("worktree snapshot s9"),
        "{why}"
    );
    assert_eq!(
        std::fs::read_to_string(f.root().join("a.txt")).unwrap(),
        "one\ntwo\nthree\n"
    );
    // A new snapshot accepts the new state.
    let again = snapshot::take(&created.record).unwrap();
    assert_ne!(again, taken);
    merge(&created.record).unwrap();
    assert_eq!(
        std::fs::read_to_string(f.root().join("a.txt")).unwrap(),
        "evil\n"
    );
    remove(&created.record, &f.store()).unwrap();
    assert!(f.repo.find_reference("refs/corral/snapshots/s9").is_err());
}
