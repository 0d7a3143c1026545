//! Synthetic input through XTEST's FakeInput: the server treats it as the real keyboard and
//! mouse, so every client sees ordinary events. Each event is checked (one round trip), so the
//! server has handled it before the next is sent and clients see distinct presses and
//! releases in order.

use std::time::Duration;

use x11rb::CURRENT_TIME;
use x11rb::protocol::xproto::{
    BUTTON_PRESS_EVENT, BUTTON_RELEASE_EVENT, KEY_PRESS_EVENT, KEY_RELEASE_EVENT, Keysym,
    MOTION_NOTIFY_EVENT,
};
use x11rb::protocol::xtest::{self, ConnectionExt as _};

use super::X11Desktop;
use super::keymap::{KeyPlace, Keymap};
use crate::tool::ToolError;
use crate::tool::desktop::backend::{Button, Point, ScrollDirection};
use crate::tool::desktop::keys::{KeyCombo, Modifier, char_keysym};

/// How long a client gets to look up keys typed on temporarily bound keycodes before the
/// mapping changes again. Clients fetch the new mapping lazily, when they translate the key
/// event, and nothing in the protocol says when that has happened: this is the one wait that
/// a round trip cannot replace (xdotool waits the same way).
const REMAP_SETTLE: Duration = Duration::from_millis(150);

const RETURN: Keysym = 0xff0d;
const TAB: Keysym = 0xff09;

impl X11Desktop {
    fn fake(&mut self, kind: u8, detail: u8, at: (i16, i16)) -> Result<(), ToolError> {
        if !self.xtest_checked {
            if !self.has_extension(xtest::X11_EXTENSION_NAME)? {
                return Err(ToolError::Refused(format!(
                    "X11 display {} has no XTEST extension: mouse and keyboard input cannot \
                     be sent",
                    self.display
                )));
            }
            self.xtest_checked = true;
        }
        self.conn
            .xtest_fake_input(kind, detail, CURRENT_TIME, self.root, at.0, at.1, 0)
            .map_err(|e| self.err(e))?
            .check()
            .map_err(|e| self.err(format!("XTEST FakeInput failed: {e}")))
    }

    pub(super) fn motion(&mut self, to: Point) -> Result<(), ToolError> {
        let (width, height) = {
            let screen = self.screen()?;
            (screen.width_in_pixels, screen.height_in_pixels)
        };
        let inside = |v: i32, max: u16| {
            i16::try_from(v)
                .ok()
                .filter(|v| *v >= 0 && (*v as u16) < max)
        };
        let (Some(x), Some(y)) = (inside(to.x, width), inside(to.y, height)) else {
            return Err(ToolError::InvalidArguments(format!(
                "the point {},{} is outside the screen ({width}x{height})",
                to.x, to.y
            )));
        };
        self.fake(MOTION_NOTIFY_EVENT, 0, (x, y))
    }

    pub(super) fn press_button(&mut self, button: Button, pressed: bool) -> Result<(), ToolError> {
        let detail = match button {
            Button::Left => 1,
            Button::Middle => 2,
            Button::Right => 3,
        };
        self.click_edge(detail, pressed)
    }

    fn click_edge(&mut self, detail: u8, pressed: bool) -> Result<(), ToolError> {
        let kind = if pressed {
            BUTTON_PRESS_EVENT
        } else {
            BUTTON_RELEASE_EVENT
        };
        self.fake(kind, detail, (0, 0))
    }

    /// Wheel steps are buttons 4 (up), 5 (down), 6 (left), 7 (right), one click each.
    pub(super) fn wheel(
        &mut self,
        direction: ScrollDirection,
        amount: u32,
    ) -> Result<(), ToolError> {
        let detail = match direction {
            ScrollDirection::Up => 4,
            ScrollDirection::Down => 5,
            ScrollDirection::Left => 6,
            ScrollDirection::Right => 7,
        };
        for _ in 0..amount {
            self.click_edge(detail, true)?;
            self.click_edge(detail, false)?;
        }
        Ok(())
    }

