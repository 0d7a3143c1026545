//! Per-session WebSocket state: the projected messages with their session-scoped `seq`, kept
//! for replay, and the one live connection they are delivered to.
//!
//! `seq` counts per session across connections, not per connection as the seed's table
//! says: that is what lets `?last_seq=N` on a new connection name what the old one saw.
//!
//! The buffer is the only copy of what is waiting to go out: the live connection holds a
//! cursor into it (the next `seq` to send), not a queue of its own, so a client that stops
//! reading costs no memory beyond the buffer, which is bounded in frames and bytes. A
//! connection falls behind when what it has not taken yet exceeds [`MAX_BACKLOG_FRAMES`] or
//! [`MAX_BACKLOG_BYTES`] (or more than its own replay, if that was larger), or when the
//! buffer must drop a message it has not sent: it is then told to close (1013) and let go,
//! and the buffer still holds everything after what it sent, for a reconnect with
//! `last_seq` (the caps leave the buffer room for what streams meanwhile).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::Resume;
use super::projection::{Message, Projector};
use crate::event::{Payload, Status, Timestamp};
use crate::host::manager::Handle;

/// Upper bound on buffered messages per session, whatever the window (token streams are long).
const MAX_BUFFERED: usize = 20_000;
/// Upper bound on the buffered messages' bytes per session.
const MAX_BUFFERED_BYTES: usize = 16 << 20;
/// A connection this many messages behind the newest one has fallen behind.
pub const MAX_BACKLOG_FRAMES: u64 = 5_000;
/// A connection this many bytes behind the newest message has fallen behind.
pub const MAX_BACKLOG_BYTES: u64 = 4 << 20;

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
    /// The next `seq` to hand to the connection, and the bytes pushed before it.
    cursor: u64,
    cursor_bytes: u64,
    /// The backlog this connection may have before it counts as behind.
    allowed_frames: u64,
    allowed_bytes: u64,
    /// Woken when a message arrives for it.
    wake: Arc<Notify>,
    /// Cancelled when another connection takes over (close 1001).
    replaced: CancellationToken,
    /// Cancelled when it fell behind (close 1013).
    behind: CancellationToken,
}

struct State {
    next_seq: u64,
    /// The `seq` of the last message pruned from the buffer (0: none): a resume after it is
    /// served from the buffer, one before it gets the current state only.
    dropped_upto: u64,
    /// Numbering by envelope: the envelope being numbered, the next index of its own
    /// messages, and of messages this process adds (connection replies, `agent_state`).
    slot: u64,
    slot_index: u64,
    slot_extra: u64,
    /// Bytes of every message ever pushed: a message's offset is the total before it.
    pushed_bytes: u64,
    buffer: VecDeque<Buffered>,
    buffered_bytes: usize,
    live: Option<Live>,
    last_disconnect: Option<Instant>,
    projector: Projector,
    /// The project instructions the session loaded as it opened, before anyone could
    /// connect: each new connection is told, as it is told the agent's state.
    instructions: Option<Message>,
    /// The `seq` of the last `instructions` message pushed, to tell whether a replay from
    /// the start already carries it.
    instructions_seq: Option<u64>,
}

pub struct Channel {
    session_id: String,
    /// A node's session: `seq`s come from envelopes (see [`ENVELOPE_SHIFT`]).
    by_envelope: bool,
    window: Duration,
    /// Cancelled once the session is dead and everything it said is pushed.
    ended: CancellationToken,
    state: Mutex<State>,
}

/// What a new connection starts with.
pub struct Attached {
    pub conn: u64,
    pub wake: Arc<Notify>,
    pub replaced: CancellationToken,
    pub behind: CancellationToken,
}

/// What a connection gets when it asks for more.
pub enum Next {
    /// Messages to send, oldest first.
    Send(Vec<Arc<str>>),
    /// Nothing new: wait for the connection's `wake`.
    Wait,
    /// The connection is no longer the live one (replaced, or fell behind).
    Gone,
}

