//! Project instructions (issue 17): `AGENTS.md` from the config directory and from the
//! repository's top down to the session root, nearest last, in the native loop's system
//! prompt; the `instructions` event naming them; `--no-instructions` and the `instructions`
//! key; and what an untrusted repository tries: links out of its tree, a FIFO, an ancestor
//! outside it, escape sequences in a directory's name.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::common::*;
use crate::support::{FakeModel, Harness, Outcome, Reply};

/// The system prompt of the latest request the model got.
fn last_system_prompt(server: &FakeModel) -> String {
    let requests = server.chat_requests();
    let last = requests.last().expect("a request");
    last["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn canonical(path: &Path) -> String {
    path.canonicalize().unwrap().display().to_string()
}

fn announced(out: &Outcome) -> Vec<Value> {
    out.of_kind("instructions")
}

async fn run_in(h: &Harness, server: &FakeModel, dir: &Path, flags: &[&str]) -> Outcome {
    server.push(Reply::new().text("ok"));
    let out = openai_run(h, server, "hi")
        .arg("-C")
        .arg(dir.to_str().unwrap())
        .args(flags)
        .timeout(Duration::from_secs(30))
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    out
}

#[tokio::test]
async fn the_config_dirs_and_the_repositorys_files_reach_the_prompt_nearest_last() {
    let h = Harness::new();
    let global = write(&h.config_dir().join("corral"), "AGENTS.md", "GLOBAL-RULE\n");
    let outer = h.work().join("outer");
    write(&outer, "AGENTS.md", "OUTER-NOT-THE-REPOSITORY\n");
    let repo = outer.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git_repo_at(&repo, "a\n");
    let top = write(&repo, "AGENTS.md", "REPO-RULE\n");
    let sub = repo.join("sub");
    let near = write(&sub, "AGENTS.md", "SUB-RULE\n");
    let server = FakeModel::start().await;

    let out = run_in(&h, &server, &sub, &[]).await;
    let system = last_system_prompt(&server);
    let at = |word: &str| {
        system
            .find(word)
            .unwrap_or_else(|| panic!("{word}: {system}"))
    };
    assert!(at("GLOBAL-RULE") < at("REPO-RULE") && at("REPO-RULE") < at("SUB-RULE"));
    assert!(!system.contains("OUTER"), "{system}");
    let events = announced(&out);
    assert_eq!(events.len(), 1, "{out:?}");
    assert_eq!(events[0]["turn"], 0);
    let files = events[0]["data"]["files"].as_array().unwrap();
    let paths: Vec<&str> = files.iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert_eq!(
        paths,
        [canonical(&global), canonical(&top), canonical(&near)]
    );
    assert_eq!(files[2]["bytes"], "SUB-RULE\n".len());
    assert_eq!(files[2]["truncated"], false);
    let log = std::fs::read_to_string(&h.event_logs()[0]).unwrap();
    assert!(log.contains(r#""kind":"instructions""#), "{log}");

    // Off by flag, and by an empty list in the config.
    let off = run_in(&h, &server, &sub, &["--no-instructions"]).await;
    assert!(announced(&off).is_empty(), "{off:?}");
    assert!(!last_system_prompt(&server).contains("-RULE"));
    h.write_config("instructions = []\n");
    let off = run_in(&h, &server, &sub, &[]).await;
    assert!(announced(&off).is_empty(), "{off:?}");
    assert!(!last_system_prompt(&server).contains("-RULE"));

    // Other names, looked for in order in each directory.
    write(&sub, "CLAUDE.md", "CLAUDE-RULE\n");
    h.write_config("instructions = [\"CLAUDE.md\"]\n");
    run_in(&h, &server, &sub, &[]).await;
    let system = last_system_prompt(&server);
    assert!(
        system.contains("CLAUDE-RULE") && !system.contains("SUB-RULE"),
        "{system}"
    );
}

/// The repository is untrusted: its AGENTS.md may be a link to a secret outside it, or a
/// FIFO nobody writes to. Neither is read, and the session starts as usual.
#[tokio::test]
async fn links_out_of_the_tree_and_fifos_are_not_read_and_do_not_hang_the_start() {
    let h = Harness::new();
    let secret = write(
        &h.config_dir().join("corral"),
        "jwt-secret",
        "JWT-SECRET-8f3a\n",
    );
    let server = FakeModel::start().await;

    // In the session root, and in the repository above it.
    let linked = h.work().join("linked");
    std::fs::create_dir_all(&linked).unwrap();
    std::os::unix::fs::symlink(&secret, linked.join("AGENTS.md")).unwrap();
    let repo = h.work().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git_repo_at(&repo, "a\n");
    std::os::unix::fs::symlink(&secret, repo.join("AGENTS.md")).unwrap();
    let sub = repo.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    std::os::unix::fs::symlink("../../linked/AGENTS.md", sub.join("AGENTS.md")).unwrap();
    for root in [&linked, &sub] {
        let out = run_in(&h, &server, root, &[]).await;
        assert!(announced(&out).is_empty(), "{out:?}");
        let system = last_system_prompt(&server);
        assert!(!system.contains("JWT-SECRET"), "{system}");
    }

    let fifo = h.work().join("fifo");
    std::fs::create_dir_all(&fifo).unwrap();
    nix::unistd::mkfifo(&fifo.join("AGENTS.md"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let out = run_in(&h, &server, &fifo, &[]).await;
    assert!(announced(&out).is_empty(), "{out:?}");
}

/// A directory name is the repository's text too: on the terminal it is shown escaped.
#[tokio::test]
async fn the_terminal_line_names_the_files_with_escapes_shown_not_obeyed() {
    let h = Harness::new();
    let dir = h.work().join("evil\x1b]0;owned\x07\x1b[2Jdir");
    write(&dir, "AGENTS.md", "RULE\n");
    let server = FakeModel::start().await;
    server.push(Reply::new().text("ok"));
    let out = h
        .corral()
        .args([
            "run",
            "-m",
            "llamacpp:m",
            "--base-url",
            &server.openai_base(),
        ])
        .arg("-C")
        .arg(dir.to_str().unwrap())
        .arg("hi")
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let line = out
        .stderr
        .lines()
        .find(|l| l.starts_with("project instructions: "))
        .unwrap_or_else(|| panic!("{}", out.stderr));
    assert!(
        line.contains(r"evil\x1b]0;owned\x07\x1b[2Jdir/AGENTS.md (5 bytes)"),
        "{line}"
    );
    assert!(!out.stderr.contains('\x1b') && !out.stderr.contains('\x07'));
}

/// A `--worktree` session reads the worktree's files (what HEAD has), not the checkout's.
#[tokio::test]
async fn a_worktree_session_reads_the_worktrees_files() {
    let h = Harness::new();
    let repo = git_repo(&h, "a\n");
    write(&repo, "AGENTS.md", "COMMITTED-RULE\n");
    git(&repo, &["add", "AGENTS.md"]);
    git(&repo, &["commit", "-q", "-m", "instructions"]);
    write(&repo, "AGENTS.md", "UNCOMMITTED-RULE\n");
    let server = FakeModel::start().await;
    let out = run_in(&h, &server, &repo, &["--worktree"]).await;
    let system = last_system_prompt(&server);
    assert!(system.contains("COMMITTED-RULE"), "{system}");
    assert!(!system.contains("UNCOMMITTED-RULE"), "{system}");
    let path = announced(&out)[0]["data"]["files"][0]["path"]
        .as_str()
        .unwrap()
        .to_owned();
    let worktrees = canonical(&h.data_dir()) + "/corral/worktrees/";
    assert!(path.starts_with(&worktrees), "{path}");
}
