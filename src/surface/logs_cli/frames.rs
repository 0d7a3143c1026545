//! `corral logs ID --images DIR`: every image the log holds written out as a file, so a
//! desktop session can be stepped through frame by frame: what the model saw after each
//! action (a `tool_result`'s images), what the person was shown when asked (a `permission`
//! request's marked screen), and images in prompts and answers. A file is named by the
//! envelope's sequence number and what it belongs to (`000042-result-c7.png`), so the names
//! sort in the log's order and a second run writes the same names again.
//!
//! Everything in a name comes from the log, that is from the model or a tool: it is cut to
//! letters, digits, `-` and `_`, so no name leaves the directory, and files are made 0600
//! without following a link planted where one would go.

use std::fs::OpenOptions;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde_json::Value;

use crate::event::{ContentBlock, Envelope, Payload, PermissionData};

/// A label taken from the log is cut to this many characters.
const LABEL_CHARS: usize = 40;

/// An image found in an envelope: what it belongs to, its type and its base64 data.
struct Found<'a> {
    label: String,
    mime_type: &'a str,
    data: &'a str,
}

/// Writes the envelope's images into `dir`; returns the files written. An image that is not
/// base64 or cannot be written is skipped with a line in `skipped`, and the rest go on.
pub fn write_images(dir: &Path, envelope: &Envelope, skipped: &mut Vec<String>) -> Vec<PathBuf> {
    let mut written = Vec::new();
    let found = images(&envelope.payload);
    let several = found.len() > 1;
    for (n, image) in found.into_iter().enumerate() {
        let bytes = match base64::engine::general_purpose::STANDARD.decode(image.data.trim()) {
            Ok(bytes) => bytes,
            Err(e) => {
                skipped.push(format!(
                    "an image of event {} is not base64 ({e}); skipped",
                    envelope.seq
                ));
                continue;
            }
        };
        let mut name = format!("{:06}-{}", envelope.seq, clean(&image.label));
        if several {
            name.push_str(&format!("-{}", n + 1));
        }
        name.push('.');
        name.push_str(extension(image.mime_type));
        let path = dir.join(name);
        let saved = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .and_then(|mut file| file.write_all(&bytes));
        match saved {
            Ok(()) => written.push(path),
            Err(e) => skipped.push(format!("cannot write {}: {e}", path.display())),
        }
    }
    written
}

fn images(payload: &Payload) -> Vec<Found<'_>> {
    let mut found = Vec::new();
    match payload {
        Payload::ToolResult(data) => {
            let label = format!("result-{}", data.result.tool_call_id);
            for item in &data.update.content {
                let block = item.get("content").unwrap_or(item);
                if block.get("type").and_then(Value::as_str) == Some("image")
                    && let Some(data) = block.get("data").and_then(Value::as_str)
                {
                    let mime_type = block
                        .get("mimeType")
                        .and_then(Value::as_str)
                        .unwrap_or("image/png");
                    found.push(Found {
                        label: label.clone(),
                        mime_type,
                        data,
                    });
                }
            }
        }
        Payload::Permission(PermissionData::Request(request)) => {
            if let Some(image) = request
                .preview
                .desktop
                .as_ref()
                .and_then(|d| d.image.as_ref())
            {
                found.push(Found {
                    label: format!("asked-{}", request.tool_call.tool_call_id),
                    mime_type: &image.mime_type,
                    data: &image.data_base64,
                });
            }
        }
        Payload::UserText(data) => found.extend(image_of(&data.content, "prompt")),
        Payload::AssistantText(data) => found.extend(image_of(&data.content, "answer")),
        _ => {}
    }
    found
}

fn image_of<'a>(block: &'a ContentBlock, label: &str) -> Option<Found<'a>> {
    match block {
        ContentBlock::Image { mime_type, data } => Some(Found {
            label: label.into(),
            mime_type,
            data,
        }),
        ContentBlock::Text { .. } => None,
    }
}

/// Letters, digits, `-` and `_` of `label`, at most [`LABEL_CHARS`] of them.
fn clean(label: &str) -> String {
    let kept: String = label
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
        .take(LABEL_CHARS)
        .collect();
    if kept.is_empty() {
        "image".into()
    } else {
        kept
    }
}

fn extension(mime_type: &str) -> &'static str {
    match mime_type {
        "image/png" => "png",
        "image/jpeg" | "image/jpg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        _ => "bin",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope(seq: u64, kind: &str, data: &str) -> Envelope {
        serde_json::from_str(&format!(
            r#"{{"seq":{seq},"ts":"2026-12-03T12:00:01.000Z","agent":"s","turn":1,"kind":"{kind}","data":{data}}}"#
        ))
        .unwrap()
    }

    const PIXEL: &str = "iVBORw0KGgo=";

    #[test]
    fn a_hostile_call_id_names_a_file_inside_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let data = format!(
            r#"{{"update":{{"toolCallId":"../../x","status":"completed","content":[{{"type":"content","content":{{"type":"image","data":"{PIXEL}","mimeType":"image/png"}}}}]}},"result":{{"toolCallId":"../../x/\u001b[2J","tool":"computer","success":true,"output":"ok","durationMs":3}}}}"#
        );
        let mut skipped = Vec::new();
        let written = write_images(dir.path(), &envelope(7, "tool_result", &data), &mut skipped);
        assert_eq!(written, [dir.path().join("000007-result-x2J.png")]);
        assert_eq!(std::fs::read(&written[0]).unwrap(), b"\x89PNG\r\n\x1a\n");
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&written[0]).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(skipped.is_empty());
    }

    #[test]
    fn a_link_planted_where_a_frame_goes_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        std::os::unix::fs::symlink(&victim, dir.path().join("000003-prompt.png")).unwrap();
        let data =
            format!(r#"{{"content":{{"type":"image","mimeType":"image/png","data":"{PIXEL}"}}}}"#);
        let mut skipped = Vec::new();
        let written = write_images(dir.path(), &envelope(3, "user_text", &data), &mut skipped);
        assert!(written.is_empty());
        assert_eq!(skipped.len(), 1, "{skipped:?}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    }

    #[test]
    fn an_image_that_is_not_base64_is_skipped_with_a_word() {
        let dir = tempfile::tempdir().unwrap();
        let data = r#"{"content":{"type":"image","mimeType":"image/png","data":"%%%"}}"#;
        let mut skipped = Vec::new();
        let written = write_images(dir.path(), &envelope(4, "user_text", data), &mut skipped);
        assert!(written.is_empty());
        assert_eq!(skipped.len(), 1, "{skipped:?}");
    }
}
