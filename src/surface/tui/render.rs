//! The conversation as lines for a width: each block drawn once and cached until it changes
//! (its version), so a frame costs the blocks that changed, not the whole history. A running
//! tool card is drawn every frame: its elapsed time moves.

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use serde_json::Value;

use super::markdown;
use super::theme::Theme;
use super::transcript::{Block, BlockKind, ToolCard, Transcript};
use super::wrap::{clean_line, wrap_text};
use crate::event::ToolCallStatus;

/// Lines of a running card's output shown while it runs; a finished card shows its head and
/// tail.
const LIVE_OUTPUT_LINES: usize = 8;
const RESULT_LINES: usize = 6;
const DIFF_LINES: usize = 40;
const ARG_CHARS: usize = 400;

struct Cached {
    width: usize,
    version: u64,
    lines: Vec<Line<'static>>,
}

/// The finished paragraphs of the answer streaming in, drawn once: each new token redraws
/// only the paragraph it belongs to, not the whole answer so far.
struct StreamPrefix {
    block: usize,
    width: usize,
    /// Bytes of the answer the lines are of (up to a paragraph break outside code).
    len: usize,
    lines: Vec<Line<'static>>,
}

/// The rendered conversation, cached per block.
#[derive(Default)]
pub struct Rendered {
    cache: Vec<Option<Cached>>,
    prefix: Option<StreamPrefix>,
}

impl Rendered {
    /// Every block's lines at `width`, refreshed where a block changed.
    pub fn layout<'a>(
        &'a mut self,
        transcript: &Transcript,
        width: usize,
        theme: &Theme,
    ) -> Vec<&'a [Line<'static>]> {
        let blocks = transcript.blocks();
        self.cache.truncate(blocks.len());
        self.cache.resize_with(blocks.len(), || None);
        for (index, (block, slot)) in blocks.iter().zip(self.cache.iter_mut()).enumerate() {
            let live = is_live(block);
            let fresh = slot
                .as_ref()
                .is_some_and(|c| c.width == width && c.version == block.version && !live);
            if fresh {
                continue;
            }
            let lines = match &block.kind {
                BlockKind::Assistant(text) if block.open => {
                    streaming_lines(&mut self.prefix, index, text, width, theme)
                }
                _ => block_lines(block, width, theme),
            };
            *slot = Some(Cached {
                width,
                version: block.version,
                lines,
            });
        }
        self.cache
            .iter()
            .map(|c| c.as_ref().map_or(&[][..], |c| c.lines.as_slice()))
            .collect()
    }
}

/// An answer still streaming: its finished paragraphs from the cache (drawn again only when
/// another one finishes or the width changes), the paragraph being written drawn now.
fn streaming_lines(
    cache: &mut Option<StreamPrefix>,
    block: usize,
    text: &str,
    width: usize,
    theme: &Theme,
) -> Vec<Line<'static>> {
    let width = width.max(10);
    let split = stable_prefix(text);
    let reusable = cache
        .as_ref()
        .is_some_and(|c| c.block == block && c.width == width && c.len == split);
    if !reusable {
        *cache = Some(StreamPrefix {
            block,
            width,
            len: split,
            lines: markdown::render(&text[..split], width, theme),
        });
    }
    let mut lines = cache.as_ref().map_or_else(Vec::new, |c| c.lines.clone());
    let tail = markdown::render(&text[split..], width, theme);
    if !lines.is_empty() && !tail.is_empty() {
        lines.push(Line::default());
    }
    lines.extend(tail);
    lines.push(Line::default());
    lines
}

/// Where the text's last paragraph break outside a fenced code block ends: what comes before
/// it renders the same whatever is added after.
fn stable_prefix(text: &str) -> usize {
    let mut in_fence = false;
    let mut split = 0;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
        }
        at += line.len();
        // A complete blank line outside code, not at the very end (its paragraph may go on).
        if !in_fence && line.trim().is_empty() && line.ends_with('\n') && at < text.len() {
            split = at;
        }
    }
    split
}

