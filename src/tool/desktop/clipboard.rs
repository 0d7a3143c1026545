//! `clipboard_read` and `clipboard_write` on the X11 CLIPBOARD selection or the Wayland
//! clipboard (arboard's data-control path, which wlroots compositors and KDE offer), through a
//! helper process: corral itself, re-run as `corral __clipboard <read|own>`.
//!
//! Why a process: an X11 selection is not stored anywhere, it is served by its owner and dies
//! with it. A value written by corral must outlive the tool call (and corral), so a detached
//! owner process keeps serving it until another program takes the selection, then exits by
//! itself. Reading goes through the same helper so both directions use the display in the
//! tool environment (arboard only connects to its own process's `DISPLAY` or
//! `WAYLAND_DISPLAY`, preferring Wayland when both are set). A Wayland selection is served
//! by its owner too, so the same detached owner keeps it.

use std::io::{self, Read as _, Write as _};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::process::Command;

use super::super::output::parse_args;
use super::super::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use super::{env_value, excerpt};

/// The hidden subcommand that runs [`clipboard_helper_main`].
pub const HELPER_SUBCOMMAND: &str = "__clipboard";
/// How long the owner may take to own the selection.
const READY_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a read may take (a slow or hung owner on the other side).
const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The reader's exit code for "nothing readable as text".
const EXIT_NO_TEXT: i32 = 3;
const READY: &str = "ready";

pub(crate) struct ClipboardRead;
pub(crate) struct ClipboardWrite;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadArgs {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    text: String,
}

impl Tool for ClipboardRead {
    fn name(&self) -> &'static str {
        "clipboard_read"
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let ReadArgs {} = parse_args(args)?;
            let display = clipboard_display(ctx, "clipboard_read")?;
            let mut child = helper(ctx, "read")?
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                // A reader that outlives the call (cancel, timeout) is of no use to anyone.
                .kill_on_drop(true)
                .spawn()
                .map_err(spawn_error)?;
            let (mut stdout, mut stderr) = (child.stdout.take(), child.stderr.take());
            let collect = async {
                let (mut text, mut err) = (Vec::new(), Vec::new());
                if let Some(out) = stdout.as_mut() {
                    out.read_to_end(&mut text).await?;
                }
                if let Some(e) = stderr.as_mut() {
                    e.read_to_end(&mut err).await?;
                }
                let status = child.wait().await?;
                io::Result::Ok((status, text, err))
            };
            let (status, text, err) = tokio::select! {
                biased;
                () = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
                done = tokio::time::timeout(READ_TIMEOUT, collect) => done
                    .map_err(|_| ToolError::Io(format!(
                        "clipboard_read: the clipboard owner on display {display} did not answer within {}s",
                        READ_TIMEOUT.as_secs()
                    )))?
                    .map_err(|e| ToolError::Io(format!("clipboard_read: {e}")))?,
            };
            let err = String::from_utf8_lossy(&err);
            match status.code() {
                Some(0) => Ok(ToolOutput::text(String::from_utf8_lossy(&text))),
                Some(EXIT_NO_TEXT) => Err(ToolError::NotFound(format!(
                    "the clipboard holds no text ({})",
                    excerpt(&err, 200)
                ))),
                _ => Err(ToolError::Io(format!(
                    "clipboard_read: cannot read the clipboard on display {display}: {}",
                    excerpt(&err, 400)
                ))),
            }
        })
    }
}