/// How many messages a connection takes at once (sent without a flush between them).
const BATCH: usize = 64;

impl Channel {
    /// Cancelled once the session died: what is buffered is all there will be.
    pub fn ended(&self) -> &CancellationToken {
        &self.ended
    }

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

    /// The live connection fell behind: it is told to close and let go of, so nothing more
    /// is kept for it than for anyone who may reconnect.
    fn drop_behind(state: &mut State, now: Instant) {
        if let Some(live) = state.live.take() {
            live.behind.cancel();
            state.last_disconnect = Some(now);
        }
    }

    /// Drops what nobody can ask for any more: messages are kept while someone is
    /// connected, and at least `window` after a disconnect, within the caps.
    fn prune(&self, state: &mut State, now: Instant) {
        let released = state.live.is_none()
            && state
                .last_disconnect
                .is_some_and(|d| now.duration_since(d) > self.window);
        while let Some(front) = state.buffer.front() {
            let expired = released && now.duration_since(front.at) > self.window;
            // The newest message stays, however large: it has not been offered to anyone.
            let full = state.buffer.len() > MAX_BUFFERED
                || (state.buffered_bytes > MAX_BUFFERED_BYTES && state.buffer.len() > 1);
            if !(expired || full) {
                break;
            }
            if state.live.as_ref().is_some_and(|l| l.cursor <= front.seq) {
                Self::drop_behind(state, now);
            }
            if let Some(gone) = state.buffer.pop_front() {
                state.buffered_bytes -= gone.text.len();
                state.dropped_upto = gone.seq;
            }
        }
    }

    /// The next message's `seq`: one more than the last, or, numbering by envelope, the
    /// next in its envelope's range (its own messages low, this process's high).
    fn next_seq(&self, state: &mut State, from_envelope: bool) -> u64 {
        if !self.by_envelope {
            state.next_seq += 1;
            return state.next_seq;
        }
        let low = if from_envelope {
            state.slot_index += 1;
            (state.slot_index - 1).min(OWN_BASE - 1)
        } else {
            state.slot_extra += 1;
            (OWN_BASE + state.slot_extra - 1).min(SLOT_MASK)
        };
        let seq = (state.slot << ENVELOPE_SHIFT) | low;
        state.next_seq = state.next_seq.max(seq);
        seq
    }

    fn push_locked(&self, state: &mut State, message: &Message) {
        self.push_numbered(state, message, false);
    }

    fn push_numbered(&self, state: &mut State, message: &Message, from_envelope: bool) {
        let seq = self.next_seq(state, from_envelope);
        let text = self.render(seq, message);
        if message.kind == "instructions" {
            state.instructions_seq = Some(seq);
        }
        let now = Instant::now();
        // What is unsent before this message: one large message alone is not a backlog.
        let before = state.pushed_bytes;
        state.pushed_bytes += text.len() as u64;
        state.buffered_bytes += text.len();
        state.buffer.push_back(Buffered { seq, at: now, text });
        self.prune(state, now);
        let Some(live) = &state.live else { return };
        let frames = unsent(state, live.cursor);
        let bytes = before.saturating_sub(live.cursor_bytes);
        if frames > live.allowed_frames || bytes > live.allowed_bytes {
            tracing::info!(target: "corral::ws",
                "session {}: connection {} fell behind ({frames} messages, {bytes} bytes \
                 unsent); closing it with 1013", self.session_id, live.id);
            Self::drop_behind(state, now);
        } else {
            live.wake.notify_one();
        }
    }

    /// Buffers the messages one envelope makes; false at the session's `dead` (nothing
    /// follows it).
    fn project(
        &self,
        state: &mut State,
        event: &crate::event::SharedEvent,
        mode: crate::host::manager::TurnMode,
    ) -> bool {
        if matches!(&event.envelope.payload, Payload::Status(s) if s.status == Status::Dead) {
            return false;
        }
        if let Payload::Instructions(data) = &event.envelope.payload {
            state.instructions = Some(super::projection::instructions(data));
        }
        if self.by_envelope && event.envelope.seq > state.slot {
            state.slot = event.envelope.seq;
            state.slot_index = 0;
            state.slot_extra = 0;
        }
        let out = state.projector.project(&event.envelope, mode);
        for message in &out {
            self.push_numbered(state, message, true);
        }
        true
    }

