//! Input through the wlroots virtual pointer and the virtual keyboard: the compositor treats
//! them like devices plugged into the seat, so events reach whichever client is under the
//! pointer or has the keyboard focus.

use std::io::Write as _;
use std::time::Instant;

use wayland_client::Proxy as _;
use wayland_client::protocol::{wl_pointer, wl_seat};
use wayland_protocols_misc::zwp_virtual_keyboard_v1::client::{
    zwp_virtual_keyboard_manager_v1::ZwpVirtualKeyboardManagerV1,
    zwp_virtual_keyboard_v1::ZwpVirtualKeyboardV1,
};
use wayland_protocols_wlr::virtual_pointer::v1::client::{
    zwlr_virtual_pointer_manager_v1::ZwlrVirtualPointerManagerV1,
    zwlr_virtual_pointer_v1::ZwlrVirtualPointerV1,
};

use super::super::backend::{Button, Point, Rect, ScrollDirection, failed};
use super::super::keys::Modifier;
use super::client::Client;
use super::keymap::{self, KEYSYMS_PER_KEYMAP, Keymap};
use crate::tool::ToolError;

/// Linux input event codes (linux/input-event-codes.h).
const BTN_LEFT: u32 = 0x110;
const BTN_RIGHT: u32 = 0x111;
const BTN_MIDDLE: u32 = 0x112;
/// What one wheel step scrolls, in the units of `wl_pointer.axis` (libinput's 15 degrees).
const STEP: f64 = 15.0;
/// `zwp_virtual_keyboard_v1.keymap` format: xkb text, version 1.
const XKB_V1: u32 = 1;

pub(super) struct Pointer {
    device: ZwlrVirtualPointerV1,
}

pub(super) struct Keyboard {
    device: ZwpVirtualKeyboardV1,
    /// The keymap uploaded last, to skip uploading the same one again.
    current: Option<Keymap>,
}

/// Milliseconds for event timestamps; only their order matters to clients.
pub(super) fn now_ms(since: Instant) -> u32 {
    (since.elapsed().as_millis() % u128::from(u32::MAX)) as u32
}

impl Pointer {
    pub fn new(client: &Client, seat: Option<&wl_seat::WlSeat>) -> Result<Pointer, ToolError> {
        let manager: ZwlrVirtualPointerManagerV1 = client.bind(2, ()).ok_or_else(|| {
            failed(
                "this Wayland compositor offers no virtual pointer (wlr-virtual-pointer): \
                 mouse input works on wlroots compositors such as sway",
            )
        })?;
        let device = manager.create_virtual_pointer(seat, &client.queue.handle(), ());
        Ok(Pointer { device })
    }

    /// Moves to `to`, in the layout whose bounding box is `screen`.
    pub fn move_to(&self, time: u32, to: Point, screen: Rect) {
        let offset = |v: i32, origin: i32, extent: u32| {
            u32::try_from(i64::from(v) - i64::from(origin))
                .unwrap_or(0)
                .min(extent.saturating_sub(1))
        };
        self.device.motion_absolute(
            time,
            offset(to.x, screen.x, screen.width),
            offset(to.y, screen.y, screen.height),
            screen.width,
            screen.height,
        );
        self.device.frame();
    }

    pub fn button(&self, time: u32, button: Button, pressed: bool) {
        let code = match button {
            Button::Left => BTN_LEFT,
            Button::Right => BTN_RIGHT,
            Button::Middle => BTN_MIDDLE,
        };
        let state = if pressed {
            wl_pointer::ButtonState::Pressed
        } else {
            wl_pointer::ButtonState::Released
        };
        self.device.button(time, code, state);
        self.device.frame();
    }

    pub fn scroll(&self, time: u32, direction: ScrollDirection, amount: u32) {
        let (axis, sign) = match direction {
            ScrollDirection::Up => (wl_pointer::Axis::VerticalScroll, -1),
            ScrollDirection::Down => (wl_pointer::Axis::VerticalScroll, 1),
            ScrollDirection::Left => (wl_pointer::Axis::HorizontalScroll, -1),
            ScrollDirection::Right => (wl_pointer::Axis::HorizontalScroll, 1),
        };
        // One frame per wheel step, as a real wheel sends them.
        for _ in 0..amount {
            if self.device.version() >= 2 {
                self.device.axis_source(wl_pointer::AxisSource::Wheel);
                self.device
                    .axis_discrete(time, axis, STEP * f64::from(sign), sign);
            } else {
                self.device.axis(time, axis, STEP * f64::from(sign));
            }
            self.device.frame();
        }
    }
}

