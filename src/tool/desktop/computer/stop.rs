//! The stop key: while a session drives the desktop, the Pause key — pressed by the person,
//! anywhere — stops the running turn, so a sequence of clicks can be halted without reaching
//! corral's terminal. On X11 it is a passive grab of Pause (with any modifiers) on the root
//! window by a watcher thread of corral's own; Wayland gives clients no global keys, so there
//! the compositor's own binding (or the terminal's Esc in the full-screen view) stops it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use x11rb::connection::Connection as _;
use x11rb::protocol::Event;
use x11rb::protocol::xproto::{ConnectionExt as _, GrabMode, ModMask};

/// X keysym of Pause.
const PAUSE: u32 = 0xff13;
const POLL: Duration = Duration::from_millis(50);

/// A session's stop key: the turn it stops, and the watcher that listens for it.
#[derive(Debug, Default)]
pub struct StopKey {
    shared: Arc<Shared>,
    /// The display a watcher listens on, once started.
    watching: Mutex<Option<String>>,
}

#[derive(Debug, Default)]
struct Shared {
    turn: Mutex<Option<CancellationToken>>,
    closed: AtomicBool,
}

impl StopKey {
    /// From now until the turn ends, Pause on `display` cancels `turn`. The first call starts
    /// the watcher; `Err` says why there is no stop key (the session goes on without one).
    pub fn arm(&self, display: &str, turn: &CancellationToken) -> Result<(), String> {
        *self.shared.turn.lock().unwrap_or_else(|p| p.into_inner()) = Some(turn.clone());
        let mut watching = self.watching.lock().unwrap_or_else(|p| p.into_inner());
        if watching.as_deref() == Some(display) {
            return Ok(());
        }
        let (conn, screen) = x11rb::connect(Some(display)).map_err(|e| e.to_string())?;
        let root = conn.setup().roots[screen].root;
        let min = conn.setup().min_keycode;
        let count = conn.setup().max_keycode - min + 1;
        let map = conn
            .get_keyboard_mapping(min, count)
            .map_err(|e| e.to_string())?
            .reply()
            .map_err(|e| e.to_string())?;
        let per = usize::from(map.keysyms_per_keycode.max(1));
        let keycode = map
            .keysyms
            .chunks(per)
            .position(|syms| syms.contains(&PAUSE))
            .map(|i| min + i as u8)
            .ok_or("the keyboard has no Pause key")?;
        conn.grab_key(
            false,
            root,
            ModMask::ANY,
            keycode,
            GrabMode::ASYNC,
            GrabMode::ASYNC,
        )
        .map_err(|e| e.to_string())?
        .check()
        .map_err(|e| format!("another program holds the Pause key ({e:?})"))?;
        let shared = self.shared.clone();
        std::thread::Builder::new()
            .name("corral-stop-key".into())
            .spawn(move || watch(conn, &shared))
            .map_err(|e| e.to_string())?;
        *watching = Some(display.to_string());
        Ok(())
    }
}

impl Drop for StopKey {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Relaxed);
    }
}

/// Until the session goes: each Pause press cancels the armed turn.
fn watch(conn: x11rb::rust_connection::RustConnection, shared: &Shared) {
    while !shared.closed.load(Ordering::Relaxed) {
        match conn.poll_for_event() {
            Ok(Some(Event::KeyPress(_))) => {
                let turn = shared.turn.lock().unwrap_or_else(|p| p.into_inner()).take();
                if let Some(turn) = turn {
                    tracing::warn!("the stop key (Pause) was pressed: stopping the turn");
                    turn.cancel();
                }
            }
            Ok(Some(_)) => {}
            Ok(None) => std::thread::sleep(POLL),
            Err(e) => {
                tracing::warn!(error = %e, "the stop key's display connection ended");
                return;
            }
        }
    }
}
