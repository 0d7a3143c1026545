//! Live fan-out of a session's events with a replay ring, so a subscriber that joins late or
//! reconnects with `last_seq` loses nothing still in the ring.

use std::collections::VecDeque;

use tokio::sync::{broadcast, mpsc};

use crate::event::SharedEvent;

/// How many recent envelopes are kept for replay.
pub const RING_CAPACITY: usize = 4096;
/// At most this many bytes of them (serialized), beyond the newest one: a 100 MB answer
/// block must not stay in memory twice more (envelope and JSON) after it is logged. A
/// subscriber asking further back gets `gap` and reads the log.
pub const RING_BYTES: usize = 8 << 20;

pub struct Subscription {
    /// Buffered envelopes with `seq > after`, oldest first.
    pub replay: Vec<SharedEvent>,
    /// Everything published after the replay, in order.
    pub live: broadcast::Receiver<SharedEvent>,
    /// True when the ring no longer held every envelope after `after`.
    pub gap: bool,
}

pub struct EventBus {
    ring: VecDeque<SharedEvent>,
    ring_bytes: usize,
    sender: broadcast::Sender<SharedEvent>,
    /// Lossless in-process subscribers (the terminal, `--json` output): a slow reader must
    /// never drop an envelope, so these are unbounded rather than lagging.
    taps: Vec<mpsc::UnboundedSender<SharedEvent>>,
}

impl Default for EventBus {
    fn default() -> Self {
        let (sender, _) = broadcast::channel(RING_CAPACITY);
        EventBus {
            ring: VecDeque::with_capacity(256),
            ring_bytes: 0,
            sender,
            taps: Vec::new(),
        }
    }
}

impl EventBus {
    /// Callers serialize publishing (the session holds its lock), so ring order is seq order.
    pub fn publish(&mut self, event: SharedEvent) {
        self.ring_bytes += event.json.len();
        self.ring.push_back(event.clone());
        while self.ring.len() > RING_CAPACITY
            || (self.ring_bytes > RING_BYTES && self.ring.len() > 1)
        {
            if let Some(old) = self.ring.pop_front() {
                self.ring_bytes -= old.json.len();
            }
        }
        self.taps.retain(|tap| tap.send(event.clone()).is_ok());
        // No receivers is fine: nobody is listening right now.
        let _ = self.sender.send(event);
    }

    /// A lossless receiver: the ring's envelopes after `after` first, then everything
    /// published from now on.
    pub fn tap(&mut self, after: u64) -> mpsc::UnboundedReceiver<SharedEvent> {
        let (sender, receiver) = mpsc::unbounded_channel();
        for event in self.ring.iter().filter(|e| e.envelope.seq > after) {
            let _ = sender.send(event.clone());
        }
        self.taps.push(sender);
        receiver
    }

    /// Subscribe atomically: the replay and the live receiver meet without gap or overlap
    /// because both are taken while the publisher cannot run.
    pub fn subscribe(&self, after: Option<u64>) -> Subscription {
        let live = self.sender.subscribe();
        let after_seq = after.unwrap_or(0);
        let replay: Vec<SharedEvent> = match after {
            None => Vec::new(),
            Some(_) => self
                .ring
                .iter()
                .filter(|e| e.envelope.seq > after_seq)
                .cloned()
                .collect(),
        };
        let gap = after.is_some()
            && self
                .ring
                .front()
                .is_some_and(|first| first.envelope.seq > after_seq + 1);
        Subscription { replay, live, gap }
    }
}
