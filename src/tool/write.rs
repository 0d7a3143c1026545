//! `write_file`: replace or create a file inside the session root.
//!
//! The new content goes to a temporary file beside the target and is renamed over it, so a
//! crash or a full disk never leaves a half-written file; an existing file keeps its
//! permissions.

use std::io::Write;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::output::{io_error, parse_args, run_blocking};
use super::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use crate::sandbox::paths::resolve_in_root;

pub(crate) struct WriteFile;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    path: String,
    content: String,
}

impl Tool for WriteFile {
    fn name(&self) -> &'static str {
        "write_file"
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let args: WriteArgs = parse_args(args)?;
            run_blocking(ctx, move |ctx| write_file(ctx, &args)).await
        })
    }
}

fn write_file(ctx: &ToolContext, args: &WriteArgs) -> Result<ToolOutput, ToolError> {
    if args.path.trim().is_empty() {
        return Err(ToolError::InvalidArguments("path is empty".into()));
    }
    let target = resolve_in_root(&ctx.root, &args.path)?;
    if target == ctx.root {
        return Err(ToolError::InvalidArguments(
            "path names the working directory itself, not a file".into(),
        ));
    }
    let existing = std::fs::metadata(&target).ok();
    if existing.as_ref().is_some_and(|m| m.is_dir()) {
        return Err(ToolError::Refused(format!(
            "{} is a directory; write_file writes files",
            args.path
        )));
    }
    let parent = target
        .parent()
        .ok_or_else(|| ToolError::InvalidArguments(format!("{} has no parent", args.path)))?;
    // The parent is inside the root (the target was resolved there), so creating it cannot
    // reach outside.
    std::fs::create_dir_all(parent).map_err(|e| io_error(&e, &args.path))?;
    write_atomically(parent, &target, args.content.as_bytes(), existing.as_ref())
        .map_err(|e| io_error(&e, &args.path))?;
    let verb = if existing.is_some() {
        "replaced"
    } else {
        "created"
    };
    Ok(ToolOutput::text(format!(
        "{verb} {} ({} bytes written)",
        args.path,
        args.content.len()
    )))
}

fn write_atomically(
    dir: &Path,
    target: &Path,
    bytes: &[u8],
    existing: Option<&std::fs::Metadata>,
) -> std::io::Result<()> {
    let mut temp = tempfile::Builder::new()
        .prefix(".corral-write-")
        .tempfile_in(dir)?;
    temp.write_all(bytes)?;
    temp.as_file().sync_all()?;
    if let Some(meta) = existing {
        temp.as_file().set_permissions(meta.permissions())?;
    }
    temp.persist(target).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::output::testing::session;
    use super::*;
    use serde_json::json;

    async fn write(ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        WriteFile.call(args, ctx).await
    }

    #[tokio::test]
    async fn creates_parents_and_reports_bytes() {
        let (_tmp, ctx) = session();
        let out = write(&ctx, json!({"path": "a/b/c.txt", "content": "héllo\n"}))
            .await
            .unwrap();
        assert_eq!(out.text, "created a/b/c.txt (7 bytes written)");
        assert_eq!(
            std::fs::read_to_string(ctx.root.join("a/b/c.txt")).unwrap(),
            "héllo\n"
        );
        let out = write(&ctx, json!({"path": "a/b/c.txt", "content": "x"}))
            .await
            .unwrap();
        assert!(out.text.starts_with("replaced"));
    }

    #[tokio::test]
    async fn keeps_permissions_and_leaves_no_temp_files() {
        use std::os::unix::fs::PermissionsExt;
        let (_tmp, ctx) = session();
        let path = ctx.root.join("run.sh");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        write(&ctx, json!({"path": "run.sh", "content": "new"}))
            .await
            .unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
        let names: Vec<_> = std::fs::read_dir(&ctx.root)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    #[tokio::test]
    async fn refuses_outside_paths_symlink_escapes_and_directories() {
        let (tmp, ctx) = session();
        for path in ["../escape.txt", "/etc/corral-test", "sub/../../x"] {
            let e = write(&ctx, json!({"path": path, "content": "x"}))
                .await
                .unwrap_err();
            assert!(matches!(e, ToolError::OutsideRoot(_)), "{path}: {e}");
        }
        std::os::unix::fs::symlink(tmp.path(), ctx.root.join("link")).unwrap();
        let e = write(&ctx, json!({"path": "link/x.txt", "content": "x"}))
            .await
            .unwrap_err();
        assert!(matches!(e, ToolError::OutsideRoot(_)), "{e}");
        assert!(!tmp.path().join("x.txt").exists());
        std::fs::create_dir(ctx.root.join("d")).unwrap();
        let e = write(&ctx, json!({"path": "d", "content": "x"}))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("directory"), "{e}");
    }
}
