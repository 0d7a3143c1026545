//! File-reading tools: `read_file` and `list_directory`.

use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::output::{
    BINARY_SNIFF_BYTES, MAX_FILE_BYTES, check, decode_text, human_size, io_error, looks_binary,
    open_root, parse_args, run_blocking, walker,
};
use super::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput, cut_head_tail};

const MAX_ENTRIES: usize = 1000;
/// Entries kept for sorting; beyond this a huge tree is only counted, to bound memory.
const MAX_COLLECTED: usize = 100_000;
const MAX_DEPTH: usize = 6;

pub(crate) struct ReadFile;
pub(crate) struct ListDirectory;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ReadArgs {
    path: String,
    start_line: Option<i64>,
    end_line: Option<i64>,
    /// Each line prefixed with its number (see `edit::number_lines`).
    line_numbers: Option<bool>,
}

impl Tool for ReadFile {
    fn name(&self) -> &'static str {
        "read_file"
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let args: ReadArgs = parse_args(args)?;
            if let Some(editor) = ctx.settings.editor.as_ref().filter(|e| e.0.reads()) {
                let range = line_range(&args)?;
                let numbered = args.line_numbers.unwrap_or(false);
                return super::editor::read(&editor.0, ctx, &args.path, range, numbered).await;
            }
            let text = run_blocking(ctx, move |ctx| read_file(ctx, &args)).await?;
            let cut = cut_head_tail(&text, ctx.max_output_bytes);
            Ok(ToolOutput::text(match cut {
                std::borrow::Cow::Borrowed(_) => text,
                std::borrow::Cow::Owned(cut) => {
                    format!("{cut}\n[output shortened; read the rest with startLine/endLine]")
                }
            }))
        })
    }
}

/// The 1-based inclusive line range asked for, if any.
fn line_range(args: &ReadArgs) -> Result<Option<(u64, u64)>, ToolError> {
    Ok(match (args.start_line, args.end_line) {
        (None, None) => None,
        (start, end) => {
            let (start, end) = (start.unwrap_or(1), end.unwrap_or(i64::MAX));
            if start < 1 || end < start {
                return Err(ToolError::InvalidArguments(format!(
                    "need 1 <= startLine <= endLine (got startLine {start}, endLine {end})"
                )));
            }
            Some((start.unsigned_abs(), end.unsigned_abs()))
        }
    })
}

fn read_file(ctx: &ToolContext, args: &ReadArgs) -> Result<String, ToolError> {
    let range = line_range(args)?;
    let shown = args.path.as_str();
    let io = |e: io::Error| io_error(&e, shown);
    // Opened beneath the root by the kernel; the checks below and the read are all of this
    // one open file, so nothing swapped in afterwards is read.
    let mut file = open_root(ctx)?.open_file(shown)?;
    let meta = file.metadata().map_err(io)?;
    if meta.is_dir() {
        return Err(ToolError::InvalidArguments(format!(
            "{shown} is a directory; use list_directory to see what it contains"
        )));
    }
    if !meta.is_file() {
        return Err(ToolError::Refused(format!(
            "{shown} is not a regular file (a FIFO, socket or device); read_file reads files"
        )));
    }
    let size = meta.len();
    let binary = || {
        ToolError::Refused(format!(
            "{shown} is a binary file ({size} bytes); read_file only returns text"
        ))
    };
    if size == 0 {
        return Ok("(empty file)".into());
    }
    if range.is_none() && size > MAX_FILE_BYTES {
        let (size, limit) = (human_size(size), human_size(MAX_FILE_BYTES));
        return Err(ToolError::Refused(format!(
            "{shown} is {size} (over the {limit} limit); read part of it with startLine and endLine"
        )));
    }
    // Whole files go through the same line loop: it stops at the cap and the end of file.
    let (start, end) = range.unwrap_or((1, u64::MAX));
    let mut sniff = Vec::with_capacity(BINARY_SNIFF_BYTES);
    let mut sniffer = (&mut file).take(BINARY_SNIFF_BYTES as u64);
    sniffer.read_to_end(&mut sniff).map_err(io)?;
    if looks_binary(&sniff) {
        return Err(binary());
    }
    let mut reader = BufReader::with_capacity(1 << 16, sniff.as_slice().chain(file));
    let (mut line, mut out) = (1, Vec::new());
    while line <= end {
        check(&ctx.cancel)?;
        let more = if line < start {
            skip_line(&mut reader).map_err(io)?
        } else {
            // One byte over the cap is enough to know the range is too big.
            let budget = (MAX_FILE_BYTES + 1).saturating_sub(out.len() as u64);
            let mut limited = (&mut reader).take(budget);
            limited.read_until(b'\n', &mut out).map_err(io)? > 0
        };
        if !more && line <= start {
            let lines = line - 1;
            return Err(ToolError::InvalidArguments(format!(
                "startLine {start} is past the end of {shown} ({lines} lines)"
            )));
        } else if !more {
            break;
        } else if out.len() as u64 > MAX_FILE_BYTES {
            let limit = human_size(MAX_FILE_BYTES);
            return Err(ToolError::Refused(format!(
                "the lines asked for from {shown} are over {limit}; ask for fewer lines"
            )));
        }
        line += 1;
    }
    let (mut text, latin1) = decode_text(out).ok_or_else(binary)?;
    if args.line_numbers.unwrap_or(false) {
        text = super::edit::number_lines(&text, start);
    }
    if line > end && !reader.fill_buf().map_err(io)?.is_empty() {
        let sep = if text.ends_with('\n') { "" } else { "\n" };
        let total = if size <= MAX_FILE_BYTES {
            // Counting is cheap below the cap; above it, the size says enough.
            let mut total = end;
            while skip_line(&mut reader).map_err(io)? {
                check(&ctx.cancel)?;
                total += 1;
            }
            format!("{total} lines")
        } else {
            human_size(size)
        };
        text.push_str(&format!("{sep}[… file continues: {total} total]"));
    }
    if latin1 {
        let sep = if text.ends_with('\n') { "" } else { "\n" };
        text.push_str(&format!(
            "{sep}[{shown} is not UTF-8: it was read as Latin-1 (ISO-8859-1)]"
        ));
    }
    Ok(text)
}

