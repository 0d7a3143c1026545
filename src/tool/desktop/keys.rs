//! Key combos as computer-use models write them (`ctrl+s`, `Return`, `ctrl+alt+Delete`,
//! `shift+Tab`, xdotool's key names), parsed into X keysyms that both the X11 and the
//! Wayland backends press, and a canonical lower-case form that preset rules match
//! (`deny = ["key:ctrl+alt+*"]`).

use std::fmt;

/// Combos one `key` call may press, at most.
pub const MAX_COMBOS: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Modifier {
    Ctrl,
    Alt,
    Shift,
    Super,
}

impl Modifier {
    pub fn name(self) -> &'static str {
        match self {
            Modifier::Ctrl => "ctrl",
            Modifier::Alt => "alt",
            Modifier::Shift => "shift",
            Modifier::Super => "super",
        }
    }

    /// The keysym of the left-hand key that holds the modifier.
    pub fn keysym(self) -> u32 {
        match self {
            Modifier::Ctrl => 0xffe3,
            Modifier::Alt => 0xffe9,
            Modifier::Shift => 0xffe1,
            Modifier::Super => 0xffeb,
        }
    }

    fn parse(word: &str) -> Option<Modifier> {
        Some(match word.to_ascii_lowercase().as_str() {
            "ctrl" | "control" | "ctl" | "control_l" | "control_r" => Modifier::Ctrl,
            "alt" | "option" | "alt_l" | "alt_r" => Modifier::Alt,
            "shift" | "shift_l" | "shift_r" => Modifier::Shift,
            "super" | "win" | "windows" | "cmd" | "command" | "meta" | "logo" | "super_l"
            | "super_r" => Modifier::Super,
            _ => return None,
        })
    }
}

/// A key with the modifiers held while it is tapped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyCombo {
    /// Sorted, each once.
    pub modifiers: Vec<Modifier>,
    pub keysym: u32,
    /// The key's canonical name: an xdotool name in lower case (`return`, `page_down`,
    /// `f5`) or the character itself (`s`, `+`).
    pub name: String,
}

impl fmt::Display for KeyCombo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for m in &self.modifiers {
            write!(f, "{}+", m.name())?;
        }
        f.write_str(&self.name)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("no key given: name one, such as Return or ctrl+s")]
    Empty,
    #[error("unknown key {0:?}: use a character or a name such as Return, Tab, Escape, BackSpace, Delete, Page_Down, F5, with modifiers ctrl, alt, shift, super joined by +")]
    Unknown(String),
    #[error("{0:?} has modifiers but no key to press with them")]
    OnlyModifiers(String),
    #[error("at most {MAX_COMBOS} key combos in one call (got {0})")]
    TooMany(usize),
}

/// Space-separated combos, pressed one after the other: `ctrl+a Delete`.
pub fn parse_keys(text: &str) -> Result<Vec<KeyCombo>, KeyError> {
    let combos: Vec<&str> = text.split_whitespace().collect();
    if combos.is_empty() {
        return Err(KeyError::Empty);
    }
    if combos.len() > MAX_COMBOS {
        return Err(KeyError::TooMany(combos.len()));
    }
    combos.into_iter().map(parse_combo).collect()
}

/// One combo: modifiers and a key joined by `+` (`ctrl++` is ctrl and the plus key). A
/// modifier alone (`super`) is pressed as its key.
pub fn parse_combo(text: &str) -> Result<KeyCombo, KeyError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(KeyError::Empty);
    }
    let mut words: Vec<&str> = if text == "+" {
        vec!["+"]
    } else if let Some(head) = text.strip_suffix("++") {
        let mut words: Vec<&str> = head.split('+').collect();
        words.push("+");
        words
    } else {
        text.split('+').collect()
    };
    if words.iter().any(|w| w.is_empty()) {
        return Err(KeyError::Unknown(text.to_string()));
    }
    let last = words.pop().ok_or(KeyError::Empty)?;
    let mut modifiers = Vec::new();
    for word in &words {
        match Modifier::parse(word) {
            Some(m) => modifiers.push(m),
            None => return Err(KeyError::Unknown((*word).to_string())),
        }
    }
    let (keysym, name) = if let Some(found) = keysym_of(last) {
        found
    } else if let Some(m) = Modifier::parse(last) {
        // `ctrl+shift` names no key; a lone `super` taps the key itself.
        if !words.is_empty() {
            return Err(KeyError::OnlyModifiers(text.to_string()));
        }
        (m.keysym(), m.name().to_string())
    } else {
        return Err(KeyError::Unknown(last.to_string()));
    };
    modifiers.sort();
    modifiers.dedup();
    Ok(KeyCombo {
        modifiers,
        keysym,
        name,
    })
}

