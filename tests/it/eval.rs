//! `corral eval`: the tasks in evals/ are sound (each check fails as the task is given and
//! passes with its reference solution), and a scripted model replaying a solution passes
//! while one replaying a wrong answer fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::support::procs::{members, tracked};
use crate::support::{FakeModel, Harness, Reply};

fn evals() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("evals")
}

fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn check_passes(task: &Path, work: &Path) -> bool {
    let spec: toml::Value =
        toml::from_str(&std::fs::read_to_string(task.join("task.toml")).unwrap()).unwrap();
    Command::new("sh")
        .arg("-c")
        .arg(spec["check"].as_str().unwrap())
        .current_dir(work)
        .env("CORRAL_EVAL_TASK", task)
        .output()
        .unwrap()
        .status
        .success()
}

#[test]
fn every_task_fails_as_given_and_passes_with_its_solution() {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(evals()).unwrap() {
        let task = entry.unwrap().path();
        if !task.join("task.toml").is_file() {
            continue;
        }
        let name = task.file_name().unwrap().to_string_lossy().into_owned();
        let work = tempfile::tempdir().unwrap();
        copy_tree(&task.join("repo"), work.path());
        let git = |args: &[&str]| {
            let ok = Command::new("git")
                .args(["-c", "user.name=t", "-c", "user.email=t@t.invalid"])
                .args(args)
                .current_dir(work.path())
                .output()
                .unwrap()
                .status
                .success();
            assert!(ok, "git {args:?}");
        };
        git(&["init", "-q"]);
        git(&["add", "-A"]);
        git(&["commit", "-qm", "task"]);
        assert!(
            !check_passes(&task, work.path()),
            "{name}: the check passes before any work"
        );
        assert!(
            task.join("solution").is_dir(),
            "{name} has no reference solution"
        );
        copy_tree(&task.join("solution"), work.path());
        assert!(
            check_passes(&task, work.path()),
            "{name}: the check fails with the reference solution"
        );
        names.push(name);
    }
    assert!(names.len() >= 12, "at least 12 tasks: {names:?}");
}

/// One write_file call with `content`, then a closing line.
fn replay(server: &FakeModel, id: &str, path: &str, content: &str) {
    let args = json!({"path": path, "content": content}).to_string();
    server.push(
        Reply::new()
            .tool_call(id, "write_file", &args)
            .usage(300, 40),
    );
    server.push(Reply::new().text("Done.").usage(360, 5));
}

#[tokio::test]
async fn a_replayed_solution_passes_and_a_wrong_answer_fails() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    let solution =
        std::fs::read_to_string(evals().join("fix-failing-test/solution/calc.py")).unwrap();
    replay(&server, "c1", "calc.py", &solution);
    // Wrong: the bound is still exclusive.
    replay(
        &server,
        "c2",
        "sums.py",
        "def total(n):\n    return sum(range(n))\n",
    );
    let json_path = h.work().join("results.json");
    let out = h
        .corral()
        .args(["eval", "-m", "llamacpp:fake-model", "--base-url"])
        .arg(server.openai_base())
        .args([
            "--task",
            "fix-failing-test",
            "--task",
            "fix-off-by-one",
            // Relative: the checks must still find their files from inside each copy.
            "--tasks",
            "evals",
        ])
        .arg("--out")
        .arg(json_path.to_string_lossy())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stdout
            .contains("| fix-failing-test | yes | 2 | 1 | 0 | 0 | 705 |"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("| fix-off-by-one | no | 2 | 1 |"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("1/2 passed"), "{}", out.stdout);
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert_eq!(report["passed"], 1);
    assert_eq!(report["total"], 2);
    let results = report["results"].as_array().unwrap();
    assert_eq!(results[0]["task"], "fix-failing-test");
    assert_eq!(results[0]["passed"], true);
    assert_eq!(results[0]["stopReason"], "end_turn");
    assert_eq!(results[1]["passed"], false);
    assert!(
        results[1]["checkOutput"]
            .as_str()
            .unwrap()
            .contains("AssertionError"),
        "{}",
        results[1]
    );
    // Each task ran in a throwaway repository of its own, none left behind, and the model
    // was asked to do each task's prompt.
    assert!(results.iter().all(|r| r.get("kept").is_none()));
    let prompts: Vec<String> = server
        .chat_requests()
        .iter()
        .map(|r| r["messages"][1]["content"].to_string())
        .collect();
    assert!(prompts[0].contains("test_calc.py"), "{prompts:?}");
    assert!(prompts[2].contains("total(n)"), "{prompts:?}");
}

