//! What the agent asks of corral mid-turn: permission for a tool call, and files read and
//! written through corral (`fs/*`). Each request is answered from its own task, so a person
//! taking their time to approve never holds up the agent's other messages.

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::rpc::{Incoming, Rpc, RpcError};
use super::tool_events::{self, Calls};
use crate::backend::external::{Route, ToolAsk};
use crate::policy::{Approval, Approver};
use crate::sandbox::paths::{RootDir, resolve_in_root};
use crate::tool::{ToolContext, ToolRegistry};

/// Largest file `fs/read_text_file` returns.
const MAX_READ_BYTES: u64 = 16 * 1024 * 1024;

/// JSON-RPC codes for refusals: invalid params for a path outside the root, and the
/// generic server error for a refusal by the gate or a failed read or write.
const INVALID_PARAMS: i64 = -32602;
const REFUSED: i64 = -32603;
const METHOD_NOT_FOUND: i64 = -32601;
/// ACP's "resource not found", for a file that does not exist.
const NOT_FOUND: i64 = -32002;

/// What the dispatcher, the callbacks and the turn share.
pub(crate) struct Shared {
    pub(crate) rpc: Rpc,
    pub(crate) approver: Arc<Approver>,
    pub(crate) root: PathBuf,
    pub(crate) calls: Calls,
    tools: ToolRegistry,
    /// The running turn's token: a person's "cancel" on a permission request cancels it.
    turn_cancel: Mutex<CancellationToken>,
    /// Files whose edit a person (or the gate) already allowed through the agent's permission
    /// request this turn: the `fs/write_text_file` that follows is not asked about again.
    allowed_writes: Mutex<HashSet<PathBuf>>,
    /// How long the agent's request may wait for a person (see `decide`).
    pub(crate) request_timeout: Duration,
    /// The session's `configOptions` as the agent last sent them.
    pub(crate) config_options: Mutex<Value>,
    /// Answer a read of a missing file with empty content instead of an error. gemini 0.61
    /// reads a file before writing it and, because its ACP layer rejects with a plain object
    /// its not-found check never matches, fails to create any new file otherwise.
    pub(crate) missing_reads_empty: bool,
}

impl Shared {
    pub(crate) fn new(
        rpc: Rpc,
        approver: Arc<Approver>,
        root: PathBuf,
        calls: Calls,
        tools: ToolRegistry,
    ) -> Shared {
        Shared {
            rpc,
            approver,
            root,
            calls,
            tools,
            turn_cancel: Mutex::new(CancellationToken::new()),
            allowed_writes: Mutex::default(),
            request_timeout: crate::backend::external::DEFAULT_ACP_PERMISSION_TIMEOUT,
            config_options: Mutex::new(Value::Null),
            missing_reads_empty: false,
        }
    }

    pub(crate) fn begin_turn(&self, cancel: CancellationToken) {
        *self.turn_cancel.lock().unwrap_or_else(|p| p.into_inner()) = cancel;
        self.allowed_writes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        self.calls.clear();
        self.approver.begin_turn();
    }

    /// The gate's answer, by `deadline` at the latest. The approver asks one question at a
    /// time (an agent asking about two calls at once gets the second asked after the first);
    /// a call the gate decides by itself is answered at once, even while a person is asked.
    async fn decide(
        &self,
        ask: &ToolAsk,
        cancel: &CancellationToken,
        route: Route,
        deadline: Instant,
    ) -> Approval {
        if cancel.is_cancelled() {
            return Approval::Cancel;
        }
        ask.decide_until(&self.approver, cancel, route, Some(deadline))
            .await
    }

    pub(crate) fn cancel_turn(&self) {
        self.turn_cancel().cancel();
    }

