//! How a control plane keeps up with its deployment: the nodes and sessions buckets
//! watched (their last values, then every change), and every envelope of the events stream
//! taken into the mirror of its session.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream::consumer::{DeliverPolicy, pull};
use async_nats::jetstream::kv::Operation;
use futures_util::StreamExt;

use super::control::{Cluster, NodeState, lock_state};
use super::publish::{Joiner, PART_HEADER};
use super::wire::{Announce, Assignment, Opened};
use crate::event::Envelope;
use crate::host::manager::{Handle, RemoteSpec};

/// Envelopes held for a session not known yet (its assignment is on its way), at most.
const MAX_PENDING: usize = 50_000;

impl Cluster {
    /// Follows a bucket's keys: the last value of each, then every change. A watch that
    /// fails (NATS restarted) is made again; replaying values already seen is harmless.
    pub(super) async fn follow_bucket(
        self: Arc<Self>,
        mut watch: async_nats::jetstream::kv::Watch,
        nodes: bool,
    ) {
        loop {
            while let Some(entry) = watch.next().await {
                match entry {
                    Ok(entry) if nodes => self.node_entry(entry),
                    Ok(entry) => self.session_entry(entry),
                    Err(e) => {
                        tracing::warn!(target: "corral::cluster", error = %e, "watching a bucket; watching it again");
                        break;
                    }
                }
            }
            loop {
                tokio::time::sleep(Duration::from_millis(500)).await;
                let store = if nodes {
                    &self.stores.nodes
                } else {
                    &self.stores.sessions
                };
                match store.watch_with_history(">").await {
                    Ok(again) => {
                        watch = again;
                        break;
                    }
                    Err(e) => {
                        tracing::debug!(target: "corral::cluster", error = %e, "watching a bucket again")
                    }
                }
            }
        }
    }

    /// Takes a heartbeat read directly; whether it was newer than the last one seen.
    pub(super) fn node_entry_seen(&self, entry: async_nats::jetstream::kv::Entry) -> bool {
        let newer = lock_state(self)
            .nodes
            .get(&entry.key)
            .is_none_or(|n| n.revision < entry.revision);
        self.node_entry(entry);
        newer
    }

    fn node_entry(&self, entry: async_nats::jetstream::kv::Entry) {
        let mut state = lock_state(self);
        match entry.operation {
            Operation::Put => match serde_json::from_slice::<Announce>(&entry.value) {
                // A heartbeat seen again (a watch made again) is no sign of life.
                Ok(_)
                    if state
                        .nodes
                        .get(&entry.key)
                        .is_some_and(|n| n.revision >= entry.revision) => {}
                // Its name becomes a subject: only the key it is stored under, and a plain one.
                Ok(announce)
                    if announce.name != entry.key || !super::valid_node_name(&announce.name) =>
                {
                    tracing::warn!(target: "corral::cluster", node = %entry.key, "a heartbeat under another name than its key; ignored");
                }
                Ok(announce) => {
                    state.nodes.insert(
                        entry.key,
                        NodeState {
                            announce,
                            seen: Instant::now(),
                            withdrawn: false,
                            revision: entry.revision,
                        },
                    );
                }
                Err(e) => {
                    tracing::warn!(target: "corral::cluster", node = %entry.key, error = %e, "a heartbeat that is not a node's")
                }
            },
            Operation::Delete | Operation::Purge => {
                if let Some(node) = state.nodes.get_mut(&entry.key) {
                    node.withdrawn = true;
                    node.revision = entry.revision;
                }
            }
        }
    }

    fn session_entry(&self, entry: async_nats::jetstream::kv::Entry) {
        match entry.operation {
            Operation::Put => match serde_json::from_slice::<Assignment>(&entry.value) {
                Ok(assignment) => {
                    self.assigned(assignment);
                }
                Err(e) => {
                    tracing::warn!(target: "corral::cluster", session = %entry.key, error = %e, "an assignment that does not parse")
                }
            },
            Operation::Delete | Operation::Purge => {
                let mut state = lock_state(self);
                state.assignments.remove(&entry.key);
                state.pending.remove(&entry.key);
            }
        }
    }

    /// Records an assignment; once its node opened the session, hosts its mirror.
    fn assigned(&self, assignment: Assignment) -> Option<Arc<Handle>> {
        lock_state(self)
            .assignments
            .insert(assignment.session.clone(), assignment.clone());
        let opened = assignment.opened.clone()?;
        self.attach(&assignment, opened)
    }

