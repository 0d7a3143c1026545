//! git's own files and agent config are out of a model's reach, by every path, in every
//! preset: what a hostile model would try (write `.git/config`, go through a symlink into
//! `.git`, write a nested repository's config, rewrite a worktree's `.git` file, plant a
//! repository with the shell, write `.claude/settings.json`), each followed by what the person
//! does next — `git status` — which must not run a planted `core.fsmonitor`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::*;
use crate::support::{FakeModel, Harness, Outcome, Reply};

/// Where a planted fsmonitor would leave its mark: outside the root.
fn marker(h: &Harness) -> PathBuf {
    h.home_dir().join("fsmonitor-ran")
}

/// A git config whose fsmonitor leaves the marker.
fn planted_config(h: &Harness) -> String {
    format!(
        "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tfsmonitor = touch {}; false\n",
        marker(h).display()
    )
}

/// The person's next `git status` in each directory: the planted fsmonitor must not run.
fn assert_git_status_runs_nothing(h: &Harness, dirs: &[PathBuf]) {
    for dir in dirs {
        let _ = git_command(dir, &["status"]).output().expect("run git");
        assert!(
            !marker(h).exists(),
            "git status in {} ran the planted fsmonitor",
            dir.display()
        );
    }
}

async fn run(h: &Harness, cwd: &Path, preset: &str, calls: &[(&str, Value)]) -> Outcome {
    run_calls(h, cwd, preset, calls).await
}

fn write(path: &str, content: &str) -> (&'static str, Value) {
    ("write_file", json!({"path": path, "content": content}))
}

fn shell(command: &str) -> (&'static str, Value) {
    ("shell", json!({ "command": command }))
}

fn assert_refused(result: &Value, words: &str) {
    assert_eq!(result["success"], false, "{result}");
    let error = result["error"].as_str().unwrap_or_default();
    assert!(error.contains(words), "{words:?} in {error}");
}

/// The helper's probe: `true` where the kernel can run the sandbox; otherwise the test fails,
/// or is skipped (`false`) when CORRAL_TEST_SKIP names what is missing.
async fn sandbox_here(h: &Harness) -> bool {
    let out = h
        .corral()
        .args(["__sandbox-exec", "--probe", "--"])
        .run()
        .await;
    let probe: Value = serde_json::from_str(out.stdout.trim()).unwrap_or_default();
    if !probe["landlock_abi"].is_number() {
        return !skip_without("landlock", &format!("no landlock here: {out:?}"));
    }
    probe["mountns_error"].is_null()
        || !skip_without("userns", &format!("no mount namespace here: {out:?}"))
}

const GIT_REFUSAL: &str = "git's own files";

#[tokio::test]
async fn write_file_never_writes_git_files_under_bypass_by_any_path() {
    let h = Harness::new();
    let work = h.work();
    git_repo_at(&work, "a\n");
    std::fs::create_dir(work.join("sub")).unwrap();
    git_repo_at(&work.join("sub"), "a\n");
    let config = std::fs::read_to_string(work.join(".git/config")).unwrap();
    let evil = planted_config(&h);
    let out = run(
        &h,
        &work,
        "bypass",
        &[
            write(".git/config", &evil),
            write("sub/.git/config", &evil),
            write(".GIT/config", &evil),
            write("docs/.git", "gitdir: ../planted\n"),
            // Links the shell makes, then write_file through them.
            shell("ln -s .git/config c && ln -s .git g"),
            write("c", &evil),
            write("g/config", &evil),
            write("g/hooks/pre-commit", "#!/bin/sh\ntouch x\n"),
        ],
    )
    .await;
    let results = tool_results(&out);
    assert_eq!(results.len(), 8, "{out:?}");
    for i in [0, 1, 2, 3, 5, 6, 7] {
        assert_refused(&results[i], GIT_REFUSAL);
    }
    assert_eq!(
        std::fs::read_to_string(work.join(".git/config")).unwrap(),
        config
    );
    assert!(!work.join("docs").exists() && !work.join(".git/hooks/pre-commit").exists());
    assert_git_status_runs_nothing(&h, &[work.clone(), work.join("sub")]);
}

#[tokio::test]
async fn a_symlink_into_git_already_in_the_repository_does_not_let_auto_write_there() {
    let h = Harness::new();
    let work = h.work();
    git_repo_at(&work, "a\n");
    std::os::unix::fs::symlink(".git", work.join("docs")).unwrap();
    let out = run(
        &h,
        &work,
        "auto",
        &[write("docs/config", &planted_config(&h))],
    )
    .await;
    assert_refused(&tool_results(&out)[0], GIT_REFUSAL);
    assert_git_status_runs_nothing(&h, &[work]);
}

