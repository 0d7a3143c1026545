//! Read-only commands a preset lets run without asking (`[commands.<program>]` in
//! `policies/*.toml`), checked option by option.
//!
//! A command qualifies only when its program is a bare name found outside the session root,
//! every option is one the preset lists for that program (exactly: not a prefix, not a glob),
//! every path it names (operands, option values, `<` redirections) resolves inside the root
//! after symlinks and `..`, and it writes nothing through a redirection. Options are read the
//! way getopt reads them: bundled short flags (`-la`), values glued (`-n5`, `--lines=5`) or in
//! the next word, `--` ending the options. Where this reading and the program's could differ
//! the command asks: a value word that starts with `-`, an option not listed, an abbreviated
//! long option (GNU and git accept `--out` for `--output`; the list holds full names only).

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::path::Path;

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Deserialize;

use super::pattern::shell_quote;
use super::program::{self, Dirs};
use super::shell::SimpleCommand;
use crate::sandbox::paths::{PathError, resolve_in_root};

/// As written in a preset.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CommandFile {
    /// Options without a value: `-l`, `--all`; `--color=` allows `--color=<anything>`.
    #[serde(default)]
    flags: Vec<String>,
    /// Options that take a value: `-n` (`-n 5`, `-n5`), `--lines` (`--lines 5`, `--lines=5`).
    #[serde(default)]
    values: Vec<String>,
    #[serde(default)]
    operands: OperandsFile,
    /// `-NUM` is an option (`head -5`, `git log -3`).
    #[serde(default)]
    numbers: bool,
    /// The first operand names a subcommand, with its own entry (`[commands."git status"]`).
    #[serde(default)]
    subcommands: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum OperandsFile {
    Kind(String),
    Globs(Vec<String>),
}

impl Default for OperandsFile {
    fn default() -> Self {
        OperandsFile::Kind("paths".into())
    }
}

#[derive(Debug, Clone)]
enum Operands {
    /// Each must resolve inside the root.
    Paths,
    /// Paths inside the root that are not directories (`diff a dir` reads `dir/a`, a name
    /// found only when it runs).
    Files,
    /// Text that names no file (`which ls`).
    Text,
    None,
    /// Every argument is text, options included (`echo -x` prints `-x`).
    Any,
    /// Each must match one of these (`date +%F`, not `date 0101` which sets the clock).
    Globs(GlobSet),
}

#[derive(Debug, Clone)]
pub(crate) struct CommandSpec {
    flags: BTreeSet<String>,
    values: BTreeSet<String>,
    operands: Operands,
    numbers: bool,
    subcommands: bool,
}

impl CommandSpec {
    pub(crate) fn compile(name: &str, file: CommandFile) -> Result<CommandSpec, String> {
        let operands = match &file.operands {
            OperandsFile::Kind(kind) => match kind.as_str() {
                "paths" => Operands::Paths,
                "files" => Operands::Files,
                "text" => Operands::Text,
                "none" => Operands::None,
                "any" => Operands::Any,
                other => {
                    return Err(format!(
                        "commands.{name}: operands must be \"paths\", \"files\", \"text\", \
                         \"none\", \"any\" or a list of patterns, got {other:?}"
                    ));
                }
            },
            OperandsFile::Globs(globs) => {
                let mut set = GlobSetBuilder::new();
                for g in globs {
                    set.add(Glob::new(g).map_err(|e| format!("commands.{name}: {g:?}: {e}"))?);
                }
                Operands::Globs(set.build().map_err(|e| format!("commands.{name}: {e}"))?)
            }
        };
        for option in file.flags.iter().chain(&file.values) {
            if !option.starts_with('-') || option == "-" || option == "--" {
                return Err(format!("commands.{name}: {option:?} is not an option"));
            }
        }
        Ok(CommandSpec {
            flags: file.flags.iter().cloned().collect(),
            values: file.values.iter().cloned().collect(),
            operands,
            numbers: file.numbers,
            subcommands: file.subcommands,
        })
    }

    /// A one-line summary: the program and how many options it may take.
    pub(crate) fn summary(&self, name: &str) -> String {
        let count = self.flags.len() + self.values.len();
        match self.operands {
            Operands::Any => name.to_string(),
            _ if self.subcommands => format!("{name} (subcommands below)"),
            _ => format!("{name} ({count} options)"),
        }
    }
}