    pub(super) fn attach(&self, assignment: &Assignment, opened: Opened) -> Option<Arc<Handle>> {
        let id = assignment.session.clone();
        // Under the lock the consumer routes envelopes under: the pending ones go in first,
        // and nothing newer reaches the mirror before them.
        let mut state = lock_state(self);
        if let Some(handle) = self.manager.get(&id)
            && handle.node().is_some()
        {
            return Some(handle);
        }
        let spec = RemoteSpec {
            meta: opened.meta,
            owner: assignment.owner.clone(),
            node: assignment.node.clone(),
            backend: opened.backend,
            queues_prompts: opened.queues_prompts,
            steers: opened.steers,
            log_dir: Some(self.mirror_dir.path().to_path_buf()),
            forward: self.forward(),
        };
        let handle = match self.manager.attach_remote(spec) {
            Ok(handle) => handle,
            Err(e) => {
                tracing::error!(target: "corral::cluster", session = %id, error = %e, "hosting a mirror");
                return None;
            }
        };
        for (envelope, json) in state.pending.remove(&id).unwrap_or_default() {
            handle.session.ingest(envelope, json);
        }
        state.attached.insert(id);
        Some(handle)
    }

    /// Follows the events stream from the start (after a reconnect: from where it was).
    pub(super) async fn follow_events(self: Arc<Self>) {
        let filter = format!("{}.events.>", self.deployment.prefix);
        // Kept across reconnects: reading again starts at the first part of an envelope
        // not yet whole, so none is cut in two.
        let mut joiner = Joiner::default();
        loop {
            let after = lock_state(&self).followed;
            let start = joiner.oldest_partial().unwrap_or(after + 1);
            let deliver_policy = if start <= 1 {
                DeliverPolicy::All
            } else {
                DeliverPolicy::ByStartSequence {
                    start_sequence: start,
                }
            };
            let consumer = self
                .stores
                .stream
                .create_consumer(pull::OrderedConfig {
                    filter_subject: filter.clone(),
                    deliver_policy,
                    ..Default::default()
                })
                .await;
            let messages = match consumer {
                Ok(consumer) => consumer.messages().await,
                Err(e) => {
                    tracing::warn!(target: "corral::cluster", error = %e, "following the events stream");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            let mut messages = match messages {
                Ok(messages) => messages,
                Err(e) => {
                    tracing::warn!(target: "corral::cluster", error = %e, "following the events stream");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            while let Some(message) = messages.next().await {
                match message {
                    Ok(message) => self.take(&mut joiner, &message),
                    Err(e) => {
                        tracing::warn!(target: "corral::cluster", error = %e, "the events stream; following on");
                        break;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    fn take(&self, joiner: &mut Joiner, message: &async_nats::jetstream::Message) {
        let sequence = message.info().map(|i| i.stream_sequence).unwrap_or(0);
        let subject = message.subject.as_str();
        let Some(id) = subject.strip_prefix(&format!("{}.events.", self.deployment.prefix)) else {
            return;
        };
        let part = message
            .headers
            .as_ref()
            .and_then(|h| h.get(PART_HEADER))
            .map(|v| v.as_str().to_string());
        let whole = joiner.take(id, part.as_deref(), &message.payload, sequence);
        let mut state = lock_state(self);
        state.followed = state.followed.max(sequence);
        let last = state.last_sequence.entry(id.to_string()).or_insert(0);
        *last = (*last).max(sequence);
        let Some(bytes) = whole else { return };
        let parsed = String::from_utf8(bytes)
            .map_err(|e| e.to_string())
            .and_then(|json| {
                serde_json::from_str::<Envelope>(&json)
                    .map(|envelope| (envelope, json.into_boxed_str()))
                    .map_err(|e| e.to_string())
            });
        let (envelope, json) = match parsed {
            // An envelope is taken only for the session its subject names.
            Ok((envelope, _)) if *envelope.session != *id => {
                tracing::warn!(target: "corral::cluster", session = %id, sequence, "an envelope of another session on this one's subject; dropped");
                return;
            }
            Ok(parsed) => parsed,
            Err(e) => {
                tracing::warn!(target: "corral::cluster", session = %id, sequence, error = %e, "an envelope that does not parse");
                return;
            }
        };
        match self.manager.get(id).filter(|h| h.node().is_some()) {
            Some(handle) => {
                handle.session.ingest(envelope, json);
            }
            None if state.attached.contains(id) => {}
            None => {
                let waiting = state.pending.entry(id.to_string()).or_default();
                if waiting.len() < MAX_PENDING {
                    waiting.push((envelope, json));
                }
            }
        }
    }
}
