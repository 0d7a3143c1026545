//! `corral run --worktree` and `corral worktree …` against real repositories: the session
//! works in a linked worktree, the original tree is never written, and the changes are
//! reviewed, merged and removed afterwards.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use crate::common::*;
use crate::support::{FakeModel, Harness, Outcome, Reply};

fn write_call(path: &str, content: &str) -> Reply {
    let args = json!({"path": path, "content": content}).to_string();
    Reply::new().tool_call("c1", "write_file", &args)
}

/// `corral run --worktree -p bypass` with a model that makes `calls` and then says "done".
async fn run_in_worktree(h: &Harness, calls: Vec<Reply>) -> (Outcome, String) {
    let server = FakeModel::start().await;
    for call in calls {
        server.push(call);
    }
    server.push(Reply::new().text("done"));
    let out = openai_run(h, &server, "do it")
        .args(["-p", "bypass", "--worktree"])
        .env("GIT_CEILING_DIRECTORIES", h.home_dir())
        .timeout(Duration::from_secs(30))
        .run()
        .await;
    let id = out.events().first().map_or(String::new(), |e| {
        e["agent"].as_str().unwrap_or_default().to_owned()
    });
    (out, id)
}

async fn corral_worktree(h: &Harness, args: &[&str]) -> Outcome {
    h.corral().arg("worktree").args(args).run().await
}

fn worktree_dir(h: &Harness, id: &str) -> PathBuf {
    h.data_dir().join("corral/worktrees").join(id)
}

#[tokio::test]
async fn a_session_with_changes_is_kept_reviewed_merged_and_removed() {
    let h = Harness::new();
    let dir = git_repo(&h, "one\ntwo\nthree\n");
    let (out, id) = run_in_worktree(&h, vec![write_call("new.txt", "hello\n")]).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let wt = worktree_dir(&h, &id);
    let first = out.stderr.lines().next().unwrap_or_default();
    assert!(
        first.contains(&wt.display().to_string()) && first.contains(&format!("corral/{id}")),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains(&format!("corral worktree diff {id}")),
        "{}",
        out.stderr
    );
    // The session wrote in the worktree only.
    assert_eq!(
        std::fs::read_to_string(wt.join("new.txt")).unwrap(),
        "hello\n"
    );
    assert!(!dir.join("new.txt").exists());
    assert_eq!(git(&dir, &["status", "--porcelain"]), "");

    let list = corral_worktree(&h, &["list"]).await;
    assert_eq!(list.code, Some(0), "{list:?}");
    let row = list
        .stdout
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("{list:?}"));
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cols[1], format!("corral/{id}"), "{row}");
    assert_eq!(cols[3], "1", "one changed file: {row}");

    let diff = corral_worktree(&h, &["diff", &id]).await;
    assert_eq!(diff.code, Some(0), "{diff:?}");
    assert!(
        diff.stdout.contains("+++ b/new.txt") && diff.stdout.contains("+hello"),
        "{diff:?}"
    );

    let merge = corral_worktree(&h, &["merge", &id]).await;
    assert_eq!(merge.code, Some(0), "{merge:?}");
    assert_eq!(
        std::fs::read_to_string(dir.join("new.txt")).unwrap(),
        "hello\n"
    );
    assert_eq!(git(&dir, &["status", "--porcelain"]), "");
    assert_eq!(
        git(&dir, &["log", "-1", "--format=%s"]),
        format!("corral session {id}")
    );
    assert_eq!(git(&dir, &["rev-parse", "--abbrev-ref", "HEAD"]), "main");

    let remove = corral_worktree(&h, &["remove", &id]).await;
    assert_eq!(remove.code, Some(0), "{remove:?}");
    assert!(!wt.exists());
    assert_eq!(
        git(&dir, &["branch", "--list", &format!("corral/{id}")]),
        ""
    );
    assert!(!git(&dir, &["worktree", "list"]).contains(&id));
}

