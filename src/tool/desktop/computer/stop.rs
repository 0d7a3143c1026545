//! The stop key: while a session drives the desktop, the Pause key — pressed by the person,
//! anywhere — stops the running turn, so a sequence of clicks can be halted without reaching
//! corral's terminal. On X11 it is a passive grab of Pause (with any modifiers) on the root
//! window by a watcher thread of corral's own. Wayland gives clients no global keys; on sway
//! corral binds Pause through sway's IPC and watches for the binding's event. Other
//! compositors have neither: there the terminal's Ctrl-C, or Esc in the full-screen view,
//! stops the turn.

use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use x11rb::connection::Connection as _;
use x11rb::protocol::Event;
use x11rb::protocol::xproto::{ConnectionExt as _, GrabMode, ModMask};

use super::super::backend::DesktopEnv;
use super::super::wayland;

/// X keysym of Pause.
const PAUSE: u32 = 0xff13;
const POLL: Duration = Duration::from_millis(50);

/// Where a stop key can be had: an X display, or sway's IPC socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopSource {
    X11(String),
    Sway(String),
}

impl StopSource {
    /// The stop key the desktop in `env` offers, if any.
    pub fn of(env: &DesktopEnv) -> Option<StopSource> {
        match (&env.wayland_display, &env.swaysock, &env.display) {
            (Some(_), Some(socket), _) => Some(StopSource::Sway(socket.clone())),
            (None, _, Some(display)) => Some(StopSource::X11(display.clone())),
            _ => None,
        }
    }
}

/// A session's stop key: the turn it stops, and the watcher that listens for it.
#[derive(Debug, Default)]
pub struct StopKey {
    shared: Arc<Shared>,
    /// What a watcher listens on, once started.
    watching: Mutex<Option<Watching>>,
}

#[derive(Debug)]
struct Watching {
    source: StopSource,
    /// sway: the watcher's socket, shut down to end it.
    sway: Option<UnixStream>,
}

#[derive(Debug, Default)]
struct Shared {
    turn: Mutex<Option<CancellationToken>>,
    closed: AtomicBool,
}

impl Shared {
    fn pressed(&self) {
        let turn = self.turn.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(turn) = turn {
            tracing::warn!("the stop key (Pause) was pressed: stopping the turn");
            turn.cancel();
        }
    }
}

impl StopKey {
    /// From now until the turn ends, Pause cancels `turn`. The first call starts the watcher;
    /// `Err` says why there is no stop key (the session goes on without one).
    pub fn arm(&self, source: &StopSource, turn: &CancellationToken) -> Result<(), String> {
        *self.shared.turn.lock().unwrap_or_else(|p| p.into_inner()) = Some(turn.clone());
        let mut watching = self.watching.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(current) = watching.as_ref()
            && &current.source == source
        {
            // Another session on the same sway may have taken the binding back as it closed.
            if let StopSource::Sway(socket) = source {
                wayland::stop_key::bind(socket).map_err(|e| e.to_string())?;
            }
            return Ok(());
        }
        let sway = match source {
            StopSource::X11(display) => {
                watch_x11(display, self.shared.clone())?;
                None
            }
            StopSource::Sway(socket) => {
                wayland::stop_key::bind(socket).map_err(|e| e.to_string())?;
                let shared = self.shared.clone();
                let closer = wayland::stop_key::watch(socket, move || shared.pressed())
                    .map_err(|e| e.to_string())?;
                Some(closer)
            }
        };
        if let Some(old) = watching.replace(Watching {
            source: source.clone(),
            sway,
        }) {
            old.end();
        }
        Ok(())
    }
}

impl Watching {
    fn end(&self) {
        if let (StopSource::Sway(socket), Some(closer)) = (&self.source, &self.sway) {
            wayland::stop_key::stop_watching(closer);
            wayland::stop_key::unbind(socket);
        }
    }
}

impl Drop for StopKey {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Relaxed);
        if let Some(watching) = self
            .watching
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            watching.end();
        }
    }
}

/// Grabs Pause on `display`'s root window and watches for it on a thread of its own.
fn watch_x11(display: &str, shared: Arc<Shared>) -> Result<(), String> {
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
    std::thread::Builder::new()
        .name("corral-stop-key".into())
        .spawn(move || watch(conn, &shared))
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// Until the session goes: each Pause press cancels the armed turn.
fn watch(conn: x11rb::rust_connection::RustConnection, shared: &Shared) {
    while !shared.closed.load(Ordering::Relaxed) {
        match conn.poll_for_event() {
            Ok(Some(Event::KeyPress(_))) => shared.pressed(),
            Ok(Some(_)) => {}
            Ok(None) => std::thread::sleep(POLL),
            Err(e) => {
                tracing::warn!(error = %e, "the stop key's display connection ended");
                return;
            }
        }
    }
}
