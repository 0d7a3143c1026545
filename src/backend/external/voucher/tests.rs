//! The proxy against a real upstream on loopback: what passes, what is swapped, what is
//! refused and never reaches the upstream.

use std::sync::{Arc, Mutex};

use axum::extract::Request;
use axum::http::HeaderMap;

use super::*;

/// What the upstream saw: path with query, and headers.
type Seen = Arc<Mutex<Vec<(String, HeaderMap)>>>;

/// An upstream that records each request and answers in three chunks.
async fn upstream() -> (String, Seen) {
    let seen: Seen = Arc::default();
    let record = seen.clone();
    let app = axum::Router::new().fallback(move |request: Request| {
        let record = record.clone();
        async move {
            let target = request
                .uri()
                .path_and_query()
                .map(|p| p.to_string())
                .unwrap_or_default();
            record
                .lock()
                .unwrap()
                .push((target, request.headers().clone()));
            let chunks = ["data: one\n\n", "data: two\n\n", "data: [DONE]\n\n"];
            let stream = futures_util::stream::iter(
                chunks.map(|c| Ok::<_, std::io::Error>(bytes::Bytes::from(c))),
            );
            axum::response::Response::builder()
                .status(201)
                .header("content-type", "text/event-stream")
                .body(axum::body::Body::from_stream(stream))
                .unwrap()
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), seen)
}

async fn post(url: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let mut request = reqwest::Client::new().post(url).body("{}");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

#[tokio::test]
async fn a_voucher_is_swapped_for_the_key_and_the_answer_streams_back() {
    let (base, seen) = upstream().await;
    let proxy = Proxy::start().await.unwrap();
    let voucher = proxy
        .mint(Api::OpenAi, &format!("{base}/v1"), "sk-real".into(), "s1")
        .unwrap();
    assert!(voucher.token().starts_with("corral-voucher-") && voucher.token().len() > 70);
    assert_eq!(voucher.base_url(), format!("http://{}/v1", proxy.addr()));
    let bearer = format!("Bearer {}", voucher.token());
    let url = format!("{}/chat/completions?stream=1", voucher.base_url());
    let (status, body) = post(&url, &[("authorization", &bearer), ("x-extra", "kept")]).await;
    assert_eq!(status, 201);
    assert_eq!(body, "data: one\n\ndata: two\n\ndata: [DONE]\n\n");
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0].0, "/v1/chat/completions?stream=1");
    assert_eq!(seen[0].1["authorization"], "Bearer sk-real");
    assert_eq!(seen[0].1["x-extra"], "kept");
    let all = format!("{:?}", seen[0].1);
    assert!(
        !all.contains(voucher.token()),
        "the voucher went upstream: {all}"
    );
}

#[tokio::test]
async fn each_api_gets_its_key_where_its_server_reads_it() {
    let (base, seen) = upstream().await;
    let proxy = Proxy::start().await.unwrap();
    let anthropic = proxy
        .mint(
            Api::Anthropic { bearer: false },
            &base,
            "sk-ant".into(),
            "s",
        )
        .unwrap();
    let token = proxy
        .mint(Api::Anthropic { bearer: true }, &base, "tok".into(), "s")
        .unwrap();
    let gemini = proxy
        .mint(Api::Gemini, &base, "AIza-real".into(), "s")
        .unwrap();
    let messages = format!("{}/v1/messages", anthropic.base_url());
    assert_eq!(
        post(&messages, &[("x-api-key", anthropic.token())]).await.0,
        201
    );
    let bearer = format!("Bearer {}", token.token());
    assert_eq!(post(&messages, &[("authorization", &bearer)]).await.0, 201);
    let generate = format!(
        "{}/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse&key={}",
        gemini.base_url(),
        gemini.token()
    );
    assert_eq!(post(&generate, &[]).await.0, 201);
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0].1["x-api-key"], "sk-ant");
    assert!(seen[0].1.get("authorization").is_none());
    assert_eq!(seen[1].1["authorization"], "Bearer tok");
    assert!(seen[1].1.get("x-api-key").is_none());
    assert_eq!(
        seen[2].0,
        "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
    );
    assert_eq!(seen[2].1["x-goog-api-key"], "AIza-real");
}

