//! The state of `corral top`: the list, what is open over it, and what arrived from the
//! source. Keys change it (`keys`), updates from the source change it ([`App::update`]),
//! and `render` draws it; what needs the network or the disk goes out as a [`Command`].

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::board::{Board, Row};
use super::feed;
use crate::event::{Envelope, PermissionRequest};
use crate::policy::Decision;
use crate::surface::tui::Conversation;
use crate::surface::tui::theme::Theme;

/// Envelopes kept per session for its feed; older ones are in the history (`h`).
const FEED_KEEP: usize = 5000;

/// How long a notice stays in the footer.
const NOTICE_FOR: Duration = Duration::from_secs(6);

/// What the source sends the app.
#[derive(Debug)]
pub(super) enum Update {
    /// The whole list, as the source has it now.
    Sessions(Vec<Row>),
    /// A live envelope from the server's bus (folded into its row too).
    Bus(Box<Envelope>),
    /// Envelopes appended to the log of the local session whose feed is open.
    Tail(String, Vec<Envelope>),
    /// The bus connected (`None`) or dropped (why).
    Stream(Option<String>),
    /// Listing failed (why), or worked again (`None`).
    Listing(Option<String>),
    /// The open requests of a session, for the approval modal.
    Permissions(String, Vec<PermissionRequest>),
    History(String, History),
    /// The conversation before the first envelope the feed holds.
    Earlier(String, Vec<Value>),
    Notice(String),
}

/// A session's whole history, as its source gives it.
#[derive(Debug)]
pub(super) enum History {
    /// The server's `GET …/messages`.
    Messages(Vec<Value>),
    /// A local event log.
    Log(Vec<Envelope>),
}

/// What the app asks of the source.
#[derive(Debug, PartialEq)]
pub(super) enum Command {
    Refresh,
    Permissions(String),
    Answer {
        id: String,
        request: String,
        decision: Decision,
    },
    Cancel(String),
    Close(String),
    History(String),
    /// The feed of this session opened (server: fetch what came before the bus; local:
    /// follow its log), or closed (`None`).
    Watch(Option<String>),
}

#[derive(Debug, PartialEq)]
pub(super) enum View {
    List,
    /// One session's feed (drawn from [`App::feed`]).
    Feed {
        id: String,
    },
}

/// A conversation scrolled to its start, for reading from the beginning.
pub(super) fn from_the_top(mut view: Conversation) -> Conversation {
    // Lines up from the end; drawing keeps it within the conversation.
    view.scroll = usize::MAX / 2;
    view
}

pub(super) enum Overlay {
    /// `h`: loading until the history arrives.
    History {
        id: String,
        history: Option<Box<Conversation>>,
    },
    /// `a`: loading until the requests arrive; the request's body scrolled down `scroll`.
    Approve {
        id: String,
        request: Option<Box<PermissionRequest>>,
        /// Its scroll, its settle time and whether its end was seen (`tui::ApprovalModal`).
        modal: Box<crate::surface::tui::ApprovalModal>,
    },
    /// `x`: y closes, anything else does not.
    Close { id: String },
}

pub(super) struct App {
    /// The server's URL, or "local".
    pub source: String,
    /// Local mode: nothing can be answered, cancelled or closed from here.
    pub read_only: bool,
    pub board: Board,
    /// The selected session, kept by id so it stays selected as the list re-sorts.
    pub selected: Option<String>,
    pub view: View,
    pub overlay: Option<Overlay>,
    /// The filter is being typed.
    pub editing_filter: bool,
    /// Why the bus is down, if it is.
    pub stream_down: Option<String>,
    pub listing_failed: Option<String>,
    notice: Option<(String, Instant)>,
    pub events: HashMap<String, VecDeque<Envelope>>,
    pub earlier: HashMap<String, Vec<Value>>,
    /// The open feed's conversation.
    pub feed: Conversation,
    pub theme: Theme,
    pub quit: bool,
}

impl App {
    pub fn new(source: String, read_only: bool, rows: Vec<Row>) -> App {
        let mut board = Board::default();
        board.replace(rows);
        let mut app = App {
            source,
            read_only,
            board,
            selected: None,
            view: View::List,
            overlay: None,
            editing_filter: false,
            stream_down: None,
            listing_failed: None,
            notice: None,
            events: HashMap::new(),
            earlier: HashMap::new(),
            feed: Conversation::default(),
            theme: Theme::from_env(),
            quit: false,
        };
        app.select_index(0);
        app
    }

    pub fn notice(&self) -> Option<&str> {
        self.notice
            .as_ref()
            .filter(|(_, at)| at.elapsed() < NOTICE_FOR)
            .map(|(text, _)| text.as_str())
    }

