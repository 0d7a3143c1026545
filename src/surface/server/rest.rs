//! `/api/v1`: sessions over REST (JSON, bearer JWT), the OpenAPI document describing it, and
//! the SSE bus of every session's envelopes (`/api/v1/events`).
//!
//! [`ROUTES`] is the one list of (method, path): the router is built from it and a test holds
//! `assets/openapi.json` to it, so the document cannot drift from what is served.

mod cluster;
mod events;
mod history;

use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, delete, get, post};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::auth::Claims;
use super::{ApiError, Shared, access};
use crate::error::Error;
use crate::event::Status;
use crate::host::manager::{Handle, SendError, TurnMode, TurnRequest};
use crate::model::Effort;
use crate::policy::Decision;
use crate::session::ids::uuid_v4;

/// Every REST route, as the OpenAPI document names it.
pub const ROUTES: &[(&str, &str)] = &[
    ("GET", "/api/v1/openapi.json"),
    ("GET", "/api/v1/events"),
    ("GET", "/api/v1/sessions"),
    ("POST", "/api/v1/sessions"),
    ("GET", "/api/v1/sessions/{id}"),
    ("DELETE", "/api/v1/sessions/{id}"),
    ("POST", "/api/v1/sessions/{id}/reopen"),
    ("GET", "/api/v1/sessions/{id}/messages"),
    ("POST", "/api/v1/sessions/{id}/messages"),
    ("POST", "/api/v1/sessions/{id}/cancel"),
    ("POST", "/api/v1/sessions/{id}/confirmations"),
    ("GET", "/api/v1/sessions/{id}/permissions"),
    ("GET", "/api/v1/sessions/{id}/worktree"),
    ("GET", "/api/v1/nodes"),
];

/// The longest user message, in characters (the seed: 1–65536).
const MAX_TEXT_CHARS: usize = 65_536;

/// Request bodies larger than this are refused before parsing. Room for a maximal message
/// even when every character is escaped in JSON.
const BODY_LIMIT: usize = 1 << 20;

/// The hand-written OpenAPI 3.1 document.
const OPENAPI: &str = include_str!("../../../assets/openapi.json");

/// The handler of one entry of [`ROUTES`]; `None` for a pair not in the list.
fn endpoint(method: &str, path: &str) -> Option<MethodRouter<Shared>> {
    Some(match (method, path) {
        ("GET", "/api/v1/openapi.json") => get(openapi),
        ("GET", "/api/v1/events") => get(events::stream),
        ("GET", "/api/v1/sessions") => get(list_sessions),
        ("POST", "/api/v1/sessions") => post(create_session),
        ("GET", "/api/v1/sessions/{id}") => get(get_session),
        ("DELETE", "/api/v1/sessions/{id}") => delete(close_session),
        ("POST", "/api/v1/sessions/{id}/reopen") => post(reopen_session),
        ("GET", "/api/v1/sessions/{id}/messages") => get(list_messages),
        ("POST", "/api/v1/sessions/{id}/messages") => post(send_message),
        ("POST", "/api/v1/sessions/{id}/cancel") => post(cancel_turn),
        ("POST", "/api/v1/sessions/{id}/confirmations") => post(confirm),
        ("GET", "/api/v1/sessions/{id}/permissions") => get(list_permissions),
        ("GET", "/api/v1/sessions/{id}/worktree") => get(worktree_diff),
        ("GET", "/api/v1/nodes") => get(cluster::list_nodes),
        _ => return None,
    })
}

pub fn routes() -> Router<Shared> {
    let mut router = Router::new();
    for &(method, path) in ROUTES {
        // axum merges method routers registered on the same path.
        if let Some(handler) = endpoint(method, path) {
            router = router.route(path, handler);
        }
    }
    router.layer(DefaultBodyLimit::max(BODY_LIMIT))
}

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "INVALID_REQUEST", message)
}

fn closed(id: &str) -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "SESSION_CLOSED",
        format!("session {id} is closed"),
    )
}