#[tokio::test]
async fn a_session_without_changes_leaves_no_worktree_or_branch() {
    let h = Harness::new();
    let dir = git_repo(&h, "one\ntwo\nthree\n");
    let (out, id) = run_in_worktree(&h, vec![]).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stderr.contains("no changes"), "{}", out.stderr);
    assert!(!worktree_dir(&h, &id).exists());
    assert_eq!(git(&dir, &["branch", "--list", "corral/*"]), "");
    assert_eq!(git(&dir, &["worktree", "list"]).lines().count(), 1);
    // The session's meta records where the worktree was.
    let meta = h.cache_dir().join(format!("corral/agents/{id}.meta.json"));
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(meta).unwrap()).unwrap();
    assert_eq!(meta["worktree"]["branch"], format!("corral/{id}"));
    assert_eq!(meta["worktree"]["base"], git(&dir, &["rev-parse", "HEAD"]));
    assert_eq!(meta["cwd"], worktree_dir(&h, &id).display().to_string());
}

#[tokio::test]
async fn a_conflicting_merge_is_refused_and_both_sides_stay_as_they_were() {
    let h = Harness::new();
    let dir = git_repo(&h, "one\ntwo\nthree\n");
    let (out, id) = run_in_worktree(&h, vec![write_call("a.txt", "one\nTHEIRS\nthree\n")]).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    // The original branch edits the same line after the session started.
    std::fs::write(dir.join("a.txt"), "one\nOURS\nthree\n").unwrap();
    git(&dir, &["commit", "-q", "-am", "ours"]);
    let ours = git(&dir, &["rev-parse", "HEAD"]);
    let wt = worktree_dir(&h, &id);
    let theirs = git(&wt, &["rev-parse", "HEAD"]);

    let merge = corral_worktree(&h, &["merge", &id]).await;
    assert_eq!(merge.code, Some(1), "{merge:?}");
    assert!(
        merge.stderr.contains("conflicts") && merge.stderr.contains("a.txt"),
        "{merge:?}"
    );
    assert_eq!(git(&dir, &["rev-parse", "HEAD"]), ours);
    assert_eq!(git(&dir, &["status", "--porcelain"]), "");
    assert_eq!(
        std::fs::read_to_string(dir.join("a.txt")).unwrap(),
        "one\nOURS\nthree\n"
    );
    assert_eq!(git(&wt, &["rev-parse", "HEAD"]), theirs);
    assert_eq!(git(&wt, &["status", "--porcelain"]), "M a.txt");
    assert_eq!(
        std::fs::read_to_string(wt.join("a.txt")).unwrap(),
        "one\nTHEIRS\nthree\n"
    );
    // Unmerged work is not removed without --force.
    let remove = corral_worktree(&h, &["remove", &id]).await;
    assert_eq!(remove.code, Some(1), "{remove:?}");
    assert!(wt.exists());
    let remove = corral_worktree(&h, &["remove", "--force", &id]).await;
    assert_eq!(remove.code, Some(0), "{remove:?}");
    assert!(!wt.exists());
}

#[tokio::test]
async fn outside_a_repository_worktree_mode_is_a_usage_error() {
    let h = Harness::new();
    let (out, _) = run_in_worktree(&h, vec![]).await;
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(
        out.stderr.contains("not inside a git repository"),
        "{}",
        out.stderr
    );
    assert!(out.events().is_empty(), "nothing started: {out:?}");
}

#[tokio::test]
async fn a_repository_without_commits_is_a_usage_error() {
    let h = Harness::new();
    git(&h.work(), &["init", "-q", "-b", "main"]);
    let (out, _) = run_in_worktree(&h, vec![]).await;
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("no commits yet"), "{}", out.stderr);
}

#[tokio::test]
async fn a_detached_head_is_a_fine_base() {
    let h = Harness::new();
    let dir = git_repo(&h, "one\ntwo\nthree\n");
    git(&dir, &["checkout", "-q", "--detach"]);
    let head = git(&dir, &["rev-parse", "HEAD"]);
    let (out, id) = run_in_worktree(&h, vec![write_call("x.txt", "x\n")]).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stderr.contains("detached"), "{}", out.stderr);
    let wt = worktree_dir(&h, &id);
    assert_eq!(git(&wt, &["rev-parse", "HEAD^{commit}"]), head);
    assert_eq!(
        git(&wt, &["rev-parse", "--abbrev-ref", "HEAD"]),
        format!("corral/{id}")
    );
}

