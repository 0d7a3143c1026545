//! A session's MCP servers: started in parallel when it opens, their tools offered while they
//! are up, withdrawn (and an `error` said) when one dies, restarted on the next call to one of
//! its tools with backoff, re-listed between steps when a server says its tools changed, and
//! stopped with the session.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::call::McpTool;
use super::connect::{Connection, McpEnvironment, connect, list_tools};
use super::handler::Handler;
use super::naming::{ListedTool, exposed_names, manifest};
use crate::config::{McpServer, McpServers};
use crate::model::Danger;
use crate::tool::RegisteredTool;

/// Where an `error` about a server goes (the session's events): the server's name, the
/// message.
pub type Notice = Arc<dyn Fn(&str, String) + Send + Sync>;

/// The longest wait between restart attempts of a server that keeps dying.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// A server's tools beyond this many are not offered: every one is paid for in each request,
/// and a server listing thousands would leave the model no window.
const MAX_TOOLS_PER_SERVER: usize = 128;
/// What one server's tool definitions may add to every request, descriptions and schemas.
const MAX_PROMPT_BYTES_PER_SERVER: usize = 128 * 1024;
/// A server that stayed up this long and then died starts afresh: no backoff.
const STABLE_UPTIME: Duration = Duration::from_secs(60);
/// How often a running server is looked at for having died.
const WATCH_EVERY: Duration = Duration::from_millis(250);

#[derive(Clone)]
pub struct McpHub {
    inner: Arc<Inner>,
}

pub(super) struct Inner {
    servers: Vec<Arc<Server>>,
    generation: AtomicU64,
    env: McpEnvironment,
    notice: Notice,
    changed: Notify,
    stopped: AtomicBool,
    /// Start and restart attempts in flight: a stopping session aborts them, so no server
    /// still in its handshake outlives it.
    starts: Mutex<Vec<tokio::task::AbortHandle>>,
    /// Numbers connections, so news about an old one never touches its successor.
    epochs: AtomicU64,
}

pub(super) struct Server {
    pub name: String,
    pub config: McpServer,
    pub state: tokio::sync::Mutex<State>,
    /// The tools it offers (or offered, while it is down).
    tools: Mutex<Vec<RegisteredTool>>,
    settled: AtomicBool,
    up: AtomicBool,
}

pub(super) enum State {
    Starting,
    Up {
        connection: Box<Connection>,
        handler: Handler,
        epoch: u64,
        since: Instant,
        /// Failed attempts before this one came up: a server that dies soon after is a
        /// crash loop, and backs off.
        failures_before: u32,
    },
    Down {
        error: String,
        failures: u32,
        retry_at: Instant,
    },
    Stopped,
}

/// One server as `corral mcp-servers` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerReport {
    pub name: String,
    pub describe: String,
    /// `up`, `starting`, `down: …`, `stopped`.
    pub status: String,
    /// (name the model sees, level, description).
    pub tools: Vec<(String, Danger, String)>,
    /// The name and version a running server gave at `initialize`.
    pub version: Option<String>,
}

impl McpHub {
    /// Starts every enabled server in the background; see [`McpHub::wait_started`].
    pub fn start(servers: McpServers, env: McpEnvironment, notice: Notice) -> McpHub {
        let servers = servers
            .into_iter()
            .filter(|(_, config)| config.enabled())
            .map(|(name, config)| {
                Arc::new(Server {
                    name,
                    config,
                    state: tokio::sync::Mutex::new(State::Starting),
                    tools: Mutex::new(Vec::new()),
                    settled: AtomicBool::new(false),
                    up: AtomicBool::new(false),
                })
            })
            .collect();
        let inner = Arc::new(Inner {
            servers,
            generation: AtomicU64::new(0),
            env,
            notice,
            changed: Notify::new(),
            stopped: AtomicBool::new(false),
            starts: Mutex::new(Vec::new()),
            epochs: AtomicU64::new(0),
        });
        for server in &inner.servers {
            let hub = Arc::downgrade(&inner);
            let server = server.clone();
            // A server still starting when the session stops waiting keeps going, up to this
            // bound, and its tools join between steps.
            let limit = (server.config.startup_timeout() * 4).max(Duration::from_secs(30));
            let task = tokio::spawn(start_server(hub, server, limit, 0));
            inner.track_start(task.abort_handle());
        }
        McpHub { inner }
    }

    pub fn is_empty(&self) -> bool {
        self.inner.servers.is_empty()
    }

