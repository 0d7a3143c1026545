//! `search_files`: literal text search and file-name globbing over the session tree.

use std::collections::BinaryHeap;
use std::io::Read;
use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};

use globset::{GlobBuilder, GlobMatcher};
use ignore::{DirEntry, WalkState};
use memchr::memmem::Finder;
use serde::Deserialize;
use serde_json::Value;

use super::output::{
    MAX_FILE_BYTES, human_size, looks_binary, open_root, parse_args, run_blocking, walker,
};
use super::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput, cut_head_tail};
use crate::sandbox::paths::RootDir;

const MAX_MATCHES: usize = 200;
const MAX_FILES: usize = 500;
const MAX_LINE_CHARS: usize = 200;
const THREADS: usize = 2;

pub(crate) struct SearchFiles;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SearchArgs {
    query: Option<String>,
    path: Option<String>,
    pattern: Option<String>,
    #[serde(default)]
    case_sensitive: bool,
}

impl Tool for SearchFiles {
    fn name(&self) -> &'static str {
        "search_files"
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let args: SearchArgs = parse_args(args)?;
            let text = run_blocking(ctx, move |ctx| search(ctx, args)).await?;
            Ok(ToolOutput::text(cut_head_tail(&text, ctx.max_output_bytes)))
        })
    }
}

/// What the walker threads gather: the smallest hits in output order, kept in a bounded
/// max-heap so a match-heavy tree costs no more memory than the cap.
#[derive(Default)]
struct Found {
    hits: BinaryHeap<(String, usize, String)>,
    total: usize,
    too_large: usize,
}

impl Found {
    fn add(&mut self, hit: (String, usize, String), cap: usize) {
        self.total += 1;
        self.hits.push(hit);
        if self.hits.len() > cap {
            self.hits.pop();
        }
    }
}

fn search(ctx: &ToolContext, args: SearchArgs) -> Result<String, ToolError> {
    let case_sensitive = args.case_sensitive;
    let non_empty = |s: Option<String>| s.filter(|s| !s.is_empty());
    let (query, pattern) = (non_empty(args.query), non_empty(args.pattern));
    if query.is_none() && pattern.is_none() {
        return Err(ToolError::InvalidArguments(
            "give a query (text to find), a pattern (file glob such as *.rs), or both".into(),
        ));
    }
    let glob = match &pattern {
        Some(p) => Some(compile_glob(p, case_sensitive)?),
        None => None,
    };
    let root = open_root(ctx)?;
    let dir = root.locate(args.path.as_deref().unwrap_or("."))?.path;
    let needle = query.map(|q| fold(q.into_bytes(), case_sensitive));
    let searcher = Searcher {
        root: &root,
        dir: &dir,
        glob,
        finder: needle.as_deref().map(Finder::new),
        case_sensitive,
        found: Mutex::new(Found::default()),
    };
    walker(&dir, true)
        .threads(THREADS)
        .build_parallel()
        .run(|| {
            let (searcher, cancel) = (&searcher, &ctx.cancel);
            Box::new(move |result| {
                if cancel.is_cancelled() {
                    return WalkState::Quit;
                }
                if let Ok(entry) = result {
                    searcher.visit(&entry);
                }
                WalkState::Continue
            })
        });
    if ctx.cancel.is_cancelled() {
        return Err(ToolError::Cancelled);
    }
    let with_lines = searcher.finder.is_some();
    let found = searcher
        .found
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    Ok(render(found, with_lines))
}

/// What every walker thread shares, by reference.
struct Searcher<'a> {
    root: &'a RootDir,
    dir: &'a Path,
    glob: Option<GlobMatcher>,
    finder: Option<Finder<'a>>,
    case_sensitive: bool,
    found: Mutex<Found>,
}

