//! OpenAI-compatible `POST {base}/chat/completions` with SSE: OpenAI itself, llama.cpp, vLLM,
//! LM Studio, mlx_lm.server.
//!
//! Servers differ in small ways this client absorbs: reasoning arrives as `reasoning_content`
//! or `reasoning`; tool calls come in fragments keyed by index (or whole); local servers say
//! `finish_reason: "stop"` although they emitted calls (the accumulated calls are trusted);
//! usage comes on any chunk, usually a final one with `choices: []`; mlx defaults to 512 output
//! tokens unless `max_tokens` is sent. A body that ends without `[DONE]` is reported: as a
//! truncated reply when no `finish_reason` came either, as a warning otherwise.

use std::collections::{HashMap, VecDeque};
use std::sync::OnceLock;

use futures_util::StreamExt;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use serde_json::{Value, json};

use super::Effort;
use super::client::{ModelClient, ModelFuture, ModelInfo, ModelStream};
use super::error::{ModelError, excerpt, not_found_hint};
use super::http::{self, ChatBody, HttpSettings, RetryObserver};
use super::ndjson::ByteStream;
use super::spec::{ModelSpec, Provider};
use super::sse::{SseEvent, SseParser};
use super::types::{ChatRequest, ModelEvent, TokenCounts, ToolChoice};
use wire::{WireMessage, wire_messages};

mod wire;

pub const DEFAULT_LOCAL_WINDOW: u64 = 32_768;
pub const DEFAULT_OPENAI_WINDOW: u64 = 128_000;

pub struct OpenAiClient {
    spec: ModelSpec,
    base_url: String,
    http: reqwest::Client,
    headers: HeaderMap,
    settings: HttpSettings,
    window_override: Option<u64>,
    info: OnceLock<ModelInfo>,
}

impl OpenAiClient {
    pub fn new(
        spec: ModelSpec,
        base_url: String,
        api_key: Option<String>,
        settings: HttpSettings,
        window_override: Option<u64>,
    ) -> Result<Self, ModelError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = api_key.filter(|k| !k.is_empty()) {
            let value = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| {
                ModelError::Connect {
                    url: base_url.clone(),
                    reason: "the API key contains characters not allowed in a header".into(),
                }
            })?;
            headers.insert(AUTHORIZATION, value);
        }
        Ok(OpenAiClient {
            http: http::build_client(&settings)?,
            spec,
            base_url,
            headers,
            settings,
            window_override,
            info: OnceLock::new(),
        })
    }

    /// llama.cpp tells its real window at `/props`; other servers have no standard way.
    async fn probe_window(&self) -> Option<u64> {
        if self.spec.provider != Provider::LlamaCpp {
            return None;
        }
        let origin = self.base_url.trim_end_matches("/v1");
        let props = http::get_json(
            &self.http,
            &format!("{origin}/props"),
            &self.headers,
            &self.settings,
        )
        .await
        .ok()?;
        props
            .pointer("/default_generation_settings/n_ctx")
            .or_else(|| props.get("n_ctx"))
            .and_then(Value::as_u64)
            .filter(|n| *n > 0)
    }

    fn request_body<'a>(&self, request: &ChatRequest<'a>) -> ChatBody<Vec<WireMessage<'a>>> {
        let messages = wire_messages(request.messages);
        let mut body = json!({
            "model": self.spec.model,
            "stream": true,
            "stream_options": {"include_usage": true},
        });
        // OpenAI's newer models refuse `max_tokens`; local servers know only `max_tokens`.
        let limit_field = if self.spec.provider == Provider::OpenAi {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        body[limit_field] = json!(request.max_tokens);
        if let Some(t) = request.temperature {
            body["temperature"] = json!(t);
        }
        if let Some(effort) = request.effort {
            body["reasoning_effort"] = json!(effort.as_str());
            if self.spec.provider == Provider::LlamaCpp {
                // llama.cpp passes these to the chat template: Qwen3-style templates switch
                // thinking with `enable_thinking` (low: their non-thinking mode), GPT-OSS reads
                // `reasoning_effort`; a template that uses neither ignores both.
                body["chat_template_kwargs"] = json!({
                    "enable_thinking": effort != Effort::Low,
                    "reasoning_effort": effort.as_str(),
                });
            }
        }
        if self.spec.provider == Provider::LlamaCpp {
            // Each step re-sends the previous one's prompt and more: evaluate only what is new.
            // (The server's default today, asked for so an older or reconfigured one keeps it.)
            body["cache_prompt"] = json!(true);
        }
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "function": {
                        "name": t.name, "description": t.description, "parameters": t.parameters}})
                })
                .collect();
            // mlx_lm.server supports neither field; it ignores unknown keys, others honour them.
            // llama.cpp keeps parallel calls off unless asked: the small local models it
            // serves do better with one call a step, and its streaming parser can fail
            // mid-reply ("Invalid diff") when a small model emits several.
            if self.spec.provider != Provider::Mlx {
                if self.spec.provider != Provider::LlamaCpp {
                    body["parallel_tool_calls"] = json!(true);
                }
                if let Some(choice) = request.tool_choice {
                    body["tool_choice"] = json!(match choice {
                        ToolChoice::Auto => "auto",
                        ToolChoice::Required => "required",
                        ToolChoice::None => "none",
                    });
                }
            }
        }
        ChatBody {
            fields: body,
            messages,
        }
    }
}

