//! Tool calls as the terminal shows them: the call's line, its output while it runs, and a
//! preview of what it returned. On a terminal the running call's last lines and elapsed time
//! are one region redrawn in place; without one, output lines are printed once each as they
//! arrive, up to a cap, and nothing is redrawn. Every line is model or tool text and is
//! escaped before it is shown.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::event::ToolResultRecord;

use super::super::safe_text::escape_line;

/// Lines of a running call's output kept for the live region.
const LIVE_LINES: usize = 4;
/// Output lines printed as they arrive when nothing can be redrawn (no terminal).
const PRINTED_LINES: usize = 20;
/// How often, without a terminal, a line says a call is still running.
const STILL_RUNNING_EVERY: Duration = Duration::from_secs(30);
/// Lines a result's preview shows from each end.
const PREVIEW_EDGE: usize = 2;

/// How much of a call's output the person asked to see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detail {
    /// First and last lines of each result; a few live lines while it runs.
    Preview,
    /// `-v`: every line.
    Whole,
}

/// A call that has been announced and has no result yet.
pub(super) struct Running {
    pub id: String,
    pub tool: String,
    pub started: Instant,
    /// The last complete lines of output.
    tail: VecDeque<String>,
    /// Output after the last newline.
    partial: String,
    /// Complete lines seen so far.
    pub lines: usize,
    /// Lines printed as they arrived (no terminal).
    printed: usize,
    /// When the last "still running" line was printed (no terminal).
    noted: Instant,
}

impl Running {
    pub fn new(id: &str, tool: &str) -> Running {
        Running {
            id: id.to_string(),
            tool: tool.to_string(),
            started: Instant::now(),
            tail: VecDeque::with_capacity(LIVE_LINES),
            partial: String::new(),
            lines: 0,
            printed: 0,
            noted: Instant::now(),
        }
    }

    /// Without a terminal: every so often while a process tool runs, a line with its
    /// elapsed time.
    pub fn still_running(&mut self) -> Option<String> {
        if !self.is_live() || self.noted.elapsed() < STILL_RUNNING_EVERY {
            return None;
        }
        self.noted = Instant::now();
        Some(format!(
            "  ⋯ {} still running · {:.0}s · {} line{}",
            escape_line(&self.tool),
            self.started.elapsed().as_secs_f64(),
            self.lines,
            if self.lines == 1 { "" } else { "s" }
        ))
    }

    /// Whether the call shows a live region: a process tool, or any tool with output.
    pub fn is_live(&self) -> bool {
        matches!(self.tool.as_str(), "shell" | "python")
            || self.lines > 0
            || !self.partial.is_empty()
    }

    /// Takes a chunk of output. Returns the complete lines to print now when nothing is
    /// redrawn (`printing`), already escaped.
    pub fn take(&mut self, chunk: &str, printing: bool, detail: Detail) -> Vec<String> {
        let mut printed = Vec::new();
        self.partial.push_str(chunk);
        while let Some(end) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=end).collect();
            let line = line.trim_end_matches('\n').to_string();
            self.lines += 1;
            if printing && (detail == Detail::Whole || self.printed < PRINTED_LINES) {
                self.printed += 1;
                printed.push(escape_line(&line));
            }
            if self.tail.len() == LIVE_LINES {
                self.tail.pop_front();
            }
            self.tail.push_back(line);
        }
        printed
    }

    /// The live region's lines: the last lines of output, then the call and its elapsed
    /// time. Each is cut to `width` columns so the region's height is its line count.
    pub fn region(&self, spinner: char, width: usize) -> Vec<String> {
        let mut lines: Vec<String> = self
            .tail
            .iter()
            .chain((!self.partial.is_empty()).then_some(&self.partial))
            .map(|line| cut(&format!("  │ {}", escape_line(line)), width))
            .collect();
        let skip = lines.len().saturating_sub(LIVE_LINES);
        lines.drain(..skip);
        lines.push(cut(
            &format!(
                "  {spinner} {} · {:.1}s · {} line{}",
                escape_line(&self.tool),
                self.started.elapsed().as_secs_f64(),
                self.lines,
                if self.lines == 1 { "" } else { "s" }
            ),
            width,
        ));
        lines
    }

    /// Whether every line of the output was printed as it arrived, so a preview would
    /// repeat it.
    fn all_printed(&self) -> bool {
        self.lines > 0 && self.printed == self.lines && self.partial.is_empty()
    }
}

/// The result's line (`✓ shell · 0.4s · 12 lines`) and its preview lines, unpainted.
pub(super) struct Shown {
    pub ok: bool,
    pub line: String,
    pub preview: Vec<String>,
}