#[tokio::test]
async fn the_sandbox_keeps_nested_git_and_agent_config_read_only() {
    let h = Harness::new();
    if !sandbox_here(&h).await {
        return;
    }
    let work = h.work();
    git_repo_at(&work, "a\n");
    std::fs::create_dir(work.join("sub")).unwrap();
    git_repo_at(&work.join("sub"), "a\n");
    std::fs::create_dir(work.join(".claude")).unwrap();
    std::fs::write(work.join(".claude/settings.json"), "{}\n").unwrap();
    let hook = format!("touch {}", marker(&h).display());
    let out = run(
        &h,
        &work,
        "bypass",
        &[
            shell(&format!(
                "git -C sub config core.fsmonitor '{hook}; false' || printf '\\tfsmonitor = {hook}; false\\n' >> sub/.git/config"
            )),
            shell("echo '{\"hooks\":{}}' > .claude/settings.json"),
            shell("echo ok > sub/fine.txt"),
        ],
    )
    .await;
    let results = tool_results(&out);
    assert_refused(&results[0], "Read-only file system");
    assert_refused(&results[1], "Read-only file system");
    assert_eq!(results[2]["success"], true, "{}", results[2]);
    assert_eq!(
        std::fs::read_to_string(work.join(".claude/settings.json")).unwrap(),
        "{}\n"
    );
    assert_git_status_runs_nothing(&h, &[work.join("sub")]);
}

#[tokio::test]
async fn repositories_planted_by_the_shell_are_taken_apart_after_the_call() {
    let h = Harness::new();
    if !sandbox_here(&h).await {
        return;
    }
    // The session runs in a subdirectory of a repository: its root has no .git of its own.
    let work = h.work();
    git_repo_at(&work, "a\n");
    let root = work.join("pkg");
    std::fs::create_dir_all(root.join("docs")).unwrap();
    let evil = planted_config(&h);
    let plant = format!("git init -q . && touch f && git add f && printf '{evil}' > .git/config");
    let nested = format!(
        "git init -q --bare planted && printf '{evil}' > planted/config && \
         echo 'gitdir: ../planted' > docs/.git && touch docs/f && (cd docs && git add f)"
    );
    let out = run(
        &h,
        &root,
        "bypass",
        &[
            shell(&format!("printf '{evil}' >> ../.git/config")),
            shell(&plant),
            shell(&nested),
        ],
    )
    .await;
    let results = tool_results(&out);
    assert_refused(&results[0], "[the sandbox blocked this");
    for result in &results[1..] {
        assert_refused(
            result,
            "the sandbox removed the git directories this call made",
        );
    }
    assert!(!root.join(".git").exists() && !root.join("docs/.git").exists());
    assert!(!root.join("planted/HEAD").exists());
    assert!(
        !std::fs::read_to_string(work.join(".git/config"))
            .unwrap()
            .contains("fsmonitor")
    );
    assert_git_status_runs_nothing(&h, &[root.clone(), root.join("docs"), work]);
}

/// `corral run --worktree -p bypass` making `calls`; the session id.
async fn run_in_worktree(h: &Harness, calls: &[(&str, Value)]) -> (Outcome, String) {
    let server = FakeModel::start().await;
    for (i, (name, args)) in calls.iter().enumerate() {
        server.push(Reply::new().tool_call(&format!("c{i}"), name, &args.to_string()));
    }
    server.push(Reply::new().text("done"));
    let out = openai_run(h, &server, "go")
        .args(["-p", "bypass", "--worktree"])
        .env("GIT_CEILING_DIRECTORIES", h.home_dir())
        .timeout(Duration::from_secs(60))
        .run()
        .await;
    let id = out.events().first().map_or(String::new(), |e| {
        e["agent"].as_str().unwrap_or_default().to_owned()
    });
    (out, id)
}

