//! Where worktrees live (`<data>/corral/worktrees/`), their records, listing and pruning.

use std::path::{Path, PathBuf};

use git2::Repository;

use super::{Record, WorktreeError, io_error, validate_id};
use crate::event::Timestamp;
use crate::session::WorktreeMeta;

/// The directory holding worktrees (`<id>/`) and their records (`<id>.json`).
#[derive(Debug, Clone)]
pub(crate) struct Store {
    dir: PathBuf,
}

impl Store {
    /// `$XDG_DATA_HOME/corral/worktrees`.
    pub(crate) fn default_location() -> Result<Store, WorktreeError> {
        dirs::data_dir()
            .map(|d| Store::at(d.join("corral").join("worktrees")))
            .ok_or(WorktreeError::NoDataDir)
    }

    pub(crate) fn at(dir: PathBuf) -> Store {
        Store { dir }
    }

    pub(crate) fn ensure(&self) -> Result<(), WorktreeError> {
        std::fs::create_dir_all(&self.dir).map_err(io_error(&self.dir))
    }

    pub(crate) fn dir_of(&self, session: &str) -> PathBuf {
        self.dir.join(session)
    }

    fn record_path(&self, session: &str) -> PathBuf {
        self.dir.join(format!("{session}.json"))
    }

    /// Only directories directly in the store are ever deleted wholesale.
    pub(crate) fn owns(&self, path: &Path) -> bool {
        path.parent() == Some(self.dir.as_path())
    }

    pub(crate) fn save(&self, record: &Record) -> Result<(), WorktreeError> {
        let path = self.record_path(&record.session);
        let text = serde_json::to_string_pretty(record)
            .map_err(|e| io_error(&path)(std::io::Error::other(e)))?;
        std::fs::write(&path, text).map_err(io_error(&path))
    }

    pub(crate) fn delete_record(&self, session: &str) -> Result<(), WorktreeError> {
        let path = self.record_path(session);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_error(&path)(e)),
            _ => Ok(()),
        }
    }

    /// The record of one session's worktree, or one rebuilt from its directory.
    pub(crate) fn load(&self, session: &str) -> Result<Record, WorktreeError> {
        validate_id(session)?;
        let path = self.record_path(session);
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                serde_json::from_str(&text).map_err(|e| io_error(&path)(std::io::Error::other(e)))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let dir = self.dir_of(session);
                if dir.is_dir() {
                    Ok(recover(session, &dir))
                } else {
                    Err(WorktreeError::NotFound(session.to_string()))
                }
            }
            Err(e) => Err(io_error(&path)(e)),
        }
    }

    /// Every worktree the store knows of, by record or by directory, oldest first.
    pub(crate) fn all(&self) -> Result<Vec<Record>, WorktreeError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_error(&self.dir)(e)),
        };
        let mut ids = std::collections::BTreeSet::new();
        for entry in entries {
            let entry = entry.map_err(io_error(&self.dir))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let id = name.strip_suffix(".json").unwrap_or(&name).to_string();
            if validate_id(&id).is_ok() {
                ids.insert(id);
            }
        }
        let mut records: Vec<Record> = ids.iter().filter_map(|id| self.load(id).ok()).collect();
        records.sort_by_key(|r| r.created_at.0);
        Ok(records)
    }
}

/// A record for a worktree directory that lost its record: the branch and the repository are
/// read from the worktree itself; the base is where its branch left the original HEAD.
fn recover(session: &str, dir: &Path) -> Record {
    let created_at = std::fs::metadata(dir)
        .and_then(|m| m.modified())
        .map(|t| Timestamp(t.into()))
        .unwrap_or_else(|_| Timestamp::now());
    let mut meta = WorktreeMeta {
        path: dir.to_path_buf(),
        branch: super::branch_name(session),
        base: String::new(),
        repo: PathBuf::new(),
    };
    if let Ok(repo) = Repository::open(dir)
        && let Ok(head) = repo.head()
    {
        if let Ok(name) = head.shorthand() {
            meta.branch = name.to_string();
        }
        let tip = head.target();
        // commondir is `<repo>/.git/`: its parent is the original working tree.
        let common = repo.commondir().to_path_buf();
        if let Some(parent) = common.parent().filter(|_| common.ends_with(".git")) {
            meta.repo = parent.to_path_buf();
        }
        let base = Repository::open(&meta.repo).ok().and_then(|orig| {
            let ours = orig.head().ok()?.target()?;
            orig.merge_base(ours, tip?).ok()
        });
        meta.base = base.or(tip).map(|o| o.to_string()).unwrap_or_default();
    }
    Record {
        session: session.to_string(),
        created_at,
        meta,
    }
}

