//! `corral serve`: many sessions in one process, driven over REST and WebSocket (API v1),
//! with a live event stream of every session and a web page for sessions and approvals.
//!
//! Modules: `auth` (JWT), `access` (what a `user` token may reach; admins are the host's
//! owner), `guard` (Host and Origin checks on every request, security headers on every
//! response), `rest` (`/api/v1`, the OpenAPI document, the SSE event bus), `ws`
//! (`/ws/v1/sessions/{id}` and `/ws/v1/logs`, the seed protocol exactly), `logs` (the log
//! lines the log stream carries), `page` (the embedded web page).
//!
//! A token's streams (WebSocket, SSE) end when the token expires: 4001 on a WebSocket.

mod access;
pub mod auth;
mod guard;
mod logs;
mod page;
mod rest;
mod ws;

pub(crate) use access::user_roots;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use self::auth::{Auth, Claims};
use super::run::{Exit, load_session_config};
use crate::error::{Error, usage};
use crate::host::manager::SessionManager;
use crate::host::open::agents_dir;

pub use logs::LogHub;

/// Timers the protocol fixes; tests shorten them through the environment.
#[derive(Debug, Clone)]
pub struct ServerSettings {
    /// A WebSocket silent this long is dropped (the seed: 90 s).
    pub idle_drop: Duration,
    /// Buffered messages are kept at least this long after a disconnect (the seed: 30 s).
    pub replay_window: Duration,
    /// A WebSocket write that makes no progress this long closes the connection (1013).
    pub send_timeout: Duration,
}

impl ServerSettings {
    /// `CORRAL_WS_IDLE_SECS` and `CORRAL_WS_REPLAY_SECS`, range-checked: a value that is not a
    /// number of seconds in (0, 30 days] stops `serve` with an error naming the variable.
    fn from_env() -> Result<ServerSettings, crate::config::RangeError> {
        let secs = |name: &str, default: u64| {
            crate::config::env_seconds(name).map(|v| v.unwrap_or(Duration::from_secs(default)))
        };
        Ok(ServerSettings {
            idle_drop: secs("CORRAL_WS_IDLE_SECS", 90)?,
            replay_window: secs("CORRAL_WS_REPLAY_SECS", 30)?,
            send_timeout: secs("CORRAL_WS_SEND_SECS", 10)?,
        })
    }
}

pub struct AppState {
    pub manager: SessionManager,
    /// `--nats`: sessions run on nodes; `manager` hosts their mirrors.
    pub cluster: Option<Arc<crate::cluster::Cluster>>,
    pub auth: Auth,
    pub access: access::Access,
    pub hosts: guard::HostCheck,
    pub settings: ServerSettings,
    pub ws: ws::Hub,
    pub logs: LogHub,
    /// Cancelled on shutdown: connections close with 1001.
    pub shutdown: CancellationToken,
    /// Every upgraded WebSocket: axum's graceful shutdown waits for HTTP connections only, so
    /// the server waits here for sockets to send their close frame before the process ends.
    pub sockets: tokio_util::task::TaskTracker,
}

pub type Shared = Arc<AppState>;

/// An API error: HTTP status, a machine-readable code, a message safe to show.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "UNAUTHORIZED", message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "FORBIDDEN", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "NOT_FOUND", message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            axum::Json(json!({"error": {"code": self.code, "message": self.message}})),
        )
            .into_response()
    }
}

/// The bearer token of a request: `Authorization: Bearer …`, else `?token=…`.
pub fn bearer(headers: &axum::http::HeaderMap, query_token: Option<&str>) -> Option<String> {
    headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(|t| t.trim().to_string())
        .or_else(|| query_token.map(str::to_string))
        .filter(|t| !t.is_empty())
}

/// Verifies the caller; 401 with a clear message otherwise.
pub fn authenticate(
    state: &AppState,
    headers: &axum::http::HeaderMap,
    query_token: Option<&str>,
) -> Result<Claims, ApiError> {
    let token = bearer(headers, query_token)
        .ok_or_else(|| ApiError::unauthorized("no bearer token (Authorization: Bearer …)"))?;
    state
        .auth
        .verify(&token)
        .map_err(|e| ApiError::unauthorized(e.to_string()))
}

