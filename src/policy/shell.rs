//! Splits a `bash -c` string into the simple commands it would run, with brush-parser (a real
//! bash grammar), so the approval gate judges every program and not just the first word.
//!
//! Anything the parser rejects is an error and the gate asks a person: guessing at a command
//! line is how `ls; rm -rf ~` slips through. Constructs with no simple command of their own are
//! still reported where they can run code: `(( e ))` and `for ((…))` as `let e` (dynamic),
//! `[[ … ]]` as a command named `[[`, a redirection with nothing to run (`> f`) as a command
//! with no words. A heredoc body is data, but an unquoted one's substitutions are commands.

use brush_parser::ast::{self, CommandPrefixOrSuffixItem as Item, ExtendedTestExpr as Test};
use brush_parser::word::{self, WordPiece, WordPieceWithSource};
use brush_parser::{Parser, ParserOptions};

/// brush-parser and this walker recurse once per level of `( { $(`; a hostile string of a few
/// hundred levels would overflow the stack and abort the process, so it is refused up front.
const MAX_NESTING: usize = 40;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SimpleCommand {
    /// Words after quote removal where they are literal: ["git", "status", "--short"].
    /// A word with an expansion holds its literal parts with the expansions as written.
    /// Leading assignments (`X=1 cmd`) are not words; they make the command dynamic.
    pub words: Vec<String>,
    /// True when the command name or an argument contains an expansion whose value cannot be
    /// known statically, when an environment assignment precedes it (`PATH=… git`), when the
    /// program word would be glob- or brace-expanded, or when a redirection target is dynamic.
    pub dynamic: bool,
    /// Redirections to or from a file, by kind (`< in`, `> out`, `>> log`, `&> both`);
    /// descriptor duplications and closes (`2>&1`, `>&-`), heredocs and here-strings name no
    /// file and are left out.
    pub redirects: Vec<Redirect>,
    /// Per word of a plain simple command: whether it holds unquoted glob or brace characters
    /// (`*.rs`, `{a,b}`), which bash expands into other names. Missing entries (words of
    /// `[[ … ]]` and `let`) count as expanding.
    pub expands: Vec<bool>,
}

impl SimpleCommand {
    /// Whether word `index` may expand into other words or names.
    pub(crate) fn expands(&self, index: usize) -> bool {
        self.expands.get(index).copied().unwrap_or(true)
    }
}

/// A redirection that names a file: the target after quote removal, and whether the shell
/// opens it for reading only (`<`) or may create or change it (`>`, `>>`, `>|`, `<>`, `&>`,
/// `>&file`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Redirect {
    pub target: String,
    pub writes: bool,
}

