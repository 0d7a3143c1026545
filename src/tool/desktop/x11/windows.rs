//! Top-level windows: the window manager's EWMH client list where one runs; with none (a bare
//! Xvfb), the root's mapped children that have a name or class. A window that vanishes while
//! it is being described is left out.

use x11rb::CURRENT_TIME;
use x11rb::protocol::res::{self, ClientIdMask, ClientIdSpec, ConnectionExt as _};
use x11rb::protocol::xproto::{
    AtomEnum, ClientMessageEvent, ConfigureWindowAux, ConnectionExt as _, EventMask, InputFocus,
    MapState, StackMode, Window,
};

use super::X11Desktop;
use super::properties::{application, gone_is_none, text};
use crate::tool::ToolError;
use crate::tool::desktop::backend::{Point, Rect, WindowInfo};

/// The EWMH window manager announced on the root window.
pub(super) struct WindowManager {
    pub name: String,
    /// It handles `_NET_ACTIVE_WINDOW` requests (focus through it, not around it).
    pub active_window: bool,
}

/// A top-level window with what `window_at` needs beyond the public description.
pub(super) struct Listed {
    pub info: WindowInfo,
    /// Mapped and on screen (a minimized EWMH client is listed but not viewable).
    pub viewable: bool,
}

/// Where keyboard input goes.
enum Focus {
    Window(Window),
    /// PointerRoot: to whichever window is under the pointer.
    UnderPointer,
}

/// `0x…` (hex, as X tools print window ids) to a window id.
pub(super) fn parse_id(id: &str) -> Result<Window, ToolError> {
    let hex = id
        .strip_prefix("0x")
        .or_else(|| id.strip_prefix("0X"))
        .filter(|hex| !hex.is_empty() && hex.len() <= 8)
        .filter(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit()));
    match hex.and_then(|hex| u32::from_str_radix(hex, 16).ok()) {
        Some(window) if window != 0 => Ok(window),
        _ => Err(ToolError::InvalidArguments(format!(
            "{id:?} is not an X11 window id: ids look like 0x1a00004 (list the windows to \
             see them)"
        ))),
    }
}

pub(super) fn format_id(window: Window) -> String {
    format!("{window:#x}")
}

impl X11Desktop {
    pub(super) fn window_manager(&self) -> Result<Option<WindowManager>, ToolError> {
        let check = self.atoms._NET_SUPPORTING_WM_CHECK;
        let Some(&wm) = self
            .property_u32s(self.root, check, AtomEnum::WINDOW)?
            .first()
        else {
            return Ok(None);
        };
        // A window manager that died leaves the root property behind; its check window
        // (gone, or not pointing at itself) tells.
        if self.property_u32s(wm, check, AtomEnum::WINDOW)?.first() != Some(&wm) {
            return Ok(None);
        }
        let name = self
            .property(wm, self.atoms._NET_WM_NAME, self.atoms.UTF8_STRING)?
            .map(|reply| text(&reply))
            .unwrap_or_default();
        let supported = self.property_u32s(self.root, self.atoms._NET_SUPPORTED, AtomEnum::ATOM)?;
        Ok(Some(WindowManager {
            name,
            active_window: supported.contains(&self.atoms._NET_ACTIVE_WINDOW),
        }))
    }

