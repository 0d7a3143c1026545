//! `corral worktree …` and the worktree part of `corral run --worktree`: the messages around
//! the library's git work. Everything writes to the writers it is given, through
//! [`SafeWriter`]: a diff quotes files a model wrote, and an escape sequence in one must not
//! hide lines from the person reviewing it.

use std::io::Write;
use std::path::PathBuf;

use crate::worktree::{
    self, Entry, MergeKind, PruneAction, Record, Store, WorktreeError, snapshot,
};

use super::run::Exit;
use super::safe_text::SafeWriter;

/// The `corral worktree` subcommands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorktreeCommand {
    List,
    Diff {
        id: String,
    },
    Merge {
        id: String,
    },
    /// Records the worktree's current state as the one to review and merge.
    Snapshot {
        id: String,
    },
    Remove {
        id: String,
        force: bool,
    },
    Prune {
        force: bool,
    },
}

/// Session metas live beside the event logs; their absence marks an orphan.
fn agents_dir() -> Option<PathBuf> {
    dirs::cache_dir().map(|d| d.join("corral").join("agents"))
}

fn exit_for(e: &WorktreeError) -> Exit {
    if e.is_usage() {
        Exit::Usage
    } else {
        Exit::Failure
    }
}

/// Runs one `corral worktree` subcommand: results on `out` (the diff, the listing), messages
/// on `err`. Returns the exit code.
pub fn worktree_main(
    command: &WorktreeCommand,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Exit {
    let mut out = SafeWriter::new(out);
    let mut err = SafeWriter::new(err);
    let exit = match dispatch(command, &mut out, &mut err) {
        Ok(exit) => exit,
        Err(e) => {
            let _ = writeln!(err, "corral: {e}");
            exit_for(&e)
        }
    };
    let finished = out.finish().and_then(|()| out.flush());
    let _ = err.finish();
    match finished {
        Err(e) if exit == Exit::Ok => {
            let _ = writeln!(err, "corral: {}", stdout_error(e));
            Exit::Failure
        }
        _ => exit,
    }
}

fn dispatch(
    command: &WorktreeCommand,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<Exit, WorktreeError> {
    let store = Store::default_location()?;
    let agents = agents_dir();
    match command {
        WorktreeCommand::List => {
            let entries = worktree::entries(&store, agents.as_deref())?;
            write_list(&entries, out).map_err(stdout_error)?;
        }
        WorktreeCommand::Diff { id } => {
            let record = store.load(id)?;
            // Before the snapshot note, which reads the repository the `.git` names.
            worktree::check_links(&record)?;
            note_snapshot(&record, err)?;
            worktree::write_diff(&record, out)?;
        }
        WorktreeCommand::Snapshot { id } => {
            let record = store.load(id)?;
            if worktree::store_entry(record.clone(), agents.as_deref()).running {
                return Err(WorktreeError::Refused(format!(
                    "session {id} is still running; its snapshot is taken when it ends"
                )));
            }
            let taken = snapshot::take(&record)?;
            let _ = writeln!(
                err,
                "snapshot {} of worktree {id}: review it with `corral worktree diff {id}`, then \
                 `corral worktree merge {id}`",
                snapshot::short(taken)
            );
        }
        WorktreeCommand::Merge { id } => {
            let record = store.load(id)?;
            // A snapshot of a session still at work would be half of its changes.
            if worktree::store_entry(record.clone(), agents.as_deref()).running {
                return Err(WorktreeError::Refused(format!(
                    "session {id} is still running; merge it when it has ended"
                )));
            }
            let merged = worktree::merge(&record)?;
            let short = merged.head.to_string();
            let short = short.get(..7).unwrap_or(&short);
            let n = merged.files.len();
            let line = match merged.kind {
                MergeKind::UpToDate => format!(
                    "{} already contains everything from {}",
                    merged.into, record.meta.branch
                ),
                MergeKind::FastForward => format!(
                    "fast-forwarded {} to {short}: {n} file{} from {}",
                    merged.into,
                    plural(n),
                    record.meta.branch
                ),
                MergeKind::MergeCommit => format!(
                    "merged {} into {} with merge commit {short}: {n} file{}",
                    record.meta.branch,
                    merged.into,
                    plural(n)
                ),
            };
            let _ = writeln!(
                err,
                "{line} (in {}); the worktree is kept: `corral worktree remove {id}` when done",
                record.meta.repo.display()
            );
        }
        WorktreeCommand::Remove { id, force } => {
            let record = store.load(id)?;
            let entry = worktree::store_entry(record.clone(), agents.as_deref());
            if entry.running && !force {
                return Err(WorktreeError::Refused(format!(
                    "session {id} is still running; not removing its worktree (--force to do it anyway)"
                )));
            }
            if entry.unmerged && !force {
                return Err(WorktreeError::Refused(format!(
                    "worktree {id} has unmerged changes: review with `corral worktree diff {id}`, \
                     then `corral worktree merge {id}`, or remove with --force to discard them"
                )));
            }
            worktree::remove(&record, &store)?;
            let _ = writeln!(
                err,
                "removed worktree {} and branch {}",
                record.meta.path.display(),
                record.meta.branch
            );
        }
        WorktreeCommand::Prune { force } => {
            let actions = worktree::prune(&store, agents.as_deref(), *force)?;
            if actions.is_empty() {
                let _ = writeln!(err, "no worktrees");
            }
            for action in actions {
                let _ = match action {
                    PruneAction::Removed { session, why } => {
                        writeln!(err, "removed {session} ({why})")
                    }
                    PruneAction::Kept { session, why } => writeln!(err, "kept {session}: {why}"),
                };
            }
        }
    }
    Ok(Exit::Ok)
}

/// Which state the diff shows, and whether the worktree still matches it.
fn note_snapshot(record: &Record, err: &mut impl Write) -> Result<(), WorktreeError> {
    let id = &record.session;
    let Some(taken) = snapshot::recorded(record)? else {
        let _ = writeln!(
            err,
            "corral: worktree {id} has no snapshot yet (its session is running or predates \
             snapshots): the diff shows its current state"
        );
        return Ok(());
    };
    let _ = writeln!(
        err,
        "corral: snapshot {} of worktree {id}: `corral worktree merge {id}` merges exactly this",
        snapshot::short(taken)
    );
    let changed = snapshot::changed_since(record, taken)?;
    if !changed.is_empty() {
        let _ = writeln!(
            err,
            "corral: warning: the worktree changed since this snapshot: {}; merge refuses until \
             `corral worktree snapshot {id}`",
            changed.join(", ")
        );
    }
    Ok(())
}

fn stdout_error(e: std::io::Error) -> WorktreeError {
    WorktreeError::Io {
        path: PathBuf::from("<stdout>"),
        source: e,
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn age(record: &Record) -> String {
    let secs = (time::OffsetDateTime::now_utc() - record.created_at.0)
        .whole_seconds()
        .max(0);
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        3600..86400 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86400),
    }
}

fn write_list(entries: &[Entry], out: &mut impl Write) -> std::io::Result<()> {
    if entries.is_empty() {
        return Ok(());
    }
    let rows: Vec<[String; 7]> = entries
        .iter()
        .map(|e| {
            let state = if e.running {
                "running"
            } else if !e.dir_exists {
                "orphaned (directory gone)"
            } else if !e.meta_exists {
                "orphaned (no session)"
            } else {
                ""
            };
            [
                e.record.session.clone(),
                e.record.meta.branch.clone(),
                e.record.short_base().to_string(),
                e.changed.map_or("?".to_string(), |n| n.to_string()),
                age(&e.record),
                e.record.meta.path.display().to_string(),
                state.to_string(),
            ]
        })
        .collect();
    let header = [
        "SESSION", "BRANCH", "BASE", "CHANGED", "AGE", "PATH", "STATE",
    ];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in std::iter::once(header.map(str::to_string)).chain(rows) {
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(widths).enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:w$}  "));
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}