fn is_live(block: &Block) -> bool {
    matches!(&block.kind, BlockKind::Tool(card) if card.result.is_none())
}

/// One block's lines, followed by a blank line.
pub fn block_lines(block: &Block, width: usize, theme: &Theme) -> Vec<Line<'static>> {
    let width = width.max(10);
    // Text behind a one-column mark, continuation lines indented under it.
    let marked = |text: &str, style, mark: &'static str| {
        wrap_text(
            text,
            style,
            width,
            &Span::styled(mark, style),
            &Span::raw("  "),
        )
    };
    let mut lines = match &block.kind {
        BlockKind::User(text) => marked(text, theme.user, "› "),
        BlockKind::Assistant(text) => markdown::render(text, width, theme),
        BlockKind::Thought(text) => {
            if block.folded {
                let count = text.lines().count().max(1);
                vec![Line::from(Span::styled(
                    format!("✻ thinking ({count} line{}, Ctrl-T shows)", plural(count)),
                    theme.comment,
                ))]
            } else {
                wrap_text(
                    text,
                    theme.comment,
                    width,
                    &Span::styled("✻ ", theme.comment),
                    &Span::styled("┆ ", theme.dim),
                )
            }
        }
        BlockKind::Tool(card) => card_lines(card, width, theme),
        BlockKind::Plan(entries) => {
            let mut lines = vec![Line::from(Span::styled("plan", theme.heading))];
            for entry in entries {
                lines.extend(wrap_text(
                    entry,
                    theme.text,
                    width,
                    &Span::raw("  "),
                    &Span::raw("      "),
                ));
            }
            lines
        }
        BlockKind::Error(text) => marked(text, theme.error, "✗ "),
        BlockKind::Notice(text) => marked(text, theme.dim, "· "),
    };
    lines.push(Line::default());
    lines
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn card_lines(card: &ToolCard, width: usize, theme: &Theme) -> Vec<Line<'static>> {
    let (mark, mark_style) = match (card.status, &card.result) {
        (_, Some((true, _))) => ("✓", theme.ok),
        (_, Some((false, _))) => ("✗", theme.failed),
        (ToolCallStatus::Failed, None) => ("✗", theme.failed),
        _ => ("⚙", theme.running),
    };
    let timing = match (card.duration_ms, card.started) {
        (Some(ms), _) => format!(" · {:.1}s", ms as f64 / 1000.0),
        (None, Some(started)) => format!(" · running {:.0}s", started.elapsed().as_secs_f64()),
        (None, None) => String::new(),
    };
    let frame = Span::styled("│ ", theme.dim);
    let mut lines = vec![Line::from(vec![
        Span::styled(format!("{mark} "), mark_style),
        Span::styled(clean_line(&card.title), theme.heading),
        Span::styled(
            if card.tool.is_empty() || card.tool == card.title {
                timing
            } else {
                format!(" ({}){timing}", clean_line(&card.tool))
            },
            theme.dim,
        ),
    ])];
    if let Some(args) = &card.args {
        let shown = args_text(args);
        lines.extend(wrap_text(&shown, theme.dim, width, &frame, &frame));
    }
    if let Some(diff) = &card.diff {
        lines.extend(diff_lines(diff, width, theme));
    }
    let output = card.output.trim_end_matches('\n');
    if !output.is_empty() && card.result.is_none() {
        lines.extend(tail(
            output,
            LIVE_OUTPUT_LINES,
            card.output_dropped > 0,
            width,
            theme,
        ));
    }
    if let Some((ok, text)) = &card.result {
        let text = text.trim_end_matches('\n');
        if !text.is_empty() {
            let style = if *ok { theme.dim } else { theme.failed };
            lines.extend(head_and_tail(text, RESULT_LINES, style, width, theme));
        }
    }
    lines
}

