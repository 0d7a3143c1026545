//! Making model and tool text safe for a terminal: every character a terminal would act on
//! instead of showing — C0 and C1 controls (ESC, so every CSI/OSC/DCS sequence, OSC 52
//! clipboard writes included; `\r`, which returns to the start of the line to overwrite it;
//! backspace, BEL …), DEL, and the invisible format characters that reorder or hide text
//! (bidi overrides and isolates, zero-width characters, tag characters) — is shown as an
//! escape (`\x1b`, `\r`, `\u{202e}`) and never written raw. `\n` and `\t` stay as they are so
//! streamed text keeps its shape.
//!
//! Each character is judged on its own, so an escape sequence split between two chunks is
//! harmless in both halves: no state about "inside a sequence" exists to be confused. The
//! only state is the byte decoder of [`SafeWriter`], which holds a UTF-8 character split
//! across writes until its last byte arrives.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{self, Write};

/// Invisible characters that change how the text around them reads: Unicode's format
/// characters (Cf: bidi embeddings, overrides, isolates and marks, zero-width space and
/// joiners, word joiner, BOM, interlinear annotation, tag characters …), the line and
/// paragraph separators, and the blank fillers that render as nothing.
const INVISIBLE: &[(u32, u32)] = &[
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x2028, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
];

