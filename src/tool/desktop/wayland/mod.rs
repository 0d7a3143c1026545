//! The desktop on Wayland: input through the wlroots virtual pointer and the virtual
//! keyboard, pixels through wlr-screencopy, windows through sway's IPC. These are what
//! wlroots compositors (sway, Hyprland, river, labwc, Wayfire) offer a client; GNOME and KDE
//! offer input only through the xdg-desktop-portal, driven by `desktop::portal` instead.
//!
//! Wayland keeps clients apart by design: no client learns where the pointer is, what other
//! windows exist, or whether the screen is locked. Windows come from sway's IPC; the pointer
//! position is the one this corral process last moved it to; the lock state is unknown.

mod capabilities;
mod capture;
mod client;
mod input;
mod keymap;
mod screenshot;
pub(crate) mod stop_key;
mod sway_ipc;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use wayland_client::protocol::wl_seat;

use super::backend::{
    Button, Desktop, DesktopEnv, Frame, Point, Rect, ScrollDirection, WindowInfo, failed,
};
use super::keys::{KeyCombo, char_keysym};
use crate::tool::ToolError;
pub(crate) use capabilities::capabilities;
pub(crate) use client::probe;
pub(super) use screenshot::screenshot;

/// Where this process last put the pointer, per Wayland socket. Wayland tells no client where
/// the pointer is (only a surface under it learns, and corral has none), so `cursor` answers
/// with what corral itself did; kept in memory only, because a position saved for another
/// process would be stale by the time it is read (the person moves the mouse too).
static POINTER: Mutex<Option<HashMap<String, Point>>> = Mutex::new(None);

/// How long clients get to take up a device the seat did not have before (see `settle`).
const NEW_DEVICE_SETTLE: std::time::Duration = std::time::Duration::from_millis(300);

pub struct WaylandDesktop {
    client: client::Client,
    seat: Option<wl_seat::WlSeat>,
    pointer: Option<input::Pointer>,
    keyboard: Option<input::Keyboard>,
    sway: Option<String>,
    started: Instant,
}

impl WaylandDesktop {
    pub fn connect(env: &DesktopEnv) -> Result<WaylandDesktop, ToolError> {
        let mut client = client::Client::connect(env)?;
        let seat = client.bind::<wl_seat::WlSeat, _>(1, ());
        // The seat says what devices it has in answer to the bind.
        client.sync()?;
        Ok(WaylandDesktop {
            client,
            seat,
            pointer: None,
            keyboard: None,
            sway: env.swaysock.clone(),
            started: Instant::now(),
        })
    }

    /// Whether the compositor takes input from clients (the wlroots virtual pointer); GNOME
    /// and KDE do not, and are driven through the desktop portal.
    pub fn drives_input(&self) -> bool {
        !self
            .client
            .globals_named("zwlr_virtual_pointer_manager_v1")
            .is_empty()
    }

    /// Whether the compositor lets clients capture the screen (wlr-screencopy).
    pub fn captures(&self) -> bool {
        !self
            .client
            .globals_named("zwlr_screencopy_manager_v1")
            .is_empty()
    }

    fn screen(&self) -> Result<Rect, ToolError> {
        capture::layout(&self.client.state.outputs)
            .ok_or_else(|| failed("the Wayland compositor has no output"))
    }

    fn pointer(&mut self) -> Result<&input::Pointer, ToolError> {
        if self.pointer.is_none() {
            self.pointer = Some(input::Pointer::new(&self.client, self.seat.as_ref())?);
            self.settle(wl_seat::Capability::Pointer)?;
        }
        self.pointer
            .as_ref()
            .ok_or_else(|| failed("no virtual pointer"))
    }

    fn keyboard(&mut self) -> Result<&mut input::Keyboard, ToolError> {
        if self.keyboard.is_none() {
            let seat = self
                .seat
                .as_ref()
                .ok_or_else(|| failed("the Wayland compositor has no seat to type on"))?;
            self.keyboard = Some(input::Keyboard::new(&self.client, seat)?);
            self.settle(wl_seat::Capability::Keyboard)?;
        }
        self.keyboard
            .as_mut()
            .ok_or_else(|| failed("no virtual keyboard"))
    }

