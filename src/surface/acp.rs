//! `corral acp`: corral as an Agent Client Protocol agent on stdin/stdout, so an editor
//! (Zed, any ACP client) drives corral sessions: `session/new` opens one, `session/prompt`
//! runs a turn and streams it as `session/update`s, the gate's questions go to the editor as
//! `session/request_permission`, `session/load` replays a session from its event log.
//!
//! Modes are corral's permission presets; the model is a `configOptions` entry (category
//! `model`) switched with `session/set_config_option`. Handlers answer quickly and leave
//! anything that waits (a turn, a permission round-trip) to spawned tasks: the SDK's
//! dispatch loop is blocked while a handler runs.
//!
//! The `mcpServers` of `session/new` and `session/load` (stdio, HTTP, SSE; see
//! `mcp_servers`) join the session's MCP servers: the editor is the person's own tool, so it
//! may define them. A bad one is an `invalid_params` error naming it.

mod editor;
mod forward;
mod mcp_servers;
mod prompt;
mod updates;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use agent_client_protocol::v1::schema::{
    CancelNotification, InitializeRequest, InitializeResponse, LoadSessionRequest,
    LoadSessionResponse, NewSessionRequest, NewSessionResponse, PromptRequest, PromptResponse,
    SessionNotification, SetSessionConfigOptionRequest, SetSessionConfigOptionResponse,
    SetSessionModeRequest, SetSessionModeResponse,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, ByteStreams, Client, Error as AcpError, ErrorCode};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

use self::updates::Projection;
use super::run::{Exit, load_session_config};
use crate::error::Error;
use crate::event::{ResultData, Status, StopReason};
use crate::host::manager::{SessionManager, TurnRequest};
use crate::host::open::{OpenSpec, agents_dir, permission, user_policy_dir};

const OWNER: &str = "acp";

/// What `corral acp` was started with.
#[derive(Debug, Clone, Default)]
pub struct AcpArgs {
    /// What every new session is opened with (its model, base URL, preset, `--worktree`);
    /// the client adds its directory.
    pub sessions: OpenSpec,
    pub config_path: Option<std::path::PathBuf>,
    /// `--no-instructions`: sessions load no project instructions.
    pub no_instructions: bool,
}

type Connection = ConnectionTo<Client>;

/// One ACP session: a corral session plus what the client was told.
struct AcpSession {
    id: String,
    /// The running prompt's answer, filled when its `result` envelope goes by.
    waiting: Mutex<Option<oneshot::Sender<Option<ResultData>>>>,
    mode: Mutex<String>,
    /// Models offered in the `model` config option: the opening one and any switched to.
    models: Mutex<Vec<String>>,
    model: Mutex<String>,
}

struct Acp {
    manager: SessionManager,
    args: AcpArgs,
    /// The client serves `fs/read_text_file` and `fs/write_text_file` (from `initialize`).
    client_fs: Mutex<(bool, bool)>,
    sessions: Mutex<HashMap<String, Arc<AcpSession>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The SDK's typed messages built from their wire JSON: the spec's field names, checked by
/// the schema's own types.
fn typed<T: DeserializeOwned>(value: Value) -> Result<T, AcpError> {
    serde_json::from_value(value).map_err(|e| internal(format!("building a message: {e}")))
}

fn wire<T: Serialize>(message: &T) -> Value {
    serde_json::to_value(message).unwrap_or(Value::Null)
}

fn invalid(message: impl ToString) -> AcpError {
    AcpError::new(ErrorCode::INVALID_PARAMS, message.to_string())
}

fn internal(message: impl ToString) -> AcpError {
    AcpError::new(ErrorCode::INTERNAL_ERROR, message.to_string())
}

fn not_found(id: &str) -> AcpError {
    AcpError::new(ErrorCode::RESOURCE_NOT_FOUND, format!("no session {id}"))
}

impl Acp {
    fn session(&self, id: &str) -> Result<Arc<AcpSession>, AcpError> {
        lock(&self.sessions)
            .get(id)
            .cloned()
            .ok_or_else(|| not_found(id))
    }

    fn modes(&self, current: &str) -> Value {
        let available: Vec<Value> = crate::policy::preset_names(user_policy_dir().as_deref())
            .into_iter()
            .map(|name| {
                json!({"id": name, "name": name,
                               "description": format!("corral's {name} permission preset")})
            })
            .collect();
        json!({"currentModeId": current, "availableModes": available})
    }