#[tokio::test]
async fn a_missing_tasks_dir_and_a_bad_model_are_usage_errors() {
    let h = Harness::new();
    let out = h
        .corral()
        .args(["eval", "-m", "llamacpp:x", "--tasks", "/nonexistent/evals"])
        .run()
        .await;
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("/nonexistent/evals"), "{}", out.stderr);
    // A bare name is a model of the default provider; this is no spec at all.
    let out = h.corral().args(["eval", "-m", "a:b:c"]).run().await;
    assert_eq!(out.code, Some(2), "{out:?}");
}

/// The check imports what the agent wrote, so the agent's code runs during the check: it must
/// run confined, or it could rewrite the task's hidden check for every later run, or write
/// anywhere the person can.
#[tokio::test]
async fn code_the_agent_wrote_runs_confined_when_the_check_runs_it() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    let tasks = h.work().join("tasks");
    let task = tasks.join("fix-failing-test");
    std::fs::create_dir_all(&task).unwrap();
    copy_tree(&evals().join("fix-failing-test"), &task);
    let outside = h.home_dir().join("written-by-the-check");
    let planted = r#"import os
for path in (os.path.join(os.environ['CORRAL_EVAL_TASK'], 'check.py'), 'OUTSIDE'):
    try:
        open(path, 'w').write('pwned')
    except OSError:
        pass


def add(a, b):
    return a + b


def subtract(a, b):
    return a - b
"#
    .replace("OUTSIDE", &outside.to_string_lossy());
    replay(&server, "c1", "calc.py", &planted);
    let check_before = std::fs::read_to_string(task.join("check.py")).unwrap();
    let out = h
        .corral()
        .args(["eval", "-m", "llamacpp:fake-model", "--base-url"])
        .arg(server.openai_base())
        .arg("--tasks")
        .arg(tasks.to_string_lossy())
        .arg("--out")
        .arg(h.work().join("r.json").to_string_lossy())
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stdout.contains("| fix-failing-test | yes |"),
        "{}",
        out.stdout
    );
    assert_eq!(
        std::fs::read_to_string(task.join("check.py")).unwrap(),
        check_before,
        "the agent's code rewrote the hidden check"
    );
    assert!(!outside.exists(), "the agent's code wrote outside its copy");
}

/// SIGTERM mid-task: the running `corral run` is stopped with everything it started, what ran
/// so far is written, and the exit code names the signal.
#[tokio::test]
async fn sigterm_stops_the_running_task_and_leaves_nothing_running() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(
        Reply::new()
            .text("thinking")
            .stall(std::time::Duration::from_secs(120)),
    );
    let json_path = h.work().join("r.json");
    let running = h
        .corral()
        .args(["eval", "-m", "llamacpp:fake-model", "--base-url"])
        .arg(server.openai_base())
        .args(["--task", "fix-failing-test", "--tasks"])
        .arg(evals().to_string_lossy())
        .arg("--out")
        .arg(json_path.to_string_lossy())
        .spawn()
        .await;
    let pids = h.cache_dir().join("corral/agents/pids.json");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let run = loop {
        let found = tracked(&pids)
            .into_iter()
            .find(|e| e["kind"] == "eval-run" && e["owner_pid"] == running.pid());
        if let Some(entry) = found
            && !server.chat_requests().is_empty()
        {
            break entry;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the task never started"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let pgid = run["pgid"].as_u64().unwrap() as u32;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(running.pid() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let out = running.wait().await;
    assert_eq!(out.code, Some(143), "{out:?}");
    assert_eq!(
        members(pgid),
        Vec::<u32>::new(),
        "the task's corral run outlived the eval"
    );
    assert!(tracked(&pids).is_empty(), "{:?}", tracked(&pids));
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert_eq!(report["results"][0]["stopReason"], "stopped", "{report}");
    assert_eq!(report["results"][0]["passed"], false);
}
