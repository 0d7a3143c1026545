//! X11: input through XTEST, windows through EWMH (or the root's children when no window
//! manager runs, as in a bare Xvfb), pixels through the GetImage code `screenshot` uses, and
//! the lock state through MIT-SCREEN-SAVER.
//!
//! Window titles, classes and pids come from the programs that own the windows: untrusted
//! text, returned as it is for the caller to show safely. The pid is asked of the server
//! (X-Resource) first, because `_NET_WM_PID` is whatever the client chose to write.

mod input;
mod keymap;
mod properties;
mod windows;

#[cfg(test)]
mod tests;

use x11rb::connection::{Connection as _, RequestConnection as _};
use x11rb::protocol::randr::ConnectionExt as _;
use x11rb::protocol::res::ConnectionExt as _;
use x11rb::protocol::screensaver::{self, ConnectionExt as _};
use x11rb::protocol::xproto::{ConnectionExt as _, Screen, Window};
use x11rb::protocol::xtest::ConnectionExt as _;
use x11rb::rust_connection::RustConnection;

use super::backend::{Button, Desktop, Frame, Point, Rect, ScrollDirection, WindowInfo, failed};
use super::keys::KeyCombo;
use super::screenshot::{Area, clip, grab_rgb};
use crate::tool::ToolError;
use keymap::Keymap;

x11rb::atom_manager! {
    Atoms: AtomsCookie {
        _NET_SUPPORTED,
        _NET_SUPPORTING_WM_CHECK,
        _NET_CLIENT_LIST_STACKING,
        _NET_CLIENT_LIST,
        _NET_ACTIVE_WINDOW,
        _NET_WM_NAME,
        _NET_WM_PID,
        UTF8_STRING,
    }
}

/// One connection to an X display, driving it as a person at its keyboard and mouse would.
pub struct X11Desktop {
    conn: RustConnection,
    screen_num: usize,
    root: Window,
    display: String,
    atoms: Atoms,
    /// The server's keyboard mapping, fetched on first use of the keyboard.
    keymap: Option<Keymap>,
    /// XTEST was found (checked on first input, so a display without it still lists windows
    /// and captures).
    xtest_checked: bool,
}

/// Any X11 failure as a tool error that names the display.
fn x_error(display: &str, e: impl std::fmt::Display) -> ToolError {
    failed(format!("X11 display {display}: {e}"))
}

impl X11Desktop {
    pub fn connect(display: &str) -> Result<X11Desktop, ToolError> {
        let (conn, screen_num) = x11rb::connect(Some(display))
            .map_err(|e| failed(format!("cannot connect to X11 display {display}: {e}")))?;
        let root = conn
            .setup()
            .roots
            .get(screen_num)
            .ok_or_else(|| x_error(display, format!("screen {screen_num} does not exist")))?
            .root;
        let atoms = Atoms::new(&conn)
            .map_err(|e| x_error(display, e))?
            .reply()
            .map_err(|e| x_error(display, e))?;
        Ok(X11Desktop {
            conn,
            screen_num,
            root,
            display: display.to_owned(),
            atoms,
            keymap: None,
            xtest_checked: false,
        })
    }

    fn err(&self, e: impl std::fmt::Display) -> ToolError {
        x_error(&self.display, e)
    }

    fn screen(&self) -> Result<&Screen, ToolError> {
        self.conn
            .setup()
            .roots
            .get(self.screen_num)
            .ok_or_else(|| self.err(format!("screen {} does not exist", self.screen_num)))
    }

    /// Waits until the server has handled every request sent so far (one GetInputFocus round
    /// trip), so the events each request generates are queued for clients in order.
    fn sync(&self) -> Result<(), ToolError> {
        x11rb::wrapper::ConnectionExt::sync(&self.conn).map_err(|e| self.err(e))
    }

    fn has_extension(&self, name: &'static str) -> Result<bool, ToolError> {
        Ok(self
            .conn
            .extension_information(name)
            .map_err(|e| self.err(e))?
            .is_some())
    }
}

impl Drop for X11Desktop {
    /// Keys still bound temporarily (a restore that failed midway) are put back at the last
    /// moment this connection has.
    fn drop(&mut self) {
        if let Some(keymap) = self.keymap.as_mut()
            && keymap.has_bound()
            && let Err(e) = keymap.restore(&self.conn)
        {
            tracing::warn!(
                "X11 display {}: keyboard mapping not restored: {e}",
                self.display
            );
        }
    }
}

impl Desktop for X11Desktop {
    fn kind(&self) -> String {
        "x11".into()
    }

    fn screen_size(&mut self) -> Result<(u32, u32), ToolError> {
        let screen = self.screen()?;
        Ok((
            u32::from(screen.width_in_pixels),
            u32::from(screen.height_in_pixels),
        ))
    }

    fn capture(&mut self, area: Option<Rect>) -> Result<Frame, ToolError> {
        let screen = self.screen()?;
        let whole = Area {
            x: 0,
            y: 0,
            width: screen.width_in_pixels,
            height: screen.height_in_pixels,
        };
        let wanted = match area {
            None => whole,
            Some(rect) => clip_rect(rect, whole).ok_or_else(|| {
                ToolError::InvalidArguments(format!(
                    "the area {}x{} at {},{} is outside the screen ({}x{})",
                    rect.width, rect.height, rect.x, rect.y, whole.width, whole.height
                ))
            })?,
        };
        let rgb = grab_rgb(&self.conn, screen, wanted).map_err(|e| self.err(e))?;
        Ok(Frame {
            width: u32::from(wanted.width),
            height: u32::from(wanted.height),
            rgb,
        })
    }

