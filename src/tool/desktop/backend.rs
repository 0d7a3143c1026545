//! The desktop a `computer` or `windows` call acts on: one trait, one implementation per
//! display system (X11 through XTEST and EWMH; Wayland through the wlroots protocols and
//! sway's IPC, or through the xdg-desktop-portal where the compositor offers no protocol of
//! its own), chosen from the session's tool environment.
//!
//! Every method blocks (a display connection is synchronous); callers run them on the
//! blocking pool. Coordinates are real screen pixels: the mapping from the screenshot the
//! model saw is done before a backend is called.

use super::keys::KeyCombo;
use crate::tool::ToolError;

/// A point on the screen, in real pixels from the top-left corner of the whole screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Point {
    pub x: i32,
    pub y: i32,
}

/// A rectangle on the screen, in real pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Rect {
    pub x: i32,
    pub y: i32,
    pub width: u32,
    pub height: u32,
}

impl Rect {
    pub fn contains(&self, p: Point) -> bool {
        p.x >= self.x
            && p.y >= self.y
            && i64::from(p.x) < i64::from(self.x) + i64::from(self.width)
            && i64::from(p.y) < i64::from(self.y) + i64::from(self.height)
    }
}

/// A top-level window as the display system reports it. Titles and application names are
/// chosen by the program that owns the window: untrusted text.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WindowInfo {
    /// The display system's id (an X window id as `0x…`, a sway container id), stable while
    /// the window lives.
    pub id: String,
    pub title: String,
    /// The application: X11 `WM_CLASS` class (else instance), Wayland `app_id`.
    pub app: String,
    pub pid: Option<u32>,
    /// Where the window is on the screen (its frame's contents, without decorations).
    pub geometry: Rect,
    pub focused: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Button {
    Left,
    Middle,
    Right,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScrollDirection {
    Up,
    Down,
    Left,
    Right,
}

/// Pixels captured from the screen: packed RGB, row after row, no padding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub width: u32,
    pub height: u32,
    pub rgb: Vec<u8>,
}

/// One display system, connected.
pub trait Desktop: Send {
    /// `x11` or `wayland (sway)`-style name, for messages and `doctor`.
    fn kind(&self) -> String;
    /// The whole screen's size in real pixels.
    fn screen_size(&mut self) -> Result<(u32, u32), ToolError>;
    /// The whole screen, or the part of it in `area` (clipped to the screen).
    fn capture(&mut self, area: Option<Rect>) -> Result<Frame, ToolError>;
    fn move_pointer(&mut self, to: Point) -> Result<(), ToolError>;
    /// Presses or releases a button where the pointer is.
    fn button(&mut self, button: Button, pressed: bool) -> Result<(), ToolError>;
    /// `amount` wheel steps where the pointer is.
    fn scroll(&mut self, direction: ScrollDirection, amount: u32) -> Result<(), ToolError>;
    /// Presses the combo's modifiers, taps its key, releases the modifiers, in that order.
    fn key(&mut self, combo: &KeyCombo) -> Result<(), ToolError>;
    /// Types text as key presses into the focused window, whatever the keyboard layout
    /// (characters the layout lacks are mapped on the fly).
    fn type_text(&mut self, text: &str) -> Result<(), ToolError>;
    fn cursor(&mut self) -> Result<Point, ToolError>;
    /// Top-level windows, bottom to top in stacking order where the system says.
    fn windows(&mut self) -> Result<Vec<WindowInfo>, ToolError>;
    /// The topmost window containing the point.
    fn window_at(&mut self, at: Point) -> Result<Option<WindowInfo>, ToolError>;
    /// The window keyboard input goes to.
    fn focused(&mut self) -> Result<Option<WindowInfo>, ToolError>;
    /// Raises and focuses a window by id.
    fn focus(&mut self, id: &str) -> Result<(), ToolError>;
    /// `Some(why)` when the screen is locked or a screen saver covers it: input would go to
    /// the lock screen, or nowhere the person can see.
    fn locked(&mut self) -> Result<Option<String>, ToolError>;
}

/// A failure to reach or drive the display, as a tool error.
pub fn failed(what: impl std::fmt::Display) -> ToolError {
    ToolError::Io(what.to_string())
}

/// The display addresses a session's tools may use, from its tool environment (never from
/// corral's own environment).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DesktopEnv {
    pub display: Option<String>,
    pub wayland_display: Option<String>,
    pub xdg_runtime_dir: Option<String>,
    /// sway's IPC socket (`SWAYSOCK`), for windows on sway.
    pub swaysock: Option<String>,
    pub session_bus: Option<String>,
}

impl DesktopEnv {
    pub fn from_env(env: &[(String, String)]) -> DesktopEnv {
        let value = |name: &str| {
            env.iter()
                .rev()
                .find(|(key, _)| key == name)
                .map(|(_, value)| value.clone())
                .filter(|value| !value.is_empty())
        };
        DesktopEnv {
            display: value("DISPLAY"),
            wayland_display: value("WAYLAND_DISPLAY"),
            xdg_runtime_dir: value("XDG_RUNTIME_DIR"),
            swaysock: value("SWAYSOCK"),
            session_bus: value("DBUS_SESSION_BUS_ADDRESS"),
        }
    }
}

/// Connects to the session's desktop: Wayland where `WAYLAND_DISPLAY` is set (input through
/// XWayland would reach only X clients), else X11.
/// A compositor that offers no input protocol of its own (GNOME, KDE) is driven through the
/// xdg-desktop-portal, on the session's `portal` hold.
pub fn open(
    env: &DesktopEnv,
    tool: &str,
    portal: &std::sync::Arc<super::portal::PortalHold>,
) -> Result<Box<dyn Desktop>, ToolError> {
    if env.wayland_display.is_some() {
        let wayland = super::wayland::WaylandDesktop::connect(env)?;
        if !wayland.drives_input() && env.session_bus.is_some() {
            return Ok(Box::new(super::portal::PortalDesktop::connect(
                env,
                portal.clone(),
            )?));
        }
        return Ok(Box::new(wayland));
    }
    if let Some(display) = &env.display {
        return Ok(Box::new(super::x11::X11Desktop::connect(display)?));
    }
    Err(ToolError::Refused(format!(
        "{tool} needs a display: neither WAYLAND_DISPLAY nor DISPLAY is set (on a server, \
         run under Xvfb or a headless sway)"
    )))
}