impl ModelClient for OpenAiClient {
    fn spec(&self) -> &ModelSpec {
        &self.spec
    }

    fn base_url(&self) -> &str {
        &self.base_url
    }

    fn prepare(&self) -> ModelFuture<'_, ModelInfo> {
        Box::pin(async move {
            if let Some(info) = self.info.get() {
                return Ok(info.clone());
            }
            let default = if self.spec.provider == Provider::OpenAi {
                DEFAULT_OPENAI_WINDOW
            } else {
                DEFAULT_LOCAL_WINDOW
            };
            let window = match self.window_override {
                Some(w) => w,
                None => self.probe_window().await.unwrap_or(default),
            };
            let info = ModelInfo {
                context_window: window,
                supports_thinking: false,
            };
            Ok(self.info.get_or_init(|| info).clone())
        })
    }

    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest<'a>,
        observer: RetryObserver<'a>,
    ) -> ModelFuture<'a, ModelStream> {
        Box::pin(async move {
            let url = format!("{}/chat/completions", self.base_url);
            let body = self.request_body(request);
            let response = match http::post_json(
                &self.http,
                &url,
                &self.headers,
                &body,
                &self.settings,
                observer,
            )
            .await
            {
                Err(ModelError::Http {
                    status: 404,
                    message,
                }) if names_a_model(&message) => {
                    let available = http::list_models(
                        &self.http,
                        &format!("{}/models", self.base_url),
                        &self.headers,
                        &self.settings,
                    )
                    .await;
                    return Err(ModelError::ModelNotFound {
                        model: self.spec.model.clone(),
                        url: self.base_url.clone(),
                        hint: not_found_hint(None, available.as_deref()),
                    });
                }
                other => other?,
            };
            let content_type = response
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string();
            if !content_type.is_empty() && !content_type.contains("text/event-stream") {
                let (text, _) = http::read_error_body(response, &self.settings).await;
                return Err(ModelError::Malformed(format!(
                    "expected an SSE stream (text/event-stream), got {content_type}: {}",
                    excerpt(&text, 200)
                )));
            }
            let state = SseState {
                bytes: Box::pin(response.bytes_stream()),
                parser: SseParser::new(self.settings.max_stream_line),
                ended: false,
                pending: VecDeque::new(),
                slots: HashMap::new(),
                next_slot: 0,
                usage: None,
                finish_reason: None,
                done: false,
                settings: self.settings,
            };
            let stream = futures_util::stream::unfold(state, |mut state| async move {
                state.next_event().await.map(|event| (event, state))
            });
            Ok(Box::pin(stream) as ModelStream)
        })
    }
}

/// A 404 about the model (OpenAI's `model_not_found`, vLLM's "The model `x` does not exist",
/// Ollama's "model \"x\" not found"), not about the path (a base URL without `/v1`).
fn names_a_model(message: &str) -> bool {
    message.to_ascii_lowercase().contains("model")
}

/// A wire tool-call index maps to our slot; a new id at an occupied index opens a new slot
/// (some Ollama-compatible servers reuse index 0 for parallel calls).
struct Slot {
    ours: usize,
    id: Option<String>,
}

struct SseState {
    bytes: ByteStream,
    parser: SseParser,
    /// The body ended (its last event, if any, already taken).
    ended: bool,
    pending: VecDeque<Result<ModelEvent, ModelError>>,
    slots: HashMap<u64, Slot>,
    next_slot: usize,
    usage: Option<TokenCounts>,
    finish_reason: Option<String>,
    done: bool,
    settings: HttpSettings,
}

