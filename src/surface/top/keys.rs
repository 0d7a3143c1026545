//! What each key and wheel turn does, by what is open: the approval and close questions
//! first, then the history overlay, the filter being typed, the feed, the list.

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseEvent, MouseEventKind};

use super::app::{App, Command, Overlay, View};
use crate::event::Status;
use crate::surface::approve::decision_for;
use crate::surface::tui::Conversation;

/// Lines a wheel notch scrolls.
const WHEEL: isize = 3;

const READ_ONLY: &str = "local sessions are read-only here: run `corral top --server URL` to answer, interrupt or close";

fn is_quit(key: &KeyEvent) -> bool {
    key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c')
}

/// Lines the approval's body moves for a page key.
const MODAL_PAGE: usize = 10;

/// Up, down, page, home and end on a conversation (Ctrl-T shows or folds its thoughts, as
/// in the session view). False for any other key.
fn scroll_key(view: &mut Conversation, key: &KeyEvent) -> bool {
    let page = isize::try_from(view.height.max(2) - 1).unwrap_or(isize::MAX);
    match key.code {
        KeyCode::Up | KeyCode::Char('k') => view.scroll_by(1),
        KeyCode::Down | KeyCode::Char('j') => view.scroll_by(-1),
        KeyCode::PageUp => view.scroll_by(page),
        KeyCode::PageDown | KeyCode::Char(' ') => view.scroll_by(-page),
        // Drawing keeps the scroll within the conversation.
        KeyCode::Home | KeyCode::Char('g') => view.scroll = usize::MAX / 2,
        KeyCode::End | KeyCode::Char('G') => view.scroll = 0,
        KeyCode::Char('t') if key.modifiers.contains(KeyModifiers::CONTROL) => {
            view.transcript.toggle_thoughts();
        }
        _ => return false,
    }
    true
}

impl App {
    pub fn key(&mut self, key: KeyEvent) -> Vec<Command> {
        if key.kind == KeyEventKind::Release {
            return Vec::new();
        }
        if let Some(overlay) = self.overlay.take() {
            return self.overlay_key(overlay, key);
        }
        if is_quit(&key) {
            self.quit = true;
            return Vec::new();
        }
        if self.editing_filter {
            self.filter_key(key);
            return Vec::new();
        }
        if let View::Feed { .. } = &self.view {
            if scroll_key(&mut self.feed, &key) {
                return Vec::new();
            }
            if matches!(key.code, KeyCode::Esc | KeyCode::Char('q')) {
                self.view = View::List;
                return vec![Command::Watch(None)];
            }
        } else if self.list_key(&key) {
            return Vec::new();
        }
        self.action_key(&key)
    }

    /// A key while something is open over the list or feed; it stays open unless the key
    /// answers, closes or leaves it.
    fn overlay_key(&mut self, mut overlay: Overlay, key: KeyEvent) -> Vec<Command> {
        match &mut overlay {
            Overlay::Approve { id, request, modal } => {
                // Esc leaves the question open for later (or another surface); Ctrl-C quits
                // here as everywhere in `top` rather than cancel someone's turn on the way out.
                if key.code == KeyCode::Esc {
                    return Vec::new();
                }
                if is_quit(&key) {
                    self.quit = true;
                    return Vec::new();
                }
                let decision = decision_for(&key);
                match (request.as_deref(), decision) {
                    // Still loading: nothing is answered blind.
                    (None, _) | (Some(_), None) => {}
                    (Some(r), Some(decision)) => {
                        match modal.permits(r, decision, std::time::Instant::now()) {
                            Ok(()) => {
                                return vec![Command::Answer {
                                    id: id.clone(),
                                    request: r.request_id.clone(),
                                    decision,
                                }];
                            }
                            Err(why) => self.say(why),
                        }
                    }
                }
                modal.scroll_key(&key, MODAL_PAGE);
            }
            Overlay::Close { id } => {
                if matches!(key.code, KeyCode::Char('y' | 'Y')) {
                    return vec![Command::Close(id.clone())];
                }
                self.say("not closed");
                return Vec::new();
            }
            Overlay::History { history, .. } => {
                if is_quit(&key) {
                    self.quit = true;
                    return Vec::new();
                }
                if matches!(key.code, KeyCode::Esc | KeyCode::Char('q' | 'h')) {
                    return Vec::new();
                }
                if let Some(view) = history {
                    scroll_key(view, &key);
                }
            }
        }
        self.overlay = Some(overlay);
        Vec::new()
    }

