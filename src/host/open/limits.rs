//! What a caller who is not the host's owner may open: a `user` token of `corral serve`.
//!
//! Such a caller gets corral's own loop, under a preset that still asks, in a directory the
//! server's owner offered. Everything that would run a program of the caller's choosing or read
//! a file the caller names is refused with [`Error::Forbidden`]:
//! - external agents (`claude`, `codex`, `acp:…`) unless listed in `[server] user_backends`
//!   (`acp:cmd=…` runs any command line, so only an exact listed one passes);
//! - preset paths (only preset names), `gguf:` model files, resuming a log by id — except a
//!   session recorded with the caller as its owner (a dead session reopened over REST), and
//!   then only if its recorded model and directory pass the same checks;
//! - a preset that approves everything (`bypass = true`), whoever configured it;
//! - a working directory outside `[server] roots`, judged after symlinks are resolved, and a
//!   worktree of a repository that starts outside them.
//!
//! The checks run in [`super::plan`] on the very values the session is then built from, before
//! anything is read, contacted or started; a refusal never says whether a directory exists.

use std::path::{Path, PathBuf};

use super::{Error, OpenSpec};
use crate::config::Config;
use crate::error::usage;
use crate::model::{ChoiceError, ExternalKind, ExternalSpec, ModelChoice, Provider};
use crate::policy::Policy;

/// The bounds of one caller (carried to a `corral node` as the control plane judged them).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Limits {
    /// External backends allowed, by [`backend_name`].
    pub backends: Vec<String>,
    /// Canonical directories a session's root must be, or lie beneath.
    pub roots: Vec<PathBuf>,
}

fn forbidden(message: impl Into<String>) -> Error {
    Error::Forbidden(message.into())
}

fn refuse_backend(name: &str) -> Error {
    forbidden(format!(
        "the external backend {name:?} runs a program on the server: it is for admin tokens \
         unless [server] user_backends lists it"
    ))
}

/// The name `[server] user_backends` lists an external backend by: `claude`, `codex`,
/// `acp:<agent>` (the model after it does not matter), `acp:cmd=<command line>`, and a
/// per-turn runtime by its name (`gemini`, `opencode`, …).
pub fn backend_name(spec: &ExternalSpec) -> String {
    match spec.kind {
        ExternalKind::Acp => format!("acp:{}", spec.agent.as_deref().unwrap_or_default()),
        other => other.name().to_string(),
    }
}

/// Whether `path` (canonical) is one of `roots` (canonical) or beneath one. Components are
/// compared, not strings: `/srv/a` does not contain `/srv/ab`.
pub fn within(path: &Path, roots: &[PathBuf]) -> bool {
    roots.iter().any(|root| path.starts_with(root))
}