impl SseState {
    async fn next_event(&mut self) -> Option<Result<ModelEvent, ModelError>> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some(event);
            }
            if self.done {
                return None;
            }
            match self.next_sse().await {
                Ok(Some(event)) => self.take(event),
                Err(e) => self.fail(e),
                Ok(None) if self.finish_reason.is_some() => {
                    tracing::warn!("SSE stream ended without [DONE] after finish_reason");
                    self.finish();
                }
                Ok(None) => self.fail(ModelError::Truncated(
                    "the SSE stream ended without finish_reason or [DONE]".into(),
                )),
            }
        }
    }

    /// The next event off the wire; `Ok(None)` once the body has ended.
    async fn next_sse(&mut self) -> Result<Option<SseEvent>, ModelError> {
        let over =
            |e: super::ndjson::LineTooLong| ModelError::line_over_cap("an SSE event", e.limit);
        loop {
            if let Some(event) = self.parser.next_event().map_err(over)? {
                return Ok(Some(event));
            }
            if self.ended {
                return Ok(None);
            }
            match self.bytes.next().await {
                Some(Ok(chunk)) => self.parser.push(&chunk).map_err(over)?,
                Some(Err(e)) => return Err(http::body_error(&e, &self.settings)),
                None => {
                    self.ended = true;
                    return self.parser.finish().map_err(over);
                }
            }
        }
    }

    fn take(&mut self, event: SseEvent) {
        if event.invalid_utf8 {
            // One bad byte sequence costs a replacement character, not the reply.
            tracing::warn!("invalid UTF-8 in an SSE event, replaced with U+FFFD");
            self.pending.push_back(Ok(ModelEvent::Note(
                "the model server sent invalid UTF-8 in a streamed event; the bytes were \
                 replaced with U+FFFD"
                    .into(),
            )));
        }
        self.handle(&event.name, &event.data);
    }

    fn handle(&mut self, name: &str, data: &str) {
        let data = data.trim();
        if data == "[DONE]" {
            self.finish();
            return;
        }
        if data.is_empty() {
            return;
        }
        if name != "error" && self.handle_fast(data) {
            return;
        }
        let chunk: Value = match serde_json::from_str(data) {
            Ok(v) => v,
            Err(e) => {
                self.fail(ModelError::Malformed(format!(
                    "invalid JSON in an SSE event ({e}): {}",
                    excerpt(data, 200)
                )));
                return;
            }
        };
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .or_else(|| error.as_str())
                .map(str::to_string)
                .unwrap_or_else(|| error.to_string());
            self.fail(ModelError::Stream(message));
            return;
        }
        if name == "error" {
            self.fail(ModelError::Stream(excerpt(data, 300)));
            return;
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            let count = |ptr: &str| usage.pointer(ptr).and_then(Value::as_u64).unwrap_or(0);
            self.usage = Some(TokenCounts {
                prompt: count("/prompt_tokens"),
                completion: count("/completion_tokens"),
                cached: match usage.pointer("/prompt_tokens_details/cached_tokens") {
                    Some(cached) => cached.as_u64().unwrap_or(0),
                    // llama.cpp tells in `timings` how much of the prompt came from its cache.
                    None => chunk
                        .pointer("/timings/cache_n")
                        .and_then(Value::as_u64)
                        .unwrap_or(0),
                },
            });
        }
        let Some(choices) = chunk.get("choices").and_then(Value::as_array) else {
            return;
        };
        // corral asks for one choice; any other index is a server quirk and ignored.
        for choice in choices
            .iter()
            .filter(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
        {
            if let Some(delta) = choice.get("delta").or_else(|| choice.get("message")) {
                self.handle_delta(delta);
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish_reason = Some(reason.to_string());
            }
        }
    }

    /// The chunk of almost every event — text or reasoning, maybe a finish reason — parsed
    /// into borrowed typed fields instead of a `Value` tree. Anything else (tool calls,
    /// usage, errors, unexpected shapes) returns false and takes the general path.
    fn handle_fast(&mut self, data: &str) -> bool {
        let Ok(chunk) = serde_json::from_str::<fast::Chunk<'_>>(data) else {
            return false;
        };
        if chunk.error.is_some() || chunk.usage.is_some() {
            return false;
        }
        let choices = chunk.choices.unwrap_or_default();
        if choices.iter().any(|c| {
            c.message.is_some() || c.delta.as_ref().is_some_and(|d| d.tool_calls.is_some())
        }) {
            return false;
        }
        for choice in choices.into_iter().filter(|c| c.index.unwrap_or(0) == 0) {
            if let Some(delta) = choice.delta {
                let reasoning = delta
                    .reasoning_content
                    .filter(|r| !r.is_empty())
                    .or(delta.reasoning.filter(|r| !r.is_empty()));
                if let Some(reasoning) = reasoning {
                    self.pending
                        .push_back(Ok(ModelEvent::Reasoning(reasoning.into_owned())));
                }
                if let Some(content) = delta.content.filter(|c| !c.is_empty()) {
                    self.pending
                        .push_back(Ok(ModelEvent::Text(content.into_owned())));
                }
            }
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason.into_owned());
            }
        }
        true
    }

    fn handle_delta(&mut self, delta: &Value) {
        let text_of = |name: &str| {
            delta
                .get(name)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        };
        if let Some(reasoning) = text_of("reasoning_content").or_else(|| text_of("reasoning")) {
            self.pending
                .push_back(Ok(ModelEvent::Reasoning(reasoning.to_string())));
        }
        if let Some(content) = text_of("content") {
            self.pending
                .push_back(Ok(ModelEvent::Text(content.to_string())));
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for call in calls {
                self.handle_call_fragment(call);
            }
        }
    }

    fn handle_call_fragment(&mut self, call: &Value) {
        let wire_index = call.get("index").and_then(Value::as_u64).unwrap_or(0);
        let id = call
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let function = call.get("function");
        let name = function
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let arguments = function.and_then(|f| f.get("arguments"));

        let opens_new = match self.slots.get(&wire_index) {
            None => true,
            Some(slot) => id.is_some() && slot.id.as_deref() != id,
        };
        if opens_new {
            // No name (absent or empty) is the model's mistake to fix: the loop gets a call
            // named "" and answers it as malformed, the reply goes on.
            let name = name.unwrap_or_default();
            let ours = self.next_slot;
            self.next_slot += 1;
            self.slots.insert(
                wire_index,
                Slot {
                    ours,
                    id: id.map(str::to_string),
                },
            );
            self.pending.push_back(Ok(ModelEvent::ToolCallStart {
                index: ours,
                id: id.map(str::to_string),
                name: name.to_string(),
            }));
        }
        let Some(slot) = self.slots.get(&wire_index) else {
            return;
        };
        let index = slot.ours;
        match arguments {
            Some(Value::String(fragment)) if !fragment.is_empty() => {
                self.pending.push_back(Ok(ModelEvent::ToolCallArguments {
                    index,
                    fragment: fragment.clone(),
                }));
            }
            // A few servers send the arguments as an object in one piece.
            Some(object @ Value::Object(_)) => {
                self.pending.push_back(Ok(ModelEvent::ToolCallWhole {
                    index,
                    arguments: object.clone(),
                }));
            }
            _ => {}
        }
    }

    fn finish(&mut self) {
        if let Some(usage) = self.usage.take() {
            self.pending.push_back(Ok(ModelEvent::Usage(usage)));
        }
        self.pending.push_back(Ok(ModelEvent::Finished {
            reason: self.finish_reason.take(),
        }));
        self.done = true;
    }

    fn fail(&mut self, error: ModelError) {
        self.pending.push_back(Err(error));
        self.done = true;
    }
}

