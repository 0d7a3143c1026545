//! The input: a multi-line editor with the keys people expect from a shell and from other
//! agents' terminals — Enter sends, Alt-Enter or Ctrl-J breaks the line, ↑/↓ move between
//! lines and, at the first or last line, through the history; Ctrl-A/E/U/K/W as in readline.
//! A paste arrives whole (bracketed paste) and never sends by itself.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::history::History;

#[derive(Debug, PartialEq, Eq)]
pub enum EditorAction {
    /// The text to send (the editor is empty again).
    Submit(String),
    /// The key changed the text or the cursor.
    Edited,
    /// Not an editing key.
    Ignored,
}

#[derive(Debug, Default)]
pub struct Editor {
    lines: Vec<Vec<char>>,
    row: usize,
    col: usize,
    history: History,
    /// Position while browsing the history, and the draft it started from.
    browsing: Option<(usize, String)>,
}

impl Editor {
    pub fn new(history: History) -> Editor {
        Editor {
            lines: vec![Vec::new()],
            row: 0,
            col: 0,
            history,
            browsing: None,
        }
    }

    pub fn text(&self) -> String {
        let lines: Vec<String> = self.lines.iter().map(|l| l.iter().collect()).collect();
        lines.join("\n")
    }

    pub fn is_empty(&self) -> bool {
        self.lines.len() == 1 && self.lines[0].is_empty()
    }

    pub fn lines(&self) -> &[Vec<char>] {
        &self.lines
    }

    /// Row and column (in characters) of the cursor.
    pub fn cursor(&self) -> (usize, usize) {
        (self.row, self.col)
    }

    pub fn set_text(&mut self, text: &str) {
        self.lines = text.split('\n').map(|l| l.chars().collect()).collect();
        self.row = self.lines.len() - 1;
        self.col = self.lines[self.row].len();
    }

    pub fn clear(&mut self) {
        self.set_text("");
        self.browsing = None;
    }

    /// The word the cursor is at the end of, and where it starts (a column).
    pub fn word_before_cursor(&self) -> (usize, String) {
        let line = &self.lines[self.row];
        let start = line[..self.col]
            .iter()
            .rposition(|c| c.is_whitespace())
            .map_or(0, |i| i + 1);
        (start, line[start..self.col].iter().collect())
    }

    /// Replaces the word before the cursor (from `start`) with `text`.
    pub fn replace_word(&mut self, start: usize, text: &str) {
        let line = &mut self.lines[self.row];
        let col = self.col.min(line.len());
        // A stale start (the cursor moved since) inserts at the cursor instead.
        let start = if start <= col { start } else { col };
        let rest: Vec<char> = line.drain(start..).skip(col - start).collect();
        line.extend(text.chars());
        self.col = line.len();
        line.extend(rest);
    }

    pub fn insert_str(&mut self, text: &str) {
        let text = text.replace("\r\n", "\n").replace('\r', "\n");
        for (i, part) in text.split('\n').enumerate() {
            if i > 0 {
                self.newline();
            }
            for c in part.chars() {
                self.insert(c);
            }
        }
    }

    fn insert(&mut self, c: char) {
        self.lines[self.row].insert(self.col, c);
        self.col += 1;
    }

    fn newline(&mut self) {
        let rest = self.lines[self.row].split_off(self.col);
        self.lines.insert(self.row + 1, rest);
        self.row += 1;
        self.col = 0;
    }

    fn backspace(&mut self) {
        if self.col > 0 {
            self.col -= 1;
            self.lines[self.row].remove(self.col);
        } else if self.row > 0 {
            let line = self.lines.remove(self.row);
            self.row -= 1;
            self.col = self.lines[self.row].len();
            self.lines[self.row].extend(line);
        }
    }

    fn delete(&mut self) {
        if self.col < self.lines[self.row].len() {
            self.lines[self.row].remove(self.col);
        } else if self.row + 1 < self.lines.len() {
            let next = self.lines.remove(self.row + 1);
            self.lines[self.row].extend(next);
        }
    }

    fn delete_word(&mut self) {
        let line = &mut self.lines[self.row];
        let mut start = self.col;
        while start > 0 && line[start - 1].is_whitespace() {
            start -= 1;
        }
        while start > 0 && !line[start - 1].is_whitespace() {
            start -= 1;
        }
        line.drain(start..self.col);
        self.col = start;
    }

    fn history_back(&mut self) -> bool {
        let next = match &self.browsing {
            Some((i, _)) => i + 1,
            None => 0,
        };
        let Some(entry) = self.history.back(next).map(str::to_string) else {
            return false;
        };
        let draft = match self.browsing.take() {
            Some((_, draft)) => draft,
            None => self.text(),
        };
        self.browsing = Some((next, draft));
        self.set_text(&entry);
        true
    }

    fn history_forward(&mut self) -> bool {
        let Some((i, draft)) = self.browsing.take() else {
            return false;
        };
        if i == 0 {
            self.set_text(&draft);
            return true;
        }
        if let Some(entry) = self.history.back(i - 1).map(str::to_string) {
            self.set_text(&entry);
        }
        self.browsing = Some((i - 1, draft));
        true
    }

