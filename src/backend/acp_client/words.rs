//! Splits an `acp:cmd=<command line>` into words the way a POSIX shell would for a plain
//! command: whitespace separates, single quotes keep everything, double quotes keep all but
//! `\"`, `\\`, `\$` and `` \` ``, a backslash outside quotes escapes the next character. No
//! expansion of any kind happens: the words go to exec, not to a shell.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SplitError {
    #[error("unterminated {0} quote")]
    Unterminated(&'static str),
    #[error("a trailing backslash")]
    TrailingBackslash,
}

pub(crate) fn split(line: &str) -> Result<Vec<String>, SplitError> {
    let mut words = Vec::new();
    let mut word = String::new();
    // A word can be empty ('') yet present, so "in a word" is tracked apart from its text.
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err(SplitError::Unterminated("single")),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => word.push(c),
                            Some('\n') => {}
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => return Err(SplitError::Unterminated("double")),
                        },
                        Some(c) => word.push(c),
                        None => return Err(SplitError::Unterminated("double")),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some('\n') => {}
                    Some(c) => word.push(c),
                    None => return Err(SplitError::TrailingBackslash),
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_like_a_shell_without_expanding() {
        let words = |s: &str| split(s).unwrap();
        assert_eq!(words("gemini --acp"), ["gemini", "--acp"]);
        assert_eq!(words("  a\t b  "), ["a", "b"]);
        assert_eq!(
            words(r#"python3 -c 'print("hi there")' "x y" z\ w"#),
            ["python3", "-c", r#"print("hi there")"#, "x y", "z w"]
        );
        assert_eq!(words(r#""a\"b\n" '' $HOME"#), [r#"a"b\n"#, "", "$HOME"]);
        assert!(words("").is_empty());
    }

    #[test]
    fn bad_quoting_is_an_error_not_a_panic() {
        assert_eq!(split("'abc"), Err(SplitError::Unterminated("single")));
        assert_eq!(split("\"abc"), Err(SplitError::Unterminated("double")));
        assert_eq!(split("abc\\"), Err(SplitError::TrailingBackslash));
    }
}