#[tokio::test]
async fn uncommitted_changes_stay_behind_with_a_warning() {
    let h = Harness::new();
    let dir = git_repo(&h, "one\ntwo\nthree\n");
    std::fs::write(dir.join("a.txt"), "local edit\n").unwrap();
    let short = git(&dir, &["rev-parse", "--short=7", "HEAD"]);
    let (out, id) = run_in_worktree(&h, vec![write_call("x.txt", "x\n")]).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stderr.contains(&format!(
            "your uncommitted changes are not in the worktree; it starts from HEAD {short}"
        )),
        "{}",
        out.stderr
    );
    let wt = worktree_dir(&h, &id);
    assert_eq!(
        std::fs::read_to_string(wt.join("a.txt")).unwrap(),
        "one\ntwo\nthree\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("a.txt")).unwrap(),
        "local edit\n"
    );
}

#[tokio::test]
async fn a_subdirectory_session_starts_in_the_same_subdirectory() {
    let h = Harness::new();
    let dir = git_repo(&h, "one\ntwo\nthree\n");
    std::fs::create_dir_all(dir.join("pkg")).unwrap();
    std::fs::write(dir.join("pkg/lib.txt"), "lib\n").unwrap();
    git(&dir, &["add", "."]);
    git(&dir, &["commit", "-q", "-m", "pkg"]);
    let server = FakeModel::start().await;
    server.push(write_call("made.txt", "m\n"));
    server.push(Reply::new().text("done"));
    let out = openai_run(&h, &server, "do it")
        .args(["-p", "bypass", "--worktree"])
        .current_dir(dir.join("pkg"))
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let id = out.events()[0]["agent"].as_str().unwrap().to_owned();
    assert!(worktree_dir(&h, &id).join("pkg/made.txt").is_file());
    assert!(!dir.join("pkg/made.txt").exists());
}

#[tokio::test]
async fn prune_removes_a_clean_orphan() {
    let h = Harness::new();
    let dir = git_repo(&h, "one\ntwo\nthree\n");
    let (out, id) = run_in_worktree(&h, vec![write_call("x.txt", "x\n")]).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let wt = worktree_dir(&h, &id);
    // The session's work is undone by hand and its meta is gone: a clean orphan.
    std::fs::remove_file(wt.join("x.txt")).unwrap();
    std::fs::remove_file(h.cache_dir().join(format!("corral/agents/{id}.meta.json"))).unwrap();
    let list = corral_worktree(&h, &["list"]).await;
    assert!(list.stdout.contains("orphaned"), "{list:?}");
    let prune = corral_worktree(&h, &["prune"]).await;
    assert_eq!(prune.code, Some(0), "{prune:?}");
    assert!(prune.stderr.contains(&format!("removed {id}")), "{prune:?}");
    assert!(!wt.exists());
    assert_eq!(git(&dir, &["branch", "--list", "corral/*"]), "");
    assert_eq!(git(&dir, &["worktree", "list"]).lines().count(), 1);
}

#[tokio::test]
async fn unknown_ids_are_usage_errors() {
    let h = Harness::new();
    let out = corral_worktree(&h, &["diff", "deadbeef"]).await;
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(
        out.stderr.contains("no worktree for session deadbeef"),
        "{out:?}"
    );
    let out = corral_worktree(&h, &["remove", "../etc"]).await;
    assert_eq!(out.code, Some(2), "{out:?}");
}

#[tokio::test]
async fn submodules_are_named_as_not_initialized_and_are_no_change() {
    let h = Harness::new();
    let lib = h.home_dir().join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    git(&lib, &["init", "-q", "-b", "main"]);
    std::fs::write(lib.join("lib.txt"), "lib\n").unwrap();
    git(&lib, &["add", "."]);
    git(&lib, &["commit", "-q", "-m", "lib"]);
    let dir = git_repo(&h, "one\ntwo\nthree\n");
    let url = lib.display().to_string();
    git(
        &dir,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            &url,
            "vendor/lib",
        ],
    );
    git(&dir, &["commit", "-q", "-m", "submodule"]);
    let (out, id) = run_in_worktree(&h, vec![]).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stderr.contains("submodules are not initialized") && out.stderr.contains("vendor/lib"),
        "{}",
        out.stderr
    );
    // The uninitialized submodule's empty directory is not a change the session made.
    assert!(out.stderr.contains("no changes"), "{}", out.stderr);
    assert!(!worktree_dir(&h, &id).exists());
}
