//! The loopback proxy behind vouchers: checks the voucher a request presents, keeps only the
//! upstream's API paths, swaps in the real key and streams the answer back as it comes.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::{Api, Registry, VoucherError};

/// The largest request body passed on: a long conversation with images (Anthropic's own
/// limit is 32 MB).
const MAX_BODY_BYTES: usize = 32 << 20;
/// Requests whose bodies are held at once; more wait. With [`MAX_BODY_BYTES`], what an agent
/// holding a voucher can make corral buffer is bounded (512 MiB), however many it sends.
const MAX_IN_FLIGHT: usize = 16;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Silence allowed between two chunks of an answer: a model may think for minutes.
const IDLE_TIMEOUT: Duration = Duration::from_secs(600);

struct ProxyState {
    registry: Arc<Registry>,
    http: reqwest::Client,
    in_flight: tokio::sync::Semaphore,
}

/// Listens on an ephemeral loopback port and serves on the current runtime.
pub(super) async fn serve(registry: Arc<Registry>) -> Result<SocketAddr, VoucherError> {
    let http = reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .read_timeout(IDLE_TIMEOUT)
        .tcp_nodelay(true)
        // A redirect goes back to the agent as it came: followed here, it would carry the
        // real key (in `x-api-key`, which reqwest keeps across hosts) wherever it pointed.
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| VoucherError::Client(e.to_string()))?;
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .map_err(VoucherError::Listen)?;
    let addr = listener.local_addr().map_err(VoucherError::Listen)?;
    let app = axum::Router::new()
        .fallback(forward)
        .with_state(Arc::new(ProxyState {
            registry,
            http,
            in_flight: tokio::sync::Semaphore::new(MAX_IN_FLIGHT),
        }));
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!(error = %e, "the credential proxy stopped");
        }
    });
    tracing::debug!(%addr, "credential proxy listening");
    Ok(addr)
}

/// A request not passed on, with why. The body has the shape both Anthropic's and OpenAI's
/// clients read an error from, so the agent shows the reason.
struct Refusal(StatusCode, String);

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let kind = match self.0 {
            StatusCode::UNAUTHORIZED => "authentication_error",
            StatusCode::FORBIDDEN | StatusCode::METHOD_NOT_ALLOWED => "permission_error",
            _ => "api_error",
        };
        let message = format!("corral's credential proxy: {}", self.1);
        let body = json!({"type": "error", "error": {"type": kind, "message": message}});
        (self.0, axum::Json(body)).into_response()
    }
}

async fn forward(State(state): State<Arc<ProxyState>>, request: Request) -> Response {
    match relay(&state, request).await {
        Ok(response) => response,
        Err(refusal) => {
            tracing::debug!(status = %refusal.0, reason = %refusal.1, "credential proxy refused");
            refusal.into_response()
        }
    }
}

async fn relay(state: &ProxyState, request: Request) -> Result<Response, Refusal> {
    let (parts, body) = request.into_parts();
    let refuse = |status, why: &str| Refusal(status, why.to_string());
    let token = presented(&parts.headers, parts.uri.query())
        .ok_or_else(|| refuse(StatusCode::UNAUTHORIZED, "no voucher presented"))?;
    let grant = state
        .registry
        .get(&token)
        .ok_or_else(|| refuse(StatusCode::UNAUTHORIZED, "unknown or revoked voucher"))?;
    if !matches!(parts.method, Method::GET | Method::POST) {
        return Err(refuse(StatusCode::METHOD_NOT_ALLOWED, "only GET and POST"));
    }
    let path = parts.uri.path();
    let base = grant.upstream.path().trim_end_matches('/');
    let permitted = plain_path(path)
        && path
            .strip_prefix(base)
            .filter(|rest| rest.starts_with('/'))
            .is_some_and(|rest| grant.api.permits(rest));
    if !permitted {
        let upstream = grant.upstream.origin().ascii_serialization();
        return Err(Refusal(
            StatusCode::FORBIDDEN,
            format!("{path} is not an API path of {upstream}"),
        ));
    }
    let mut target = grant.upstream.clone();
    target.set_path(path);
    // The upstream's own parameters (Azure's `api-version`) stay, the request's follow.
    let query = [grant.upstream.query(), parts.uri.query()]
        .into_iter()
        .flatten()
        .filter(|q| !q.is_empty())
        .collect::<Vec<_>>()
        .join("&");
    target.set_query((!query.is_empty()).then_some(query.as_str()));
    drop_key_param(&mut target);
    // Held until the upstream has the request (the answer streams without it).
    let _slot = state
        .in_flight
        .acquire()
        .await
        .map_err(|_| refuse(StatusCode::SERVICE_UNAVAILABLE, "the proxy is stopping"))?;
    let body = axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|_| refuse(StatusCode::PAYLOAD_TOO_LARGE, "request body too large"))?;
    let mut outgoing = state.http.request(parts.method, target);
    for (name, value) in &parts.headers {
        if !hop_by_hop(name) && !credential(name) && name != header::HOST {
            outgoing = outgoing.header(name, value);
        }
    }
    outgoing = match grant.api {
        Api::Anthropic { bearer: false } => outgoing.header("x-api-key", &grant.key),
        Api::Anthropic { bearer: true } | Api::OpenAi => outgoing.bearer_auth(&grant.key),
        Api::Gemini => outgoing.header("x-goog-api-key", &grant.key),
    };
    let answer = outgoing.body(body).send().await.map_err(|e| {
        Refusal(
            StatusCode::BAD_GATEWAY,
            format!("the upstream did not answer: {}", e.without_url()),
        )
    })?;
    let mut response = Response::builder().status(answer.status());
    for (name, value) in answer.headers() {
        if !hop_by_hop(name) {
            response = response.header(name, value);
        }
    }
    response
        .body(Body::from_stream(answer.bytes_stream()))
        .map_err(|e| Refusal(StatusCode::BAD_GATEWAY, e.to_string()))
}