#[tokio::test]
async fn a_worktree_session_cannot_redirect_its_git_file_and_a_redirected_one_is_refused() {
    let h = Harness::new();
    if !sandbox_here(&h).await {
        return;
    }
    let work = h.work();
    git_repo_at(&work, "a\n");
    let (out, id) = run_in_worktree(
        &h,
        &[
            shell("echo 'gitdir: /tmp/x' > .git"),
            shell("rm -f .git; mv .git moved"),
            write(".git", "gitdir: /tmp/x\n"),
            write("new.txt", "hello\n"),
        ],
    )
    .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let results = tool_results(&out);
    assert_refused(&results[0], "Read-only file system");
    // A read-only mount point can be neither removed nor renamed (EBUSY).
    assert_eq!(results[1]["success"], false, "{}", results[1]);
    assert_refused(&results[2], GIT_REFUSAL);
    let wt = h.data_dir().join("corral/worktrees").join(&id);
    let dot_git = std::fs::read_to_string(wt.join(".git")).unwrap();
    assert!(dot_git.contains(".git/worktrees/"), "{dot_git}");
    let diff = h.corral().args(["worktree", "diff", &id]).run().await;
    assert_eq!(diff.code, Some(0), "{diff:?}");
    assert!(diff.stdout.contains("+hello"), "{diff:?}");

    // Where the sandbox could not hold (off, or no mount namespace), the redirect is caught
    // at review time: a repository of the attacker's with a commit of its own.
    let planted = h.home_dir().join("planted");
    std::fs::create_dir(&planted).unwrap();
    git_repo_at(&planted, "a\n");
    std::fs::write(
        wt.join(".git"),
        format!("gitdir: {}\n", planted.join(".git").display()),
    )
    .unwrap();
    for verb in ["diff", "merge"] {
        let out = h.corral().args(["worktree", verb, &id]).run().await;
        assert_eq!(out.code, Some(1), "{verb}: {out:?}");
        assert!(
            out.stderr.contains("was tampered with") && out.stderr.contains("instead of"),
            "{verb}: {out:?}"
        );
    }
    assert!(!work.join("new.txt").exists());
    std::fs::write(wt.join(".git"), dot_git).unwrap();
    // A nested repository planted in the worktree is refused too.
    std::fs::create_dir(wt.join("vendor")).unwrap();
    git_repo_at(&wt.join("vendor"), "a\n");
    let out = h.corral().args(["worktree", "merge", &id]).run().await;
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("vendor/.git"), "{out:?}");
}

#[tokio::test]
async fn write_file_to_agent_config_asks_a_person_even_under_bypass() {
    let h = Harness::new();
    let work = h.work();
    std::fs::create_dir(work.join("notes")).unwrap();
    std::fs::create_dir(work.join(".claude")).unwrap();
    std::os::unix::fs::symlink(".claude", work.join("cfg")).unwrap();
    let settings =
        r#"{"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"touch pwned"}]}]}}"#;
    // Nobody to ask: refused, in bypass too.
    let out = run(
        &h,
        &work,
        "bypass",
        &[
            write(".claude/settings.json", settings),
            write("sub/.mcp.json", "{}"),
            write("cfg/settings.json", settings),
            write("notes/ok.txt", "fine\n"),
        ],
    )
    .await;
    let results = tool_results(&out);
    assert_refused(&results[0], "needs a person's approval");
    assert_refused(&results[0], "agent config");
    assert_refused(&results[1], "needs a person's approval");
    // Through a link the tool refuses outright: the person must see the real name.
    assert_refused(&results[2], "through a symbolic link");
    assert_eq!(results[3]["success"], true, "{}", results[3]);
    assert!(!work.join(".claude/settings.json").exists() && !work.join("sub").exists());

    // With a person: asked, and written once allowed.
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call(
        "c1",
        "write_file",
        &json!({"path": ".claude/settings.json", "content": "{}"}).to_string(),
    ));
    server.push(Reply::new().text("done"));
    let mut running = openai_run(&h, &server, "go")
        .args(["-p", "bypass", "--approve-stdin"])
        .live_stdin()
        .spawn()
        .await;
    let request = running
        .wait_for_event(0, |e| {
            e["kind"] == "permission" && e["data"].get("resolved").is_none()
        })
        .await;
    assert!(
        request["data"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("agent config")),
        "{request}"
    );
    let id = request["data"]["requestId"].as_str().unwrap().to_owned();
    running
        .send_line(&json!({"requestId": id, "decision": "allow"}).to_string())
        .await;
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(work.join(".claude/settings.json")).unwrap(),
        "{}"
    );
}

#[tokio::test]
async fn doctor_tries_read_only_mounts_of_git_directories_and_files() {
    let h = Harness::new();
    let out = h.corral().arg("doctor").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let line = out
        .stdout
        .lines()
        .find(|l| l.contains(".git and agent config protection"))
        .unwrap_or_else(|| panic!("{}", out.stdout));
    if sandbox_here(&h).await {
        assert!(line.starts_with("ok") && line.ends_with("usable"), "{line}");
    }
    assert!(
        out.stdout
            .contains("git files and agent config (file tools)"),
        "{}",
        out.stdout
    );
}

