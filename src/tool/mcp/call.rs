//! One call to an MCP server's tool: through the gate like any tool (the loop did that), then
//! `tools/call` with the call's progress routed to `tool_output`, the server's tool timeout,
//! and `notifications/cancelled` when the turn is cancelled or the call abandoned.

use std::sync::Weak;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotification, CancelledNotificationParam,
    ClientNotification, ClientRequest, RequestId, ServerResult,
};
use rmcp::service::PeerRequestOptions;
use rmcp::{Peer, RoleClient, ServiceError};
use serde_json::Value;

use super::handler::{InFlightCalls, ProgressRoutes, token_key};
use super::hub::Inner;
use super::result::map_result;
use crate::tool::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput, cut_head_tail};

pub(super) struct McpTool {
    pub hub: Weak<Inner>,
    /// Index of its server in the hub.
    pub server: usize,
    /// The server's own name for the tool.
    pub tool: String,
}

impl Tool for McpTool {
    fn name(&self) -> &'static str {
        "mcp"
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            // A server's error text is its own output too: the same cap as a result's.
            self.run(args, ctx).await.map_err(|e| match e {
                ToolError::Failed(text) => {
                    ToolError::Failed(cut_head_tail(&text, ctx.max_output_bytes).into_owned())
                }
                other => other,
            })
        })
    }
}

impl McpTool {
    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let hub = self
            .hub
            .upgrade()
            .ok_or_else(|| ToolError::Failed("the session's MCP servers were stopped".into()))?;
        let server = hub
            .server(self.server)
            .cloned()
            .ok_or_else(|| ToolError::Failed("no such MCP server".into()))?;
        let ready = hub.ready(&server).await.map_err(ToolError::Failed)?;
        let (peer, handler, epoch) = (ready.peer, ready.handler, ready.epoch);
        let mut params = CallToolRequestParams::new(self.tool.clone());
        if let Value::Object(map) = args {
            params = params.with_arguments(map);
        }
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let timeout = server.config.tool_timeout();
        let handle = match peer
            .send_cancellable_request(request, PeerRequestOptions::with_timeout(timeout))
            .await
        {
            Ok(handle) => handle,
            Err(e) => {
                hub.call_failed(&server, e.to_string(), epoch).await;
                return Err(ToolError::Failed(format!(
                    "MCP server {} cannot take the call: {e}",
                    server.name
                )));
            }
        };
        handler.in_flight.add(handle.id.clone());
        let mut guard = InFlight {
            peer: peer.clone(),
            id: Some(handle.id.clone()),
            routes: handler.progress.clone(),
            token: token_key(&handle.progress_token),
            calls: handler.in_flight.clone(),
        };
        guard.routes.add(
            guard.token.clone(),
            ctx.output.clone(),
            ctx.max_output_bytes,
        );
        let result = tokio::select! {
            result = handle.await_response() => result,
            _ = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
        };
        if let Some(id) = guard.id.take() {
            guard.calls.remove(&id);
        }
        match result {
            Ok(ServerResult::CallToolResult(result)) => {
                let value = serde_json::to_value(&result)
                    .map_err(|e| ToolError::Failed(format!("an unreadable result: {e}")))?;
                map_result(&value)
            }
            Ok(other) => Err(ToolError::Failed(format!(
                "MCP server {} answered tools/call with something else: {}",
                server.name,
                serde_json::to_string(&other).unwrap_or_default()
            ))),
            Err(ServiceError::McpError(error)) => Err(ToolError::Failed(format!(
                "{}: {}",
                server.name, error.message
            ))),
            Err(ServiceError::Timeout { timeout }) => Err(ToolError::Failed(format!(
                "MCP server {} did not answer within {} s (tool_timeout_secs); the call was \
                 cancelled",
                server.name,
                timeout.as_secs_f64()
            ))),
            Err(e) => {
                hub.call_failed(&server, e.to_string(), epoch).await;
                Err(ToolError::Failed(format!(
                    "MCP server {} failed during the call: {e}",
                    server.name
                )))
            }
        }
    }
}

/// A call in flight: its progress route goes when it ends, and an abandoned one (the turn
/// was cancelled, the future dropped) is cancelled at the server too.
struct InFlight {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
    routes: ProgressRoutes,
    token: String,
    calls: InFlightCalls,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.routes.remove(&self.token);
        let Some(id) = self.id.take() else {
            return;
        };
        // Sent from a task (a drop cannot wait); should the session stop first, its
        // shutdown sends it for every call still in flight.
        let peer = self.peer.clone();
        let calls = self.calls.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = peer.send_notification(cancelled(id.clone())).await;
                calls.remove(&id);
            });
        }
    }
}

/// `notifications/cancelled` for an abandoned call.
pub(super) fn cancelled(id: RequestId) -> ClientNotification {
    ClientNotification::from(CancelledNotification::new(CancelledNotificationParam::new(
        Some(id),
        Some("the call was abandoned (the turn was cancelled or the session stopped)".into()),
    )))
}
