use serde_json::json;

use super::super::super::output::testing::{put, session};
use super::super::super::{Guard, write_guard};
use super::*;

async fn apply(ctx: &ToolContext, patch: &str) -> Result<String, ToolError> {
    ApplyPatch
        .call(json!({ "patch": patch }), ctx)
        .await
        .map(|o| o.text)
}

fn read(ctx: &ToolContext, path: &str) -> String {
    std::fs::read_to_string(ctx.root.join(path)).unwrap()
}

fn wrap(body: &str) -> String {
    format!("*** Begin Patch\n{body}*** End Patch\n")
}

#[tokio::test]
async fn one_patch_adds_updates_moves_and_deletes() {
    let (_t, ctx) = session();
    put(
        &ctx,
        "src/lib.rs",
        "fn a() {\n    1\n}\n\nfn b() {\n    1\n}\n",
    );
    put(&ctx, "old.txt", "bye\n");
    put(&ctx, "name.txt", "same\n");
    let patch = wrap(
        "*** Add File: docs/new.md\n+# New\n\
         *** Update File: src/lib.rs\n@@ fn b() {\n-    1\n+    2\n\
         *** Delete File: old.txt\n\
         *** Update File: name.txt\n*** Move to: renamed/name.txt\n@@\n-same\n+changed\n",
    );
    let out = apply(&ctx, &patch).await.unwrap();
    assert!(
        out.starts_with(
            "added docs/new.md (1 lines)\nupdated src/lib.rs: line 6 changed\ndeleted old.txt\n\
             moved name.txt to renamed/name.txt: line 1 changed\n"
        ),
        "{out}"
    );
    assert!(out.contains("--- /dev/null\n+++ b/docs/new.md\n"), "{out}");
    assert!(out.contains("--- a/old.txt\n+++ /dev/null\n"), "{out}");
    assert_eq!(read(&ctx, "docs/new.md"), "# New\n");
    assert_eq!(
        read(&ctx, "src/lib.rs"),
        "fn a() {\n    1\n}\n\nfn b() {\n    2\n}\n"
    );
    assert!(!ctx.root.join("old.txt").exists() && !ctx.root.join("name.txt").exists());
    assert_eq!(read(&ctx, "renamed/name.txt"), "changed\n");
    // The alias `input` is the manifest's business; the tool knows only `patch`.
    let e = ApplyPatch
        .call(json!({"input": patch}), &ctx)
        .await
        .unwrap_err();
    assert!(matches!(e, ToolError::InvalidArguments(_)), "{e}");
}

#[tokio::test]
async fn a_second_file_that_does_not_apply_leaves_the_first_untouched() {
    let (_t, ctx) = session();
    put(&ctx, "one.txt", "1\n");
    put(&ctx, "two.txt", "2\n");
    let patch = wrap(
        "*** Update File: one.txt\n-1\n+one\n*** Update File: two.txt\n-3\n+three\n\
         *** Add File: three.txt\n+3\n",
    );
    let e = apply(&ctx, &patch).await.unwrap_err();
    assert!(
        e.to_string()
            .starts_with("the hunk for two.txt: its context"),
        "{e}"
    );
    assert_eq!(
        (
            read(&ctx, "one.txt").as_str(),
            read(&ctx, "two.txt").as_str()
        ),
        ("1\n", "2\n")
    );
    assert!(!ctx.root.join("three.txt").exists());
    let e = apply(
        &ctx,
        &wrap("*** Add File: four.txt\n+4\n*** Delete File: nope.txt\n"),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&e, ToolError::NotFound(m) if m.contains("nope.txt does not exist")),
        "{e}"
    );
    assert!(!ctx.root.join("four.txt").exists());
}

/// A write that fails once others were written: those are put back (contents rewritten,
/// created files removed, deleted ones restored).
#[tokio::test]
async fn a_write_failing_midway_puts_back_what_was_written() {
    let (_t, ctx) = session();
    put(&ctx, "keep.txt", "original\n");
    put(&ctx, "gone.txt", "still here\n");
    put(&ctx, "blocker", "a file, so blocker/x cannot be made\n");
    let patch = wrap(
        "*** Update File: keep.txt\n-original\n+changed\n\
         *** Add File: fresh.txt\n+new\n\
         *** Delete File: gone.txt\n\
         *** Add File: blocker/x\n+never\n",
    );
    let e = apply(&ctx, &patch).await.unwrap_err().to_string();
    assert!(
        e.starts_with("the patch could not be applied: writing blocker/x failed"),
        "{e}"
    );
    assert!(
        e.ends_with("keep.txt, fresh.txt, gone.txt already written were put back as before, so nothing was changed"),
        "{e}"
    );
    assert_eq!(read(&ctx, "keep.txt"), "original\n");
    assert_eq!(read(&ctx, "gone.txt"), "still here\n");
    assert!(!ctx.root.join("fresh.txt").exists());
    let mut names: Vec<_> = std::fs::read_dir(&ctx.root)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["blocker", "gone.txt", "keep.txt"]);
}