impl Redirect {
    /// Writes nothing: a read, or a write to `/dev/null`. Every other write target is a file,
    /// whatever its name looks like (`> 1` and `> -` create files named `1` and `-`).
    pub(crate) fn harmless(&self) -> bool {
        !self.writes || self.target == "/dev/null"
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub(crate) enum ShellParseError {
    #[error("cannot parse the command: {0}")]
    Syntax(String),
    #[error("empty command")]
    Empty,
    #[error("unsupported shell construct: {0}")]
    Unsupported(&'static str),
}

/// Every simple command in `script`, in source order; a command comes before the commands
/// substituted into its words.
pub(crate) fn simple_commands(script: &str) -> Result<Vec<SimpleCommand>, ShellParseError> {
    let mut depth = 0usize;
    let too_deep = script.chars().any(|c| {
        match c {
            '(' | '{' => depth += 1,
            ')' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        depth > MAX_NESTING
    });
    if too_deep {
        return Err(ShellParseError::Unsupported("nested too deeply"));
    }
    let program = parse(script)?;
    if program.complete_commands.is_empty() {
        return Err(ShellParseError::Empty);
    }
    let mut walker = Walker::default();
    for list in &program.complete_commands {
        walker.list(list)?;
    }
    Ok(walker.out)
}

/// A duplication target that names a descriptor: `1`, `-` (close), `3-` (move).
fn is_descriptor(text: &str) -> bool {
    let digits = text.strip_suffix('-').unwrap_or(text);
    text == "-" || (!digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()))
}

fn parse(script: &str) -> Result<ast::Program, ShellParseError> {
    Parser::new(script.as_bytes(), &ParserOptions::default())
        .parse_program()
        .map_err(|e| ShellParseError::Syntax(e.to_string()))
}

/// A word after quote removal.
struct Word {
    text: String,
    dynamic: bool,
    /// Unquoted glob or brace characters: harmless in an argument, but a program word such as
    /// `/bin/r?` or `{rm,-rf,/}` would run something other than what it says.
    pattern: bool,
}

#[derive(Default)]
struct Walker {
    out: Vec<SimpleCommand>,
}

impl Walker {
    fn list(&mut self, list: &ast::CompoundList) -> Result<(), ShellParseError> {
        for ast::CompoundListItem(and_or, _) in &list.0 {
            for (_, pipeline) in and_or {
                for command in &pipeline.seq {
                    self.command(command)?;
                }
            }
        }
        Ok(())
    }

    fn command(&mut self, command: &ast::Command) -> Result<(), ShellParseError> {
        match command {
            ast::Command::Simple(simple) => self.simple(simple),
            ast::Command::Compound(compound, redirects) => {
                self.redirected(redirects.as_ref(), |w| w.compound(compound))
            }
            ast::Command::Function(f) => {
                self.redirected(f.body.1.as_ref(), |w| w.compound(&f.body.0))
            }
            ast::Command::ExtendedTest(test, redirects) => {
                self.redirected(redirects.as_ref(), |w| {
                    // `[[ … ]]` is reported as a command named `[[` so its substitutions and
                    // arithmetic (which evaluates variable contents as code) stay visible.
                    let slot = w.reserve();
                    let mut cmd = SimpleCommand {
                        words: vec!["[[".into()],
                        ..Default::default()
                    };
                    w.test(&test.expr, &mut cmd)?;
                    cmd.words.push("]]".into());
                    w.out[slot] = cmd;
                    Ok(())
                })
            }
        }
    }

    /// Runs `body`, then gives every command it produced the redirections of the compound
    /// command around it (`{ a; b; } > f` writes f from both).
    fn redirected(
        &mut self,
        redirects: Option<&ast::RedirectList>,
        body: impl FnOnce(&mut Self) -> Result<(), ShellParseError>,
    ) -> Result<(), ShellParseError> {
        let start = self.out.len();
        body(self)?;
        let Some(redirects) = redirects else {
            return Ok(());
        };
        let end = self.out.len();
        let mut outer = SimpleCommand::default();
        for redirect in &redirects.0 {
            self.redirect(redirect, &mut outer)?;
        }
        if start == end && (!outer.redirects.is_empty() || outer.dynamic) {
            // Nothing ran inside, but the redirection still creates the file.
            self.out.insert(start, outer);
            return Ok(());
        }
        for cmd in &mut self.out[start..end] {
            cmd.redirects.extend(outer.redirects.iter().cloned());
            cmd.dynamic |= outer.dynamic;
        }
        Ok(())
    }

    fn compound(&mut self, compound: &ast::CompoundCommand) -> Result<(), ShellParseError> {
        use ast::CompoundCommand as C;
        match compound {
            C::Arithmetic(a) => self.arithmetic(&a.expr.value),
            C::ArithmeticForClause(f) => {
                for expr in [&f.initializer, &f.condition, &f.updater]
                    .into_iter()
                    .flatten()
                {
                    self.arithmetic(&expr.value)?;
                }
                self.list(&f.body.list)
            }
            C::BraceGroup(b) => self.list(&b.list),
            C::Subshell(s) => self.list(&s.list),
            C::ForClause(f) => {
                for value in f.values.iter().flatten() {
                    self.word(&value.value)?;
                }
                self.list(&f.body.list)
            }
            C::CaseClause(c) => {
                self.word(&c.value.value)?;
                for item in &c.cases {
                    for pattern in &item.patterns {
                        self.word(&pattern.value)?;
                    }
                    if let Some(body) = &item.cmd {
                        self.list(body)?;
                    }
                }
                Ok(())
            }
            C::IfClause(i) => {
                self.list(&i.condition)?;
                self.list(&i.then)?;
                for clause in i.elses.iter().flatten() {
                    if let Some(condition) = &clause.condition {
                        self.list(condition)?;
                    }
                    self.list(&clause.body)?;
                }
                Ok(())
            }
            C::WhileClause(w) | C::UntilClause(w) => {
                self.list(&w.0)?;
                self.list(&w.1.list)
            }
            C::Coprocess(c) => self.command(&c.body),
        }
    }

    /// `(( expr ))` is reported as `let expr`, its exact equivalent. Arithmetic evaluates the
    /// contents of variables it names as expressions, which can run code, so it is dynamic.
    fn arithmetic(&mut self, expr: &str) -> Result<(), ShellParseError> {
        let slot = self.reserve();
        let words = vec!["let".into(), expr.trim().into()];
        self.out[slot] = SimpleCommand {
            words,
            dynamic: true,
            ..Default::default()
        };
        self.nested_in(expr)
    }

    fn simple(&mut self, simple: &ast::SimpleCommand) -> Result<(), ShellParseError> {
        // The command goes before the commands substituted into it, though those run first:
        // the gate reads the list in the order a person reads the script.
        let slot = self.reserve();
        let mut cmd = SimpleCommand::default();
        let mut assigned = false;
        let mut program_pattern = false;
        let prefix = simple.prefix.iter().flat_map(|p| &p.0);
        let name = simple.word_or_name.iter().map(|w| Item::Word(w.clone()));
        let suffix = simple.suffix.iter().flat_map(|s| &s.0).cloned();
        for item in prefix.cloned().chain(name).chain(suffix) {
            match item {
                Item::IoRedirect(redirect) => self.redirect(&redirect, &mut cmd)?,
                // Before the program, an environment assignment; after it, an argument
                // (`export X=1`).
                Item::AssignmentWord(assignment, _) if cmd.words.is_empty() => {
                    self.assignment(&assignment)?;
                    assigned = true;
                }
                Item::Word(w) | Item::AssignmentWord(_, w) => {
                    let word = self.word(&w.value)?;
                    program_pattern |= cmd.words.is_empty() && word.pattern;
                    cmd.dynamic |= word.dynamic;
                    cmd.words.push(word.text);
                    cmd.expands.push(word.pattern);
                }
                Item::ProcessSubstitution(kind, subshell) => {
                    // Its argument is a /dev/fd path known only at run time.
                    cmd.words
                        .push(format!("{kind}({})", subshell.list).replace('\n', "; "));
                    cmd.expands.push(true);
                    cmd.dynamic = true;
                    self.list(&subshell.list)?;
                }
            }
        }
        if cmd.words.is_empty() && cmd.redirects.is_empty() && !cmd.dynamic {
            // A pure assignment runs nothing itself.
            self.out.remove(slot);
            return Ok(());
        }
        // An environment prefix can change what a program does (PATH, LD_PRELOAD,
        // GIT_SSH_COMMAND, RUSTC_WRAPPER), so the command is not what its words say.
        cmd.dynamic |= (assigned && !cmd.words.is_empty()) || program_pattern;
        self.out[slot] = cmd;
        Ok(())
    }

    fn assignment(&mut self, assignment: &ast::Assignment) -> Result<(), ShellParseError> {
        if let ast::AssignmentName::ArrayElementName(_, index) = &assignment.name
            && !index.chars().all(|c| c.is_ascii_digit())
        {
            // The index is evaluated arithmetically (see `arithmetic`), with no command to
            // report it under.
            return Err(ShellParseError::Unsupported(
                "array element assignment with a computed index",
            ));
        }
        match &assignment.value {
            ast::AssignmentValue::Scalar(value) => {
                self.word(&value.value)?;
            }
            ast::AssignmentValue::Array(items) => {
                for (key, value) in items {
                    if let Some(key) = key {
                        self.word(&key.value)?;
                    }
                    self.word(&value.value)?;
                }
            }
        }
        Ok(())
    }

    fn redirect(
        &mut self,
        redirect: &ast::IoRedirect,
        cmd: &mut SimpleCommand,
    ) -> Result<(), ShellParseError> {
        use ast::IoFileRedirectKind as K;
        use ast::IoFileRedirectTarget as T;
        match redirect {
            ast::IoRedirect::File(_, kind, T::Filename(target)) => {
                let word = self.word(&target.value)?;
                cmd.dynamic |= word.dynamic;
                cmd.redirects.push(Redirect {
                    target: word.text,
                    writes: !matches!(kind, K::Read | K::DuplicateInput),
                });
            }
            ast::IoRedirect::OutputAndError(target, _) => {
                let word = self.word(&target.value)?;
                cmd.dynamic |= word.dynamic;
                cmd.redirects.push(Redirect {
                    target: word.text,
                    writes: true,
                });
            }
            ast::IoRedirect::File(_, kind, T::Duplicate(target)) => {
                let word = self.word(&target.value)?;
                cmd.dynamic |= word.dynamic;
                // `>&2`, `>&-` and `>&3-` name descriptors; `>&file` is bash for `&>file`.
                if !is_descriptor(&word.text) {
                    cmd.redirects.push(Redirect {
                        target: word.text,
                        writes: !matches!(kind, K::DuplicateInput),
                    });
                }
            }
            ast::IoRedirect::File(_, _, T::Fd(_)) => {}
            ast::IoRedirect::File(_, _, T::ProcessSubstitution(_, subshell)) => {
                self.list(&subshell.list)?
            }
            ast::IoRedirect::HereString(_, data) => {
                self.word(&data.value)?;
            }
            ast::IoRedirect::HereDocument(_, doc) if doc.requires_expansion => {
                // An unquoted heredoc body is data, but its substitutions run.
                self.nested_in(&doc.doc.value)?;
            }
            ast::IoRedirect::HereDocument(..) => {}
        }
        Ok(())
    }

    /// Flattens a `[[ … ]]` expression into `cmd`'s words.
    fn test(&mut self, expr: &Test, cmd: &mut SimpleCommand) -> Result<(), ShellParseError> {
        match expr {
            Test::And(a, b) | Test::Or(a, b) => {
                let op = if matches!(expr, Test::And(..)) {
                    "&&"
                } else {
                    "||"
                };
                self.test(a, cmd)?;
                cmd.words.push(op.into());
                self.test(b, cmd)
            }
            Test::Not(inner) => {
                cmd.words.push("!".into());
                self.test(inner, cmd)
            }
            Test::Parenthesized(inner) => {
                cmd.words.push("(".into());
                self.test(inner, cmd)?;
                cmd.words.push(")".into());
                Ok(())
            }
            Test::UnaryTest(predicate, operand) => {
                cmd.words.push(predicate.to_string());
                self.operand(&operand.value, cmd)
            }
            Test::BinaryTest(predicate, left, right) => {
                let op = predicate.to_string();
                // `-eq` and friends evaluate their operands as arithmetic.
                cmd.dynamic |= ["-eq", "-ne", "-lt", "-le", "-gt", "-ge"].contains(&op.as_str());
                self.operand(&left.value, cmd)?;
                cmd.words.push(op);
                self.operand(&right.value, cmd)
            }
        }
    }

    fn operand(&mut self, raw: &str, cmd: &mut SimpleCommand) -> Result<(), ShellParseError> {
        let word = self.word(raw)?;
        cmd.dynamic |= word.dynamic;
        cmd.words.push(word.text);
        Ok(())
    }

    /// Quote removal on one raw word; commands substituted into it are appended to `out`.
    fn word(&mut self, raw: &str) -> Result<Word, ShellParseError> {
        let pieces = word::parse(raw, &ParserOptions::default())
            .map_err(|e| ShellParseError::Syntax(e.to_string()))?;
        let pattern = pieces.iter().any(|p| match &p.piece {
            WordPiece::Text(t) => {
                let pair = |open, close| t.find(open).is_some_and(|i| t[i..].contains(close));
                t.contains(['*', '?', '(']) || pair('[', ']') || pair('{', '}')
            }
            _ => false,
        });
        let mut text = String::new();
        let dynamic = self.pieces(raw, &pieces, &mut text)?;
        Ok(Word {
            text,
            dynamic,
            pattern,
        })
    }

    /// Appends the literal value of `pieces` to `text`; true if any piece is an expansion.
    fn pieces(
        &mut self,
        raw: &str,
        pieces: &[WordPieceWithSource],
        text: &mut String,
    ) -> Result<bool, ShellParseError> {
        let mut dynamic = false;
        for piece in pieces {
            let source = raw
                .get(piece.start_index..piece.end_index)
                .unwrap_or_default();
            match &piece.piece {
                WordPiece::Text(s) | WordPiece::SingleQuotedText(s) => text.push_str(s),
                // `$'…'` without escapes is plain text; with them, decoding is not worth the risk.
                WordPiece::AnsiCQuotedText(s) if !s.contains('\\') => text.push_str(s),
                WordPiece::DoubleQuotedSequence(inner) => {
                    dynamic |= self.pieces(raw, inner, text)?
                }
                // Backslash-newline is a line continuation, any other escape is the character.
                WordPiece::EscapeSequence(s) => {
                    text.extend(s.chars().skip(1).filter(|&c| c != '\n'))
                }
                // `~` stays as written: path rules understand it, and it names no command.
                WordPiece::TildeExpansion(_) => text.push_str(source),
                WordPiece::CommandSubstitution(script)
                | WordPiece::BackquotedCommandSubstitution(script) => {
                    dynamic = true;
                    text.push_str(source);
                    self.nested(script)?;
                }
                WordPiece::ParameterExpansion(_) => {
                    dynamic = true;
                    text.push_str(source);
                    // `${x:-$(cmd)}` hides a command in its operand.
                    let inner = source.strip_prefix("${").and_then(|s| s.strip_suffix('}'));
                    self.nested_in(inner.unwrap_or_default())?;
                }
                WordPiece::ArithmeticExpression(expr) => {
                    dynamic = true;
                    text.push_str(source);
                    self.nested_in(&expr.value)?;
                }
                // `$"…"` is translated through the locale; its value is not what is written.
                WordPiece::GettextDoubleQuotedSequence(inner) => {
                    dynamic = true;
                    text.push_str(source);
                    self.pieces(raw, inner, &mut String::new())?;
                }
                WordPiece::AnsiCQuotedText(_) => {
                    dynamic = true;
                    text.push_str(source);
                }
            }
        }
        Ok(dynamic)
    }

    /// Finds substitutions in text that is not itself a word (arithmetic, `${…}` operands).
    /// Quotes there are taken literally, as inside `"${x:-'$(cmd)'}"`: reporting a command
    /// that would not run is safe, missing one is not.
    fn nested_in(&mut self, text: &str) -> Result<(), ShellParseError> {
        let pieces = word::parse_heredoc(text, &ParserOptions::default())
            .map_err(|e| ShellParseError::Syntax(e.to_string()))?;
        self.pieces(text, &pieces, &mut String::new()).map(|_| ())
    }

    /// Walks the script of a command substitution.
    fn nested(&mut self, script: &str) -> Result<(), ShellParseError> {
        let program = parse(script)?;
        for list in &program.complete_commands {
            self.list(list)?;
        }
        Ok(())
    }

    /// Keeps a place for a command whose nested commands are found while building it.
    fn reserve(&mut self) -> usize {
        self.out.push(SimpleCommand::default());
        self.out.len() - 1
    }
}

#[cfg(test)]
mod tests;
