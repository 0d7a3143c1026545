//! What `corral serve` would grant a `user` token, and the state of the JWT secret, from the
//! config as it is now: the protections of the server are settings, so doctor shows them.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use super::{Report, State};
use crate::config::{Config, SecretSource};

pub(super) fn serve(report: &mut Report, config: &Config) {
    let server = &config.server;
    let here = std::env::current_dir().unwrap_or_else(|_| "/".into());
    let roots =
        crate::surface::server::user_roots(&server.roots, &here, dirs::home_dir().as_deref());
    match roots {
        Ok(roots) if roots.is_empty() => report.line(
            State::Warn,
            "serve: user roots",
            format!(
                "none: started in {} (`/` or the home directory), user tokens could open no \
                 session until [server] roots lists their directories",
                here.display()
            ),
        ),
        Ok(roots) => {
            let listed: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
            let origin = if server.roots.is_empty() {
                " (the directory serve starts in)"
            } else {
                ""
            };
            report.line(
                State::Ok,
                "serve: user roots",
                format!("user sessions only beneath {}{origin}", listed.join(", ")),
            );
        }
        Err(e) => report.line(State::Warn, "serve: user roots", e),
    }
    let backends = if server.user_backends.is_empty() {
        "none (corral's own loop only)".to_string()
    } else {
        server.user_backends.join(", ")
    };
    let state = if server.user_backends.is_empty() {
        State::Ok
    } else {
        State::Warn
    };
    report.line(
        state,
        "serve: user tokens",
        format!(
            "external backends: {backends}; bypass, preset and model files, resuming logs: \
             admin only; at most {} live sessions per owner; other owners' sessions answer \
             404; Host and Origin checked, strict CSP",
            server.max_sessions()
        ),
    );
    secret(report, config);
}

fn secret(report: &mut Report, config: &Config) {
    let configured = config.server.jwt_secret.as_deref();
    let held = match crate::config::jwt_secret(configured, |name| std::env::var(name).ok()) {
        Some((SecretSource::Config, _)) => Some(
            "from the config (hidden from tools with the config directory, redacted from their output)",
        ),
        Some((SecretSource::Env, _)) => {
            Some("from CORRAL_JWT_SECRET (never passed to tools, redacted from their output)")
        }
        None => None,
    };
    if let Some(detail) = held {
        report.line(State::Ok, "serve: JWT secret", detail);
        return;
    }
    let Some(path) = Config::jwt_secret_path() else {
        report.line(
            State::Warn,
            "serve: JWT secret",
            "no config directory for the secret file",
        );
        return;
    };
    report.line_from(secret_file(&path));
}

/// Judges the generated secret file without ever reading its value into the report.
fn secret_file(path: &Path) -> (State, &'static str, String) {
    const WHAT: &str = "serve: JWT secret";
    let shown = path.display();
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return (
                State::Ok,
                WHAT,
                format!("{shown} is made on first start: 256 bits from the OS RNG, mode 0600"),
            );
        }
        Err(e) => return (State::Warn, WHAT, format!("{shown}: {e}")),
    };
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return (
            State::Warn,
            WHAT,
            format!("{shown} has mode {mode:o}: others can read it and mint tokens (chmod 600)"),
        );
    }
    let length = std::fs::read(path)
        .map(|b| b.trim_ascii().len())
        .unwrap_or(0);
    if length < 32 {
        return (
            State::Warn,
            WHAT,
            format!("{shown} holds only {length} bytes: remove it and a 256-bit one is made"),
        );
    }
    (
        State::Ok,
        WHAT,
        format!("{shown}: mode {mode:o}, {length} characters, hidden from tools"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_readable_or_short_secret_file_is_a_warning_and_its_value_never_shown() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("jwt-secret");
        assert_eq!(secret_file(&file).0, State::Ok);
        let value = "c".repeat(64);
        std::fs::write(&file, &value).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let (state, _, detail) = secret_file(&file);
        assert_eq!(state, State::Warn, "{detail}");
        assert!(
            detail.contains("644") && !detail.contains(&value),
            "{detail}"
        );
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let (state, _, detail) = secret_file(&file);
        assert_eq!(state, State::Ok, "{detail}");
        assert!(!detail.contains(&value), "{detail}");
        std::fs::write(&file, "short").unwrap();
        assert_eq!(secret_file(&file).0, State::Warn);
    }
}
