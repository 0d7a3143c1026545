//! Pixels through `org.freedesktop.portal.Screenshot`: a non-interactive screenshot the
//! portal saves as a PNG file and names by URI. corral reads the file and removes it, so
//! looking at the screen does not fill the person's pictures folder.

use std::time::Duration;

use zbus::Connection;
use zbus::Variant;

use super::request::{Options, request, string, token};
use crate::tool::ToolError;
use crate::tool::desktop::backend::{Frame, failed};

/// The portal may ask the person the first time (GNOME: "Allow applications to take
/// screenshots?"): time for them to answer.
const ANSWER_WAIT: Duration = Duration::from_secs(60);

/// The whole screen.
pub(super) async fn screenshot(conn: &Connection) -> Result<Frame, ToolError> {
    let token = token("shot");
    let mut options = Options::new();
    options.insert("handle_token", Variant::from(token.as_str()));
    options.insert("interactive", Variant::from(false));
    let results = request(
        conn,
        "org.freedesktop.portal.Screenshot",
        "Screenshot",
        &token,
        &("", options),
        ANSWER_WAIT,
    )
    .await?;
    let uri = string(&results, "uri")
        .ok_or_else(|| failed("the desktop portal's screenshot came without a uri"))?;
    let path = file_path(&uri).ok_or_else(|| {
        failed(format!(
            "the desktop portal saved the screenshot at {uri:?}"
        ))
    })?;
    let png = tokio::fs::read(&path)
        .await
        .map_err(|e| failed(format!("cannot read the portal's screenshot {path}: {e}")))?;
    let frame = decode_png(&png)?;
    // Removed only once it proved to be a picture: a file that is not one is left alone.
    if let Err(e) = tokio::fs::remove_file(&path).await {
        tracing::debug!(error = %e, path, "the portal's screenshot file stays");
    }
    Ok(frame)
}

/// The local path of a `file://` URI, its `%XX` escapes decoded.
fn file_path(uri: &str) -> Option<String> {
    let encoded = uri.strip_prefix("file://")?;
    let bytes = encoded.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    let path = String::from_utf8(out).ok()?;
    path.starts_with('/').then_some(path)
}

/// A PNG as packed RGB.
pub(super) fn decode_png(png: &[u8]) -> Result<Frame, ToolError> {
    let bad = |e: &dyn std::fmt::Display| failed(format!("the portal's screenshot: {e}"));
    let mut decoder = png::Decoder::new(std::io::Cursor::new(png));
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = decoder.read_info().map_err(|e| bad(&e))?;
    let size = reader
        .output_buffer_size()
        .ok_or_else(|| bad(&"too large"))?;
    let mut buffer = vec![0; size];
    let info = reader.next_frame(&mut buffer).map_err(|e| bad(&e))?;
    let pixels = &buffer[..info.buffer_size()];
    let channels = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        png::ColorType::Grayscale => 1,
        png::ColorType::GrayscaleAlpha => 2,
        png::ColorType::Indexed => return Err(bad(&"an indexed image after expansion")),
    };
    let mut rgb = Vec::with_capacity((info.width * info.height * 3) as usize);
    for px in pixels.chunks_exact(channels) {
        match channels {
            1 | 2 => rgb.extend_from_slice(&[px[0], px[0], px[0]]),
            _ => rgb.extend_from_slice(&px[..3]),
        }
    }
    Ok(Frame {
        width: info.width,
        height: info.height,
        rgb,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_uri_becomes_its_path_with_escapes_decoded() {
        assert_eq!(
            file_path("file:///home/p/Pictures/Screenshot%20from%202026.png").as_deref(),
            Some("/home/p/Pictures/Screenshot from 2026.png")
        );
        assert_eq!(file_path("https://example.com/x.png"), None);
        assert_eq!(file_path("file://relative"), None);
        assert_eq!(file_path("file:///bad%zz"), None);
    }

    #[test]
    fn a_file_that_is_no_picture_is_refused_as_a_screenshot() {
        assert!(decode_png(b"ssh-ed25519 AAAA... a key").is_err());
    }

    #[test]
    fn an_rgba_png_decodes_to_rgb() {
        let mut png = Vec::new();
        {
            let mut encoder = png::Encoder::new(&mut png, 2, 1);
            encoder.set_color(png::ColorType::Rgba);
            encoder.set_depth(png::BitDepth::Eight);
            let mut writer = encoder.write_header().unwrap();
            writer
                .write_image_data(&[1, 2, 3, 255, 4, 5, 6, 0])
                .unwrap();
        }
        let frame = decode_png(&png).unwrap();
        assert_eq!((frame.width, frame.height), (2, 1));
        assert_eq!(frame.rgb, [1, 2, 3, 4, 5, 6]);
    }
}
