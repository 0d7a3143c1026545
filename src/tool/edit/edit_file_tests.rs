use std::sync::Arc;

use serde_json::json;

use super::super::super::editor::tests as fake_editor;
use super::super::super::output::testing::{put, session};
use super::super::super::{EditorLink, Guard, write_guard};
use super::*;

async fn edit(ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
    EditFile.call(args, ctx).await.map(|o| o.text)
}

fn read(ctx: &ToolContext, path: &str) -> String {
    std::fs::read_to_string(ctx.root.join(path)).unwrap()
}

#[tokio::test]
async fn an_edit_reports_the_changed_lines_and_a_diff() {
    let (_t, ctx) = session();
    put(&ctx, "src/a.rs", "fn a() {\n    one();\n}\n");
    let out = edit(
        &ctx,
        json!({"path": "src/a.rs", "old_text": "one()", "new_text": "two();\n    three()"}),
    )
    .await
    .unwrap();
    assert_eq!(
        read(&ctx, "src/a.rs"),
        "fn a() {\n    two();\n    three();\n}\n"
    );
    assert!(
        out.starts_with("edited src/a.rs: lines 2-3 changed\n--- a/src/a.rs\n+++ b/src/a.rs\n"),
        "{out}"
    );
    assert!(
        out.contains("-    one();\n+    two();\n+    three();\n"),
        "{out}"
    );
    // A tolerant pass says which.
    let out = edit(
        &ctx,
        json!({"path": "src/a.rs", "old_text": "   2│     two();\n", "new_text": "   2│     2();\n"}),
    )
    .await
    .unwrap();
    assert!(
        out.starts_with(
            "edited src/a.rs: line 2 changed (old_text matched without its line-number prefixes)"
        ),
        "{out}"
    );
    assert_eq!(
        read(&ctx, "src/a.rs"),
        "fn a() {\n    2();\n    three();\n}\n"
    );
}

#[tokio::test]
async fn several_edits_apply_in_order_or_not_at_all() {
    let (_t, ctx) = session();
    put(&ctx, "a.txt", "alpha\nbeta\ngamma\n");
    let edits = |second: &str| {
        json!({"path": "a.txt", "edits": [
            {"old_text": "alpha", "new_text": "ALPHA"},
            {"old_text": second, "new_text": "GAMMA"},
        ]})
    };
    let e = edit(&ctx, edits("delta")).await.unwrap_err();
    assert!(
        matches!(&e, ToolError::Failed(m) if m.starts_with("a.txt: edit 2 of 2: old_text was not found")),
        "{e}"
    );
    assert_eq!(read(&ctx, "a.txt"), "alpha\nbeta\ngamma\n");
    // Each edit sees the ones before it.
    let chained = json!({"path": "a.txt", "edits": [
        {"old_text": "beta", "new_text": "b"},
        {"old_text": "b\ng", "new_text": "b\nG", "replace_all": true},
    ]});
    let out = edit(&ctx, chained).await.unwrap();
    assert_eq!(read(&ctx, "a.txt"), "alpha\nb\nGamma\n");
    assert!(out.contains("edit 2 of 2: 1 places replaced"), "{out}");
    let both = json!({"path": "a.txt", "old_text": "a", "new_text": "b", "edits": [{"old_text": "a", "new_text": "b"}]});
    assert!(matches!(
        edit(&ctx, both).await,
        Err(ToolError::InvalidArguments(_))
    ));
    let undo = json!({"path": "a.txt", "edits": [
        {"old_text": "alpha", "new_text": "x"},
        {"old_text": "x", "new_text": "alpha"},
    ]});
    let e = edit(&ctx, undo).await.unwrap_err();
    assert!(e.to_string().contains("leave a.txt as it was"), "{e}");
}

#[tokio::test]
async fn an_empty_old_text_creates_a_missing_file_and_nothing_else() {
    let (_t, ctx) = session();
    let out = edit(
        &ctx,
        json!({"path": "new/n.txt", "old_text": "", "new_text": "hi\n"}),
    )
    .await
    .unwrap();
    assert!(
        out.starts_with("created new/n.txt (1 lines)\n--- /dev/null\n+++ b/new/n.txt\n"),
        "{out}"
    );
    assert_eq!(read(&ctx, "new/n.txt"), "hi\n");
    let e = edit(
        &ctx,
        json!({"path": "new/n.txt", "old_text": "", "new_text": "x"}),
    )
    .await
    .unwrap_err();
    assert!(e.to_string().contains("old_text is empty"), "{e}");
    let e = edit(
        &ctx,
        json!({"path": "gone.txt", "old_text": "a", "new_text": "b"}),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&e, ToolError::NotFound(m) if m.contains("give an empty old_text")),
        "{e}"
    );
    assert!(!ctx.root.join("gone.txt").exists());
    let e = edit(
        &ctx,
        json!({"path": "new/n.txt", "old_text": "hi", "new_text": "hi"}),
    )
    .await
    .unwrap_err();
    assert!(e.to_string().contains("nothing would change"), "{e}");
    let e = edit(&ctx, json!({"path": "new/n.txt"})).await.unwrap_err();
    assert!(matches!(e, ToolError::InvalidArguments(_)), "{e}");
    std::fs::write(ctx.root.join("bin"), b"a\0b").unwrap();
    let e = edit(
        &ctx,
        json!({"path": "bin", "old_text": "a", "new_text": "b"}),
    )
    .await
    .unwrap_err();
    assert!(e.to_string().contains("binary"), "{e}");
}