    fn config_options(session: &AcpSession) -> Value {
        let current = lock(&session.model).clone();
        let options: Vec<Value> = lock(&session.models)
            .iter()
            .map(|m| json!({"value": m, "name": m}))
            .collect();
        json!([{"id": "model", "name": "Model", "category": "model", "type": "select",
                "currentValue": current, "options": options}])
    }

    /// Opens (or resumes) a corral session and starts forwarding its envelopes. `servers`:
    /// the client's MCP servers, on top of `--mcp-config`'s (the client's win a name both have).
    async fn open(
        self: &Arc<Self>,
        cwd: Option<String>,
        resume: Option<String>,
        servers: crate::config::McpServers,
        cx: &Connection,
    ) -> Result<Arc<AcpSession>, AcpError> {
        let defaults = &self.args.sessions;
        let mut mcp_servers = defaults.mcp_servers.clone();
        mcp_servers.extend(servers);
        let mode = permission(defaults.permission.as_ref(), self.manager.config());
        let (reads, writes) = *lock(&self.client_fs);
        let editor = (reads || writes).then(|| editor::AcpEditor::new(cx.clone(), reads, writes));
        // A resumed session keeps its own model and gets no new worktree.
        let spec = OpenSpec {
            editor: editor.as_ref().map(editor::AcpEditor::link),
            cwd: cwd.map(Into::into),
            resume: resume.clone(),
            model: defaults.model.clone().filter(|_| resume.is_none()),
            permission: Some(mode.clone()),
            worktree: defaults.worktree && resume.is_none(),
            attended: true,
            mcp_servers,
            ..defaults.clone()
        };
        let handle = self.manager.open(spec, OWNER).await.map_err(internal)?;
        if let Some(editor) = &editor {
            editor.bind(handle.id());
        }
        let model = handle.info().model;
        let session = Arc::new(AcpSession {
            id: handle.id().to_string(),
            waiting: Mutex::new(None),
            mode: Mutex::new(mode),
            models: Mutex::new(vec![model.clone()]),
            model: Mutex::new(model),
        });
        lock(&self.sessions).insert(session.id.clone(), session.clone());
        let events = handle.session.tap(handle.session.last_seq());
        tokio::spawn(forward::forward(
            self.clone(),
            session.clone(),
            events,
            cx.clone(),
        ));
        Ok(session)
    }

    /// What a new session said while it opened, before the client knew its id (the project
    /// instructions it loaded), sent once the client has the id.
    fn announce_opening(&self, id: &str, cx: &Connection) {
        let Some(handle) = self.manager.get(id) else {
            return;
        };
        let mut projection = Projection::default();
        for event in handle.session.subscribe(Some(0)).replay {
            if !matches!(
                event.envelope.payload,
                crate::event::Payload::Instructions(_)
            ) {
                continue;
            }
            for update in projection.updates(&event.envelope, false) {
                if let Err(e) = notify(cx, id, update) {
                    tracing::debug!(error = %e, "the ACP client is gone");
                    return;
                }
            }
        }
    }

    async fn new_session(
        self: Arc<Self>,
        request: NewSessionRequest,
        cx: Connection,
    ) -> Result<Value, AcpError> {
        let servers = mcp_servers::from_client(&request.mcp_servers).map_err(invalid)?;
        let request = wire(&request);
        let cwd = request["cwd"].as_str().map(str::to_string);
        let session = self.open(cwd, None, servers, &cx).await?;
        let mode = lock(&session.mode).clone();
        Ok(json!({
            "sessionId": session.id,
            "modes": self.modes(&mode),
            "configOptions": Acp::config_options(&session),
        }))
    }

