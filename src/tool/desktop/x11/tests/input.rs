//! Clicks, drags, wheel steps, typing and key combos, as the logger received them.

use x11rb::connection::Connection as _;
use x11rb::protocol::xproto::ConnectionExt as _;

use super::*;
use crate::tool::ToolError;
use crate::tool::desktop::backend::ScrollDirection;
use crate::tool::desktop::keys::parse_combo;

/// The logger, shown, focused, with its window description.
fn focused_logger(desktop: &mut X11Desktop, title: &str) -> (Client, WindowInfo) {
    let app = logger(title, "400x300+100+100");
    let window = window_titled(desktop, title);
    desktop.focus(&window.id).unwrap();
    (app, window)
}

fn press_on(line: &Value, widget: &str, button: u64) -> bool {
    line["event"] == "press" && line["widget"] == widget && line["button"] == button
}

#[test]
fn clicks_land_on_the_widget_under_the_mapped_point() {
    let (_turn, mut desktop) = exclusive();
    let (app, window) = focused_logger(&mut desktop, "x11 clicks");
    assert_eq!(
        (window.geometry.x, window.geometry.y),
        (100, 100),
        "{window:?}"
    );

    let two = widget_centre(&window, "two");
    click(&mut desktop, two, Button::Left);
    let press = app.wait_line("a left press on two", 0, |l| press_on(l, "two", 1));
    assert_eq!(
        (press["root_x"].as_i64(), press["root_y"].as_i64()),
        (Some(two.x.into()), Some(two.y.into()))
    );
    app.wait_line("button two's command", 0, |l| {
        l["event"] == "command" && l["widget"] == "two"
    });
    assert_eq!(desktop.cursor().unwrap(), two);

    let seen = app.lines().len();
    click(&mut desktop, widget_centre(&window, "three"), Button::Right);
    app.wait_line("a right press on three", seen, |l| press_on(l, "three", 3));
    click(&mut desktop, widget_centre(&window, "one"), Button::Middle);
    app.wait_line("a middle press on one", seen, |l| press_on(l, "one", 2));
    // Neither a right nor a middle click activates a Tk button.
    assert!(
        !app.lines()[seen..].iter().any(|l| l["event"] == "command"),
        "{:#?}",
        app.lines()
    );

    let pad = widget_centre(&window, "pad");
    let seen = app.lines().len();
    click(&mut desktop, pad, Button::Left);
    click(&mut desktop, pad, Button::Left);
    app.wait_line("a double click on the pad", seen, |l| {
        l["event"] == "double" && l["widget"] == "pad" && l["button"] == 1
    });
}

#[test]
fn a_drag_presses_moves_and_releases_where_asked() {
    let (_turn, mut desktop) = exclusive();
    let (app, window) = focused_logger(&mut desktop, "x11 drag");
    let from = Point {
        x: window.geometry.x + 30,
        y: window.geometry.y + 260,
    };
    let to = Point {
        x: window.geometry.x + 350,
        y: window.geometry.y + 270,
    };
    desktop.move_pointer(from).unwrap();
    desktop.button(Button::Left, true).unwrap();
    desktop.move_pointer(Point { x: 300, y: 365 }).unwrap();
    desktop.move_pointer(to).unwrap();
    desktop.button(Button::Left, false).unwrap();
    let press = app.wait_line("the drag's press", 0, |l| press_on(l, "pad", 1));
    assert_eq!(
        (press["x"].as_i64(), press["y"].as_i64()),
        (Some(20), Some(20))
    );
    // The release goes to the pressed widget (an implicit grab), at the end point.
    let release = app.wait_line("the drag's release", 0, |l| {
        l["event"] == "release" && l["button"] == 1
    });
    assert_eq!(release["widget"], "pad");
    assert_eq!(
        (release["root_x"].as_i64(), release["root_y"].as_i64()),
        (Some(to.x.into()), Some(to.y.into()))
    );
}

