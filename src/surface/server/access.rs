//! What a token may reach: `admin` is the host's owner, `user` is not.
//!
//! A `user` token opens sessions under [`Limits`] (see `host::open::limits`): corral's own
//! loop, preset names that still ask, directories under `[server] roots`, external backends
//! only as `[server] user_backends` lists them; and holds at most `max_sessions_per_owner` live
//! sessions (429 beyond). Admins are unbounded: an admin token can already run any program
//! the server's user can (it may start `acp:cmd=…`), so bounding its directories would
//! protect nothing and only get in the way.
//!
//! A session the caller may not use is reported exactly like a missing one (see [`visible`]),
//! so ids cannot be probed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use axum::http::StatusCode;

use super::ApiError;
use super::auth::Claims;
use crate::config::Server as ServerConfig;
use crate::event::Status;
use crate::host::manager::{Handle, SessionManager};
use crate::host::open::Limits;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[derive(Debug)]
pub struct Access {
    limits: Limits,
    max_sessions: usize,
    /// Opens under way per owner: counted with the live sessions, so concurrent requests
    /// cannot pass the limit together.
    opening: Arc<Mutex<HashMap<String, usize>>>,
}

/// The directories user sessions may use. Listed roots are taken as they are (resolved);
/// without a list, the directory `serve` started in, unless it is `/` or the home directory:
/// a server started there would otherwise offer the whole machine or every credential.
pub fn user_roots(
    listed: &[PathBuf],
    started_in: &Path,
    home: Option<&Path>,
) -> Result<Vec<PathBuf>, String> {
    if !listed.is_empty() {
        return listed
            .iter()
            .map(|root| {
                root.canonicalize()
                    .map_err(|e| format!("server.roots: {} cannot be used: {e}", root.display()))
            })
            .collect();
    }
    let here = started_in
        .canonicalize()
        .map_err(|e| format!("the current directory cannot be used: {e}"))?;
    let home = home.and_then(|h| h.canonicalize().ok());
    if here == Path::new("/") || Some(&here) == home.as_ref() {
        tracing::warn!(
            target: "corral::server",
            "serve started in {}: user tokens cannot open sessions until [server] roots lists \
             their directories",
            here.display()
        );
        return Ok(Vec::new());
    }
    Ok(vec![here])
}

impl Access {
    pub fn new(config: &ServerConfig, roots: Vec<PathBuf>) -> Access {
        Access {
            limits: Limits {
                backends: config.user_backends.clone(),
                roots,
            },
            max_sessions: config.max_sessions(),
            opening: Arc::default(),
        }
    }

    /// The bounds a session opened by this caller is held to; `None` for admins.
    pub fn limits_for(&self, claims: &Claims) -> Option<Limits> {
        (!claims.is_admin()).then(|| self.limits.clone())
    }

    /// Holds a place for one more session of this caller, or 429.
    pub fn reserve(
        &self,
        manager: &SessionManager,
        claims: &Claims,
    ) -> Result<Reservation, ApiError> {
        if claims.is_admin() {
            return Ok(Reservation {
                owner: None,
                opening: self.opening.clone(),
            });
        }
        let mut opening = lock(&self.opening);
        let live = manager
            .list()
            .iter()
            .filter(|h| h.owner == claims.sub && h.session.status() != Status::Dead)
            .count();
        let pending = opening.get(&claims.sub).copied().unwrap_or(0);
        if live + pending >= self.max_sessions {
            return Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "TOO_MANY_SESSIONS",
                format!(
                    "you hold {} open sessions, the most one user may; close one first",
                    self.max_sessions
                ),
            ));
        }
        *opening.entry(claims.sub.clone()).or_default() += 1;
        Ok(Reservation {
            owner: Some(claims.sub.clone()),
            opening: self.opening.clone(),
        })
    }
}

/// A place held while a session opens, released when dropped: by then the session is open
/// (and counted among the live ones) or failed.
pub struct Reservation {
    /// `None`: an admin's, which counts nothing.
    owner: Option<String>,
    opening: Arc<Mutex<HashMap<String, usize>>>,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let Some(owner) = &self.owner else { return };
        let mut opening = lock(&self.opening);
        if let Some(n) = opening.get_mut(owner) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                opening.remove(owner);
            }
        }
    }
}

/// The session, if it exists and the caller may use it. Otherwise the same 404 as for an id
/// nobody has: whether another user's session exists is not the caller's to learn.
pub fn visible(
    manager: &SessionManager,
    claims: &Claims,
    id: &str,
) -> Result<Arc<Handle>, ApiError> {
    manager
        .get(id)
        .filter(|handle| claims.may_use(&handle.owner))
        .ok_or_else(|| not_found(id))
}

/// The one answer for a session the caller cannot see.
pub fn not_found(id: &str) -> ApiError {
    ApiError::not_found(format!("no session {id}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_default_to_the_start_directory_but_never_to_slash_or_home() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let work = home.join("work");
        std::fs::create_dir_all(&work).unwrap();
        let canonical = work.canonicalize().unwrap();
        assert_eq!(
            user_roots(&[], &work, Some(&home)).unwrap(),
            vec![canonical]
        );
        assert!(user_roots(&[], &home, Some(&home)).unwrap().is_empty());
        assert!(user_roots(&[], Path::new("/"), None).unwrap().is_empty());
        // Listed explicitly, even home is a root.
        assert_eq!(
            user_roots(std::slice::from_ref(&home), &work, Some(&home)).unwrap(),
            vec![home.canonicalize().unwrap()]
        );
        assert!(user_roots(&[home.join("missing")], &work, None).is_err());
    }
}
