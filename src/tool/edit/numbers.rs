//! Line numbers in front of lines: the format `read_file` writes with `lineNumbers` (the
//! number right-aligned to at least four columns, then `│` and a space: `  12│ fn main() {`),
//! and taking such prefixes off again, that one and `cat -n`'s (`    12<TAB>`), when a model
//! copied them into an edit.

/// What follows the number in corral's format. Not a character source code uses, so a line
/// that merely starts with digits is never taken for a numbered one.
const SEPARATOR: char = '│';
const MIN_WIDTH: usize = 4;

/// `text` with each line prefixed by its number, the first being `first`.
pub(crate) fn number_lines(text: &str, first: u64) -> String {
    let count = text.split_inclusive('\n').count() as u64;
    let last = first + count.saturating_sub(1);
    let width = last.to_string().len().max(MIN_WIDTH);
    let mut out = String::with_capacity(text.len() + (count as usize) * (width + 2));
    for (n, line) in (first..).zip(text.split_inclusive('\n')) {
        out.push_str(&format!("{n:>width$}{SEPARATOR} {line}"));
    }
    out
}

/// The two prefix styles, each: the number, then what ends the prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Style {
    Corral,
    CatN,
}

/// The prefix of one line in `style`: (its number, the rest of the line).
fn split(line: &str, style: Style) -> Option<(u64, &str)> {
    let body = line.trim_start_matches(' ');
    let digits = body.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let number = body[..digits].parse().ok()?;
    let rest = &body[digits..];
    let rest = match style {
        // The space after the bar is what corral writes; a model may have dropped it.
        Style::Corral => {
            let rest = rest.strip_prefix(SEPARATOR)?;
            rest.strip_prefix(' ').unwrap_or(rest)
        }
        Style::CatN => rest.strip_prefix('\t')?,
    };
    Some((number, rest))
}

/// `text` without line-number prefixes, when every line that is not empty carries one in
/// the same style and the numbers count up by one: only then are they certainly prefixes
/// and not content. `None` otherwise.
pub(crate) fn strip(text: &str) -> Option<String> {
    [Style::Corral, Style::CatN]
        .into_iter()
        .find_map(|style| strip_in(text, style))
}

fn strip_in(text: &str, style: Style) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut expected: Option<u64> = None;
    let mut any = false;
    for line in text.split_inclusive('\n') {
        let bare = line.trim_end_matches(['\n', '\r']);
        if bare.is_empty() {
            // A line left empty by the model; it was empty in the file too.
            out.push_str(line);
            expected = expected.map(|n| n + 1);
            continue;
        }
        let (number, rest) = split(line, style)?;
        if expected.is_some_and(|n| n != number) {
            return None;
        }
        expected = Some(number + 1);
        any = true;
        out.push_str(rest);
    }
    any.then_some(out)
}

/// Whether some line of `text` looks numbered (in either style).
pub(crate) fn any_numbered(text: &str) -> bool {
    text.lines()
        .any(|line| split(line, Style::Corral).is_some() || split(line, Style::CatN).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_right_aligned_and_strip_back_to_the_text() {
        let text = "fn main() {\n    x();\n}\n";
        let numbered = number_lines(text, 9);
        assert_eq!(numbered, "   9│ fn main() {\n  10│     x();\n  11│ }\n");
        assert_eq!(strip(&numbered).unwrap(), text);
        assert_eq!(number_lines("a", 1), "   1│ a");
        assert_eq!(number_lines("a\nb\n", 99_999), " 99999│ a\n100000│ b\n");
    }

    #[test]
    fn cat_n_prefixes_strip_too() {
        let copied = "     3\tlet a = 1;\n     4\t\n     5\t    b();\n";
        assert_eq!(strip(copied).unwrap(), "let a = 1;\n\n    b();\n");
        // A model that dropped the space after the bar.
        assert_eq!(strip("12│x\n13│y").unwrap(), "x\ny");
        // Empty lines the model left unnumbered are kept, and counted.
        assert_eq!(strip("  1│ a\n\n  3│ c\n").unwrap(), "a\n\nc\n");
    }

    #[test]
    fn text_that_only_looks_numbered_is_left_alone() {
        for text in [
            "1. first\n2. second\n",
            "  1│ a\nplain\n",
            "  1│ a\n  3│ b\n",
            "  1│ a\n     2\tb\n",
            "",
            "\n\n",
            "42\n",
        ] {
            assert_eq!(strip(text), None, "{text:?}");
        }
        assert!(any_numbered("x\n  7│ y\n") && !any_numbered("x\n7 y\n"));
    }
}
