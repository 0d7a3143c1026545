//! `/api/v1` (filled in by the REST work).

use axum::Router;

use super::Shared;

pub fn routes() -> Router<Shared> {
    Router::new()
}