impl Keyboard {
    pub fn new(client: &Client, seat: &wl_seat::WlSeat) -> Result<Keyboard, ToolError> {
        let manager: ZwpVirtualKeyboardManagerV1 = client.bind(1, ()).ok_or_else(|| {
            failed(
                "this Wayland compositor offers no virtual keyboard \
                 (zwp_virtual_keyboard_v1): typing works on wlroots compositors such as sway",
            )
        })?;
        let device = manager.create_virtual_keyboard(seat, &client.queue.handle(), ());
        Ok(Keyboard {
            device,
            current: None,
        })
    }

    /// Makes sure every keysym has a key, uploading a new keymap when needed.
    fn prepare(&mut self, keysyms: &[u32]) -> Result<(), ToolError> {
        if let Some(current) = &self.current
            && keysyms.iter().all(|k| current.code(*k).is_some())
        {
            return Ok(());
        }
        let keymap = keymap::build(keysyms.iter().copied());
        // The compositor reads the keymap from a file descriptor: a memfd with the text.
        let fd = rustix::fs::memfd_create("corral-keymap", rustix::fs::MemfdFlags::CLOEXEC)
            .map_err(|e| failed(format!("cannot create the keymap file: {e}")))?;
        let mut file = std::fs::File::from(fd);
        file.write_all(&keymap.text)
            .map_err(|e| failed(format!("cannot write the keymap: {e}")))?;
        let size = u32::try_from(keymap.text.len()).map_err(failed)?;
        self.device
            .keymap(XKB_V1, std::os::fd::AsFd::as_fd(&file), size);
        self.current = Some(keymap);
        Ok(())
    }

    fn code(&self, keysym: u32) -> Result<u32, ToolError> {
        self.current
            .as_ref()
            .and_then(|k| k.code(keysym))
            .ok_or_else(|| failed(format!("keysym {keysym:#x} has no key")))
    }

    fn tap(&self, time: u32, code: u32) {
        self.device.key(time, code, 1);
        self.device.key(time, code, 0);
    }

    /// Holds `modifiers`, taps `keysym`, lets the modifiers go.
    pub fn combo(
        &mut self,
        time: u32,
        modifiers: &[Modifier],
        keysym: u32,
    ) -> Result<(), ToolError> {
        self.prepare(&[keysym])?;
        let mut held = 0;
        for modifier in modifiers {
            self.device.key(time, self.code(modifier.keysym())?, 1);
            held |= keymap::modifier_bit(*modifier).1;
            self.device.modifiers(held, 0, 0, 0);
        }
        self.tap(time, self.code(keysym)?);
        for modifier in modifiers.iter().rev() {
            self.device.key(time, self.code(modifier.keysym())?, 0);
            held &= !keymap::modifier_bit(*modifier).1;
            self.device.modifiers(held, 0, 0, 0);
        }
        Ok(())
    }

    /// Types each keysym as a key of its own, a keymap at a time for long varied texts.
    pub fn type_keysyms(&mut self, time: u32, keysyms: &[u32]) -> Result<(), ToolError> {
        let mut start = 0;
        while start < keysyms.len() {
            // The longest run whose distinct keysyms fit one keymap (beside the modifiers).
            let mut distinct = std::collections::BTreeSet::new();
            let mut end = start;
            while end < keysyms.len() {
                distinct.insert(keysyms[end]);
                if distinct.len() > KEYSYMS_PER_KEYMAP - 4 {
                    break;
                }
                end += 1;
            }
            self.prepare(&keysyms[start..end])?;
            self.device.modifiers(0, 0, 0, 0);
            for keysym in &keysyms[start..end] {
                self.tap(time, self.code(*keysym)?);
            }
            start = end;
        }
        Ok(())
    }
}
