//! A text's lines by where they start, for matching whole lines and naming them in errors.

use super::numbers;

/// Lines of a place shown in an error, besides one before and one after.
const MAX_CONTEXT: usize = 6;

/// A text's lines by where they start.
pub(super) struct Lines<'a> {
    pub(super) text: &'a str,
    starts: Vec<usize>,
    crlf: bool,
}

impl<'a> Lines<'a> {
    pub(super) fn new(text: &'a str) -> Self {
        let mut starts = vec![0];
        starts.extend(
            memchr::memchr_iter(b'\n', text.as_bytes())
                .map(|i| i + 1)
                .filter(|&i| i < text.len()),
        );
        // The file's style is its first line break's.
        let crlf = text.find('\n').is_some_and(|i| text[..i].ends_with('\r'));
        Lines { text, starts, crlf }
    }

    pub(super) fn len(&self) -> usize {
        self.starts.len()
    }

    pub(super) fn start(&self, i: usize) -> usize {
        self.starts[i]
    }

    /// Where line `i` ends, its break included.
    pub(super) fn full_end(&self, i: usize) -> usize {
        self.starts.get(i + 1).copied().unwrap_or(self.text.len())
    }

    /// Line `i` without its break.
    pub(super) fn line(&self, i: usize) -> &'a str {
        let line = &self.text[self.start(i)..self.full_end(i)];
        let line = line.strip_suffix('\n').unwrap_or(line);
        line.strip_suffix('\r').unwrap_or(line)
    }

    pub(super) fn content_end(&self, i: usize) -> usize {
        self.start(i) + self.line(i).len()
    }

    pub(super) fn has_break(&self, i: usize) -> bool {
        self.full_end(i) > self.content_end(i)
    }

    /// The 0-based line holding byte `at`.
    pub(super) fn line_of(&self, at: usize) -> usize {
        self.starts.partition_point(|&s| s <= at).saturating_sub(1)
    }

    /// `text` with the file's line breaks.
    pub(super) fn with_line_endings(&self, text: &str) -> String {
        let lf = text.replace("\r\n", "\n");
        if self.crlf {
            lf.replace('\n', "\r\n")
        } else {
            lf
        }
    }

    /// Lines `first`..`first + span` (a few at most) with one line before and after,
    /// numbered as read_file numbers them.
    pub(super) fn context(&self, first: usize, span: usize) -> String {
        let from = first.saturating_sub(1);
        let to = (first + span.min(MAX_CONTEXT)).min(self.len() - 1);
        let shown = &self.text[self.start(from)..self.full_end(to)];
        let mut out = numbers::number_lines(shown, from as u64 + 1);
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out
    }
}