    fn move_pointer(&mut self, to: Point) -> Result<(), ToolError> {
        self.motion(to)
    }

    fn button(&mut self, button: Button, pressed: bool) -> Result<(), ToolError> {
        self.press_button(button, pressed)
    }

    fn scroll(&mut self, direction: ScrollDirection, amount: u32) -> Result<(), ToolError> {
        self.wheel(direction, amount)
    }

    fn key(&mut self, combo: &KeyCombo) -> Result<(), ToolError> {
        self.press_combo(combo)
    }

    fn type_text(&mut self, text: &str) -> Result<(), ToolError> {
        self.type_chars(text)
    }

    fn cursor(&mut self) -> Result<Point, ToolError> {
        let reply = self
            .conn
            .query_pointer(self.root)
            .map_err(|e| self.err(e))?
            .reply()
            .map_err(|e| self.err(e))?;
        Ok(Point {
            x: i32::from(reply.root_x),
            y: i32::from(reply.root_y),
        })
    }

    fn windows(&mut self) -> Result<Vec<WindowInfo>, ToolError> {
        Ok(self.list()?.into_iter().map(|w| w.info).collect())
    }

    fn window_at(&mut self, at: Point) -> Result<Option<WindowInfo>, ToolError> {
        Ok(self
            .list()?
            .into_iter()
            .rev()
            .find(|w| w.viewable && w.info.geometry.contains(at))
            .map(|w| w.info))
    }

    fn focused(&mut self) -> Result<Option<WindowInfo>, ToolError> {
        Ok(self
            .list()?
            .into_iter()
            .find(|w| w.info.focused)
            .map(|w| w.info))
    }

    fn focus(&mut self, id: &str) -> Result<(), ToolError> {
        self.activate(id)
    }

    fn locked(&mut self) -> Result<Option<String>, ToolError> {
        if !self.has_extension(screensaver::X11_EXTENSION_NAME)? {
            return Ok(None);
        }
        let info = self
            .conn
            .screensaver_query_info(self.root)
            .map_err(|e| self.err(e))?
            .reply()
            .map_err(|e| self.err(e))?;
        let active = [screensaver::State::ON, screensaver::State::CYCLE]
            .iter()
            .any(|state| u8::from(*state) == info.state);
        Ok(active.then(|| "a screen saver is active".to_owned()))
    }
}

/// The part of `rect` on the screen, in the protocol's integer widths.
fn clip_rect(rect: Rect, whole: Area) -> Option<Area> {
    let x0 = i64::from(rect.x).max(0);
    let y0 = i64::from(rect.y).max(0);
    let x1 = (i64::from(rect.x) + i64::from(rect.width)).min(i64::from(whole.width));
    let y1 = (i64::from(rect.y) + i64::from(rect.height)).min(i64::from(whole.height));
    let area = Area {
        x: i16::try_from(x0).ok()?,
        y: i16::try_from(y0).ok()?,
        width: u16::try_from((x1 - x0).max(0)).ok()?,
        height: u16::try_from((y1 - y0).max(0)).ok()?,
    };
    clip(area, whole)
}

/// What the display offers for desktop automation, one line each, for `doctor`.
pub fn capabilities(display: &str) -> Result<Vec<String>, ToolError> {
    let desktop = X11Desktop::connect(display)?;
    let conn = &desktop.conn;
    let err = |e: &dyn std::fmt::Display| x_error(display, e);
    let mut lines = Vec::new();
    lines.push(
        match conn
            .xtest_get_version(2, 2)
            .ok()
            .and_then(|c| c.reply().ok())
        {
            Some(v) => format!(
                "XTEST {}.{} (mouse and keyboard input)",
                v.major_version, v.minor_version
            ),
            None => "XTEST missing: no mouse or keyboard input".to_owned(),
        },
    );
    lines.push(match desktop.window_manager().map_err(|e| err(&e))? {
        Some(wm) => format!(
            "window manager: {} (EWMH{})",
            if wm.name.is_empty() {
                "unnamed"
            } else {
                &wm.name
            },
            if wm.active_window {
                ", focus through _NET_ACTIVE_WINDOW"
            } else {
                ""
            }
        ),
        None => {
            "window manager: none (no window manager; windows are the root's children)".to_owned()
        }
    });
    lines.push(
        match conn
            .randr_query_version(1, 5)
            .ok()
            .and_then(|c| c.reply().ok())
        {
            Some(v) => format!("RandR {}.{} (monitors)", v.major_version, v.minor_version),
            None => "RandR missing: the whole screen is one monitor".to_owned(),
        },
    );
    lines.push(if desktop.has_extension(screensaver::X11_EXTENSION_NAME)? {
        "MIT-SCREEN-SAVER (an active screen saver stops input)".to_owned()
    } else {
        "MIT-SCREEN-SAVER missing: a locked screen cannot be detected through X11".to_owned()
    });
    lines.push(
        match conn
            .res_query_version(1, 2)
            .ok()
            .and_then(|c| c.reply().ok())
        {
            Some(v) => format!(
                "X-Resource {}.{} (window pids from the server)",
                v.server_major, v.server_minor
            ),
            None => "X-Resource missing: window pids from _NET_WM_PID only".to_owned(),
        },
    );
    Ok(lines)
}
