//! The file tools' root boundary end to end: symlinks leading out of the working directory
//! are refused by the kernel-checked opens, symlinks staying inside keep working.

use std::os::unix::fs::symlink;

use serde_json::{Value, json};

use crate::common::*;
use crate::support::{FakeModel, Harness, Outcome, Reply};

/// A run whose model makes the given calls, one per step, and then answers "done". The
/// bypass preset keeps write_file from asking.
async fn calls(h: &Harness, calls: &[(&str, Value)]) -> Outcome {
    let server = FakeModel::start().await;
    for (i, (name, args)) in calls.iter().enumerate() {
        server.push(Reply::new().tool_call(&format!("c{i}"), name, &args.to_string()));
    }
    server.push(Reply::new().text("done"));
    let out = openai_run(h, &server, "go")
        .args(["-p", "bypass"])
        .run()
        .await;
    assert_well_formed(&out);
    // A turn whose every call hit the root boundary ends as an error; otherwise normally.
    let failed_outside = results(&out).iter().all(|r| {
        r["success"] == false
            && r["error"]
                .as_str()
                .is_some_and(|e| e.contains("outside the session root"))
    });
    let expected = if failed_outside { 1 } else { 0 };
    assert_eq!(out.code, Some(expected), "{out:?}");
    out
}

/// The `{success, output, error}` records of the calls, in order.
fn results(out: &Outcome) -> Vec<Value> {
    out.of_kind("tool_result")
        .iter()
        .map(|e| e["data"]["result"].clone())
        .collect()
}

#[tokio::test]
async fn write_file_refuses_symlinks_leading_out_and_names_the_root() {
    let h = Harness::new();
    let outside = h.home_dir().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("notes.txt"), "original\n").unwrap();
    symlink(&outside, h.work().join("out")).unwrap();
    symlink(outside.join("notes.txt"), h.work().join("notes-link")).unwrap();
    let write = |path: &str| ("write_file", json!({"path": path, "content": "pwned\n"}));
    let out = calls(
        &h,
        &[
            write("out/new.txt"),
            write("notes-link"),
            ("read_file", json!({"path": "notes-link"})),
        ],
    )
    .await;
    let root = h.work().canonicalize().unwrap();
    let results = results(&out);
    assert_eq!(results.len(), 3, "{out:?}");
    for result in &results {
        assert_eq!(result["success"], false, "{result}");
        let error = result["error"].as_str().unwrap();
        assert!(error.contains("outside the session root"), "{error}");
        let named = format!("(the session root is {})", root.display());
        assert!(error.contains(&named), "{error}");
    }
    assert!(!outside.join("new.txt").exists());
    let kept = std::fs::read_to_string(outside.join("notes.txt")).unwrap();
    assert_eq!(kept, "original\n");
}

#[tokio::test]
async fn symlinks_inside_the_root_are_written_through() {
    let h = Harness::new();
    std::fs::create_dir(h.work().join("src")).unwrap();
    std::fs::write(h.work().join("src/lib.rs"), "old\n").unwrap();
    symlink("src", h.work().join("alias")).unwrap();
    let out = calls(
        &h,
        &[
            (
                "write_file",
                json!({"path": "alias/lib.rs", "content": "new\n"}),
            ),
            ("read_file", json!({"path": "src/lib.rs"})),
        ],
    )
    .await;
    let results = results(&out);
    assert_eq!(results[0]["success"], true, "{}", results[0]);
    assert_eq!(results[1]["output"], "new\n", "{}", results[1]);
    assert!(h.work().join("alias").is_symlink());
}
