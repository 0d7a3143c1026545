//! `/ws/v1/sessions/{id}` and `/ws/v1/logs`: the seed protocol (seeds/002), a projection of
//! corral's envelopes (see `projection`).
//!
//! Refusals happen after the upgrade, as close codes (4001 unauthorized, 4003 forbidden,
//! 4004 unknown session): a browser's WebSocket cannot read an HTTP status. Another user's
//! session is 4004 with the same reason as a missing one. 4000 (registry not ready) is never
//! sent: the manager exists before the listener accepts anything. A connection is closed
//! with 4001 the moment its token expires. (A foreign `Origin` never gets this far: see
//! `guard`.)
//! A connection silent for `idle_drop` is closed with 1000 (a normal, expected end);
//! shutdown and replacement by a newer connection close with 1001.
//!
//! `seq` is per session, across connections (see `hub`). On connect, `?last_seq=N` first
//! replays the buffered messages after N (all or nothing: if the buffer no longer reaches
//! back to N+1, nothing), then the current `agent_state` follows as a new message, so the
//! stream a client sees stays in `seq` order.

mod hub;
mod logs;
mod projection;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::get;
use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};

use self::hub::Channel;
pub use self::hub::Hub;
use self::projection::{Message as Out, error};
use super::{Shared, bearer};
use crate::policy::Decision;
use crate::session::manager::{Handle, SendError, TurnMode};

/// The seed's bound on a user message, in characters.
const MAX_TEXT: usize = 65_536;

pub fn routes() -> Router<Shared> {
    Router::new()
        .route("/ws/v1/sessions/{id}", get(session_socket))
        .route("/ws/v1/logs", get(logs::log_socket))
}

#[derive(Deserialize)]
struct SessionQuery {
    token: Option<String>,
    last_seq: Option<u64>,
}

/// Closes with a code and a reason (the reason is truncated to the protocol's 123 bytes).
async fn close(socket: &mut WebSocket, code: u16, reason: &str) {
    let mut end = reason.len().min(120);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    let frame = CloseFrame {
        code,
        reason: reason[..end].into(),
    };
    let _ = socket.send(Message::Close(Some(frame))).await;
}

/// Who may connect: the caller's session and how long the token lasts, or a close code and
/// why not.
fn admit(
    state: &super::AppState,
    headers: &HeaderMap,
    token: Option<&str>,
    id: &str,
) -> Result<(Arc<Handle>, Duration), (u16, String)> {
    let token = bearer(headers, token).ok_or((4001, "no token".to_string()))?;
    let claims = state
        .auth
        .verify(&token)
        .map_err(|e| (4001, e.to_string()))?;
    let handle =
        super::access::visible(&state.manager, &claims, id).map_err(|e| (4004, e.message))?;
    Ok((handle, claims.remaining()))
}

async fn session_socket(
    State(state): State<Shared>,
    Path(id): Path<String>,
    Query(query): Query<SessionQuery>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    let admitted = admit(&state, &headers, query.token.as_deref(), &id);
    ws.on_upgrade(move |mut socket| async move {
        match admitted {
            Err((code, reason)) => {
                tracing::info!(target: "corral::ws", "session {id}: refused with {code}: {reason}");
                close(&mut socket, code, &reason).await;
            }
            Ok((handle, valid)) => {
                serve_session(state, socket, handle, query.last_seq, valid).await;
            }
        }
    })
}

