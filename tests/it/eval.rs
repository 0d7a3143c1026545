//! `corral eval`: the tasks in evals/ are sound (each check fails as the task is given and
//! passes with its reference solution), and a scripted model replaying a solution passes
//! while one replaying a wrong answer fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

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
            "--tasks",
        ])
        .arg(evals().to_string_lossy())
        .arg("--out")
        .arg(json_path.to_string_lossy())
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
    let out = h.corral().args(["eval", "-m", "nonsense"]).run().await;
    assert_eq!(out.code, Some(2), "{out:?}");
}