/// A REST handler's caller: the verified claims of the request's bearer token. A handler
/// that takes `Claims` answers 401 in the API's JSON error shape before its own code runs.
impl axum::extract::FromRequestParts<Shared> for Claims {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &Shared,
    ) -> Result<Self, ApiError> {
        authenticate(state, &parts.headers, None)
    }
}

pub fn router(state: Shared) -> Router {
    Router::new()
        .merge(rest::routes())
        .merge(ws::routes())
        .merge(page::routes())
        // Before the layer, so unknown paths pass the Host check and get the headers too.
        .fallback(|uri: axum::http::Uri| async move {
            ApiError::not_found(format!("no route {}", uri.path()))
        })
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            guard::check,
        ))
        .with_state(state)
}

#[derive(Debug, Clone, Default)]
pub struct ServeArgs {
    pub listen: Option<String>,
    /// Binding anything but loopback needs this, on purpose.
    pub allow_remote: bool,
    pub config_path: Option<PathBuf>,
    /// `--no-instructions`: sessions load no project instructions.
    pub no_instructions: bool,
    /// `--nats URL`: the control plane of the `corral node`s on this NATS deployment.
    pub nats: Option<String>,
}

/// Runs the server until Ctrl-C, SIGTERM or SIGHUP; then every session is closed (and every
/// child process with it) before returning. What crashed runtimes left is reaped at start.
pub async fn serve(args: ServeArgs, logs: LogHub) -> Result<Exit, Error> {
    let config = load_session_config(args.config_path.as_ref(), args.no_instructions)?;
    let addr: SocketAddr = match &args.listen {
        Some(listen) => listen
            .parse()
            .map_err(|e| usage(format!("--listen {listen:?} is not an address: {e}")))?,
        None => config
            .server
            .listen
            .unwrap_or(SocketAddr::from(([127, 0, 0, 1], 7777))),
    };
    if !addr.ip().is_loopback() && !args.allow_remote {
        return Err(usage(format!(
            "refusing to listen on {addr}: it is not a loopback address; pass --allow-remote \
             if you mean it (anyone who can reach it and holds a token drives your machine)"
        )));
    }
    let secret_file = auth::default_secret_path()
        .ok_or_else(|| usage("cannot find a config directory: set XDG_CONFIG_HOME or HOME"))?;
    let secret = auth::load_secret(config.server.jwt_secret.as_deref(), &secret_file)
        .map_err(|e| Error::Runtime(e.to_string()))?;
    let started_in = std::env::current_dir().map_err(usage)?;
    let roots = access::user_roots(
        &config.server.roots,
        &started_in,
        dirs::home_dir().as_deref(),
    )
    .map_err(usage)?;
    let settings = ServerSettings::from_env().map_err(usage)?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Error::Runtime(format!("cannot listen on {addr}: {e}")))?;
    let bound = listener
        .local_addr()
        .map_err(|e| Error::Runtime(e.to_string()))?;
    let log_dir = agents_dir()?;
    let manager = SessionManager::new(config.clone(), log_dir.clone());
    let cluster = match &args.nats {
        Some(url) => Some(crate::cluster::Cluster::start(url, &config, manager.clone()).await?),
        None => None,
    };
    // At start, not at the first session: a crashed server's tools must not run on meanwhile.
    // Over NATS nothing runs here: the nodes reap their own.
    let dormant = if cluster.is_none() {
        crate::host::open::clean_up_after_crashes(&log_dir);
        manager.load_dormant()
    } else {
        0
    };
    if dormant > 0 {
        tracing::warn!(
            target: "corral::server",
            dormant,
            "sessions a previous server left open are listed as dead; reopen them by id"
        );
    }
    let clustered = cluster.is_some();
    let state = Arc::new(AppState {
        manager: manager.clone(),
        cluster,
        auth: Auth::new(&secret).map_err(|e| Error::Runtime(e.to_string()))?,
        access: access::Access::new(&config.server, roots),
        hosts: guard::HostCheck::new(bound, &config.server.allowed_hosts),
        settings,
        ws: ws::Hub::default(),
        logs,
        shutdown: CancellationToken::new(),
        sockets: tokio_util::task::TaskTracker::new(),
    });
    tracing::info!(target: "corral::server", "listening on http://{bound}");
    {
        use std::io::Write;
        let _ = writeln!(
            std::io::stdout(),
            "corral serve: listening on http://{bound}"
        );
        let _ = std::io::stdout().flush();
    }
    announce_page(bound, &state.auth);
    let stop = state.shutdown.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        stop.cancel();
    });
    let until = state.shutdown.clone();
    // Frames are small and latency is the point: no Nagle delay behind a delayed ACK.
    let listener = {
        use axum::serve::ListenerExt;
        listener.tap_io(|tcp| {
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!(error = %e, "TCP_NODELAY on an accepted connection");
            }
        })
    };
    let served = axum::serve(listener, router(state.clone()))
        .with_graceful_shutdown(async move { until.cancelled().await })
        .await;
    // Each socket closes with 1001 within its send timeout; a client that never reads is
    // not waited for beyond that.
    state.sockets.close();
    let socket_wait = state.settings.send_timeout + Duration::from_secs(1);
    if tokio::time::timeout(socket_wait, state.sockets.wait())
        .await
        .is_err()
    {
        tracing::warn!(target: "corral::server", "WebSocket connections still open at exit");
    }
    // Over NATS the sessions are the nodes': they go on without this process.
    if !clustered {
        manager.shutdown().await;
    }
    // Closed sessions' tool processes end in background tasks: they must be gone first.
    crate::sandbox::process::wait_for_tool_processes(crate::sandbox::process::EXIT_WAIT).await;
    served.map_err(|e| Error::Runtime(format!("server error: {e}")))?;
    Ok(Exit::Ok)
}