    /// Top-level windows bottom to top, each described.
    pub(super) fn list(&self) -> Result<Vec<Listed>, ToolError> {
        let wm = self.window_manager()?;
        let managed = match wm {
            Some(_) => {
                let stacking = self.property_u32s(
                    self.root,
                    self.atoms._NET_CLIENT_LIST_STACKING,
                    AtomEnum::WINDOW,
                )?;
                if stacking.is_empty() {
                    self.property_u32s(self.root, self.atoms._NET_CLIENT_LIST, AtomEnum::WINDOW)?
                } else {
                    stacking
                }
            }
            None => Vec::new(),
        };
        let ewmh = !managed.is_empty();
        let candidates = if ewmh {
            managed
        } else {
            let tree = self.conn.query_tree(self.root).map_err(|e| self.err(e))?;
            tree.reply().map_err(|e| self.err(e))?.children
        };
        let focus = self.focus_target(wm.is_some(), &candidates)?;
        let mut listed = Vec::new();
        for window in candidates {
            let attributes = self
                .conn
                .get_window_attributes(window)
                .map_err(|e| self.err(e))?;
            let Some(attributes) = gone_is_none(attributes.reply()).map_err(|e| self.err(e))?
            else {
                continue;
            };
            let viewable = attributes.map_state == MapState::VIEWABLE;
            if !ewmh && (!viewable || attributes.override_redirect) {
                continue;
            }
            let Some(info) = self.describe(window)? else {
                continue;
            };
            if !ewmh && info.title.is_empty() && info.app.is_empty() {
                continue;
            }
            let focused = matches!(focus, Some(Focus::Window(w)) if w == window);
            listed.push(Listed {
                info: WindowInfo { focused, ..info },
                viewable,
            });
        }
        if let Some(Focus::UnderPointer) = focus {
            let pointer = self.pointer()?;
            if let Some(under) = listed
                .iter_mut()
                .rev()
                .find(|w| w.viewable && w.info.geometry.contains(pointer))
            {
                under.info.focused = true;
            }
        }
        Ok(listed)
    }

    fn pointer(&self) -> Result<Point, ToolError> {
        let reply = self
            .conn
            .query_pointer(self.root)
            .map_err(|e| self.err(e))?;
        let reply = reply.reply().map_err(|e| self.err(e))?;
        Ok(Point {
            x: i32::from(reply.root_x),
            y: i32::from(reply.root_y),
        })
    }

    /// The top-level window keyboard input goes to: the window manager's active window, else
    /// the input focus climbed up to its top-level (one of `tops`, or a child of the root).
    fn focus_target(&self, ewmh: bool, tops: &[Window]) -> Result<Option<Focus>, ToolError> {
        if ewmh {
            let active =
                self.property_u32s(self.root, self.atoms._NET_ACTIVE_WINDOW, AtomEnum::WINDOW)?;
            if let Some(&window) = active.first().filter(|w| **w != 0) {
                return Ok(Some(Focus::Window(window)));
            }
        }
        let focus = self.conn.get_input_focus().map_err(|e| self.err(e))?;
        let mut window = focus.reply().map_err(|e| self.err(e))?.focus;
        match window {
            0 => return Ok(None),
            1 => return Ok(Some(Focus::UnderPointer)),
            w if w == self.root => return Ok(None),
            _ => {}
        }
        // Bounded: a tree deeper than this is not a real desktop's.
        for _ in 0..64 {
            if tops.contains(&window) {
                return Ok(Some(Focus::Window(window)));
            }
            let tree = self.conn.query_tree(window).map_err(|e| self.err(e))?;
            let Some(tree) = gone_is_none(tree.reply()).map_err(|e| self.err(e))? else {
                return Ok(None);
            };
            if tree.parent == self.root {
                return Ok(Some(Focus::Window(window)));
            }
            if tree.parent == 0 {
                return Ok(None);
            }
            window = tree.parent;
        }
        Ok(None)
    }

    /// Title, application, pid and geometry; `None` when the window is gone.
    fn describe(&self, window: Window) -> Result<Option<WindowInfo>, ToolError> {
        let utf8 = self.atoms.UTF8_STRING;
        let title = match self.property(window, self.atoms._NET_WM_NAME, utf8)? {
            Some(reply) => text(&reply),
            None => self
                .property(window, AtomEnum::WM_NAME, AtomEnum::ANY)?
                .map(|reply| text(&reply))
                .unwrap_or_default(),
        };
        let app = self
            .property(window, AtomEnum::WM_CLASS, AtomEnum::STRING)?
            .map(|reply| application(&reply))
            .unwrap_or_default();
        let geometry = self.conn.get_geometry(window).map_err(|e| self.err(e))?;
        let Some(geometry) = gone_is_none(geometry.reply()).map_err(|e| self.err(e))? else {
            return Ok(None);
        };
        let origin = self
            .conn
            .translate_coordinates(window, self.root, 0, 0)
            .map_err(|e| self.err(e))?;
        let Some(origin) = gone_is_none(origin.reply()).map_err(|e| self.err(e))? else {
            return Ok(None);
        };
        Ok(Some(WindowInfo {
            id: format_id(window),
            title,
            app,
            pid: self.pid(window)?,
            geometry: Rect {
                x: i32::from(origin.dst_x),
                y: i32::from(origin.dst_y),
                width: u32::from(geometry.width),
                height: u32::from(geometry.height),
            },
            focused: false,
        }))
    }