impl Tool for ClipboardWrite {
    fn name(&self) -> &'static str {
        "clipboard_write"
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let WriteArgs { text } = parse_args(args)?;
            let display = clipboard_display(ctx, "clipboard_write")?;
            let chars = text.chars().count();
            // Not kill_on_drop: once ready, the owner must outlive this call. Tokio reaps it
            // in the background when it exits while corral still runs.
            let mut child = helper(ctx, "own")?
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .map_err(spawn_error)?;
            let (stdin, stdout) = (child.stdin.take(), child.stdout.take());
            let handshake = async {
                if let Some(mut stdin) = stdin {
                    stdin.write_all(text.as_bytes()).await?;
                    // Closing stdin tells the owner the text is complete.
                    drop(stdin);
                }
                let mut line = String::new();
                if let Some(stdout) = stdout {
                    BufReader::new(stdout).read_line(&mut line).await?;
                }
                io::Result::Ok(line)
            };
            let answer = tokio::select! {
                biased;
                () = ctx.cancel.cancelled() => Err(ToolError::Cancelled),
                done = tokio::time::timeout(READY_TIMEOUT, handshake) => match done {
                    Err(_) => Err(ToolError::Io(format!(
                        "clipboard_write: the clipboard owner did not take the selection on \
                         display {display} within {}s",
                        READY_TIMEOUT.as_secs()
                    ))),
                    Ok(Err(e)) => Err(ToolError::Io(format!("clipboard_write: {e}"))),
                    Ok(Ok(line)) => Ok(line),
                },
            };
            let line = match answer {
                Ok(line) => line,
                Err(e) => {
                    // An owner that never reported ready must not linger.
                    let _ = child.start_kill();
                    return Err(e);
                }
            };
            let line = line.trim_end();
            if line == READY {
                return Ok(ToolOutput::text(format!(
                    "copied {chars} character{}",
                    if chars == 1 { "" } else { "s" }
                )));
            }
            let _ = child.start_kill();
            let why = match line.strip_prefix("error: ") {
                Some(why) => why,
                None if line.is_empty() => "the clipboard owner exited",
                None => line,
            };
            Err(ToolError::Io(format!(
                "clipboard_write: cannot set the clipboard on display {display}: {why}"
            )))
        })
    }
}

/// The display whose clipboard the helper will use, as arboard picks it: Wayland when
/// `WAYLAND_DISPLAY` is set, else X11.
fn clipboard_display(ctx: &ToolContext, tool: &str) -> Result<String, ToolError> {
    if let Some(wayland) = env_value(ctx, "WAYLAND_DISPLAY") {
        return Ok(format!("{wayland} (Wayland)"));
    }
    super::display(ctx, tool)
}

/// `corral __clipboard <mode>` with exactly the tool environment (and so its `DISPLAY`), in its
/// own process group so a Ctrl-C meant for corral does not take the clipboard down with it.
fn helper(ctx: &ToolContext, mode: &str) -> Result<Command, ToolError> {
    let exe = std::env::current_exe().map_err(|e| {
        ToolError::Io(format!(
            "clipboard: cannot find the corral executable to run the clipboard helper: {e}"
        ))
    })?;
    let mut command = Command::new(exe);
    command
        .arg(HELPER_SUBCOMMAND)
        .arg(mode)
        .env_clear()
        .envs(ctx.settings.env.iter().map(|(k, v)| (k, v)))
        // The owner may live long; it must not keep a worktree or mount point busy.
        .current_dir("/")
        .process_group(0);
    Ok(command)
}

fn spawn_error(e: io::Error) -> ToolError {
    ToolError::Io(format!("clipboard: cannot start the clipboard helper: {e}"))
}

/// The clipboard helper process (`corral __clipboard <mode>`), returning its exit code.
///
/// - `read`: prints the CLIPBOARD text on stdout; exit 3 when there is no text, 1 on errors
///   (message on stderr).
/// - `own`: takes the text on stdin, owns the CLIPBOARD with it, writes `ready` (or
///   `error: …`) as one line on stdout, then serves the value until another program takes the
///   selection or the display goes away.
///
/// Its stdout is a protocol with the tool, not output for people, hence raw writes.
pub fn clipboard_helper_main(mode: &str) -> i32 {
    match mode {
        "read" => read_clipboard(),
        "own" => own_clipboard(),
        other => {
            let _ = writeln!(io::stderr(), "unknown clipboard helper mode {other:?}");
            2
        }
    }
}

fn read_clipboard() -> i32 {
    let result = arboard::Clipboard::new().and_then(|mut clipboard| clipboard.get_text());
    match result {
        Ok(text) => {
            let mut out = io::stdout().lock();
            match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
                Ok(()) => 0,
                Err(_) => 1,
            }
        }
        Err(e) => match no_text(&e) {
            Some(why) => {
                let _ = write!(io::stderr(), "{why}");
                EXIT_NO_TEXT
            }
            None => {
                let _ = write!(io::stderr(), "{e}");
                1
            }
        },
    }
}

