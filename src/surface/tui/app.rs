//! The session view's state and its loop: terminal input, the session's envelopes, the
//! results of slash commands and a tick, each applied to the state and the screen redrawn.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossterm::event::{
    Event as TermEvent, KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseEventKind,
};
use futures_util::StreamExt;
use tokio::sync::mpsc;

use crate::config::Tui as TuiConfig;
use crate::error::Error;
use crate::event::SharedEvent;
use crate::host::manager::{Handle, SessionManager, TurnRequest};

use super::super::run::{Exit, Stops};
use super::commands::{self, Done};
use super::editor::{Editor, EditorAction};
use super::history::History;
use super::mention::{self, FileIndex};
use super::notifier::Notifier;
use super::theme::Theme;
use super::view::Conversation;
use super::{ChatArgs, LOCAL_OWNER, Term};

/// How long a first Ctrl-C waits for the second.
const QUIT_WINDOW: Duration = Duration::from_secs(2);
/// Envelopes applied before the screen is drawn again: a fast stream is drawn in batches.
const BATCH: usize = 512;
/// The shortest time between two frames (about 30 a second).
const FRAME: Duration = Duration::from_millis(33);

/// A scrollable text shown over the conversation (`/help`, `/sessions`, a worktree diff).
pub struct Overlay {
    pub title: String,
    pub lines: Vec<ratatui::text::Line<'static>>,
    pub scroll: usize,
    /// For a list to pick from: the ids, in the order of `lines`, and the one selected.
    pub pick: Option<(Vec<String>, usize)>,
}

/// `@path` candidates for the word being typed.
pub struct Completion {
    pub start: usize,
    pub items: Vec<String>,
    pub selected: usize,
}

pub struct App {
    pub manager: SessionManager,
    pub handle: Arc<Handle>,
    events: Option<mpsc::UnboundedReceiver<SharedEvent>>,
    pub conversation: Conversation,
    pub editor: Editor,
    files: Option<FileIndex>,
    pub completion: Option<Completion>,
    pub overlay: Option<Overlay>,
    pub page: usize,
    /// The approval modal's state (see `approval::Modal`).
    pub modal: super::approval::Modal,
    pub theme: Theme,
    quit_armed: Option<Instant>,
    quit: bool,
    /// Something the status line says for a moment (a hint, a command in progress).
    pub flash: Option<(String, Instant)>,
    done_tx: mpsc::UnboundedSender<Done>,
    done_rx: mpsc::UnboundedReceiver<Done>,
    notifier: Notifier,
    pub args: ChatArgs,
    pub frame: usize,
}

impl App {
    pub fn new(
        manager: SessionManager,
        handle: Arc<Handle>,
        tui: TuiConfig,
        args: ChatArgs,
    ) -> App {
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        let history = History::for_project(&handle.meta.cwd);
        let mut app = App {
            manager,
            handle: handle.clone(),
            events: None,
            conversation: Conversation::default(),
            editor: Editor::new(history),
            files: None,
            completion: None,
            overlay: None,
            page: 10,
            modal: super::approval::Modal::default(),
            theme: Theme::from_env(),
            quit_armed: None,
            quit: false,
            flash: None,
            done_tx,
            done_rx,
            notifier: Notifier::new(tui),
            args,
            frame: 0,
        };
        app.attach(handle);
        app
    }

    pub fn session_id(&self) -> String {
        self.handle.id().to_string()
    }

    /// The session shown last: once closed, whether it left anything to continue.
    pub fn session(&self) -> Arc<crate::session::Session> {
        self.handle.session.clone()
    }

    /// Shows `handle`'s session: what its log holds so far, then its live envelopes.
    pub fn attach(&mut self, handle: Arc<Handle>) {
        self.conversation = Conversation::default();
        let mut last_seq = 0;
        if let Some(path) = handle.session.log_path() {
            match crate::session::read_log(path) {
                Ok(envelopes) => {
                    for envelope in &envelopes {
                        self.conversation.transcript.apply(envelope);
                        last_seq = last_seq.max(envelope.seq);
                    }
                }
                Err(e) => self
                    .conversation
                    .transcript
                    .error(format!("cannot read the session's log: {e}")),
            }
        }
        self.conversation
            .transcript
            .keep_requests(&handle.session.pending_permissions());
        self.events = Some(handle.session.tap(last_seq));
        self.files = None;
        self.handle = handle;
    }

    /// Lines opening printed (the worktree made), as notices.
    pub fn note_lines(&mut self, notes: &[u8]) {
        for line in String::from_utf8_lossy(notes).lines() {
            if !line.trim().is_empty() {
                self.conversation.transcript.notice(line.to_string());
            }
        }
    }

    pub fn flash(&mut self, text: impl Into<String>) {
        self.flash = Some((text.into(), Instant::now()));
    }

    pub fn done_sender(&self) -> mpsc::UnboundedSender<Done> {
        self.done_tx.clone()
    }