impl Searcher<'_> {
    fn visit(&self, entry: &DirEntry) {
        let path = entry.path();
        if !entry.file_type().is_some_and(|t| t.is_file())
            || (self.glob.as_ref())
                .is_some_and(|g| !glob_matches(g, path, self.dir, self.root.path()))
        {
            return;
        }
        let rel = path.strip_prefix(self.root.path()).unwrap_or(path);
        let shown = rel.to_string_lossy().into_owned();
        let Some(finder) = &self.finder else {
            return self.lock().add((shown, 0, String::new()), MAX_FILES);
        };
        // The walk found this entry by path; the read goes through the kernel beneath the
        // root, so a file swapped for a symlink since cannot lead it outside. Unreadable
        // files (permissions, races with deletion, refusals) are skipped like binary ones.
        let Ok(mut file) = self.root.open_file(rel) else {
            return;
        };
        match file.metadata() {
            Ok(meta) if !meta.is_file() => return,
            Ok(meta) if meta.len() > MAX_FILE_BYTES => {
                self.lock().too_large += 1;
                return;
            }
            Ok(_) => {}
            Err(_) => return,
        }
        let mut bytes = Vec::new();
        if file.read_to_end(&mut bytes).is_err() || looks_binary(&bytes) {
            return;
        }
        let hits = matching_lines(&bytes, finder, self.case_sensitive);
        if !hits.is_empty() {
            let mut found = self.lock();
            for (line, text) in hits {
                found.add((shown.clone(), line, text), MAX_MATCHES);
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, Found> {
        self.found.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn compile_glob(pattern: &str, case_sensitive: bool) -> Result<GlobMatcher, ToolError> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .case_insensitive(!case_sensitive)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| ToolError::InvalidArguments(format!("bad pattern {pattern:?}: {e}")))
}

/// A glob without `/` matches file names; one with `/` matches the path relative to the
/// searched directory or to the root, whichever the model had in mind.
fn glob_matches(glob: &GlobMatcher, path: &Path, dir: &Path, root: &Path) -> bool {
    if !glob.glob().glob().contains('/') {
        return path.file_name().is_some_and(|name| glob.is_match(name));
    }
    [dir, root]
        .iter()
        .any(|base| path.strip_prefix(base).is_ok_and(|rel| glob.is_match(rel)))
}

fn fold(mut bytes: Vec<u8>, case_sensitive: bool) -> Vec<u8> {
    if !case_sensitive {
        bytes.make_ascii_lowercase();
    }
    bytes
}

/// (1-based line number, trimmed text) of each line holding a match, once per line.
fn matching_lines(bytes: &[u8], finder: &Finder<'_>, case_sensitive: bool) -> Vec<(usize, String)> {
    let folded;
    // ASCII folding keeps byte offsets, so positions found in the copy index the original.
    let haystack = if case_sensitive {
        bytes
    } else {
        folded = bytes.to_ascii_lowercase();
        &folded
    };
    let (mut hits, mut from, mut line, mut counted) = (Vec::new(), 0, 1, 0);
    while let Some(found) = finder.find(&haystack[from..]) {
        let at = from + found;
        line += memchr::memchr_iter(b'\n', &bytes[counted..at]).count();
        counted = at;
        let start = memchr::memrchr(b'\n', &bytes[..at]).map_or(0, |i| i + 1);
        let end = memchr::memchr(b'\n', &bytes[at..]).map_or(bytes.len(), |i| at + i);
        hits.push((line, clip(&String::from_utf8_lossy(&bytes[start..end]))));
        if end >= bytes.len() {
            break;
        }
        from = end + 1;
    }
    hits
}

fn clip(line: &str) -> String {
    let line = line.trim();
    match line.char_indices().nth(MAX_LINE_CHARS) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_owned(),
    }
}

fn render(found: Found, with_lines: bool) -> String {
    if found.total == 0 && found.too_large == 0 {
        return "no matches".into();
    }
    let shown = found.hits.len();
    let mut out = String::new();
    for (path, line, text) in found.hits.into_sorted_vec() {
        if with_lines {
            out.push_str(&format!("{path}:{line}: {text}\n"));
        } else {
            out.push_str(&format!("{path}\n"));
        }
    }
    if found.total == 0 {
        out.push_str("no matches\n");
    } else if found.total > shown && with_lines {
        out.push_str("[… more matches not shown; narrow the query or pattern]\n");
    } else if found.total > shown {
        let more = found.total - shown;
        out.push_str(&format!(
            "[… {more} more files not shown; narrow the pattern]\n"
        ));
    }
    if found.too_large > 0 {
        let limit = human_size(MAX_FILE_BYTES);
        out.push_str(&format!(
            "[{} files over {limit} not searched]\n",
            found.too_large
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::output::testing::{put, session};
    use super::*;
    use serde_json::json;

    async fn search(ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        SearchFiles.call(args, ctx).await.map(|o| o.text)
    }

    fn tree() -> (tempfile::TempDir, ToolContext) {
        let (tmp, ctx) = session();
        put(
            &ctx,
            "src/main.rs",
            "fn main() {\n    println!(\"Hello\");\n}\n",
        );
        put(&ctx, "src/lib.rs", "// hello there\npub fn hello() {}\n");
        put(&ctx, "web/app.ts", "const hello = 1;\n");
        put(&ctx, "README.md", "Say HELLO.\nBye.");
        (tmp, ctx)
    }

    #[tokio::test]
    async fn finds_lines_case_insensitively_sorted_by_path_and_line() {
        let (_t, ctx) = tree();
        let out = search(&ctx, json!({"query": "hello"})).await.unwrap();
        let expected = "README.md:1: Say HELLO.\nsrc/lib.rs:1: // hello there\n\
            src/lib.rs:2: pub fn hello() {}\nsrc/main.rs:2: println!(\"Hello\");\n\
            web/app.ts:1: const hello = 1;\n";
        assert_eq!(out, expected);
        let out = search(&ctx, json!({"query": "Hello", "caseSensitive": true})).await;
        assert_eq!(out.unwrap(), "src/main.rs:2: println!(\"Hello\");\n");
        let out = search(&ctx, json!({"query": "bye", "path": "."})).await;
        assert_eq!(out.unwrap(), "README.md:2: Bye.\n");
        assert_eq!(
            search(&ctx, json!({"query": "absent"})).await.unwrap(),
            "no matches"
        );
    }

    #[tokio::test]
    async fn patterns_filter_by_name_or_relative_path() {
        let (_t, ctx) = tree();
        let out = search(&ctx, json!({"pattern": "*.rs"})).await.unwrap();
        assert_eq!(out, "src/lib.rs\nsrc/main.rs\n");
        let out = search(&ctx, json!({"pattern": "src/**/*.rs", "query": "fn"}))
            .await
            .unwrap();
        assert_eq!(
            out,
            "src/lib.rs:2: pub fn hello() {}\nsrc/main.rs:1: fn main() {\n"
        );
        // Relative to the searched directory works as well as relative to the root.
        let out = search(&ctx, json!({"pattern": "**/*.ts", "path": "web"})).await;
        assert_eq!(out.unwrap(), "web/app.ts\n");
        let out = search(&ctx, json!({"query": "hello", "path": "src/lib.rs"}))
            .await
            .unwrap();
        assert_eq!(out.lines().count(), 2);
        let err = search(&ctx, json!({"pattern": "src/[a"}))
            .await
            .unwrap_err();
        assert!(matches!(&err, ToolError::InvalidArguments(m) if m.contains("src/[a")));
    }

    #[tokio::test]
    async fn needs_a_query_or_pattern_and_stays_inside_the_root() {
        let (_t, ctx) = tree();
        for args in [
            json!({}),
            json!({"query": "", "path": "src"}),
            json!({"qery": "x"}),
        ] {
            let err = search(&ctx, args.clone()).await.unwrap_err();
            assert!(
                matches!(err, ToolError::InvalidArguments(_)),
                "{args}: {err:?}"
            );
        }
        let err = search(&ctx, json!({"query": "x", "path": "../"}))
            .await
            .unwrap_err();
        assert!(matches!(err, ToolError::OutsideRoot(_)), "{err:?}");
        let err = search(&ctx, json!({"query": "x", "path": "nope"}))
            .await
            .unwrap_err();
        assert!(matches!(err, ToolError::NotFound(_)), "{err:?}");
    }

    #[tokio::test]
    async fn skips_binary_ignored_and_git_files() {
        let (_t, ctx) = tree();
        std::fs::write(ctx.root.join("blob.bin"), b"hello\0world").unwrap();
        put(&ctx, ".gitignore", "build/\n");
        put(&ctx, "build/out.txt", "hello");
        put(&ctx, ".git/config", "hello");
        put(&ctx, ".env", "hello=1");
        let out = search(&ctx, json!({"query": "hello"})).await.unwrap();
        assert!(out.contains(".env:1: hello=1\n"), "{out}");
        assert!(!out.contains("blob.bin") && !out.contains("build/") && !out.contains(".git/"));
    }

    #[tokio::test]
    async fn caps_matches_files_and_line_length() {
        let (_t, ctx) = session();
        let long = format!("needle {}", "x".repeat(300));
        put(&ctx, "long.txt", &format!("{long}\n"));
        put(&ctx, "many.txt", &"needle\n".repeat(250));
        let out = search(&ctx, json!({"query": "needle"})).await.unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 201);
        assert_eq!(lines[0], format!("long.txt:1: {}…", &long[..200]));
        assert_eq!(lines[199], "many.txt:199: needle");
        assert_eq!(
            lines[200],
            "[… more matches not shown; narrow the query or pattern]"
        );
        for i in 0..510 {
            put(&ctx, &format!("d/f{i:03}.md"), "");
        }
        let out = search(&ctx, json!({"pattern": "*.md"})).await.unwrap();
        assert_eq!(out.lines().count(), 501);
        assert!(out.ends_with("d/f499.md\n[… 10 more files not shown; narrow the pattern]\n"));
    }

    #[tokio::test]
    async fn cancellation_stops_the_walk() {
        let (_t, ctx) = tree();
        ctx.cancel.cancel();
        let args = SearchArgs {
            query: Some("hello".into()),
            path: None,
            pattern: None,
            case_sensitive: false,
        };
        assert_eq!(super::search(&ctx, args), Err(ToolError::Cancelled));
        let out = search(&ctx, json!({"query": "hello"})).await;
        assert_eq!(out, Err(ToolError::Cancelled));
    }

    #[test]
    fn every_matching_line_is_reported_once() {
        let finder = Finder::new(b"ab");
        let hits = matching_lines(b"ab ab\r\nxx\n  ab", &finder, true);
        assert_eq!(hits, [(1, "ab ab".to_owned()), (3, "ab".to_owned())]);
    }

    #[tokio::test]
    async fn symlinks_out_of_the_root_are_neither_followed_nor_read() {
        let (tmp, ctx) = tree();
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("leak.txt"), "needle outside\n").unwrap();
        std::os::unix::fs::symlink(&outside, ctx.root.join("out")).unwrap();
        std::os::unix::fs::symlink(outside.join("leak.txt"), ctx.root.join("leak")).unwrap();
        std::os::unix::fs::symlink("src", ctx.root.join("alias")).unwrap();
        put(&ctx, "in.txt", "needle inside\n");
        let out = search(&ctx, json!({"query": "needle"})).await.unwrap();
        assert_eq!(out, "in.txt:1: needle inside\n");
        let err = search(&ctx, json!({"query": "needle", "path": "out"}))
            .await
            .unwrap_err();
        assert!(matches!(err, ToolError::OutsideRoot(_)), "{err:?}");
        // A link that stays inside may be searched; hits are named by where they really are.
        let out = search(&ctx, json!({"query": "fn main", "path": "alias"})).await;
        assert_eq!(out.unwrap(), "src/main.rs:1: fn main() {\n");
    }
}
