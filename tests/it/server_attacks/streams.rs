//! Attacks through the browser and through time: a page on another site (DNS rebinding, a
//! foreign Origin, framing), streams outliving their token, and guessable secrets.

use std::time::Duration;

use futures_util::StreamExt;
use reqwest::{Method, StatusCode};
use serde_json::json;

use super::LONG;
use super::wire::{
    call, close_frame, create, first_message, raw, session_body, token_for, ws_connect,
};
use crate::support::server::Server;
use crate::support::{FakeModel, Harness, Reply};

#[tokio::test]
async fn streams_close_when_their_token_expires() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let server = Server::start(&h, &[]).await;
    let alice = token_for("alice", false, LONG);
    let body = session_body(&h.work(), &model.openai_base(), json!({}));
    let (status, session) = create(&server, &alice, body).await;
    assert_eq!(status, StatusCode::CREATED, "{session}");
    let id = session["id"].as_str().unwrap();
    // All three streams are open before their tokens expire, together: the test waits for
    // one expiry, not three in a row.
    let short = token_for("alice", false, Duration::from_secs(3));
    let admin = token_for("root", true, Duration::from_secs(3));
    let url = format!("{}/ws/v1/sessions/{id}?token={short}", server.ws_base);
    let mut ws = ws_connect(&url, &[]).await.unwrap();
    assert_eq!(first_message(&mut ws).await["type"], "agent_state");
    let url = format!("{}/ws/v1/logs?token={admin}", server.ws_base);
    let mut logs = ws_connect(&url, &[]).await.unwrap();
    let response = reqwest::Client::new()
        .get(format!(
            "{}/api/v1/events?channel=agent:{id}&token={short}",
            server.base
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);

    let (code, reason) = close_frame(&mut ws, Duration::from_secs(8)).await;
    assert_eq!((code, reason.as_str()), (4001, "token expired"));
    let (code, reason) = close_frame(&mut logs, Duration::from_secs(8)).await;
    assert_eq!((code, reason.as_str()), (4001, "token expired"));
    let mut body = response.bytes_stream();
    let ended = tokio::time::timeout(Duration::from_secs(8), async {
        while let Some(chunk) = body.next().await {
            if chunk.is_err() {
                break;
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the event stream outlived its token");
}

#[tokio::test]
async fn another_host_another_origin_and_frames_are_refused() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let server = Server::start(&h, &[]).await;
    let alice = token_for("alice", false, LONG);
    let addr = server.base.trim_start_matches("http://").to_string();
    let port = addr.rsplit(':').next().unwrap().to_string();
    let get = |path: &str, host: &str, extra: &str| {
        format!(
            "GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {alice}\r\n{extra}\
             Connection: close\r\n\r\n"
        )
    };

    // DNS rebinding: a page of evil.example whose name now points at 127.0.0.1.
    for host in ["evil.example", &format!("evil.example:{port}")] {
        for path in ["/", "/api/v1/sessions", "/assets/app.js", "/no/such/route"] {
            let (status, _, body) = raw(&server, &get(path, host, "")).await;
            assert_eq!(status, 421, "Host {host} {path}: {body}");
        }
    }
    let (status, headers, _) = raw(&server, &get("/", &format!("localhost:{port}"), "")).await;
    assert_eq!(status, 200, "{headers}");
    let (status, headers, body) = raw(&server, &get("/", &addr, "")).await;
    assert_eq!(status, 200, "{body}");
    // The page: a strict CSP, never framed, never sniffed.
    let csp = headers
        .lines()
        .find_map(|l| l.strip_prefix("content-security-policy:"))
        .unwrap_or_else(|| panic!("no CSP: {headers}"));
    for part in [
        "default-src 'self'",
        "script-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(part), "{csp}");
    }
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert!(headers.contains("x-frame-options: deny"), "{headers}");
    assert!(
        headers.contains("x-content-type-options: nosniff"),
        "{headers}"
    );
    assert!(!body.contains("<script>"), "no inline script");

    // A foreign page posting with a token it got hold of.
    let post = format!(
        "POST /api/v1/sessions HTTP/1.1\r\nHost: {addr}\r\nOrigin: http://evil.example\r\n\
         Authorization: Bearer {alice}\r\nContent-Type: application/json\r\n\
         Content-Length: 2\r\nConnection: close\r\n\r\n{{}}"
    );
    let (status, _, body) = raw(&server, &post).await;
    assert_eq!(status, 403, "{body}");

    let body = session_body(&h.work(), &model.openai_base(), json!({}));
    let (status, session) = create(&server, &alice, body).await;
    assert_eq!(status, StatusCode::CREATED, "{session}");
    let id = session["id"].as_str().unwrap();
    let url = format!("{}/ws/v1/sessions/{id}?token={alice}", server.ws_base);
    for origin in [
        "http://evil.example",
        "null",
        &format!("http://evil.example:{port}"),
    ] {
        let refused = ws_connect(&url, &[("origin", origin)]).await.err();
        assert_eq!(refused, Some(403), "Origin {origin}");
    }
    // The page's own origin, and clients that send none, connect.
    for headers in [vec![("origin", server.base.as_str())], vec![]] {
        let mut ws = ws_connect(&url, &headers).await.unwrap();
        assert_eq!(first_message(&mut ws).await["type"], "agent_state");
    }
}

#[tokio::test]
async fn permission_request_ids_and_the_jwt_secret_cannot_be_guessed() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let call_args = r#"{"path":"x.txt","content":"hi"}"#;
    model.push(Reply::new().tool_call("c1", "write_file", call_args));
    let server = Server::start(&h, &[]).await;
    let alice = token_for("alice", false, LONG);
    let body = session_body(&h.work(), &model.openai_base(), json!({}));
    let (status, session) = create(&server, &alice, body).await;
    assert_eq!(status, StatusCode::CREATED, "{session}");
    let id = session["id"].as_str().unwrap();
    let path = format!("/api/v1/sessions/{id}/messages");
    let (status, _) = call(
        &server,
        &alice,
        Method::POST,
        &path,
        Some(json!({"text": "go"})),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let path = format!("/api/v1/sessions/{id}/permissions");
    let mut request = None;
    for _ in 0..200 {
        let (_, body) = call(&server, &alice, Method::GET, &path, None).await;
        if let Some(r) = body["permissions"][0]["requestId"].as_str() {
            request = Some(r.to_string());
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let request = request.expect("no permission request");
    let random = request.strip_prefix("perm_").unwrap();
    assert!(
        random.len() >= 32 && random.bytes().all(|b| b.is_ascii_hexdigit()),
        "{request} carries less than 128 random bits"
    );

    // A secret file an older corral made from a seeded PRNG is not used again.
    let other = Harness::new();
    let file = other.config_dir().join("corral/jwt-secret");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let legacy = "q7Lm2".repeat(9) + "abc";
    std::fs::write(&file, &legacy).unwrap();
    let out = other.corral().args(["token", "--sub", "x"]).run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let token = out.stdout.trim();
    let old = corral::Auth::new(legacy.as_bytes()).unwrap();
    assert!(
        old.verify(token).is_err(),
        "minted with the guessable secret"
    );
    let secret = std::fs::read_to_string(&file).unwrap();
    assert_eq!(secret.len(), 64, "256 bits as hex: {secret}");
    assert!(
        corral::Auth::new(secret.as_bytes())
            .unwrap()
            .verify(token)
            .is_ok()
    );
    // A freshly generated one is 256 bits too.
    std::fs::remove_file(&file).unwrap();
    let out = other.corral().args(["token", "--sub", "y"]).run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let secret = std::fs::read_to_string(&file).unwrap();
    assert!(
        secret.len() == 64 && secret.bytes().all(|b| b.is_ascii_hexdigit()),
        "{secret}"
    );
}
