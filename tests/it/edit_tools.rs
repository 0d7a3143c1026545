//! edit_file and apply_patch end to end: a real `corral run` whose scripted model edits with
//! the argument names other agents use, patches several files, and tries what a hostile model
//! would (out of the root, into `.git`, agent config without a person); the approval shows
//! the diff.

use serde_json::{Value, json};

use crate::common::*;
use crate::support::{FakeModel, Harness, Outcome, Reply};

/// A run in the harness's work dir whose model makes `calls`, then answers "done".
async fn run(h: &Harness, preset: &str, calls: &[(&str, Value)]) -> Outcome {
    run_calls(h, &h.work(), preset, calls).await
}

fn patch(body: &str) -> (&'static str, Value) {
    (
        "apply_patch",
        json!({"patch": format!("*** Begin Patch\n{body}*** End Patch\n")}),
    )
}

fn refused(result: &Value, words: &str) {
    assert_eq!(result["success"], false, "{result}");
    let error = result["error"].as_str().unwrap_or_default();
    assert!(error.contains(words), "{words:?} in {error}");
}

#[tokio::test]
async fn a_model_edits_with_other_agents_argument_names_and_patches_several_files() {
    let h = Harness::new();
    let work = h.work();
    std::fs::create_dir(work.join("src")).unwrap();
    std::fs::write(
        work.join("src/main.rs"),
        "fn main() {\n    println!(\"hi\");\n}\n",
    )
    .unwrap();
    std::fs::write(work.join("notes.txt"), "old notes\n").unwrap();
    let out = run(
        &h,
        "auto",
        &[
            // claude's names, and the line numbers read_file shows.
            (
                "edit_file",
                json!({"file_path": "src/main.rs", "old_string": "   2│     println!(\"hi\");",
                       "new_string": "   2│     println!(\"hello\");"}),
            ),
            // codex's tool, with its `input` name for the patch.
            (
                "apply_patch",
                json!({"input": "*** Begin Patch\n*** Update File: src/main.rs\n@@ fn main() {\n-    println!(\"hello\");\n+    println!(\"hello, world\");\n*** Add File: src/lib.rs\n+pub fn f() {}\n*** Delete File: notes.txt\n*** End Patch"}),
            ),
        ],
    )
    .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let results = tool_results(&out);
    assert_eq!(results.len(), 2, "{out:?}");
    for result in &results {
        assert_eq!(result["success"], true, "{result}");
    }
    let edited = results[0]["output"].as_str().unwrap();
    assert!(
        edited.starts_with("edited src/main.rs: line 2 changed"),
        "{edited}"
    );
    assert!(edited.contains("+    println!(\"hello\");"), "{edited}");
    let patched = results[1]["output"].as_str().unwrap();
    assert!(
        patched.starts_with(
            "updated src/main.rs: line 2 changed\nadded src/lib.rs (1 lines)\ndeleted notes.txt\n"
        ),
        "{patched}"
    );
    assert_eq!(
        std::fs::read_to_string(work.join("src/main.rs")).unwrap(),
        "fn main() {\n    println!(\"hello, world\");\n}\n"
    );
    assert_eq!(
        std::fs::read_to_string(work.join("src/lib.rs")).unwrap(),
        "pub fn f() {}\n"
    );
    assert!(!work.join("notes.txt").exists());
    // Every surface sees the edit as diffs: the authoritative tool_use carries one per file.
    let uses: Vec<Value> = out
        .of_kind("tool_use")
        .into_iter()
        .filter(|e| e["data"]["call"]["status"] == "in_progress")
        .collect();
    let diffs = |i: usize| -> Vec<String> {
        uses[i]["data"]["call"]["content"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["type"] == "diff")
            .map(|c| c["path"].as_str().unwrap().to_owned())
            .collect()
    };
    let root = work.canonicalize().unwrap();
    let at = |p: &str| root.join(p).display().to_string();
    assert_eq!(diffs(0), [at("src/main.rs")], "{:?}", uses[0]);
    assert_eq!(
        diffs(1),
        [at("src/main.rs"), at("src/lib.rs"), at("notes.txt")]
    );
}

#[tokio::test]
async fn a_failing_edit_tells_the_model_where_to_look_and_changes_nothing() {
    let h = Harness::new();
    let work = h.work();
    std::fs::write(work.join("a.txt"), "one\ntwo\none\n").unwrap();
    std::fs::write(work.join("b.txt"), "b\n").unwrap();
    let out = run(
        &h,
        "auto",
        &[
            (
                "edit_file",
                json!({"path": "a.txt", "old_text": "one", "new_text": "1"}),
            ),
            patch("*** Update File: b.txt\n-b\n+B\n*** Update File: a.txt\n-three\n+3\n"),
        ],
    )
    .await;
    let results = tool_results(&out);
    refused(
        &results[0],
        "old_text matches 2 places exactly (starting at lines 1, 3)",
    );
    refused(&results[0], "   3│ one");
    refused(
        &results[1],
        "the hunk for a.txt: its context and removed lines were not found",
    );
    assert_eq!(
        std::fs::read_to_string(work.join("a.txt")).unwrap(),
        "one\ntwo\none\n"
    );
    assert_eq!(std::fs::read_to_string(work.join("b.txt")).unwrap(), "b\n");
}

