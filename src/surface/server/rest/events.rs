//! `GET /api/v1/events`: Server-Sent Events of every session's envelopes the caller may see,
//! so a monitor follows all agents without polling. Each event carries the manager's global id
//! (`id:`), the envelope kind (`event:`) and the envelope JSON (`data:`); `Last-Event-ID`
//! resumes from the manager's ring. The stream ends when the caller's token expires.

use std::collections::HashMap;
use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::stream::{self, Stream, StreamExt};
use serde::Deserialize;
use tokio::sync::broadcast::error::RecvError;

use super::invalid;
use crate::event::SharedEvent;
use crate::surface::server::auth::Claims;
use crate::surface::server::{ApiError, AppState, Shared, access, authenticate};

/// Comment lines keep proxies and idle timers from closing a quiet stream.
const KEEPALIVE: Duration = Duration::from_secs(15);

#[derive(Debug, Deserialize)]
pub struct EventsQuery {
    /// `agent:` (every visible session) or `agent:<id>` (one session).
    channel: Option<String>,
    /// For `EventSource`, which cannot set headers.
    token: Option<String>,
}

/// Who may see which envelope: admins everything, users their own sessions. Owners are
/// looked up once per session and remembered.
struct Filter {
    claims: Claims,
    session: Option<String>,
    owners: HashMap<String, bool>,
}

impl Filter {
    fn admits(&mut self, state: &AppState, event: &SharedEvent) -> bool {
        let agent: &str = &event.envelope.session;
        if self.session.as_deref().is_some_and(|s| s != agent) {
            return false;
        }
        if self.claims.is_admin() {
            return true;
        }
        if let Some(&known) = self.owners.get(agent) {
            return known;
        }
        // A session's first envelopes can be published before the manager lists it; those
        // are refused without remembering the answer.
        let Some(handle) = state.manager.get(agent) else {
            return false;
        };
        let mine = self.claims.may_use(&handle.owner);
        self.owners.insert(agent.to_string(), mine);
        mine
    }
}

fn to_sse(id: u64, event: &SharedEvent) -> Event {
    Event::default()
        .id(id.to_string())
        .event(event.envelope.payload.kind_name())
        .data(&*event.json)
}

pub async fn stream(
    State(state): State<Shared>,
    headers: HeaderMap,
    Query(query): Query<EventsQuery>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let claims = authenticate(&state, &headers, query.token.as_deref())?;
    let channel = query.channel.unwrap_or_else(|| "agent:".to_string());
    let session = match channel.strip_prefix("agent:") {
        Some("") => None,
        Some(id) => Some(id.to_string()),
        None => {
            return Err(invalid(format!(
                "unknown channel {channel:?}: use agent: or agent:<session id>"
            )));
        }
    };
    // One session: it must be the caller's, and is otherwise missing (the same 404).
    if let Some(id) = &session {
        access::visible(&state.manager, &claims, id)?;
    }
    let expired = tokio::time::sleep(claims.remaining());
    let after = match headers.get("last-event-id") {
        Some(value) => Some(
            value
                .to_str()
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .ok_or_else(|| invalid("Last-Event-ID is not an event id"))?,
        ),
        None => None,
    };
    let (replay, live) = state.manager.subscribe_all(after);
    let mut filter = Filter {
        claims,
        session,
        owners: HashMap::new(),
    };
    let live = stream::unfold(live, |mut live| async move {
        loop {
            match live.recv().await {
                Ok(item) => return Some((item, live)),
                // A reader too slow for the ring loses the oldest envelopes; the ids jump,
                // which tells the client so.
                Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => return None,
            }
        }
    });
    let shared = state.clone();
    let events = stream::iter(replay)
        .chain(live)
        .filter_map(move |(id, event)| {
            let admitted = filter.admits(&shared, &event);
            std::future::ready(admitted.then(|| Ok(to_sse(id, &event))))
        })
        // Graceful shutdown waits for open connections: end the stream when it begins.
        // The token's expiry ends it too: what it saw was granted only until then.
        .take_until(futures_util::future::select(
            Box::pin(state.shutdown.clone().cancelled_owned()),
            Box::pin(expired),
        ));
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(KEEPALIVE)))
}
