//! The ACP client's JSON-RPC 2.0 session over the shared line transport
//! ([`crate::backend::jsonrpc`]).
//!
//! One reader task parses every line in arrival order. Notifications and the agent's own
//! requests go into one channel, in order; responses complete the matching pending request.
//! Because the reader hands over every `session/update` before it completes the response that
//! follows it, a turn that drains the channel after its `session/prompt` answered has seen
//! every update of that turn.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::{mpsc, oneshot};

use crate::backend::jsonrpc::{self, Dialect, Message, RemoteError, Writer};

#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum RpcError {
    /// The agent answered with a JSON-RPC error.
    #[error("{message} (code {code}){}", data_suffix(.data))]
    Remote {
        code: i64,
        message: String,
        data: Value,
    },
    /// The pipe closed (the agent exited) before an answer came.
    #[error("the agent closed its connection")]
    Closed,
}

fn data_suffix(data: &Value) -> String {
    if data.is_null() {
        String::new()
    } else {
        format!(": {data}")
    }
}

impl RpcError {
    pub(crate) fn remote(code: i64, message: impl Into<String>) -> RpcError {
        RpcError::Remote {
            code,
            message: message.into(),
            data: Value::Null,
        }
    }
}

impl From<RemoteError> for RpcError {
    fn from(e: RemoteError) -> Self {
        RpcError::Remote {
            code: e.code,
            message: e.message,
            data: e.data,
        }
    }
}

/// What the agent sent that is not a response.
#[derive(Debug)]
pub(crate) enum Incoming {
    Notification {
        method: String,
        params: Value,
    },
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    /// The answer to one of corral's requests. It travels in the same queue as the agent's
    /// notifications, so whoever settles it has seen every update the agent sent before it.
    Response(Answer),
}

/// An answer and where it goes.
#[derive(Debug)]
pub(crate) struct Answer {
    reply: oneshot::Sender<Result<Value, RpcError>>,
    result: Result<Value, RpcError>,
}

impl Answer {
    /// Hands the answer to the request waiting for it.
    pub(crate) fn settle(self) {
        let _ = self.reply.send(self.result);
    }
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<Value, RpcError>>>>>;

/// The client end of the connection; cheap to clone.
#[derive(Clone)]
pub(crate) struct Rpc {
    writer: Writer,
    pending: Pending,
    next_id: Arc<AtomicU64>,
}

impl Rpc {
    /// Starts the reader and writer tasks. The receiver yields the agent's notifications and
    /// requests and ends when the agent's stdout closes.
    pub(crate) fn start(
        stdin: ChildStdin,
        stdout: ChildStdout,
    ) -> (Rpc, mpsc::UnboundedReceiver<Incoming>) {
        let (in_tx, in_rx) = mpsc::unbounded_channel();
        let pending: Pending = Arc::default();
        tokio::spawn(read_lines(stdout, in_tx, pending.clone()));
        let rpc = Rpc {
            writer: Writer::start(stdin, Dialect::Acp),
            pending,
            next_id: Arc::new(AtomicU64::new(0)),
        };
        (rpc, in_rx)
    }

    /// Sends a request; the receiver yields its answer.
    pub(crate) fn start_request(
        &self,
        method: &str,
        params: Value,
    ) -> oneshot::Receiver<Result<Value, RpcError>> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, tx);
        if !self.writer.request(id, method, params)
            && let Some(tx) = self
                .pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id)
        {
            let _ = tx.send(Err(RpcError::Closed));
        }
        rx
    }

    pub(crate) async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        self.start_request(method, params)
            .await
            .unwrap_or(Err(RpcError::Closed))
    }

    pub(crate) fn notify(&self, method: &str, params: Value) {
        self.writer.notify(method, Some(params));
    }

    pub(crate) fn respond(&self, id: Value, result: Result<Value, RpcError>) {
        let result = result.map_err(|e| match e {
            RpcError::Remote {
                code,
                message,
                data,
            } => RemoteError {
                code,
                message,
                data,
            },
            RpcError::Closed => RemoteError {
                code: -32603,
                message: "closed".into(),
                data: Value::Null,
            },
        });
        self.writer.respond(id, result);
    }
}

async fn read_lines(
    stdout: ChildStdout,
    incoming: mpsc::UnboundedSender<Incoming>,
    pending: Pending,
) {
    jsonrpc::read_messages(stdout, Dialect::Acp, jsonrpc::MAX_LINE_BYTES, |message| {
        dispatch(message, &incoming, &pending);
        true
    })
    .await;
    // Everything still waiting learns the agent is gone; dropping `incoming` ends the channel.
    let waiting: Vec<_> = pending
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .drain()
        .collect();
    for (_, tx) in waiting {
        let _ = tx.send(Err(RpcError::Closed));
    }
}

fn dispatch(message: Message, incoming: &mpsc::UnboundedSender<Incoming>, pending: &Pending) {
    match message {
        Message::Request { id, method, params } => {
            let _ = incoming.send(Incoming::Request { id, method, params });
        }
        Message::Notification { method, params } => {
            let _ = incoming.send(Incoming::Notification { method, params });
        }
        Message::Response { id, result } => {
            let Some(id) = id.as_u64() else {
                tracing::warn!(%id, "a response to a request corral did not send");
                return;
            };
            let Some(tx) = pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id)
            else {
                return;
            };
            let result = result.map_err(RpcError::from);
            if let Err(unsent) = incoming.send(Incoming::Response(Answer { reply: tx, result })) {
                // Nobody reads the queue any more: settle it here.
                if let Incoming::Response(answer) = unsent.0 {
                    answer.settle();
                }
            }
        }
        // Agents must keep stdout for the protocol; a stray line is logged and skipped.
        Message::Malformed(line) => {
            tracing::warn!(%line, "the ACP agent wrote a line that is not a JSON-RPC message");
        }
    }
}