    fn key_edge(&mut self, keycode: u8, pressed: bool) -> Result<(), ToolError> {
        let kind = if pressed {
            KEY_PRESS_EVENT
        } else {
            KEY_RELEASE_EVENT
        };
        self.fake(kind, keycode, (0, 0))
    }

    /// Drops the cached mapping (unless keys are still bound), so each `key` or `type` call
    /// sees the layout as it is now, even after the person switched it.
    fn forget_keymap(&mut self) {
        if self.keymap.as_ref().is_some_and(|map| !map.has_bound()) {
            self.keymap = None;
        }
    }

    fn keymap(&mut self) -> Result<&mut Keymap, ToolError> {
        if self.keymap.is_none() {
            let fetched = Keymap::fetch(&self.conn).map_err(|e| self.err(e))?;
            self.keymap = Some(fetched);
        }
        self.keymap
            .as_mut()
            .ok_or_else(|| ToolError::Io("the keyboard mapping is missing".into()))
    }

    /// Where `keysym` is on the keyboard as it is now (bound ones included).
    fn place(&mut self, keysym: Keysym) -> Result<KeyPlace, ToolError> {
        self.keymap()?.find(keysym).ok_or_else(|| {
            ToolError::Io(format!(
                "the keysym {keysym:#x} has no keycode and none could be bound for it"
            ))
        })
    }

    /// Binds what the start of `keysyms` lacks on the layout to spare keycodes, as far as
    /// they go, then gives clients time to take in the new mapping (they would otherwise
    /// translate the first keys with the old one). Returns how many of `keysyms` can be
    /// typed now: at least one, or an error when not even one can be bound.
    fn bind_ahead(&mut self, keysyms: &[Keysym]) -> Result<usize, ToolError> {
        let keymap = self.keymap()?;
        let spare = keymap.spare_count();
        let mut ready = 0;
        let mut missing = Vec::new();
        for &keysym in keysyms {
            if keymap.find(keysym).is_none() && !missing.contains(&keysym) {
                if missing.len() == spare {
                    break;
                }
                missing.push(keysym);
            }
            ready += 1;
        }
        if ready == 0 {
            return Err(self.err(format!(
                "the keyboard mapping has no spare keycode to bind the keysym {:#x} to",
                keysyms.first().copied().unwrap_or_default()
            )));
        }
        let Some(mut keymap) = self.keymap.take() else {
            return Err(ToolError::Io("the keyboard mapping is missing".into()));
        };
        let result = missing
            .iter()
            .try_for_each(|&keysym| keymap.bind(&self.conn, keysym).map(|_| ()));
        self.keymap = Some(keymap);
        result.map_err(|e| self.err(e))?;
        if !missing.is_empty() {
            std::thread::sleep(REMAP_SETTLE);
        }
        Ok(ready)
    }

    /// Puts the keyboard mapping back after the clients had time to translate what was typed
    /// on temporarily bound keycodes.
    fn restore_keymap(&mut self) -> Result<(), ToolError> {
        let Some(mut keymap) = self.keymap.take() else {
            return Ok(());
        };
        let restored = if keymap.has_bound() {
            std::thread::sleep(REMAP_SETTLE);
            keymap.restore(&self.conn).map_err(|e| self.err(e))
        } else {
            Ok(())
        };
        self.keymap = Some(keymap);
        restored
    }

    /// Presses the modifiers (in order), taps the key, releases the modifiers (in reverse).
    /// A key that is its keycode's shifted symbol gets Shift too.
    pub(super) fn press_combo(&mut self, combo: &KeyCombo) -> Result<(), ToolError> {
        self.forget_keymap();
        let result = self.press_combo_unrestored(combo);
        let restored = self.restore_keymap();
        result.and(restored)
    }