/// Whether `cmd` runs without asking under `specs`; the error says why not.
pub(crate) fn check(
    specs: &BTreeMap<String, CommandSpec>,
    cmd: &SimpleCommand,
    dirs: Dirs<'_>,
    path: Option<&OsStr>,
) -> Result<(), String> {
    if cmd.dynamic {
        return Err("its words are only known when it runs".into());
    }
    let Some((word, args)) = cmd.words.split_first() else {
        return Err("it runs no program".into());
    };
    if word.contains('/') || word.chars().any(char::is_whitespace) {
        return Err(format!(
            "`{}` is not a program name the preset lists",
            shell_quote(word)
        ));
    }
    let spec = specs
        .get(word)
        .ok_or_else(|| format!("{word} is not a read-only command the preset lists"))?;
    match program::resolve(word, dirs.cwd, path) {
        Some(p) if !p.inside(dirs.root) => {}
        Some(p) => {
            return Err(format!(
                "{} is a file in the session root, not the system's {word}",
                p.describe()
            ));
        }
        None => return Err(format!("{word} cannot be found for certain on PATH")),
    }
    for redirect in &cmd.redirects {
        if redirect.writes && !redirect.harmless() {
            return Err(format!("it writes to {:?}", redirect.target));
        }
        if !redirect.writes && redirect.target != "/dev/null" {
            inside(dirs, &redirect.target, true)?;
        }
    }
    let args: Vec<Arg> = args
        .iter()
        .enumerate()
        .map(|(i, text)| Arg {
            text,
            expands: cmd.expands(i + 1),
        })
        .collect();
    check_args(specs, word, spec, &args, dirs)
}

/// An argument and whether bash expands it (unquoted `*`, `?`, `[…]`, `{…}`).
struct Arg<'a> {
    text: &'a str,
    expands: bool,
}

fn check_args(
    specs: &BTreeMap<String, CommandSpec>,
    key: &str,
    spec: &CommandSpec,
    args: &[Arg<'_>],
    dirs: Dirs<'_>,
) -> Result<(), String> {
    if matches!(spec.operands, Operands::Any) {
        return Ok(());
    }
    let unknown = |option: &str| format!("`{key} {option}` is not an option known to be safe");
    let mut words = args.iter();
    let mut options_ended = false;
    while let Some(current) = words.next() {
        let (arg, expands) = (current.text, current.expands);
        if options_ended || arg == "-" || !arg.starts_with('-') {
            if spec.subcommands {
                let sub = format!("{key} {arg}");
                let sub_spec = specs.get(&sub).ok_or_else(|| {
                    format!("`{sub}` is not a read-only command the preset lists")
                })?;
                return check_args(specs, &sub, sub_spec, words.as_slice(), dirs);
            }
            operand(spec, key, current, dirs)?;
            continue;
        }
        if arg == "--" {
            if spec.subcommands {
                return Err(unknown(arg));
            }
            options_ended = true;
            continue;
        }
        if arg.starts_with("--") {
            let (name, value) = match arg.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (arg, None),
            };
            match value {
                Some(v) if spec.values.contains(name) => inside(dirs, v, expands)?,
                Some(v) if spec.flags.contains(&format!("{name}=")) => inside(dirs, v, expands)?,
                Some(_) => return Err(unknown(name)),
                None if spec.flags.contains(name) => {}
                None if spec.values.contains(name) => next_value(&mut words, key, name, dirs)?,
                None => return Err(unknown(name)),
            }
            continue;
        }
        // A bundle of short options; the first that takes a value takes the rest of the word.
        let bundle = &arg[1..];
        if spec.numbers && bundle.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        for (at, c) in bundle.char_indices() {
            let option = format!("-{c}");
            if spec.flags.contains(&option) {
                continue;
            }
            if !spec.values.contains(&option) {
                return Err(unknown(&option));
            }
            let rest = &bundle[at + c.len_utf8()..];
            if rest.is_empty() {
                next_value(&mut words, key, &option, dirs)?;
            } else {
                inside(dirs, rest, expands)?;
            }
            break;
        }
    }
    Ok(())
}

