//! The files an edit reads and writes: through the editor when one serves reads or writes (so
//! what is edited is the buffer a person sees, unsaved changes included), else the disk,
//! always opened beneath the root by the kernel, and written by `write_file`'s atomic write.

use std::io::Read;

use super::super::output::{MAX_FILE_BYTES, human_size, looks_binary, run_blocking};
use super::super::{ToolContext, ToolError, editor, write};
use crate::sandbox::paths::{PathError, RootDir};

/// The text of `path` now; `None` when there is no such file.
pub(super) async fn current(ctx: &ToolContext, path: &str) -> Result<Option<String>, ToolError> {
    if let Some(link) = ctx.settings.editor.as_ref().filter(|e| e.0.reads()) {
        return match editor::fetch(&link.0, ctx, path, None).await {
            Err(ToolError::NotFound(_)) => Ok(None),
            other => other.map(Some),
        };
    }
    let path = path.to_owned();
    run_blocking(ctx, move |ctx| {
        let root = RootDir::open(&ctx.root)?;
        read_disk(&root, &path)
    })
    .await
}

/// The text of `path` on disk, for an edit: UTF-8 text, at most the read limit. `None` when
/// there is no such file.
pub(crate) fn read_disk(root: &RootDir, path: &str) -> Result<Option<String>, ToolError> {
    let mut file = match root.open_file(path) {
        Err(PathError::Io {
            kind: std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory,
            ..
        }) => return Ok(None),
        opened => opened?,
    };
    let io = |e: std::io::Error| ToolError::Io(format!("{path}: {e}"));
    let meta = file.metadata().map_err(io)?;
    if meta.is_dir() {
        return Err(ToolError::Refused(format!(
            "{path} is a directory; only files are edited"
        )));
    }
    if !meta.is_file() {
        return Err(ToolError::Refused(format!(
            "{path} is not a regular file; only files are edited"
        )));
    }
    let mut bytes = Vec::new();
    // One byte over the limit is enough to know a file that grew since is too big.
    (&mut file)
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(ToolError::Refused(format!(
            "{path} is over {}; too large to edit",
            human_size(MAX_FILE_BYTES)
        )));
    }
    if looks_binary(&bytes) {
        return Err(ToolError::Refused(format!(
            "{path} is a binary file; only text is edited"
        )));
    }
    String::from_utf8(bytes).map(Some).map_err(|_| {
        ToolError::Refused(format!(
            "{path} is not UTF-8 text; only UTF-8 files are edited (write_file can replace it)"
        ))
    })
}

/// Writes `content` to `path`: into the editor when it serves writes, else atomically on disk.
pub(super) async fn put(ctx: &ToolContext, path: &str, content: String) -> Result<(), ToolError> {
    if let Some(link) = ctx.settings.editor.as_ref().filter(|e| e.0.writes()) {
        return editor::write(&link.0, ctx, path, content).await.map(drop);
    }
    let path = path.to_owned();
    run_blocking(ctx, move |ctx| {
        write::write_text(ctx, &path, content.as_bytes()).map(drop)
    })
    .await
}

/// Deletes `path` on disk (an editor link has no way to delete).
pub(super) async fn delete(ctx: &ToolContext, path: &str) -> Result<(), ToolError> {
    let path = path.to_owned();
    run_blocking(ctx, move |ctx| write::remove_file(ctx, &path)).await
}
