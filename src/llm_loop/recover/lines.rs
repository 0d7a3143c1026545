//! The rule every block family shares: a call counts only where it stands on its own lines,
//! outside fenced code, inline code spans and quotes. A model explaining a tool call format,
//! or echoing one from a file, writes it inside exactly those.

use super::{Extracted, TextToolCall};

/// What a family makes of a line that begins (after indentation) at some offset.
pub(super) enum Verdict {
    /// No call of this family starts here; the line is text.
    NotHere,
    /// Calls, and the end of their last line (past its newline): that stretch is cut out.
    Take {
        calls: Vec<TextToolCall>,
        end: usize,
    },
    /// A block of this family starts here but cannot be taken; its text up to `end` is text
    /// and no line inside it is tried again.
    Refused { end: usize },
    /// A call starts here that cannot be taken, and nothing after it may be taken either
    /// (a family whose calls run to the end of the reply).
    Stop,
}

/// Offers `block` every line of `text` that stands outside code and quotes, at the offset
/// where the line's text begins. `None` when no block was taken.
pub(super) fn take_blocks(text: &str, block: &dyn Fn(usize) -> Verdict) -> Option<Extracted> {
    let lines = line_starts(text);
    let mut calls = Vec::new();
    let mut kept = String::with_capacity(text.len());
    let mut copied_to = 0;
    let mut fence: Option<(char, usize)> = None;
    // Odd means an inline code span opened earlier in this paragraph is still open.
    let mut backticks = 0usize;
    let mut i = 0;
    while i < lines.len() {
        let start = lines[i];
        let line = &text[start..lines.get(i + 1).copied().unwrap_or(text.len())];
        let body = line.trim_start();
        i += 1;
        if let Some(marker) = fence_marker(body) {
            fence = match fence {
                None => Some(marker),
                Some(open) if closes(open, marker, body) => None,
                still_open => still_open,
            };
            backticks = 0;
            continue;
        }
        if fence.is_some() {
            continue;
        }
        if body.trim().is_empty() {
            backticks = 0;
            continue;
        }
        let verdict = if backticks.is_multiple_of(2) {
            block(start + (line.len() - body.len()))
        } else {
            Verdict::NotHere
        };
        let skip_to = match verdict {
            Verdict::NotHere => {
                backticks += line.matches('`').count();
                continue;
            }
            Verdict::Stop => break,
            Verdict::Refused { end } => end,
            Verdict::Take {
                calls: mut taken,
                end,
            } => {
                calls.append(&mut taken);
                kept.push_str(&text[copied_to..start]);
                copied_to = end;
                end
            }
        };
        while lines.get(i).is_some_and(|&next| next < skip_to) {
            i += 1;
        }
    }
    if calls.is_empty() {
        return None;
    }
    kept.push_str(&text[copied_to..]);
    Some(Extracted {
        text: kept.trim().to_owned(),
        calls,
    })
}

/// The calls of a family whose calls end the reply: from the first line outside code that
/// begins with `marker` to the end of the text, `calls` must read calls and nothing else, or
/// nothing is taken (not even from a later marker: the model's batch is one).
pub(super) fn take_tail(
    text: &str,
    marker: &str,
    calls: &dyn Fn(&str) -> Option<Vec<TextToolCall>>,
) -> Option<Extracted> {
    if !text.contains(marker) {
        return None;
    }
    take_blocks(text, &|at| {
        if !text[at..].starts_with(marker) {
            return Verdict::NotHere;
        }
        match calls(&text[at..]) {
            Some(calls) => Verdict::Take {
                calls,
                end: text.len(),
            },
            None => Verdict::Stop,
        }
    })
}

/// The end of the line holding `at` (past its newline), provided nothing but whitespace
/// follows `at` on it: what makes a block stand on its own lines.
pub(super) fn rest_of_line_blank(text: &str, at: usize) -> Option<usize> {
    let line_end = text[at..].find('\n').map_or(text.len(), |n| at + n + 1);
    text[at..line_end].trim().is_empty().then_some(line_end)
}

fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(text.match_indices('\n').map(|(at, _)| at + 1))
        .filter(|&at| at < text.len())
        .collect()
}

/// The fence character and its run length when `body` opens or closes a fenced code block.
pub(super) fn fence_marker(body: &str) -> Option<(char, usize)> {
    let c = body.chars().next().filter(|c| matches!(c, '`' | '~'))?;
    let run = body.chars().take_while(|&x| x == c).count();
    (run >= 3).then_some((c, run))
}

fn closes(open: (char, usize), marker: (char, usize), body: &str) -> bool {
    marker.0 == open.0 && marker.1 >= open.1 && body[marker.1..].trim().is_empty()
}
