//! `/ws/v1/sessions/{id}` and `/ws/v1/logs` (filled in by the WebSocket work).

use axum::Router;

use super::Shared;

#[derive(Default)]
pub struct Hub {}

pub fn routes() -> Router<Shared> {
    Router::new()
}