    /// Waits until every server is up or down, or its `startup_timeout` has passed since
    /// the hub started; servers still starting then join later.
    pub async fn wait_started(&self) {
        let begun = Instant::now();
        loop {
            let notified = self.inner.changed.notified();
            let pending: Vec<Instant> = self
                .inner
                .servers
                .iter()
                .filter(|s| !s.settled.load(Ordering::SeqCst))
                .map(|s| begun + s.config.startup_timeout())
                .filter(|deadline| *deadline > Instant::now())
                .collect();
            let Some(deadline) = pending.into_iter().max() else {
                return;
            };
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep_until(deadline.into()) => return,
            }
        }
    }

    /// Bumped whenever the offered tools change.
    pub fn generation(&self) -> u64 {
        self.inner.generation.load(Ordering::SeqCst)
    }

    /// (offered, withdrawn): the tools of servers that are up, and the last known tools of
    /// servers that are down.
    pub fn tools(&self) -> (Vec<RegisteredTool>, Vec<RegisteredTool>) {
        let mut offered = Vec::new();
        let mut withdrawn = Vec::new();
        for server in &self.inner.servers {
            let tools = server
                .tools
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            if server.up.load(Ordering::SeqCst) {
                offered.extend(tools);
            } else {
                withdrawn.extend(tools);
            }
        }
        (offered, withdrawn)
    }

    /// Between steps: re-lists the tools of servers that said they changed, and notices
    /// servers that died.
    pub async fn refresh(&self) {
        for server in &self.inner.servers {
            let mut state = server.state.lock().await;
            let State::Up {
                connection,
                handler,
                epoch,
                ..
            } = &mut *state
            else {
                continue;
            };
            let epoch = *epoch;
            if connection.is_gone() {
                let report = connection.crash_report().await;
                drop(state);
                self.inner.server_died(server, report, epoch).await;
                continue;
            }
            if !handler.tools_changed.swap(false, Ordering::SeqCst) {
                continue;
            }
            // Listed without the state held: a server that never answers must not wedge the
            // session (its calls, its shutdown); the listing is bounded by its timeout.
            let peer = connection.service.peer().clone();
            drop(state);
            let listed =
                tokio::time::timeout(server.config.startup_timeout(), list_tools(&peer)).await;
            match listed {
                Ok(Ok(tools)) => {
                    let state = server.state.lock().await;
                    if matches!(&*state, State::Up { epoch: now, .. } if *now == epoch) {
                        drop(state);
                        self.inner.set_tools(server, &tools);
                        self.inner.bump();
                    }
                }
                Ok(Err(e)) => tracing::warn!(server = %server.name, error = %e, "re-listing tools"),
                Err(_) => tracing::warn!(server = %server.name, "re-listing tools timed out"),
            }
        }
    }

    /// Every server, its status and its tools.
    pub async fn report(&self) -> Vec<ServerReport> {
        let mut out = Vec::new();
        for server in &self.inner.servers {
            let (status, version) = match &*server.state.lock().await {
                State::Starting => ("starting".to_string(), None),
                State::Up { connection, .. } => (
                    "up".to_string(),
                    connection.service.peer().peer_info().and_then(|info| {
                        let server = info.server_info.as_ref()?;
                        Some(format!("{} {}", server.name, server.version))
                    }),
                ),
                State::Down { error, .. } => (format!("down: {error}"), None),
                State::Stopped => ("stopped".to_string(), None),
            };
            let tools = server
                .tools
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .map(|t| {
                    (
                        t.manifest.name.clone(),
                        t.manifest.danger,
                        t.manifest.description.clone(),
                    )
                })
                .collect();
            out.push(ServerReport {
                name: server.name.clone(),
                describe: server.config.describe(),
                status,
                tools,
                version,
            });
        }
        out
    }

    /// Stops every server (their process groups too).
    pub async fn shutdown(&self) {
        self.inner.stopped.store(true, Ordering::SeqCst);
        let starts =
            std::mem::take(&mut *self.inner.starts.lock().unwrap_or_else(|p| p.into_inner()));
        for start in starts {
            start.abort();
        }
        for server in &self.inner.servers {
            let old = std::mem::replace(&mut *server.state.lock().await, State::Stopped);
            server.up.store(false, Ordering::SeqCst);
            if let State::Up {
                connection,
                handler,
                ..
            } = old
            {
                let peer = connection.service.peer().clone();
                for id in handler.in_flight.take_all() {
                    let sent = peer.send_notification(super::call::cancelled(id));
                    let _ = tokio::time::timeout(Duration::from_millis(500), sent).await;
                }
                connection.stop().await;
            }
        }
        self.inner.bump();
    }
}

impl Inner {
    fn bump(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_waiters();
    }

    fn track_start(&self, task: tokio::task::AbortHandle) {
        let mut starts = self.starts.lock().unwrap_or_else(|p| p.into_inner());
        starts.retain(|t| !t.is_finished());
        starts.push(task);
    }

