//! Checks every request passes before any route, and headers every response carries.
//!
//! - `Host` must name the listen address (`127.0.0.1:PORT`, `localhost:PORT` on loopback, any
//!   IP literal when bound to an unspecified address) or a name in `[server] allowed_hosts`;
//!   else 421. A page on another site that re-points its own name at 127.0.0.1 (DNS
//!   rebinding) sends its own name as `Host`, so it never reaches a route. A request without
//!   `Host` is refused too: every HTTP/1.1 client sends one.
//! - `Origin`, when present, must be this server's (the scheme and the `Host` just checked);
//!   else 403. Browsers send `Origin` on every WebSocket upgrade and every cross-site fetch, so
//!   a foreign page cannot open a session socket with a token it got hold of, nor post
//!   anything. Clients that are not browsers send no `Origin` and are not affected.
//! - Every response: a strict Content-Security-Policy (scripts, styles and connections from
//!   this origin only, no inline code, `frame-ancestors 'none'`), `X-Frame-Options: DENY`,
//!   `X-Content-Type-Options: nosniff` and `Referrer-Policy: no-referrer`.

use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use axum::extract::{Request, State};
use axum::http::uri::Authority;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::{ApiError, Shared};

/// The page's policy: its own files only. `'self'` in `connect-src` covers the same-origin
/// WebSocket (ws:/wss:) in every current browser; `data:` images are screenshots in results.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
    img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; \
    form-action 'self'; frame-ancestors 'none'";

/// Which `Host` values the server answers to.
#[derive(Debug, Clone)]
pub struct HostCheck {
    bound: SocketAddr,
    /// Lower-case `name` (any port) or `name:port` entries from the config.
    allowed: Vec<String>,
}

impl HostCheck {
    pub fn new(bound: SocketAddr, allowed: &[String]) -> HostCheck {
        HostCheck {
            bound,
            allowed: allowed
                .iter()
                .map(|a| a.trim().to_ascii_lowercase())
                .collect(),
        }
    }

    pub fn admits(&self, host: &str) -> bool {
        let Ok(authority) = Authority::from_str(host.trim()) else {
            return false;
        };
        let name = authority.host().to_ascii_lowercase();
        let port = authority.port_u16();
        let listed = self
            .allowed
            .iter()
            .any(|entry| *entry == name || port.is_some_and(|p| *entry == format!("{name}:{p}")));
        if listed {
            return true;
        }
        if port.unwrap_or(80) != self.bound.port() {
            return false;
        }
        let bound = self.bound.ip();
        let literal = name.trim_start_matches('[').trim_end_matches(']');
        match IpAddr::from_str(literal) {
            Ok(ip) => {
                ip == bound || bound.is_unspecified() || (ip.is_loopback() && bound.is_loopback())
            }
            Err(_) => name == "localhost" && (bound.is_loopback() || bound.is_unspecified()),
        }
    }
}

/// The request's `Host`: the header, else the authority of an absolute-form request line.
fn host_of(request: &Request) -> Option<String> {
    request
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| request.uri().authority().map(ToString::to_string))
}

/// `Origin` equals `scheme://host` of this request (default ports may be left out of either).
fn same_origin(origin: &str, host: &str) -> bool {
    let origin = origin.trim().to_ascii_lowercase();
    let host = host.trim().to_ascii_lowercase();
    let Some((scheme, authority)) = origin.split_once("://") else {
        return false;
    };
    let default_port = match scheme {
        "http" => ":80",
        "https" => ":443",
        _ => return false,
    };
    let strip = |a: &str| a.strip_suffix(default_port).unwrap_or(a).to_string();
    strip(authority) == strip(&host)
}

fn refuse(status: StatusCode, code: &'static str, message: String) -> Response {
    tracing::info!(target: "corral::server", %status, "refused: {message}");
    ApiError::new(status, code, message).into_response()
}

fn security_headers(headers: &mut HeaderMap) {
    let set = |headers: &mut HeaderMap, name, value: &'static str| {
        headers.insert(name, HeaderValue::from_static(value));
    };
    set(headers, header::CONTENT_SECURITY_POLICY, CSP);
    set(headers, header::X_FRAME_OPTIONS, "DENY");
    set(headers, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(headers, header::REFERRER_POLICY, "no-referrer");
}

pub async fn check(State(state): State<Shared>, request: Request, next: Next) -> Response {
    let host = host_of(&request);
    let mut response = match &host {
        Some(host) if state.hosts.admits(host) => {
            match request.headers().get(header::ORIGIN).map(|o| o.to_str()) {
                Some(Ok(origin)) if !same_origin(origin, host) => refuse(
                    StatusCode::FORBIDDEN,
                    "FOREIGN_ORIGIN",
                    format!("requests from the page at {origin} are not accepted here"),
                ),
                Some(Err(_)) => refuse(
                    StatusCode::FORBIDDEN,
                    "FOREIGN_ORIGIN",
                    "the Origin header is not readable".to_string(),
                ),
                _ => next.run(request).await,
            }
        }
        Some(host) => refuse(
            StatusCode::MISDIRECTED_REQUEST,
            "MISDIRECTED",
            format!(
                "this server does not answer to the host {host:?}; add it to [server] \
                 allowed_hosts if it is a name of this machine"
            ),
        ),
        None => refuse(
            StatusCode::MISDIRECTED_REQUEST,
            "MISDIRECTED",
            "the request names no Host".to_string(),
        ),
    };
    security_headers(response.headers_mut());
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_the_listen_address_or_listed_names() {
        let check = HostCheck::new("127.0.0.1:7777".parse().unwrap(), &["Corral.lan".into()]);
        for host in [
            "127.0.0.1:7777",
            "localhost:7777",
            "LOCALHOST:7777",
            "[::1]:7777",
        ] {
            assert!(check.admits(host), "{host}");
        }
        assert!(check.admits("corral.lan") && check.admits("corral.lan:443"));
        for host in [
            "evil.example",
            "evil.example:7777",
            "127.0.0.1:7778",
            "127.0.0.1",
            "10.0.0.1:7777",
            "localhost.evil.example:7777",
            "",
            "a b",
        ] {
            assert!(!check.admits(host), "{host}");
        }
        let any = HostCheck::new("0.0.0.0:80".parse().unwrap(), &[]);
        assert!(any.admits("192.168.1.5") && any.admits("192.168.1.5:80"));
        assert!(!any.admits("rebound.evil.example"));
    }

    #[test]
    fn origins_must_be_this_server() {
        assert!(same_origin("http://127.0.0.1:7777", "127.0.0.1:7777"));
        assert!(same_origin("https://corral.lan", "corral.lan:443"));
        assert!(same_origin("http://corral.lan:80", "corral.lan"));
        assert!(!same_origin("http://evil.example", "127.0.0.1:7777"));
        assert!(!same_origin("http://127.0.0.1:7778", "127.0.0.1:7777"));
        assert!(!same_origin("null", "127.0.0.1:7777"));
        assert!(!same_origin("file://", "127.0.0.1:7777"));
    }
}
