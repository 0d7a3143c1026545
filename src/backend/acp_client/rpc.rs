//! JSON-RPC 2.0 over the agent's stdin/stdout, one message per line.
//!
//! One reader task parses every line in arrival order. Notifications and the agent's own
//! requests go into one channel, in order; responses complete the matching pending request.
//! Because the reader hands over every `session/update` before it completes the response that
//! follows it, a turn that drains the channel after its `session/prompt` answered has seen
//! every update of that turn.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::{mpsc, oneshot};

/// Lines longer than this are refused rather than buffered without bound.
const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

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
    out: mpsc::UnboundedSender<String>,
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
        let (out, out_rx) = mpsc::unbounded_channel();
        let (in_tx, in_rx) = mpsc::unbounded_channel();
        let pending: Pending = Arc::default();
        tokio::spawn(write_lines(stdin, out_rx));
        tokio::spawn(read_lines(stdout, in_tx, pending.clone()));
        let rpc = Rpc {
            out,
            pending,
            next_id: Arc::new(AtomicU64::new(0)),
        };
        (rpc, in_rx)
    }

    fn send(&self, message: Value) -> bool {
        self.out.send(message.to_string()).is_ok()
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
        let sent =
            self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        if !sent
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
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    pub(crate) fn respond(&self, id: Value, result: Result<Value, RpcError>) {
        let message = match result {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(RpcError::Remote {
                code,
                message,
                data,
            }) => {
                let mut error = json!({"code": code, "message": message});
                if !data.is_null() {
                    error["data"] = data;
                }
                json!({"jsonrpc": "2.0", "id": id, "error": error})
            }
            Err(RpcError::Closed) => {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": "closed"}})
            }
        };
        self.send(message);
    }
}

async fn write_lines(mut stdin: ChildStdin, mut lines: mpsc::UnboundedReceiver<String>) {
    while let Some(line) = lines.recv().await {
        tracing::trace!(target: "corral::acp_wire", "-> {line}");
        let written = async {
            stdin.write_all(line.as_bytes()).await?;
            stdin.write_all(b"\n").await?;
            stdin.flush().await
        };
        if let Err(e) = written.await {
            tracing::debug!(error = %e, "writing to the ACP agent");
            break;
        }
    }
    let _ = stdin.shutdown().await;
}

async fn read_lines(
    stdout: ChildStdout,
    incoming: mpsc::UnboundedSender<Incoming>,
    pending: Pending,
) {
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut reader)
            .take(MAX_LINE_BYTES as u64)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        tracing::trace!(target: "corral::acp_wire", "<- {text}");
        let message: Value = match serde_json::from_str(text) {
            Ok(message) => message,
            Err(e) => {
                // Agents must keep stdout for the protocol; a stray line is logged and skipped.
                tracing::warn!(error = %e, line = %text, "the ACP agent wrote a non-JSON line");
                continue;
            }
        };
        dispatch(message, &incoming, &pending);
    }
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

fn dispatch(mut message: Value, incoming: &mpsc::UnboundedSender<Incoming>, pending: &Pending) {
    let method = message
        .get("method")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let params = message
        .get_mut("params")
        .map(Value::take)
        .unwrap_or(Value::Null);
    match (method, message.get("id").cloned()) {
        (Some(method), Some(id)) if !id.is_null() => {
            let _ = incoming.send(Incoming::Request { id, method, params });
        }
        (Some(method), _) => {
            let _ = incoming.send(Incoming::Notification { method, params });
        }
        (None, Some(id)) => {
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
            let result = match message.get_mut("error") {
                Some(error) if !error.is_null() => Err(RpcError::Remote {
                    code: error["code"].as_i64().unwrap_or(-32603),
                    message: error["message"].as_str().unwrap_or("error").to_owned(),
                    data: error
                        .get_mut("data")
                        .map(Value::take)
                        .unwrap_or(Value::Null),
                }),
                _ => Ok(message
                    .get_mut("result")
                    .map(Value::take)
                    .unwrap_or(Value::Null)),
            };
            if let Err(unsent) = incoming.send(Incoming::Response(Answer { reply: tx, result })) {
                // Nobody reads the queue any more: settle it here.
                if let Incoming::Response(answer) = unsent.0 {
                    answer.settle();
                }
            }
        }
        (None, None) => tracing::warn!(%message, "a JSON-RPC message without method or id"),
    }
}