    pub(super) fn server(&self, index: usize) -> Option<&Arc<Server>> {
        self.servers.get(index)
    }

    fn set_tools(self: &Arc<Self>, server: &Arc<Server>, listed: &[ListedTool]) {
        let index = self
            .servers
            .iter()
            .position(|s| Arc::ptr_eq(s, server))
            .unwrap_or_default();
        let mut allowed: Vec<&ListedTool> = listed
            .iter()
            .filter(|t| server.config.allows_tool(&t.name))
            .collect();
        if allowed.len() > MAX_TOOLS_PER_SERVER {
            (self.notice)(
                &server.name,
                format!(
                    "MCP server {} lists {} tools; only the first {MAX_TOOLS_PER_SERVER} are \
                     offered (name the ones you want with `tools = [...]` in its config)",
                    server.name,
                    allowed.len()
                ),
            );
            allowed.truncate(MAX_TOOLS_PER_SERVER);
        }
        let names = exposed_names(&server.name, allowed.iter().map(|t| t.name.as_str()));
        let mut tools = Vec::new();
        let mut spent = 0;
        for (tool, (exposed, original)) in allowed.iter().zip(names) {
            let manifest = manifest(&server.name, &server.config, tool, &exposed);
            spent += manifest.description.len() + manifest.parameters.to_string().len();
            if spent > MAX_PROMPT_BYTES_PER_SERVER {
                (self.notice)(
                    &server.name,
                    format!(
                        "MCP server {}'s tools take more than {} KiB of every request; the \
                         first {} are offered (name the ones you want with `tools = [...]`)",
                        server.name,
                        MAX_PROMPT_BYTES_PER_SERVER / 1024,
                        tools.len()
                    ),
                );
                break;
            }
            tools.push(RegisteredTool {
                manifest: Arc::new(manifest),
                tool: Arc::new(McpTool {
                    hub: Arc::downgrade(self),
                    server: index,
                    tool: original,
                }),
            });
        }
        *server.tools.lock().unwrap_or_else(|p| p.into_inner()) = tools;
    }

    /// A server that was up is gone: its tools are withdrawn and the session told why.
    /// `epoch` is the connection the news is about; a newer one is left alone.
    pub(super) async fn server_died(
        self: &Arc<Self>,
        server: &Arc<Server>,
        report: String,
        epoch: u64,
    ) {
        let mut state = server.state.lock().await;
        let (since, failures_before) = match &*state {
            State::Up {
                epoch: current,
                since,
                failures_before,
                ..
            } if *current == epoch => (*since, *failures_before),
            _ => return,
        };
        // The first death restarts at the next call; dying again soon after backs off.
        let failures = if since.elapsed() >= STABLE_UPTIME {
            0
        } else {
            failures_before + 1
        };
        let delay = match failures {
            0 | 1 => Duration::ZERO,
            n => backoff(n - 1),
        };
        let old = std::mem::replace(
            &mut *state,
            State::Down {
                error: report.clone(),
                failures,
                retry_at: Instant::now() + delay,
            },
        );
        server.up.store(false, Ordering::SeqCst);
        drop(state);
        if let State::Up { connection, .. } = old {
            connection.stop().await;
        }
        if !self.stopped.load(Ordering::SeqCst) {
            (self.notice)(
                &server.name,
                format!(
                    "MCP server {} stopped: {report}; its tools are withdrawn until a call \
                     restarts it",
                    server.name
                ),
            );
        }
        self.bump();
    }

