//! A model's answer as the terminal shows it: markdown (headings, emphasis, inline code,
//! lists, quotes, links, rules) and fenced code blocks with their syntax coloured.
//!
//! The text is made safe ([`clean`]) before it is parsed, so nothing the parser passes
//! through (HTML, a link's target) can carry a control character to a cell.

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use super::highlight;
use super::theme::Theme;
use super::wrap::{clean, wrap};

/// Levels of nested quotes and lists drawn; deeper ones are drawn at this depth.
const MAX_DEPTH: usize = 8;

/// `text` as wrapped lines of `width` columns.
pub fn render(text: &str, width: usize, theme: &Theme) -> Vec<Line<'static>> {
    let text = clean(text);
    let mut r = Renderer {
        theme,
        width: width.max(8),
        out: Vec::new(),
        pieces: Vec::new(),
        styles: vec![theme.text],
        lists: Vec::new(),
        quote: 0,
        code: None,
        link: None,
        pending_bullet: None,
    };
    for event in Parser::new_ext(&text, Options::ENABLE_STRIKETHROUGH) {
        r.event(event);
    }
    r.flush();
    while r.out.last().is_some_and(|l| l.width() == 0) {
        r.out.pop();
    }
    r.out
}

struct Renderer<'t> {
    theme: &'t Theme,
    width: usize,
    out: Vec<Line<'static>>,
    pieces: Vec<(String, Style)>,
    styles: Vec<Style>,
    /// Each open list: the next item's number (`None`: bullets).
    lists: Vec<Option<u64>>,
    quote: usize,
    /// Inside a fenced or indented block: its language and text so far.
    code: Option<(String, String)>,
    link: Option<String>,
    /// The marker of an item whose first line is not drawn yet.
    pending_bullet: Option<String>,
}

