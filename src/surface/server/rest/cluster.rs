//! The REST routes that differ under `serve --nats`: opening a session on a node, and the
//! node list.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::{CreateBody, invalid};
use crate::cluster::{Cluster, ClusterError, OpenRequest};
use crate::host::manager::Handle;
use crate::host::open::Limits;
use crate::surface::server::auth::Claims;
use crate::surface::server::{ApiError, Shared};

fn api_error(e: ClusterError) -> ApiError {
    let status = match e.code.as_str() {
        "INVALID" => StatusCode::UNPROCESSABLE_ENTITY,
        "FORBIDDEN" => StatusCode::FORBIDDEN,
        "SESSION_IN_USE" => StatusCode::CONFLICT,
        "MODEL_UNAVAILABLE" => StatusCode::BAD_GATEWAY,
        "NO_NODE" | "NODE_FULL" | "NODE_UNAVAILABLE" | "UNAVAILABLE" => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    // The API's fixed codes: an unknown one from a node is reported as INTERNAL.
    let code = match e.code.as_str() {
        "INVALID" => "INVALID_REQUEST",
        "FORBIDDEN" => "FORBIDDEN",
        "SESSION_IN_USE" => "SESSION_IN_USE",
        "MODEL_UNAVAILABLE" => "MODEL_UNAVAILABLE",
        "NO_NODE" => "NO_NODE",
        "NODE_FULL" => "NODE_FULL",
        "NODE_UNAVAILABLE" => "NODE_UNAVAILABLE",
        "UNAVAILABLE" => "UNAVAILABLE",
        _ => "INTERNAL",
    };
    ApiError::new(status, code, e.message)
}

/// What `POST /api/v1/sessions` asks, as the node (or this process) opens it.
pub(super) fn request_of(body: CreateBody, claims: &Claims, limits: Option<Limits>) -> OpenRequest {
    OpenRequest {
        owner: claims.sub.clone(),
        cwd: body.cwd,
        model: body.model,
        permission: body.permission,
        worktree: body.worktree,
        system_prompt: body.system_prompt,
        base_url: body.base_url,
        effort: body.effort,
        mcp_servers: body.mcp_servers,
        limits,
    }
}

/// `POST /api/v1/sessions` under `--nats`: checked here as a local open is (the caller's
/// token and limits), run on a node.
pub(super) async fn open(
    cluster: &Arc<Cluster>,
    body: CreateBody,
    claims: &Claims,
    limits: Option<Limits>,
) -> Result<Arc<Handle>, ApiError> {
    if body.node.is_some() && limits.is_some() {
        return Err(ApiError::forbidden(
            "choosing the node is for admin tokens; user tokens may ask for labels",
        ));
    }
    let labels = body.labels.clone().unwrap_or_default();
    if labels.iter().any(|l| l.trim().is_empty() || l.len() > 256) {
        return Err(invalid("labels are non-empty names or name=value pairs"));
    }
    let node = body.node.clone();
    let request = request_of(body, claims, limits);
    cluster
        .open(request, node.as_deref(), &labels)
        .await
        .map_err(api_error)
}

/// `GET /api/v1/nodes`: the nodes this control plane knows (admin tokens).
pub(super) async fn list_nodes(
    State(state): State<Shared>,
    claims: Claims,
) -> Result<axum::Json<Value>, ApiError> {
    if !claims.is_admin() {
        return Err(ApiError::forbidden("the node list is for admin tokens"));
    }
    let nodes = state
        .cluster
        .as_ref()
        .map(|c| c.nodes())
        .unwrap_or_default();
    Ok(axum::Json(json!({ "nodes": nodes })))
}