    pub fn say(&mut self, text: impl Into<String>) {
        self.notice = Some((text.into(), Instant::now()));
    }

    /// The selected row's place in the list shown.
    pub fn selected_index(&self) -> usize {
        let visible = self.board.visible();
        self.selected
            .as_deref()
            .and_then(|id| visible.iter().position(|r| r.id == id))
            .unwrap_or(0)
    }

    pub fn select_index(&mut self, index: usize) {
        let visible = self.board.visible();
        let index = index.min(visible.len().saturating_sub(1));
        self.selected = visible.get(index).map(|r| r.id.clone());
    }

    /// The session the keys act on: the feed's, else the selected row's.
    pub fn target(&self) -> Option<String> {
        match &self.view {
            View::Feed { id, .. } => Some(id.clone()),
            View::List => {
                let visible = self.board.visible();
                visible.get(self.selected_index()).map(|r| r.id.clone())
            }
        }
    }

    fn watching(&self, id: &str) -> bool {
        matches!(&self.view, View::Feed { id: open } if open == id)
    }

    /// Opens the feed of `id`, from what is held of it.
    pub fn open_feed(&mut self, id: String) {
        let events = self.events.get(&id).into_iter().flatten();
        self.feed = feed::conversation(self.earlier.get(&id).map(Vec::as_slice), events);
        self.view = View::Feed { id };
    }

    fn push_events(&mut self, id: &str, envelopes: impl IntoIterator<Item = Envelope>) {
        let watching = self.watching(id);
        let buffer = self.events.entry(id.to_string()).or_default();
        for envelope in envelopes {
            // A bus that reconnects may send again what it sent.
            if buffer.back().is_some_and(|last| last.seq >= envelope.seq) {
                continue;
            }
            if watching {
                self.feed.apply(&envelope);
            }
            buffer.push_back(envelope);
        }
        while buffer.len() > FEED_KEEP {
            buffer.pop_front();
        }
    }

    /// Applies what the source sent; the commands it calls for in return.
    pub fn update(&mut self, update: Update) -> Vec<Command> {
        let mut commands = Vec::new();
        match update {
            Update::Sessions(rows) => {
                let index = self.selected_index();
                self.board.replace(rows);
                if self
                    .selected
                    .as_deref()
                    .and_then(|id| self.board.get(id))
                    .is_none()
                {
                    self.select_index(index);
                }
                self.listing_failed = None;
            }
            Update::Bus(envelope) => {
                use crate::event::Payload;
                if !self.board.apply(&envelope) {
                    commands.push(Command::Refresh);
                }
                // What the envelopes cannot tell exactly (pending counts, tokens after a
                // turn): the list again.
                if matches!(
                    envelope.payload,
                    Payload::Status(_) | Payload::Permission(_) | Payload::Result(_)
                ) {
                    commands.push(Command::Refresh);
                }
                let id = envelope.session.to_string();
                self.push_events(&id, [*envelope]);
            }
            Update::Tail(id, envelopes) => self.push_events(&id, envelopes),
            Update::Stream(down) => {
                if down.is_none() && self.stream_down.is_some() {
                    // Whatever happened while it was down that the ring no longer has.
                    commands.push(Command::Refresh);
                }
                self.stream_down = down;
            }
            Update::Listing(failed) => self.listing_failed = failed,
            Update::Permissions(id, requests) => {
                if let Some(Overlay::Approve {
                    id: open, request, ..
                }) = &mut self.overlay
                    && *open == id
                {
                    match requests.into_iter().next() {
                        Some(first) => *request = Some(Box::new(first)),
                        None => {
                            self.overlay = None;
                            self.say("nothing is waiting for an answer there");
                        }
                    }
                }
            }
            Update::History(id, history) => {
                if let Some(Overlay::History {
                    id: open,
                    history: slot,
                }) = &mut self.overlay
                    && *open == id
                {
                    let mut view = Conversation::default();
                    match history {
                        History::Messages(messages) => {
                            feed::push_messages(&mut view.transcript, &messages);
                        }
                        History::Log(envelopes) => envelopes.iter().for_each(|e| view.apply(e)),
                    }
                    *slot = Some(Box::new(from_the_top(view)));
                }
            }
            Update::Earlier(id, messages) => {
                if self.watching(&id) {
                    let events = self.events.get(&id).into_iter().flatten();
                    self.feed = feed::conversation(Some(&messages), events);
                }
                self.earlier.insert(id, messages);
            }
            Update::Notice(text) => self.say(text),
        }
        commands
    }
}
