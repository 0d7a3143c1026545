//! Code in an answer, coloured by a small lexer: keywords, strings, comments and numbers of
//! the languages models write most (Rust, Python, JavaScript/TypeScript, Go, C/C++, Java,
//! shell, TOML/YAML). Enough to read code at a glance; no grammar is needed for that, and a
//! full highlighter would cost more to build than the rest of the UI.

use ratatui::style::Style;

use super::theme::Theme;

/// What carries over from one line of a block to the next.
#[derive(Debug, Default)]
pub struct State {
    /// Inside a `/* … */` comment.
    block_comment: bool,
}

const KEYWORDS: &[&str] = &[
    "as",
    "async",
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "def",
    "default",
    "defer",
    "del",
    "do",
    "done",
    "elif",
    "else",
    "enum",
    "esac",
    "except",
    "export",
    "extends",
    "false",
    "False",
    "fi",
    "finally",
    "fn",
    "for",
    "from",
    "func",
    "function",
    "go",
    "if",
    "impl",
    "import",
    "in",
    "interface",
    "lambda",
    "let",
    "local",
    "loop",
    "match",
    "mod",
    "mut",
    "new",
    "nil",
    "None",
    "null",
    "package",
    "pass",
    "pub",
    "raise",
    "return",
    "self",
    "Self",
    "static",
    "struct",
    "switch",
    "then",
    "this",
    "throw",
    "trait",
    "true",
    "True",
    "try",
    "type",
    "typeof",
    "use",
    "var",
    "void",
    "where",
    "while",
    "with",
    "yield",
];

fn hash_comments(lang: &str) -> bool {
    matches!(
        lang,
        "py" | "python"
            | "sh"
            | "bash"
            | "zsh"
            | "shell"
            | "console"
            | "toml"
            | "yaml"
            | "yml"
            | "rb"
            | "ruby"
            | "perl"
            | "r"
            | "make"
            | "makefile"
            | "dockerfile"
            | "conf"
            | "ini"
    )
}

/// One line of code as styled pieces.
pub fn line(lang: &str, text: &str, state: &mut State, theme: &Theme) -> Vec<(String, Style)> {
    let lang = lang.to_ascii_lowercase();
    let hash = hash_comments(&lang);
    let mut out: Vec<(String, Style)> = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    let mut plain = String::new();
    let flush = |plain: &mut String, out: &mut Vec<(String, Style)>| {
        if !plain.is_empty() {
            out.push((std::mem::take(plain), theme.text));
        }
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if state.block_comment {
            let start = i;
            while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                i += 1;
            }
            if i < chars.len() {
                i += 2;
                state.block_comment = false;
            }
            out.push((chars[start..i].iter().collect(), theme.comment));
            continue;
        }
        let line_comment = (c == '/' && next == Some('/'))
            || (c == '#' && hash)
            || (c == '-' && next == Some('-') && matches!(lang.as_str(), "sql" | "lua" | "hs"));
        if line_comment {
            flush(&mut plain, &mut out);
            out.push((chars[i..].iter().collect(), theme.comment));
            break;
        }
        if c == '/' && next == Some('*') {
            flush(&mut plain, &mut out);
            state.block_comment = true;
            continue;
        }
        if c == '"' || c == '\'' || c == '`' {
            // A lone apostrophe in Rust is a lifetime, not a string.
            let closes = chars[i + 1..].iter().position(|&d| d == c);
            if let Some(len) = closes.filter(|_| !(c == '\'' && lang == "rust")) {
                flush(&mut plain, &mut out);
                let mut end = i + 1 + len;
                // Skip escaped quotes.
                while end < chars.len() && chars[end - 1] == '\\' {
                    match chars[end + 1..].iter().position(|&d| d == c) {
                        Some(more) => end += 1 + more,
                        None => break,
                    }
                }
                out.push((
                    chars[i..=end.min(chars.len() - 1)].iter().collect(),
                    theme.string,
                ));
                i = end + 1;
                continue;
            }
        }
        if c.is_ascii_digit() && !plain.chars().last().is_some_and(is_word) {
            flush(&mut plain, &mut out);
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || chars[i] == '.' || chars[i] == '_')
            {
                i += 1;
            }
            out.push((chars[start..i].iter().collect(), theme.number));
            continue;
        }
        if is_word(c) && !plain.chars().last().is_some_and(is_word) {
            let start = i;
            while i < chars.len() && is_word(chars[i]) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            if KEYWORDS.contains(&word.as_str()) {
                flush(&mut plain, &mut out);
                out.push((word, theme.keyword));
            } else {
                plain.push_str(&word);
            }
            continue;
        }
        plain.push(c);
        i += 1;
    }
    flush(&mut plain, &mut out);
    out
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

#[cfg(test)]
mod tests {
    use super::*;

    fn styles(lang: &str, text: &str) -> Vec<(String, &'static str)> {
        let theme = Theme::colored();
        let mut state = State::default();
        line(lang, text, &mut state, &theme)
            .into_iter()
            .map(|(t, s)| {
                let name = if s == theme.keyword {
                    "kw"
                } else if s == theme.string {
                    "str"
                } else if s == theme.comment {
                    "comment"
                } else if s == theme.number {
                    "num"
                } else {
                    "text"
                };
                (t, name)
            })
            .collect()
    }

    #[test]
    fn python_words_strings_and_comments() {
        let got = styles("python", "def f(x): return 'a\\'b' # done 42");
        assert_eq!(got[0], ("def".into(), "kw"));
        assert!(got.contains(&("return".into(), "kw")));
        assert!(got.contains(&("'a\\'b'".into(), "str")), "{got:?}");
        assert_eq!(got.last().unwrap(), &("# done 42".into(), "comment"));
    }

    #[test]
    fn numbers_inside_names_are_not_numbers() {
        let got = styles("rust", "let x2 = 10;");
        assert!(got.contains(&("10".into(), "num")));
        assert!(!got.iter().any(|(t, k)| t == "2" && *k == "num"));
    }

    #[test]
    fn block_comments_carry_over_lines() {
        let theme = Theme::colored();
        let mut state = State::default();
        let first = line("c", "int a; /* open", &mut state, &theme);
        assert_eq!(first.last().unwrap().1, theme.comment);
        let second = line("c", "still */ int b;", &mut state, &theme);
        assert_eq!(second[0], ("still */".into(), theme.comment));
        assert!(
            second.contains(&("int b;".into(), theme.text))
                || second.iter().any(|(t, _)| t.contains("int"))
        );
    }

    #[test]
    fn an_unclosed_quote_is_plain_text() {
        let got = styles("sh", "echo \"open");
        assert_eq!(got.concat_text(), "echo \"open");
    }

    trait Concat {
        fn concat_text(&self) -> String;
    }
    impl Concat for Vec<(String, &'static str)> {
        fn concat_text(&self) -> String {
            self.iter().map(|(t, _)| t.as_str()).collect()
        }
    }
}