/// Whether `c` must be shown escaped rather than written to a terminal.
pub fn is_unsafe(c: char) -> bool {
    if c == '\n' || c == '\t' {
        return false;
    }
    // Cc: C0, DEL and C1 (U+0080–U+009F, which some terminals take as 8-bit CSI, OSC …).
    if c.is_control() {
        return true;
    }
    let code = u32::from(c);
    INVISIBLE
        .binary_search_by(|&(lo, hi)| {
            if hi < code {
                std::cmp::Ordering::Less
            } else if lo > code {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

fn push_escaped(out: &mut String, c: char) {
    match c {
        '\r' => out.push_str("\\r"),
        c if u32::from(c) < 0x80 => {
            let _ = write!(out, "\\x{:02x}", u32::from(c));
        }
        c => {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        }
    }
}

/// `text` with every unsafe character escaped; borrowed when there is none.
pub fn escape(text: &str) -> Cow<'_, str> {
    escape_each(text, push_escaped)
}

/// `text` with each unsafe character written by `push`; borrowed when there is none.
fn escape_each(text: &str, push: fn(&mut String, char)) -> Cow<'_, str> {
    let Some(first) = text.find(is_unsafe) else {
        return Cow::Borrowed(text);
    };
    let mut out = String::with_capacity(text.len() + 16);
    out.push_str(&text[..first]);
    for c in text[first..].chars() {
        if is_unsafe(c) {
            push(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// One line: like [`escape`], and `\n` and `\t` escaped too, for text shown inside a line
/// of corral's own (a tool title, an error excerpt).
pub fn escape_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if is_unsafe(c) => push_escaped(&mut out, c),
            c => out.push(c),
        }
    }
    out
}

/// The first `max_chars` characters of `text` as one line, escaped as [`escape_line`] does,
/// with `…` when there was more. Cut before escaping, so a long text is never copied whole.
pub fn escape_head(text: &str, max_chars: usize) -> String {
    let head: String = text.chars().take(max_chars).collect();
    let mut shown = escape_line(&head);
    if head.len() < text.len() {
        shown.push('…');
    }
    shown
}

/// JSON text with every character a terminal would act on written as `\uXXXX`: the same
/// JSON, safe to show. serde_json escapes C0 controls already; C1, DEL and the invisible format
/// characters it leaves raw. Outside strings compact JSON has none of them.
pub fn escape_json(json: &str) -> Cow<'_, str> {
    escape_each(json, |out, c| {
        let mut units = [0u16; 2];
        for unit in c.encode_utf16(&mut units) {
            let _ = write!(out, "\\u{unit:04x}");
        }
    })
}

/// A word as bash would need it typed: bare when it is plain, in single quotes when it has
/// spaces or shell syntax, as `$'…'` with escapes when it holds characters a terminal would
/// act on, so the rendering is both safe to show and exactly what runs.
pub fn shell_quote(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        return word.to_string();
    }
    if !word.chars().any(is_unsafe) {
        return format!("'{}'", word.replace('\'', r"'\''"));
    }
    let mut out = String::from("$'");
    for c in word.chars() {
        match c {
            '\\' => out.push_str(r"\\"),
            '\'' => out.push_str(r"\'"),
            '\n' => out.push_str(r"\n"),
            '\t' => out.push_str(r"\t"),
            '\r' => out.push_str(r"\r"),
            c if is_unsafe(c) && u32::from(c) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c if is_unsafe(c) && u32::from(c) <= 0xFFFF => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c if is_unsafe(c) => {
                let _ = write!(out, "\\U{:08x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// A writer that escapes what passes through it. Bytes that are not UTF-8 are shown as
/// `\xNN`; a character split between two writes is decoded whole. [`SafeWriter::finish`]
/// (or dropping it) shows an incomplete character left at the end.
pub struct SafeWriter<W: Write> {
    inner: W,
    carry: Vec<u8>,
}

impl<W: Write> SafeWriter<W> {
    pub fn new(inner: W) -> Self {
        SafeWriter {
            inner,
            carry: Vec::new(),
        }
    }

    /// Writes out an incomplete character held back from the last write, escaped.
    pub fn finish(&mut self) -> io::Result<()> {
        if self.carry.is_empty() {
            return Ok(());
        }
        let mut text = String::new();
        for byte in std::mem::take(&mut self.carry) {
            let _ = write!(text, "\\x{byte:02x}");
        }
        self.inner.write_all(text.as_bytes())?;
        self.inner.flush()
    }

    fn decode(&mut self, bytes: &[u8]) -> String {
        let mut data = std::mem::take(&mut self.carry);
        data.extend_from_slice(bytes);
        let mut out = String::with_capacity(data.len());
        let mut rest = data.as_slice();
        loop {
            match std::str::from_utf8(rest) {
                Ok(text) => {
                    out.push_str(&escape(text));
                    break;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    // Checked by from_utf8 just now.
                    out.push_str(&escape(std::str::from_utf8(valid).unwrap_or_default()));
                    match e.error_len() {
                        // Cut short at the end: the rest may come with the next write.
                        None => {
                            self.carry = after.to_vec();
                            break;
                        }
                        Some(n) => {
                            for byte in &after[..n] {
                                let _ = write!(out, "\\x{byte:02x}");
                            }
                            rest = &after[n..];
                        }
                    }
                }
            }
        }
        out
    }
}

impl<W: Write> Write for SafeWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let text = self.decode(buf);
        self.inner.write_all(text.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<W: Write> Drop for SafeWriter<W> {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_controls_and_bidi_are_shown_not_interpreted() {
        assert_eq!(
            escape("echo hi # \x1b[2J\x1b[H$ ls"),
            r"echo hi # \x1b[2J\x1b[H$ ls"
        );
        assert_eq!(
            escape("\x1b]52;c;aGk=\x07copied"),
            r"\x1b]52;c;aGk=\x07copied"
        );
        assert_eq!(escape("over\rwrite\x08\x7f"), r"over\rwrite\x08\x7f");
        assert_eq!(escape("\u{9b}2J \u{9d}52"), r"\u{9b}2J \u{9d}52");
        assert_eq!(
            escape("a\u{202e}cod.exe\u{2066}\u{200f}\u{61c}\u{200b}\u{feff}\u{e0041}"),
            r"a\u{202e}cod.exe\u{2066}\u{200f}\u{61c}\u{200b}\u{feff}\u{e0041}"
        );
        assert_eq!(escape_line("a\n\tb\x1b"), r"a\n\tb\x1b");
    }

    #[test]
    fn ordinary_text_is_left_alone() {
        let text = "line one\n\tindented — ünïcödé, 日本語, emoji 🦀 ❤\u{fe0f}\n";
        assert!(matches!(escape(text), Cow::Borrowed(t) if t == text));
    }

    #[test]
    fn a_sequence_split_between_chunks_is_escaped_in_both_halves() {
        let joined = format!("{}{}", escape("text \x1b"), escape("]52;c;aGk=\x07 more"));
        assert_eq!(joined, r"text \x1b]52;c;aGk=\x07 more");
        let mut out = Vec::new();
        {
            let mut w = SafeWriter::new(&mut out);
            w.write_all(b"a\xe6\x97").unwrap();
            w.write_all(b"\xa5\x1b[1A\xff").unwrap();
            w.write_all(b"z\xf0\x9f").unwrap();
        }
        assert_eq!(String::from_utf8(out).unwrap(), r"a日\x1b[1A\xffz\xf0\x9f");
    }

    #[test]
    fn words_are_quoted_as_bash_reads_them() {
        assert_eq!(shell_quote("--short"), "--short");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("x\x1b[2J'\\"), r"$'x\x1b[2J\'\\'");
        assert_eq!(shell_quote("\u{202e}"), r"$'\u202e'");
        assert_eq!(shell_quote("\u{e0041}"), r"$'\U000e0041'");
        assert!(!shell_quote("a\u{202e}\x07").chars().any(is_unsafe));
    }
}