/// A plain preset name: what `[server]` users may choose (no path, no `.toml` file).
fn plain_name(preset: &str) -> bool {
    !preset.is_empty()
        && !Policy::is_path(preset)
        && preset
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

impl Limits {
    /// What the request's text alone decides, before anything is read or started.
    pub(super) fn check_request(&self, spec: &OpenSpec, config: &Config) -> Result<(), Error> {
        if spec.resume.is_some() && spec.owner.is_none() {
            return Err(forbidden("resuming a session by id is for admin tokens"));
        }
        if let Some(model) = spec.model.as_ref().or(config.model.as_ref()) {
            self.check_model(model)?;
        }
        if let Some(preset) = &spec.permission
            && !plain_name(preset)
        {
            return Err(forbidden(
                "the permission preset must be a preset name; preset files are for admin tokens",
            ));
        }
        // A server definition is a command line corral would start: only trusted callers
        // write one. Users may pick among the servers the config names.
        if !spec.mcp_servers.is_empty() {
            return Err(forbidden(
                "defining MCP servers is for admin tokens; name servers from the server's \
                 config instead",
            ));
        }
        if let Some(unknown) = spec
            .mcp_select
            .iter()
            .flatten()
            .find(|name| !config.mcp_servers.contains_key(*name))
        {
            let known: Vec<&str> = config.mcp_servers.keys().map(String::as_str).collect();
            return Err(forbidden(format!(
                "MCP server {unknown:?} is not in the server's config (it names: {})",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            )));
        }
        Ok(())
    }

    /// A session resumed by id: it must have been recorded with `owner`, and its model must
    /// pass like a requested one (its directory is judged by [`Limits::check_root`]).
    pub(super) fn check_resumed(
        &self,
        meta: &crate::session::SessionMeta,
        owner: Option<&str>,
    ) -> Result<(), Error> {
        if owner.is_none() || meta.owner.as_deref() != owner {
            return Err(forbidden(format!(
                "session {} is not yours: resuming another owner's session is for admin tokens",
                meta.id
            )));
        }
        self.check_model(&self.parse_model(&meta.model)?)
    }

    /// A model spec from this caller, parsed: text that names an agent but does not parse is
    /// refused like an agent `[server] user_backends` does not list, never started.
    pub fn parse_model(&self, text: &str) -> Result<ModelChoice, Error> {
        text.parse().map_err(|e| match e {
            ChoiceError::Agent(_) if !self.backends.iter().any(|b| b == text) => {
                refuse_backend(text)
            }
            e => usage(e),
        })
    }

    fn check_model(&self, model: &ModelChoice) -> Result<(), Error> {
        match model {
            ModelChoice::External(spec) => {
                let name = backend_name(spec);
                if !self.backends.contains(&name) {
                    return Err(refuse_backend(&name));
                }
            }
            ModelChoice::Native(spec) if spec.provider == Provider::Gguf => {
                return Err(forbidden(
                    "gguf: names a model file on the server: it is for admin tokens",
                ));
            }
            ModelChoice::Native(_) => {}
        }
        Ok(())
    }

    /// The session's root: `cwd` with symlinks resolved, if it is a directory within the
    /// roots. One answer for missing, not a directory and outside, so a refusal cannot be
    /// used to probe the server's file system.
    pub(super) fn check_root(&self, cwd: &Path) -> Result<PathBuf, Error> {
        match cwd.canonicalize() {
            Ok(root) if root.is_dir() && within(&root, &self.roots) => Ok(root),
            _ => {
                let roots: Vec<String> =
                    self.roots.iter().map(|r| r.display().to_string()).collect();
                Err(forbidden(format!(
                    "working directory {} is not a directory within the server's roots ({})",
                    cwd.display(),
                    if roots.is_empty() {
                        "none are configured: set [server] roots".to_string()
                    } else {
                        roots.join(", ")
                    }
                )))
            }
        }
    }

    /// A worktree session's repository: the worktree gets a branch and an entry in it, so it
    /// must lie within the roots too (a directory inside a repository that starts above the
    /// roots, such as a home directory kept in git, would otherwise change that repository).
    pub(super) fn check_repository(&self, repo: &Path) -> Result<(), Error> {
        if within(repo, &self.roots) {
            Ok(())
        } else {
            Err(forbidden(
                "--worktree: the repository this directory belongs to starts outside the \
                 server's roots",
            ))
        }
    }

    /// The preset as loaded (the request's, else the config's default).
    pub(super) fn check_policy(&self, policy: &Policy) -> Result<(), Error> {
        if policy.bypass {
            return Err(forbidden(format!(
                "the permission preset {:?} approves every tool call without asking: it is for \
                 admin tokens",
                policy.name
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backends_are_named_without_their_model() {
        let name = |t: &str| backend_name(&t.parse().unwrap());
        assert_eq!(name("claude:sonnet"), "claude");
        assert_eq!(name("codex"), "codex");
        assert_eq!(name("acp:opencode:some/model"), "acp:opencode");
        assert_eq!(name("acp:cmd=sh -c id"), "acp:cmd=sh -c id");
    }

    #[test]
    fn within_compares_components() {
        let roots = [PathBuf::from("/srv/a")];
        assert!(within(Path::new("/srv/a"), &roots));
        assert!(within(Path::new("/srv/a/b"), &roots));
        assert!(!within(Path::new("/srv/ab"), &roots));
        assert!(!within(Path::new("/"), &roots));
        assert!(!within(Path::new("/srv/a"), &[]));
    }

    #[test]
    fn requests_are_judged_by_their_text() {
        let limits = Limits {
            backends: vec!["acp:opencode".into()],
            roots: vec![],
        };
        let config = Config::default();
        let check = |model: Option<&str>, permission: Option<&str>| {
            let spec = OpenSpec {
                model: model.map(|text| limits.parse_model(text)).transpose()?,
                permission: permission.map(str::to_string),
                ..OpenSpec::default()
            };
            limits.check_request(&spec, &config)
        };
        assert!(check(Some("ollama:qwen3"), Some("default")).is_ok());
        assert!(check(Some("acp:opencode:m"), None).is_ok());
        for model in [
            "claude",
            "codex:o3",
            "acp:cmd=sh",
            "acp:gemini",
            "acp:bogus",
        ] {
            assert!(
                matches!(check(Some(model), None), Err(Error::Forbidden(_))),
                "{model}"
            );
        }
        assert!(matches!(
            check(Some("gguf:/etc/shadow"), None),
            Err(Error::Forbidden(_))
        ));
        for preset in ["/etc/passwd", "x.toml", "../x", ""] {
            assert!(
                matches!(check(None, Some(preset)), Err(Error::Forbidden(_))),
                "{preset}"
            );
        }
    }

    #[test]
    fn only_the_recorded_owner_resumes_and_its_model_is_judged() {
        let limits = Limits::default();
        let meta = |owner: Option<&str>, model: &str| crate::session::SessionMeta {
            id: "s1".into(),
            model: model.into(),
            base_url: String::new(),
            cwd: PathBuf::from("/srv"),
            created_at: String::new(),
            system: None,
            worktree: None,
            external_id: None,
            owner: owner.map(str::to_string),
            permission: None,
            mcp_servers: None,
            effort: None,
            parent: None,
        };
        let mine = meta(Some("alice"), "ollama:qwen3");
        assert!(limits.check_resumed(&mine, Some("alice")).is_ok());
        for (meta, caller) in [
            (&mine, Some("bob")),
            (&mine, None),
            (&meta(None, "ollama:qwen3"), Some("alice")),
            (&meta(Some("alice"), "claude"), Some("alice")),
            (&meta(Some("alice"), "gguf:/m.gguf"), Some("alice")),
        ] {
            assert!(
                matches!(limits.check_resumed(meta, caller), Err(Error::Forbidden(_))),
                "{meta:?} {caller:?}"
            );
        }
        let config = Config::default();
        let spec = |owner: Option<&str>| OpenSpec {
            resume: Some("s1".into()),
            owner: owner.map(str::to_string),
            ..OpenSpec::default()
        };
        assert!(limits.check_request(&spec(None), &config).is_err());
        assert!(limits.check_request(&spec(Some("alice")), &config).is_ok());
    }

    #[test]
    fn a_root_refusal_says_the_same_for_missing_and_outside() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let inside = root.join("in");
        std::fs::create_dir(&inside).unwrap();
        let limits = Limits {
            backends: vec![],
            roots: vec![inside.clone()],
        };
        assert_eq!(limits.check_root(&inside).unwrap(), inside);
        let link = inside.join("up");
        std::os::unix::fs::symlink(&root, &link).unwrap();
        let message = |p: &Path| match limits.check_root(p) {
            Err(Error::Forbidden(m)) => m.replacen(&p.display().to_string(), "P", 1),
            other => panic!("{other:?}"),
        };
        assert_eq!(message(&link), message(&root.join("missing")));
        assert_eq!(message(&link), message(Path::new("/")));
    }
}
