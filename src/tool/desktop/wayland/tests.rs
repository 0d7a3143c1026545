//! The backend against a real headless sway with a real GTK client that logs what it gets.
//!
//! Why GTK through Debian's python3-gi: it is a complete toolkit client (keymaps from the
//! seat, xdg-shell, app_id, pid), so a key or click that it logs is one a person's program
//! would get; a client of our own would only prove that we agree with ourselves.

mod sway;

use std::time::{Duration, Instant};

use super::super::backend::{Button, Desktop, Point, Rect, ScrollDirection};
use super::super::keys::parse_combo;
use super::WaylandDesktop;
use sway::{Probe, Sway};

/// How long a client may take to start, draw or log something.
const DEADLINE: Duration = Duration::from_secs(30);

/// Polls `check` until it gives something, failing with `what` at the deadline.
fn eventually<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(found) = check() {
            return found;
        }
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn centre(r: Rect) -> Point {
    Point {
        x: r.x + (r.width / 2) as i32,
        y: r.y + (r.height / 2) as i32,
    }
}

/// The probe window's two halves: red on the left, blue on the right.
fn halves(window: Rect) -> (Rect, Rect) {
    let half = window.width / 2;
    let left = Rect {
        width: half,
        ..window
    };
    let right = Rect {
        x: window.x + half as i32,
        width: window.width - half,
        ..window
    };
    (left, right)
}

fn click(desktop: &mut WaylandDesktop, at: Point, button: Button) {
    desktop.move_pointer(at).unwrap();
    desktop.button(button, true).unwrap();
    desktop.button(button, false).unwrap();
}

/// The pixel at `at` in a frame captured from `origin`.
fn pixel(frame: &super::super::backend::Frame, origin: Point, at: Point) -> [u8; 3] {
    let i = (((at.y - origin.y) as u32 * frame.width + (at.x - origin.x) as u32) * 3) as usize;
    [frame.rgb[i], frame.rgb[i + 1], frame.rgb[i + 2]]
}

#[test]
fn clicks_and_scrolls_land_on_the_widget_under_the_point() {
    let sway = Sway::start();
    let probe = Probe::start(&sway, "clicks");
    let mut desktop = WaylandDesktop::connect(&sway.env).unwrap();
    let window = probe.window(&mut desktop);
    let (red, blue) = halves(window.geometry);
    probe.wait_drawn(&mut desktop, centre(red), [255, 0, 0]);

    click(&mut desktop, centre(blue), Button::Left);
    probe.wait_line("button blue 1");
    click(&mut desktop, centre(red), Button::Right);
    probe.wait_line("button red 3");
    click(&mut desktop, centre(red), Button::Middle);
    probe.wait_line("button red 2");
    desktop.move_pointer(centre(blue)).unwrap();
    desktop.scroll(ScrollDirection::Down, 2).unwrap();
    probe.wait_line("scroll blue down");
    desktop.scroll(ScrollDirection::Up, 1).unwrap();
    probe.wait_line("scroll blue up");
    assert_eq!(desktop.cursor().unwrap(), centre(blue));
    // Nothing reached the other half.
    assert!(!probe.log().contains("button blue 3"), "{}", probe.log());
    assert_eq!(desktop.kind(), "wayland (sway)");
}

#[test]
fn typed_text_arrives_whatever_the_characters_and_combos_hold_their_modifiers() {
    let sway = Sway::start();
    let probe = Probe::start(&sway, "typing");
    let mut desktop = WaylandDesktop::connect(&sway.env).unwrap();
    probe.window(&mut desktop);
    probe.wait_focused(&mut desktop);

    let text = "Hello, wörld! é€λ ~`\"<>";
    desktop.type_text(text).unwrap();
    desktop.type_text("\n").unwrap();
    let typed = eventually("the typed text", || {
        let log = probe.log();
        log.contains("key Return").then(|| probe.typed())
    });
    assert_eq!(typed, text);

    desktop.key(&parse_combo("ctrl+s").unwrap()).unwrap();
    probe.wait_line("combo ctrl+s");
    desktop.key(&parse_combo("ctrl+shift+a").unwrap()).unwrap();
    probe.wait_line("combo ctrl+shift+a");
    desktop
        .key(&parse_combo("alt+F4").unwrap())
        .unwrap_or_else(|e| panic!("{e}"));
    probe.wait_line("combo alt+F4");
}

#[test]
fn windows_are_listed_with_their_owner_and_can_be_focused() {
    let sway = Sway::start();
    let first = Probe::start(&sway, "first");
    let mut desktop = WaylandDesktop::connect(&sway.env).unwrap();
    first.window(&mut desktop);
    let second = Probe::start(&sway, "second");
    second.window(&mut desktop);
    second.wait_focused(&mut desktop);
    // Tiling gave the first window half of the output when the second came.
    let first_window = first.window(&mut desktop);
    let second_window = second.window(&mut desktop);

    assert_eq!(first_window.app, "corral-probe");
    assert_eq!(first_window.pid, Some(first.pid()));
    assert_eq!(second_window.pid, Some(second.pid()));
    // Tiled side by side on the 1280x800 output, borders off.
    let (a, b) = (first_window.geometry, second_window.geometry);
    assert!(a.width > 0 && b.width > 0 && a.height == 800, "{a:?} {b:?}");
    assert_eq!(a.width + b.width, 1280, "{a:?} {b:?}");
    assert_eq!(b.x, a.x + a.width as i32, "{a:?} {b:?}");

    let focused = desktop.focused().unwrap().unwrap();
    assert_eq!(focused.title, "probe second");
    desktop.focus(&first_window.id).unwrap();
    let focused = desktop.focused().unwrap().unwrap();
    assert_eq!(focused.id, first_window.id);
    // Keys now go to the first window.
    desktop.type_text("x").unwrap();
    first.wait_line("key x");

    let at = desktop.window_at(centre(b)).unwrap().unwrap();
    assert_eq!(at.id, second_window.id);
    // A window id is a number: sway would run anything after a `;` as another command.
    let err = desktop.focus("1; exit").unwrap_err().to_string();
    assert!(err.contains("is not a sway window id"), "{err}");
    assert!(desktop.windows().unwrap().len() == 2, "sway is still there");
    let err = desktop.focus("999999").unwrap_err().to_string();
    assert!(err.contains("cannot focus"), "{err}");
}