    /// The server ready for a call: up, or restarted now when it is down and its backoff
    /// has passed. Err: why it cannot take calls.
    pub(super) async fn ready(self: &Arc<Self>, server: &Arc<Server>) -> Result<Ready, String> {
        let asked = Instant::now();
        let mut restarted = false;
        loop {
            // Taken before the state is read, so a change in between still wakes the wait.
            let changed = self.changed.notified();
            let restart = {
                let mut state = server.state.lock().await;
                match &mut *state {
                    State::Up {
                        connection,
                        handler,
                        epoch,
                        ..
                    } => {
                        let epoch = *epoch;
                        if !connection.is_gone() {
                            return Ok(Ready {
                                peer: connection.service.peer().clone(),
                                handler: handler.clone(),
                                epoch,
                            });
                        }
                        let report = connection.crash_report().await;
                        drop(state);
                        self.server_died(server, report, epoch).await;
                        continue;
                    }
                    State::Stopped => {
                        return Err(format!("MCP server {} was stopped", server.name));
                    }
                    // Starting (at session start, or another call's restart): wait for it,
                    // as long as its startup timeout.
                    State::Starting => None,
                    State::Down { error, .. } if restarted => {
                        return Err(format!(
                            "MCP server {} could not be restarted: {error}",
                            server.name
                        ));
                    }
                    State::Down {
                        error,
                        failures,
                        retry_at,
                    } => {
                        let now = Instant::now();
                        if *retry_at > now {
                            return Err(format!(
                                "MCP server {} is down ({error}); corral tries to start it \
                                 again in {} s",
                                server.name,
                                (*retry_at - now).as_secs() + 1
                            ));
                        }
                        // One restart at a time: calls arriving meanwhile wait for it.
                        let failures = *failures;
                        *state = State::Starting;
                        Some(failures)
                    }
                }
            };
            match restart {
                Some(failures) => {
                    // Its own task: a call cancelled meanwhile must not leave the server
                    // "starting" for good.
                    let task = tokio::spawn(start_server(
                        Arc::downgrade(self),
                        server.clone(),
                        server.config.startup_timeout(),
                        failures,
                    ));
                    self.track_start(task.abort_handle());
                    let _ = task.await;
                    restarted = true;
                }
                None => {
                    let limit = server.config.startup_timeout();
                    let Some(left) = limit.checked_sub(asked.elapsed()) else {
                        return Err(format!(
                            "MCP server {} is still starting after {} s",
                            server.name,
                            limit.as_secs_f64()
                        ));
                    };
                    tokio::select! {
                        _ = changed => {}
                        _ = tokio::time::sleep(left) => {}
                    }
                }
            }
        }
    }

    /// A call found the connection it was given (`epoch`) broken.
    pub(super) async fn call_failed(
        self: &Arc<Self>,
        server: &Arc<Server>,
        why: String,
        epoch: u64,
    ) {
        let report = {
            let mut state = server.state.lock().await;
            match &mut *state {
                State::Up {
                    connection,
                    epoch: current,
                    ..
                } if *current == epoch => {
                    let report = connection.crash_report().await;
                    format!("{why}; {report}")
                }
                _ => return,
            }
        };
        self.server_died(server, report, epoch).await;
    }
}

/// A server that can take a call: its connection, the handler its notifications reach, and
/// which connection this is.
pub(super) struct Ready {
    pub peer: rmcp::Peer<rmcp::RoleClient>,
    pub handler: Handler,
    pub epoch: u64,
}

/// 1 s after the first failure, doubling, at most a minute.
fn backoff(failures: u32) -> Duration {
    let secs = 1u64 << failures.saturating_sub(1).min(6);
    Duration::from_secs(secs).min(MAX_BACKOFF)
}

/// One attempt to start a server; `failures` is how many attempts in a row failed before.
async fn start_server(hub: Weak<Inner>, server: Arc<Server>, limit: Duration, failures: u32) {
    let Some(inner) = hub.upgrade() else {
        return;
    };
    let handler = Handler::new();
    let result = connect(
        &server.name,
        &server.config,
        &inner.env,
        handler.clone(),
        limit,
    )
    .await;
    let mut state = server.state.lock().await;
    if matches!(*state, State::Stopped) || inner.stopped.load(Ordering::SeqCst) {
        if let Ok(connection) = result {
            drop(state);
            connection.stop().await;
        }
        return;
    }
    match result {
        Ok(connection) => {
            inner.set_tools(&server, &connection.tools);
            let epoch = inner.epochs.fetch_add(1, Ordering::SeqCst);
            *state = State::Up {
                connection: Box::new(connection),
                handler,
                epoch,
                since: Instant::now(),
                failures_before: failures,
            };
            server.up.store(true, Ordering::SeqCst);
            drop(state);
            tracing::info!(server = %server.name, "MCP server up");
            tokio::spawn(watch(hub, server.clone(), epoch));
        }
        Err(error) => {
            let failures = failures + 1;
            *state = State::Down {
                error: error.clone(),
                failures,
                retry_at: Instant::now() + backoff(failures),
            };
            server.up.store(false, Ordering::SeqCst);
            drop(state);
            (inner.notice)(
                &server.name,
                format!("MCP server {} failed to start: {error}", server.name),
            );
        }
    }
    server.settled.store(true, Ordering::SeqCst);
    inner.bump();
}

/// Notices a running server's death while nobody calls it, so its `error` is said and its
/// tools withdrawn before the next step.
async fn watch(hub: Weak<Inner>, server: Arc<Server>, epoch: u64) {
    loop {
        tokio::time::sleep(WATCH_EVERY).await;
        let Some(inner) = hub.upgrade() else {
            return;
        };
        let mut state = server.state.lock().await;
        let State::Up {
            connection,
            epoch: current,
            ..
        } = &mut *state
        else {
            return;
        };
        if *current != epoch {
            return;
        }
        if connection.is_gone() {
            let report = connection.crash_report().await;
            drop(state);
            inner.server_died(&server, report, epoch).await;
            return;
        }
    }
}
