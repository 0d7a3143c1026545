//! JSON-RPC over an agent's stdin/stdout, one message per line: the transport the ACP client
//! and the codex backend share. Parsing a line, reading lines with a bound on their length,
//! and writing from one task so that messages never interleave. Matching answers to requests
//! stays with each backend: the ACP client answers from a shared table as lines arrive; codex's
//! single owner waits for its answer and keeps what came meanwhile.

use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// Lines longer than this are cut rather than buffered without bound: an agent that never
/// writes a newline cannot make corral hold its whole output.
pub(crate) const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// The two dialects: ACP sends the `jsonrpc` member; codex's app-server leaves it out. Each
/// keeps its own trace target (`RUST_LOG=corral::acp_wire=trace` shows an ACP session's wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    Acp,
    Codex,
}

impl Dialect {
    fn trace(self, sent: bool, line: &str) {
        let arrow = if sent { "->" } else { "<-" };
        match self {
            Dialect::Acp => tracing::trace!(target: "corral::acp_wire", "{arrow} {line}"),
            Dialect::Codex => tracing::trace!(target: "corral::codex_wire", "{arrow} {line}"),
        }
    }

    fn message(self, fields: Value) -> Value {
        match (self, fields) {
            (Dialect::Acp, Value::Object(fields)) => {
                let mut message = Map::with_capacity(fields.len() + 1);
                message.insert("jsonrpc".into(), Value::String("2.0".into()));
                message.extend(fields);
                Value::Object(message)
            }
            (_, fields) => fields,
        }
    }
}

/// A JSON-RPC error object, received or to be sent.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RemoteError {
    pub code: i64,
    pub message: String,
    /// `null` when the error carried none.
    pub data: Value,
}

/// One line from the agent.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Message {
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
    Response {
        id: Value,
        result: Result<Value, RemoteError>,
    },
    /// A line that is not a JSON-RPC message: reported, never fatal.
    Malformed(String),
}

impl Message {
    pub(crate) fn parse(line: &str) -> Message {
        let Ok(Value::Object(mut map)) = serde_json::from_str::<Value>(line) else {
            return Message::Malformed(line.to_string());
        };
        let id = map.remove("id").filter(|id| !id.is_null());
        let method = match map.remove("method") {
            Some(Value::String(method)) => Some(method),
            _ => None,
        };
        let params = map.remove("params").unwrap_or(Value::Null);
        match (id, method) {
            (Some(id), Some(method)) => Message::Request { id, method, params },
            (None, Some(method)) => Message::Notification { method, params },
            (Some(id), None) => match (map.remove("error"), map.remove("result")) {
                (Some(error), _) if !error.is_null() => Message::Response {
                    id,
                    result: Err(remote_error(error)),
                },
                (_, Some(result)) => Message::Response {
                    id,
                    result: Ok(result),
                },
                _ => Message::Malformed(line.to_string()),
            },
            (None, None) => Message::Malformed(line.to_string()),
        }
    }
}

fn remote_error(mut error: Value) -> RemoteError {
    RemoteError {
        code: error["code"].as_i64().unwrap_or(-32603),
        message: error["message"]
            .as_str()
            .unwrap_or("(no message)")
            .to_string(),
        data: error
            .get_mut("data")
            .map(Value::take)
            .unwrap_or(Value::Null),
    }
}

enum Outgoing {
    Line(String),
    /// Close the agent's stdin once everything before it is written.
    Close,
}

/// The sending end: cheap to clone; every message goes through one writer task in order.
#[derive(Clone)]
pub(crate) struct Writer {
    out: mpsc::UnboundedSender<Outgoing>,
    dialect: Dialect,
}

impl Writer {
    /// Starts the writer task on `stdin`.
    pub(crate) fn start(stdin: impl AsyncWrite + Unpin + Send + 'static, dialect: Dialect) -> Self {
        let (out, lines) = mpsc::unbounded_channel();
        tokio::spawn(write_lines(stdin, lines, dialect));
        Writer { out, dialect }
    }

    /// Queues one message; false once the writer has stopped (the agent closed its stdin).
    fn send(&self, fields: Value) -> bool {
        let line = self.dialect.message(fields).to_string();
        self.out.send(Outgoing::Line(line)).is_ok()
    }

    pub(crate) fn request(&self, id: u64, method: &str, params: Value) -> bool {
        self.send(json!({"id": id, "method": method, "params": params}))
    }

    /// A notification; `params: None` leaves the member out (codex's `initialized`).
    pub(crate) fn notify(&self, method: &str, params: Option<Value>) -> bool {
        let mut fields = json!({"method": method});
        if let Some(params) = params {
            fields["params"] = params;
        }
        self.send(fields)
    }

    pub(crate) fn respond(&self, id: Value, result: Result<Value, RemoteError>) -> bool {
        self.send(match result {
            Ok(result) => json!({"id": id, "result": result}),
            Err(RemoteError {
                code,
                message,
                data,
            }) => {
                let mut error = json!({"code": code, "message": message});
                if !data.is_null() {
                    error["data"] = data;
                }
                json!({"id": id, "error": error})
            }
        })
    }

    /// Closes the agent's stdin after what is queued: a well-behaved agent exits on it.
    pub(crate) fn close(&self) {
        let _ = self.out.send(Outgoing::Close);
    }
}