#[test]
fn wheel_steps_are_buttons_four_to_seven_one_per_step() {
    let (_turn, mut desktop) = exclusive();
    let (app, window) = focused_logger(&mut desktop, "x11 scroll");
    desktop.move_pointer(widget_centre(&window, "pad")).unwrap();
    desktop.scroll(ScrollDirection::Down, 3).unwrap();
    desktop.scroll(ScrollDirection::Up, 2).unwrap();
    let wheel = |app: &Client| -> Vec<u64> {
        app.lines()
            .iter()
            .filter(|l| l["event"] == "press" && l["widget"] == "pad")
            .filter_map(|l| l["button"].as_u64())
            .collect()
    };
    let expected = vec![5, 5, 5, 4, 4];
    wait_until(
        "five wheel steps on the pad",
        || (wheel(&app).len() >= expected.len()).then_some(()),
        || format!("{:#?}", app.lines()),
    );
    assert_eq!(wheel(&app), expected);

    // Tk folds buttons 6 and 7 into 4 and 5 with Shift; xev prints the X events as they are.
    let output = std::env::temp_dir().join(format!("corral-x11-xev-{}.txt", std::process::id()));
    let probe = xev_logged("xev wheel", "300x200+600+100", &output);
    let xev_window = window_titled(&mut desktop, "xev wheel");
    desktop
        .move_pointer(Point {
            x: xev_window.geometry.x + 150,
            y: xev_window.geometry.y + 100,
        })
        .unwrap();
    desktop.scroll(ScrollDirection::Left, 1).unwrap();
    desktop.scroll(ScrollDirection::Right, 2).unwrap();
    let pressed = || -> Vec<u32> {
        let text = std::fs::read_to_string(&output).unwrap_or_default();
        text.split("ButtonPress event")
            .skip(1)
            .filter_map(|event| {
                let at = event.find("button ")? + "button ".len();
                let digits: String = event[at..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                digits.parse().ok()
            })
            .collect()
    };
    wait_until(
        "three horizontal wheel steps in xev",
        || (pressed().len() >= 3).then_some(()),
        || format!("{:?}", std::fs::read_to_string(&output)),
    );
    assert_eq!(pressed(), vec![6, 7, 7]);
    drop(probe);
    let _ = std::fs::remove_file(&output);
}

/// The whole core keyboard mapping.
fn keyboard_mapping(desktop: &X11Desktop) -> Vec<u32> {
    let setup = desktop.conn.setup();
    let (min, max) = (setup.min_keycode, setup.max_keycode);
    desktop
        .conn
        .get_keyboard_mapping(min, max - min + 1)
        .unwrap()
        .reply()
        .unwrap()
        .keysyms
}

#[test]
fn typed_text_arrives_exactly_and_the_keymap_is_put_back() {
    let (_turn, mut desktop) = exclusive();
    let (app, window) = focused_logger(&mut desktop, "x11 typing");
    let before = keyboard_mapping(&desktop);

    click(&mut desktop, widget_centre(&window, "entry"), Button::Left);
    app.wait_line("the entry focused", 0, |l| {
        l["event"] == "focus" && l["widget"] == "entry"
    });
    let line = "Hello, World! ~|{}<>?\"' 0-9 é€λ ÄŸ";
    desktop.type_text(line).unwrap();
    app.wait_line("the typed line in the entry", 0, |l| {
        l["event"] == "entry" && l["text"] == line
    });
    assert_eq!(
        keyboard_mapping(&desktop),
        before,
        "the temporary key bindings stay"
    );

    click(&mut desktop, widget_centre(&window, "text"), Button::Left);
    app.wait_line("the text focused", 0, |l| {
        l["event"] == "focus" && l["widget"] == "text"
    });
    let text = "first line\r\nsecond\tλόγος\nthird €";
    desktop.type_text(text).unwrap();
    let typed = text.replace("\r\n", "\n");
    app.wait_line("the typed lines in the text", 0, |l| {
        l["event"] == "text" && l["text"] == typed
    });
    assert_eq!(keyboard_mapping(&desktop), before);
}

#[test]
fn more_missing_characters_than_spare_keycodes_still_arrive() {
    let (_turn, mut desktop) = exclusive();
    let (app, window) = focused_logger(&mut desktop, "x11 many");
    let before = keyboard_mapping(&desktop);
    click(&mut desktop, widget_centre(&window, "entry"), Button::Left);
    app.wait_line("the entry focused", 0, |l| {
        l["event"] == "focus" && l["widget"] == "entry"
    });
    // More distinct characters than any keymap has spare keycodes for at once.
    let line: String = ('α'..='ω').chain('Б'..='Я').chain('א'..='ת').collect();
    desktop.type_text(&line).unwrap();
    app.wait_line("every character in the entry", 0, |l| {
        l["event"] == "entry" && l["text"] == line
    });
    assert_eq!(keyboard_mapping(&desktop), before);
}

#[test]
fn key_combos_arrive_with_their_modifiers() {
    let (_turn, mut desktop) = exclusive();
    let (app, window) = focused_logger(&mut desktop, "x11 keys");
    click(&mut desktop, widget_centre(&window, "entry"), Button::Left);
    app.wait_line("the entry focused", 0, |l| {
        l["event"] == "focus" && l["widget"] == "entry"
    });
    const SHIFT: u64 = 1;
    const CONTROL: u64 = 4;
    let key = |l: &Value, keysyms: &[&str], state: u64| {
        l["event"] == "key"
            && keysyms.iter().any(|k| l["keysym"] == *k)
            && l["state"]
                .as_u64()
                .is_some_and(|s| s & (SHIFT | CONTROL) == state)
    };
    for (combo, keysyms, state) in [
        ("ctrl+a", &["a"][..], CONTROL),
        ("shift+Tab", &["ISO_Left_Tab", "Tab"][..], SHIFT),
        ("Return", &["Return"][..], 0),
        // A shifted symbol gets Shift by itself.
        ("A", &["A"][..], SHIFT),
        ("ctrl+shift+z", &["Z", "z"][..], SHIFT | CONTROL),
    ] {
        let seen = app.lines().len();
        desktop.key(&parse_combo(combo).unwrap()).unwrap();
        app.wait_line(combo, seen, |l| key(l, keysyms, state));
    }
    // A key the layout lacks is bound for the press and arrives as itself.
    let seen = app.lines().len();
    desktop.key(&parse_combo("ctrl+é").unwrap()).unwrap();
    app.wait_line("ctrl+é", seen, |l| key(l, &["eacute"], CONTROL));
}

#[test]
fn points_off_the_screen_and_control_characters_are_refused() {
    let (_turn, mut desktop) = exclusive();
    let (width, height) = desktop.screen_size().unwrap();
    for at in [
        Point { x: -1, y: 10 },
        Point {
            x: 10,
            y: i32::try_from(height).unwrap(),
        },
        Point {
            x: i32::try_from(width).unwrap(),
            y: 0,
        },
        Point { x: 70_000, y: 0 },
    ] {
        let err = desktop.move_pointer(at).unwrap_err();
        assert!(
            matches!(err, ToolError::InvalidArguments(_)),
            "{at:?}: {err}"
        );
    }
    let err = desktop.type_text("a\u{7}b").unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments(_)), "{err}");
}