/// Why a read found no text, when that is what the error means.
fn no_text(e: &arboard::Error) -> Option<&'static str> {
    match e {
        arboard::Error::ContentNotAvailable => Some("it is empty or holds another format"),
        arboard::Error::ConversionFailure => Some("its content is not valid UTF-8 text"),
        // An owner that answers a text request with another type (xclip holding an image
        // does); arboard reports it only through this description.
        arboard::Error::Unknown { description } if description.contains("incorrect type") => {
            Some("it holds another format")
        }
        _ => None,
    }
}

fn own_clipboard() -> i32 {
    let mut text = String::new();
    if let Err(e) = io::stdin().read_to_string(&mut text) {
        return owner_failed(&format!("cannot read the text: {e}"));
    }
    let mut clipboard = match arboard::Clipboard::new() {
        Ok(clipboard) => clipboard,
        Err(e) => return owner_failed(&e.to_string()),
    };
    let (done, finished) = mpsc::channel::<Option<String>>();

    // `wait()` sets the selection and blocks while we own it, so it runs on its own thread
    // while this one confirms ownership and reports it.
    let holder = done.clone();
    let value = text.clone();
    std::thread::spawn(move || {
        let result = arboard::Clipboard::new().and_then(|mut c| {
            use arboard::SetExtLinux as _;
            c.set().wait().text(value)
        });
        let _ = holder.send(result.err().map(|e| e.to_string()));
    });

    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if let Ok(outcome) = finished.try_recv() {
            return owner_failed(
                &outcome.unwrap_or_else(|| "the selection was lost at once".into()),
            );
        }
        // Our own instance answers from memory once this process owns the selection.
        if clipboard.get_text().is_ok_and(|now| now == text) {
            break;
        }
        if Instant::now() > deadline {
            return owner_failed("timed out taking the clipboard selection");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut out = io::stdout();
    if writeln!(out, "{READY}").and_then(|()| out.flush()).is_err() {
        // Nobody is waiting for the value any more.
        return 1;
    }

    // arboard's X11 server thread stops silently when the display goes away and never wakes
    // the `wait()`; a second connection that sees the display close ends the process instead.
    // Without that second connection (on Wayland, where the holder's own connection ends
    // with the compositor), the holder alone decides when to exit.
    std::thread::spawn(move || {
        let wayland = std::env::var_os("WAYLAND_DISPLAY").is_some_and(|v| !v.is_empty());
        if wayland {
            return;
        }
        if let Ok((conn, _)) = x11rb::connect(None) {
            use x11rb::connection::Connection as _;
            while conn.wait_for_event().is_ok() {}
            let _ = done.send(None);
        }
    });
    let _ = finished.recv();
    0
}

fn owner_failed(message: &str) -> i32 {
    let mut out = io::stdout();
    let _ = writeln!(out, "error: {message}").and_then(|()| out.flush());
    1
}

#[cfg(test)]
mod tests {
    use super::super::testing::context_with_env;
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn without_a_display_both_directions_say_what_is_missing() {
        let ctx = context_with_env(&[("DBUS_SESSION_BUS_ADDRESS", "unix:path=/x")]);
        let err = ClipboardRead.call(json!({}), &ctx).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "clipboard_read needs an X11 display: DISPLAY is not set (on a server, run under Xvfb)"
        );
        let err = ClipboardWrite
            .call(json!({"text": "x"}), &ctx)
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "clipboard_write needs an X11 display: DISPLAY is not set (on a server, run under Xvfb)"
        );
    }

    #[tokio::test]
    async fn write_needs_text() {
        let ctx = context_with_env(&[("DISPLAY", ":1")]);
        let err = ClipboardWrite.call(json!({}), &ctx).await.unwrap_err();
        assert!(matches!(err, ToolError::InvalidArguments(_)), "{err}");
    }

    #[test]
    fn an_unknown_helper_mode_is_a_usage_error() {
        assert_eq!(clipboard_helper_main("steal"), 2);
    }
}