/// Parses a JSON body ourselves so every failure is the JSON error shape, not axum's text.
fn parse_body<T: DeserializeOwned>(body: Result<Bytes, BytesRejection>) -> Result<T, ApiError> {
    let bytes = body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "PAYLOAD_TOO_LARGE",
                format!("the request body is larger than {BODY_LIMIT} bytes"),
            )
        } else {
            invalid(e.body_text())
        }
    })?;
    serde_json::from_slice(&bytes).map_err(|e| invalid(format!("invalid request body: {e}")))
}

/// The session the path's `{id}` names, if it exists and the caller may use it; the same 404
/// otherwise. As an extractor, no handler can reach a session without the check.
struct Visible {
    id: String,
    handle: Arc<Handle>,
}

impl axum::extract::FromRequestParts<Shared> for Visible {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &Shared,
    ) -> Result<Self, ApiError> {
        let claims = Claims::from_request_parts(parts, state).await?;
        let Path(id) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|e| invalid(e.body_text()))?;
        let handle = access::visible(&state.manager, &claims, &id)?;
        Ok(Visible { id, handle })
    }
}

fn send_error(e: SendError) -> ApiError {
    match e {
        SendError::NotFound(id) => access::not_found(&id),
        SendError::Dead(id) => closed(&id),
        SendError::TurnInProgress(id) => ApiError::new(
            StatusCode::CONFLICT,
            "TURN_IN_PROGRESS",
            format!("a turn is already running in session {id}; wait for it to finish"),
        ),
    }
}

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

fn session_json(handle: &Handle) -> Value {
    serde_json::to_value(handle.info()).unwrap_or(Value::Null)
}

async fn list_sessions(
    State(state): State<Shared>,
    claims: Claims,
) -> Result<axum::Json<Value>, ApiError> {
    let sessions: Vec<Value> = state
        .manager
        .list()
        .iter()
        .filter(|h| claims.may_use(&h.owner))
        .map(|h| session_json(h))
        .chain(
            // Left open by a server that died: listed as dead until reopened.
            state
                .manager
                .dormant()
                .into_iter()
                .filter(|info| claims.may_use(&info.owner))
                .map(|info| serde_json::to_value(info).unwrap_or(Value::Null)),
        )
        .collect();
    Ok(axum::Json(json!({ "sessions": sessions })))
}

/// `POST /api/v1/sessions/{id}/reopen`: resumes a dead session from its event log (one a
/// crashed server left, or one closed here), under its recorded owner. Admins may reopen any;
/// a user token only its own, under the same limits as a new session. 409 if it is open.
async fn reopen_session(
    State(state): State<Shared>,
    claims: Claims,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    if state.cluster.is_some() {
        return Err(ApiError::new(
            StatusCode::NOT_IMPLEMENTED,
            "NOT_SUPPORTED",
            "over --nats a dead session stays in the stream; reopening it on a node is not \
             supported yet",
        ));
    }
    if let Ok(handle) = access::visible(&state.manager, &claims, &id)
        && handle.session.status() != Status::Dead
    {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "SESSION_OPEN",
            format!("session {id} is open; only a dead session can be reopened"),
        ));
    }
    state
        .manager
        .reopenable_owner(&id)
        .filter(|owner| claims.may_use(owner))
        .ok_or_else(|| access::not_found(&id))?;
    let _place = state.access.reserve(&state.manager, &claims)?;
    let handle = state
        .manager
        .reopen(&id, state.access.limits_for(&claims))
        .await
        .map_err(open_error)?;
    Ok((StatusCode::OK, axum::Json(session_json(&handle))).into_response())
}

/// `POST /api/v1/sessions`. `base_url` points the model provider somewhere other than its
/// default (a llama.cpp server, a test double).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CreateBody {
    pub(super) cwd: PathBuf,
    pub(super) model: Option<String>,
    pub(super) permission: Option<String>,
    #[serde(default)]
    pub(super) worktree: bool,
    pub(super) system_prompt: Option<String>,
    pub(super) base_url: Option<String>,
    /// low, medium or high (wins over a `/high` suffix on `model`).
    pub(super) effort: Option<Effort>,
    /// Names of configured servers, or (admin tokens) definitions: see `mcp_servers`.
    pub(super) mcp_servers: Option<Value>,
    /// `serve --nats`: the node to run it on (else the one with the most room).
    pub(super) node: Option<String>,
    /// `serve --nats`: labels the node must have (`gpu`, `repo=x`).
    pub(super) labels: Option<Vec<String>>,
}

