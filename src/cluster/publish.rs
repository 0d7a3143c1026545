//! A node's sessions into the stream: every envelope of a session, in seq order, on
//! `<prefix>.events.<session>`. The next envelope goes only once NATS acknowledged the one
//! before, so the stream holds a session's envelopes in its own order whatever fails; a
//! publish whose outcome is unknown (a timeout, a reconnect) is sent again under the same
//! message id, which the stream's duplicate window turns into a no-op.
//!
//! Each publish also says which stream sequence it expects last on the subject. When the
//! control plane has ended the session meanwhile (it wrote the session's `dead` because this
//! node stopped heartbeating), that check fails: the node is fenced off the session and
//! closes it rather than write after its end.
//!
//! An envelope larger than NATS's `max_payload` goes in parts (`Corral-Part: i/n`), each its
//! own message; followers join them.

use std::time::Duration;

use async_nats::jetstream::{self, context::PublishErrorKind, message::PublishMessage};
use bytes::Bytes;
use tokio::sync::mpsc;

use crate::event::{Payload, SharedEvent, Status};

pub const PART_HEADER: &str = "Corral-Part";

/// Room left in each message for its headers.
const HEADER_ROOM: usize = 1024;
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// The stream no longer accepts this session's envelopes from this node.
#[derive(Debug)]
pub struct Fenced;

/// Publishes `events` (a session's tap from its first envelope) until its `dead` is stored.
/// `Err(Fenced)`: the control plane ended the session first.
pub async fn publish_session(
    js: jetstream::Context,
    subject: String,
    mut events: mpsc::UnboundedReceiver<SharedEvent>,
    max_payload: usize,
) -> Result<(), Fenced> {
    let mut last = 0u64;
    while let Some(event) = events.recv().await {
        let dead =
            matches!(&event.envelope.payload, Payload::Status(s) if s.status == Status::Dead);
        publish_event(&js, &subject, &event, &mut last, max_payload).await?;
        if dead {
            break;
        }
    }
    Ok(())
}

fn parts(json: &str, max_payload: usize) -> Vec<Bytes> {
    let size = max_payload.saturating_sub(HEADER_ROOM).max(HEADER_ROOM);
    let bytes = Bytes::copy_from_slice(json.as_bytes());
    if bytes.len() <= size {
        return vec![bytes];
    }
    (0..bytes.len())
        .step_by(size)
        .map(|start| bytes.slice(start..(start + size).min(bytes.len())))
        .collect()
}