    /// The pid of the client that created the window, from the server (X-Resource, local
    /// clients only), else the window's own `_NET_WM_PID` claim.
    fn pid(&self, window: Window) -> Result<Option<u32>, ToolError> {
        if self.has_extension(res::X11_EXTENSION_NAME)? {
            let spec = ClientIdSpec {
                client: window,
                mask: ClientIdMask::LOCAL_CLIENT_PID,
            };
            let ids = self
                .conn
                .res_query_client_ids(&[spec])
                .map_err(|e| self.err(e))?;
            if let Some(ids) = gone_is_none(ids.reply()).map_err(|e| self.err(e))? {
                let pid = ids
                    .ids
                    .iter()
                    .find(|id| id.spec.mask == ClientIdMask::LOCAL_CLIENT_PID)
                    .and_then(|id| id.value.first().copied());
                if pid.is_some() {
                    return Ok(pid);
                }
            }
        }
        Ok(self
            .property_u32s(window, self.atoms._NET_WM_PID, AtomEnum::CARDINAL)?
            .first()
            .copied())
    }

    /// Raises and focuses a listed top-level window: through the window manager when it
    /// handles `_NET_ACTIVE_WINDOW` (it may refuse to let a program steal focus otherwise),
    /// else by raising it and setting the input focus directly.
    pub(super) fn activate(&mut self, id: &str) -> Result<(), ToolError> {
        let window = parse_id(id)?;
        if !self.list()?.iter().any(|w| w.info.id == format_id(window)) {
            return Err(ToolError::NotFound(format!(
                "no top-level window {id} on X11 display {} (list the windows for current ids)",
                self.display
            )));
        }
        let through_wm = self.window_manager()?.is_some_and(|wm| wm.active_window);
        if through_wm {
            // Source 2: a pager, i.e. a direct request of the person, which window managers
            // honour without focus-stealing prevention.
            let message = ClientMessageEvent::new(
                32,
                window,
                self.atoms._NET_ACTIVE_WINDOW,
                [2, CURRENT_TIME, 0, 0, 0],
            );
            let mask = EventMask::SUBSTRUCTURE_REDIRECT | EventMask::SUBSTRUCTURE_NOTIFY;
            self.conn
                .send_event(false, self.root, mask, message)
                .map_err(|e| self.err(e))?
                .check()
                .map_err(|e| self.err(e))?;
        } else {
            let raise = ConfigureWindowAux::new().stack_mode(StackMode::ABOVE);
            self.conn
                .configure_window(window, &raise)
                .map_err(|e| self.err(e))?
                .check()
                .map_err(|e| self.err(format!("cannot raise {id}: {e}")))?;
            self.conn
                .set_input_focus(InputFocus::PARENT, window, CURRENT_TIME)
                .map_err(|e| self.err(e))?
                .check()
                .map_err(|e| self.err(format!("cannot focus {id}: {e}")))?;
        }
        self.sync()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_hex_with_0x_and_nothing_else() {
        assert_eq!(parse_id("0x1a00004").unwrap(), 0x1a0_0004);
        assert_eq!(parse_id("0X1A00004").unwrap(), 0x1a0_0004);
        for bad in [
            "",
            "0x",
            "1a00004",
            "0x0",
            "0x1g",
            "0x123456789",
            "-0x1",
            "0x 1",
        ] {
            let err = parse_id(bad).unwrap_err();
            assert!(
                matches!(err, ToolError::InvalidArguments(_)),
                "{bad}: {err}"
            );
        }
        assert_eq!(format_id(0x1a0_0004), "0x1a00004");
    }
}
