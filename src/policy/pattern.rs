//! Shell rule patterns (`"git status *"`) matched word by word, never against joined text.
//!
//! A pattern's first word is matched against the program word alone; the rest against the
//! arguments rendered one by one with shell quoting, so `echo\ /../../usr/bin/python3` (a single
//! word with a space and slashes in it) is not `echo` followed by an argument, and an argument
//! holding spaces (`'status --short; rm'`) cannot pose as several. A pattern for a bare name
//! (`ls *`) never matches a program word with a `/` or whitespace in it: `./ls` is a file in the
//! project, not `ls`.

use globset::{Glob, GlobMatcher};

/// One compiled shell pattern.
#[derive(Debug, Clone)]
pub(crate) struct CommandPattern {
    program: GlobMatcher,
    /// The pattern names a path (`/usr/bin/git *`), so program words with `/` may match.
    program_has_slash: bool,
    args: GlobMatcher,
}

/// How strictly a pattern applies to a program word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Match {
    /// Allow rules: the program word as written.
    Exact,
    /// Deny and ask rules: also the file name of a program word given as a path, so a
    /// `rm *` deny rule holds for `/bin/rm -rf x` too.
    Broad,
}

impl CommandPattern {
    pub(crate) fn new(pattern: &str) -> Result<CommandPattern, globset::Error> {
        let pattern = pattern.trim();
        let (program, args) = pattern.split_once(' ').unwrap_or((pattern, ""));
        Ok(CommandPattern {
            program: Glob::new(program)?.compile_matcher(),
            program_has_slash: program.contains('/'),
            args: Glob::new(args.trim_start())?.compile_matcher(),
        })
    }

    pub(crate) fn matches(&self, words: &[String], how: Match) -> bool {
        let Some((program, args)) = words.split_first() else {
            return false;
        };
        let rendered = render_args(args);
        if !self.args.is_match(&rendered) {
            return false;
        }
        let plain = !program.contains('/') && !program.chars().any(char::is_whitespace);
        if (plain || self.program_has_slash) && self.program.is_match(program) {
            return true;
        }
        how == Match::Broad
            && program
                .rsplit('/')
                .next()
                .is_some_and(|name| !name.is_empty() && self.program.is_match(name))
    }
}

/// The arguments as a person would type them: each shell-quoted where needed, joined by one
/// space.
pub(crate) fn render_args(args: &[String]) -> String {
    args.iter()
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The whole command, each word quoted where needed.
pub(crate) fn render(words: &[String]) -> String {
    render_args(words)
}

/// `word` as bash would need it written to mean exactly that one word.
pub(crate) fn shell_quote(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn matches(pattern: &str, list: &[&str]) -> bool {
        CommandPattern::new(pattern)
            .unwrap()
            .matches(&words(list), Match::Exact)
    }

    #[test]
    fn the_program_word_is_matched_alone() {
        assert!(matches("echo *", &["echo", "hi"]));
        assert!(matches("echo *", &["echo"]));
        assert!(!matches("echo *", &["echo /../../usr/bin/python3"]));
        assert!(!matches("echo *", &["echo /x", "y"]));
        assert!(!matches("ls *", &["./ls"]));
        assert!(!matches("ls", &["/tmp/ls"]));
        assert!(matches("/usr/bin/git *", &["/usr/bin/git", "log"]));
        assert!(matches("git status", &["git", "status"]));
        assert!(!matches("git status", &["git", "status", "-s"]));
    }

    #[test]
    fn arguments_are_matched_quoted() {
        assert!(matches("git status*", &["git", "status", "--short"]));
        assert!(!matches("git status*", &["git", "status --short; rm x"]));
        assert!(!matches("git status *", &["git", "status x", "y"]));
        assert!(matches("cat *", &["cat", "a b"]));
        assert_eq!(
            render_args(&words(&["a b", "it's", "", "-x"])),
            r"'a b' 'it'\''s' '' -x"
        );
    }

    #[test]
    fn deny_rules_also_see_the_file_name() {
        let p = CommandPattern::new("rm *").unwrap();
        assert!(p.matches(&words(&["/bin/rm", "-rf", "x"]), Match::Broad));
        assert!(!p.matches(&words(&["/bin/rm", "-rf", "x"]), Match::Exact));
        assert!(p.matches(&words(&["rm", "-rf", "x"]), Match::Broad));
    }
}
