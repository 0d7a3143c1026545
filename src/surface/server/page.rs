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

const JS: &str = "text/javascript; charset=utf-8";

/// Every file of the page: its path, type and contents. The vendored scripts (Markdown,
/// sanitizer, highlighter) are described in `assets/vendor/README.md`.
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "/",
        "text/html; charset=utf-8",
        include_str!("../../../assets/index.html"),
    ),
    ("/assets/app.js", JS, include_str!("../../../assets/app.js")),
    (
        "/assets/view.js",
        JS,
        include_str!("../../../assets/view.js"),
    ),
    (
        "/assets/markdown.js",
        JS,
        include_str!("../../../assets/markdown.js"),
    ),
    (
        "/assets/style.css",
        "text/css; charset=utf-8",
        include_str!("../../../assets/style.css"),
    ),
    (
        "/assets/vendor/marked.umd.js",
        JS,
        include_str!("../../../assets/vendor/marked.umd.js"),
    ),
    (
        "/assets/vendor/purify.min.js",
        JS,
        include_str!("../../../assets/vendor/purify.min.js"),
    ),
    (
        "/assets/vendor/highlight.min.js",
        JS,
        include_str!("../../../assets/vendor/highlight.min.js"),
    ),
];

pub fn routes() -> Router<Shared> {
    let mut router = Router::new();
    for &(path, content_type, body) in ASSETS {
        router = router.route(path, get(move || asset(content_type, body)));
    }
    router
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
