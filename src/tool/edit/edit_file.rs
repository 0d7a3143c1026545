//! `edit_file`: replace text in one file, one place or several edits at once, all or none.
//! An empty `old_text` on a file that does not exist creates it; nothing else creates files.

use serde::Deserialize;
use serde_json::Value;

use super::super::output::parse_args;
use super::super::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use super::matching::{self, Pass};
use super::{FileChange, diff, files};

pub(crate) struct EditFile;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EditArgs {
    pub(super) path: String,
    old_text: Option<String>,
    new_text: Option<String>,
    replace_all: Option<bool>,
    edits: Option<Vec<OneEdit>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OneEdit {
    old_text: String,
    new_text: String,
    replace_all: Option<bool>,
}

/// One replacement asked for: old, new, every occurrence.
type Wanted<'a> = (&'a str, &'a str, bool);

impl EditArgs {
    pub(super) fn parse(args: Value) -> Result<Self, ToolError> {
        let args: EditArgs = parse_args(args)?;
        if args.path.trim().is_empty() {
            return Err(ToolError::InvalidArguments("path is empty".into()));
        }
        Ok(args)
    }

    fn wanted(&self) -> Result<Vec<Wanted<'_>>, ToolError> {
        let single = self.old_text.is_some() || self.new_text.is_some();
        match (&self.edits, &self.old_text, &self.new_text) {
            (Some(edits), _, _) if single || edits.is_empty() => {
                Err(ToolError::InvalidArguments(if single {
                    "give either old_text and new_text, or edits, not both".into()
                } else {
                    "edits is empty".into()
                }))
            }
            (Some(edits), _, _) => Ok(edits
                .iter()
                .map(|e| {
                    let all = e.replace_all.unwrap_or(false);
                    (e.old_text.as_str(), e.new_text.as_str(), all)
                })
                .collect()),
            (None, Some(old), Some(new)) => Ok(vec![(old, new, self.replace_all.unwrap_or(false))]),
            (None, _, _) => Err(ToolError::InvalidArguments(
                "give old_text and new_text (or edits, a list of them)".into(),
            )),
        }
    }
}

/// The file's new text and what is worth saying about how it was reached.
pub(super) struct Planned {
    pub(super) new: String,
    notes: Vec<String>,
}

/// Applies the edits to `current` (the file's text; `None`: it does not exist) in memory.
pub(super) fn plan(args: &EditArgs, current: Option<&str>) -> Result<Planned, ToolError> {
    let wanted = args.wanted()?;
    let path = &args.path;
    let Some(original) = current else {
        return match wanted.as_slice() {
            [("", new, _)] => Ok(Planned {
                new: (*new).to_owned(),
                notes: Vec::new(),
            }),
            _ => Err(ToolError::NotFound(format!(
                "{path} does not exist; to create it, give an empty old_text and its content as \
                 new_text"
            ))),
        };
    };
    let mut text = original.to_owned();
    let mut notes = Vec::new();
    let count = wanted.len();
    for (i, (old, new, all)) in wanted.into_iter().enumerate() {
        let label = if count > 1 {
            format!("edit {} of {count}: ", i + 1)
        } else {
            String::new()
        };
        if old.is_empty() && text.is_empty() {
            new.clone_into(&mut text);
            continue;
        }
        let done = matching::replace(&text, old, new, all)
            .map_err(|e| ToolError::Failed(format!("{path}: {label}{e}")))?;
        let mut how = Vec::new();
        if done.unnumbered {
            how.push("without its line-number prefixes".to_owned());
        }
        if done.pass != Pass::Exact {
            how.push(done.pass.how().to_owned());
        }
        if !how.is_empty() {
            notes.push(format!("{label}old_text matched {}", how.join(", ")));
        }
        if all {
            notes.push(format!("{label}{} places replaced", done.count));
        }
        text = done.text;
    }
    if text == original {
        return Err(ToolError::Failed(format!(
            "the edits leave {path} as it was; nothing was changed"
        )));
    }
    Ok(Planned { new: text, notes })
}

/// The change as the approval shows it.
pub(super) fn change(args: &EditArgs, current: Option<String>) -> Result<FileChange, ToolError> {
    let planned = plan(args, current.as_deref())?;
    Ok(FileChange {
        path: args.path.clone(),
        old: current,
        new: Some(planned.new),
    })
}

impl Tool for EditFile {
    fn name(&self) -> &'static str {
        "edit_file"
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let args = EditArgs::parse(args)?;
            let current = files::current(ctx, &args.path).await?;
            let planned = plan(&args, current.as_deref())?;
            files::put(ctx, &args.path, planned.new.clone()).await?;
            Ok(ToolOutput::text(report(
                &args.path,
                current.as_deref(),
                &planned,
            )))
        })
    }
}

fn report(path: &str, old: Option<&str>, planned: &Planned) -> String {
    let mut head = match old {
        None => format!(
            "created {path} ({} lines)",
            planned.new.split_inclusive('\n').count()
        ),
        Some(old) => {
            let lines = diff::changed_lines(old, &planned.new).unwrap_or_default();
            format!("edited {path}: {lines}")
        }
    };
    if !planned.notes.is_empty() {
        head.push_str(&format!(" ({})", planned.notes.join("; ")));
    }
    format!("{head}\n{}", diff::unified(path, old, Some(&planned.new)))
}

#[cfg(test)]
#[path = "edit_file_tests.rs"]
mod tests;