/// Borrowing shapes of a streamed chunk, for the fast path.
mod fast {
    use std::borrow::Cow;

    use serde::Deserialize;
    use serde::de::IgnoredAny;

    #[derive(Deserialize)]
    pub struct Chunk<'a> {
        #[serde(borrow, default)]
        pub choices: Option<Vec<Choice<'a>>>,
        #[serde(default)]
        pub usage: Option<IgnoredAny>,
        #[serde(default)]
        pub error: Option<IgnoredAny>,
    }

    #[derive(Deserialize)]
    pub struct Choice<'a> {
        #[serde(default)]
        pub index: Option<u64>,
        #[serde(borrow, default)]
        pub delta: Option<Delta<'a>>,
        #[serde(default)]
        pub message: Option<IgnoredAny>,
        #[serde(borrow, default)]
        pub finish_reason: Option<Cow<'a, str>>,
    }

    #[derive(Deserialize)]
    pub struct Delta<'a> {
        #[serde(borrow, default)]
        pub content: Option<Cow<'a, str>>,
        #[serde(borrow, default)]
        pub reasoning_content: Option<Cow<'a, str>>,
        #[serde(borrow, default)]
        pub reasoning: Option<Cow<'a, str>>,
        #[serde(default)]
        pub tool_calls: Option<IgnoredAny>,
    }
}
