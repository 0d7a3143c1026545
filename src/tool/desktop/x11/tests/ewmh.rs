//! What a window manager or a client claims, checked: a stand-in EWMH window manager (its
//! stacking, its active window, focus asked of it, a stale check window) and a window lying
//! about its pid.

use x11rb::connection::Connection as _;
use x11rb::protocol::xproto::{AtomEnum, ConnectionExt as _};

use super::*;

/// A window of this test process's own, with properties a lying client would set.
fn own_window(conn: &x11rb::rust_connection::RustConnection, root: u32, title: &str) -> u32 {
    use x11rb::protocol::xproto::{CreateWindowAux, PropMode, WindowClass};
    use x11rb::wrapper::ConnectionExt as _;
    let window = conn.generate_id().unwrap();
    conn.create_window(
        x11rb::COPY_DEPTH_FROM_PARENT,
        window,
        root,
        20,
        500,
        120,
        80,
        0,
        WindowClass::INPUT_OUTPUT,
        0,
        &CreateWindowAux::new(),
    )
    .unwrap();
    conn.change_property8(
        PropMode::REPLACE,
        window,
        AtomEnum::WM_NAME,
        AtomEnum::STRING,
        title.as_bytes(),
    )
    .unwrap();
    conn.map_window(window).unwrap();
    conn.sync().unwrap();
    window
}

#[test]
fn the_pid_comes_from_the_server_not_from_what_the_window_claims() {
    use x11rb::protocol::xproto::PropMode;
    use x11rb::wrapper::ConnectionExt as _;
    let (_turn, mut desktop) = exclusive();
    let (liar, _) = x11rb::connect(Some(&display())).unwrap();
    let window = own_window(&liar, desktop.root, "pid liar");
    let claimed_pid = desktop.atoms._NET_WM_PID;
    liar.change_property32(
        PropMode::REPLACE,
        window,
        claimed_pid,
        AtomEnum::CARDINAL,
        &[1],
    )
    .unwrap();
    liar.sync().unwrap();
    let listed = window_titled(&mut desktop, "pid liar");
    assert_eq!(listed.pid, Some(std::process::id()), "{listed:?}");
}

/// Root properties an EWMH window manager sets, removed again when the test ends.
struct StandInWm {
    conn: x11rb::rust_connection::RustConnection,
    root: u32,
    check: u32,
}

impl Drop for StandInWm {
    fn drop(&mut self) {
        use x11rb::wrapper::ConnectionExt as _;
        let atoms = [
            "_NET_SUPPORTING_WM_CHECK",
            "_NET_SUPPORTED",
            "_NET_CLIENT_LIST_STACKING",
            "_NET_ACTIVE_WINDOW",
        ];
        for name in atoms {
            if let Ok(atom) = self
                .conn
                .intern_atom(false, name.as_bytes())
                .unwrap()
                .reply()
            {
                let _ = self.conn.delete_property(self.root, atom.atom);
            }
        }
        let _ = self.conn.destroy_window(self.check);
        let _ = self.conn.sync();
    }
}

#[test]
fn an_ewmh_window_manager_is_asked_for_focus_and_trusted_for_the_stacking() {
    use x11rb::protocol::Event;
    use x11rb::protocol::xproto::{
        ChangeWindowAttributesAux, CreateWindowAux, EventMask, PropMode, WindowClass,
    };
    use x11rb::wrapper::ConnectionExt as _;
    let (_turn, mut desktop) = exclusive();
    let _app = logger("Logger managed", "400x300+100+100");
    let _probe = xev("xev managed", "200x150+700+120");
    let logger_window = window_titled(&mut desktop, "Logger managed");
    let xev_window = window_titled(&mut desktop, "xev managed");
    let id = |w: &WindowInfo| super::super::windows::parse_id(&w.id).unwrap();

    let (conn, _) = x11rb::connect(Some(&display())).unwrap();
    let root = desktop.root;
    let check = conn.generate_id().unwrap();
    conn.create_window(
        0,
        check,
        root,
        -10,
        -10,
        1,
        1,
        0,
        WindowClass::INPUT_ONLY,
        0,
        &CreateWindowAux::new(),
    )
    .unwrap();
    let wm = StandInWm { conn, root, check };
    let a = &desktop.atoms;
    let c = &wm.conn;
    c.change_property32(
        PropMode::REPLACE,
        check,
        a._NET_SUPPORTING_WM_CHECK,
        AtomEnum::WINDOW,
        &[check],
    )
    .unwrap();
    c.change_property8(
        PropMode::REPLACE,
        check,
        a._NET_WM_NAME,
        a.UTF8_STRING,
        b"stand-in",
    )
    .unwrap();
    c.change_property32(
        PropMode::REPLACE,
        root,
        a._NET_SUPPORTING_WM_CHECK,
        AtomEnum::WINDOW,
        &[check],
    )
    .unwrap();
    c.change_property32(
        PropMode::REPLACE,
        root,
        a._NET_SUPPORTED,
        AtomEnum::ATOM,
        &[a._NET_ACTIVE_WINDOW, a._NET_CLIENT_LIST_STACKING],
    )
    .unwrap();
    // The manager's stacking: xev below the logger; xev active.
    c.change_property32(
        PropMode::REPLACE,
        root,
        a._NET_CLIENT_LIST_STACKING,
        AtomEnum::WINDOW,
        &[id(&xev_window), id(&logger_window)],
    )
    .unwrap();
    c.change_property32(
        PropMode::REPLACE,
        root,
        a._NET_ACTIVE_WINDOW,
        AtomEnum::WINDOW,
        &[id(&xev_window)],
    )
    .unwrap();
    c.change_window_attributes(
        root,
        &ChangeWindowAttributesAux::new().event_mask(EventMask::SUBSTRUCTURE_REDIRECT),
    )
    .unwrap()
    .check()
    .unwrap();
    c.sync().unwrap();

    let lines = super::super::capabilities(&display()).unwrap();
    assert!(
        lines.contains(
            &"window manager: stand-in (EWMH, focus through _NET_ACTIVE_WINDOW)".to_owned()
        ),
        "{lines:?}"
    );
    let titles: Vec<String> = desktop
        .windows()
        .unwrap()
        .into_iter()
        .map(|w| w.title)
        .collect();
    assert_eq!(
        titles,
        vec!["xev managed".to_owned(), "Logger managed".to_owned()]
    );
    assert_eq!(
        desktop.focused().unwrap().map(|w| w.id),
        Some(xev_window.id)
    );

    // Focus is asked of the manager, as a pager's (the person's) request.
    desktop.focus(&logger_window.id).unwrap();
    let request = wait_until(
        "the _NET_ACTIVE_WINDOW request",
        || loop {
            match wm.conn.poll_for_event().unwrap() {
                Some(Event::ClientMessage(message)) => break Some(message),
                Some(_) => continue,
                None => break None,
            }
        },
        String::new,
    );
    assert_eq!(request.type_, desktop.atoms._NET_ACTIVE_WINDOW);
    assert_eq!(request.window, id(&logger_window));
    assert_eq!(request.data.as_data32()[0], 2);

    // A manager that is gone leaves its properties behind; its check window tells.
    wm.conn.destroy_window(check).unwrap();
    wm.conn.sync().unwrap();
    let lines = super::super::capabilities(&display()).unwrap();
    assert!(
        lines.iter().any(|l| l.starts_with("window manager: none")),
        "{lines:?}"
    );
    drop(wm);
}