/// Named keys: xdotool's names and the aliases models use, lower case, with keysyms.
const NAMED: &[(&[&str], &str, u32)] = &[
    (&["return", "enter", "ret"], "return", 0xff0d),
    (&["tab"], "tab", 0xff09),
    (&["iso_left_tab"], "iso_left_tab", 0xfe20),
    (&["escape", "esc"], "escape", 0xff1b),
    (&["backspace"], "backspace", 0xff08),
    (&["delete", "del"], "delete", 0xffff),
    (&["insert", "ins"], "insert", 0xff63),
    (&["home"], "home", 0xff50),
    (&["end"], "end", 0xff57),
    (&["page_up", "pageup", "pgup", "prior"], "page_up", 0xff55),
    (&["page_down", "pagedown", "pgdn", "next"], "page_down", 0xff56),
    (&["left", "arrowleft"], "left", 0xff51),
    (&["up", "arrowup"], "up", 0xff52),
    (&["right", "arrowright"], "right", 0xff53),
    (&["down", "arrowdown"], "down", 0xff54),
    (&["space"], " ", 0x20),
    (&["menu"], "menu", 0xff67),
    (&["print", "printscreen"], "print", 0xff61),
    (&["pause"], "pause", 0xff13),
    (&["scroll_lock"], "scroll_lock", 0xff14),
    (&["caps_lock", "capslock"], "caps_lock", 0xffe5),
    (&["num_lock"], "num_lock", 0xff7f),
    (&["kp_enter"], "kp_enter", 0xff8d),
    (&["kp_add"], "kp_add", 0xffab),
    (&["kp_subtract"], "kp_subtract", 0xffad),
    (&["kp_multiply"], "kp_multiply", 0xffaa),
    (&["kp_divide"], "kp_divide", 0xffaf),
    (&["kp_decimal"], "kp_decimal", 0xffae),
    (&["minus"], "-", 0x2d),
    (&["plus"], "+", 0x2b),
    (&["equal"], "=", 0x3d),
    (&["comma"], ",", 0x2c),
    (&["period"], ".", 0x2e),
    (&["slash"], "/", 0x2f),
    (&["backslash"], "\\", 0x5c),
    (&["semicolon"], ";", 0x3b),
    (&["apostrophe"], "'", 0x27),
    (&["grave"], "`", 0x60),
    (&["bracketleft"], "[", 0x5b),
    (&["bracketright"], "]", 0x5d),
    (&["xf86audioraisevolume"], "xf86audioraisevolume", 0x1008_ff13),
    (&["xf86audiolowervolume"], "xf86audiolowervolume", 0x1008_ff11),
    (&["xf86audiomute"], "xf86audiomute", 0x1008_ff12),
    (&["xf86audioplay"], "xf86audioplay", 0x1008_ff14),
];

fn keysym_of(word: &str) -> Option<(u32, String)> {
    let mut chars = word.chars();
    if let (Some(c), None) = (chars.next(), chars.next()) {
        return Some((char_keysym(c), c.to_string()));
    }
    let lower = word.to_ascii_lowercase();
    if let Some((_, name, sym)) = NAMED.iter().find(|(names, _, _)| names.contains(&lower.as_str()))
    {
        return Some((*sym, (*name).to_string()));
    }
    if let Some(n) = lower.strip_prefix('f').and_then(|n| n.parse::<u32>().ok())
        && (1..=35).contains(&n)
    {
        return Some((0xffbe + n - 1, format!("f{n}")));
    }
    if let Some(n) = lower.strip_prefix("kp_").and_then(|n| n.parse::<u32>().ok())
        && n <= 9
    {
        return Some((0xffb0 + n, format!("kp_{n}")));
    }
    None
}

/// The keysym that types a character: Latin-1 as itself, the rest as Unicode keysyms.
pub fn char_keysym(c: char) -> u32 {
    let cp = u32::from(c);
    match cp {
        0x20..=0x7e | 0xa0..=0xff => cp,
        0x0a | 0x0d => 0xff0d,
        0x09 => 0xff09,
        0x08 => 0xff08,
        0x1b => 0xff1b,
        _ => 0x0100_0000 | cp,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(text: &str) -> String {
        parse_keys(text)
            .map(|c| c.iter().map(ToString::to_string).collect::<Vec<_>>().join(" "))
            .unwrap_or_else(|e| format!("error: {e}"))
    }

    #[test]
    fn combos_parse_to_canonical_names_and_keysyms() {
        assert_eq!(shown("ctrl+s"), "ctrl+s");
        assert_eq!(shown("Return"), "return");
        assert_eq!(shown("alt+ctrl+Delete"), "ctrl+alt+delete");
        assert_eq!(shown("Control_L+shift+t"), "ctrl+shift+t");
        assert_eq!(shown("cmd+Page_Down F5"), "super+page_down f5");
        assert_eq!(shown("ctrl++"), "ctrl++");
        assert_eq!(shown("super"), "super");
        assert_eq!(shown("KP_7 kp_enter"), "kp_7 kp_enter");
        let combo = parse_combo("ctrl+alt+Delete").unwrap();
        assert_eq!(combo.keysym, 0xffff);
        assert_eq!(combo.modifiers, vec![Modifier::Ctrl, Modifier::Alt]);
        assert_eq!(parse_combo("F12").unwrap().keysym, 0xffc9);
        assert_eq!(parse_combo("é").unwrap().keysym, 0xe9);
        assert_eq!(parse_combo("€").unwrap().keysym, 0x0100_20ac);
    }

    #[test]
    fn nonsense_is_refused_with_the_word_that_is_wrong() {
        assert_eq!(shown(""), "error: no key given: name one, such as Return or ctrl+s");
        assert!(shown("ctrl+bogus").contains("unknown key \"bogus\""));
        assert!(shown("hyper+s").contains("unknown key \"hyper\""));
        assert!(shown("ctrl+shift").contains("no key to press"));
        assert!(shown("ctrl+").contains("unknown key"));
        assert!(shown(&"a ".repeat(17)).contains("at most 16"));
    }

    #[test]
    fn characters_map_to_latin1_or_unicode_keysyms() {
        assert_eq!(char_keysym('a'), 0x61);
        assert_eq!(char_keysym('\n'), 0xff0d);
        assert_eq!(char_keysym('ß'), 0xdf);
        assert_eq!(char_keysym('λ'), 0x0100_03bb);
    }
}
