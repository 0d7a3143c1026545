//! codex's JSON-RPC dialect on stdio: one JSON object per line, the `jsonrpc` member optional.
//! A reader task turns lines into [`Incoming`] messages; writes happen inline.

use std::collections::VecDeque;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::mpsc;

/// One message from codex.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    Response {
        id: Value,
        result: Result<Value, RemoteError>,
    },
    Notification {
        method: String,
        params: Value,
    },
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    /// A line that is not a JSON-RPC message: reported, never fatal.
    Malformed(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct RemoteError {
    pub code: i64,
    pub message: String,
}

#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    #[error("codex closed its output")]
    Closed,
    #[error("cannot write to codex: {0}")]
    Write(#[source] std::io::Error),
    #[error("codex refused {method}: {message} (code {code})")]
    Remote {
        method: String,
        code: i64,
        message: String,
    },
    #[error("codex did not answer {method} within {secs} s")]
    Timeout { method: String, secs: u64 },
}

impl Incoming {
    pub fn parse(line: &str) -> Incoming {
        let Ok(Value::Object(map)) = serde_json::from_str::<Value>(line) else {
            return Incoming::Malformed(line.to_string());
        };
        let id = map.get("id").cloned().filter(|id| !id.is_null());
        let method = map
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_string);
        let params = map.get("params").cloned().unwrap_or(Value::Null);
        match (id, method) {
            (Some(id), Some(method)) => Incoming::Request { id, method, params },
            (None, Some(method)) => Incoming::Notification { method, params },
            (Some(id), None) => {
                if let Some(error) = map.get("error") {
                    let code = error.get("code").and_then(Value::as_i64).unwrap_or(0);
                    let message = error
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("(no message)")
                        .to_string();
                    Incoming::Response {
                        id,
                        result: Err(RemoteError { code, message }),
                    }
                } else if let Some(result) = map.get("result") {
                    Incoming::Response {
                        id,
                        result: Ok(result.clone()),
                    }
                } else {
                    Incoming::Malformed(line.to_string())
                }
            }
            (None, None) => Incoming::Malformed(line.to_string()),
        }
    }
}

pub struct Rpc {
    stdin: Option<ChildStdin>,
    incoming: mpsc::UnboundedReceiver<Incoming>,
    next_id: u64,
    /// What arrived while [`Rpc::call`] waited for its answer, in order.
    backlog: VecDeque<Incoming>,
}

impl Rpc {
    pub fn new(stdin: ChildStdin, stdout: ChildStdout) -> Rpc {
        let (tx, incoming) = mpsc::unbounded_channel();
        tokio::spawn(read_lines(stdout, tx));
        Rpc {
            stdin: Some(stdin),
            incoming,
            next_id: 1,
            backlog: VecDeque::new(),
        }
    }

    async fn write(&mut self, message: &Value) -> Result<(), RpcError> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| RpcError::Write(std::io::Error::other("stdin is closed")))?;
        let mut line = message.to_string();
        line.push('\n');
        tracing::trace!(target: "corral::codex", "→ {}", line.trim_end());
        stdin
            .write_all(line.as_bytes())
            .await
            .map_err(RpcError::Write)?;
        stdin.flush().await.map_err(RpcError::Write)
    }

    pub async fn notify(&mut self, method: &str, params: Option<Value>) -> Result<(), RpcError> {
        let mut message = json!({ "method": method });
        if let Some(params) = params {
            message["params"] = params;
        }
        self.write(&message).await
    }

    /// Sends a request; its answer arrives later as an [`Incoming::Response`] with this id.
    pub async fn send_request(&mut self, method: &str, params: Value) -> Result<u64, RpcError> {
        let id = self.next_id;
        self.next_id += 1;
        self.write(&json!({ "method": method, "id": id, "params": params }))
            .await?;
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
        let id = self.send_request(method, params).await?;
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

    pub async fn respond(&mut self, id: Value, result: Value) -> Result<(), RpcError> {
        self.write(&json!({ "id": id, "result": result })).await
    }

    pub async fn respond_error(
        &mut self,
        id: Value,
        code: i64,
        message: &str,
    ) -> Result<(), RpcError> {
        self.write(&json!({ "id": id, "error": { "code": code, "message": message } }))
            .await
    }

    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.stdin.take()
    }
}

async fn read_lines(stdout: ChildStdout, tx: mpsc::UnboundedSender<Incoming>) {
    let mut reader = BufReader::new(stdout);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf).await {
            Ok(0) => return,
            Ok(_) => {
                let line = String::from_utf8_lossy(&buf);
                let line = line.trim();
                if line.is_empty() {
                    continue;
                }
                tracing::trace!(target: "corral::codex", "← {line}");
                if tx.send(Incoming::parse(line)).is_err() {
                    return;
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, "reading codex's stdout");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_into_messages() {
        assert_eq!(
            Incoming::parse(r#"{"id":1,"result":{"a":1}}"#),
            Incoming::Response {
                id: json!(1),
                result: Ok(json!({"a":1}))
            }
        );
        assert_eq!(
            Incoming::parse(r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32600,"message":"bad"}}"#),
            Incoming::Response {
                id: json!(2),
                result: Err(RemoteError {
                    code: -32600,
                    message: "bad".into()
                })
            }
        );
        assert_eq!(
            Incoming::parse(r#"{"method":"turn/started","params":{"x":1}}"#),
            Incoming::Notification {
                method: "turn/started".into(),
                params: json!({"x":1})
            }
        );
        assert!(matches!(
            Incoming::parse(
                r#"{"method":"item/commandExecution/requestApproval","id":0,"params":{}}"#
            ),
            Incoming::Request { .. }
        ));
        for bad in ["not json", "[1,2]", r#"{"id":3}"#, r#"{"x":1}"#] {
            assert_eq!(Incoming::parse(bad), Incoming::Malformed(bad.into()));
        }
    }
}