/// Consumes one line without storing it; false at end of file.
fn skip_line(reader: &mut impl BufRead) -> io::Result<bool> {
    let mut consumed_any = false;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(consumed_any);
        }
        consumed_any = true;
        let (len, done) = match memchr::memchr(b'\n', buf) {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        reader.consume(len);
        if done {
            return Ok(true);
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    path: Option<String>,
    recursive: Option<bool>,
    gitignore: Option<bool>,
}

impl Tool for ListDirectory {
    fn name(&self) -> &'static str {
        "list_directory"
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let args: ListArgs = parse_args(args)?;
            let text = run_blocking(ctx, move |ctx| list_directory(ctx, &args)).await?;
            Ok(ToolOutput::text(cut_head_tail(&text, ctx.max_output_bytes)))
        })
    }
}

/// One listed entry; `key` orders a tree: directories before files at every level, each
/// directory followed by its contents.
struct Entry {
    key: Vec<(bool, String)>,
    line: String,
}

fn list_directory(ctx: &ToolContext, args: &ListArgs) -> Result<String, ToolError> {
    let shown = args.path.as_deref().unwrap_or(".");
    let recursive = args.recursive.unwrap_or(false);
    let gitignore = args.gitignore.unwrap_or(true);
    let found = open_root(ctx)?.locate(shown)?;
    if !found.is_dir {
        return Err(ToolError::InvalidArguments(format!(
            "{shown} is a file, not a directory; use read_file to read it"
        )));
    }
    let dir = found.path;
    let mut walk = walker(&dir, gitignore);
    walk.max_depth(Some(if recursive { MAX_DEPTH } else { 1 }));
    let (mut entries, mut total) = (Vec::new(), 0usize);
    for result in walk.build() {
        check(&ctx.cancel)?;
        let Ok(entry) = result else { continue };
        if entry.depth() == 0 {
            continue;
        }
        total += 1;
        if entries.len() >= MAX_COLLECTED {
            continue;
        }
        let rel = entry.path().strip_prefix(&dir).unwrap_or(entry.path());
        entries.push(describe(entry.path(), rel, entry.file_type()));
    }
    if total == 0 {
        return Ok("(empty directory)".into());
    }
    entries.sort_unstable_by(|a, b| a.key.cmp(&b.key));
    let mut out: String = entries
        .iter()
        .take(MAX_ENTRIES)
        .map(|e| e.line.clone() + "\n")
        .collect();
    if let Some(more) = total.checked_sub(MAX_ENTRIES).filter(|&n| n > 0) {
        out.push_str(&format!("[… {more} more entries not shown]\n"));
    }
    Ok(out)
}

