//! `/ws/v1/sessions/{id}` and `/ws/v1/logs`: the seed protocol (seeds/002), a projection of
//! corral's envelopes (see `projection`).
//!
//! Refusals happen after the upgrade, as close codes (4001 unauthorized, 4003 forbidden,
//! 4004 unknown or closed session): a browser's WebSocket cannot read an HTTP status. Another
//! user's session is 4004 with the same reason as a missing one. A session closed while a
//! connection is attached closes it with 4004 too, once its last messages are sent. 4000
//! (registry not ready) is never sent: the manager exists before the listener accepts
//! anything. A connection is closed with 4001 the moment its token expires. (A foreign
//! `Origin` never gets this far: see `guard`.)
//! A connection silent for `idle_drop` is closed with 1000 (a normal, expected end);
//! shutdown and replacement by a newer connection close with 1001.
//!
//! Slow and hostile clients: sending runs beside receiving, so a client that stops reading
//! still has its messages read, its idle drop and its replacement close. What it has not
//! taken stays in the session's buffer only (see `hub`); once that backlog passes the caps,
//! or one write makes no progress for the send timeout (`CORRAL_WS_SEND_SECS`, 10 s), it is
//! closed with 1013 ("try again later": the server is fine, the client should reconnect with
//! `last_seq`, and the buffer still holds what it missed). The close frame itself gets the
//! send timeout to go out, then the connection is dropped. A message or frame over
//! [`MAX_MESSAGE_BYTES`] closes with 1009, a text frame that is not UTF-8 with 1007.
//!
//! `seq` is per session, across connections (see `hub`). On connect, `?last_seq=N` first
//! replays the buffered messages after N (all or nothing: if the buffer no longer reaches
//! back to N+1, nothing; a negative N, the seed's -1, replays from the start), then the
//! current `agent_state` follows as a new message, so the stream a client sees stays in
//! `seq` order. Each connection's start and end are logged at
//! INFO (`session ID: connection N attached` / `… detached`); the replay window runs from
//! the end.

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
use futures_util::{Sink, SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};

pub use self::hub::Hub;
use self::hub::{Attached, Channel, Next};
use self::projection::{Message as Out, error};
use super::{Shared, bearer};
use crate::event::Status;
use crate::host::manager::{Handle, SendError, TurnMode, TurnRequest};
use crate::model::Effort;
use crate::policy::Decision;

/// The seed's bound on a user message, in characters.
const MAX_TEXT: usize = 65_536;

/// The largest message (and frame) a client may send: room for a maximal user message even
/// when every character is escaped in JSON. Larger ones close the connection with 1009.
pub const MAX_MESSAGE_BYTES: usize = 1 << 20;

/// The close reason of a connection whose session was closed while it was attached.
const SESSION_ENDED: &str = "session closed";

/// The close reason of a client that fell behind (code 1013, "try again later").
const FELL_BEHIND: &str = "fell behind: too many unsent messages; reconnect with last_seq";

pub fn routes() -> Router<Shared> {
    Router::new()
        .route("/ws/v1/sessions/{id}", get(session_socket))
        .route("/ws/v1/logs", get(logs::log_socket))
}

#[derive(Deserialize)]
struct SessionQuery {
    token: Option<String>,
    /// Signed: the seed has clients reset it to -1 on a page load ("from the start").
    last_seq: Option<i64>,
}

/// Where a connection starts in the session's stream, from its `?last_seq=`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Resume {
    /// No `last_seq`: a new client, told the current state (and the project instructions).
    Fresh,
    /// `last_seq` below 0 (the seed's -1): everything still buffered, as from seq 0.
    FromStart,
    /// `last_seq=N`: what came after N.
    After(u64),
}

impl Resume {
    fn from_query(last_seq: Option<i64>) -> Resume {
        match last_seq {
            None => Resume::Fresh,
            Some(n) => u64::try_from(n).map_or(Resume::FromStart, Resume::After),
        }
    }
}

