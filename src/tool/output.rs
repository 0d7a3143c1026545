//! What the file tools share: shaping what they hand back to the model (long output cut to size
//! keeping both ends, since the head says what the output is and the tail holds the final result
//! or error; sizes; error wording) and running their blocking work.

use std::borrow::Cow;
use std::io;
use std::path::Path;

use ignore::WalkBuilder;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{ToolContext, ToolError};
use crate::sandbox::paths::{PathError, RootDir};

/// Largest file read whole, and the most text one ranged read may return.
pub(super) const MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;
/// A NUL byte this early means binary, as git and ripgrep decide.
pub(super) const BINARY_SNIFF_BYTES: usize = 8 * 1024;

/// How far (in bytes) a cut may move to land on a line break instead of mid-line.
const LINE_SNAP: usize = 200;
/// Room kept for the omission marker so the result stays close to `max_bytes`.
const MARKER_RESERVE: usize = 40;

/// Returns `text` unchanged when it fits in `max_bytes`; otherwise keeps about 60% from the
/// start and 40% from the end, on char (and, when one is near, line) boundaries, with a line
/// `[… N bytes omitted …]` in between.
pub fn cut_head_tail(text: &str, max_bytes: usize) -> Cow<'_, str> {
    if text.len() <= max_bytes {
        return Cow::Borrowed(text);
    }
    let budget = max_bytes.saturating_sub(MARKER_RESERVE);
    let head_budget = budget * 3 / 5;
    let tail_budget = budget - head_budget;

    let mut head_end = floor_boundary(text, head_budget);
    if let Some(nl) = text[..head_end].rfind('\n')
        && head_end - (nl + 1) <= LINE_SNAP
    {
        head_end = nl + 1;
    }
    // text.len() > max_bytes >= budget, so the tail never starts before the head ends.
    let mut tail_start = ceil_boundary(text, text.len() - tail_budget);
    if let Some(nl) = text[tail_start..].find('\n')
        && nl < LINE_SNAP
        && tail_start + nl + 1 < text.len()
    {
        tail_start += nl + 1;
    }

    let head = &text[..head_end];
    let tail = &text[tail_start..];
    let omitted = tail_start - head_end;
    let sep = if head.is_empty() || head.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    Cow::Owned(format!("{head}{sep}[… {omitted} bytes omitted …]\n{tail}"))
}

/// Sizes as people read them: `812 B`, `1.2 KiB`, `3.4 MiB`.
pub(super) fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let (mut value, mut unit) = (bytes as f64 / 1024.0, 0);
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// Arguments that do not fit are reported to the model, which can retry.
pub(super) fn parse_args<T: serde::de::DeserializeOwned>(args: Value) -> Result<T, ToolError> {
    serde_json::from_value(args).map_err(|e| ToolError::InvalidArguments(e.to_string()))
}

/// I/O errors worded for the model, naming the path as it gave it.
pub(super) fn io_error(e: &io::Error, shown: &str) -> ToolError {
    match e.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory => ToolError::NotFound(format!(
            "{shown} does not exist (paths are relative to the working directory)"
        )),
        _ => ToolError::Io(format!("{shown}: {e}")),
    }
}

// Refusals name the path as the model wrote it, plus the root, so it can correct itself.
impl From<PathError> for ToolError {
    fn from(e: PathError) -> Self {
        match &e {
            PathError::OutsideRoot { requested, root } => ToolError::OutsideRoot(format!(
                "{requested} (the session root is {})",
                root.display()
            )),
            PathError::Invalid { .. } => ToolError::InvalidArguments(e.to_string()),
            PathError::Guarded { .. } => ToolError::Refused(e.to_string()),
            PathError::Io {
                requested,
                kind: io::ErrorKind::NotFound | io::ErrorKind::NotADirectory,
                ..
            } => ToolError::NotFound(format!(
                "{requested} does not exist (paths are relative to the working directory)"
            )),
            PathError::Io { .. } => ToolError::Io(e.to_string()),
        }
    }
}

/// The session root, opened for this call: file tools open every path through it, so the
/// kernel keeps them inside.
pub(super) fn open_root(ctx: &ToolContext) -> Result<RootDir, ToolError> {
    Ok(RootDir::open(&ctx.root)?)
}

pub(super) fn looks_binary(bytes: &[u8]) -> bool {
    memchr::memchr(0, &bytes[..bytes.len().min(BINARY_SNIFF_BYTES)]).is_some()
}

/// File bytes as text: UTF-8 as it is; otherwise, unless it holds a NUL byte (binary),
/// Latin-1 (ISO-8859-1: every byte is the character of that code), with `true` so the caller
/// can say so. Latin-1 text is common in old sources and logs; refusing it as binary hid it.
pub(super) fn decode_text(bytes: Vec<u8>) -> Option<(String, bool)> {
    match String::from_utf8(bytes) {
        Ok(text) => Some((text, false)),
        Err(e) if memchr::memchr(0, e.as_bytes()).is_some() => None,
        Err(e) => Some((e.as_bytes().iter().map(|&b| char::from(b)).collect(), true)),
    }
}

/// Runs filesystem work off the async threads; a cancelled call returns at once even if the
/// work is stuck in a slow read (the work itself also watches the token and stops).
pub(super) async fn run_blocking<T: Send + 'static>(
    ctx: &ToolContext,
    work: impl FnOnce(&ToolContext) -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    let owned = ctx.clone();
    let task = tokio::task::spawn_blocking(move || work(&owned));
    tokio::select! {
        biased;
        () = ctx.cancel.cancelled() => Err(ToolError::Cancelled),
        joined = task => joined.map_err(|e| ToolError::Io(format!("tool task failed: {e}")))?,
    }
}