    /// Whether the envelope message `seq` names (numbering by envelope) has been taken in.
    pub fn reached(&self, seq: u64) -> bool {
        !self.by_envelope || lock(&self.state).slot >= seq >> ENVELOPE_SHIFT
    }

    /// Sends (and buffers) one message to whoever is connected.
    pub fn push(&self, message: &Message) {
        let mut state = lock(&self.state);
        self.push_locked(&mut state, message);
    }

    /// The next messages for connection `conn`; they count as sent from here on.
    pub fn take(&self, conn: u64) -> Next {
        let mut state = lock(&self.state);
        let state = &mut *state;
        let Some(live) = state.live.as_mut().filter(|l| l.id == conn) else {
            return Next::Gone;
        };
        // The cursor never falls off the front: pruning past it drops the connection.
        let cursor = live.cursor;
        let start = state.buffer.partition_point(|b| b.seq < cursor);
        let mut last = None;
        let out: Vec<Arc<str>> = state
            .buffer
            .range(start..)
            .take(BATCH)
            .map(|b| {
                last = Some(b.seq);
                b.text.clone()
            })
            .collect();
        let Some(last) = last else {
            return Next::Wait;
        };
        live.cursor = last + 1;
        live.cursor_bytes += out.iter().map(|t| t.len() as u64).sum::<u64>();
        Next::Send(out)
    }

