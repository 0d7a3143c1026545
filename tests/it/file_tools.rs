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
    let failed_outside = tool_results(&out).iter().all(|r| {
        r["success"] == false
            && r["error"]
                .as_str()
                .is_some_and(|e| e.contains("outside the session root"))
    });
    let expected = if failed_outside { 1 } else { 0 };
    assert_eq!(out.code, Some(expected), "{out:?}");
    out
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
    let results = tool_results(&out);
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
    let results = tool_results(&out);
    assert_eq!(results[0]["success"], true, "{}", results[0]);
    assert_eq!(results[1]["output"], "new\n", "{}", results[1]);
    assert!(h.work().join("alias").is_symlink());
}

/// Session B's root lies inside a directory another session may write (`work/x/etc`). Between
/// two of B's calls that other session swaps `work/x` for a symlink to a directory of its own
/// with an `etc` inside: B's file tools must refuse, not read or write over there.
#[tokio::test]
async fn a_root_whose_path_is_redirected_by_a_symlink_is_refused() {
    let h = Harness::new();
    let root = h.work().join("x/etc");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("passwd"), "root's own\n").unwrap();
    let decoy = h.home_dir().join("decoy");
    std::fs::create_dir_all(decoy.join("etc")).unwrap();
    std::fs::write(decoy.join("etc/passwd"), "decoy\n").unwrap();

    let server = FakeModel::start().await;
    let write = |id: &str, path: &str| {
        Reply::new().tool_call(
            id,
            "write_file",
            &json!({"path": path, "content": "from B\n"}).to_string(),
        )
    };
    server.push(write("c0", "first.txt"));
    // Gives the test time to swap the path once the first call is done.
    let stalled = |reply: Reply| reply.stall(std::time::Duration::from_secs(2));
    server.push(stalled(write("c1", "second.txt")));
    server.push(Reply::new().tool_call("c2", "read_file", &json!({"path": "passwd"}).to_string()));
    server.push(Reply::new().text("done"));
    let run = openai_run(&h, &server, "go")
        .args(["-p", "bypass"])
        .current_dir(&root)
        .spawn()
        .await;
    assert!(
        server
            .wait_for_chat_requests(2, std::time::Duration::from_secs(30))
            .await
    );
    // The first call is done (its result is in the second request): swap a component.
    std::fs::rename(h.work().join("x"), h.work().join("x-moved")).unwrap();
    symlink(&decoy, h.work().join("x")).unwrap();
    let out = run.wait().await;
    assert_well_formed(&out);

    let results = tool_results(&out);
    assert_eq!(results.len(), 3, "{out:?}");
    assert_eq!(results[0]["success"], true, "{}", results[0]);
    for result in &results[1..] {
        assert_eq!(result["success"], false, "{result}");
        let error = result["error"].as_str().unwrap();
        assert!(error.contains("no longer resolves"), "{error}");
    }
    assert!(!decoy.join("etc/second.txt").exists());
    assert!(h.work().join("x-moved/etc/first.txt").exists());
    assert!(!h.work().join("x-moved/etc/second.txt").exists());
}
