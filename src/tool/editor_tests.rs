//! read_file / write_file through an editor: what reaches it, and what never does. The fake
//! editor here serves the edit tools' tests too.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::super::ToolError;
use super::super::output::testing::{put, session};
use super::*;

/// What the fake editor was asked: `read path line limit` or `write path content`.
#[derive(Default)]
pub(crate) struct Recording {
    pub(crate) calls: Mutex<Vec<String>>,
    /// Its answer to reads; `Err` is a refusal.
    pub(crate) answer: Mutex<Option<Result<String, String>>>,
}

struct Fake(Arc<Recording>);

impl Editor for Fake {
    fn reads(&self) -> bool {
        true
    }

    fn writes(&self) -> bool {
        true
    }

    fn read_text(
        &self,
        path: PathBuf,
        line: Option<u64>,
        limit: Option<u64>,
    ) -> EditorFuture<String> {
        let seen = format!("read {} {line:?} {limit:?}", path.display());
        self.0.calls.lock().unwrap().push(seen);
        let answer = self.0.answer.lock().unwrap().clone();
        Box::pin(async move { answer.unwrap_or_else(|| Ok("BUFFER".into())) })
    }

    fn write_text(&self, path: PathBuf, content: String) -> EditorFuture<()> {
        let seen = format!("write {} {content}", path.display());
        self.0.calls.lock().unwrap().push(seen);
        Box::pin(async { Ok(()) })
    }
}

pub(crate) fn editor() -> (Arc<Recording>, Arc<dyn Editor>) {
    let recording = Arc::new(Recording::default());
    (recording.clone(), Arc::new(Fake(recording)))
}

pub(crate) fn calls(recording: &Recording) -> Vec<String> {
    recording.calls.lock().unwrap().clone()
}

#[tokio::test]
async fn a_read_asks_the_editor_for_the_resolved_path_and_returns_its_buffer() {
    let (_tmp, ctx) = session();
    put(&ctx, "sub/a.txt", "disk text");
    let (recording, editor) = editor();
    let out = read(&editor, &ctx, "sub/../sub/a.txt", None, false)
        .await
        .unwrap();
    assert_eq!(out.text, "BUFFER");
    let path = ctx.root.join("sub/a.txt");
    assert_eq!(
        calls(&recording),
        [format!("read {} None None", path.display())]
    );
}

#[tokio::test]
async fn a_line_range_becomes_the_first_line_and_a_count() {
    let (_tmp, ctx) = session();
    put(&ctx, "a.txt", "x");
    let (recording, editor) = editor();
    read(&editor, &ctx, "a.txt", Some((3, 5)), false)
        .await
        .unwrap();
    let path = ctx.root.join("a.txt");
    assert_eq!(
        calls(&recording),
        [format!("read {} Some(3) Some(3)", path.display())]
    );
}

#[tokio::test]
async fn paths_leading_out_of_the_root_never_reach_the_editor() {
    let (tmp, ctx) = session();
    std::fs::write(tmp.path().join("outside.txt"), "secret").unwrap();
    std::os::unix::fs::symlink(tmp.path().join("outside.txt"), ctx.root.join("link")).unwrap();
    let (recording, editor) = editor();
    for path in [
        "../outside.txt",
        "link",
        tmp.path().join("outside.txt").to_str().unwrap(),
    ] {
        let err = read(&editor, &ctx, path, None, false).await.unwrap_err();
        assert!(matches!(err, ToolError::OutsideRoot(_)), "{path}: {err:?}");
        let err = write(&editor, &ctx, path, "x".into()).await.unwrap_err();
        assert!(matches!(err, ToolError::OutsideRoot(_)), "{path}: {err:?}");
    }
    assert_eq!(calls(&recording), Vec::<String>::new());
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("outside.txt")).unwrap(),
        "secret"
    );
}

#[tokio::test]
async fn a_directory_is_not_asked_for() {
    let (_tmp, ctx) = session();
    std::fs::create_dir(ctx.root.join("dir")).unwrap();
    let (recording, editor) = editor();
    let err = read(&editor, &ctx, "dir", None, false).await.unwrap_err();
    assert_eq!(
        err,
        ToolError::InvalidArguments(
            "dir is a directory; use list_directory to see what it contains".into()
        )
    );
    let err = write(&editor, &ctx, "dir", "x".into()).await.unwrap_err();
    assert_eq!(
        err,
        ToolError::Refused("dir is a directory; write_file writes files".into())
    );
    assert_eq!(calls(&recording), Vec::<String>::new());
}

#[tokio::test]
async fn the_editors_refusal_is_the_tools_error_and_an_empty_buffer_says_so() {
    let (_tmp, ctx) = session();
    put(&ctx, "a.txt", "disk text");
    let (recording, editor) = editor();
    *recording.answer.lock().unwrap() = Some(Err("no such buffer".into()));
    let err = read(&editor, &ctx, "a.txt", None, false).await.unwrap_err();
    assert_eq!(
        err,
        ToolError::Refused("the editor refused: no such buffer".into())
    );
    *recording.answer.lock().unwrap() = Some(Ok(String::new()));
    let out = read(&editor, &ctx, "a.txt", None, false).await.unwrap();
    assert_eq!(out.text, "(empty file)");
}

#[tokio::test]
async fn a_whole_buffer_over_the_size_limit_is_refused_but_a_range_of_it_is_not() {
    let (_tmp, ctx) = session();
    put(&ctx, "big.txt", "x");
    let (recording, editor) = editor();
    let big = "y".repeat(MAX_FILE_BYTES as usize + 1);
    *recording.answer.lock().unwrap() = Some(Ok(big));
    let err = read(&editor, &ctx, "big.txt", None, false)
        .await
        .unwrap_err();
    let ToolError::Refused(message) = err else {
        panic!("{err:?}")
    };
    assert_eq!(
        message,
        "big.txt is 10.0 MiB (over the 10.0 MiB limit); read part of it with startLine and endLine"
    );
    let out = read(&editor, &ctx, "big.txt", Some((1, 2)), false)
        .await
        .unwrap();
    assert!(
        out.text
            .ends_with("[output shortened; read the rest with startLine/endLine]"),
        "{}",
        &out.text[out.text.len() - 80..]
    );
}

#[tokio::test]
async fn a_write_lands_in_the_editor_with_its_parents_made_and_says_which() {
    let (_tmp, ctx) = session();
    put(&ctx, "old.txt", "before");
    let (recording, editor) = editor();
    let out = write(&editor, &ctx, "new/deep/n.txt", "hi".into())
        .await
        .unwrap();
    assert_eq!(
        out.text,
        "created new/deep/n.txt in the editor (2 bytes written)"
    );
    let out = write(&editor, &ctx, "old.txt", "after!".into())
        .await
        .unwrap();
    assert_eq!(out.text, "replaced old.txt in the editor (6 bytes written)");
    assert_eq!(
        calls(&recording),
        [
            format!("write {} hi", ctx.root.join("new/deep/n.txt").display()),
            format!("write {} after!", ctx.root.join("old.txt").display()),
        ]
    );
    // The editor holds the writes; the disk keeps what it had (parents made, no file).
    assert_eq!(
        std::fs::read_to_string(ctx.root.join("old.txt")).unwrap(),
        "before"
    );
    assert!(ctx.root.join("new/deep").is_dir());
    assert!(!ctx.root.join("new/deep/n.txt").exists());
}