async fn write_lines(
    mut stdin: impl AsyncWrite + Unpin,
    mut lines: mpsc::UnboundedReceiver<Outgoing>,
    dialect: Dialect,
) {
    while let Some(Outgoing::Line(line)) = lines.recv().await {
        dialect.trace(true, &line);
        let written = async {
            stdin.write_all(line.as_bytes()).await?;
            stdin.write_all(b"\n").await?;
            stdin.flush().await
        };
        if let Err(e) = written.await {
            tracing::debug!(error = %e, ?dialect, "writing to the agent's stdin");
            break;
        }
    }
    let _ = stdin.shutdown().await;
}

/// Reads `stdout` to its end, one message per line, handing each to `deliver` in arrival
/// order; stops early when `deliver` returns false. A line past `max_line` bytes arrives cut
/// into pieces (each `Malformed`), so memory stays bounded whatever the agent writes.
pub(crate) async fn read_messages(
    stdout: impl AsyncRead + Unpin,
    dialect: Dialect,
    max_line: usize,
    mut deliver: impl FnMut(Message) -> bool,
) {
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut reader)
            .take(max_line as u64)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(error = %e, ?dialect, "reading the agent's stdout");
                return;
            }
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        dialect.trace(false, text);
        if !deliver(Message::parse(text)) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_into_messages() {
        assert_eq!(
            Message::parse(r#"{"id":1,"result":{"a":1}}"#),
            Message::Response {
                id: json!(1),
                result: Ok(json!({"a":1}))
            }
        );
        assert_eq!(
            Message::parse(
                r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32600,"message":"bad","data":[1]}}"#
            ),
            Message::Response {
                id: json!(2),
                result: Err(RemoteError {
                    code: -32600,
                    message: "bad".into(),
                    data: json!([1]),
                })
            }
        );
        // A null error is no error (some agents send both members).
        assert_eq!(
            Message::parse(r#"{"id":4,"error":null,"result":7}"#),
            Message::Response {
                id: json!(4),
                result: Ok(json!(7))
            }
        );
        assert_eq!(
            Message::parse(r#"{"method":"turn/started","params":{"x":1}}"#),
            Message::Notification {
                method: "turn/started".into(),
                params: json!({"x":1})
            }
        );
        assert_eq!(
            Message::parse(r#"{"method":"session/update","id":null}"#),
            Message::Notification {
                method: "session/update".into(),
                params: Value::Null
            }
        );
        assert!(matches!(
            Message::parse(
                r#"{"method":"item/commandExecution/requestApproval","id":0,"params":{}}"#
            ),
            Message::Request { .. }
        ));
        for bad in [
            "not json",
            "[1,2]",
            r#"{"id":3}"#,
            r#"{"x":1}"#,
            r#"{"method":5}"#,
        ] {
            assert_eq!(Message::parse(bad), Message::Malformed(bad.into()));
        }
    }

    #[test]
    fn each_dialect_frames_its_messages() {
        let fields = || json!({"id": 1, "method": "m", "params": {}});
        assert_eq!(
            Dialect::Acp.message(fields()).to_string(),
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{}}"#
        );
        assert_eq!(
            Dialect::Codex.message(fields()).to_string(),
            r#"{"id":1,"method":"m","params":{}}"#
        );
    }

    #[tokio::test]
    async fn a_line_without_end_is_read_in_bounded_pieces() {
        let (mut agent, corral) = tokio::io::duplex(1024);
        let writer = tokio::spawn(async move {
            agent.write_all(&vec![b'x'; 10_000]).await.unwrap();
            agent
                .write_all(b"\n{\"method\":\"after\",\"params\":{}}\n")
                .await
                .unwrap();
        });
        let mut seen = Vec::new();
        read_messages(corral, Dialect::Acp, 4096, |m| {
            seen.push(m);
            true
        })
        .await;
        writer.await.unwrap();
        let longest = seen
            .iter()
            .map(|m| match m {
                Message::Malformed(text) => text.len(),
                _ => 0,
            })
            .max();
        assert_eq!(longest, Some(4096), "{} messages", seen.len());
        assert_eq!(
            seen.last(),
            Some(&Message::Notification {
                method: "after".into(),
                params: json!({})
            }),
            "the message after the long line still arrives whole"
        );
    }

    #[tokio::test]
    async fn the_writer_sends_in_order_and_closes_stdin() {
        let (agent, corral) = tokio::io::duplex(1024);
        let writer = Writer::start(corral, Dialect::Codex);
        assert!(writer.request(1, "initialize", json!({})));
        assert!(writer.notify("initialized", None));
        assert!(writer.respond(
            json!(0),
            Err(RemoteError {
                code: -32000,
                message: "no".into(),
                data: Value::Null
            })
        ));
        writer.close();
        let mut text = String::new();
        BufReader::new(agent)
            .read_to_string(&mut text)
            .await
            .unwrap();
        assert_eq!(
            text,
            "{\"id\":1,\"method\":\"initialize\",\"params\":{}}\n\
             {\"method\":\"initialized\"}\n\
             {\"id\":0,\"error\":{\"code\":-32000,\"message\":\"no\"}}\n"
        );
    }
}