/// The attacks a hostile model would try, each refused with nothing written anywhere.
#[tokio::test]
async fn paths_out_of_the_root_and_into_git_are_refused() {
    let (tmp, ctx) = session();
    let outside = tmp.path().join("outside.txt");
    std::fs::write(&outside, "secret = 1\n").unwrap();
    std::os::unix::fs::symlink(&outside, ctx.root.join("link")).unwrap();
    let change = |path: &str| json!({"path": path, "old_text": "1", "new_text": "2"});
    for path in ["../outside.txt", outside.to_str().unwrap(), "link"] {
        let e = edit(&ctx, change(path)).await.unwrap_err();
        assert!(matches!(e, ToolError::OutsideRoot(_)), "{path}: {e}");
    }
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "secret = 1\n");
    put(&ctx, ".git/config", "[core]\n\tbare = 1\n");
    put(&ctx, ".git/hooks/x", "#!/bin/sh\nexit 1\n");
    std::os::unix::fs::symlink(".git", ctx.root.join("docs")).unwrap();
    for path in [".git/config", ".git/hooks/x", "docs/config"] {
        let e = edit(&ctx, change(path)).await.unwrap_err();
        assert!(
            matches!(&e, ToolError::Refused(m) if m.contains("git's own files")),
            "{path}: {e}"
        );
        let guarded = write_guard("edit_file", &change(path), &ctx.root);
        assert!(matches!(guarded, Some(Guard::Never(_))), "{path}");
    }
    assert_eq!(read(&ctx, ".git/config"), "[core]\n\tbare = 1\n");
    assert_eq!(read(&ctx, ".git/hooks/x"), "#!/bin/sh\nexit 1\n");
    // Agent config: a person decides, and never through a link.
    let config = json!({"path": ".claude/settings.json", "old_text": "", "new_text": "{}"});
    assert!(matches!(
        write_guard("edit_file", &config, &ctx.root),
        Some(Guard::Person(_))
    ));
    std::fs::create_dir(ctx.root.join(".vscode")).unwrap();
    put(&ctx, ".vscode/tasks.json", "{\"a\": 1}");
    std::os::unix::fs::symlink(".vscode", ctx.root.join("cfg")).unwrap();
    let e = edit(&ctx, change("cfg/tasks.json")).await.unwrap_err();
    assert!(e.to_string().contains("through a symbolic link"), "{e}");
    assert_eq!(read(&ctx, ".vscode/tasks.json"), "{\"a\": 1}");
}

#[tokio::test]
async fn with_an_editor_its_buffer_is_edited_and_the_disk_left_alone() {
    let (_t, mut ctx) = session();
    put(&ctx, "a.txt", "disk\n");
    let (recording, editor) = fake_editor::editor();
    *recording.answer.lock().unwrap() = Some(Ok("unsaved buffer\n".into()));
    let mut settings = (*ctx.settings).clone();
    settings.editor = Some(EditorLink(editor));
    ctx.settings = Arc::new(settings);
    let out = edit(
        &ctx,
        json!({"path": "a.txt", "old_text": "unsaved", "new_text": "edited"}),
    )
    .await
    .unwrap();
    assert!(out.contains("-unsaved buffer\n+edited buffer\n"), "{out}");
    let path = ctx.root.join("a.txt");
    assert_eq!(
        fake_editor::calls(&recording),
        [
            format!("read {} None None", path.display()),
            format!("write {} edited buffer\n", path.display()),
        ]
    );
    assert_eq!(read(&ctx, "a.txt"), "disk\n");
}

#[test]
fn the_preview_is_the_edit_the_tool_would_make() {
    let (_t, ctx) = session();
    put(&ctx, "a.txt", "one\ntwo\n");
    let args = json!({"path": "a.txt", "old_text": "two", "new_text": "2"});
    let changes = super::super::planned_changes("edit_file", &args, &ctx.root)
        .unwrap()
        .unwrap();
    assert_eq!(
        changes,
        [FileChange {
            path: "a.txt".into(),
            old: Some("one\ntwo\n".into()),
            new: Some("one\n2\n".into()),
        }]
    );
    let miss = json!({"path": "a.txt", "old_text": "three", "new_text": "3"});
    let e = super::super::planned_changes("edit_file", &miss, &ctx.root)
        .unwrap()
        .unwrap_err();
    assert!(e.starts_with("a.txt: old_text was not found"), "{e}");
    assert_eq!(read(&ctx, "a.txt"), "one\ntwo\n");
}
