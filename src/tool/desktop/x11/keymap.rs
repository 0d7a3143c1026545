//! Where a keysym lives on the keyboard (keycode and whether Shift is needed), and the
//! xdotool technique for keysyms the layout lacks (é on a US layout, €, λ): bind the keysym to
//! a spare keycode (one with no symbols and no modifier role), type it, put the mapping back.

use x11rb::connection::Connection as _;
use x11rb::protocol::xproto::{ConnectionExt as _, Keycode, Keysym};
use x11rb::rust_connection::RustConnection;

/// Where to press for a keysym: its keycode, with Shift held when the keysym is the key's
/// second (shifted) symbol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct KeyPlace {
    pub keycode: Keycode,
    pub shift: bool,
}

/// The core keyboard mapping as the server has it, plus the keycodes bound temporarily.
pub(super) struct Keymap {
    min_keycode: Keycode,
    per_keycode: usize,
    /// `per_keycode` keysyms for each keycode from `min_keycode`, as the server has them now.
    syms: Vec<Keysym>,
    /// Spare keycodes not yet bound, the last one used first.
    spare: Vec<Keycode>,
    /// Keycodes bound temporarily, with the symbols they had (all NoSymbol) to restore.
    bound: Vec<(Keycode, Vec<Keysym>)>,
}

impl Keymap {
    pub(super) fn new(
        min_keycode: Keycode,
        per_keycode: usize,
        syms: Vec<Keysym>,
        modifier_keycodes: &[Keycode],
    ) -> Keymap {
        let per_keycode = per_keycode.max(1);
        let spare = syms
            .chunks(per_keycode)
            .enumerate()
            .filter(|(_, row)| row.iter().all(|&s| s == 0))
            .filter_map(|(i, _)| Keycode::try_from(usize::from(min_keycode) + i).ok())
            .filter(|kc| !modifier_keycodes.contains(kc))
            .collect();
        Keymap {
            min_keycode,
            per_keycode,
            syms,
            spare,
            bound: Vec::new(),
        }
    }

    pub(super) fn fetch(conn: &RustConnection) -> Result<Keymap, String> {
        let setup = conn.setup();
        let (min, max) = (setup.min_keycode, setup.max_keycode);
        let mapping = conn
            .get_keyboard_mapping(min, max - min + 1)
            .map_err(|e| e.to_string())?
            .reply()
            .map_err(|e| format!("GetKeyboardMapping failed: {e}"))?;
        let modifiers = conn
            .get_modifier_mapping()
            .map_err(|e| e.to_string())?
            .reply()
            .map_err(|e| format!("GetModifierMapping failed: {e}"))?;
        Ok(Keymap::new(
            min,
            usize::from(mapping.keysyms_per_keycode),
            mapping.keysyms,
            &modifiers.keycodes,
        ))
    }

    /// The keycode for `keysym`: unshifted anywhere first, then shifted. Only the first group's
    /// two levels are used; symbols on other groups or levels are bound like missing ones.
    pub(super) fn find(&self, keysym: Keysym) -> Option<KeyPlace> {
        [false, true].into_iter().find_map(|shift| {
            let column = usize::from(shift);
            if column >= self.per_keycode {
                return None;
            }
            self.syms
                .chunks(self.per_keycode)
                .position(|row| row[column] == keysym)
                .and_then(|i| Keycode::try_from(usize::from(self.min_keycode) + i).ok())
                .map(|keycode| KeyPlace { keycode, shift })
        })
    }

    /// How many more keysyms can be bound now.
    pub(super) fn spare_count(&self) -> usize {
        self.spare.len()
    }

    pub(super) fn has_bound(&self) -> bool {
        !self.bound.is_empty()
    }

    /// Binds `keysym` to a spare keycode on both levels, so Shift does not matter.
    pub(super) fn bind(
        &mut self,
        conn: &RustConnection,
        keysym: Keysym,
    ) -> Result<KeyPlace, String> {
        let keycode = self
            .spare
            .pop()
            .ok_or("the keyboard mapping has no spare keycode left")?;
        let row = self.row_range(keycode);
        let mut new = vec![0; self.per_keycode];
        new[0] = keysym;
        if let Some(second) = new.get_mut(1) {
            *second = keysym;
        }
        let old: Vec<Keysym> = self.syms[row.clone()].to_vec();
        if let Err(e) = self.write(conn, keycode, &new) {
            self.spare.push(keycode);
            return Err(e);
        }
        self.syms[row].copy_from_slice(&new);
        self.bound.push((keycode, old));
        Ok(KeyPlace {
            keycode,
            shift: false,
        })
    }

    /// Puts back what every temporarily bound keycode had; they are spare again.
    pub(super) fn restore(&mut self, conn: &RustConnection) -> Result<(), String> {
        while let Some((keycode, old)) = self.bound.pop() {
            if let Err(e) = self.write(conn, keycode, &old) {
                self.bound.push((keycode, old));
                return Err(e);
            }
            let row = self.row_range(keycode);
            self.syms[row].copy_from_slice(&old);
            self.spare.push(keycode);
        }
        Ok(())
    }

    fn row_range(&self, keycode: Keycode) -> std::ops::Range<usize> {
        let start = usize::from(keycode - self.min_keycode) * self.per_keycode;
        start..start + self.per_keycode
    }

    fn write(
        &self,
        conn: &RustConnection,
        keycode: Keycode,
        syms: &[Keysym],
    ) -> Result<(), String> {
        let per = u8::try_from(self.per_keycode).map_err(|e| e.to_string())?;
        conn.change_keyboard_mapping(1, keycode, per, syms)
            .map_err(|e| e.to_string())?
            .check()
            .map_err(|e| format!("ChangeKeyboardMapping failed: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keycodes 8..=12, two symbols each: a/A, 1/!, spare, Shift_L (a modifier), spare.
    fn sample() -> Keymap {
        Keymap::new(
            8,
            2,
            vec![0x61, 0x41, 0x31, 0x21, 0, 0, 0xffe1, 0, 0, 0],
            &[11, 0, 0],
        )
    }

    #[test]
    fn keysyms_are_found_unshifted_first_then_shifted() {
        let map = sample();
        assert_eq!(
            map.find(0x61),
            Some(KeyPlace {
                keycode: 8,
                shift: false
            })
        );
        assert_eq!(
            map.find(0x21),
            Some(KeyPlace {
                keycode: 9,
                shift: true
            })
        );
        assert_eq!(map.find(0xe9), None);
    }

    #[test]
    fn spare_keycodes_have_no_symbols_and_no_modifier_role() {
        let map = sample();
        // 10 and 12 are empty; 11 has a symbol; a keycode in the modifier map is never used
        // even when empty.
        assert_eq!(map.spare, vec![10, 12]);
        let modifier_empty = Keymap::new(8, 1, vec![0x61, 0], &[9]);
        assert_eq!(modifier_empty.spare_count(), 0);
    }

    #[test]
    fn a_one_column_map_never_offers_shift() {
        let map = Keymap::new(8, 1, vec![0x61], &[]);
        assert_eq!(
            map.find(0x61),
            Some(KeyPlace {
                keycode: 8,
                shift: false
            })
        );
        assert_eq!(map.find(0x41), None);
    }
}