    /// Lets clients catch up with a device the seat did not have. A seat with no keyboard
    /// (a headless compositor) announces one when corral adds its own, and each client asks
    /// for it only after that announcement: keys sent before then reach nobody. No client
    /// says when it is ready, so the wait is a pause; a seat that already had the device
    /// (any desktop with a real keyboard and mouse) needs none.
    fn settle(&mut self, device: wl_seat::Capability) -> Result<(), ToolError> {
        let had = self
            .client
            .state
            .seat
            .is_some_and(|caps| caps.contains(device));
        if !had {
            self.client.sync()?;
            std::thread::sleep(NEW_DEVICE_SETTLE);
            self.client.sync()?;
        }
        Ok(())
    }

    fn time(&self) -> u32 {
        input::now_ms(self.started)
    }

    fn sway(&self) -> Result<sway_ipc::SwayIpc, ToolError> {
        match &self.sway {
            Some(path) => sway_ipc::SwayIpc::connect(path),
            None => Err(ToolError::Refused(
                "windows on Wayland need sway's IPC: SWAYSOCK is not set (other compositors \
                 do not tell a client about other programs' windows)"
                    .into(),
            )),
        }
    }

    fn remember_pointer(&self, at: Point) {
        let key = self.client.socket.display().to_string();
        let mut known = POINTER.lock().unwrap_or_else(PoisonError::into_inner);
        known.get_or_insert_with(HashMap::new).insert(key, at);
    }
}

impl Desktop for WaylandDesktop {
    fn kind(&self) -> String {
        if self.sway.is_some() {
            "wayland (sway)".into()
        } else {
            "wayland".into()
        }
    }

    fn screen_size(&mut self) -> Result<(u32, u32), ToolError> {
        let screen = self.screen()?;
        Ok((screen.width, screen.height))
    }

    fn capture(&mut self, area: Option<Rect>) -> Result<Frame, ToolError> {
        capture::capture(&mut self.client, area)
    }

    fn move_pointer(&mut self, to: Point) -> Result<(), ToolError> {
        let (screen, time) = (self.screen()?, self.time());
        self.pointer()?.move_to(time, to, screen);
        self.client.sync()?;
        self.remember_pointer(to);
        Ok(())
    }

    fn button(&mut self, button: Button, pressed: bool) -> Result<(), ToolError> {
        let time = self.time();
        self.pointer()?.button(time, button, pressed);
        self.client.sync()
    }

    fn scroll(&mut self, direction: ScrollDirection, amount: u32) -> Result<(), ToolError> {
        let time = self.time();
        self.pointer()?.scroll(time, direction, amount);
        self.client.sync()
    }

    fn key(&mut self, combo: &KeyCombo) -> Result<(), ToolError> {
        let time = self.time();
        self.keyboard()?
            .combo(time, &combo.modifiers, combo.keysym)?;
        self.client.sync()
    }

    fn type_text(&mut self, text: &str) -> Result<(), ToolError> {
        let keysyms: Vec<u32> = text.chars().map(char_keysym).collect();
        let time = self.time();
        self.keyboard()?.type_keysyms(time, &keysyms)?;
        self.client.sync()
    }

    fn cursor(&mut self) -> Result<Point, ToolError> {
        let key = self.client.socket.display().to_string();
        let known = POINTER.lock().unwrap_or_else(PoisonError::into_inner);
        known
            .as_ref()
            .and_then(|k| k.get(&key))
            .copied()
            .ok_or_else(|| {
                ToolError::NotFound(
                    "Wayland does not tell programs where the pointer is; corral knows it only \
                     after moving it (use mouse_move first)"
                        .into(),
                )
            })
    }

    fn windows(&mut self) -> Result<Vec<WindowInfo>, ToolError> {
        Ok(self
            .sway()?
            .windows()?
            .into_iter()
            .map(|w| w.info)
            .collect())
    }

    fn window_at(&mut self, at: Point) -> Result<Option<WindowInfo>, ToolError> {
        Ok(sway_ipc::topmost_at(&self.sway()?.windows()?, at))
    }

    fn focused(&mut self) -> Result<Option<WindowInfo>, ToolError> {
        let windows = self.sway()?.windows()?;
        Ok(windows.into_iter().map(|w| w.info).find(|w| w.focused))
    }

    fn focus(&mut self, id: &str) -> Result<(), ToolError> {
        self.sway()?.focus(id)
    }

    fn locked(&mut self) -> Result<Option<String>, ToolError> {
        // A lock screen (ext-session-lock, swaylock) is invisible to other clients, and sway's
        // IPC does not report it. While locked, wlroots sends input only to the lock client,
        // so nothing corral sends reaches the person's windows; the re-check before acting
        // still compares the window under the point.
        Ok(None)
    }
}
