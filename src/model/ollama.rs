//! Ollama's native `POST /api/chat`: NDJSON, whole tool calls with object arguments, usage on
//! the final line only, `{"error":…}` lines possible mid-stream with HTTP 200.
//!
//! Ollama silently truncates or shifts over-long histories unless told not to, so every
//! request carries `truncate:false, shift:false` and an explicit `num_ctx`.

use std::collections::VecDeque;
use std::sync::OnceLock;

use futures_util::StreamExt;
use reqwest::header::HeaderMap;
use serde::Serialize;
use serde_json::{Value, json};

use super::Effort;
use super::client::{ModelClient, ModelFuture, ModelInfo, ModelStream};
use super::error::{ModelError, excerpt, not_found_hint};
use super::http::{self, ChatBody, HttpSettings, RetryObserver};
use super::ndjson::{ByteStream, LineSplitter};
use super::spec::ModelSpec;
use super::types::{ChatRequest, Message, ModelEvent, Role, TokenCounts, ToolChoice};

/// The largest window corral asks for by default: bigger costs memory on small machines.
pub const DEFAULT_MAX_NUM_CTX: u64 = 32_768;

pub struct OllamaClient {
    spec: ModelSpec,
    base_url: String,
    http: reqwest::Client,
    settings: HttpSettings,
    /// `num_ctx` from configuration; otherwise min(trained length, 32768).
    num_ctx_override: Option<u64>,
    info: OnceLock<ModelInfo>,
}

impl OllamaClient {
    pub fn new(
        spec: ModelSpec,
        base_url: String,
        settings: HttpSettings,
        num_ctx_override: Option<u64>,
    ) -> Result<Self, ModelError> {
        Ok(OllamaClient {
            http: http::build_client(&settings)?,
            spec,
            base_url,
            settings,
            num_ctx_override,
            info: OnceLock::new(),
        })
    }

    fn num_ctx(&self) -> u64 {
        self.info
            .get()
            .map(|i| i.context_window)
            .or(self.num_ctx_override)
            .unwrap_or(DEFAULT_MAX_NUM_CTX)
    }

    async fn show(&self) -> Result<ModelInfo, ModelError> {
        let url = format!("{}/api/show", self.base_url);
        let body = json!({ "model": self.spec.model });
        let shown =
            match http::post_json_once(&self.http, &url, &HeaderMap::new(), &body, &self.settings)
                .await
            {
                Err(ModelError::Http { status: 404, .. }) => return Err(self.not_found().await),
                other => other?,
            };
        let trained = shown
            .get("model_info")
            .and_then(Value::as_object)
            .and_then(|info| {
                info.iter()
                    .find(|(key, _)| key.ends_with(".context_length"))
                    .and_then(|(_, v)| v.as_u64())
            });
        let capabilities = capabilities_of(&shown);
        let context_window = self.num_ctx_override.unwrap_or_else(|| {
            trained
                .unwrap_or(DEFAULT_MAX_NUM_CTX)
                .min(DEFAULT_MAX_NUM_CTX)
        });
        Ok(ModelInfo {
            context_window,
            supports_thinking: capabilities.iter().any(|c| c == "thinking"),
        })
    }

    /// The model is not on the server: the error lists what is.
    async fn not_found(&self) -> ModelError {
        let available = http::list_models(
            &self.http,
            &format!("{}/api/tags", self.base_url),
            &HeaderMap::new(),
            &self.settings,
        )
        .await;
        ModelError::ModelNotFound {
            model: self.spec.model.clone(),
            url: self.base_url.clone(),
            hint: not_found_hint(Some(&self.spec.model), available.as_deref()),
        }
    }

    fn request_body<'a>(&self, request: &ChatRequest<'a>) -> ChatBody<Vec<WireMessage<'a>>> {
        let messages = request.messages.iter().map(wire_message).collect();
        let mut options = json!({
            "num_ctx": self.num_ctx(),
            "num_predict": request.max_tokens,
        });
        if let Some(t) = request.temperature {
            options["temperature"] = json!(t);
        }
        let mut body = json!({
            "model": self.spec.model,
            "stream": true,
            "truncate": false,
            "shift": false,
            "options": options,
        });
        // Ollama has no tool_choice; "none" is honoured by not offering tools.
        if !request.tools.is_empty() && request.tool_choice != Some(ToolChoice::None) {
            body["tools"] = request
                .tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "function": {
                        "name": t.name, "description": t.description, "parameters": t.parameters}})
                })
                .collect();
        }
        if self.info.get().is_some_and(|i| i.supports_thinking) {
            body["think"] = think_value(&self.spec.model, request.effort);
        }
        ChatBody {
            fields: body,
            messages,
        }
    }
}

