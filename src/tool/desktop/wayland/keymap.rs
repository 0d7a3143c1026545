//! The keyboard a virtual keyboard uploads: an xkb keymap made for the keys about to be sent,
//! one keycode per keysym (the technique of `wtype`). Whatever layout the person uses, every
//! character then has a key of its own at level one, so `é`, `€` or `λ` type as themselves
//! with no modifier and no dead key.

use std::collections::BTreeMap;

use super::super::keys::Modifier;

/// The first xkb keycode handed out (8 is the xkb minimum; evdev code = xkb code − 8).
const FIRST_KEYCODE: u32 = 9;
/// The last xkb keycode: X clients (XWayland) cannot see keycodes above 255.
const LAST_KEYCODE: u32 = 255;
/// How many distinct keysyms one keymap holds; longer texts are typed in parts.
pub(super) const KEYSYMS_PER_KEYMAP: usize = (LAST_KEYCODE - FIRST_KEYCODE + 1) as usize;

/// A keymap's text and where each keysym sits in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Keymap {
    /// The xkb_v1 text, NUL-terminated as the protocol wants.
    pub text: Vec<u8>,
    /// keysym → evdev key code (the xkb keycode minus 8), as `key` requests take it.
    pub codes: BTreeMap<u32, u32>,
}

impl Keymap {
    pub fn code(&self, keysym: u32) -> Option<u32> {
        self.codes.get(&keysym).copied()
    }
}

/// The xkb real modifier a modifier key sets, and its bit in a `modifiers` request.
pub(super) fn modifier_bit(modifier: Modifier) -> (&'static str, u32) {
    match modifier {
        Modifier::Shift => ("Shift", 1 << 0),
        Modifier::Ctrl => ("Control", 1 << 2),
        Modifier::Alt => ("Mod1", 1 << 3),
        Modifier::Super => ("Mod4", 1 << 6),
    }
}

/// A keymap with one key for each of `keysyms` (deduplicated, at most
/// [`KEYSYMS_PER_KEYMAP`]); the four modifier keys are always in it, mapped to their real
/// modifiers so clients read `modifiers` masks the usual way.
pub(super) fn build(keysyms: impl IntoIterator<Item = u32>) -> Keymap {
    let modifiers = [
        Modifier::Ctrl,
        Modifier::Alt,
        Modifier::Shift,
        Modifier::Super,
    ];
    let mut codes = BTreeMap::new();
    let mut next = FIRST_KEYCODE;
    for keysym in modifiers.iter().map(|m| m.keysym()).chain(keysyms) {
        if codes.contains_key(&keysym) || next > LAST_KEYCODE {
            continue;
        }
        codes.insert(keysym, next);
        next += 1;
    }
    let mut text = String::from("xkb_keymap {\nxkb_keycodes \"corral\" {\n");
    text.push_str(&format!(
        "minimum = 8;\nmaximum = {};\n",
        (next - 1).max(FIRST_KEYCODE)
    ));
    for code in codes.values() {
        text.push_str(&format!("<K{code}> = {code};\n"));
    }
    text.push_str("};\nxkb_types \"corral\" { include \"complete\" };\n");
    text.push_str("xkb_compatibility \"corral\" { include \"complete\" };\n");
    text.push_str("xkb_symbols \"corral\" {\n");
    for (keysym, code) in &codes {
        // xkbcommon reads `0x…` as a keysym value, so no name table is needed.
        text.push_str(&format!("key <K{code}> {{[ 0x{keysym:08x} ]}};\n"));
    }
    for modifier in modifiers {
        let (real, _) = modifier_bit(modifier);
        if let Some(code) = codes.get(&modifier.keysym()) {
            text.push_str(&format!("modifier_map {real} {{ <K{code}> }};\n"));
        }
    }
    text.push_str("};\n};\n");
    let mut text = text.into_bytes();
    text.push(0);
    let codes = codes
        .into_iter()
        .map(|(keysym, code)| (keysym, code - 8))
        .collect();
    Keymap { text, codes }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_keysym_gets_its_own_key_and_modifiers_their_real_modifier() {
        let keymap = build([0x61, 0xe9, 0x0100_20ac, 0x61]);
        let text = String::from_utf8(keymap.text.clone()).unwrap();
        // Four modifier keys first, then a, é, € once each.
        assert_eq!(keymap.codes.len(), 7);
        let euro = keymap.code(0x0100_20ac).unwrap();
        assert!(text.contains(&format!("key <K{}> {{[ 0x010020ac ]}};", euro + 8)));
        let ctrl = keymap.code(Modifier::Ctrl.keysym()).unwrap();
        assert!(text.contains(&format!("modifier_map Control {{ <K{}> }};", ctrl + 8)));
        assert!(text.ends_with("};\n};\n\0"));
        let mut codes: Vec<u32> = keymap.codes.values().copied().collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), 7, "keycodes are distinct");
    }

    #[test]
    fn a_keymap_never_goes_past_keycode_255() {
        let keymap = build(0x0100_0100..0x0100_0400);
        assert_eq!(keymap.codes.len(), KEYSYMS_PER_KEYMAP);
        assert!(keymap.codes.values().all(|&code| code + 8 <= LAST_KEYCODE));
        let text = String::from_utf8(keymap.text).unwrap();
        assert!(text.contains("maximum = 255;"));
    }
}
