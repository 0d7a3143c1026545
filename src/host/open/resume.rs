//! Which session a request continues: `--resume` by a unique prefix of its id, or
//! `--continue` (the most recent one of the directory).

use std::path::PathBuf;

use super::{OpenSpec, agents_dir, canonical_dir};
use crate::error::{Error, usage};
use crate::session::catalog;

/// The full id of the session `spec` continues, if it continues one. A bounded caller (a
/// server `user` token) names a session exactly and cannot ask for "the latest": both would
/// tell it about sessions that are not its own.
pub(super) fn which(spec: &OpenSpec) -> Result<Option<String>, Error> {
    if spec.limits.is_some() {
        if spec.continue_last {
            return Err(Error::Forbidden(
                "continuing the latest session is for the host's owner".into(),
            ));
        }
        return Ok(spec.resume.clone());
    }
    match (&spec.resume, spec.continue_last) {
        (Some(_), true) => Err(usage(
            "--resume and --continue ask for different sessions: give one",
        )),
        (Some(text), false) => {
            let dir = agents_dir()?;
            catalog::resolve(&dir, text)
                .map(Some)
                .map_err(|e| usage(format!("cannot resume session {text}: {e}")))
        }
        (None, true) => latest(spec).map(Some),
        (None, false) => Ok(None),
    }
}

fn latest(spec: &OpenSpec) -> Result<String, Error> {
    let cwd = match &spec.cwd {
        Some(cwd) => cwd.clone(),
        None => std::env::current_dir().map_err(usage)?,
    };
    let root: PathBuf = canonical_dir(&cwd)?;
    let dir = agents_dir()?;
    match catalog::latest_in(&dir, &root) {
        Ok(Some(session)) => Ok(session.id),
        Ok(None) => Err(usage(format!(
            "no session to continue in {}: none was run here yet, or every one is still \
             running (`corral sessions` lists them all)",
            root.display()
        ))),
        Err(e) => Err(usage(format!(
            "cannot read the sessions in {}: {e}",
            dir.display()
        ))),
    }
}