/// Closes with a code and a reason (the reason is truncated to the protocol's 123 bytes).
/// A client that does not read gets `wait` to take the close frame, then the connection is
/// dropped.
async fn close<S>(sink: &mut S, code: u16, reason: &str, wait: Duration)
where
    S: Sink<Message> + Unpin,
{
    let mut end = reason.len().min(120);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    let frame = CloseFrame {
        code,
        reason: reason[..end].into(),
    };
    let _ = tokio::time::timeout(wait, sink.send(Message::Close(Some(frame)))).await;
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
    // Closed (or left dead by a crash, kept for review over REST): "does not exist or was
    // archived" in the seed's words. A connection would be served nothing, ever.
    if handle.session.status() == Status::Dead {
        return Err((4004, format!("session {id} is closed")));
    }
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
    let wait = state.settings.send_timeout;
    let ws = ws
        .max_message_size(MAX_MESSAGE_BYTES)
        .max_frame_size(MAX_MESSAGE_BYTES);
    let live = state.sockets.token();
    ws.on_upgrade(move |mut socket| async move {
        let _live = live;
        match admitted {
            Err((code, reason)) => {
                tracing::info!(target: "corral::ws", "session {id}: refused with {code}: {reason}");
                close(&mut socket, code, &reason, wait).await;
            }
            Ok((handle, valid)) => {
                serve_session(
                    state,
                    socket,
                    handle,
                    Resume::from_query(query.last_seq),
                    valid,
                )
                .await;
            }
        }
    })
}

/// How long a resume waits for this process to catch up with the node's stream.
const CATCH_UP: Duration = Duration::from_secs(5);

/// Why a connection's loop ended, and what to tell the client.
enum End {
    Close(u16, String),
    /// The client went away (or closed first): nothing to say.
    Quiet,
}

/// How a receive error closes the connection: 1009 for a message over the size limit,
/// 1007 for a text frame that is not UTF-8; anything else is a broken connection.
fn receive_error(error: axum::Error) -> End {
    use tungstenite::Error as WsError;
    match error.into_inner().downcast::<WsError>().map(|e| *e) {
        Ok(WsError::Capacity(e)) => End::Close(
            1009,
            format!("{e}: a message may be at most {MAX_MESSAGE_BYTES} bytes"),
        ),
        Ok(WsError::Utf8(_)) => End::Close(1007, "a text frame is not valid UTF-8".into()),
        _ => End::Quiet,
    }
}

/// Hands the connection's messages to the socket, batch by batch, each write bounded by
/// `send_timeout`. Returns only when the connection must end.
async fn pump<S>(
    sink: &mut S,
    channel: &Channel,
    attached: &Attached,
    send_timeout: Duration,
) -> End
where
    S: Sink<Message> + Unpin,
{
    let stuck = || {
        End::Close(
            1013,
            format!(
                "no progress sending for {} s: reconnect with last_seq",
                send_timeout.as_secs_f64()
            ),
        )
    };
    loop {
        match channel.take(attached.conn) {
            Next::Send(batch) => {
                for text in batch {
                    let frame = Message::Text(text.as_ref().into());
                    match tokio::time::timeout(send_timeout, sink.feed(frame)).await {
                        Ok(Ok(())) => {}
                        Ok(Err(_)) => return End::Quiet,
                        Err(_) => return stuck(),
                    }
                }
                match tokio::time::timeout(send_timeout, sink.flush()).await {
                    Ok(Ok(())) => {}
                    Ok(Err(_)) => return End::Quiet,
                    Err(_) => return stuck(),
                }
            }
            // The session ended and its last messages are out: nothing more will come.
            Next::Wait if channel.ended().is_cancelled() => {
                return End::Close(4004, SESSION_ENDED.into());
            }
            Next::Wait => {
                tokio::select! {
                    () = attached.wake.notified() => {}
                    () = channel.ended().cancelled() => {}
                }
            }
            // Replaced or behind: the loop's other arms say which.
            Next::Gone => std::future::pending::<()>().await,
        }
    }
}

