//! An editor that serves file reads and writes (ACP's `fs/read_text_file` and
//! `fs/write_text_file`): `read_file` then sees its unsaved buffers and `write_file` lands in
//! them. Paths are still confined: each is resolved beneath the session root by the kernel
//! first, and only that resolved absolute path goes to the editor. The gate has decided
//! before a tool runs, as for any call.

use std::fmt;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::Arc;

use super::output::{MAX_FILE_BYTES, human_size, open_root};
use super::{ToolContext, ToolError, ToolOutput, cut_head_tail};
use crate::sandbox::paths::Existing;

pub type EditorFuture<T> = std::pin::Pin<Box<dyn Future<Output = Result<T, String>> + Send>>;

pub trait Editor: Send + Sync {
    /// The editor serves reads.
    fn reads(&self) -> bool;
    /// The editor serves writes.
    fn writes(&self) -> bool;
    /// `path` absolute; `line` 1-based; `limit` in lines.
    fn read_text(
        &self,
        path: PathBuf,
        line: Option<u64>,
        limit: Option<u64>,
    ) -> EditorFuture<String>;
    fn write_text(&self, path: PathBuf, content: String) -> EditorFuture<()>;
}

/// The editor a session's tools use, comparable and printable as settings are.
#[derive(Clone)]
pub struct EditorLink(pub Arc<dyn Editor>);

impl fmt::Debug for EditorLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "EditorLink(reads: {}, writes: {})",
            self.0.reads(),
            self.0.writes()
        )
    }
}

impl PartialEq for EditorLink {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

fn refused(e: String) -> ToolError {
    ToolError::Refused(format!("the editor refused: {e}"))
}

/// `read_file` through the editor: the path resolved beneath the root, the lines asked for.
pub async fn read(
    editor: &Arc<dyn Editor>,
    ctx: &ToolContext,
    path: &str,
    range: Option<(u64, u64)>,
    numbered: bool,
) -> Result<ToolOutput, ToolError> {
    let mut text = fetch(editor, ctx, path, range).await?;
    if text.is_empty() {
        return Ok(ToolOutput::text("(empty file)"));
    }
    if numbered {
        text = super::edit::number_lines(&text, range.map_or(1, |(start, _)| start));
    }
    Ok(ToolOutput::text(
        match cut_head_tail(&text, ctx.max_output_bytes) {
            std::borrow::Cow::Borrowed(_) => text,
            std::borrow::Cow::Owned(cut) => {
                format!("{cut}\n[output shortened; read the rest with startLine/endLine]")
            }
        },
    ))
}

/// The text the editor has for `path` (its unsaved buffer, if one is open), the lines asked
/// for or, without a range, all of it up to the size limit.
pub(super) async fn fetch(
    editor: &Arc<dyn Editor>,
    ctx: &ToolContext,
    path: &str,
    range: Option<(u64, u64)>,
) -> Result<String, ToolError> {
    let located = open_root(ctx)?.locate(path)?;
    if located.is_dir {
        return Err(ToolError::InvalidArguments(format!(
            "{path} is a directory; use list_directory to see what it contains"
        )));
    }
    let (line, limit) = match range {
        Some((start, end)) => (Some(start), Some(end - start + 1)),
        None => (None, None),
    };
    let text = editor
        .read_text(located.path, line, limit)
        .await
        .map_err(refused)?;
    if range.is_none() && text.len() as u64 > MAX_FILE_BYTES {
        let (size, limit) = (human_size(text.len() as u64), human_size(MAX_FILE_BYTES));
        return Err(ToolError::Refused(format!(
            "{path} is {size} (over the {limit} limit); read part of it with startLine and endLine"
        )));
    }
    Ok(text)
}

/// `write_file` through the editor: the directory opened beneath the root (missing parents
/// created), the kernel's absolute name for it plus the file name sent to the editor.
pub async fn write(
    editor: &Arc<dyn Editor>,
    ctx: &ToolContext,
    path: &str,
    content: String,
) -> Result<ToolOutput, ToolError> {
    let target = open_root(ctx)?.prepare_write(path)?;
    if target.existing == Existing::Directory {
        return Err(ToolError::Refused(format!(
            "{path} is a directory; write_file writes files"
        )));
    }
    let dir = std::fs::read_link(format!("/proc/self/fd/{}", target.dir.as_raw_fd()))
        .map_err(|e| ToolError::Refused(format!("cannot name {path} for the editor: {e}")))?;
    if !dir.starts_with(&ctx.root) {
        return Err(ToolError::Refused(format!(
            "{path} is outside the session root"
        )));
    }
    let bytes = content.len();
    editor
        .write_text(dir.join(&target.name), content)
        .await
        .map_err(refused)?;
    let verb = if target.existing == Existing::Nothing {
        "created"
    } else {
        "replaced"
    };
    Ok(ToolOutput::text(format!(
        "{verb} {path} in the editor ({bytes} bytes written)"
    )))
}

#[cfg(test)]
#[path = "editor_tests.rs"]
pub(super) mod tests;