async fn publish_event(
    js: &jetstream::Context,
    subject: &str,
    event: &SharedEvent,
    last: &mut u64,
    max_payload: usize,
) -> Result<(), Fenced> {
    let session = &event.envelope.session;
    let seq = event.envelope.seq;
    let chunks = parts(&event.json, max_payload);
    let count = chunks.len();
    for (index, chunk) in chunks.into_iter().enumerate() {
        let id = if count == 1 {
            format!("{session}:{seq}")
        } else {
            format!("{session}:{seq}:{}", index + 1)
        };
        let mut backoff = Duration::from_millis(100);
        loop {
            let mut message = PublishMessage::build()
                .payload(chunk.clone())
                .message_id(&id)
                .expected_last_subject_sequence(*last);
            if count > 1 {
                message = message.header(PART_HEADER, format!("{}/{count}", index + 1).as_str());
            }
            let outcome = match js.send_publish(subject.to_string(), message).await {
                Ok(ack) => ack.await,
                Err(e) => Err(e),
            };
            match outcome {
                Ok(ack) => {
                    *last = ack.sequence;
                    break;
                }
                Err(e) if e.kind() == PublishErrorKind::WrongLastSequence => {
                    // Stored already (an earlier try whose ack was lost), or written over by
                    // the control plane.
                    match stored_as(js, subject, &id).await {
                        Some(sequence) => {
                            *last = sequence;
                            break;
                        }
                        None => return Err(Fenced),
                    }
                }
                Err(e) => {
                    tracing::warn!(target: "corral::cluster", %session, seq, error = %e, "publishing an envelope; trying again");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }
    Ok(())
}

/// The stream sequence of the subject's last message if it is message `id`.
async fn stored_as(js: &jetstream::Context, subject: &str, id: &str) -> Option<u64> {
    let stream = js.stream_by_subject(subject).await.ok()?;
    let stream = js.get_stream(stream).await.ok()?;
    let last = stream.get_last_raw_message_by_subject(subject).await.ok()?;
    let stored_id = last.headers.get("Nats-Msg-Id")?.as_str().to_string();
    (stored_id == id).then_some(last.sequence)
}

/// Joins the parts of envelopes published in parts, in order.
#[derive(Default)]
pub struct Joiner {
    /// Per session: the last part's index, the bytes so far, the first part's stream sequence.
    partial: std::collections::HashMap<String, (usize, Vec<u8>, u64)>,
}

impl Joiner {
    /// The whole envelope once its last part is in; `None` meanwhile. A part out of order
    /// (a publisher that restarted mid-envelope) drops what was gathered; a first part
    /// starts over (a follower reading again from an earlier point).
    pub fn take(
        &mut self,
        session: &str,
        part: Option<&str>,
        payload: &[u8],
        sequence: u64,
    ) -> Option<Vec<u8>> {
        let Some((index, count)) = part.and_then(|p| p.split_once('/')).and_then(|(i, n)| {
            Some((
                i.trim().parse::<usize>().ok()?,
                n.trim().parse::<usize>().ok()?,
            ))
        }) else {
            self.partial.remove(session);
            return Some(payload.to_vec());
        };
        let entry = self
            .partial
            .entry(session.to_string())
            .or_insert((0, Vec::new(), sequence));
        if index == 1 || index != entry.0 + 1 {
            *entry = (0, Vec::new(), sequence);
            if index != 1 {
                self.partial.remove(session);
                return None;
            }
        }
        entry.0 = index;
        entry.1.extend_from_slice(payload);
        if index == count {
            return self.partial.remove(session).map(|(_, bytes, _)| bytes);
        }
        None
    }

    /// The stream sequence to read again from so that no envelope begun is lost: the first
    /// part of the oldest one not yet whole.
    pub fn oldest_partial(&self) -> Option<u64> {
        self.partial.values().map(|(_, _, first)| *first).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_envelope_is_split_and_joined_again() {
        let json = "x".repeat(5000);
        let chunks = parts(&json, 2048);
        assert_eq!(chunks.len(), 5);
        let mut joiner = Joiner::default();
        let mut whole = None;
        for (i, chunk) in chunks.iter().enumerate() {
            let part = format!("{}/{}", i + 1, chunks.len());
            whole = joiner.take("s", Some(&part), chunk, i as u64 + 10);
            if whole.is_none() {
                assert_eq!(joiner.oldest_partial(), Some(10));
            }
            assert_eq!(whole.is_some(), i + 1 == chunks.len());
        }
        assert_eq!(whole.unwrap(), json.as_bytes());
        assert_eq!(parts("small", 2048).len(), 1);
    }

    #[test]
    fn a_part_out_of_order_drops_the_partial_envelope() {
        let mut joiner = Joiner::default();
        assert!(joiner.take("s", Some("1/3"), b"a", 1).is_none());
        assert!(joiner.take("s", Some("3/3"), b"c", 2).is_none());
        assert_eq!(joiner.oldest_partial(), None);
        assert!(joiner.take("s", Some("1/2"), b"x", 3).is_none());
        // Read again from the first part: it starts over, not doubled.
        assert!(joiner.take("s", Some("1/2"), b"x", 3).is_none());
        assert_eq!(joiner.take("s", Some("2/2"), b"y", 4).unwrap(), b"xy");
        assert_eq!(joiner.take("s", None, b"{}", 5).unwrap(), b"{}");
        assert_eq!(joiner.oldest_partial(), None);
    }
}