    fn filter_key(&mut self, key: KeyEvent) {
        match key.code {
            KeyCode::Esc => {
                self.board.filter.clear();
                self.editing_filter = false;
            }
            KeyCode::Enter => self.editing_filter = false,
            KeyCode::Backspace => {
                self.board.filter.pop();
            }
            KeyCode::Char(c) if !c.is_control() => self.board.filter.push(c),
            _ => {}
        }
        self.select_index(self.selected_index());
    }

    /// Moving in the list, sorting and filtering. False for any other key.
    fn list_key(&mut self, key: &KeyEvent) -> bool {
        let index = self.selected_index();
        let shown = self.board.visible().len();
        match key.code {
            KeyCode::Up | KeyCode::Char('k') => self.select_index(index.saturating_sub(1)),
            KeyCode::Down | KeyCode::Char('j') => self.select_index(index + 1),
            KeyCode::PageUp => self.select_index(index.saturating_sub(10)),
            KeyCode::PageDown => self.select_index(index + 10),
            KeyCode::Home | KeyCode::Char('g') => self.select_index(0),
            KeyCode::End | KeyCode::Char('G') => self.select_index(shown),
            KeyCode::Char('q') => self.quit = true,
            KeyCode::Char('s') => {
                self.board.sort = self.board.sort.next();
                self.say(format!("sorted by {}", self.board.sort.name()));
            }
            KeyCode::Char('/') => self.editing_filter = true,
            KeyCode::Esc => {
                self.board.filter.clear();
                self.select_index(index);
            }
            _ => return false,
        }
        true
    }

    /// The keys that act on a session, from the list or its feed.
    fn action_key(&mut self, key: &KeyEvent) -> Vec<Command> {
        let Some(id) = self.target() else {
            return Vec::new();
        };
        let status = self.board.get(&id).map(|r| r.status);
        let dead = status == Some(Status::Dead);
        let writes = matches!(key.code, KeyCode::Char('a' | 'i'))
            || (key.code == KeyCode::Char('x') && !dead);
        if writes && self.read_only {
            self.say(READ_ONLY);
            return Vec::new();
        }
        match key.code {
            KeyCode::Enter if matches!(self.view, View::List) => {
                self.open_feed(id.clone());
                return vec![Command::Watch(Some(id))];
            }
            KeyCode::Char('h') => {
                self.overlay = Some(Overlay::History {
                    id: id.clone(),
                    history: None,
                });
                return vec![Command::History(id)];
            }
            KeyCode::Char('a') => {
                let pending = self.board.get(&id).is_some_and(|r| r.pending > 0);
                if status != Some(Status::WaitingApproval) && !pending {
                    self.say("nothing is waiting for an answer there");
                    return Vec::new();
                }
                self.overlay = Some(Overlay::Approve {
                    id: id.clone(),
                    request: None,
                    modal: Box::default(),
                });
                return vec![Command::Permissions(id)];
            }
            KeyCode::Char('i') => return vec![Command::Cancel(id)],
            // As Kaimon's x: a dead one has nothing left to close, so it goes.
            KeyCode::Char('x' | 'd') if dead => {
                let index = self.selected_index();
                self.board.dismiss(&id);
                if matches!(self.view, View::Feed { .. }) {
                    self.view = View::List;
                    self.select_index(index);
                    return vec![Command::Watch(None)];
                }
                self.select_index(index);
            }
            KeyCode::Char('x') => self.overlay = Some(Overlay::Close { id }),
            KeyCode::Char('d') => self.say("only a dead session can be dismissed (x closes it)"),
            _ => {}
        }
        Vec::new()
    }

    /// Pasted text goes into the filter being typed, else nowhere: a paste is never taken as
    /// keys (a pasted `x` then `y` would close a session).
    pub fn paste(&mut self, text: &str) {
        if self.editing_filter {
            let line = text.lines().next().unwrap_or_default();
            self.board
                .filter
                .extend(line.chars().filter(|c| !c.is_control()));
            self.select_index(self.selected_index());
        }
    }

    pub fn mouse(&mut self, mouse: MouseEvent) {
        let delta = match mouse.kind {
            MouseEventKind::ScrollUp => -WHEEL,
            MouseEventKind::ScrollDown => WHEEL,
            _ => return,
        };
        match (&mut self.overlay, &self.view) {
            (
                Some(Overlay::History {
                    history: Some(view),
                    ..
                }),
                _,
            ) => view.scroll_by(-delta),
            (Some(Overlay::Approve { modal, .. }), _) => {
                modal.scroll = modal.scroll.saturating_add_signed(delta);
            }
            (Some(_), _) => {}
            (None, View::Feed { .. }) => self.feed.scroll_by(-delta),
            (None, View::List) => {
                let index = self.selected_index();
                self.select_index(index.saturating_add_signed(delta.signum()));
            }
        }
    }
}

#[cfg(test)]
#[path = "keys_tests.rs"]
mod tests;
