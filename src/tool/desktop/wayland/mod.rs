//! Wayland: wlroots virtual pointer, virtual keyboard, screencopy; windows through sway IPC. (Being written: helper Wayland.)

use super::backend::{Button, Desktop, Frame, Point, Rect, ScrollDirection, WindowInfo};
use super::keys::KeyCombo;
use crate::tool::ToolError;

pub struct WaylandDesktop;

impl WaylandDesktop {
    pub fn connect(env: &super::backend::DesktopEnv) -> Result<WaylandDesktop, ToolError> {
        Err(ToolError::Io(format!("Wayland input on {:?} is not built yet", env.wayland_display)))
    }
}

impl Desktop for WaylandDesktop {
    fn kind(&self) -> String {
        "wayland".into()
    }
    fn screen_size(&mut self) -> Result<(u32, u32), ToolError> {
        Err(ToolError::Io("unbuilt".into()))
    }
    fn capture(&mut self, _area: Option<Rect>) -> Result<Frame, ToolError> {
        Err(ToolError::Io("unbuilt".into()))
    }
    fn move_pointer(&mut self, _to: Point) -> Result<(), ToolError> {
        Err(ToolError::Io("unbuilt".into()))
    }
    fn button(&mut self, _button: Button, _pressed: bool) -> Result<(), ToolError> {
        Err(ToolError::Io("unbuilt".into()))
    }
    fn scroll(&mut self, _d: ScrollDirection, _amount: u32) -> Result<(), ToolError> {
        Err(ToolError::Io("unbuilt".into()))
    }
    fn key(&mut self, _combo: &KeyCombo) -> Result<(), ToolError> {
        Err(ToolError::Io("unbuilt".into()))
    }
    fn type_text(&mut self, _text: &str) -> Result<(), ToolError> {
        Err(ToolError::Io("unbuilt".into()))
    }
    fn cursor(&mut self) -> Result<Point, ToolError> {
        Err(ToolError::Io("unbuilt".into()))
    }
    fn windows(&mut self) -> Result<Vec<WindowInfo>, ToolError> {
        Err(ToolError::Io("unbuilt".into()))
    }
    fn window_at(&mut self, _at: Point) -> Result<Option<WindowInfo>, ToolError> {
        Err(ToolError::Io("unbuilt".into()))
    }
    fn focused(&mut self) -> Result<Option<WindowInfo>, ToolError> {
        Err(ToolError::Io("unbuilt".into()))
    }
    fn focus(&mut self, _id: &str) -> Result<(), ToolError> {
        Err(ToolError::Io("unbuilt".into()))
    }
    fn locked(&mut self) -> Result<Option<String>, ToolError> {
        Err(ToolError::Io("unbuilt".into()))
    }
}
