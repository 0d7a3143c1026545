//! Per-session WebSocket state: the projected messages with their session-scoped `seq`, kept
//! for replay, and the one live connection they are delivered to.
//!
//! `seq` counts per session across connections, not per connection as the seed's table
//! says: that is what lets `?last_seq=N` on a new connection name what the old one saw.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::projection::{Message, Projector};
use crate::event::{Payload, Status, Timestamp};
use crate::session::manager::Handle;

/// Upper bound on buffered messages per session, whatever the window (token streams are long).
const MAX_BUFFERED: usize = 20_000;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

struct Buffered {
    seq: u64,
    at: Instant,
    text: Arc<str>,
}

struct Live {
    id: u64,
    sender: mpsc::UnboundedSender<Arc<str>>,
    /// Cancelled when another connection takes over (close 1001).
    replaced: CancellationToken,
}

struct State {
    next_seq: u64,
    buffer: VecDeque<Buffered>,
    live: Option<Live>,
    last_disconnect: Option<Instant>,
    projector: Projector,
}

pub struct Channel {
    session_id: String,
    window: Duration,
    state: Mutex<State>,
}

/// What a new connection starts with.
pub struct Attached {
    pub conn: u64,
    pub receiver: mpsc::UnboundedReceiver<Arc<str>>,
    pub replaced: CancellationToken,
}

impl Channel {
    fn render(&self, seq: u64, message: &Message) -> Arc<str> {
        let value = json!({
            "type": message.kind,
            "session_id": self.session_id,
            "payload": message.payload,
            "seq": seq,
            "ts": Timestamp::now(),
        });
        Arc::from(value.to_string())
    }

    /// Drops what nobody can ask for any more: messages are kept while someone is
    /// connected, and at least `window` after a disconnect.
    fn prune(&self, state: &mut State, now: Instant) {
        let released = state.live.is_none()
            && state
                .last_disconnect
                .is_some_and(|d| now.duration_since(d) > self.window);
        while let Some(front) = state.buffer.front() {
            let expired = released && now.duration_since(front.at) > self.window;
            if expired || state.buffer.len() >= MAX_BUFFERED {
                state.buffer.pop_front();
            } else {
                break;
            }
        }
    }

    fn push_locked(&self, state: &mut State, message: &Message) {
        state.next_seq += 1;
        let seq = state.next_seq;
        let text = self.render(seq, message);
        let now = Instant::now();
        self.prune(state, now);
        state.buffer.push_back(Buffered {
            seq,
            at: now,
            text: text.clone(),
        });
        if let Some(live) = &state.live {
            let _ = live.sender.send(text);
        }
    }

    /// Sends (and buffers) one message to whoever is connected.
    pub fn push(&self, message: &Message) {
        let mut state = lock(&self.state);
        self.push_locked(&mut state, message);
    }

    /// Attaches a connection, replacing (closing) the previous one. With `last_seq`, the
    /// buffered messages after it are queued first, unless the buffer no longer reaches
    /// back that far; then the current `agent_state` follows either way.
    pub fn attach(&self, conn: u64, last_seq: Option<u64>) -> Attached {
        let (sender, receiver) = mpsc::unbounded_channel();
        let replaced = CancellationToken::new();
        let mut state = lock(&self.state);
        self.prune(&mut state, Instant::now());
        if let Some(old) = state.live.take() {
            old.replaced.cancel();
        }
        if let Some(after) = last_seq {
            let oldest = state.buffer.front().map_or(state.next_seq + 1, |b| b.seq);
            let complete = after + 1 >= oldest && after <= state.next_seq;
            if complete {
                for b in state.buffer.iter().filter(|b| b.seq > after) {
                    let _ = sender.send(b.text.clone());
                }
            }
        }
        state.live = Some(Live {
            id: conn,
            sender,
            replaced: replaced.clone(),
        });
        let current = super::projection::agent_state(state.projector.state);
        self.push_locked(&mut state, &current);
        Attached {
            conn,
            receiver,
            replaced,
        }
    }

    pub fn detach(&self, conn: u64) {
        let mut state = lock(&self.state);
        if state.live.as_ref().is_some_and(|l| l.id == conn) {
            state.live = None;
            state.last_disconnect = Some(Instant::now());
        }
    }
}

type Channels = Arc<Mutex<HashMap<String, Arc<Channel>>>>;

#[derive(Default)]
pub struct Hub {
    /// Shared with the pumps: a pump removes its channel when its session dies, so a
    /// reopened id gets a fresh channel and dead sessions cost nothing.
    channels: Channels,
    next_conn: Mutex<u64>,
}

impl Hub {
    pub fn next_conn(&self) -> u64 {
        let mut n = lock(&self.next_conn);
        *n += 1;
        *n
    }

    /// The channel of a session, started on first use: a task projects the session's
    /// envelopes from now on until the session dies.
    pub fn channel(&self, handle: &Arc<Handle>, window: Duration) -> Arc<Channel> {
        let mut channels = lock(&self.channels);
        if let Some(c) = channels.get(handle.id()) {
            return c.clone();
        }
        let working = matches!(
            handle.session.status(),
            Status::Working | Status::WaitingApproval
        );
        let channel = Arc::new(Channel {
            session_id: handle.id().to_string(),
            window,
            state: Mutex::new(State {
                next_seq: 0,
                buffer: VecDeque::new(),
                live: None,
                last_disconnect: None,
                projector: Projector::new(working),
            }),
        });
        // Tapped before the status check: a session dying in between still shows its `dead`.
        let mut events = handle.session.tap(handle.session.last_seq());
        if handle.session.status() == Status::Dead {
            // Nothing more will happen here: no pump, nothing to keep (a pump would wait
            // forever on a session that never speaks again).
            return channel;
        }
        channels.insert(handle.id().to_string(), channel.clone());
        let pump = channel.clone();
        let handle = handle.clone();
        let registry = self.channels.clone();
        tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                if matches!(&event.envelope.payload,
                    Payload::Status(s) if s.status == Status::Dead)
                {
                    break;
                }
                let mut state = lock(&pump.state);
                let out = state.projector.project(&event.envelope, handle.last_mode());
                for message in &out {
                    pump.push_locked(&mut state, message);
                }
            }
            let mut channels = lock(&registry);
            if channels
                .get(&pump.session_id)
                .is_some_and(|c| Arc::ptr_eq(c, &pump))
            {
                channels.remove(&pump.session_id);
            }
        });
        channel
    }
}
