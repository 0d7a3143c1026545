//! Window listing, focus, `window_at`, capture and the screen saver with no window manager
//! (a bare Xvfb), and what `doctor` is told.

use x11rb::protocol::xproto::{ConnectionExt as _, ScreenSaver};

use super::*;
use crate::tool::ToolError;
use crate::tool::desktop::backend::Rect;

#[test]
fn the_logger_and_xev_are_listed_with_title_app_pid_and_geometry() {
    let (_turn, mut desktop) = exclusive();
    let app = logger("Logger λ listed", "400x300+100+100");
    let probe = xev("xev probe", "200x150+700+120");
    let logger_window = window_titled(&mut desktop, "Logger λ listed");
    let xev_window = window_titled(&mut desktop, "xev probe");
    assert_eq!(logger_window.app, "Corral-logger");
    assert_eq!(logger_window.pid, Some(app.pid()));
    assert_eq!(
        logger_window.geometry,
        Rect {
            x: 100,
            y: 100,
            width: 400,
            height: 300
        }
    );
    // xev sets a name and no WM_CLASS.
    assert_eq!(xev_window.app, "");
    assert_eq!(xev_window.pid, Some(probe.pid()));
    // Inside xev's 2-pixel border: the geometry is the window's contents.
    assert_eq!(
        xev_window.geometry,
        Rect {
            x: 702,
            y: 122,
            width: 200,
            height: 150
        }
    );
    assert!(logger_window.id.starts_with("0x"), "{logger_window:?}");
    assert_ne!(logger_window.id, xev_window.id);
    // Tk's and Xlib's helper windows (unnamed, unmapped or override-redirect) are not listed.
    assert!(
        desktop
            .windows()
            .unwrap()
            .iter()
            .all(|w| !(w.title.is_empty() && w.app.is_empty())),
        "{:#?}",
        desktop.windows().unwrap()
    );
}

#[test]
fn focus_switches_and_raises_and_window_at_follows_the_stacking() {
    let (_turn, mut desktop) = exclusive();
    let _app = logger("Logger focus", "400x300+100+100");
    // Overlaps the logger's right part (x 400..500).
    let _probe = xev("xev focus", "300x200+400+150");
    let logger_window = window_titled(&mut desktop, "Logger focus");
    let xev_window = window_titled(&mut desktop, "xev focus");
    let overlap = Point { x: 450, y: 200 };
    let only_logger = Point { x: 150, y: 150 };

    desktop.focus(&xev_window.id).unwrap();
    assert_eq!(
        desktop.focused().unwrap().map(|w| w.id),
        Some(xev_window.id.clone())
    );
    let flagged: Vec<String> = desktop
        .windows()
        .unwrap()
        .into_iter()
        .filter(|w| w.focused)
        .map(|w| w.title)
        .collect();
    assert_eq!(flagged, vec!["xev focus".to_owned()]);
    assert_eq!(
        desktop.window_at(overlap).unwrap().map(|w| w.id),
        Some(xev_window.id.clone())
    );
    assert_eq!(
        desktop.window_at(only_logger).unwrap().map(|w| w.id),
        Some(logger_window.id.clone())
    );

    desktop.focus(&logger_window.id).unwrap();
    assert_eq!(
        desktop.focused().unwrap().map(|w| w.id),
        Some(logger_window.id.clone())
    );
    assert_eq!(
        desktop.window_at(overlap).unwrap().map(|w| w.id),
        Some(logger_window.id.clone()),
        "focus raises the window"
    );
    assert_eq!(
        desktop.windows().unwrap().last().map(|w| w.id.clone()),
        Some(logger_window.id)
    );
    assert_eq!(desktop.window_at(Point { x: 5, y: 790 }).unwrap(), None);
}

#[test]
fn with_the_focus_on_pointer_root_the_window_under_the_pointer_is_focused() {
    let (_turn, mut desktop) = exclusive();
    let _app = logger("Logger pointer", "400x300+100+100");
    let window = window_titled(&mut desktop, "Logger pointer");
    desktop
        .conn
        .set_input_focus(
            x11rb::protocol::xproto::InputFocus::POINTER_ROOT,
            1u32,
            x11rb::CURRENT_TIME,
        )
        .unwrap()
        .check()
        .unwrap();
    desktop.move_pointer(Point { x: 5, y: 790 }).unwrap();
    assert_eq!(desktop.focused().unwrap(), None);
    desktop.move_pointer(Point { x: 200, y: 200 }).unwrap();
    assert_eq!(desktop.focused().unwrap().map(|w| w.id), Some(window.id));
}

