//! The web page at `/`: plain HTML, CSS and JavaScript embedded in the binary, so `corral
//! serve` needs no files next to it and no build step. The page is a client like any other:
//! it speaks only the public REST and WebSocket API, with the token the user gives it.
//! No inline script or style anywhere: the page runs under the strict CSP `guard` sends
//! with every response (`script-src 'self'`, `frame-ancestors 'none'`).

use axum::Router;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, X_CONTENT_TYPE_OPTIONS};
use axum::response::IntoResponse;
use axum::routing::get;

use super::Shared;

const INDEX_HTML: &str = include_str!("../../../assets/index.html");
const APP_JS: &str = include_str!("../../../assets/app.js");
const VIEW_JS: &str = include_str!("../../../assets/view.js");
const STYLE_CSS: &str = include_str!("../../../assets/style.css");

pub fn routes() -> Router<Shared> {
    Router::new()
        .route("/", get(|| asset("text/html; charset=utf-8", INDEX_HTML)))
        .route(
            "/assets/app.js",
            get(|| asset("text/javascript; charset=utf-8", APP_JS)),
        )
        .route(
            "/assets/view.js",
            get(|| asset("text/javascript; charset=utf-8", VIEW_JS)),
        )
        .route(
            "/assets/style.css",
            get(|| asset("text/css; charset=utf-8", STYLE_CSS)),
        )
}

/// The assets change with the binary, not with a URL, so the browser must revalidate: an
/// upgraded server would otherwise run against a stale cached script.
async fn asset(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (CONTENT_TYPE, content_type),
            (CACHE_CONTROL, "no-cache"),
            (X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
}