#[tokio::test]
async fn a_wrong_or_revoked_voucher_gets_401_and_nothing_goes_upstream() {
    let (base, seen) = upstream().await;
    let proxy = Proxy::start().await.unwrap();
    let voucher = proxy
        .mint(Api::OpenAi, &base, "sk-real".into(), "s")
        .unwrap();
    let url = format!("{}/v1/responses", voucher.base_url());
    let token = voucher.token().to_string();
    let (status, body) = post(&url, &[("authorization", "Bearer corral-voucher-00")]).await;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("unknown or revoked voucher"), "{body}");
    assert_eq!(post(&url, &[]).await.0, 401);
    assert_eq!(
        post(&url, &[("authorization", &format!("Bearer {token}"))])
            .await
            .0,
        201
    );
    drop(voucher);
    let (status, body) = post(&url, &[("authorization", &format!("Bearer {token}"))]).await;
    assert_eq!(status, 401, "{body}");
    assert!(!body.contains("sk-real"), "{body}");
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn only_the_upstreams_api_paths_are_forwarded() {
    let (base, seen) = upstream().await;
    let proxy = Proxy::start().await.unwrap();
    let openai = proxy
        .mint(Api::OpenAi, &format!("{base}/v1"), "k".into(), "s")
        .unwrap();
    let anthropic = proxy
        .mint(Api::Anthropic { bearer: false }, &base, "k".into(), "s")
        .unwrap();
    let bearer = format!("Bearer {}", openai.token());
    let root = format!("http://{}", proxy.addr());
    for path in [
        "/v1/files",
        "/v1/organization/users",
        "/v1/models/../../admin",
        "/v1/models/%2e%2e/%2e%2e/admin",
        "/admin",
        "/v2/chat/completions",
        "/v1/chat/completions/extra",
        "/v1//chat/completions",
    ] {
        let (status, body) = post(&format!("{root}{path}"), &[("authorization", &bearer)]).await;
        assert_eq!(status, 403, "{path}: {body}");
    }
    // An Anthropic voucher opens only Anthropic's paths.
    let other = format!("{root}/v1/chat/completions");
    assert_eq!(
        post(&other, &[("x-api-key", anthropic.token())]).await.0,
        403
    );
    let batches = format!("{root}/v1/messages/batches");
    assert_eq!(
        post(&batches, &[("x-api-key", anthropic.token())]).await.0,
        403
    );
    let response = reqwest::Client::new()
        .delete(format!("{root}/v1/models/m"))
        .header("authorization", &bearer)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 405);
    assert!(seen.lock().unwrap().is_empty());
    let models = format!("{root}/v1/models/gpt-5");
    assert_eq!(post(&models, &[("authorization", &bearer)]).await.0, 201);
}

/// An upstream that redirects elsewhere: the redirect reaches the client, the key does not
/// follow it.
#[tokio::test]
async fn a_redirect_is_passed_back_not_followed_with_the_key() {
    let (elsewhere, seen) = upstream().await;
    let target = format!("{elsewhere}/v1/messages");
    let app = axum::Router::new().fallback(move || {
        let target = target.clone();
        async move { axum::response::Redirect::temporary(&target) }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let proxy = Proxy::start().await.unwrap();
    let voucher = proxy
        .mint(
            Api::Anthropic { bearer: false },
            &format!("http://{addr}"),
            "sk-real".into(),
            "s",
        )
        .unwrap();
    let response = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .post(format!("{}/v1/messages", voucher.base_url()))
        .header("x-api-key", voucher.token())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 307);
    assert!(
        seen.lock().unwrap().is_empty(),
        "the proxy followed the redirect"
    );
}

/// The agents corral runs are the same user: once corral holds keys for them it cannot be
/// read through `/proc/<pid>/environ` or attached to.
#[tokio::test]
async fn the_shared_proxy_makes_the_process_undumpable() {
    Proxy::shared().await.unwrap();
    assert!(!nix::sys::prctl::get_dumpable().unwrap());
}

#[tokio::test]
async fn debug_output_never_shows_a_key_or_a_token() {
    let proxy = Proxy::start().await.unwrap();
    let voucher = proxy
        .mint(
            Api::OpenAi,
            "http://u:pw@127.0.0.1:9/v1",
            "sk-secret".into(),
            "s",
        )
        .unwrap();
    let shown = format!(
        "{voucher:?} {proxy:?} {:?}",
        proxy.registry.get(voucher.token())
    );
    for secret in ["sk-secret", voucher.token(), "pw"] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
}

/// An upstream whose base URL carries parameters keeps them; the request's follow.
#[tokio::test]
async fn the_upstreams_own_query_parameters_stay() {
    let (base, seen) = upstream().await;
    let proxy = Proxy::start().await.unwrap();
    let voucher = proxy
        .mint(
            Api::OpenAi,
            &format!("{base}/openai?api-version=2025-01-01"),
            "k".into(),
            "s",
        )
        .unwrap();
    let bearer = format!("Bearer {}", voucher.token());
    let url = format!("{}/chat/completions?stream=1", voucher.base_url());
    assert_eq!(post(&url, &[("authorization", &bearer)]).await.0, 201);
    let url = format!("{}/responses", voucher.base_url());
    assert_eq!(post(&url, &[("authorization", &bearer)]).await.0, 201);
    let seen = seen.lock().unwrap();
    assert_eq!(
        seen[0].0,
        "/openai/chat/completions?api-version=2025-01-01&stream=1"
    );
    assert_eq!(seen[1].0, "/openai/responses?api-version=2025-01-01");
}

/// A body over the limit is refused before anything goes upstream.
#[tokio::test]
async fn an_oversized_body_is_refused() {
    let (base, seen) = upstream().await;
    let proxy = Proxy::start().await.unwrap();
    let voucher = proxy.mint(Api::OpenAi, &base, "k".into(), "s").unwrap();
    let response = reqwest::Client::new()
        .post(format!("{}/v1/responses", voucher.base_url()))
        .header("authorization", format!("Bearer {}", voucher.token()))
        .body(vec![b'x'; (32 << 20) + 1])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 413);
    assert!(seen.lock().unwrap().is_empty());
}

#[test]
fn a_voucher_needs_an_http_upstream() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let proxy = runtime.block_on(Proxy::start()).unwrap();
    for bad in ["", "file:///etc/passwd", "not a url", "ftp://h/"] {
        assert!(
            proxy.mint(Api::OpenAi, bad, "k".into(), "s").is_err(),
            "{bad}"
        );
    }
}