async fn serve_session(
    state: Shared,
    socket: WebSocket,
    handle: Arc<Handle>,
    resume: Resume,
    valid: Duration,
) {
    let channel = state.ws.channel(&handle, state.settings.replay_window);
    // Resuming on this `serve` what another one served: wait (briefly) until this one has
    // taken in as much of the node's stream as the client saw.
    if let Resume::After(after) = resume
        && handle.node().is_some()
    {
        let deadline = tokio::time::Instant::now() + CATCH_UP;
        while !channel.reached(after)
            && !channel.ended().is_cancelled()
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let conn = state.ws.next_conn();
    let attached = channel.attach(conn, resume);
    tracing::info!(target: "corral::ws", "session {}: connection {conn} attached", handle.id());
    let send_timeout = state.settings.send_timeout;
    let (mut sink, mut stream) = socket.split();
    let end = {
        let idle = state.settings.idle_drop;
        let deadline = tokio::time::sleep(idle);
        tokio::pin!(deadline);
        let expired = tokio::time::sleep(valid);
        tokio::pin!(expired);
        // Sending runs beside everything else: a client that does not read still has its
        // messages read, its idle drop and its replacement close.
        let sending = pump(&mut sink, &channel, &attached, send_timeout);
        tokio::pin!(sending);
        loop {
            tokio::select! {
                biased;
                () = state.shutdown.cancelled() => {
                    break End::Close(1001, "server shutting down".into());
                }
                () = &mut expired => break End::Close(4001, "token expired".into()),
                () = attached.replaced.cancelled() => {
                    break End::Close(1001, "replaced by a newer connection".into());
                }
                () = attached.behind.cancelled() => {
                    break End::Close(1013, FELL_BEHIND.into());
                }
                end = &mut sending => break end,
                incoming = stream.next() => {
                    deadline.as_mut().reset(tokio::time::Instant::now() + idle);
                    match incoming {
                        Some(Ok(Message::Text(text))) => {
                            client_message(&state, &channel, (handle.id(), conn), text.as_str());
                        }
                        Some(Ok(Message::Binary(_))) => channel.push(&error(
                            "INVALID_MESSAGE", "messages are JSON text frames")),
                        Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                        Some(Ok(Message::Close(_))) | None => break End::Quiet,
                        Some(Err(e)) => break receive_error(e),
                    }
                }
                () = &mut deadline => {
                    break End::Close(1000, "no message within the keepalive window".into());
                }
            }
        }
    };
    channel.detach(attached.conn);
    // The replay window runs from here: whoever reconnects can tell from the log.
    tracing::info!(target: "corral::ws", "session {}: connection {conn} detached", handle.id());
    if let End::Close(code, reason) = end {
        tracing::info!(target: "corral::ws",
            "session {}: connection {conn} closed with {code}: {reason}", handle.id());
        close(&mut sink, code, &reason, send_timeout).await;
    }
}

fn field<'a>(payload: &'a Value, key: &str) -> Option<&'a str> {
    payload.get(key).and_then(Value::as_str)
}

/// One client message; replies (pong, errors) go out through the channel so they carry a
/// `seq` like everything else.
fn client_message(state: &Shared, channel: &Channel, (id, conn): (&str, u64), text: &str) {
    let reply = match serde_json::from_str::<Value>(text) {
        Ok(value) => {
            let payload = value.get("payload").cloned().unwrap_or(json!({}));
            // The type quoted (`{:?}`): it is the client's text.
            let kind = value.get("type").and_then(Value::as_str).unwrap_or("");
            tracing::debug!(target: "corral::ws", "session {id}: connection {conn} sent {kind:?}");
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
    let fields = (
        optional::<TurnMode>(payload, "mode", "mode must be normal, think or delegate"),
        optional::<Effort>(payload, "effort", "effort must be low, medium or high"),
        optional::<bool>(payload, "queue", "queue must be true or false"),
        // The name `queue` had before.
        optional::<bool>(payload, "steer", "steer must be true or false"),
    );
    let request = match fields {
        (Ok(mode), Ok(effort), Ok(queue), Ok(steer)) => TurnRequest {
            mode: mode.unwrap_or_default(),
            effort,
            queue: queue.or(steer).unwrap_or(false),
        },
        (Err(refused), _, _, _)
        | (_, Err(refused), _, _)
        | (_, _, Err(refused), _)
        | (_, _, _, Err(refused)) => return Some(refused),
    };
    match state.manager.send(id, text, request) {
        Ok(_) => None,
        Err(e @ SendError::TurnInProgress(_)) => Some(error("TURN_IN_PROGRESS", &e.to_string())),
        Err(e) => Some(error("SESSION_CLOSED", &e.to_string())),
    }
}

/// An optional payload field (absent or null: `None`); one of another shape is refused with
/// `expected`.
fn optional<T: serde::de::DeserializeOwned>(
    payload: &Value,
    key: &str,
    expected: &str,
) -> Result<Option<T>, Out> {
    match payload.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => serde_json::from_value(value.clone())
            .map(Some)
            .map_err(|_| error("INVALID_MESSAGE", expected)),
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