    fn turn_cancel(&self) -> CancellationToken {
        self.turn_cancel
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub(crate) fn set_config_options(&self, options: &Value) {
        if options.is_array() {
            *self
                .config_options
                .lock()
                .unwrap_or_else(|p| p.into_inner()) = options.clone();
        }
    }
}

/// Routes everything the agent sends: `session/update`s to the turn (in order), requests to
/// their own tasks. Ends when the agent's stdout closes; dropping `updates` tells the turn.
pub(crate) async fn dispatch(
    shared: Arc<Shared>,
    mut incoming: mpsc::UnboundedReceiver<Incoming>,
    updates: mpsc::UnboundedSender<Value>,
) {
    while let Some(message) = incoming.recv().await {
        match message {
            Incoming::Notification { method, mut params } if method == "session/update" => {
                let update = params
                    .get_mut("update")
                    .map(Value::take)
                    .unwrap_or_default();
                match update["sessionUpdate"].as_str() {
                    Some("tool_call" | "tool_call_update") => {
                        shared.calls.merge(&update);
                    }
                    Some("config_option_update") => {
                        shared.set_config_options(&update["configOptions"]);
                    }
                    _ => {}
                }
                let _ = updates.send(update);
            }
            Incoming::Notification { method, .. } => {
                tracing::debug!(%method, "an ACP notification corral does not use");
            }
            // The updates before it are in `updates` already.
            Incoming::Response(answer) => answer.settle(),
            Incoming::Request { id, method, params } => {
                let shared = shared.clone();
                // The agent's clock starts when it sends; so does corral's. Each request gets
                // its own task, so updates and other requests go on while a person is asked.
                let deadline = Instant::now() + shared.request_timeout;
                match method.as_str() {
                    "session/request_permission" => {
                        tokio::spawn(async move {
                            let answer = permission(&shared, &params, deadline).await;
                            shared.rpc.respond(id, Ok(answer));
                        });
                    }
                    "fs/read_text_file" => {
                        tokio::spawn(async move {
                            let answer = read_text_file(&shared, &params, deadline).await;
                            shared.rpc.respond(id, answer);
                        });
                    }
                    "fs/write_text_file" => {
                        tokio::spawn(async move {
                            let answer = write_text_file(&shared, &params, deadline).await;
                            shared.rpc.respond(id, answer);
                        });
                    }
                    _ => shared.rpc.respond(
                        id,
                        Err(RpcError::remote(
                            METHOD_NOT_FOUND,
                            format!("corral does not offer {method}"),
                        )),
                    ),
                }
            }
        }
    }
}

/// `session/request_permission`: corral's gate decides, asking a person when it must; the
/// answer is the agent's own option of the matching kind.
async fn permission(shared: &Shared, params: &Value, deadline: Instant) -> Value {
    let Some((id, merged)) = shared.calls.merge(&params["toolCall"]) else {
        return cancelled();
    };
    shared.calls.announce(&id);
    // The name the call's events carry is the one the gate judges and a person is shown.
    let mut ask = tool_events::tool_ask(&merged, shared.calls.name(&id));
    ask.args = relative_args(ask.args, &shared.root);
    let cancel = shared.turn_cancel();
    let answer = shared.decide(&ask, &cancel, Route::Asked, deadline).await;
    let options = params["options"].as_array().cloned().unwrap_or_default();
    let pick = |kinds: &[&str]| {
        kinds.iter().find_map(|kind| {
            options
                .iter()
                .find(|o| o["kind"] == *kind)
                .and_then(|o| o["optionId"].as_str())
        })
    };
    match answer {
        Approval::Allow { always, .. } => {
            if ask.corral_tool == Some("write_file")
                && let Some(path) = tool_events::call_path(&merged)
                && let Ok(resolved) = resolve_in_root(&shared.root, &path)
            {
                shared
                    .allowed_writes
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(resolved);
            }
            // "Always" is remembered by corral's gate, which then answers by itself; the agent
            // gets allow_once where it offers it, so it keeps asking and the preset's rules
            // keep applying to each call (an agent told "always" stops asking).
            if always {
                tracing::debug!(tool = %ask.agent_tool, "allowed always: corral's gate remembers it");
            }
            match pick(&["allow_once", "allow_always"]) {
                Some(option) => selected(option),
                None => {
                    tracing::warn!(tool = %ask.agent_tool, "the agent offered no allow option");
                    cancelled()
                }
            }
        }
        Approval::Deny { message } => {
            // Not every agent reports a refused call (gemini does not): say it here.
            shared.calls.finish(&id, false, Some(message));
            match pick(&["reject_once", "reject_always"]) {
                Some(option) => selected(option),
                None => cancelled(),
            }
        }
        Approval::Cancel => {
            cancel.cancel();
            cancelled()
        }
    }
}

/// Agents name files by absolute path; the gate's rules and the person asked see them as
/// corral's own tools do, relative to the root.
fn relative_args(mut args: Value, root: &Path) -> Value {
    if let Some(path) = args["path"].as_str()
        && let Ok(rest) = Path::new(path).strip_prefix(root)
    {
        let rest = rest.to_string_lossy();
        args["path"] = Value::String(if rest.is_empty() {
            ".".into()
        } else {
            rest.into_owned()
        });
    }
    args
}

fn selected(option: &str) -> Value {
    json!({"outcome": {"outcome": "selected", "optionId": option}})
}

fn cancelled() -> Value {
    json!({"outcome": {"outcome": "cancelled"}})
}

fn path_param(params: &Value) -> Result<String, RpcError> {
    match params["path"].as_str() {
        Some(path) if !path.trim().is_empty() => Ok(path.to_owned()),
        _ => Err(RpcError::remote(INVALID_PARAMS, "path is missing")),
    }
}

/// Confinement first, before anyone is asked: a path outside the root is never served.
fn confine(shared: &Shared, path: &str) -> Result<PathBuf, RpcError> {
    resolve_in_root(&shared.root, path)
        .map_err(|e| RpcError::remote(INVALID_PARAMS, format!("refused by corral: {e}")))
}

async fn gate(shared: &Shared, ask: ToolAsk, deadline: Instant) -> Result<(), RpcError> {
    match shared
        .decide(&ask, &shared.turn_cancel(), Route::AcpFs, deadline)
        .await
    {
        Approval::Allow { .. } => Ok(()),
        Approval::Deny { message } => Err(RpcError::remote(REFUSED, message)),
        Approval::Cancel => Err(RpcError::remote(REFUSED, "the user cancelled the turn")),
    }
}

fn fs_ask(tool: &'static str, kind: &'static str, path: &str, args: Value, raw: &Value) -> ToolAsk {
    ToolAsk {
        tool_call_id: format!("fs_{:08x}", fastrand::u32(..)),
        agent_tool: format!(
            "fs/{}",
            if tool == "read_file" {
                "read_text_file"
            } else {
                "write_text_file"
            }
        ),
        corral_tool: Some(tool),
        args,
        title: format!("{tool} {path}"),
        kind,
        raw_input: raw.clone(),
        // `args.path` is the one path; it was confined before this ask was made.
        paths: Vec::new(),
    }
}

/// `fs/read_text_file {path, line?, limit?}` → `{content}`, opened beneath the root.
async fn read_text_file(
    shared: &Shared,
    params: &Value,
    deadline: Instant,
) -> Result<Value, RpcError> {
    let path = path_param(params)?;
    let resolved = confine(shared, &path)?;
    let args = relative_args(json!({ "path": path }), &shared.root);
    let ask = fs_ask("read_file", "read", &path, args, params);
    gate(shared, ask, deadline).await?;
    if !resolved.exists() {
        tracing::debug!(target: "corral::acp", %path, "fs/read_text_file: no such file");
        if shared.missing_reads_empty {
            return Ok(json!({ "content": "" }));
        }
        return Err(RpcError::remote(
            NOT_FOUND,
            format!("Resource not found: {path}"),
        ));
    }
    let root = shared.root.clone();
    let line = params["line"].as_u64().unwrap_or(1).max(1);
    let limit = params["limit"].as_u64();
    let shown = path.clone();
    let text = tokio::task::spawn_blocking(move || -> Result<String, String> {
        let file = RootDir::open(&root)
            .and_then(|dir| dir.open_file(&shown))
            .map_err(|e| e.to_string())?;
        let meta = file.metadata().map_err(|e| format!("{shown}: {e}"))?;
        if !meta.is_file() {
            return Err(format!("{shown} is not a regular file"));
        }
        if meta.len() > MAX_READ_BYTES {
            return Err(format!("{shown} is over {MAX_READ_BYTES} bytes"));
        }
        let mut bytes = Vec::new();
        file.take(MAX_READ_BYTES)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("{shown}: {e}"))?;
        String::from_utf8(bytes).map_err(|_| format!("{shown} is not UTF-8 text"))
    })
    .await
    .map_err(|e| RpcError::remote(REFUSED, e.to_string()))?
    .map_err(|e| RpcError::remote(REFUSED, e))?;
    tracing::debug!(target: "corral::acp", %path, bytes = text.len(), "fs/read_text_file served");
    Ok(json!({ "content": lines(&text, line, limit) }))
}

