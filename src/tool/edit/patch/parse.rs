//! Reading a patch in the format codex models are trained on:
//!
//! ```text
//! *** Begin Patch
//! *** Add File: docs/new.md
//! +first line
//! *** Delete File: old.txt
//! *** Update File: src/lib.rs
//! *** Move to: src/core.rs
//! @@ fn main() {
//!      let a = 1;
//! -    let b = 2;
//! +    let b = 3;
//! *** End of File
//! *** End Patch
//! ```
//!
//! Leniency, as codex's own parser has it: markers may carry surrounding whitespace, the first
//! hunk of a file may leave out its `@@`, blank lines between hunks are skipped and an empty
//! line inside one is an empty context line, and the whole patch may be wrapped in a heredoc
//! (`<<'EOF'` … `EOF`). Beyond codex: a Markdown fence around it, and an `@@ -1,3 +1,4 @@`
//! line-number header (which names no line of the file) taken as a bare `@@`.

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File:";
const DELETE: &str = "*** Delete File:";
const UPDATE: &str = "*** Update File:";
const MOVE: &str = "*** Move to:";
const END_OF_FILE: &str = "*** End of File";

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Patch {
    pub(crate) ops: Vec<Op>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Op {
    /// A new file (or, as in codex, one replaced whole).
    Add {
        path: String,
        content: String,
    },
    Delete {
        path: String,
    },
    Update {
        path: String,
        move_to: Option<String>,
        hunks: Vec<Hunk>,
    },
}

/// One `@@` section of an update.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Hunk {
    /// The text after `@@`: a line of the file (a function's signature, say) the hunk comes
    /// after.
    pub(crate) anchor: Option<String>,
    /// Context and removed lines, in order: what is in the file now.
    pub(crate) old: Vec<String>,
    /// Context and added lines: what replaces it.
    pub(crate) new: Vec<String>,
    /// `*** End of File`: the hunk ends where the file does.
    pub(crate) at_end: bool,
}

impl Patch {
    /// Every path the patch names, in order: each file's, and where it moves to.
    pub(crate) fn paths(&self) -> Vec<String> {
        let mut paths = Vec::new();
        for op in &self.ops {
            match op {
                Op::Add { path, .. } | Op::Delete { path } => paths.push(path.clone()),
                Op::Update { path, move_to, .. } => {
                    paths.push(path.clone());
                    paths.extend(move_to.iter().cloned());
                }
            }
        }
        paths
    }
}

/// The patch in `text`; Err says what is wrong and on which line.
pub(crate) fn parse(text: &str) -> Result<Patch, String> {
    let all: Vec<&str> = text
        .trim()
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    let lines = unwrap(&all);
    match lines.first().map(|l| l.trim()) {
        Some(BEGIN) => {}
        _ => return Err(format!("the patch must start with the line {BEGIN:?}")),
    }
    if lines.len() < 2 || lines[lines.len() - 1].trim() != END {
        return Err(format!("the patch must end with the line {END:?}"));
    }
    let body = &lines[1..lines.len() - 1];
    let mut ops = Vec::new();
    let mut at = 0;
    while at < body.len() {
        let header = body[at].trim();
        // Line numbers in errors count from the patch's first line (`*** Begin Patch` is 1).
        let number = at + 2;
        at += 1;
        if header.is_empty() {
            continue;
        }
        if let Some(path) = marker(header, ADD) {
            let mut content = String::new();
            while let Some(line) = body.get(at).and_then(|l| l.strip_prefix('+')) {
                content.push_str(line);
                content.push('\n');
                at += 1;
            }
            ops.push(Op::Add {
                path: named(path, number)?,
                content,
            });
        } else if let Some(path) = marker(header, DELETE) {
            ops.push(Op::Delete {
                path: named(path, number)?,
            });
        } else if let Some(path) = marker(header, UPDATE) {
            let path = named(path, number)?;
            let move_to = match body.get(at).and_then(|l| marker(l.trim(), MOVE)) {
                Some(to) => {
                    at += 1;
                    Some(named(to, at + 1)?)
                }
                None => None,
            };
            let (hunks, used) = hunks(&body[at..], at + 2)?;
            at += used;
            if hunks.is_empty() && move_to.is_none() {
                return Err(format!(
                    "line {number}: the update of {path} has no hunk (@@ followed by lines \
                     starting with ' ', '-' or '+')"
                ));
            }
            ops.push(Op::Update {
                path,
                move_to,
                hunks,
            });
        } else {
            return Err(format!(
                "line {number}: {header:?} is not a file header; each file starts with \
                 \"{ADD} <path>\", \"{DELETE} <path>\" or \"{UPDATE} <path>\""
            ));
        }
    }
    if ops.is_empty() {
        return Err("the patch changes no file".into());
    }
    Ok(Patch { ops })
}

