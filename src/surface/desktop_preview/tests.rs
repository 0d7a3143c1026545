use std::os::unix::fs::PermissionsExt;

use base64::Engine;

use super::*;
use crate::event::DesktopWindow;

/// A real 4×3 PNG, as the lead's marker would send one.
pub(crate) fn png_base64() -> String {
    let mut bytes = Vec::new();
    {
        let mut encoder = png::Encoder::new(&mut bytes, 4, 3);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header().unwrap();
        writer.write_image_data(&[200u8; 4 * 3 * 3]).unwrap();
    }
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn click() -> DesktopPreview {
    DesktopPreview {
        action: "left_click".into(),
        description: "left click at (412, 300) in Gnome-calculator “Calculator”".into(),
        point: Some([412, 300]),
        window: Some(DesktopWindow {
            id: "0x3a00007".into(),
            title: "Calculator".into(),
            app: "Gnome-calculator".into(),
            pid: Some(4242),
        }),
        image: Some(crate::event::PreviewImage {
            mime_type: "image/png".into(),
            data_base64: png_base64(),
        }),
        ..DesktopPreview::default()
    }
}

fn request(desktop: DesktopPreview) -> PermissionRequest {
    let mut request = PermissionRequest::sample("computer", serde_json::json!({}));
    request.preview.desktop = Some(Box::new(desktop));
    request
}

#[test]
fn a_click_shows_its_real_point_its_window_and_its_saved_screenshot() {
    let request = request(click());
    let screenshot = Screenshot::save(&request);
    let Screenshot::Saved(saved) = &screenshot else {
        panic!("not saved: {screenshot:?}");
    };
    let path = saved.path().to_path_buf();
    let text = lines(request.preview.desktop.as_deref().unwrap(), &screenshot);
    assert!(
        text.contains("  action: left_click at (412, 300)\n"),
        "{text}"
    );
    assert!(
        text.contains("  window: Gnome-calculator (pid 4242) “Calculator” [id 0x3a00007]\n"),
        "{text}"
    );
    assert!(
        text.contains("  what: left click at (412, 300) in Gnome-calculator “Calculator”\n"),
        "{text}"
    );
    assert!(
        text.contains(&format!("  screen (target marked): {}\n", path.display())),
        "{text}"
    );
    // The file is the image itself, the person's alone, and gone once the question is.
    let written = std::fs::read(&path).unwrap();
    let sent = base64::engine::general_purpose::STANDARD
        .decode(png_base64())
        .unwrap();
    assert_eq!(written, sent);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    drop(screenshot);
    assert!(!path.exists());
}

#[test]
fn a_drag_shows_both_ends_and_typed_text_is_shown_whole() {
    let drag = DesktopPreview {
        action: "drag".into(),
        end: Some([10, 20]),
        window: None,
        image: None,
        ..click()
    };
    let text = lines(&drag, &Screenshot::None);
    assert!(
        text.contains("  action: drag from (412, 300) to (10, 20)\n"),
        "{text}"
    );
    assert!(
        text.contains("  window: none known under the point\n"),
        "{text}"
    );
    assert!(
        text.contains("  screen: no screenshot came with this request\n"),
        "{text}"
    );
    let long = "x".repeat(5000);
    let typing = DesktopPreview {
        action: "type".into(),
        point: None,
        text: Some(format!("first line\n{long}\n")),
        ..click()
    };
    let text = lines(&typing, &Screenshot::None);
    assert!(
        text.contains("  text to type (5012 characters, all of it):\n    │ first line\n"),
        "{text}"
    );
    assert!(text.contains(&format!("    │ {long}\n")), "the whole text");
    assert!(
        text.contains("    (ends with a newline: Enter is pressed)\n"),
        "{text}"
    );
}

/// Attack: a window names itself with escape sequences (a clipboard write, a screen clear, a
/// cursor move over the prompt), bidi overrides and newlines that would fake prompt lines;
/// the model's text to type carries the same. None of it reaches the terminal raw, and every
/// line of the block is one of corral's own.
#[test]
fn hostile_window_titles_and_typed_text_never_reach_the_terminal_raw() {
    let hostile = "\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\x1b[1A\u{202e}rotaluclaC\u{2066}\n  window: Trusted (pid 1)\r\u{9b}31m";
    let desktop = DesktopPreview {
        action: "type\x1b[8m".into(),
        description: format!("type into {hostile}"),
        text: Some(format!(
            "ls{hostile}\n  screen (target marked): /tmp/fake.png"
        )),
        window: Some(DesktopWindow {
            id: "1\n  what: harmless".into(),
            title: hostile.into(),
            app: hostile.into(),
            pid: Some(7),
        }),
        ..click()
    };
    let request = request(desktop);
    let screenshot = Screenshot::save(&request);
    let text = lines(request.preview.desktop.as_deref().unwrap(), &screenshot);
    assert!(!text.chars().any(safe_text::is_unsafe), "{text:?}");
    assert!(
        text.contains(r"\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J"),
        "{text}"
    );
    assert!(text.contains(r"\u{202e}rotaluclaC\u{2066}"), "{text}");
    // Exactly one window line and one screen line: the fakes are escaped or framed.
    let own = |prefix: &str| text.lines().filter(|l| l.starts_with(prefix)).count();
    assert_eq!(own("  window: "), 1, "{text}");
    assert_eq!(own("  what: "), 1, "{text}");
    assert_eq!(own("  screen"), 1, "{text}");
    for line in text.lines() {
        assert!(
            [
                "  action: ",
                "  window: ",
                "  what: ",
                "  text to type",
                "    │ ",
                "  screen"
            ]
            .iter()
            .any(|p| line.starts_with(p)),
            "a line that is not corral's: {line:?}"
        );
    }
    // The whole prompt, as the terminal gets it, is as clean.
    let prompt = crate::surface::approve::describe_request(&request, true, &screenshot);
    let ours = prompt.replace("\x1b[0m", "");
    assert!(!ours.contains('\x1b'), "{prompt:?}");
}

#[test]
fn only_a_real_png_or_jpeg_in_base64_is_an_image() {
    let with = |mime: &str, data: &str| DesktopPreview {
        image: Some(crate::event::PreviewImage {
            mime_type: mime.into(),
            data_base64: data.into(),
        }),
        ..DesktopPreview::default()
    };
    let png = png_base64();
    let ok = with("image/png", &png);
    assert_eq!(
        checked_image(&ok),
        Some(Ok(CheckedImage {
            mime_type: "image/png",
            data_base64: &png
        }))
    );
    let jpeg = base64::engine::general_purpose::STANDARD.encode(b"\xff\xd8\xff\xe0rest");
    assert!(matches!(
        checked_image(&with("image/jpeg", &jpeg)),
        Some(Ok(_))
    ));
    let html = base64::engine::general_purpose::STANDARD.encode("<script>alert(1)</script>");
    assert_eq!(
        checked_image(&with("text/html", &html)),
        Some(Err(ImageRefused::Type("text/html".into())))
    );
    assert_eq!(
        checked_image(&with("image/svg+xml", &png)),
        Some(Err(ImageRefused::Type("image/svg+xml".into())))
    );
    assert_eq!(
        checked_image(&with("image/png", &html)),
        Some(Err(ImageRefused::Signature("PNG")))
    );
    let quoted = format!("{png}\" onerror=\"alert(1)");
    assert_eq!(
        checked_image(&with("image/png", &quoted)),
        Some(Err(ImageRefused::NotBase64))
    );
    assert_eq!(checked_image(&DesktopPreview::default()), None);
    let refused = request(with("text/html", &html));
    let Screenshot::NotSaved(why) = Screenshot::save(&refused) else {
        panic!("a refused image was saved");
    };
    assert!(why.contains("neither image/png nor image/jpeg"), "{why}");
}
