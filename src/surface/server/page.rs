//! The web page at `/` (filled in by the page work).

use axum::Router;

use super::Shared;

pub fn routes() -> Router<Shared> {
    Router::new()
}