    /// Replays a session's event log as updates, then answers. A session still open in
    /// this process is replayed as it stands (with the MCP servers it has); any other is
    /// resumed from its log with the servers this request gives.
    async fn load_session(
        self: Arc<Self>,
        request: LoadSessionRequest,
        cx: Connection,
    ) -> Result<Value, AcpError> {
        let servers = mcp_servers::from_client(&request.mcp_servers).map_err(invalid)?;
        let request = wire(&request);
        let id = request["sessionId"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if !crate::session::is_valid_id(&id) {
            return Err(not_found(&id));
        }
        let dir = agents_dir().map_err(internal)?;
        let history = crate::session::read_log(&crate::session::log_path(&dir, &id))
            .map_err(|_| not_found(&id))?;
        let live = self
            .manager
            .get(&id)
            .is_some_and(|h| h.session.status() != Status::Dead);
        let session = match self.session(&id) {
            Ok(session) if live => session,
            _ => {
                let cwd = request["cwd"].as_str().map(str::to_string);
                self.open(cwd, Some(id.clone()), servers, &cx).await?
            }
        };
        let mut projection = Projection::default();
        for envelope in &history {
            for update in projection.updates(envelope, true) {
                notify(&cx, &session.id, update)?;
            }
        }
        let mode = lock(&session.mode).clone();
        Ok(json!({"modes": self.modes(&mode), "configOptions": Acp::config_options(&session)}))
    }

    fn prompt(
        self: Arc<Self>,
        request: PromptRequest,
        responder: Responder<PromptResponse>,
        cx: Connection,
    ) -> Result<(), AcpError> {
        let request = wire(&request);
        let id = request["sessionId"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let session = match self.session(&id) {
            Ok(session) => session,
            Err(e) => return responder.respond_with_error(e),
        };
        let (text, images) = match prompt::from_blocks(&request["prompt"]) {
            Ok(parts) => parts,
            Err(e) => return responder.respond_with_error(invalid(e)),
        };
        let (done, answer) = oneshot::channel();
        *lock(&session.waiting) = Some(done);
        if let Err(e) = self
            .manager
            .send_with_images(&id, &text, images, TurnRequest::default())
        {
            lock(&session.waiting).take();
            return responder
                .respond_with_error(AcpError::new(ErrorCode::INVALID_REQUEST, e.to_string()));
        }
        cx.spawn(async move {
            let reply = match answer.await.ok().flatten() {
                Some(result) => match stop_reason(&result) {
                    Ok(reason) => typed(json!({"stopReason": reason})),
                    Err(message) => Err(internal(message)),
                },
                None => Err(internal("the session ended during the turn")),
            };
            let _ = responder.respond_with_result(reply);
            Ok(())
        })
    }

    async fn set_mode(
        self: Arc<Self>,
        request: SetSessionModeRequest,
        cx: Connection,
    ) -> Result<Value, AcpError> {
        let request = wire(&request);
        let id = request["sessionId"].as_str().unwrap_or_default();
        let mode = request["modeId"].as_str().unwrap_or_default().to_string();
        let session = self.session(id)?;
        match self.manager.set_preset(id, &mode).await {
            Ok(true) => {}
            Ok(false) => return Err(invalid("this session's backend cannot change presets")),
            Err(e) => return Err(invalid(e)),
        }
        *lock(&session.mode) = mode.clone();
        notify(
            &cx,
            id,
            json!({"sessionUpdate": "current_mode_update", "currentModeId": mode}),
        )?;
        Ok(json!({}))
    }

    async fn set_config_option(
        self: Arc<Self>,
        request: SetSessionConfigOptionRequest,
    ) -> Result<Value, AcpError> {
        let request = wire(&request);
        let id = request["sessionId"].as_str().unwrap_or_default();
        let session = self.session(id)?;
        if request["configId"] != "model" {
            return Err(invalid(format!("no config option {}", request["configId"])));
        }
        let Some(model) = request["value"].as_str() else {
            return Err(invalid("the model option takes a model spec string"));
        };
        match self.manager.set_model(id, model).await {
            Ok(true) => {
                *lock(&session.model) = model.to_string();
                let mut models = lock(&session.models);
                if !models.iter().any(|m| m == model) {
                    models.push(model.to_string());
                }
            }
            Ok(false) => return Err(invalid("this session's backend cannot switch models")),
            Err(e) => return Err(invalid(e)),
        }
        Ok(json!({"configOptions": Acp::config_options(&session)}))
    }
}

fn notify(cx: &Connection, session: &str, update: Value) -> Result<(), AcpError> {
    let notification: SessionNotification = typed(json!({"sessionId": session, "update": update}))?;
    cx.send_notification(notification)
}

/// ACP has no error stop reason: a failed turn answers the prompt with an error.
fn stop_reason(result: &ResultData) -> Result<&'static str, String> {
    match result.stop_reason {
        StopReason::EndTurn => Ok("end_turn"),
        StopReason::MaxSteps => Ok("max_turn_requests"),
        StopReason::Cancelled => Ok("cancelled"),
        StopReason::Error => Err(result
            .error
            .clone()
            .unwrap_or_else(|| "the turn failed".into())),
    }
}

/// Serves ACP on stdin/stdout until the client closes stdin; then closes every session.
/// Logs go to stderr only: stdout is the protocol.
pub async fn acp(args: AcpArgs) -> Result<Exit, Error> {
    let config = load_session_config(args.config_path.as_ref(), args.no_instructions)?;
    let log_dir = agents_dir()?;
    crate::host::open::clean_up_after_crashes(&log_dir);
    let manager = SessionManager::new(config, log_dir);
    let state = Arc::new(Acp {
        manager: manager.clone(),
        args,
        client_fs: Mutex::new((false, false)),
        sessions: Mutex::new(HashMap::new()),
    });
    let transport = ByteStreams::new(
        tokio::io::stdout().compat_write(),
        tokio::io::stdin().compat(),
    );
    let served = handlers(state).connect_to(transport).await;
    manager.shutdown().await;
    crate::sandbox::process::wait_for_tool_processes(crate::sandbox::process::EXIT_WAIT).await;
    served
        .map(|()| Exit::Ok)
        .map_err(|e| Error::Runtime(format!("ACP connection failed: {e}")))
}

/// Every ACP method corral answers. Handlers that wait (opening a session, a model switch)
/// hold the dispatch loop only for that; a turn runs in a spawned task.
fn handlers(
    state: Arc<Acp>,
) -> agent_client_protocol::v1::Builder<Agent, impl agent_client_protocol::HandleDispatchFrom<Client>>
{
    let (s0, s1, s2, s3, s4, s5, s6) = (
        state.clone(),
        state.clone(),
        state.clone(),
        state.clone(),
        state.clone(),
        state.clone(),
        state,
    );
    Agent
        .v1()
        .name("corral")
        .on_receive_request(
            async move |request: InitializeRequest, responder: Responder<InitializeResponse>, _cx| {
                let request = wire(&request);
                let fs = &request["clientCapabilities"]["fs"];
                *lock(&s0.client_fs) = (
                    fs["readTextFile"].as_bool().unwrap_or(false),
                    fs["writeTextFile"].as_bool().unwrap_or(false),
                );
                responder.respond_with_result(typed(json!({
                    "protocolVersion": 1,
                    "agentInfo": {"name": "corral", "version": env!("CARGO_PKG_VERSION")},
                    "agentCapabilities": {
                        "loadSession": true,
                        "promptCapabilities": {"image": true, "audio": false, "embeddedContext": true},
                        "mcpCapabilities": {"http": true, "sse": true},
                    },
                    "authMethods": [],
                })))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: NewSessionRequest, responder: Responder<NewSessionResponse>, cx: Connection| {
                let reply = s1.clone().new_session(request, cx.clone()).await;
                let id = reply.as_ref().ok().and_then(|r| r["sessionId"].as_str()).map(str::to_string);
                let answered = responder.respond_with_result(reply.and_then(typed));
                // Only now: a client takes updates for a session it has been told of.
                if let Some(id) = id {
                    s1.announce_opening(&id, &cx);
                }
                answered
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: LoadSessionRequest, responder: Responder<LoadSessionResponse>, cx: Connection| {
                let reply = s2.clone().load_session(request, cx).await.and_then(typed);
                responder.respond_with_result(reply)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: PromptRequest, responder: Responder<PromptResponse>, cx: Connection| {
                s3.clone().prompt(request, responder, cx)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: SetSessionModeRequest, responder: Responder<SetSessionModeResponse>, cx: Connection| {
                let reply = s4.clone().set_mode(request, cx).await.and_then(typed);
                responder.respond_with_result(reply)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: SetSessionConfigOptionRequest,
                        responder: Responder<SetSessionConfigOptionResponse>,
                        _cx: Connection| {
                let reply = s5.clone().set_config_option(request).await.and_then(typed);
                responder.respond_with_result(reply)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |notification: CancelNotification, _cx: Connection| {
                let id = wire(&notification)["sessionId"].as_str().unwrap_or_default().to_string();
                if let Err(e) = s6.manager.cancel(&id) {
                    tracing::debug!(error = %e, "session/cancel for an unknown session");
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
}