pub(super) fn check(cancel: &CancellationToken) -> Result<(), ToolError> {
    if cancel.is_cancelled() {
        Err(ToolError::Cancelled)
    } else {
        Ok(())
    }
}

/// The walk both listing and searching use: .gitignore/.ignore honoured even outside a git
/// repository (a fresh project has no .git yet), hidden files shown, `.git` itself hidden.
///
/// The walk goes by path, not through descriptors, so it must never follow symlinks: a link
/// (even one leading outside the root) is listed as an entry, never descended into. `dir`
/// should come from [`RootDir::locate`]; file contents are then read with
/// [`RootDir::open_file`], which the kernel keeps inside the root even if an entry is swapped
/// for a symlink after the walk saw it. What remains by path is names and sizes in a listing.
pub(super) fn walker(dir: &Path, gitignore: bool) -> WalkBuilder {
    let mut walk = WalkBuilder::new(dir);
    walk.standard_filters(gitignore)
        .hidden(false)
        .require_git(false)
        .follow_links(false);
    if gitignore {
        walk.filter_entry(|e| e.file_name() != ".git");
    }
    walk
}

fn floor_boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn ceil_boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

/// Scratch sessions for the tool tests.
#[cfg(test)]
pub(super) mod testing {
    use super::super::ToolContext;

    /// A session rooted at `<tmp>/root`, so tests can place files just outside it.
    pub(crate) fn session() -> (tempfile::TempDir, ToolContext) {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        std::fs::create_dir(&root).unwrap();
        let root = root.canonicalize().unwrap();
        let mut ctx = ToolContext::new(root, "c1");
        ctx.max_output_bytes = 1 << 20;
        (tmp, ctx)
    }

    pub(crate) fn put(ctx: &ToolContext, rel: &str, text: &str) {
        let path = ctx.root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn omitted(out: &str) -> usize {
        let start = out.find("[… ").unwrap() + "[… ".len();
        let end = out[start..].find(' ').unwrap() + start;
        out[start..end].parse().unwrap()
    }

    #[test]
    fn short_text_is_borrowed_unchanged() {
        assert!(matches!(cut_head_tail("hello", 5), Cow::Borrowed("hello")));
        assert!(matches!(cut_head_tail("", 0), Cow::Borrowed("")));
    }

    #[test]
    fn long_text_keeps_head_and_tail_and_counts_the_gap() {
        let text: String = (0..1000).map(|i| format!("line {i:04}\n")).collect();
        let out = cut_head_tail(&text, 2000);
        assert!(out.starts_with("line 0000\n"));
        assert!(out.ends_with("line 0999\n"));
        assert!(out.len() <= 2000, "{}", out.len());
        // Cuts land on line boundaries, so every kept line is whole.
        for line in out.lines().filter(|l| !l.starts_with("[…")) {
            assert_eq!(line.len(), 9, "{line:?}");
        }
        let marker = format!("[… {} bytes omitted …]", omitted(&out));
        let kept = out.replace(&format!("{marker}\n"), "");
        assert_eq!(kept.len() + omitted(&out), text.len());
        // Roughly 60/40.
        let head = out.find("[…").unwrap();
        assert!(head > out.len() / 2, "head {head} of {}", out.len());
    }

    #[test]
    fn multibyte_text_is_cut_on_char_boundaries() {
        let text = "é日本🦀".repeat(500); // no newlines: char boundaries only
        for max in [0, 1, 7, 41, 50, 333, 1001, 4096] {
            let out = cut_head_tail(&text, max);
            assert!(out.contains("bytes omitted"), "max {max}");
            let head_len = out.find("[…").unwrap();
            let tail = &out[out.find("…]\n").unwrap() + "…]\n".len()..];
            let stripped = head_len - usize::from(head_len > 0); // the inserted newline
            assert_eq!(
                stripped + tail.len() + omitted(&out),
                text.len(),
                "max {max}"
            );
            assert!(text.starts_with(&out[..stripped]) && text.ends_with(tail));
        }
    }

    #[test]
    fn sizes_read_naturally() {
        let cases = [
            (0, "0 B"),
            (1023, "1023 B"),
            (1300, "1.3 KiB"),
            (11 << 20, "11.0 MiB"),
        ];
        for (bytes, text) in cases {
            assert_eq!(human_size(bytes), text);
        }
        assert_eq!(human_size(5 << 40), "5.0 TiB");
    }

    #[test]
    fn path_errors_become_tool_errors_naming_the_path() {
        let outside = PathError::OutsideRoot {
            requested: "../x".into(),
            root: "/r".into(),
        };
        let err = ToolError::from(outside);
        assert_eq!(
            err.to_string(),
            "path outside the session root: ../x (the session root is /r)"
        );
        let kind = io::ErrorKind::PermissionDenied;
        let denied = PathError::Io {
            requested: "a".into(),
            kind,
            message: "denied".into(),
        };
        assert!(matches!(ToolError::from(denied), ToolError::Io(m) if m.contains("a: denied")));
        let missing = io::Error::from(io::ErrorKind::NotFound);
        assert!(
            matches!(io_error(&missing, "b.txt"), ToolError::NotFound(m) if m.starts_with("b.txt"))
        );
    }

    #[test]
    fn no_line_break_nearby_means_a_mid_line_cut() {
        let text = format!("{}\n{}", "a".repeat(5000), "b".repeat(5000));
        let out = cut_head_tail(&text, 1000);
        assert!(out.starts_with(&"a".repeat(500)));
        assert!(out.ends_with(&"b".repeat(300)));
        assert!(out.contains("a\n[… "));
    }
}