/// Describes an entry by path without following it: a symlink shows where it points.
fn describe(path: &Path, rel: &Path, kind: Option<std::fs::FileType>) -> Entry {
    let is_dir = kind.is_some_and(|k| k.is_dir());
    // `false` sorts first; every ancestor is a directory.
    let name_of = |c: std::path::Component| c.as_os_str().to_string_lossy().into_owned();
    let mut key: Vec<_> = rel.components().map(|c| (false, name_of(c))).collect();
    if let Some(last) = key.last_mut() {
        last.0 = !is_dir;
    }
    let name = rel.to_string_lossy();
    let line = if is_dir {
        format!("{name}/")
    } else if kind.is_some_and(|k| k.is_symlink()) {
        let target = std::fs::read_link(path).map_or("?".into(), |t| t.display().to_string());
        format!("{name} -> {target}")
    } else {
        match std::fs::symlink_metadata(path) {
            Ok(meta) => format!("{name}  {}", human_size(meta.len())),
            Err(_) => name.into_owned(),
        }
    };
    Entry { key, line }
}

#[cfg(test)]
mod tests {
    use super::super::output::testing::{put, session};
    use super::*;
    use serde_json::json;
    use std::fs::File;
    use std::io::Write;
    use std::os::unix::fs::symlink;

    async fn read(ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        ReadFile.call(args, ctx).await.map(|o| o.text)
    }

    async fn list(ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        ListDirectory.call(args, ctx).await.map(|o| o.text)
    }

    fn says(result: Result<String, ToolError>, text: &str) -> bool {
        result.is_err_and(|e| e.to_string().contains(text))
    }

    #[tokio::test]
    async fn reads_whole_files_and_line_ranges() {
        let (_t, ctx) = session();
        put(&ctx, "a.txt", "one\ntwo\nthree\nfour\n");
        put(&ctx, "b.txt", "x\ny");
        put(&ctx, "empty.txt", "");
        let lines = |s: i64, e: i64| json!({"path": "a.txt", "startLine": s, "endLine": e});
        let more = "[… file continues: 4 lines total]";
        let cases = [
            (
                json!({"path": "a.txt"}),
                "one\ntwo\nthree\nfour\n".to_owned(),
            ),
            (lines(2, 3), format!("two\nthree\n{more}")),
            (lines(3, 99), "three\nfour\n".into()),
            (
                json!({"path": "a.txt", "endLine": 1}),
                format!("one\n{more}"),
            ),
            (json!({"path": "b.txt", "startLine": 2}), "y".into()),
            (json!({"path": "empty.txt"}), "(empty file)".into()),
        ];
        for (args, expected) in cases {
            assert_eq!(read(&ctx, args.clone()).await.unwrap(), expected, "{args}");
        }
        let past_end = json!({"path": "a.txt", "startLine": 5});
        let bad = [
            lines(3, 2),
            lines(0, 1),
            past_end,
            json!({"path": 1}),
            json!({}),
        ];
        for args in bad {
            let err = read(&ctx, args.clone()).await.unwrap_err();
            assert!(
                matches!(err, ToolError::InvalidArguments(_)),
                "{args}: {err:?}"
            );
        }
    }

    #[tokio::test]
    async fn line_numbers_are_the_lines_own_whatever_the_range() {
        let (_t, ctx) = session();
        put(&ctx, "a.txt", "one\ntwo\nthree\n");
        let all = read(&ctx, json!({"path": "a.txt", "lineNumbers": true})).await;
        assert_eq!(all.unwrap(), "   1│ one\n   2│ two\n   3│ three\n");
        let part = json!({"path": "a.txt", "startLine": 2, "endLine": 2, "lineNumbers": true});
        let part = read(&ctx, part).await.unwrap();
        assert_eq!(part, "   2│ two\n[… file continues: 3 lines total]");
        let plain = read(&ctx, json!({"path": "a.txt", "lineNumbers": false})).await;
        assert_eq!(plain.unwrap(), "one\ntwo\nthree\n");
    }