/// One worktree as `corral worktree list` shows it.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub record: Record,
    pub dir_exists: bool,
    /// The session's meta file exists (else the worktree is orphaned).
    pub meta_exists: bool,
    /// Its session is running right now.
    pub running: bool,
    /// Files changed against the base; `None` when they cannot be read.
    pub changed: Option<usize>,
    /// Removing it would lose work.
    pub unmerged: bool,
}

impl Entry {
    pub(crate) fn orphaned(&self) -> bool {
        !self.running && (!self.meta_exists || !self.dir_exists)
    }
}

pub(crate) fn entry(record: Record, agents_dir: Option<&Path>) -> Entry {
    let dir_exists = record.meta.path.is_dir();
    let meta_exists = agents_dir
        .is_some_and(|dir| crate::session::SessionMeta::path(dir, &record.session).exists());
    let running =
        Repository::open(&record.meta.repo).is_ok_and(|repo| super::running(&repo, &record.name()));
    let changes = super::changes(&record).ok();
    // When the state cannot be read, assume there is work to lose.
    let unmerged = super::unmerged(&record).unwrap_or(true);
    Entry {
        dir_exists,
        meta_exists,
        running,
        changed: changes.map(|c| c.files.len()),
        unmerged,
        record,
    }
}

pub(crate) fn entries(
    store: &Store,
    agents_dir: Option<&Path>,
) -> Result<Vec<Entry>, WorktreeError> {
    Ok(store
        .all()?
        .into_iter()
        .map(|r| entry(r, agents_dir))
        .collect())
}

/// What `prune` did with one worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PruneAction {
    Removed { session: String, why: String },
    Kept { session: String, why: String },
}

/// Removes worktrees with nothing to lose (clean, or all merged) and orphans; orphans that
/// still hold unmerged work only with `force`. Running sessions are never touched.
pub(crate) fn prune(
    store: &Store,
    agents_dir: Option<&Path>,
    force: bool,
) -> Result<Vec<PruneAction>, WorktreeError> {
    let mut actions = Vec::new();
    for entry in entries(store, agents_dir)? {
        let session = entry.record.session.clone();
        let why = if entry.running {
            None
        } else if !entry.dir_exists {
            Some("orphaned: its directory is gone")
        } else if !entry.unmerged {
            Some(if entry.orphaned() {
                "orphaned: its session is gone"
            } else {
                "no unmerged changes"
            })
        } else if entry.orphaned() && force {
            Some("orphaned, with unmerged changes (--force)")
        } else {
            None
        };
        let Some(why) = why else {
            let why = if entry.running {
                "its session is running".to_string()
            } else {
                format!(
                    "unmerged changes: `corral worktree diff {session}`, then merge or remove{}",
                    if entry.orphaned() {
                        " (or prune --force)"
                    } else {
                        ""
                    }
                )
            };
            actions.push(PruneAction::Kept { session, why });
            continue;
        };
        // A branch with commits nowhere else survives its vanished directory.
        if !entry.dir_exists && entry.unmerged && !force {
            let record = &entry.record;
            if let Ok(repo) = Repository::open(&record.meta.repo)
                && let Ok(wt) = repo.find_worktree(&record.name())
            {
                let mut opts = git2::WorktreePruneOptions::new();
                opts.valid(true).locked(true);
                wt.prune(Some(&mut opts))?;
            }
            actions.push(PruneAction::Kept {
                session,
                why: format!(
                    "directory gone, but branch {} holds unmerged commits (merge it, or prune --force)",
                    record.meta.branch
                ),
            });
            continue;
        }
        match super::remove(&entry.record, store) {
            Ok(()) => actions.push(PruneAction::Removed {
                session,
                why: why.to_string(),
            }),
            Err(e) => actions.push(PruneAction::Kept {
                session,
                why: format!("cannot remove: {e}"),
            }),
        }
    }
    Ok(actions)
}
