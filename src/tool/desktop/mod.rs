//! Desktop tools: `screenshot`, `clipboard_read`, `clipboard_write`, `notify`, `open_url`.
//!
//! They reach the user's X11 display and D-Bus session bus through the addresses in the
//! session's tool environment (`ToolSettings::env`), never through corral's own process
//! environment: the session's environment is the one source of truth for what a tool may touch,
//! so a session started without `DISPLAY` gets no screen even if corral itself has one.

pub(crate) mod backend;
mod clipboard;
pub(crate) mod computer;
pub(crate) mod keys;
mod notify;
mod open_url;
mod pixels;
pub(crate) mod portal;
mod presence;
mod screenshot;
mod wayland;
mod x11;

pub use clipboard::clipboard_helper_main;
pub(crate) use clipboard::{ClipboardRead, ClipboardWrite};
pub(crate) use computer::{Computer, Windows};
pub(crate) use notify::{Notify, notify_person};
pub(crate) use open_url::OpenUrl;
pub use presence::Presence;
pub(crate) use screenshot::Screenshot;

use super::{ToolContext, ToolError};

/// The titles of the desktop's windows, for a caller outside the tools (an eval waiting for
/// its program's window), on the display `env` names.
pub fn window_titles(env: &[(String, String)]) -> Result<Vec<String>, ToolError> {
    let hold = std::sync::Arc::default();
    let mut desk = backend::open(
        &backend::DesktopEnv::from_env(env),
        "the window list",
        &hold,
    )?;
    Ok(desk.windows()?.into_iter().map(|w| w.title).collect())
}

/// What the desktop in `env` offers for automation, for `doctor`: (offered, what, detail).
pub async fn automation_report(env: &[(String, String)]) -> Vec<(bool, String, String)> {
    let desk = backend::DesktopEnv::from_env(env);
    let mut lines = Vec::new();
    if desk.wayland_display.is_some() {
        for found in wayland::capabilities(&desk).await {
            lines.push((
                found.available,
                format!("wayland {}", found.name),
                found.detail,
            ));
        }
        lines.push(match &desk.swaysock {
            Some(_) => (
                true,
                "stop key".into(),
                "Pause (bound through sway's IPC while a session drives the desktop)".into(),
            ),
            None => (
                false,
                "stop key".into(),
                "this compositor gives clients no global keys: Ctrl-C in `corral run`, or Esc \
                 in the full-screen view, stops a turn"
                    .into(),
            ),
        });
    } else if let Some(display) = desk.display.clone() {
        let found = tokio::task::spawn_blocking(move || x11::capabilities(&display)).await;
        match found {
            Ok(Ok(found)) => {
                for line in found {
                    let missing = line.contains("missing");
                    lines.push((!missing, "x11".into(), line));
                }
                lines.push((
                    true,
                    "stop key".into(),
                    "Pause (a grab on the root window)".into(),
                ));
            }
            Ok(Err(e)) => lines.push((false, "x11".into(), e.to_string())),
            Err(e) => lines.push((false, "x11".into(), e.to_string())),
        }
    } else {
        lines.push((
            false,
            "desktop input".into(),
            "neither WAYLAND_DISPLAY nor DISPLAY is set".into(),
        ));
    }
    lines
}

/// The value of `name` in the tool environment; an empty value counts as unset, as the X and
/// D-Bus libraries treat it.
fn env_value<'a>(ctx: &'a ToolContext, name: &str) -> Option<&'a str> {
    ctx.settings
        .env
        .iter()
        .rev()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.as_str())
        .filter(|value| !value.is_empty())
}

/// `DISPLAY` from the tool environment, or the error every X11 tool gives without one.
fn display(ctx: &ToolContext, tool: &str) -> Result<String, ToolError> {
    env_value(ctx, "DISPLAY").map(str::to_owned).ok_or_else(|| {
        ToolError::Refused(format!(
            "{tool} needs an X11 display: DISPLAY is not set (on a server, run under Xvfb)"
        ))
    })
}

/// Runs blocking X11 work off the async threads; a cancelled call returns at once.
async fn blocking<T: Send + 'static>(
    ctx: &ToolContext,
    work: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    off_thread(&ctx.cancel, work).await
}

/// [`blocking`] for work that has a cancel token but no tool context (a call's inspection
/// before the gate).
async fn off_thread<T: Send + 'static>(
    cancel: &tokio_util::sync::CancellationToken,
    work: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    let task = tokio::task::spawn_blocking(work);
    tokio::select! {
        biased;
        () = cancel.cancelled() => Err(ToolError::Cancelled),
        joined = task => joined.map_err(|e| ToolError::Io(format!("tool task failed: {e}")))?,
    }
}

/// At most `max` characters of a process's stderr, trimmed, for an error message.
fn excerpt(text: &str, max: usize) -> String {
    let text = text.trim();
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
pub(super) mod testing {
    use std::sync::Arc;

    use super::super::{ToolContext, ToolSettings};

    /// A context whose tool environment is exactly `env` (plus PATH, so helpers can run).
    pub(crate) fn context_with_env(env: &[(&str, &str)]) -> ToolContext {
        let mut ctx = ToolContext::new(std::env::temp_dir(), "c1");
        let mut settings = ToolSettings {
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            ..ToolSettings::default()
        };
        if !settings.env.iter().any(|(k, _)| k == "PATH") {
            settings
                .env
                .push(("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()));
        }
        ctx.settings = Arc::new(settings);
        ctx
    }
}

#[cfg(test)]
mod tests {
    use super::testing::context_with_env;
    use super::*;

    #[test]
    fn empty_and_missing_variables_are_unset_and_the_last_one_wins() {
        let ctx = context_with_env(&[("DISPLAY", ""), ("A", "1"), ("A", "2")]);
        assert_eq!(env_value(&ctx, "DISPLAY"), None);
        assert_eq!(env_value(&ctx, "A"), Some("2"));
        assert_eq!(
            display(&ctx, "screenshot").unwrap_err().to_string(),
            "screenshot needs an X11 display: DISPLAY is not set (on a server, run under Xvfb)"
        );
    }

    #[test]
    fn excerpts_are_cut_on_characters() {
        assert_eq!(excerpt("  héllo world \n", 5), "héllo…");
        assert_eq!(excerpt("short", 50), "short");
    }
}
