//! corral's side of an MCP connection: what it says about itself, where progress goes, and
//! what it does with the requests a server may send. Sampling is refused (rmcp's answer:
//! method not found, as corral declares no sampling capability) and elicitation declined: a
//! server does not get to spend the session's model or ask the person behind the gate.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    Implementation, ProgressNotificationParam, ProtocolVersion,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ClientHandler, ErrorData as McpError, RoleClient};

use crate::event::OutputStream;
use crate::sandbox::OutputSink;

/// One progress line's message is cut here.
const MAX_PROGRESS_MESSAGE: usize = 512;

/// Where a call's progress goes, and how many bytes of it may still go there (a server
/// sending progress without end gets the call's output cap, like a process's output).
struct Route {
    sink: OutputSink,
    left: usize,
}

/// Progress tokens of calls in flight → where their `tool_output` goes.
#[derive(Clone, Default)]
pub struct ProgressRoutes(Arc<Mutex<HashMap<String, Route>>>);

impl ProgressRoutes {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Route>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn add(&self, token: String, sink: OutputSink, budget: usize) {
        self.lock().insert(token, Route { sink, left: budget });
    }

    pub fn remove(&self, token: &str) {
        self.lock().remove(token);
    }

    /// Emits `line` on the call's route while its budget lasts; once it runs out, one
    /// closing line says so and the rest is dropped.
    fn emit(&self, token: &str, line: &str) {
        let mut routes = self.lock();
        let Some(route) = routes.get_mut(token) else {
            return;
        };
        if route.left == 0 {
            return;
        }
        if line.len() <= route.left {
            route.left -= line.len();
            route.sink.emit(OutputStream::Stdout, line);
        } else {
            route.left = 0;
            route
                .sink
                .emit(OutputStream::Stdout, "[further progress not shown]\n");
        }
    }
}

/// A progress token as the routes key it (its JSON: `1` and `"1"` stay apart).
pub fn token_key(token: &rmcp::model::ProgressToken) -> String {
    serde_json::to_string(token).unwrap_or_default()
}

/// Calls sent and not yet answered or cancelled: a session that stops cancels them at the
/// server before it closes the connection.
#[derive(Clone, Default)]
pub struct InFlightCalls(Arc<Mutex<Vec<rmcp::model::RequestId>>>);

impl InFlightCalls {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<rmcp::model::RequestId>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn add(&self, id: rmcp::model::RequestId) {
        self.lock().push(id);
    }

    pub fn remove(&self, id: &rmcp::model::RequestId) {
        self.lock().retain(|known| known != id);
    }

    pub fn take_all(&self) -> Vec<rmcp::model::RequestId> {
        std::mem::take(&mut *self.lock())
    }
}

#[derive(Clone)]
pub struct Handler {
    pub progress: ProgressRoutes,
    pub in_flight: InFlightCalls,
    /// Set by `notifications/tools/list_changed`; the hub re-lists between steps.
    pub tools_changed: Arc<AtomicBool>,
}

impl Handler {
    pub fn new() -> Handler {
        Handler {
            progress: ProgressRoutes::default(),
            in_flight: InFlightCalls::default(),
            tools_changed: Arc::new(AtomicBool::new(false)),
        }
    }
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        // No sampling, elicitation or roots: a server gets nothing it could use to reach past
        // the gate.
        let mut config = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("corral", env!("CARGO_PKG_VERSION")),
        );
        // The newest revision that still opens with `initialize`, which every server here
        // speaks; a server answers it or an older one it knows (the fallback).
        config.protocol_version = ProtocolVersion::LATEST_WITH_INITIALIZE;
        config
    }

    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        tracing::warn!("an MCP server asked the user for input; declined");
        Ok(ElicitResult::new(ElicitationAction::Decline))
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let amount = match params.total {
            Some(total) => format!("{}/{}", params.progress, total),
            None => params.progress.to_string(),
        };
        let line = match params.message.as_deref().filter(|m| !m.is_empty()) {
            Some(message) => {
                let message = crate::tool::cut_head_tail(message, MAX_PROGRESS_MESSAGE);
                format!(
                    "progress {amount}: {}\n",
                    message.replace(['\n', '\r'], " ")
                )
            }
            None => format!("progress {amount}\n"),
        };
        self.progress
            .emit(&token_key(&params.progress_token), &line);
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.store(true, Ordering::SeqCst);
    }
}