/// The voucher a request presents, wherever its client puts a key: `x-api-key` (Anthropic),
/// `Authorization: Bearer` (OpenAI, Anthropic tokens), `x-goog-api-key` or `?key=` (Gemini).
fn presented(headers: &HeaderMap, query: Option<&str>) -> Option<String> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    header("x-api-key")
        .or_else(|| header("x-goog-api-key"))
        .or_else(|| {
            header("authorization").and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
        })
        .map(|v| v.trim().to_string())
        .or_else(|| {
            query?
                .split('&')
                .find_map(|pair| pair.strip_prefix("key="))
                .map(str::to_string)
        })
        .filter(|v| !v.is_empty())
}

/// Segments of plain names only: no `.`/`..`, no percent-encoding (an encoded `/` or `.` the
/// upstream would decode), no empty segment, nothing a server could read as another path.
fn plain_path(path: &str) -> bool {
    path.starts_with('/')
        && path[1..].split('/').all(|segment| {
            !segment.is_empty()
                && segment != "."
                && segment != ".."
                && segment
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b))
        })
}

/// A Gemini client may send its key as `?key=`: it is the voucher, never passed on.
fn drop_key_param(url: &mut reqwest::Url) {
    if url.query().is_none() {
        return;
    }
    let kept: Vec<(String, String)> = url
        .query_pairs()
        .filter(|(name, _)| name != "key")
        .map(|(n, v)| (n.into_owned(), v.into_owned()))
        .collect();
    if kept.is_empty() {
        url.set_query(None);
    } else {
        url.query_pairs_mut().clear().extend_pairs(kept);
    }
}

fn credential(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "authorization" | "x-api-key" | "x-goog-api-key" | "proxy-authorization"
    )
}

fn hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "content-length"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_paths_pass() {
        for good in ["/v1/messages", "/v1beta/models/gemini-2.5:generateContent"] {
            assert!(plain_path(good), "{good}");
        }
        for bad in [
            "/v1/models/../../admin",
            "/v1/models/%2e%2e/admin",
            "/v1//messages",
            "/v1/./messages",
            "/v1/messages/",
            "v1/messages",
            "/v1/mess ages",
            "/v1/models/a%2fb",
            "/v1\\messages",
        ] {
            assert!(!plain_path(bad), "{bad}");
        }
    }

    #[test]
    fn the_voucher_is_found_wherever_a_client_puts_its_key() {
        let mut headers = HeaderMap::new();
        assert_eq!(presented(&headers, None), None);
        assert_eq!(
            presented(&headers, Some("alt=sse&key=v1")),
            Some("v1".into())
        );
        headers.insert("authorization", "Bearer v2".parse().unwrap());
        assert_eq!(presented(&headers, None), Some("v2".into()));
        headers.insert("x-api-key", "v3".parse().unwrap());
        assert_eq!(presented(&headers, None), Some("v3".into()));
        let mut basic = HeaderMap::new();
        basic.insert("authorization", "Basic abc".parse().unwrap());
        assert_eq!(presented(&basic, None), None);
    }

    #[test]
    fn a_key_parameter_never_goes_upstream() {
        let mut url = reqwest::Url::parse("http://h/v1beta/models/m:x?alt=sse&key=v").unwrap();
        drop_key_param(&mut url);
        assert_eq!(url.as_str(), "http://h/v1beta/models/m:x?alt=sse");
        let mut url = reqwest::Url::parse("http://h/p?key=v").unwrap();
        drop_key_param(&mut url);
        assert_eq!(url.as_str(), "http://h/p");
    }
}