async fn serve_session(
    state: Shared,
    mut socket: WebSocket,
    handle: Arc<Handle>,
    last_seq: Option<u64>,
    valid: Duration,
) {
    let channel = state.ws.channel(&handle, state.settings.replay_window);
    let conn = state.ws.next_conn();
    let mut attached = channel.attach(conn, last_seq);
    tracing::info!(target: "corral::ws", "session {}: connection {conn} attached", handle.id());
    let idle = state.settings.idle_drop;
    let deadline = tokio::time::sleep(idle);
    tokio::pin!(deadline);
    let expired = tokio::time::sleep(valid);
    tokio::pin!(expired);
    loop {
        tokio::select! {
            biased;
            () = state.shutdown.cancelled() => {
                close(&mut socket, 1001, "server shutting down").await;
                break;
            }
            () = &mut expired => {
                close(&mut socket, 4001, "token expired").await;
                break;
            }
            () = attached.replaced.cancelled() => {
                close(&mut socket, 1001, "replaced by a newer connection").await;
                break;
            }
            Some(text) = attached.receiver.recv() => {
                if socket.send(Message::Text(text.as_ref().into())).await.is_err() {
                    break;
                }
            }
            incoming = socket.next() => {
                deadline.as_mut().reset(tokio::time::Instant::now() + idle);
                match incoming {
                    Some(Ok(Message::Text(text))) => {
                        client_message(&state, &channel, handle.id(), text.as_str());
                    }
                    Some(Ok(Message::Binary(_))) => channel.push(&error(
                        "INVALID_MESSAGE", "messages are JSON text frames")),
                    Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                    Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
                }
            }
            () = &mut deadline => {
                close(&mut socket, 1000, "no message within the keepalive window").await;
                break;
            }
        }
    }
    channel.detach(attached.conn);
}

fn field<'a>(payload: &'a Value, key: &str) -> Option<&'a str> {
    payload.get(key).and_then(Value::as_str)
}

/// One client message; replies (pong, errors) go out through the channel so they carry a
/// `seq` like everything else.
fn client_message(state: &Shared, channel: &Channel, id: &str, text: &str) {
    let reply = match serde_json::from_str::<Value>(text) {
        Ok(value) => {
            let payload = value.get("payload").cloned().unwrap_or(json!({}));
            match value.get("type").and_then(Value::as_str) {
                Some("ping") => Some(Out {
                    kind: "pong",
                    payload: json!({}),
                }),
                Some("user_message") => user_message(state, id, &payload),
                Some("tool_confirm") => tool_confirm(state, id, &payload),
                Some("cancel") => {
                    // The turn's end (agent_state idle, error CANCELLED) comes from the
                    // projection; with nothing running there is nothing to say.
                    let _ = state.manager.cancel(id);
                    None
                }
                Some(other) => Some(error(
                    "INVALID_MESSAGE",
                    &format!("unknown message type {other:?}"),
                )),
                None => Some(error("INVALID_MESSAGE", "a message needs a \"type\"")),
            }
        }
        Err(e) => Some(error("INVALID_MESSAGE", &format!("not JSON: {e}"))),
    };
    if let Some(reply) = reply {
        channel.push(&reply);
    }
}

fn user_message(state: &Shared, id: &str, payload: &Value) -> Option<Out> {
    let Some(text) = field(payload, "text") else {
        return Some(error("INVALID_MESSAGE", "user_message needs payload.text"));
    };
    let chars = text.chars().count();
    if chars == 0 || chars > MAX_TEXT {
        return Some(error(
            "INVALID_MESSAGE",
            &format!("text must be 1–{MAX_TEXT} characters, not {chars}"),
        ));
    }
    let mode = match payload.get("mode") {
        None | Some(Value::Null) => TurnMode::Normal,
        Some(mode) => match serde_json::from_value::<TurnMode>(mode.clone()) {
            Ok(mode) => mode,
            Err(_) => {
                return Some(error(
                    "INVALID_MESSAGE",
                    "mode must be normal, think or delegate",
                ));
            }
        },
    };
    match state.manager.send(id, text, mode) {
        Ok(_) => None,
        Err(e @ SendError::TurnInProgress(_)) => Some(error("TURN_IN_PROGRESS", &e.to_string())),
        Err(e) => Some(error("SESSION_CLOSED", &e.to_string())),
    }
}

fn tool_confirm(state: &Shared, id: &str, payload: &Value) -> Option<Out> {
    let (Some(request), Some(action)) =
        (field(payload, "confirmation_id"), field(payload, "action"))
    else {
        return Some(error(
            "INVALID_MESSAGE",
            "tool_confirm needs payload.confirmation_id and payload.action",
        ));
    };
    let Ok(decision) = serde_json::from_value::<Decision>(Value::String(action.to_string())) else {
        return Some(error(
            "INVALID_MESSAGE",
            "action must be allow, deny, allow_all, disable, forbid_all or cancel",
        ));
    };
    match state.manager.answer(id, request, decision) {
        Ok(()) => None,
        Err(e) => Some(error("UNKNOWN_CONFIRMATION", &e.to_string())),
    }
}