/// How long the token in the page link printed at start lasts.
const PAGE_LINK_TTL: Duration = Duration::from_secs(12 * 3600);

/// Where to open the page. On a terminal (stderr a TTY), the person who just started the
/// server holds its secret and so is its admin: they get a link that signs the page in,
/// an admin token in the URL's fragment, which browsers never send to a server (so it
/// stays out of access logs and proxies) and which the page moves to its session storage
/// and then removes from the address bar. Anywhere else (a service, a pipe into a log
/// file) the token would land in a log: only the way to mint one is printed.
fn announce_page(bound: SocketAddr, auth: &Auth) {
    use std::io::{IsTerminal, Write};
    let host = if bound.ip().is_unspecified() {
        match bound {
            SocketAddr::V4(_) => SocketAddr::from(([127, 0, 0, 1], bound.port())),
            SocketAddr::V6(_) => SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, bound.port())),
        }
    } else {
        bound
    };
    let mut stderr = std::io::stderr();
    if !stderr.is_terminal() {
        let _ = writeln!(
            stderr,
            "corral serve: the page at http://{host}/ asks for a token: \
             corral token --sub NAME --role admin"
        );
        return;
    }
    let owner = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .ok()
        .filter(|name| {
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        })
        .unwrap_or_else(|| "admin".to_string());
    match auth.mint(&owner, auth::Role::Admin, PAGE_LINK_TTL) {
        Ok(token) => {
            let _ = writeln!(
                stderr,
                "corral serve: open http://{host}/#token={token}\n  \
                 (signed in as {owner}, admin, for 12 hours; keep this link to yourself)"
            );
        }
        Err(e) => {
            tracing::warn!(target: "corral::server", error = %e, "cannot mint the page link's token")
        }
    }
}

/// SIGINT, SIGTERM or SIGHUP: each stops the server the same orderly way (SIGHUP's default
/// action would end it at once, its tools left running).
pub(crate) async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let caught = |kind: SignalKind| async move {
        match signal(kind) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = caught(SignalKind::terminate()) => {}
        () = caught(SignalKind::hangup()) => {}
    }
}
