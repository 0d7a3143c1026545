//! codex's JSON-RPC session over the shared line transport ([`crate::backend::jsonrpc`], the
//! dialect without the `jsonrpc` member). One owner: [`Rpc::call`] waits for its answer and
//! keeps what arrives meanwhile for [`Rpc::next`], in order.

use std::collections::VecDeque;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::mpsc;

use crate::backend::jsonrpc::{self, Dialect, RemoteError, Writer};

/// One message from codex.
pub(crate) use jsonrpc::Message as Incoming;

#[derive(Debug, thiserror::Error)]
pub(crate) enum RpcError {
    #[error("codex closed its connection")]
    Closed,
    #[error("codex refused {method}: {message} (code {code})")]
    Remote {
        method: String,
        code: i64,
        message: String,
    },
    #[error("codex did not answer {method} within {secs} s")]
    Timeout { method: String, secs: u64 },
}

pub(crate) struct Rpc {
    writer: Writer,
    incoming: mpsc::UnboundedReceiver<Incoming>,
    next_id: u64,
    /// What arrived while [`Rpc::call`] waited for its answer, in order.
    backlog: VecDeque<Incoming>,
}

impl Rpc {
    pub fn new(stdin: ChildStdin, stdout: ChildStdout) -> Rpc {
        let (tx, incoming) = mpsc::unbounded_channel();
        tokio::spawn(jsonrpc::read_messages(
            stdout,
            Dialect::Codex,
            jsonrpc::MAX_LINE_BYTES,
            move |message| tx.send(message).is_ok(),
        ));
        Rpc {
            writer: Writer::start(stdin, Dialect::Codex),
            incoming,
            next_id: 1,
            backlog: VecDeque::new(),
        }
    }

    fn sent(sent: bool) -> Result<(), RpcError> {
        if sent { Ok(()) } else { Err(RpcError::Closed) }
    }

    pub fn notify(&mut self, method: &str, params: Option<Value>) -> Result<(), RpcError> {
        Self::sent(self.writer.notify(method, params))
    }

    /// Sends a request; its answer arrives later as an [`Incoming::Response`] with this id.
    pub fn send_request(&mut self, method: &str, params: Value) -> Result<u64, RpcError> {
        let id = self.next_id;
        self.next_id += 1;
        Self::sent(self.writer.request(id, method, params))?;
        Ok(id)
    }

    /// Sends a request and waits for its answer; everything else that arrives meanwhile is
    /// kept for [`Rpc::next`].
    pub async fn call(
        &mut self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, RpcError> {
        let id = self.send_request(method, params)?;
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let message = tokio::time::timeout_at(deadline, self.incoming.recv())
                .await
                .map_err(|_| RpcError::Timeout {
                    method: method.to_string(),
                    secs: timeout.as_secs(),
                })?
                .ok_or(RpcError::Closed)?;
            match message {
                Incoming::Response { id: got, result } if got == json!(id) => {
                    return result.map_err(|e| RpcError::Remote {
                        method: method.to_string(),
                        code: e.code,
                        message: e.message,
                    });
                }
                other => self.backlog.push_back(other),
            }
        }
    }

    /// The next message; `None` once codex's stdout has closed. Cancel-safe.
    pub async fn next(&mut self) -> Option<Incoming> {
        if let Some(message) = self.backlog.pop_front() {
            return Some(message);
        }
        self.incoming.recv().await
    }

    pub fn respond(&mut self, id: Value, result: Value) -> Result<(), RpcError> {
        Self::sent(self.writer.respond(id, Ok(result)))
    }

    pub fn respond_error(&mut self, id: Value, code: i64, message: &str) -> Result<(), RpcError> {
        let error = RemoteError {
            code,
            message: message.to_string(),
            data: Value::Null,
        };
        Self::sent(self.writer.respond(id, Err(error)))
    }

    /// Closes codex's stdin once what is queued is written (codex exits on it).
    pub fn close(&mut self) {
        self.writer.close();
    }
}