    #[tokio::test]
    async fn binary_files_directories_and_missing_files_are_refused() {
        let (_t, ctx) = session();
        std::fs::write(ctx.root.join("x.bin"), b"ab\0cd").unwrap();
        std::fs::write(ctx.root.join("latin1.txt"), b"caf\xe9\n").unwrap();
        std::fs::create_dir(ctx.root.join("d")).unwrap();
        let msg = "x.bin is a binary file (5 bytes); read_file only returns text";
        for args in [
            json!({"path": "x.bin"}),
            json!({"path": "x.bin", "startLine": 1}),
        ] {
            assert_eq!(read(&ctx, args).await, Err(ToolError::Refused(msg.into())));
        }
        let latin1 = read(&ctx, json!({"path": "latin1.txt"})).await.unwrap();
        assert_eq!(
            latin1,
            "caf\u{e9}\n[latin1.txt is not UTF-8: it was read as Latin-1 (ISO-8859-1)]"
        );
        std::fs::write(
            ctx.root.join("late_nul.txt"),
            [&[b'a'; 9000][..], b"\xe9\0\n"].concat(),
        )
        .unwrap();
        assert!(says(
            read(&ctx, json!({"path": "late_nul.txt"})).await,
            "late_nul.txt is a binary file"
        ));
        assert!(says(
            read(&ctx, json!({"path": "d"})).await,
            "use list_directory"
        ));
        let err = read(&ctx, json!({"path": "nope/x.txt"})).await.unwrap_err();
        assert!(matches!(&err, ToolError::NotFound(m) if m.contains("nope/x.txt")));
    }

    #[tokio::test]
    async fn paths_outside_the_root_are_refused() {
        let (tmp, ctx) = session();
        let secret = tmp.path().join("secret");
        std::fs::write(&secret, "s").unwrap();
        symlink(&secret, ctx.root.join("link")).unwrap();
        for path in ["../secret", "link", secret.to_str().unwrap()] {
            let err = read(&ctx, json!({ "path": path })).await.unwrap_err();
            assert!(matches!(err, ToolError::OutsideRoot(_)), "{path}: {err:?}");
        }
        let err = list(&ctx, json!({"path": ".."})).await.unwrap_err();
        assert!(matches!(err, ToolError::OutsideRoot(_)), "{err:?}");
    }

    #[tokio::test]
    async fn huge_files_need_a_line_range() {
        let (_t, ctx) = session();
        let line = format!("{}\n", "x".repeat(99));
        let mut file = File::create(ctx.root.join("big.log")).unwrap();
        for _ in 0..(11 << 20) / 100 {
            file.write_all(line.as_bytes()).unwrap();
        }
        assert!(says(
            read(&ctx, json!({"path": "big.log"})).await,
            "startLine and endLine"
        ));
        let part = json!({"path": "big.log", "startLine": 2, "endLine": 3});
        let expected = format!("{line}{line}[… file continues: 11.0 MiB total]");
        assert_eq!(read(&ctx, part).await.unwrap(), expected);
        // All NULs: the size check comes first, so the useful message wins.
        File::create(ctx.root.join("sparse"))
            .unwrap()
            .set_len(11 << 20)
            .unwrap();
        let sparse = read(&ctx, json!({"path": "sparse"})).await;
        assert!(says(sparse, "is 11.0 MiB (over the 10.0 MiB limit)"));
    }

    #[tokio::test]
    async fn long_output_is_cut_with_a_hint() {
        let (_t, mut ctx) = session();
        ctx.max_output_bytes = 1000;
        put(&ctx, "a.txt", &"some line of text\n".repeat(500));
        let out = read(&ctx, json!({"path": "a.txt"})).await.unwrap();
        assert!(out.contains("bytes omitted") && out.ends_with("startLine/endLine]"));
    }

    #[tokio::test]
    async fn cancellation_stops_reads_and_walks() {
        let (_t, ctx) = session();
        put(&ctx, "a.txt", "one\ntwo\n");
        ctx.cancel.cancel();
        let args = parse_args(json!({"path": "a.txt", "startLine": 1})).unwrap();
        assert_eq!(read_file(&ctx, &args), Err(ToolError::Cancelled));
        let args = parse_args(json!({"recursive": true})).unwrap();
        assert_eq!(list_directory(&ctx, &args), Err(ToolError::Cancelled));
        assert_eq!(list(&ctx, json!({})).await, Err(ToolError::Cancelled));
    }