/// Ollama's `think` for an effort. GPT-OSS takes only a level (it ignores booleans); the
/// other thinking models take on or off, so low means off (their non-thinking mode) and
/// medium or high on. No effort: on, as before efforts existed.
fn think_value(model: &str, effort: Option<Effort>) -> Value {
    let takes_levels = model.to_ascii_lowercase().contains("gpt-oss");
    match effort {
        Some(effort) if takes_levels => json!(effort.as_str()),
        Some(Effort::Low) => json!(false),
        Some(Effort::Medium | Effort::High) | None => json!(true),
    }
}

pub fn capabilities_of(shown: &Value) -> Vec<String> {
    shown
        .get("capabilities")
        .and_then(Value::as_array)
        .map(|caps| {
            caps.iter()
                .filter_map(|c| c.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// One history message as `/api/chat` takes it, borrowed from the history: a long session's
/// request is built without copying every message into a JSON tree first.
#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    content: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<WireCall<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    images: Vec<&'a str>,
}

#[derive(Serialize)]
struct WireCall<'a> {
    id: &'a str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    index: usize,
    name: &'a str,
    arguments: &'a Value,
}

fn wire_message(message: &Message) -> WireMessage<'_> {
    WireMessage {
        role: match message.role {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        },
        content: &message.content,
        thinking: message.thinking.as_deref(),
        tool_calls: message
            .tool_calls
            .iter()
            .enumerate()
            .map(|(index, call)| WireCall {
                id: &call.id,
                function: WireFunction {
                    index,
                    name: &call.name,
                    arguments: &call.arguments,
                },
            })
            .collect(),
        tool_name: message.tool_name.as_deref(),
        tool_call_id: message.tool_call_id.as_deref(),
        images: message
            .images
            .iter()
            .map(|i| i.data_base64.as_str())
            .collect(),
    }
}

impl ModelClient for OllamaClient {
    fn spec(&self) -> &ModelSpec {
        &self.spec
    }

    fn base_url(&self) -> &str {
        &self.base_url
    }

    fn effort_note(&self, effort: Effort) -> Option<String> {
        // Asking a model without the capability to think is an HTTP 400, so nothing is sent.
        let thinks = self.info.get().is_none_or(|i| i.supports_thinking);
        (!thinks).then(|| {
            format!(
                "effort {effort} is not applied: {} does not think (Ollama lists no `thinking` \
                 capability for it)",
                self.spec.model
            )
        })
    }

    fn prepare(&self) -> ModelFuture<'_, ModelInfo> {
        Box::pin(async move {
            if let Some(info) = self.info.get() {
                return Ok(info.clone());
            }
            let info = self.show().await?;
            Ok(self.info.get_or_init(|| info).clone())
        })
    }

    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest<'a>,
        observer: RetryObserver<'a>,
    ) -> ModelFuture<'a, ModelStream> {
        Box::pin(async move {
            let url = format!("{}/api/chat", self.base_url);
            let body = self.request_body(request);
            let response = match http::post_json(
                &self.http,
                &url,
                &HeaderMap::new(),
                &body,
                &self.settings,
                observer,
            )
            .await
            {
                Err(ModelError::Http { status: 404, .. }) => return Err(self.not_found().await),
                other => other?,
            };
            let state = NdjsonState {
                bytes: Box::pin(response.bytes_stream()),
                lines: LineSplitter::new(self.settings.max_stream_line),
                pending: VecDeque::new(),
                calls_seen: 0,
                finished: false,
                settings: self.settings,
            };
            let stream = futures_util::stream::unfold(state, |mut state| async move {
                state.next_event().await.map(|event| (event, state))
            });
            Ok(Box::pin(stream) as ModelStream)
        })
    }
}

struct NdjsonState {
    bytes: ByteStream,
    lines: LineSplitter,
    pending: VecDeque<Result<ModelEvent, ModelError>>,
    calls_seen: usize,
    finished: bool,
    settings: HttpSettings,
}