fn open_error(e: Error) -> ApiError {
    match e {
        Error::Usage(m) => invalid(m),
        Error::Forbidden(m) => ApiError::forbidden(m),
        Error::InUse(m) => ApiError::new(StatusCode::CONFLICT, "SESSION_IN_USE", m),
        // Opening fails at run time almost only when the model cannot be reached or
        // prepared; the session's own files failing is the server's fault.
        Error::Runtime(m) if m.contains("temp dir") || m.contains("event log") => {
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL", m)
        }
        Error::Runtime(m) => ApiError::new(StatusCode::BAD_GATEWAY, "MODEL_UNAVAILABLE", m),
    }
}

async fn create_session(
    State(state): State<Shared>,
    claims: Claims,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body: CreateBody = parse_body(body)?;
    // The server's own working directory means nothing to a remote client.
    if !body.cwd.is_absolute() {
        return Err(invalid(format!(
            "cwd {} is not an absolute path",
            body.cwd.display()
        )));
    }
    let _place = state.access.reserve(&state.manager, &claims)?;
    let limits = state.access.limits_for(&claims);
    if let Some(cluster) = &state.cluster {
        let handle = cluster::open(cluster, body, &claims, limits).await?;
        return Ok((StatusCode::CREATED, axum::Json(session_json(&handle))).into_response());
    }
    if body.node.is_some() || body.labels.is_some() {
        return Err(invalid(
            "node and labels choose among nodes: this server runs sessions itself (start it \
             with --nats to run them on nodes)",
        ));
    }
    // No id chosen here: the session gets the same 8-hex id `corral run` does, one not taken
    // by any log in the directory, so every surface shows and takes one form.
    let spec = cluster::request_of(body, &claims, limits)
        .spec(None, &state.manager.config().mcp_servers)
        .map_err(open_error)?;
    let handle = state
        .manager
        .open(spec, &claims.sub)
        .await
        .map_err(open_error)?;
    Ok((StatusCode::CREATED, axum::Json(session_json(&handle))).into_response())
}

async fn get_session(Visible { handle, .. }: Visible) -> Result<axum::Json<Value>, ApiError> {
    Ok(axum::Json(session_json(&handle)))
}

/// The session's worktree and its diff against the base (for sessions run with a worktree;
/// kept ones stay reviewable after the session closed).
async fn worktree_diff(Visible { id, handle }: Visible) -> Result<axum::Json<Value>, ApiError> {
    if handle.meta.worktree.is_none() {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "NO_WORKTREE",
            format!("session {id} runs without a worktree"),
        ));
    }
    let internal = |e: String| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL", e);
    let read = tokio::task::spawn_blocking(move || -> Result<Value, String> {
        use crate::worktree;
        let store = worktree::Store::default_location().map_err(|e| e.to_string())?;
        let record = store.load(&id).map_err(|e| e.to_string())?;
        let changes = worktree::changes(&record).map_err(|e| e.to_string())?;
        let mut diff = Vec::new();
        worktree::write_diff(&record, &mut diff).map_err(|e| e.to_string())?;
        Ok(json!({
            "path": record.meta.path,
            "branch": record.meta.branch,
            "base": record.meta.base,
            "files": changes.files,
            "diff": String::from_utf8_lossy(&diff),
        }))
    })
    .await
    .map_err(|e| internal(e.to_string()))?;
    read.map(axum::Json).map_err(internal)
}