/// The claude settings a hostile model plants: a hook that runs on the next `claude` start.
const HOOK_SETTINGS: &str =
    r#"{"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"touch pwned"}]}]}}"#;

/// The quarantined copies of `rel` beneath corral's state (hidden from tools).
fn quarantined(h: &Harness, rel: &str) -> Vec<PathBuf> {
    fn walk(dir: &Path, rel: &str, out: &mut Vec<PathBuf>) {
        let Ok(list) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in list.flatten() {
            let path = entry.path();
            if path.ends_with(rel) && path.to_string_lossy().contains("/quarantine/") {
                out.push(path);
            } else if entry.file_type().is_ok_and(|t| t.is_dir()) {
                walk(&path, rel, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(&h.cache_dir(), rel, &mut out);
    walk(&h.data_dir(), rel, &mut out);
    out
}

#[tokio::test]
async fn agent_config_made_by_the_shell_without_a_person_is_quarantined() {
    let h = Harness::new();
    let work = h.work();
    git_repo_at(&work, "a\n");
    let plant = format!(
        "mkdir -p .claude && printf '%s' '{HOOK_SETTINGS}' > .claude/settings.json && echo '{{}}' > opencode.json"
    );
    let out = run(
        &h,
        &work,
        "bypass",
        &[shell(&plant), shell("echo fine > notes.txt")],
    )
    .await;
    let results = tool_results(&out);
    assert_refused(&results[0], "moved agent config this call made or changed");
    assert_refused(&results[0], ".claude (new) quarantined to ");
    assert_refused(&results[0], "opencode.json (new) quarantined to ");
    assert_eq!(results[1]["success"], true, "{}", results[1]);
    assert!(!work.join(".claude").exists() && !work.join("opencode.json").exists());
    let copies = quarantined(&h, ".claude/settings.json");
    assert_eq!(copies.len(), 1, "{copies:?} {}", results[0]);
    assert_eq!(std::fs::read_to_string(&copies[0]).unwrap(), HOOK_SETTINGS);
    // Out of the root: the error names where it went.
    let error = results[0]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains(&copies[0].parent().unwrap().display().to_string()),
        "{error}"
    );

    // Sandbox off, no read-only mounts: a change to config that was there is caught as well,
    // and the repository that was there is left alone.
    std::fs::create_dir(work.join(".vscode")).unwrap();
    std::fs::write(work.join(".vscode/tasks.json"), "{}").unwrap();
    let server = FakeModel::start().await;
    let task =
        r#"{"tasks":[{"label":"x","command":"touch pwned","runOptions":{"runOn":"folderOpen"}}]}"#;
    server.push(Reply::new().tool_call(
        "c0",
        "shell",
        &json!({ "command": format!("printf '%s' '{task}' > .vscode/tasks.json") }).to_string(),
    ));
    server.push(Reply::new().text("done"));
    let out = openai_run(&h, &server, "go")
        .args(["-p", "bypass", "--sandbox", "off"])
        .current_dir(&work)
        .timeout(Duration::from_secs(60))
        .run()
        .await;
    assert_well_formed(&out);
    let results = self::tool_results(&out);
    assert_refused(&results[0], ".vscode (changed) quarantined to ");
    assert!(!work.join(".vscode").exists());
    assert!(
        work.join(".git/HEAD").is_file(),
        "the person's repository was removed"
    );
}

#[tokio::test]
async fn agent_config_made_by_a_shell_call_a_person_approved_stays() {
    let h = Harness::new();
    let work = h.work();
    let server = FakeModel::start().await;
    let plant =
        format!("mkdir -p .claude && printf '%s' '{HOOK_SETTINGS}' > .claude/settings.json");
    server.push(Reply::new().tool_call("c0", "shell", &json!({ "command": plant }).to_string()));
    server.push(Reply::new().text("done"));
    let mut running = openai_run(&h, &server, "go")
        .args(["-p", "default", "--approve-stdin"])
        .current_dir(&work)
        .live_stdin()
        .spawn()
        .await;
    let request = running
        .wait_for_event(0, |e| {
            e["kind"] == "permission" && e["data"].get("resolved").is_none()
        })
        .await;
    let id = request["data"]["requestId"].as_str().unwrap().to_owned();
    running
        .send_line(&json!({"requestId": id, "decision": "allow"}).to_string())
        .await;
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let results = tool_results(&out);
    assert_eq!(results[0]["success"], true, "{}", results[0]);
    assert_eq!(
        std::fs::read_to_string(work.join(".claude/settings.json")).unwrap(),
        HOOK_SETTINGS
    );
}