    pub async fn run(&mut self, terminal: &mut Term, stops: &mut Stops) -> Result<Exit, Error> {
        let mut input = crossterm::event::EventStream::new();
        let mut tick = tokio::time::interval(Duration::from_millis(200));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        if let Some(prompt) = self.args.prompt.take() {
            self.send(prompt);
        }
        let mut last_draw: Option<Instant> = None;
        let mut dirty = true;
        loop {
            // At most one frame per FRAME: a fast stream is drawn in batches, and drawing
            // (whose cost grows with what changed) cannot be driven by a hostile stream.
            if dirty && last_draw.is_none_or(|t| t.elapsed() >= FRAME) {
                terminal
                    .draw(|frame| super::ui::draw(frame, self))
                    .map_err(|e| Error::Runtime(format!("cannot draw on the terminal: {e}")))?;
                last_draw = Some(Instant::now());
                dirty = false;
            }
            if self.quit {
                return Ok(Exit::Ok);
            }
            let events_open = self.events.is_some();
            let owed = dirty;
            let next_frame =
                tokio::time::Instant::from_std(last_draw.unwrap_or_else(Instant::now) + FRAME);
            tokio::select! {
                () = tokio::time::sleep_until(next_frame), if owed => {}
                event = input.next() => match event {
                    Some(Ok(event)) => self.on_terminal(event),
                    Some(Err(e)) => {
                        return Err(Error::Runtime(format!("cannot read the terminal: {e}")));
                    }
                    None => return Ok(Exit::Ok),
                },
                envelope = next_event(&mut self.events), if events_open => match envelope {
                    Some(envelope) => self.apply(envelope),
                    None => self.events = None,
                },
                Some(done) = self.done_rx.recv() => self.on_done(done),
                _ = tick.tick() => self.on_tick(),
                exit = stops.next() => return Ok(exit),
            }
            dirty = true;
        }
    }

    fn apply(&mut self, first: SharedEvent) {
        self.conversation.transcript.apply(&first.envelope);
        if let Some(events) = &mut self.events {
            for _ in 0..BATCH {
                match events.try_recv() {
                    Ok(event) => self.conversation.transcript.apply(&event.envelope),
                    Err(_) => break,
                }
            }
        }
        self.notifier.saw(self.conversation.transcript.pending());
    }

    fn on_tick(&mut self) {
        self.frame = self.frame.wrapping_add(1);
        if self.quit_armed.is_some_and(|t| t.elapsed() > QUIT_WINDOW) {
            self.quit_armed = None;
        }
        if self
            .flash
            .as_ref()
            .is_some_and(|(_, t)| t.elapsed() > Duration::from_secs(4))
        {
            self.flash = None;
        }
        self.notifier
            .tick(self.conversation.transcript.pending(), self.handle.id());
    }

    fn on_done(&mut self, done: Done) {
        commands::finish(self, done);
    }

    fn on_terminal(&mut self, event: TermEvent) {
        match event {
            TermEvent::Key(key) if key.kind != KeyEventKind::Release => self.on_key(key),
            TermEvent::Paste(text) => {
                self.editor.insert_str(&text);
                self.update_completion();
            }
            TermEvent::Mouse(mouse) => match mouse.kind {
                MouseEventKind::ScrollUp => self.scroll_by(3),
                MouseEventKind::ScrollDown => self.scroll_by(-3),
                _ => {}
            },
            TermEvent::FocusGained => self.notifier.focus(true),
            TermEvent::FocusLost => self.notifier.focus(false),
            _ => {}
        }
    }

    pub fn scroll_by(&mut self, lines: isize) {
        if let Some(overlay) = &mut self.overlay {
            overlay.scroll = overlay.scroll.saturating_add_signed(-lines);
            return;
        }
        self.conversation.scroll_by(lines);
    }

    fn on_key(&mut self, key: KeyEvent) {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl
            && key.code == KeyCode::Char('c')
            && self.conversation.transcript.pending().is_empty()
        {
            self.ctrl_c();
            return;
        }
        if !self.conversation.transcript.pending().is_empty() {
            super::approval::key(self, &key);
            return;
        }
        if self.overlay.is_some() {
            self.overlay_key(&key);
            return;
        }
        if self.completion.is_some() && self.completion_key(&key) {
            return;
        }
        match key.code {
            KeyCode::Esc => {
                if self.conversation.transcript.is_working() {
                    self.interrupt();
                }
                return;
            }
            KeyCode::PageUp => return self.scroll_by(self.page as isize),
            KeyCode::PageDown => return self.scroll_by(-(self.page as isize)),
            KeyCode::Home if ctrl => return self.conversation.scroll = usize::MAX / 2,
            KeyCode::End if ctrl => return self.conversation.scroll = 0,
            KeyCode::Char('t') if ctrl => {
                let folded = self.conversation.transcript.toggle_thoughts();
                self.flash(if folded {
                    "thoughts folded"
                } else {
                    "thoughts shown"
                });
                return;
            }
            KeyCode::Char('l') if ctrl => return,
            _ => {}
        }
        match self.editor.key(&key) {
            EditorAction::Submit(text) => {
                self.completion = None;
                self.conversation.scroll = 0;
                if commands::is_command(text.trim()) {
                    commands::run(self, text.trim());
                } else {
                    self.send(text);
                }
            }
            EditorAction::Edited => self.update_completion(),
            EditorAction::Ignored => {}
        }
    }