    pub fn key(&mut self, key: &KeyEvent) -> EditorAction {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        let shift = key.modifiers.contains(KeyModifiers::SHIFT);
        match key.code {
            KeyCode::Enter if alt || shift => self.newline(),
            KeyCode::Char('j') if ctrl => self.newline(),
            KeyCode::Enter => {
                let text = self.text();
                if text.trim().is_empty() {
                    return EditorAction::Ignored;
                }
                self.history.add(&text);
                self.clear();
                return EditorAction::Submit(text);
            }
            KeyCode::Char('a') if ctrl => self.col = 0,
            KeyCode::Char('e') if ctrl => self.col = self.lines[self.row].len(),
            KeyCode::Char('u') if ctrl => {
                self.lines[self.row].drain(..self.col);
                self.col = 0;
            }
            KeyCode::Char('k') if ctrl => {
                self.lines[self.row].truncate(self.col);
            }
            KeyCode::Char('w') if ctrl => self.delete_word(),
            KeyCode::Backspace if alt => self.delete_word(),
            KeyCode::Char(_) if ctrl || alt => return EditorAction::Ignored,
            KeyCode::Char(c) => self.insert(c),
            KeyCode::Tab => return EditorAction::Ignored,
            KeyCode::Backspace => self.backspace(),
            KeyCode::Delete => self.delete(),
            KeyCode::Left if self.col > 0 => self.col -= 1,
            KeyCode::Left if self.row > 0 => {
                self.row -= 1;
                self.col = self.lines[self.row].len();
            }
            KeyCode::Right if self.col < self.lines[self.row].len() => self.col += 1,
            KeyCode::Right if self.row + 1 < self.lines.len() => {
                self.row += 1;
                self.col = 0;
            }
            KeyCode::Home => self.col = 0,
            KeyCode::End => self.col = self.lines[self.row].len(),
            KeyCode::Up if self.row > 0 => {
                self.row -= 1;
                self.col = self.col.min(self.lines[self.row].len());
            }
            KeyCode::Up => {
                if !self.history_back() {
                    return EditorAction::Ignored;
                }
            }
            KeyCode::Down if self.row + 1 < self.lines.len() => {
                self.row += 1;
                self.col = self.col.min(self.lines[self.row].len());
            }
            KeyCode::Down => {
                if !self.history_forward() {
                    return EditorAction::Ignored;
                }
            }
            _ => return EditorAction::Ignored,
        }
        EditorAction::Edited
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn typed(editor: &mut Editor, text: &str) {
        for c in text.chars() {
            editor.key(&key(KeyCode::Char(c)));
        }
    }

    #[test]
    fn enter_sends_and_alt_enter_breaks_the_line() {
        let mut e = Editor::new(History::in_memory());
        typed(&mut e, "one");
        e.key(&KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT));
        typed(&mut e, "two");
        assert_eq!(
            e.key(&key(KeyCode::Enter)),
            EditorAction::Submit("one\ntwo".into())
        );
        assert!(e.is_empty());
    }

    #[test]
    fn up_and_down_walk_the_history_and_keep_the_draft() {
        let mut e = Editor::new(History::in_memory());
        typed(&mut e, "first");
        e.key(&key(KeyCode::Enter));
        typed(&mut e, "second");
        e.key(&key(KeyCode::Enter));
        typed(&mut e, "draft");
        e.key(&key(KeyCode::Up));
        assert_eq!(e.text(), "second");
        e.key(&key(KeyCode::Up));
        assert_eq!(e.text(), "first");
        assert_eq!(e.key(&key(KeyCode::Up)), EditorAction::Ignored);
        e.key(&key(KeyCode::Down));
        e.key(&key(KeyCode::Down));
        assert_eq!(e.text(), "draft");
    }

    #[test]
    fn a_paste_with_newlines_stays_in_the_editor() {
        let mut e = Editor::new(History::in_memory());
        e.insert_str("a\r\nb\nc");
        assert_eq!(e.text(), "a\nb\nc");
        assert_eq!(e.cursor(), (2, 1));
    }

    #[test]
    fn editing_keys_never_panic_at_the_edges() {
        let mut e = Editor::new(History::in_memory());
        for code in [
            KeyCode::Backspace,
            KeyCode::Delete,
            KeyCode::Left,
            KeyCode::Right,
            KeyCode::Up,
            KeyCode::Down,
            KeyCode::Home,
            KeyCode::End,
        ] {
            e.key(&key(code));
        }
        e.key(&KeyEvent::new(KeyCode::Char('w'), KeyModifiers::CONTROL));
        e.key(&KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL));
        assert!(e.is_empty());
        typed(&mut e, "ab");
        e.key(&key(KeyCode::Left));
        e.key(&KeyEvent::new(KeyCode::Char('k'), KeyModifiers::CONTROL));
        assert_eq!(e.text(), "a");
    }

    #[test]
    fn the_word_before_the_cursor_is_replaced() {
        let mut e = Editor::new(History::in_memory());
        typed(&mut e, "read @sr please");
        for _ in 0.." please".len() {
            e.key(&key(KeyCode::Left));
        }
        let (start, word) = e.word_before_cursor();
        assert_eq!(word, "@sr");
        e.replace_word(start, "@src/main.rs ");
        assert_eq!(e.text(), "read @src/main.rs  please");
    }
}
