//! Nodes that stop heartbeating. Their sessions cannot go on, so the control plane ends them
//! in the stream itself: open permission requests are withdrawn, an `error` names the node,
//! and the session goes `dead` — envelopes like any other, so every `serve` and every client
//! sees the same end. Each is written after the last envelope the stream holds for the
//! session (the expected-last-sequence check): if the node, or another `serve`, wrote first,
//! this write is refused and the next check looks again. A node that comes back finds its
//! sessions ended and closes what it still runs (see `publish`).

use std::sync::{Arc, Weak};
use std::time::Duration;

use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::message::PublishMessage;
use serde_json::json;

use super::control::Cluster;
use crate::event::{
    Envelope, ErrorData, Payload, PermissionData, PermissionResolution, Status, StatusData,
    Timestamp,
};
use crate::host::manager::Handle;

const CHECK_EVERY: Duration = Duration::from_millis(250);

/// Checks the nodes until the control plane is gone.
pub async fn watch(cluster: Weak<Cluster>) {
    loop {
        tokio::time::sleep(CHECK_EVERY).await;
        let Some(cluster) = cluster.upgrade() else {
            return;
        };
        let lost = lost_sessions(&cluster);
        let mut confirmed: std::collections::HashMap<String, bool> = Default::default();
        for (handle, node, reason, silent) in lost {
            // Silence is checked at the source before anyone's session ends: the watch may
            // only be slow to come back after NATS restarted, and while NATS cannot be asked,
            // nobody is declared lost.
            let gone = !silent
                || match confirmed.get(&node) {
                    Some(gone) => *gone,
                    None => {
                        let gone = still_silent(&cluster, &node).await;
                        confirmed.insert(node.clone(), gone);
                        gone
                    }
                };
            if !gone {
                super::control::lock_state(&cluster)
                    .ending
                    .remove(handle.id());
                continue;
            }
            let cluster = cluster.clone();
            tokio::spawn(async move {
                let id = handle.id().to_string();
                if let Err(e) = end(&cluster, &handle, &node, &reason).await {
                    tracing::warn!(target: "corral::cluster", session = %id, error = %e, "ending a lost node's session; trying again");
                }
                super::control::lock_state(&cluster).ending.remove(&id);
            });
        }
    }
}

/// Whether `node`'s heartbeat entry is where the watch last saw it (or withdrawn); a newer
/// one counts as a heartbeat. False when NATS cannot be asked.
async fn still_silent(cluster: &Cluster, node: &str) -> bool {
    let entry = match tokio::time::timeout(
        Duration::from_secs(2),
        cluster.stores.nodes.entry(node.to_string()),
    )
    .await
    {
        Ok(Ok(entry)) => entry,
        _ => return false,
    };
    match entry {
        Some(entry) if entry.operation == async_nats::jetstream::kv::Operation::Put => {
            !cluster.node_entry_seen(entry)
        }
        _ => true,
    }
}

/// Live sessions whose node is gone, with why; each marked as being ended.
/// `silent`: lost only by its silence, which is to be confirmed.
fn lost_sessions(cluster: &Cluster) -> Vec<(Arc<Handle>, String, String, bool)> {
    let dead_after = cluster.deployment.dead_after;
    let mut state = super::control::lock_state(cluster);
    let mut lost = Vec::new();
    for assignment in state.assignments.values() {
        if assignment.opened.is_none() || state.ending.contains(&assignment.session) {
            continue;
        }
        let Some(handle) = cluster.manager.get(&assignment.session) else {
            continue;
        };
        if handle.node().is_none() || handle.session.status() == Status::Dead {
            continue;
        }
        let (reason, silent) = match state.nodes.get(&assignment.node) {
            None if cluster.started.elapsed() < dead_after => continue,
            None => (
                format!("has not been heard from for {} s", dead_after.as_secs()),
                true,
            ),
            Some(node) if node.withdrawn => ("stopped".to_string(), false),
            Some(node) if node.announce.instance != assignment.instance => (
                "restarted, and its sessions did not survive it".to_string(),
                false,
            ),
            Some(node) if node.seen.elapsed() >= dead_after => (
                format!(
                    "stopped heartbeating {} s ago",
                    node.seen.elapsed().as_secs()
                ),
                true,
            ),
            Some(_) => continue,
        };
        lost.push((handle, assignment.node.clone(), reason, silent));
    }
    for (handle, _, _, _) in &lost {
        state.ending.insert(handle.id().to_string());
    }
    lost
}

/// Writes the session's end into the stream after what it holds.
async fn end(cluster: &Cluster, handle: &Handle, node: &str, reason: &str) -> Result<(), String> {
    let id = handle.id();
    let mut last = super::control::lock_state(cluster)
        .last_sequence
        .get(id)
        .copied()
        .unwrap_or(0);
    let note = format!("node {node} {reason}");
    let mut payloads: Vec<Payload> = handle
        .session
        .pending_permissions()
        .into_iter()
        .map(|request| {
            Payload::Permission(PermissionData::Resolution(PermissionResolution::new(
                request.request_id,
                "cancel",
                Some(note.clone()),
            )))
        })
        .collect();
    payloads.push(Payload::Error(ErrorData {
        message: format!("{note}: the session ended with it"),
        data: json!({"code": "NODE_LOST", "node": node}),
    }));
    payloads.push(Payload::Status(StatusData {
        status: Status::Dead,
    }));
    let subject = cluster.deployment.events_subject(id);
    let turn = handle.session.turn();
    let mut seq = handle.session.last_seq();
    for payload in payloads {
        seq += 1;
        let envelope = Envelope {
            seq,
            ts: Timestamp::now(),
            session: Arc::from(id),
            turn,
            payload,
        };
        let json = serde_json::to_vec(&envelope).map_err(|e| e.to_string())?;
        let message = PublishMessage::build()
            .payload(json.into())
            .message_id(format!("{id}:{seq}"))
            .expected_last_subject_sequence(last);
        let ack = cluster
            .stores
            .js
            .send_publish(subject.clone(), message)
            .await
            .map_err(|e| e.to_string())?
            .await;
        match ack {
            Ok(ack) => last = ack.sequence,
            // Someone wrote after what this process has seen: look again once it has.
            Err(e) if e.kind() == PublishErrorKind::WrongLastSequence => return Ok(()),
            Err(e) => return Err(e.to_string()),
        }
    }
    tracing::warn!(target: "corral::cluster", session = %id, "{note}: the session ended");
    Ok(())
}