    fn ctrl_c(&mut self) {
        if self.conversation.transcript.is_working() {
            self.interrupt();
        } else if !self.editor.is_empty() {
            self.editor.clear();
            self.completion = None;
        } else if self.quit_armed.is_some() {
            self.quit = true;
            return;
        }
        self.quit_armed = Some(Instant::now());
        self.flash("Ctrl-C again to quit");
    }

    pub fn quit(&mut self) {
        self.quit = true;
    }

    pub fn interrupt(&mut self) {
        match self.manager.cancel(self.handle.id()) {
            Ok(true) => self.flash("cancelling the turn…"),
            Ok(false) => {}
            Err(e) => self.conversation.transcript.error(e.to_string()),
        }
    }

    /// Sends a prompt, each `@file` it mentions inlined.
    pub fn send(&mut self, text: String) {
        let (prompt, notes) = mention::inline(&text, &self.handle.meta.cwd);
        for note in notes {
            self.conversation.transcript.notice(note);
        }
        if let Err(e) = self
            .manager
            .send(self.handle.id(), &prompt, TurnRequest::default())
        {
            // Nothing typed is lost: it goes back into the input.
            self.conversation
                .transcript
                .error(format!("{e}: wait for it, or Esc to cancel it"));
            self.editor.set_text(&text);
        }
    }

    fn overlay_key(&mut self, key: &KeyEvent) {
        let Some(overlay) = &mut self.overlay else {
            return;
        };
        match key.code {
            KeyCode::Esc | KeyCode::Char('q') => self.overlay = None,
            KeyCode::Up => match &mut overlay.pick {
                Some((_, selected)) => *selected = selected.saturating_sub(1),
                None => overlay.scroll = overlay.scroll.saturating_sub(1),
            },
            KeyCode::Down => match &mut overlay.pick {
                Some((ids, selected)) => {
                    *selected = (*selected + 1).min(ids.len().saturating_sub(1))
                }
                None => overlay.scroll += 1,
            },
            KeyCode::PageUp => overlay.scroll = overlay.scroll.saturating_sub(self.page),
            KeyCode::PageDown => overlay.scroll += self.page,
            KeyCode::Enter => {
                let picked = overlay
                    .pick
                    .as_ref()
                    .and_then(|(ids, selected)| ids.get(*selected).cloned());
                self.overlay = None;
                if let Some(id) = picked {
                    commands::run(self, &format!("/resume {id}"));
                }
            }
            _ => {}
        }
    }

    /// Keys for the candidates popup; whether the key was one.
    fn completion_key(&mut self, key: &KeyEvent) -> bool {
        let Some(completion) = &mut self.completion else {
            return false;
        };
        match key.code {
            KeyCode::Up => {
                completion.selected = completion.selected.saturating_sub(1);
            }
            KeyCode::Down => {
                completion.selected =
                    (completion.selected + 1).min(completion.items.len().saturating_sub(1));
            }
            KeyCode::Tab | KeyCode::Enter => {
                if let Some(path) = completion.items.get(completion.selected) {
                    let text = format!("@{path} ");
                    let start = completion.start;
                    self.editor.replace_word(start, &text);
                }
                self.completion = None;
            }
            KeyCode::Esc => self.completion = None,
            _ => return false,
        }
        true
    }

    /// Opens, narrows or closes the `@path` popup for the word at the cursor.
    fn update_completion(&mut self) {
        let (start, word) = self.editor.word_before_cursor();
        let Some(typed) = word.strip_prefix('@') else {
            self.completion = None;
            return;
        };
        let root = self.handle.meta.cwd.clone();
        let files = self.files.get_or_insert_with(|| FileIndex::build(&root));
        let items = files.matches(typed);
        self.completion = (!items.is_empty()).then_some(Completion {
            start,
            items,
            selected: 0,
        });
    }

    /// Replaces the session shown (after `/clear` or `/resume`).
    pub fn switch_to(&mut self, handle: Arc<Handle>, notes: &[u8]) {
        let old = self.handle.id().to_string();
        let manager = self.manager.clone();
        tokio::spawn(async move {
            let _ = manager.close(&old).await;
        });
        self.attach(handle);
        self.note_lines(notes);
    }

    pub fn owner() -> &'static str {
        LOCAL_OWNER
    }
}

async fn next_event(
    events: &mut Option<mpsc::UnboundedReceiver<SharedEvent>>,
) -> Option<SharedEvent> {
    match events {
        Some(events) => events.recv().await,
        None => std::future::pending().await,
    }
}