impl NdjsonState {
    async fn next_event(&mut self) -> Option<Result<ModelEvent, ModelError>> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some(event);
            }
            if self.finished {
                return None;
            }
            match self.lines.next_line() {
                Ok(Some(line)) => {
                    self.parse_line(&line);
                    continue;
                }
                Ok(None) => {}
                Err(e) => {
                    self.finished = true;
                    return Some(Err(ModelError::line_over_cap("an NDJSON line", e.limit)));
                }
            }
            match self.bytes.next().await {
                Some(Ok(chunk)) => {
                    if let Err(e) = self.lines.push(&chunk) {
                        self.finished = true;
                        return Some(Err(ModelError::line_over_cap("an NDJSON line", e.limit)));
                    }
                }
                Some(Err(e)) => {
                    self.finished = true;
                    return Some(Err(http::body_error(&e, &self.settings)));
                }
                None => {
                    if let Some(rest) = self.lines.finish() {
                        self.parse_line(&rest);
                        if !self.pending.is_empty() {
                            continue;
                        }
                    }
                    self.finished = true;
                    return Some(Err(ModelError::Truncated(
                        "the NDJSON stream ended without a done:true line".into(),
                    )));
                }
            }
        }
    }

    fn parse_line(&mut self, line: &[u8]) {
        let text = String::from_utf8_lossy(line);
        if matches!(text, std::borrow::Cow::Owned(_)) {
            tracing::warn!("invalid UTF-8 in an NDJSON line, replaced with U+FFFD");
            self.pending.push_back(Ok(ModelEvent::Note(
                "the model server sent invalid UTF-8 in a streamed line; the bytes were \
                 replaced with U+FFFD"
                    .into(),
            )));
        }
        let text = text.trim();
        if text.is_empty() {
            return;
        }
        let value: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(e) => {
                self.fail(ModelError::Malformed(format!(
                    "invalid JSON line ({e}): {}",
                    excerpt(text, 200)
                )));
                return;
            }
        };
        if let Some(error) = value.get("error") {
            let message = error
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| error.to_string());
            self.fail(ModelError::Stream(message));
            return;
        }
        let message = value.get("message");
        let field = |name: &str| {
            message
                .and_then(|m| m.get(name))
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        };
        if let Some(thinking) = field("thinking") {
            self.pending
                .push_back(Ok(ModelEvent::Reasoning(thinking.to_string())));
        }
        if let Some(content) = field("content") {
            self.pending
                .push_back(Ok(ModelEvent::Text(content.to_string())));
        }
        if let Some(calls) = message
            .and_then(|m| m.get("tool_calls"))
            .and_then(Value::as_array)
        {
            for call in calls {
                self.push_call(call);
            }
        }
        if value.get("done").and_then(Value::as_bool) == Some(true) {
            let count = |name: &str| value.get(name).and_then(Value::as_u64).unwrap_or(0);
            self.pending.push_back(Ok(ModelEvent::Usage(TokenCounts {
                prompt: count("prompt_eval_count"),
                completion: count("eval_count"),
                cached: 0,
            })));
            let reason = value
                .get("done_reason")
                .and_then(Value::as_str)
                .map(str::to_string);
            self.pending.push_back(Ok(ModelEvent::Finished { reason }));
            self.finished = true;
        }
    }

    /// Calls arrive whole and may be spread over several lines: append, never overwrite.
    fn push_call(&mut self, call: &Value) {
        let function = call.get("function").unwrap_or(call);
        // A call without a name is the model's mistake to fix: it reaches the loop as a
        // malformed call (empty name) and the model is told, instead of the reply failing.
        let name = function.get("name").and_then(Value::as_str).unwrap_or("");
        let index = self.calls_seen;
        self.calls_seen += 1;
        let id = call
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string);
        self.pending.push_back(Ok(ModelEvent::ToolCallStart {
            index,
            id,
            name: name.to_string(),
        }));
        match function.get("arguments") {
            // Non-conforming servers send a string: let the loop's lenient parser have it.
            Some(Value::String(text)) => {
                self.pending.push_back(Ok(ModelEvent::ToolCallArguments {
                    index,
                    fragment: text.clone(),
                }))
            }
            Some(arguments) => self.pending.push_back(Ok(ModelEvent::ToolCallWhole {
                index,
                arguments: arguments.clone(),
            })),
            None => self.pending.push_back(Ok(ModelEvent::ToolCallWhole {
                index,
                arguments: Value::Object(Default::default()),
            })),
        }
    }

    fn fail(&mut self, error: ModelError) {
        self.pending.push_back(Err(error));
        self.finished = true;
    }
}