/// What a hostile model would put in a patch: each refused before anything is written.
#[tokio::test]
async fn every_path_of_a_patch_is_confined_and_git_refused() {
    let (tmp, ctx) = session();
    let outside = tmp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("f.txt"), "outside\n").unwrap();
    std::os::unix::fs::symlink(&outside, ctx.root.join("out")).unwrap();
    put(&ctx, "a.txt", "a\n");
    let absolute = outside.join("g.txt").display().to_string();
    for path in [
        "../escape.txt",
        absolute.as_str(),
        "out/f.txt",
        "out/new.txt",
    ] {
        for body in [
            format!("*** Add File: ok.txt\n+ok\n*** Add File: {path}\n+pwned\n"),
            format!("*** Update File: a.txt\n*** Move to: {path}\n"),
            format!("*** Update File: {path}\n-outside\n+pwned\n"),
            format!("*** Delete File: {path}\n"),
        ] {
            let e = apply(&ctx, &wrap(&body)).await.unwrap_err();
            assert!(matches!(e, ToolError::OutsideRoot(_)), "{body}: {e}");
        }
    }
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 1);
    assert_eq!(
        std::fs::read_to_string(outside.join("f.txt")).unwrap(),
        "outside\n"
    );
    put(&ctx, ".git/config", "[core]\n");
    put(&ctx, ".git/HEAD", "ref: refs/heads/main\n");
    for path in [".git/config", ".git/hooks/x", "sub/.git/config"] {
        for body in [
            format!("*** Add File: ok.txt\n+ok\n*** Add File: {path}\n+[core]\n"),
            format!("*** Update File: a.txt\n*** Move to: {path}\n"),
            format!("*** Update File: {path}\n-[core]\n+[core]\n+\tfsmonitor = x\n"),
            format!("*** Delete File: {path}\n"),
        ] {
            let args = json!({"patch": wrap(&body)});
            let guarded = write_guard("apply_patch", &args, &ctx.root);
            assert!(matches!(guarded, Some(Guard::Never(_))), "{body}");
            // The tool refuses on its own too (the guard is not its only wall).
            if let Err(e) = apply(&ctx, &wrap(&body)).await {
                assert!(
                    matches!(&e, ToolError::Refused(m) if m.contains("git's own files"))
                        || matches!(e, ToolError::NotFound(_)),
                    "{body}: {e}"
                );
            } else {
                panic!("{body} was applied");
            }
        }
    }
    assert_eq!(read(&ctx, ".git/config"), "[core]\n");
    assert_eq!(read(&ctx, "a.txt"), "a\n");
    assert!(!ctx.root.join(".git/hooks").exists() && !ctx.root.join("ok.txt").exists());
    // Agent config anywhere in a patch asks a person; an unparsable patch is nobody's.
    let config = json!({"patch": wrap("*** Add File: a.md\n+x\n*** Add File: .mcp.json\n+{}\n")});
    assert!(matches!(
        write_guard("apply_patch", &config, &ctx.root),
        Some(Guard::Person(_))
    ));
    let both = wrap("*** Add File: .mcp.json\n+{}\n*** Delete File: .git/config\n");
    assert!(matches!(
        write_guard("apply_patch", &json!({"patch": both}), &ctx.root),
        Some(Guard::Never(_))
    ));
    assert_eq!(
        write_guard("apply_patch", &json!({"patch": "nonsense"}), &ctx.root),
        None
    );
}

#[test]
fn the_preview_is_every_file_the_patch_would_change() {
    let (_t, ctx) = session();
    put(&ctx, "a.txt", "a\n");
    let patch = wrap("*** Update File: a.txt\n-a\n+b\n*** Add File: n.txt\n+n\n");
    let changes = super::super::planned_changes("apply_patch", &json!({"patch": patch}), &ctx.root)
        .unwrap()
        .unwrap();
    let paths: Vec<&str> = changes.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(paths, ["a.txt", "n.txt"]);
    assert_eq!(changes[1].old, None);
    assert_eq!(read(&ctx, "a.txt"), "a\n");
    assert!(!ctx.root.join("n.txt").exists());
}
