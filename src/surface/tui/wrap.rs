//! Lines the terminal UI draws, wrapped here rather than by ratatui: the conversation's
//! height must be known to scroll it, and a block's lines are cached once wrapped.
//!
//! Every text that reaches a span goes through [`clean`] first: model and tool text is shown
//! with its control characters escaped (ratatui writes a cell's symbol as it is, so an ESC
//! in a cell would reach the terminal raw), and tabs become spaces (a raw tab moves the
//! terminal's cursor past cells ratatui thinks it drew).

use std::borrow::Cow;

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthChar;

use crate::surface::safe_text;

/// `text` safe for a cell: control and invisible characters escaped, tabs as spaces.
pub fn clean(text: &str) -> Cow<'_, str> {
    let escaped = safe_text::escape(text);
    if escaped.contains('\t') {
        Cow::Owned(escaped.replace('\t', "    "))
    } else {
        escaped
    }
}

/// One line of [`clean`] text: newlines shown as `\n`.
pub fn clean_line(text: &str) -> String {
    safe_text::escape_line(text)
}

pub fn char_width(c: char) -> usize {
    c.width().unwrap_or(0)
}

pub fn text_width(text: &str) -> usize {
    text.chars().map(char_width).sum()
}

/// Pieces of one logical line, wrapped at word boundaries to `width` columns; `first` goes
/// before the first line and `rest` before the others (a list bullet, a quote bar, a card's
/// frame). Words longer than a line are cut. Text must be [`clean`] already and hold no
/// newline.
pub fn wrap(
    pieces: &[(String, Style)],
    width: usize,
    first: &Span<'static>,
    rest: &Span<'static>,
) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let mut line: Vec<Span<'static>> = vec![first.clone()];
    let mut used = text_width(&first.content);
    let mut line_has_text = false;
    let rest_width = text_width(&rest.content);
    // Blanks between words wait for the next word: none is left at the end of a line.
    let mut pending_space: Option<(&str, Style)> = None;
    for (text, style) in pieces {
        for token in tokens(text) {
            if token.starts_with(' ') {
                if line_has_text {
                    pending_space = Some((token, *style));
                }
                continue;
            }
            let space_width = pending_space.map_or(0, |(s, _)| text_width(s));
            let token_width = text_width(token);
            if used + space_width + token_width > width && line_has_text {
                out.push(Line::from(std::mem::take(&mut line)));
                line.push(rest.clone());
                used = rest_width;
                line_has_text = false;
                pending_space = None;
            }
            if let Some((space, space_style)) = pending_space.take() {
                push_text(&mut line, space, space_style);
                used += space_width;
            }
            if used + token_width <= width {
                push_text(&mut line, token, *style);
                used += token_width;
                line_has_text = true;
                continue;
            }
            // Longer than a whole line: cut it.
            let mut piece = String::new();
            for c in token.chars() {
                let w = char_width(c);
                if used + w > width && (line_has_text || !piece.is_empty()) {
                    push_text(&mut line, &piece, *style);
                    piece.clear();
                    out.push(Line::from(std::mem::take(&mut line)));
                    line.push(rest.clone());
                    used = rest_width;
                    line_has_text = false;
                }
                piece.push(c);
                used += w;
            }
            if !piece.is_empty() {
                push_text(&mut line, &piece, *style);
                line_has_text = true;
            }
        }
    }
    out.push(Line::from(line));
    out
}

/// Plain multi-line text, each line wrapped with the same frame.
pub fn wrap_text(
    text: &str,
    style: Style,
    width: usize,
    first: &Span<'static>,
    rest: &Span<'static>,
) -> Vec<Line<'static>> {
    let text = clean(text);
    let mut out = Vec::new();
    for (i, line) in text.split('\n').enumerate() {
        let lead = if i == 0 { first } else { rest };
        out.extend(wrap(&[(line.to_string(), style)], width, lead, rest));
    }
    out
}

fn push_text(line: &mut Vec<Span<'static>>, text: &str, style: Style) {
    if text.is_empty() {
        return;
    }
    let after_frame = line.len() > 1;
    if let Some(last) = line.last_mut()
        && last.style == style
        && after_frame
    {
        last.content.to_mut().push_str(text);
        return;
    }
    line.push(Span::styled(text.to_string(), style));
}

/// Runs of spaces and runs of everything else, in order.
fn tokens(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        let first = rest.chars().next()?;
        let space = first == ' ';
        let end = rest
            .char_indices()
            .find(|&(_, c)| (c == ' ') != space)
            .map_or(rest.len(), |(i, _)| i);
        let (token, tail) = rest.split_at(end);
        rest = tail;
        Some(token)
    })
}

/// Lines as plain text, for tests.
#[cfg(test)]
pub fn plain(lines: &[Line]) -> Vec<String> {
    lines
        .iter()
        .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_wrap_at_the_width_and_long_words_are_cut() {
        let none = Span::raw("");
        let lines = wrap(
            &[("one two three fourfivesixseven".into(), Style::default())],
            9,
            &none,
            &none,
        );
        assert_eq!(plain(&lines), ["one two", "three", "fourfives", "ixseven"]);
        for line in &lines {
            assert!(line.width() <= 9);
        }
    }

    #[test]
    fn frames_go_before_first_and_continuation_lines() {
        let lines = wrap(
            &[("alpha beta gamma".into(), Style::default())],
            10,
            &Span::raw("• "),
            &Span::raw("  "),
        );
        assert_eq!(plain(&lines), ["• alpha", "  beta", "  gamma"]);
    }

    #[test]
    fn wide_characters_count_twice() {
        let none = Span::raw("");
        let lines = wrap(
            &[("日本語のテキスト".into(), Style::default())],
            6,
            &none,
            &none,
        );
        for line in &lines {
            assert!(line.width() <= 6, "{lines:?}");
        }
        assert_eq!(plain(&lines).concat(), "日本語のテキスト");
    }

    #[test]
    fn control_characters_never_reach_a_cell() {
        let lines = wrap_text(
            "a\x1b]52;c;aGk=\x07b\tc\u{202e}",
            Style::default(),
            80,
            &Span::raw(""),
            &Span::raw(""),
        );
        let text = plain(&lines).concat();
        assert!(!text.chars().any(|c| c.is_control()), "{text:?}");
        assert!(text.contains("\\x1b]52"), "{text:?}");
        assert!(!text.contains('\u{202e}'));
    }

    #[test]
    fn a_zero_width_never_loops() {
        let none = Span::raw("");
        let lines = wrap(&[("abc def".into(), Style::default())], 0, &none, &none);
        assert!(!lines.is_empty());
    }
}
