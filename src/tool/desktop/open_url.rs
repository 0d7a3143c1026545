//! `open_url`: hands a URL to the configured command, else `$BROWSER`, else `xdg-open`.
//!
//! The URL is passed as one argument, never through a shell, so nothing in it is interpreted.
//! Only allowed schemes get through: `file:` or a custom handler scheme could run things.
//! With the session's network off nothing is opened: a browser outside the sandbox would carry
//! the URL, and whatever the model put in it, off the machine.

use std::io;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde::Deserialize;
use serde_json::Value;
use tokio::io::AsyncReadExt as _;
use tokio::process::Command;

use super::super::output::parse_args;
use super::super::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use super::excerpt;
use crate::sandbox::NetworkMode;

/// An opener still running after this is taken to be the browser itself (xdg-open waits for
/// `$BROWSER`); it is left running, since killing it would close what was just opened.
const WAIT: Duration = Duration::from_secs(15);
/// After the opener exits, how long its stderr is still read: a browser it started may hold
/// the pipe open for hours.
const STDERR_GRACE: Duration = Duration::from_millis(200);
/// The most stderr kept for the error message.
const STDERR_LIMIT: usize = 64 * 1024;
const DEFAULT_OPENER: &str = "xdg-open";
/// xdg-open's exit code for "no method available to open this".
const XDG_NO_METHOD: i32 = 3;

pub(crate) struct OpenUrl;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    url: String,
}

impl Tool for OpenUrl {
    fn name(&self) -> &'static str {
        "open_url"
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let Args { url } = parse_args(args)?;
            refuse_without_network(ctx)?;
            check_url(&url, &ctx.settings.url_schemes)?;
            // The configured command, else `$BROWSER` (the first entry of its `:`-separated
            // list — xdg-open would prefer a desktop's handler over it once a browser is
            // installed), else xdg-open.
            let browser = ctx
                .settings
                .env
                .iter()
                .find(|(k, _)| k == "BROWSER")
                .and_then(|(_, v)| v.split(':').find(|s| !s.trim().is_empty()))
                .map(str::to_string);
            let argv = match (&ctx.settings.open_url_command, browser) {
                (Some(line), _) => command_line(line, &url).map_err(|e| {
                    ToolError::Refused(format!("open_url: the configured open_url_command {e}"))
                })?,
                (None, Some(browser)) => command_line(&browser, &url)
                    .map_err(|e| ToolError::Refused(format!("open_url: $BROWSER {e}")))?,
                (None, None) => vec![DEFAULT_OPENER.to_owned(), url.clone()],
            };
            let still_running = run(ctx, &argv).await?;
            Ok(ToolOutput::text(if still_running {
                format!(
                    "opened {url} (the opener `{}` is still running after {}s)",
                    argv[0],
                    WAIT.as_secs()
                )
            } else {
                format!("opened {url}")
            }))
        })
    }
}

/// The browser runs outside the sandbox, so "network off" is kept by not starting it.
fn refuse_without_network(ctx: &ToolContext) -> Result<(), ToolError> {
    let off = ctx
        .settings
        .sandbox
        .as_ref()
        .is_some_and(|s| s.network == NetworkMode::Off);
    if off {
        return Err(ToolError::Refused(
            "open_url is refused: the network is off for this session (--network off), and \
             a browser would take the URL off the machine"
                .into(),
        ));
    }
    Ok(())
}

/// Refuses URLs whose scheme is not allowed, naming the allowed ones.
fn check_url(url: &str, schemes: &[String]) -> Result<(), ToolError> {
    let allowed = || {
        if schemes.is_empty() {
            "none (open_url is turned off by the url_schemes setting)".to_owned()
        } else {
            schemes.join(", ")
        }
    };
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(ToolError::InvalidArguments(
            "the URL contains spaces or control characters; percent-encode them".into(),
        ));
    }
    let scheme = url.split_once(':').map(|(s, _)| s).filter(|s| {
        s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    });
    let Some(scheme) = scheme else {
        return Err(ToolError::InvalidArguments(format!(
            "{url:?} is not an absolute URL; give one with a scheme ({}), e.g. https://example.com",
            allowed()
        )));
    };
    if !schemes.iter().any(|s| s.eq_ignore_ascii_case(scheme)) {
        return Err(ToolError::Refused(format!(
            "open_url does not open {scheme}: URLs; allowed schemes: {}",
            allowed()
        )));
    }
    Ok(())
}