/// Lines `line..line+limit` (1-based), line ends kept.
fn lines(text: &str, line: u64, limit: Option<u64>) -> String {
    let skip = usize::try_from(line.saturating_sub(1)).unwrap_or(usize::MAX);
    let take = limit
        .and_then(|l| usize::try_from(l).ok())
        .unwrap_or(usize::MAX);
    if skip == 0 && take == usize::MAX {
        return text.to_owned();
    }
    text.split_inclusive('\n').skip(skip).take(take).collect()
}

/// `fs/write_text_file {path, content}` → `null`, written by corral's own `write_file`
/// (atomic, beneath the root) once the gate allows it.
async fn write_text_file(
    shared: &Shared,
    params: &Value,
    deadline: Instant,
) -> Result<Value, RpcError> {
    let path = path_param(params)?;
    let Some(content) = params["content"].as_str() else {
        return Err(RpcError::remote(INVALID_PARAMS, "content is missing"));
    };
    let resolved = confine(shared, &path)?;
    let args = json!({"path": path, "content": content});
    let allowed = shared
        .allowed_writes
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&resolved);
    if !allowed {
        let relative = relative_args(args.clone(), &shared.root);
        let ask = fs_ask("write_file", "edit", &path, relative, params);
        gate(shared, ask, deadline).await?;
    }
    let Some(tool) = shared.tools.get("write_file") else {
        return Err(RpcError::remote(REFUSED, "corral has no write_file tool"));
    };
    let ctx = ToolContext::new(shared.root.clone(), "acp_fs_write");
    match tool.tool.call(args, &ctx).await {
        Ok(_) => {
            tracing::debug!(target: "corral::acp", %path, bytes = content.len(), "fs/write_text_file served");
            Ok(Value::Null)
        }
        Err(e) => Err(RpcError::remote(REFUSED, format!("refused by corral: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_in_the_root_are_shown_relative() {
        let root = Path::new("/r/oot");
        let args = |p: &str| relative_args(json!({"path": p, "content": "x"}), root);
        assert_eq!(args("/r/oot/a/b.txt")["path"], "a/b.txt");
        assert_eq!(args("/r/oot")["path"], ".");
        assert_eq!(args("/elsewhere/x")["path"], "/elsewhere/x");
        assert_eq!(args("rel.txt")["path"], "rel.txt");
    }

    #[test]
    fn line_ranges_are_one_based_and_keep_line_ends() {
        let text = "a\nb\nc\n";
        assert_eq!(lines(text, 1, None), text);
        assert_eq!(lines(text, 2, None), "b\nc\n");
        assert_eq!(lines(text, 2, Some(1)), "b\n");
        assert_eq!(lines(text, 9, Some(1)), "");
    }
}
