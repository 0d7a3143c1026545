//! `/ws/v1/logs`: admin only; plain `log_line` JSON objects (no envelope) at or above the
//! requested level (DEBUG included: corral's own DEBUG lines are captured while such a
//! subscriber is connected, see `logs`), and a plain-text "ping" answered with
//! `{"type":"pong"}`. Closed with 4001 when the token expires, 1013 when a line cannot be
//! written for the send timeout (lines a slow reader misses are skipped, not queued).

use std::time::Duration;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use futures_util::StreamExt;
use serde::Deserialize;
use tokio::sync::broadcast::error::RecvError;
use tracing::Level;

use super::super::logs::parse_level;
use super::super::{Shared, bearer};
use super::close;

#[derive(Deserialize)]
pub(super) struct LogQuery {
    token: Option<String>,
    level: Option<String>,
}

pub(super) async fn log_socket(
    State(state): State<Shared>,
    Query(query): Query<LogQuery>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    let admitted = match bearer(&headers, query.token.as_deref()) {
        None => Err((4001, "no token".to_string())),
        Some(token) => match state.auth.verify(&token) {
            Err(e) => Err((4001, e.to_string())),
            Ok(claims) if !claims.is_admin() => Err((4003, "admin only".to_string())),
            Ok(claims) => Ok(claims.remaining()),
        },
    };
    // An unknown level is not worth refusing the stream over: the seed's default applies.
    let level = query
        .level
        .as_deref()
        .and_then(parse_level)
        .unwrap_or(Level::INFO);
    let wait = state.settings.send_timeout;
    let live = state.sockets.token();
    ws.on_upgrade(move |mut socket| async move {
        let _live = live;
        match admitted {
            Err((code, reason)) => close(&mut socket, code, &reason, wait).await,
            Ok(valid) => stream_logs(state, socket, level, valid).await,
        }
    })
}

async fn stream_logs(state: Shared, mut socket: WebSocket, min: Level, valid: Duration) {
    let mut subscription = state.logs.subscribe(min);
    let lines = &mut subscription.lines;
    let wait = state.settings.send_timeout;
    let idle = state.settings.idle_drop;
    let deadline = tokio::time::sleep(idle);
    tokio::pin!(deadline);
    let expired = tokio::time::sleep(valid);
    tokio::pin!(expired);
    loop {
        tokio::select! {
            biased;
            () = state.shutdown.cancelled() => {
                close(&mut socket, 1001, "server shutting down", wait).await;
                break;
            }
            () = &mut expired => {
                close(&mut socket, 4001, "token expired", wait).await;
                break;
            }
            line = lines.recv() => match line {
                // tracing orders levels by verbosity: ERROR < WARN < INFO < DEBUG.
                Ok((level, line)) if level <= min => {
                    let Ok(text) = serde_json::to_string(&line) else { continue };
                    // A reader that takes nothing holds no more than the hub's ring (it
                    // lags); a write that never finishes ends the stream.
                    match tokio::time::timeout(wait, socket.send(Message::Text(text.into()))).await {
                        Ok(Ok(())) => {}
                        Ok(Err(_)) => break,
                        Err(_) => {
                            close(&mut socket, 1013, "fell behind: no progress sending", wait)
                                .await;
                            break;
                        }
                    }
                }
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => break,
            },
            incoming = socket.next() => {
                deadline.as_mut().reset(tokio::time::Instant::now() + idle);
                match incoming {
                    Some(Ok(Message::Text(text))) if text.as_str().trim() == "ping" => {
                        let pong = Message::Text(r#"{"type":"pong"}"#.into());
                        if socket.send(pong).await.is_err() {
                            break;
                        }
                    }
                    Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
                    Some(Ok(_)) => {}
                }
            }
            () = &mut deadline => {
                close(&mut socket, 1000, "no message within the keepalive window", wait)
                    .await;
                break;
            }
        }
    }
}