/// Splits a configured command line into words (single and double quotes, backslash escapes)
/// and puts the URL where `%s` is, or last. No shell is involved.
fn command_line(line: &str, url: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => words.extend(word.take()),
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => w.push(c),
                        None => return Err(format!("has an unclosed ' in {line:?}")),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => w.extend(chars.next()),
                        Some(c) => w.push(c),
                        None => return Err(format!("has an unclosed \" in {line:?}")),
                    }
                }
            }
            '\\' => word.get_or_insert_with(String::new).extend(chars.next()),
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    if words.is_empty() {
        return Err("is empty".into());
    }
    if words.iter().any(|w| w.contains("%s")) {
        for w in &mut words {
            *w = w.replace("%s", url);
        }
    } else {
        words.push(url.to_owned());
    }
    Ok(words)
}

/// Runs the opener with the tool environment; `Ok(true)` when it is still running at the
/// deadline.
async fn run(ctx: &ToolContext, argv: &[String]) -> Result<bool, ToolError> {
    let program = &argv[0];
    let mut child = Command::new(program)
        .args(&argv[1..])
        .env_clear()
        .envs(ctx.settings.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&ctx.root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        // Its own group: a browser it starts must survive corral's Ctrl-C, and a cancelled
        // call can still take down everything the opener started.
        .process_group(0)
        .spawn()
        .map_err(|e| {
            ToolError::Io(match e.kind() {
                io::ErrorKind::NotFound if program == DEFAULT_OPENER => {
                    "open_url: xdg-open is not installed (install xdg-utils, or set \
                     open_url_command)"
                        .to_owned()
                }
                _ => format!("open_url: cannot run {program}: {e}"),
            })
        })?;
    // Read in a task into a shared buffer, so what arrived is kept even when a browser the
    // opener started holds the pipe open and the read never ends.
    let err = Arc::new(Mutex::new(Vec::new()));
    let reader = child.stderr.take().map(|mut pipe| {
        let err = err.clone();
        tokio::spawn(async move {
            let mut chunk = [0u8; 4096];
            while let Ok(n @ 1..) = pipe.read(&mut chunk).await {
                let mut err = err.lock().unwrap_or_else(PoisonError::into_inner);
                // Bounded: an excerpt is all an error message needs.
                if err.len() < STDERR_LIMIT {
                    err.extend_from_slice(&chunk[..n]);
                }
            }
        })
    });
    let status = tokio::select! {
        biased;
        () = ctx.cancel.cancelled() => {
            if let Some(pid) = child.id().and_then(|id| i32::try_from(id).ok()) {
                let _ = killpg(Pid::from_raw(pid), Signal::SIGTERM);
            }
            return Err(ToolError::Cancelled);
        }
        status = tokio::time::timeout(WAIT, child.wait()) => status,
    };
    if let Some(reader) = reader {
        let abort = reader.abort_handle();
        if tokio::time::timeout(STDERR_GRACE, reader).await.is_err() {
            abort.abort();
        }
    }
    let err = std::mem::take(&mut *err.lock().unwrap_or_else(PoisonError::into_inner));
    let status = match status {
        Err(_) => return Ok(true),
        Ok(status) => {
            status.map_err(|e| ToolError::Io(format!("open_url: waiting for {program}: {e}")))?
        }
    };
    if status.success() {
        return Ok(false);
    }
    let stderr = excerpt(&String::from_utf8_lossy(&err), 300);
    let detail = if stderr.is_empty() {
        String::new()
    } else {
        format!(": {stderr}")
    };
    let code = status.code();
    Err(ToolError::Io(
        if program == DEFAULT_OPENER && code == Some(XDG_NO_METHOD) {
            format!(
                "open_url: no browser found; set BROWSER (xdg-open found no method to open the URL{detail})"
            )
        } else {
            let how = code.map_or_else(
                || "was killed by a signal".into(),
                |c| format!("exited with status {c}"),
            );
            format!("open_url: {program} {how}{detail}")
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::super::testing::context_with_env;
    use super::*;
    use serde_json::json;
    use std::os::unix::fs::PermissionsExt as _;

    fn schemes() -> Vec<String> {
        vec!["http".into(), "https".into()]
    }

    #[test]
    fn only_allowed_schemes_pass() {
        assert!(check_url("https://example.com/a?b=1&c=2", &schemes()).is_ok());
        assert!(check_url("HTTP://EXAMPLE.COM", &schemes()).is_ok());
        let err = check_url("file:///etc/passwd", &schemes()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "open_url does not open file: URLs; allowed schemes: http, https"
        );
        assert!(check_url("javascript:alert(1)", &schemes()).is_err());
        assert!(
            check_url("example.com", &schemes())
                .unwrap_err()
                .to_string()
                .contains("not an absolute URL")
        );
        assert!(check_url("https://a b", &schemes()).is_err());
        assert!(
            check_url("https://x", &[])
                .unwrap_err()
                .to_string()
                .contains("turned off")
        );
    }

    #[test]
    fn command_lines_split_like_a_shell_without_one() {
        let url = "https://e.com/?q=1&r=2";
        assert_eq!(command_line("firefox", url).unwrap(), ["firefox", url]);
        assert_eq!(
            command_line("'my browser' --new-tab \"--url=%s\" x\\ y", url).unwrap(),
            ["my browser", "--new-tab", &format!("--url={url}"), "x y"]
        );
        assert_eq!(command_line("open ''", url).unwrap(), ["open", "", url]);
        assert!(command_line("  ", url).is_err());
        assert!(command_line("a 'b", url).is_err());
    }

    /// A tool environment whose PATH starts with a directory holding `name` as `script`.
    fn with_fake(name: &str, script: &str) -> (tempfile::TempDir, ToolContext) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{script}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        let search = format!("{}:/usr/bin:/bin", dir.path().display());
        let log = dir.path().join("log").display().to_string();
        let mut ctx = context_with_env(&[("PATH", &search), ("LOG", &log)]);
        ctx.root = dir.path().to_path_buf();
        (dir, ctx)
    }

    #[tokio::test]
    async fn the_url_reaches_the_opener_as_one_argument() {
        let (dir, ctx) = with_fake("xdg-open", r#"printf '%s\n' "$#" "$1" > "$LOG""#);
        let url = "https://example.com/c?q=1&r=2;$(id)`id`";
        let out = OpenUrl.call(json!({"url": url}), &ctx).await.unwrap();
        assert_eq!(out.text, format!("opened {url}"));
        let log = std::fs::read_to_string(dir.path().join("log")).unwrap();
        assert_eq!(log, format!("1\n{url}\n"));
    }

    #[tokio::test]
    async fn with_network_off_nothing_is_opened() {
        let (dir, mut ctx) = with_fake("xdg-open", r#"printf '%s\n' "$1" > "$LOG""#);
        let mut settings = (*ctx.settings).clone();
        let spec = crate::sandbox::SandboxSpec::new(
            crate::sandbox::SandboxMode::BestEffort,
            NetworkMode::Off,
        );
        settings.sandbox = Some(spec);
        ctx.settings = Arc::new(settings);
        let err = OpenUrl
            .call(json!({"url": "https://example.com/?leak=1"}), &ctx)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("network is off"), "{err}");
        assert!(!dir.path().join("log").exists());
    }

    #[tokio::test]
    async fn a_configured_command_gets_the_url_in_place_of_percent_s() {
        let (dir, mut ctx) = with_fake("opener", r#"printf '%s\n' "$@" > "$LOG""#);
        let mut settings = (*ctx.settings).clone();
        settings.open_url_command = Some("opener --flag --url=%s".into());
        ctx.settings = Arc::new(settings);
        OpenUrl
            .call(json!({"url": "http://x.test/"}), &ctx)
            .await
            .unwrap();
        let log = std::fs::read_to_string(dir.path().join("log")).unwrap();
        assert_eq!(log, "--flag\n--url=http://x.test/\n");
    }

    #[tokio::test]
    async fn xdg_open_without_a_method_asks_for_browser() {
        let (_dir, ctx) = with_fake(
            "xdg-open",
            "echo 'xdg-open: no method available' >&2; exit 3",
        );
        let err = OpenUrl
            .call(json!({"url": "https://example.com"}), &ctx)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("no browser found; set BROWSER"), "{err}");
        assert!(err.contains("no method available"), "{err}");
    }

    #[tokio::test]
    async fn other_failures_carry_the_status_and_stderr() {
        let (_dir, ctx) = with_fake(
            "xdg-open",
            "echo 'gio: operation not supported' >&2; exit 4",
        );
        let err = OpenUrl
            .call(json!({"url": "https://example.com"}), &ctx)
            .await
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "open_url: xdg-open exited with status 4: gio: operation not supported"
        );
    }

    #[tokio::test]
    async fn a_missing_opener_is_named() {
        let (_dir, mut ctx) = with_fake("unused", "true");
        let mut settings = (*ctx.settings).clone();
        settings.open_url_command = Some("no-such-opener-here".into());
        ctx.settings = Arc::new(settings);
        let err = OpenUrl
            .call(json!({"url": "https://example.com"}), &ctx)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("cannot run no-such-opener-here"), "{err}");
    }
}