    fn press_combo_unrestored(&mut self, combo: &KeyCombo) -> Result<(), ToolError> {
        let mut modifiers = combo.modifiers.clone();
        let mut keysyms: Vec<Keysym> = modifiers.iter().map(|m| m.keysym()).collect();
        keysyms.push(Modifier::Shift.keysym());
        keysyms.push(combo.keysym);
        if self.bind_ahead(&keysyms)? < keysyms.len() {
            return Err(self.err("the keyboard mapping has too few spare keycodes"));
        }
        let key = self.place(combo.keysym)?;
        if key.shift && !modifiers.contains(&Modifier::Shift) {
            modifiers.push(Modifier::Shift);
        }
        let mut held = Vec::new();
        for modifier in modifiers {
            held.push(self.place(modifier.keysym())?.keycode);
        }
        self.press_with(&held, key.keycode)
    }

    /// Holds `held` in order, taps `keycode`, releases `held` in reverse; whatever fails, every
    /// key pressed here is released again so no modifier stays stuck.
    fn press_with(&mut self, held: &[u8], keycode: u8) -> Result<(), ToolError> {
        let mut pressed = Vec::new();
        let mut result = Ok(());
        for &modifier in held {
            result = self.key_edge(modifier, true);
            if result.is_err() {
                break;
            }
            pressed.push(modifier);
        }
        if result.is_ok() {
            result = self
                .key_edge(keycode, true)
                .and_then(|()| self.key_edge(keycode, false));
        }
        for modifier in pressed.into_iter().rev() {
            let released = self.key_edge(modifier, false);
            result = result.and(released);
        }
        result
    }

    /// Types each character as a key press: newline is Return, tab is Tab, a CR LF pair one
    /// Return; other control characters are refused before anything is typed.
    pub(super) fn type_chars(&mut self, text: &str) -> Result<(), ToolError> {
        let keysyms = text_keysyms(text)?;
        self.forget_keymap();
        let result = self.type_keysyms(&keysyms);
        let restored = self.restore_keymap();
        result.and(restored)
    }

    /// Types in runs: each run is as long as the spare keycodes can hold the characters the
    /// layout lacks; between runs the bindings are put back and the next ones made.
    fn type_keysyms(&mut self, keysyms: &[Keysym]) -> Result<(), ToolError> {
        let shift = self.place(Modifier::Shift.keysym())?.keycode;
        let mut start = 0;
        while start < keysyms.len() {
            let run = self.bind_ahead(&keysyms[start..])?;
            for &keysym in &keysyms[start..start + run] {
                let place = self.place(keysym)?;
                let held: &[u8] = if place.shift { &[shift] } else { &[] };
                self.press_with(held, place.keycode)?;
            }
            start += run;
            if start < keysyms.len() {
                self.restore_keymap()?;
            }
        }
        Ok(())
    }
}

/// The keysyms that type `text`.
pub(super) fn text_keysyms(text: &str) -> Result<Vec<Keysym>, ToolError> {
    let mut keysyms = Vec::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let keysym = match c {
            '\r' if chars.peek() == Some(&'\n') => continue,
            '\n' | '\r' => RETURN,
            '\t' => TAB,
            c if c.is_control() => {
                return Err(ToolError::InvalidArguments(format!(
                    "text contains the control character U+{:04X}, which has no key; use the \
                     key action for special keys",
                    u32::from(c)
                )));
            }
            c => char_keysym(c),
        };
        keysyms.push(keysym);
    }
    Ok(keysyms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_becomes_keysyms_with_newlines_as_return() {
        assert_eq!(
            text_keysyms("a\r\nb\n\té€").unwrap(),
            vec![0x61, RETURN, 0x62, RETURN, TAB, 0xe9, 0x0100_20ac]
        );
    }

    #[test]
    fn control_characters_are_refused_before_typing() {
        let err = text_keysyms("ok\u{1b}[2J").unwrap_err();
        assert!(matches!(err, ToolError::InvalidArguments(_)), "{err}");
        assert!(err.to_string().contains("U+001B"), "{err}");
    }
}