#[test]
fn a_capture_holds_the_pixels_the_client_drew() {
    let sway = Sway::start();
    let probe = Probe::start(&sway, "capture");
    let mut desktop = WaylandDesktop::connect(&sway.env).unwrap();
    assert_eq!(desktop.screen_size().unwrap(), (1280, 800));
    let window = probe.window(&mut desktop);
    let (red, blue) = halves(window.geometry);
    probe.wait_drawn(&mut desktop, centre(red), [255, 0, 0]);

    let whole = desktop.capture(None).unwrap();
    assert_eq!((whole.width, whole.height), (1280, 800));
    assert_eq!(whole.rgb.len(), 1280 * 800 * 3);
    let origin = Point { x: 0, y: 0 };
    assert_eq!(pixel(&whole, origin, centre(blue)), [0, 0, 255]);
    assert_eq!(pixel(&whole, origin, centre(red)), [255, 0, 0]);

    // An area across the boundary: red on its left, blue on its right.
    let area = Rect {
        x: blue.x - 10,
        y: 100,
        width: 20,
        height: 5,
    };
    let part = desktop.capture(Some(area)).unwrap();
    assert_eq!((part.width, part.height), (20, 5));
    let corner = Point {
        x: area.x,
        y: area.y,
    };
    assert_eq!(
        pixel(
            &part,
            corner,
            Point {
                x: area.x + 2,
                y: 102
            }
        ),
        [255, 0, 0]
    );
    assert_eq!(
        pixel(
            &part,
            corner,
            Point {
                x: area.x + 17,
                y: 102
            }
        ),
        [0, 0, 255]
    );
    // Clipped at the screen's edge.
    let edge = desktop
        .capture(Some(Rect {
            x: 1270,
            y: 790,
            width: 50,
            height: 50,
        }))
        .unwrap();
    assert_eq!((edge.width, edge.height), (10, 10));
}

#[test]
fn without_sway_ipc_window_calls_say_what_they_need() {
    let sway = Sway::start();
    let mut env = sway.env.clone();
    env.swaysock = None;
    let mut desktop = WaylandDesktop::connect(&env).unwrap();
    let err = desktop.windows().unwrap_err().to_string();
    assert!(err.contains("SWAYSOCK is not set"), "{err}");
    assert_eq!(desktop.kind(), "wayland");
    let err = desktop.cursor().unwrap_err().to_string();
    assert!(
        err.contains("does not tell programs where the pointer is"),
        "{err}"
    );
    assert_eq!(desktop.locked().unwrap(), None);
}

#[tokio::test]
async fn capabilities_and_presence_see_the_compositor() {
    let sway = Sway::start();
    let found = super::capabilities(&sway.env).await;
    let available = |name: &str| {
        found
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("{name} in {found:?}"))
            .available
    };
    for name in [
        "wayland compositor",
        "mouse input",
        "keyboard input",
        "screen capture",
        "clipboard",
        "window list",
    ] {
        assert!(available(name), "{name}: {found:?}");
    }
    assert!(!available("xdg-desktop-portal"), "{found:?}");

    let env = sway.tool_env();
    let presence = super::super::Presence::probe(&env).await;
    assert_eq!(presence.lacks(crate::tool::manifest::Need::Display), None);
    drop(sway);
    let presence = super::super::Presence::probe(&env).await;
    let why = presence
        .lacks(crate::tool::manifest::Need::Display)
        .unwrap();
    assert!(why.contains("Wayland compositor"), "{why}");
}

#[tokio::test]
async fn the_screenshot_tool_captures_through_wayland() {
    use crate::tool::Tool as _;
    let sway = Sway::start();
    let probe = Probe::start(&sway, "shot");
    let mut desktop = WaylandDesktop::connect(&sway.env).unwrap();
    let window = probe.window(&mut desktop);
    let (red, _) = halves(window.geometry);
    probe.wait_drawn(&mut desktop, centre(red), [255, 0, 0]);
    let env = sway.tool_env();
    let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let ctx = super::super::testing::context_with_env(&pairs);
    let out = super::super::Screenshot
        .call(serde_json::json!({"monitor": 0}), &ctx)
        .await
        .unwrap();
    assert!(
        out.text.starts_with("screenshot of monitor 0 (HEADLESS-1)"),
        "{}",
        out.text
    );
    let png = base64::Engine::decode(
        &base64::engine::general_purpose::STANDARD,
        &out.images[0].data_base64,
    )
    .unwrap();
    let decoder = png::Decoder::new(std::io::Cursor::new(png));
    let mut reader = decoder.read_info().unwrap();
    let mut rgb = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut rgb).unwrap();
    // Downsampled to the default long edge or not, the left half is red.
    let (x, y) = (info.width / 4, info.height / 2);
    let i = ((y * info.width + x) * 3) as usize;
    assert_eq!(&rgb[i..i + 3], [255, 0, 0]);
    let err = super::super::Screenshot
        .call(serde_json::json!({"monitor": 3}), &ctx)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("has 1 output"), "{err}");
}
