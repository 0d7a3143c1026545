//! A desktop action's approval as every surface shows it: the lines a terminal prints (the
//! action, the real coordinates, the window under the point, the description, the whole text
//! a `type` enters, and where the marked screenshot was saved), the screenshot checked before
//! any surface passes it on, and the file the terminal saves it to.
//!
//! Window titles, application names, descriptions and typed text are untrusted (a window
//! names itself; the model writes the text): every one goes through [`safe_text`]. The image
//! is shown only when it is what it says it is — a PNG or JPEG in standard base64 whose bytes
//! start with that format's signature — so no surface hands a client "an image" that is
//! something else.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use base64::Engine;

use crate::event::{DesktopPreview, PermissionRequest};

use super::safe_text;

/// An image a surface may show: its media type and its base64 text, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckedImage<'a> {
    pub mime_type: &'static str,
    pub data_base64: &'a str,
}

/// Why a request's screenshot is not shown.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageRefused {
    #[error("its type {0:?} is neither image/png nor image/jpeg")]
    Type(String),
    #[error("its data is not standard base64")]
    NotBase64,
    #[error("its bytes are not a {0}")]
    Signature(&'static str),
}

/// The preview's screenshot when it is a real PNG or JPEG; `None` when there is none.
pub fn checked_image(preview: &DesktopPreview) -> Option<Result<CheckedImage<'_>, ImageRefused>> {
    let image = preview.image.as_ref()?;
    Some(check(&image.mime_type, &image.data_base64))
}

fn check<'a>(mime_type: &str, data_base64: &'a str) -> Result<CheckedImage<'a>, ImageRefused> {
    let (mime_type, signature, format): (_, &[u8], _) = match mime_type {
        "image/png" => ("image/png", b"\x89PNG\r\n\x1a\n", "PNG"),
        "image/jpeg" => ("image/jpeg", b"\xff\xd8\xff", "JPEG"),
        other => return Err(ImageRefused::Type(other.to_string())),
    };
    // Only the alphabet and padding of standard base64 — nothing a page, a JSON reader or a
    // data: URL could take as anything but image data.
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data_base64)
        .map_err(|_| ImageRefused::NotBase64)?;
    if !bytes.starts_with(signature) {
        return Err(ImageRefused::Signature(format));
    }
    Ok(CheckedImage {
        mime_type,
        data_base64,
    })
}

/// A request's marked screenshot in a private file for the person to open while the question
/// is open, removed when this is dropped (the question answered).
///
/// Saved under `$TMPDIR` rather than beside the session's log: the log already keeps the image
/// inside the permission event for replay, and a second copy there would outlive the question
/// with whatever the screen showed. The file is created new (`O_EXCL`) with a random name and
/// mode 0600, so another user of a shared `/tmp` can neither read it nor plant a link there.
#[derive(Debug)]
pub struct SavedScreenshot(tempfile::TempPath);

impl SavedScreenshot {
    pub fn path(&self) -> &Path {
        &self.0
    }
}

/// What became of the request's screenshot, for the line that says so.
#[derive(Debug)]
pub enum Screenshot {
    /// Not a desktop request, or one without an image.
    None,
    Saved(SavedScreenshot),
    /// Not written: the image was refused, or the file could not be made.
    NotSaved(String),
}

impl Screenshot {
    /// Saves `request`'s marked screenshot when it carries a valid one.
    pub fn save(request: &PermissionRequest) -> Screenshot {
        let Some(desktop) = &request.preview.desktop else {
            return Screenshot::None;
        };
        let image = match checked_image(desktop) {
            None => return Screenshot::None,
            Some(Err(refused)) => return Screenshot::NotSaved(format!("not shown: {refused}")),
            Some(Ok(image)) => image,
        };
        match write_private(image) {
            Ok(saved) => Screenshot::Saved(saved),
            Err(e) => {
                tracing::warn!(error = %e, "cannot save the approval's screenshot");
                Screenshot::NotSaved(format!("could not be saved: {e}"))
            }
        }
    }
}

fn write_private(image: CheckedImage<'_>) -> std::io::Result<SavedScreenshot> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(image.data_base64)
        .map_err(std::io::Error::other)?;
    let suffix = if image.mime_type == "image/png" {
        ".png"
    } else {
        ".jpg"
    };
    // tempfile creates with O_EXCL and mode 0600 on Unix.
    let mut file = tempfile::Builder::new()
        .prefix("corral-approval-")
        .suffix(suffix)
        .tempfile()?;
    file.write_all(&bytes)?;
    file.as_file().sync_all()?;
    Ok(SavedScreenshot(file.into_temp_path()))
}

/// The desktop block of an approval, each line starting with two spaces, escaped for a
/// terminal: what the terminal prompt, the full-screen modal and `corral top` show.
pub fn lines(desktop: &DesktopPreview, screenshot: &Screenshot) -> String {
    let mut text = String::new();
    let action = safe_text::escape_line(&desktop.action);
    let _ = match (desktop.point, desktop.end) {
        (Some([x, y]), Some([ex, ey])) => {
            writeln!(text, "  action: {action} from ({x}, {y}) to ({ex}, {ey})")
        }
        (Some([x, y]), None) => writeln!(text, "  action: {action} at ({x}, {y})"),
        (None, _) => writeln!(text, "  action: {action}"),
    };
    match &desktop.window {
        Some(window) => {
            let pid = window
                .pid
                .map(|pid| format!(" (pid {pid})"))
                .unwrap_or_default();
            let _ = writeln!(
                text,
                "  window: {}{pid} “{}” [id {}]",
                safe_text::escape_line(&window.app),
                safe_text::escape_line(&window.title),
                safe_text::escape_line(&window.id),
            );
        }
        None => text.push_str("  window: none known under the point\n"),
    }
    if !desktop.description.is_empty() {
        let _ = writeln!(
            text,
            "  what: {}",
            safe_text::escape_line(&desktop.description)
        );
    }
    if let Some(typed) = &desktop.text {
        push_typed(&mut text, &desktop.action, typed);
    }
    let _ = match screenshot {
        Screenshot::None => writeln!(text, "  screen: no screenshot came with this request"),
        Screenshot::Saved(saved) => writeln!(
            text,
            "  screen (target marked): {}",
            safe_text::escape_line(&saved.path().to_string_lossy())
        ),
        Screenshot::NotSaved(why) => writeln!(
            text,
            "  screen: a marked screenshot came but {}",
            safe_text::escape_line(why)
        ),
    };
    text
}

/// The whole text a `type` enters (or a `key`'s combos), every line behind a frame so none
/// passes for one of the prompt's own, and a final newline said in words: it presses Enter.
fn push_typed(text: &mut String, action: &str, typed: &str) {
    let chars = typed.chars().count();
    let label = if action == "key" {
        "keys"
    } else {
        "text to type"
    };
    let _ = writeln!(
        text,
        "  {label} ({chars} character{}, all of it):",
        if chars == 1 { "" } else { "s" }
    );
    let body = typed.strip_suffix('\n').unwrap_or(typed);
    for line in body.split('\n') {
        text.push_str("    │ ");
        text.push_str(&safe_text::escape(line));
        text.push('\n');
    }
    if body.len() != typed.len() {
        text.push_str("    (ends with a newline: Enter is pressed)\n");
    }
}

#[cfg(test)]
pub(crate) mod tests;