async fn close_session(
    State(state): State<Shared>,
    Visible { id, .. }: Visible,
) -> Result<axum::Json<Value>, ApiError> {
    let closed = state.manager.close(&id).await.map_err(send_error)?;
    Ok(axum::Json(json!({ "closed": closed })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MessageBody {
    text: String,
    #[serde(default)]
    mode: TurnMode,
    /// This turn's effort (think mode's default is high).
    effort: Option<Effort>,
    /// While a turn runs, let the message wait instead of TURN_IN_PROGRESS: steered into the
    /// running turn where the backend can (claude, codex), else the next turn, coalesced with
    /// whatever else waits. `steer` is the name it had before.
    #[serde(default, alias = "steer")]
    queue: bool,
}

async fn send_message(
    State(state): State<Shared>,
    Visible { id, handle }: Visible,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body: MessageBody = parse_body(body)?;
    let chars = body.text.chars().count();
    if chars > MAX_TEXT_CHARS {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "PAYLOAD_TOO_LARGE",
            format!("text is {chars} characters; the limit is {MAX_TEXT_CHARS}"),
        ));
    }
    if body.text.trim().is_empty() {
        return Err(invalid("text is empty"));
    }
    if handle.session.status() == Status::Dead {
        return Err(closed(&id));
    }
    let turn = state
        .manager
        .send(
            &id,
            &body.text,
            TurnRequest {
                mode: body.mode,
                effort: body.effort,
                queue: body.queue,
            },
        )
        .map_err(send_error)?;
    Ok((
        StatusCode::ACCEPTED,
        axum::Json(json!({ "turn": turn, "message_id": uuid_v4() })),
    )
        .into_response())
}

async fn list_messages(Visible { handle, .. }: Visible) -> Result<axum::Json<Value>, ApiError> {
    let messages = history::messages(&handle.session);
    Ok(axum::Json(json!({ "messages": messages })))
}

async fn cancel_turn(
    State(state): State<Shared>,
    Visible { id, .. }: Visible,
) -> Result<axum::Json<Value>, ApiError> {
    let cancelled = state.manager.cancel(&id).map_err(send_error)?;
    Ok(axum::Json(json!({ "cancelled": cancelled })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfirmBody {
    confirmation_id: String,
    /// Exactly the six seed actions (serde's snake_case names), not the aliases
    /// `Decision::from_str` also takes from ACP clients.
    action: Decision,
}

async fn confirm(
    State(state): State<Shared>,
    Visible { id, .. }: Visible,
    body: Result<Bytes, BytesRejection>,
) -> Result<axum::Json<Value>, ApiError> {
    let body: ConfirmBody = parse_body(body)?;
    state
        .manager
        .answer(&id, &body.confirmation_id, body.action)
        .map_err(|e| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "CONFIRMATION_NOT_FOUND",
                e.to_string(),
            )
        })?;
    Ok(axum::Json(json!({
        "confirmation_id": body.confirmation_id,
        "action": body.action,
    })))
}

async fn list_permissions(Visible { handle, .. }: Visible) -> Result<axum::Json<Value>, ApiError> {
    Ok(axum::Json(
        json!({ "permissions": handle.session.pending_permissions() }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The (method, path) pairs the OpenAPI document describes.
    fn documented() -> Vec<(String, String)> {
        let doc: Value = serde_json::from_str(OPENAPI).unwrap();
        assert_eq!(doc["openapi"].as_str().unwrap_or("").get(..3), Some("3.1"));
        let mut pairs = Vec::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for method in item.as_object().unwrap().keys() {
                if ["get", "post", "put", "patch", "delete"].contains(&method.as_str()) {
                    pairs.push((method.to_uppercase(), path.clone()));
                }
            }
        }
        pairs.sort();
        pairs
    }

    #[test]
    fn a_session_another_process_runs_is_a_conflict() {
        let e = open_error(Error::InUse("session x is in use by pid 7".into()));
        assert_eq!(
            (e.status, e.code, e.message.as_str()),
            (
                StatusCode::CONFLICT,
                "SESSION_IN_USE",
                "session x is in use by pid 7"
            )
        );
    }

    #[test]
    fn openapi_document_and_routes_agree() {
        let mut served: Vec<(String, String)> = ROUTES
            .iter()
            .map(|(m, p)| (m.to_string(), p.to_string()))
            .collect();
        served.sort();
        assert_eq!(documented(), served);
        for (method, path) in ROUTES {
            assert!(
                endpoint(method, path).is_some(),
                "{method} {path} has no handler"
            );
        }
        // Building the router must not panic (overlapping or malformed paths).
        let _ = routes();
    }
}