/// Under bypass, where nothing asks: every path leading out of the root or into git's files
/// is refused, by edit_file and by every header of a patch.
#[tokio::test]
async fn edit_tools_never_write_outside_the_root_or_git_files_under_bypass() {
    let h = Harness::new();
    let work = h.work();
    git_repo_at(&work, "a\n");
    let config = std::fs::read_to_string(work.join(".git/config")).unwrap();
    let outside = h.home_dir().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("f.txt"), "outside\n").unwrap();
    std::os::unix::fs::symlink(&outside, work.join("out")).unwrap();
    std::os::unix::fs::symlink(".git", work.join("docs")).unwrap();
    let mark = h.home_dir().join("hook-ran");
    let hook = format!("+#!/bin/sh\n+touch {}\n", mark.display());
    let edit = |path: &str| {
        (
            "edit_file",
            json!({"path": path, "old_text": "", "new_text": "[core]\n\tfsmonitor = x\n"}),
        )
    };
    let abs = outside.join("g.txt").display().to_string();
    let calls = [
        edit("../escape.txt"),
        edit(&abs),
        edit("out/new.txt"),
        edit(".git/hooks/pre-commit"),
        (
            "edit_file",
            json!({"path": ".git/config", "old_text": "[core]", "new_text": "[core]\n\tfsmonitor = x"}),
        ),
        (
            "edit_file",
            json!({"path": "docs/config", "old_text": "[core]", "new_text": "[core]\n\tfsmonitor = x"}),
        ),
        patch(&format!(
            "*** Add File: ok.txt\n+ok\n*** Add File: .git/hooks/pre-commit\n{hook}"
        )),
        patch("*** Update File: a.txt\n*** Move to: .git/config\n"),
        patch("*** Add File: ok.txt\n+ok\n*** Add File: ../escape.txt\n+x\n"),
        patch("*** Update File: out/f.txt\n-outside\n+pwned\n"),
        patch("*** Delete File: docs/HEAD\n"),
    ];
    let out = run(&h, "bypass", &calls).await;
    let results = tool_results(&out);
    assert_eq!(results.len(), calls.len(), "{out:?}");
    for i in [0, 1, 2, 8, 9] {
        refused(&results[i], "outside the session root");
    }
    for i in [3, 4, 5, 6, 7, 10] {
        refused(&results[i], "git's own files");
    }
    assert_eq!(
        std::fs::read_to_string(work.join(".git/config")).unwrap(),
        config
    );
    assert!(work.join(".git/HEAD").exists() && work.join("a.txt").exists());
    assert!(!work.join(".git/hooks/pre-commit").exists() && !work.join("ok.txt").exists());
    assert!(!h.home_dir().join("escape.txt").exists());
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 1);
    assert_eq!(
        std::fs::read_to_string(outside.join("f.txt")).unwrap(),
        "outside\n"
    );
    let _ = git_command(&work, &["commit", "--allow-empty", "-qm", "x"]).output();
    assert!(!mark.exists(), "a planted hook ran");
}

#[tokio::test]
async fn agent_config_in_a_patch_asks_a_person_even_under_bypass_and_shows_the_diff() {
    let h = Harness::new();
    let work = h.work();
    let body = "*** Add File: notes.md\n+fine\n*** Add File: .mcp.json\n+{\"mcpServers\": {}}\n";
    // Nobody to ask: refused, nothing written.
    let out = run(&h, "bypass", &[patch(body)]).await;
    refused(&tool_results(&out)[0], "needs a person's approval");
    assert!(!work.join("notes.md").exists() && !work.join(".mcp.json").exists());

    let server = FakeModel::start().await;
    let (name, args) = patch(body);
    server.push(Reply::new().tool_call("c1", name, &args.to_string()));
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
    let data = &request["data"];
    assert!(
        data["reason"].as_str().unwrap().contains("agent config"),
        "{request}"
    );
    assert_eq!(data["path"], "notes.md, .mcp.json", "{request}");
    let diff = data["diff"].as_str().unwrap();
    assert!(
        diff.contains("+++ b/notes.md") && diff.contains("+++ b/.mcp.json"),
        "{diff}"
    );
    assert!(diff.contains("+{\"mcpServers\": {}}"), "{diff}");
    let id = data["requestId"].as_str().unwrap().to_owned();
    running
        .send_line(&json!({"requestId": id, "decision": "allow"}).to_string())
        .await;
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(work.join(".mcp.json")).unwrap(),
        "{\"mcpServers\": {}}\n"
    );
    assert_eq!(
        std::fs::read_to_string(work.join("notes.md")).unwrap(),
        "fine\n"
    );
}

#[tokio::test]
async fn readonly_does_not_offer_the_edit_tools_and_default_does() {
    let h = Harness::new();
    for (preset, offered) in [("readonly", false), ("default", true)] {
        let server = FakeModel::start().await;
        server.push(Reply::new().text("ok"));
        let out = openai_run(&h, &server, "look")
            .args(["-p", preset])
            .run()
            .await;
        assert_eq!(out.code, Some(0), "{out:?}");
        let tools = offered_tools(&server, 0);
        for tool in ["edit_file", "apply_patch"] {
            assert_eq!(
                tools.iter().any(|t| t == tool),
                offered,
                "{preset}: {tools:?}"
            );
        }
    }
}