    #[tokio::test]
    async fn lists_directories_first_with_sizes() {
        let (_t, ctx) = session();
        put(&ctx, "b.txt", "hello");
        put(&ctx, "a/inner.rs", &"x".repeat(1300));
        put(&ctx, ".hidden", "");
        std::fs::create_dir(ctx.root.join("z")).unwrap();
        symlink("../elsewhere", ctx.root.join("link")).unwrap();
        let top = "z/\n.hidden  0 B\nb.txt  5 B\nlink -> ../elsewhere\n";
        assert_eq!(list(&ctx, json!({})).await.unwrap(), format!("a/\n{top}"));
        let all = list(&ctx, json!({"path": ".", "recursive": true})).await;
        assert_eq!(all.unwrap(), format!("a/\na/inner.rs  1.3 KiB\n{top}"));
        let sub = list(&ctx, json!({"path": "a"})).await;
        assert_eq!(sub.unwrap(), "inner.rs  1.3 KiB\n");
        let empty = list(&ctx, json!({"path": "z"})).await;
        assert_eq!(empty.unwrap(), "(empty directory)");
        assert!(says(
            list(&ctx, json!({"path": "b.txt"})).await,
            "use read_file"
        ));
        let err = list(&ctx, json!({"path": "missing"})).await.unwrap_err();
        assert!(matches!(err, ToolError::NotFound(_)), "{err:?}");
    }

    #[tokio::test]
    async fn gitignore_is_honoured_unless_turned_off() {
        let (_t, ctx) = session();
        put(&ctx, ".gitignore", "target/\n*.log\n");
        put(&ctx, ".ignore", "secret.txt\n");
        for file in [
            "target/out",
            ".git/HEAD",
            "run.log",
            "secret.txt",
            "src/a.rs",
        ] {
            put(&ctx, file, "");
        }
        let dots = ".gitignore  14 B\n.ignore  11 B\n";
        let out = list(&ctx, json!({"recursive": true})).await;
        assert_eq!(out.unwrap(), format!("src/\nsrc/a.rs  0 B\n{dots}"));
        let out = list(&ctx, json!({"gitignore": false})).await;
        let files = "run.log  0 B\nsecret.txt  0 B\n";
        assert_eq!(out.unwrap(), format!(".git/\nsrc/\ntarget/\n{dots}{files}"));
    }

    #[tokio::test]
    async fn listings_are_capped_and_depth_limited() {
        let (_t, ctx) = session();
        for i in 0..1005 {
            put(&ctx, &format!("f{i:04}"), "");
        }
        put(&ctx, "a/b/c/d/e/f/g/deep.txt", "");
        let out = list(&ctx, json!({})).await.unwrap();
        assert_eq!(out.lines().count(), 1001);
        assert!(out.starts_with("a/\nf0000  0 B\n"), "{out:.40}");
        assert!(out.ends_with("f0998  0 B\n[… 6 more entries not shown]\n"));
        let out = list(&ctx, json!({"recursive": true})).await.unwrap();
        assert!(out.contains("a/b/c/d/e/f/\n") && !out.contains("a/b/c/d/e/f/g"));
    }

    #[tokio::test]
    async fn symlinks_inside_are_followed_and_links_out_listed_not_entered() {
        let (tmp, ctx) = session();
        let outside = tmp.path().join("outside");
        put(&ctx, "sub/f.txt", "inside\n");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("f.txt"), "outside\n").unwrap();
        let link = |to: &std::path::Path, name| symlink(to, ctx.root.join(name)).unwrap();
        link("sub".as_ref(), "alias");
        link(&outside, "out");
        let text = read(&ctx, json!({"path": "alias/f.txt"})).await;
        assert_eq!(text.unwrap(), "inside\n");
        assert_eq!(
            list(&ctx, json!({"path": "alias"})).await.unwrap(),
            "f.txt  7 B\n"
        );
        for path in ["out", "out/f.txt"] {
            let err = read(&ctx, json!({ "path": path })).await.unwrap_err();
            assert!(matches!(err, ToolError::OutsideRoot(_)), "{path}: {err:?}");
        }
        let err = list(&ctx, json!({"path": "out"})).await.unwrap_err();
        assert!(matches!(err, ToolError::OutsideRoot(_)), "{err:?}");
        let all = list(&ctx, json!({"recursive": true})).await.unwrap();
        let link = format!("out -> {}", outside.display());
        assert!(all.contains(&link) && !all.contains("out/f.txt"), "{all}");
    }

    #[tokio::test]
    async fn fifos_are_refused_without_blocking() {
        let (_t, ctx) = session();
        use rustix::fs::{CWD, FileType, Mode, mknodat};
        mknodat(CWD, ctx.root.join("pipe"), FileType::Fifo, Mode::RUSR, 0).unwrap();
        let err = read(&ctx, json!({"path": "pipe"})).await.unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
    }
}