fn next_value<'a, 'b: 'a>(
    words: &mut impl Iterator<Item = &'a Arg<'b>>,
    key: &str,
    option: &str,
    dirs: Dirs<'_>,
) -> Result<(), String> {
    match words.next() {
        // The program might read it as an option where this reading takes it as a value.
        Some(value) if value.text.starts_with('-') && value.text != "-" => Err(format!(
            "`{key} {option} {}`: a value that looks like an option",
            value.text
        )),
        Some(value) => inside(dirs, value.text, value.expands),
        None => Err(format!("`{key} {option}` lacks its value")),
    }
}

fn operand(spec: &CommandSpec, key: &str, arg: &Arg<'_>, dirs: Dirs<'_>) -> Result<(), String> {
    let text = arg.text;
    match &spec.operands {
        Operands::Paths => inside(dirs, text, arg.expands),
        Operands::Files => {
            inside(dirs, text, arg.expands)?;
            match resolved(dirs, text) {
                Ok(path) if path.is_dir() || arg.expands => Err(format!(
                    "{key} with {text} may read files it names only when it runs"
                )),
                _ => Ok(()),
            }
        }
        Operands::Text | Operands::Any => Ok(()),
        Operands::None => Err(format!("{key} runs without asking only with no operands")),
        Operands::Globs(set) if set.is_match(text) => Ok(()),
        Operands::Globs(_) => Err(format!(
            "`{key} {}` is not a read-only use",
            shell_quote(text)
        )),
    }
}

/// Text that may name a file must resolve inside the root: `..`, absolute paths and symlinks
/// are followed first; `~` (which bash expands at the start and after `=` or `:`) is home.
/// A glob is checked by what it can expand to in its directory; a brace expansion asks.
fn inside(dirs: Dirs<'_>, text: &str, expands: bool) -> Result<(), String> {
    let outside = || format!("{text} leads outside the session root");
    if text.starts_with('~') || text.contains("=~") || text.contains(":~") {
        return Err(outside());
    }
    if !expands {
        return resolved(dirs, text).map(|_| ()).map_err(|_| outside());
    }
    // Brace expansion makes several words of one (`{a,../../x}` is `a ../../x`).
    if let Some(open) = text.find('{')
        && let Some(close) = text[open..].find('}')
        && text[open..open + close].contains([',', '.'])
    {
        return Err(format!("{text}: a brace expansion may name other paths"));
    }
    let glob_at = Path::new(text)
        .components()
        .position(|c| c.as_os_str().to_string_lossy().contains(['*', '?', '[']));
    let Some(at) = glob_at else {
        return resolved(dirs, text).map(|_| ()).map_err(|_| outside());
    };
    let components: Vec<_> = Path::new(text).components().collect();
    if at + 1 != components.len() {
        // `*/x` can walk through a link in any directory it matches.
        return Err(format!("{text}: a pattern in a directory part of a path"));
    }
    let dir: std::path::PathBuf = components[..at].iter().collect();
    let dir = resolved(dirs, &dir.to_string_lossy()).map_err(|_| outside())?;
    let pattern = components[at].as_os_str().to_string_lossy();
    // Matching dot files too, which bash would not: a wider match only asks more often.
    let matcher = globset::GlobBuilder::new(&pattern)
        .literal_separator(true)
        .build()
        .map_err(|_| format!("{text}: a pattern that cannot be read"))?
        .compile_matcher();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let name = dir.join(entry.file_name());
        if matcher.is_match(entry.file_name())
            && entry.file_type().is_ok_and(|t| t.is_symlink())
            && resolved(dirs, &name.to_string_lossy()).is_err()
        {
            return Err(format!(
                "{text} can expand to {}, a link that leads outside the session root",
                name.display()
            ));
        }
    }
    Ok(())
}

/// `text` looked up from the call's directory, which must stay inside the root.
fn resolved(dirs: Dirs<'_>, text: &str) -> Result<std::path::PathBuf, PathError> {
    let full = dirs.cwd.join(text);
    resolve_in_root(dirs.root, &full.to_string_lossy())
}

#[cfg(test)]
mod tests;