#[test]
fn bad_and_unknown_ids_are_refused_without_harm() {
    let (_turn, mut desktop) = exclusive();
    for bad in ["", "window", "1234", "0x", "0xzz", "0x0"] {
        let err = desktop.focus(bad).unwrap_err();
        assert!(
            matches!(err, ToolError::InvalidArguments(_)),
            "{bad:?}: {err}"
        );
    }
    // The root window is no top-level window; an id nobody holds is none either.
    let root = format!("{:#x}", desktop.root);
    for unknown in [root.as_str(), "0x7ffffff0"] {
        let err = desktop.focus(unknown).unwrap_err();
        assert!(matches!(err, ToolError::NotFound(_)), "{unknown}: {err}");
    }
}

#[test]
fn a_capture_of_a_window_area_is_that_windows_pixels() {
    let (_turn, mut desktop) = exclusive();
    let _app = logger("Logger capture", "400x300+100+100");
    let window = window_titled(&mut desktop, "Logger capture");
    desktop.focus(&window.id).unwrap();
    let (width, height) = desktop.screen_size().unwrap();
    let pad = widget_centre(&window, "pad");
    // The pad's colour is drawn once Tk has handled the expose; wait for it on screen.
    let pixel = |frame: &crate::tool::desktop::backend::Frame, x: u32, y: u32| {
        let at = ((y * frame.width + x) * 3) as usize;
        [frame.rgb[at], frame.rgb[at + 1], frame.rgb[at + 2]]
    };
    let whole = wait_until(
        "the pad drawn",
        || {
            let whole = desktop.capture(None).unwrap();
            (pixel(&whole, pad.x as u32, pad.y as u32) == [0x30, 0x60, 0xc0]).then_some(whole)
        },
        String::new,
    );
    assert_eq!((whole.width, whole.height), (width, height));
    let part = desktop.capture(Some(window.geometry)).unwrap();
    assert_eq!((part.width, part.height), (400, 300));
    for y in 0..300 {
        let from = (((100 + y) * width + 100) * 3) as usize;
        let row = &whole.rgb[from..from + 400 * 3];
        assert_eq!(
            &part.rgb[(y * 400 * 3) as usize..((y + 1) * 400 * 3) as usize],
            row,
            "row {y}"
        );
    }
    assert_eq!(pixel(&part, 200, 265), [0x30, 0x60, 0xc0]);

    // Clipped to the screen; nothing of it on the screen is an error.
    let corner = desktop
        .capture(Some(Rect {
            x: i32::try_from(width).unwrap() - 80,
            y: -20,
            width: 200,
            height: 120,
        }))
        .unwrap();
    assert_eq!((corner.width, corner.height), (80, 100));
    let err = desktop
        .capture(Some(Rect {
            x: i32::try_from(width).unwrap(),
            y: 0,
            width: 10,
            height: 10,
        }))
        .unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments(_)), "{err}");
}

#[test]
fn an_active_screen_saver_counts_as_locked() {
    let (_turn, mut desktop) = exclusive();
    assert_eq!(desktop.locked().unwrap(), None);
    let force = |desktop: &X11Desktop, mode| {
        desktop
            .conn
            .force_screen_saver(mode)
            .unwrap()
            .check()
            .unwrap();
    };
    force(&desktop, ScreenSaver::ACTIVE);
    let locked = desktop.locked().unwrap();
    force(&desktop, ScreenSaver::RESET);
    assert_eq!(locked.as_deref(), Some("a screen saver is active"));
    assert_eq!(desktop.locked().unwrap(), None);
}

#[test]
fn capabilities_name_xtest_and_the_missing_window_manager() {
    let (_turn, _desktop) = exclusive();
    let lines = super::super::capabilities(&display()).unwrap();
    assert!(lines.iter().any(|l| l.starts_with("XTEST 2.")), "{lines:?}");
    assert!(
        lines.iter().any(|l| l.starts_with("window manager: none")),
        "{lines:?}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("X-Resource")),
        "{lines:?}"
    );
    let err = super::super::capabilities(":4243").unwrap_err();
    assert!(err.to_string().contains(":4243"), "{err}");
}