/// What a finished call shows: its line and a preview of its output (or error), from each
/// end, or whole with [`Detail::Whole`]. `running` is the call's live state, if it had
/// one: lines it already printed are not repeated.
pub(super) fn result(
    record: &ToolResultRecord,
    running: Option<&Running>,
    detail: Detail,
    width: usize,
) -> Shown {
    let seconds = record.duration_ms as f64 / 1000.0;
    let (ok, text) = match (&record.output, &record.error) {
        (Some(output), _) => (true, output.as_str()),
        (None, error) => (false, error.as_deref().unwrap_or_default()),
    };
    let body = text.strip_suffix('\n').unwrap_or(text);
    let lines: Vec<&str> = if body.is_empty() {
        Vec::new()
    } else {
        body.split('\n').collect()
    };
    let mark = if ok { "✓" } else { "✗" };
    let tool = escape_line(&record.tool);
    let line = match (ok, lines.as_slice()) {
        // A one-line error is the line's own.
        (false, [only]) => format!("  {mark} {tool} · {seconds:.1}s · {}", escape_line(only)),
        (false, []) => format!("  {mark} {tool} · {seconds:.1}s"),
        _ => format!(
            "  {mark} {tool} · {seconds:.1}s · {} line{}",
            lines.len(),
            if lines.len() == 1 { "" } else { "s" }
        ),
    };
    let mut preview = Vec::new();
    let already_printed = running.is_some_and(|r| r.all_printed() && r.lines == lines.len());
    let single_error = !ok && lines.len() == 1;
    if !already_printed && !single_error {
        let edge = |line: &&str| cut(&format!("    {}", escape_line(line)), width);
        // Lines printed as they arrived are not shown again: the preview goes on after them.
        let printed = running.map_or(0, |r| r.printed).min(lines.len());
        let rest = &lines[printed..];
        if detail == Detail::Whole || rest.len() <= PREVIEW_EDGE * 2 + 1 {
            preview.extend(rest.iter().map(edge));
        } else if printed > 0 {
            let hidden = rest.len() - PREVIEW_EDGE;
            preview.push(format!("    ⋮ {hidden} more lines"));
            preview.extend(rest[rest.len() - PREVIEW_EDGE..].iter().map(edge));
        } else {
            preview.extend(rest[..PREVIEW_EDGE].iter().map(edge));
            let hidden = rest.len() - PREVIEW_EDGE * 2;
            preview.push(format!("    ⋮ {hidden} more lines"));
            preview.extend(rest[rest.len() - PREVIEW_EDGE..].iter().map(edge));
        }
    }
    Shown { ok, line, preview }
}

/// `text` cut to `width` columns (counted as characters; wide characters may wrap a line
/// early, never late enough to break the region's count by more than one redraw).
pub(super) fn cut(text: &str, width: usize) -> String {
    use unicode_width::UnicodeWidthChar;
    let mut used = 0;
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let w = c.width().unwrap_or(0);
        if used + w > width.saturating_sub(1) {
            out.push('…');
            return out;
        }
        used += w;
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(output: Option<&str>, error: Option<&str>) -> ToolResultRecord {
        ToolResultRecord {
            tool_call_id: "c1".into(),
            tool: "shell".into(),
            success: output.is_some(),
            output: output.map(str::to_string),
            error: error.map(str::to_string),
            duration_ms: 1500,
        }
    }

    #[test]
    fn a_result_shows_its_first_and_last_lines_escaped() {
        let output: String = (1..=10).map(|i| format!("line {i}\n")).collect();
        let output = output.replace("line 10", "line\x1b[2J 10");
        let shown = result(&record(Some(&output), None), None, Detail::Preview, 80);
        assert!(shown.ok);
        assert_eq!(shown.line, "  ✓ shell · 1.5s · 10 lines");
        assert_eq!(
            shown.preview,
            [
                "    line 1",
                "    line 2",
                "    ⋮ 6 more lines",
                "    line 9",
                r"    line\x1b[2J 10"
            ]
        );
        let whole = result(&record(Some(&output), None), None, Detail::Whole, 80);
        assert_eq!(whole.preview.len(), 10);
        let failed = result(
            &record(None, Some("oops\n[exit code 3]")),
            None,
            Detail::Preview,
            80,
        );
        assert!(!failed.ok);
        assert_eq!(failed.preview, ["    oops", "    [exit code 3]"]);
        let short = result(&record(None, Some("denied")), None, Detail::Preview, 80);
        assert_eq!(short.line, "  ✗ shell · 1.5s · denied");
        assert!(short.preview.is_empty());
    }

    #[test]
    fn live_output_keeps_the_last_lines_and_prints_a_capped_few() {
        let mut running = Running::new("c1", "shell");
        let chunk: String = (1..=30).map(|i| format!("{i}\n")).collect();
        let printed = running.take(&chunk, true, Detail::Preview);
        assert_eq!(printed.len(), PRINTED_LINES);
        running.take("tail\x07", true, Detail::Preview);
        let region = running.region('*', 40);
        assert_eq!(region.len(), LIVE_LINES + 1);
        assert_eq!(region[LIVE_LINES - 1], r"  │ tail\x07");
        assert!(region[LIVE_LINES].starts_with("  * shell · "), "{region:?}");
        assert!(region[LIVE_LINES].ends_with("· 30 lines"), "{region:?}");
        assert_eq!(cut("abcdef", 4), "abc…");
        // The result goes on after the lines already printed.
        let output: String = (1..=30).map(|i| format!("{i}\n")).collect::<String>() + "tail\x07\n";
        let shown = result(
            &record(Some(&output), None),
            Some(&running),
            Detail::Preview,
            80,
        );
        assert_eq!(
            shown.preview,
            ["    ⋮ 9 more lines", "    30", r"    tail\x07"]
        );
    }
}