/// The patch's own lines: a heredoc or a Markdown fence around it taken off.
fn unwrap<'a, 'b>(lines: &'b [&'a str]) -> &'b [&'a str] {
    let heredoc = |first: &str, last: &str| {
        matches!(first.trim(), "<<EOF" | "<<'EOF'" | "<<\"EOF\"") && last.trim().ends_with("EOF")
    };
    let fence = |first: &str, last: &str| first.starts_with("```") && last.trim() == "```";
    match lines {
        [first, inner @ .., last] if heredoc(first, last) || fence(first, last) => inner,
        _ => lines,
    }
}

fn marker<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    line.strip_prefix(name).map(str::trim)
}

fn named(path: &str, number: usize) -> Result<String, String> {
    if path.is_empty() {
        return Err(format!("line {number}: the file header names no path"));
    }
    Ok(path.to_owned())
}

/// The hunks of one update, up to the next file header; how many lines they took.
fn hunks(lines: &[&str], first_number: usize) -> Result<(Vec<Hunk>, usize), String> {
    let mut hunks: Vec<Hunk> = Vec::new();
    let mut at = 0;
    while let Some(&line) = lines.get(at) {
        let number = first_number + at;
        if line.trim().is_empty() {
            at += 1;
            continue;
        }
        if line.starts_with("***") && line.trim() != END_OF_FILE {
            break;
        }
        let mut hunk = Hunk::default();
        if let Some(after) = line.trim_end().strip_prefix("@@") {
            hunk.anchor = anchor(after);
            at += 1;
        } else if !hunks.is_empty() {
            return Err(format!(
                "line {number}: {line:?} follows a hunk; a new hunk starts with @@"
            ));
        }
        let start = at;
        while let Some(&line) = lines.get(at) {
            if line.trim() == END_OF_FILE {
                hunk.at_end = true;
                at += 1;
                break;
            }
            match line.chars().next() {
                None => {
                    hunk.old.push(String::new());
                    hunk.new.push(String::new());
                }
                Some(' ') => {
                    hunk.old.push(line[1..].to_owned());
                    hunk.new.push(line[1..].to_owned());
                }
                Some('-') => hunk.old.push(line[1..].to_owned()),
                Some('+') => hunk.new.push(line[1..].to_owned()),
                Some(_) if at > start => break,
                Some(_) => {
                    return Err(format!(
                        "line {}: {line:?} is not a hunk line; each starts with ' ' \
                         (context), '-' (removed) or '+' (added)",
                        first_number + at
                    ));
                }
            }
            at += 1;
        }
        // Blank lines before the next header belong to no hunk.
        while hunk.old.last().is_some_and(String::is_empty)
            && hunk.new.last().is_some_and(String::is_empty)
            && lines
                .get(at.saturating_sub(1))
                .is_some_and(|l| l.is_empty())
            && !hunk.at_end
        {
            hunk.old.pop();
            hunk.new.pop();
            at -= 1;
        }
        if hunk.old.is_empty() && hunk.new.is_empty() {
            return Err(format!("line {number}: the hunk has no lines"));
        }
        hunks.push(hunk);
    }
    Ok((hunks, at))
}

/// The text after `@@`, unless it is empty or a unified diff's `-1,3 +1,4 @@`.
fn anchor(after: &str) -> Option<String> {
    let text = after.trim();
    let numbers = |part: &str, sign: char| {
        part.strip_prefix(sign).is_some_and(|n| {
            !n.is_empty()
                && n.split(',')
                    .all(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        })
    };
    let mut words = text.split_whitespace();
    let unified = matches!(
        (words.next(), words.next(), words.next()),
        (Some(old), Some(new), Some("@@")) if numbers(old, '-') && numbers(new, '+')
    );
    (!text.is_empty() && !unified).then(|| after.strip_prefix(' ').unwrap_or(after).to_owned())
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