    /// Attaches a connection, replacing (closing) the previous one. With `last_seq`, the
    /// buffered messages after it are sent first, unless the buffer no longer reaches
    /// back that far (from the start: back to seq 1); then the current `agent_state`
    /// follows either way.
    pub fn attach(&self, conn: u64, resume: Resume) -> Attached {
        let wake = Arc::new(Notify::new());
        let replaced = CancellationToken::new();
        let behind = CancellationToken::new();
        let mut state = lock(&self.state);
        self.prune(&mut state, Instant::now());
        if let Some(old) = state.live.take() {
            old.replaced.cancel();
        }
        let next = state.next_seq + 1;
        let last_seq = match resume {
            Resume::Fresh => None,
            Resume::FromStart => Some(0),
            Resume::After(n) => Some(n),
        };
        let cursor = match last_seq {
            // Numbering by envelope, a client may have seen more on another `serve` than
            // this one has taken in yet: it is served from there on as it arrives.
            Some(after) if after >= state.dropped_upto && (after < next || self.by_envelope) => {
                after + 1
            }
            _ => next,
        };
        // What this process adds now must come after what the client saw, should that have
        // been another `serve`'s own message of the same envelope.
        if let Some(after) =
            last_seq.filter(|a| self.by_envelope && a >> ENVELOPE_SHIFT == state.slot)
        {
            let low = after & SLOT_MASK;
            if low >= OWN_BASE {
                state.slot_extra = state.slot_extra.max(low - OWN_BASE + 1);
            }
        }
        let replay_bytes: u64 = state
            .buffer
            .iter()
            .filter(|b| b.seq >= cursor)
            .map(|b| b.text.len() as u64)
            .sum();
        state.live = Some(Live {
            id: conn,
            cursor,
            cursor_bytes: state.pushed_bytes - replay_bytes,
            // A long replay is not falling behind: it may be worked off, not added to.
            allowed_frames: MAX_BACKLOG_FRAMES.max(unsent(&state, cursor) + MAX_BACKLOG_FRAMES / 4),
            allowed_bytes: MAX_BACKLOG_BYTES.max(replay_bytes + MAX_BACKLOG_BYTES / 4),
            wake: wake.clone(),
            replaced: replaced.clone(),
            behind: behind.clone(),
        });
        let current = super::projection::agent_state(state.projector.state);
        self.push_locked(&mut state, &current);
        // A reconnect that names what it saw has had them; one from the start has them
        // unless its replay carried them.
        let told = match resume {
            Resume::Fresh => false,
            Resume::FromStart => state.instructions_seq.is_some_and(|s| s >= cursor),
            Resume::After(_) => true,
        };
        if let (false, Some(instructions)) = (told, state.instructions.clone()) {
            self.push_locked(&mut state, &instructions);
        }
        Attached {
            conn,
            wake,
            replaced,
            behind,
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

/// Buffered messages from `cursor` on.
fn unsent(state: &State, cursor: u64) -> u64 {
    (state.buffer.len() - state.buffer.partition_point(|b| b.seq < cursor)) as u64
}

/// Messages of a session a node runs are numbered from the envelope they come from: the
/// messages of envelope `n` take `seq`s from `n << ENVELOPE_SHIFT` on, so every `serve`
/// numbers them alike, whatever each one's own connections were told in between: what a
/// process adds itself (an `agent_state` at connect, a reply) takes numbers from
/// [`OWN_BASE`] within the range, which no envelope's messages reach.
const ENVELOPE_SHIFT: u32 = 16;
const SLOT_MASK: u64 = (1 << ENVELOPE_SHIFT) - 1;
const OWN_BASE: u64 = 1 << (ENVELOPE_SHIFT - 1);

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
        // A session a node runs is projected from its first envelope, so every `serve` in
        // front of the deployment numbers its messages alike and a client may resume with
        // `last_seq` on any of them.
        let from_start = handle.node().is_some();
        let working = !from_start
            && matches!(
                handle.session.status(),
                Status::Working | Status::WaitingApproval
            );
        let channel = Arc::new(Channel {
            session_id: handle.id().to_string(),
            by_envelope: from_start,
            window,
            ended: CancellationToken::new(),
            state: Mutex::new(State {
                next_seq: 0,
                dropped_upto: 0,
                slot: 0,
                slot_index: 0,
                slot_extra: 0,
                pushed_bytes: 0,
                buffer: VecDeque::new(),
                buffered_bytes: 0,
                live: None,
                last_disconnect: None,
                projector: Projector::new(working),
                instructions: None,
                instructions_seq: None,
            }),
        });
        // Tapped before the status check: a session dying in between still shows its `dead`.
        let opened_at = handle.session.last_seq();
        let mut events = handle.session.tap(if from_start { 0 } else { opened_at });
        lock(&channel.state).instructions = handle
            .session
            .subscribe(Some(0))
            .replay
            .iter()
            .rev()
            .filter(|e| e.envelope.seq <= opened_at)
            .find_map(|e| match &e.envelope.payload {
                Payload::Instructions(data) => Some(super::projection::instructions(data)),
                _ => None,
            });
        if handle.session.status() == Status::Dead {
            // Nothing more will happen here: no pump, nothing to keep (a pump would wait
            // forever on a session that never speaks again).
            channel.ended.cancel();
            return channel;
        }
        // A node's session is projected up to now before anyone attaches: a client resuming
        // from another `serve` names a message this one must already hold.
        if from_start {
            let mut state = lock(&channel.state);
            let mut alive = true;
            while let Ok(event) = events.try_recv() {
                if !channel.project(&mut state, &event, handle.last_mode()) {
                    alive = false;
                    break;
                }
            }
            drop(state);
            if !alive {
                channel.ended.cancel();
                return channel;
            }
        }
        channels.insert(handle.id().to_string(), channel.clone());
        let pump = channel.clone();
        let handle = handle.clone();
        let registry = self.channels.clone();
        tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                let mut state = lock(&pump.state);
                if !pump.project(&mut state, &event, handle.last_mode()) {
                    break;
                }
            }
            pump.ended.cancel();
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