/// A call's arguments as a person reads them: `key: value` per argument, strings unquoted,
/// long ones cut.
fn args_text(args: &Value) -> String {
    let Some(map) = args.as_object() else {
        return cut(&args.to_string(), ARG_CHARS);
    };
    let mut out = Vec::new();
    for (key, value) in map {
        let value = match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        out.push(format!("{key}: {}", cut(&value, ARG_CHARS)));
    }
    out.join("\n")
}

fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

fn diff_lines(diff: &str, width: usize, theme: &Theme) -> Vec<Line<'static>> {
    let all: Vec<&str> = diff.lines().collect();
    let mut lines = Vec::new();
    for line in all.iter().take(DIFF_LINES) {
        let style = theme.diff_line(line);
        let frame = Span::styled("│ ", theme.dim);
        lines.extend(wrap_text(line, style, width, &frame, &frame));
    }
    if all.len() > DIFF_LINES {
        lines.push(more_line(all.len() - DIFF_LINES, theme));
    }
    lines
}

fn more_line(count: usize, theme: &Theme) -> Line<'static> {
    Line::from(Span::styled(
        format!("│ … {count} more line{}", plural(count)),
        theme.dim,
    ))
}

fn tail(text: &str, keep: usize, dropped: bool, width: usize, theme: &Theme) -> Vec<Line<'static>> {
    let all: Vec<&str> = text.lines().collect();
    let skip = all.len().saturating_sub(keep);
    let mut lines = Vec::new();
    if skip > 0 || dropped {
        lines.push(Line::from(Span::styled(
            format!(
                "│ … {skip}{} earlier line{}",
                if dropped { "+" } else { "" },
                plural(skip)
            ),
            theme.dim,
        )));
    }
    let frame = Span::styled("│ ", theme.dim);
    for line in &all[skip..] {
        lines.extend(wrap_text(line, theme.text, width, &frame, &frame));
    }
    lines
}

fn head_and_tail(
    text: &str,
    keep: usize,
    style: Style,
    width: usize,
    theme: &Theme,
) -> Vec<Line<'static>> {
    let all: Vec<&str> = text.lines().collect();
    let frame = Span::styled("╰ ", theme.dim);
    let rest = Span::styled("  ", theme.dim);
    let mut lines = Vec::new();
    if all.len() <= keep {
        for (i, line) in all.iter().enumerate() {
            lines.extend(wrap_text(
                line,
                style,
                width,
                if i == 0 { &frame } else { &rest },
                &rest,
            ));
        }
        return lines;
    }
    let half = keep / 2;
    for (i, line) in all[..half].iter().enumerate() {
        lines.extend(wrap_text(
            line,
            style,
            width,
            if i == 0 { &frame } else { &rest },
            &rest,
        ));
    }
    let hidden = all.len() - 2 * half;
    lines.push(Line::from(Span::styled(
        format!("  … {hidden} line{} …", plural(hidden)),
        theme.dim,
    )));
    for line in &all[all.len() - half..] {
        lines.extend(wrap_text(line, style, width, &rest, &rest));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::super::wrap::plain;
    use super::*;

    #[test]
    fn the_stable_prefix_ends_at_a_paragraph_break_outside_code() {
        assert_eq!(stable_prefix("one\n\ntwo"), 5);
        assert_eq!(stable_prefix("one\n```\na\n\nb"), 0);
        assert_eq!(stable_prefix("a\n```\nx\n```\n\nb"), 13);
        assert_eq!(stable_prefix("no break"), 0);
    }

    #[test]
    fn a_streaming_answer_looks_the_same_drawn_in_parts() {
        let theme = Theme::plain();
        let text = "# Title\n\nFirst paragraph with *words*.\n\n- a\n- b\n\n```rust\nlet x = 1;\n\nlet y = 2;\n```\n\nLast one";
        let mut cache = None;
        let streamed = plain(&streaming_lines(&mut cache, 0, text, 40, &theme));
        let mut whole = plain(&markdown::render(text, 40, &theme));
        whole.push(String::new());
        assert_eq!(streamed, whole);
        assert!(cache.is_some_and(|c| c.len > 0));
    }
}