impl Renderer<'_> {
    fn style(&self) -> Style {
        self.styles.last().copied().unwrap_or_default()
    }

    fn push_style(&mut self, add: Style) {
        let style = self.style().patch(add);
        self.styles.push(style);
    }

    fn pop_style(&mut self) {
        if self.styles.len() > 1 {
            self.styles.pop();
        }
    }

    /// The frame of nested quotes and lists, shown to [`MAX_DEPTH`] levels and never wider
    /// than half the line: a hostile answer nesting thousands deep must not repeat a huge
    /// indent on every wrapped line.
    fn indent(&self) -> String {
        let mut lead = "▎ ".repeat(self.quote.min(MAX_DEPTH));
        lead.push_str(&"  ".repeat(self.lists.len().saturating_sub(1).min(MAX_DEPTH)));
        let limit = self.width / 2;
        if lead.chars().count() > limit {
            lead = lead.chars().take(limit).collect();
        }
        lead
    }

    /// Ends the current paragraph's line(s).
    fn flush(&mut self) {
        if self.pieces.is_empty() && self.pending_bullet.is_none() {
            return;
        }
        let indent = self.indent();
        let bullet = self.pending_bullet.take().unwrap_or_default();
        let first = Span::styled(format!("{indent}{bullet}"), self.theme.dim);
        let rest = Span::styled(
            format!("{indent}{}", " ".repeat(bullet.chars().count())),
            self.theme.dim,
        );
        let pieces = std::mem::take(&mut self.pieces);
        self.out.extend(wrap(&pieces, self.width, &first, &rest));
    }

    fn blank(&mut self) {
        if self.out.last().is_some_and(|l| l.width() > 0) {
            self.out.push(Line::default());
        }
    }

    /// Parsed text is cleaned again: the parser decodes character references (`&#x1b;`)
    /// that the raw text did not contain.
    fn text(&mut self, text: &str) {
        let text = clean(text);
        if let Some((_, code)) = &mut self.code {
            code.push_str(&text);
            return;
        }
        let style = self.style();
        self.pieces.push((text.into_owned(), style));
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => self.text(&text),
            Event::Code(code) => {
                let style = self.theme.inline_code;
                self.pieces.push((clean(&code).into_owned(), style));
            }
            Event::Html(html) | Event::InlineHtml(html) => self.text(&html),
            Event::SoftBreak => self.text(" "),
            Event::HardBreak => self.flush(),
            Event::Rule => {
                self.flush();
                let rule = "─".repeat(self.width.min(40));
                self.out
                    .push(Line::from(Span::styled(rule, self.theme.dim)));
            }
            Event::TaskListMarker(done) => self.text(if done { "[x] " } else { "[ ] " }),
            Event::FootnoteReference(name) => self.text(&format!("[{name}]")),
            Event::InlineMath(m) | Event::DisplayMath(m) => self.text(&m),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => {}
            Tag::Heading { level, .. } => {
                self.flush();
                self.blank();
                let style = match level {
                    HeadingLevel::H1 => self.theme.heading.add_modifier(Modifier::UNDERLINED),
                    _ => self.theme.heading,
                };
                self.push_style(style);
            }
            Tag::BlockQuote(_) => {
                self.flush();
                self.quote += 1;
                self.push_style(self.theme.dim);
            }
            Tag::CodeBlock(kind) => {
                self.flush();
                let lang = match kind {
                    CodeBlockKind::Fenced(info) => {
                        clean(info.split_whitespace().next().unwrap_or("")).into_owned()
                    }
                    CodeBlockKind::Indented => String::new(),
                };
                self.code = Some((lang, String::new()));
            }
            Tag::List(start) => {
                self.flush();
                if self.lists.is_empty() {
                    self.blank();
                }
                self.lists.push(start);
            }
            Tag::Item => {
                self.flush();
                let marker = match self.lists.last_mut() {
                    Some(Some(n)) => {
                        let marker = format!("{n}. ");
                        *n += 1;
                        marker
                    }
                    _ => "• ".to_string(),
                };
                self.pending_bullet = Some(marker);
            }
            Tag::Emphasis => self.push_style(Style::new().add_modifier(Modifier::ITALIC)),
            Tag::Strong => self.push_style(Style::new().add_modifier(Modifier::BOLD)),
            Tag::Strikethrough => self.push_style(Style::new().add_modifier(Modifier::CROSSED_OUT)),
            Tag::Link { dest_url, .. } => {
                self.link = Some(clean(&dest_url).into_owned());
                self.push_style(self.theme.link);
            }
            Tag::Image { dest_url, .. } => self.text(&format!("[image {dest_url}] ")),
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => {
                self.flush();
                if self.lists.is_empty() {
                    self.blank();
                }
            }
            TagEnd::Heading(_) => {
                self.pop_style();
                self.flush();
                self.blank();
            }
            TagEnd::BlockQuote(_) => {
                self.flush();
                self.pop_style();
                self.quote = self.quote.saturating_sub(1);
                self.blank();
            }
            TagEnd::CodeBlock => {
                if let Some((lang, code)) = self.code.take() {
                    self.code_block(&lang, &code);
                }
                self.blank();
            }
            TagEnd::List(_) => {
                self.flush();
                self.lists.pop();
                if self.lists.is_empty() {
                    self.blank();
                }
            }
            TagEnd::Item => self.flush(),
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough => self.pop_style(),
            TagEnd::Link => {
                self.pop_style();
                if let Some(url) = self.link.take() {
                    let style = self.theme.dim;
                    self.pieces.push((format!(" ({url})"), style));
                }
            }
            _ => {}
        }
    }

    fn code_block(&mut self, lang: &str, code: &str) {
        let indent = self.indent();
        let frame = Span::styled(format!("{indent}│ "), self.theme.dim);
        if !lang.is_empty() {
            self.out.push(Line::from(vec![
                Span::styled(format!("{indent}╭ "), self.theme.dim),
                Span::styled(lang.to_string(), self.theme.dim),
            ]));
        }
        let code = code.strip_suffix('\n').unwrap_or(code);
        let mut state = highlight::State::default();
        for line in code.split('\n') {
            let pieces = highlight::line(lang, line, &mut state, self.theme);
            self.out.extend(wrap(&pieces, self.width, &frame, &frame));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::wrap::plain;
    use super::*;

    #[test]
    fn headings_lists_and_code_are_laid_out() {
        let theme = Theme::plain();
        let text =
            "# Title\n\nSome *text* with `code`.\n\n- one\n- two\n\n```rust\nfn main() {}\n```\n";
        let lines = plain(&render(text, 40, &theme));
        assert_eq!(
            lines,
            [
                "Title",
                "",
                "Some text with code.",
                "",
                "• one",
                "• two",
                "",
                "╭ rust",
                "│ fn main() {}"
            ]
        );
    }

    #[test]
    fn code_keywords_and_strings_get_their_own_style() {
        let theme = Theme::colored();
        let lines = render("```rust\nlet s = \"hi\"; // note\n```", 60, &theme);
        let code = &lines[1];
        let styled: Vec<(&str, Style)> = code
            .spans
            .iter()
            .map(|s| (s.content.as_ref(), s.style))
            .collect();
        assert!(styled.contains(&("let", theme.keyword)), "{styled:?}");
        assert!(styled.contains(&("\"hi\"", theme.string)), "{styled:?}");
        assert!(styled.contains(&("// note", theme.comment)), "{styled:?}");
    }

    #[test]
    fn escape_sequences_in_markdown_are_shown_not_obeyed() {
        let theme = Theme::plain();
        let lines = render("hi \x1b[2J [x](\x1b]52;c;aGk=\x07) `\x1b[31m`", 80, &theme);
        let text = plain(&lines).concat();
        assert!(!text.chars().any(|c| c.is_control()), "{text:?}");
    }

    #[test]
    fn character_references_are_cleaned_after_parsing() {
        let theme = Theme::plain();
        let lines = render(
            "a&#x1b;[2J b&#x202e; [l](x&#x1b;y) `&#x1b;` \n```&#x1b;\ncode\n```",
            80,
            &theme,
        );
        let text = plain(&lines).concat();
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{202e}'),
            "{text:?}"
        );
        assert!(text.contains("\\x1b[2J"), "{text:?}");
    }

    #[test]
    fn deep_nesting_keeps_every_line_within_the_width() {
        let theme = Theme::plain();
        let text = format!("{}{}", ">".repeat(5000), "word ".repeat(2000));
        let lines = render(&text, 40, &theme);
        assert!(lines.iter().all(|l| l.width() <= 40));
        let cells: usize = lines.iter().map(|l| l.width()).sum();
        assert!(cells < 40 * 2000 * 2, "{cells}");
    }

    #[test]
    fn numbered_and_nested_lists_keep_their_markers() {
        let theme = Theme::plain();
        let lines = plain(&render("1. a\n2. b\n   - c\n", 40, &theme));
        assert_eq!(lines, ["1. a", "2. b", "  • c"]);
    }
}
