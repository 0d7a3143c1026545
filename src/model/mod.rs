//! Model clients: one trait, one file per wire format.

mod choice;
mod client;
mod danger;
mod effort;
mod error;
mod gguf;
mod local;
pub use error::excerpt;
mod http;
mod ndjson;
mod ollama;
mod openai;
mod prompt_mode;
mod spec;
mod sse;
pub(crate) use sse::SseParser;
mod types;

pub use choice::{ChoiceError, ExternalKind, ExternalSpec, ModelChoice, backend_of};
pub use client::{ModelClient, ModelInfo};
pub use danger::Danger;
pub use effort::{Effort, split_effort_suffix};
pub use error::ModelError;
pub use http::{HttpSettings, RetryNotice, RetryPolicy};
pub use local::{GgufClient, LocalSettings, Progress, find_server as find_local_server};
pub use ollama::{OllamaClient, capabilities_of};
pub use openai::OpenAiClient;
pub use prompt_mode::PromptMode;
pub use spec::{
    BaseUrlSource, ModelSpec, Provider, SpecError, Wire, bound_api_key, check_base_url,
    requires_api_key, resolve_base_url,
};
pub use types::*;

pub mod discover;

use std::sync::Arc;

/// Builds the client for a spec. `window` is `num_ctx` for Ollama and the context window for
/// OpenAI-compatible servers, when configured.
pub fn connect(
    spec: ModelSpec,
    base_url: String,
    api_key: Option<String>,
    settings: HttpSettings,
    window: Option<u64>,
) -> Result<Arc<dyn ModelClient>, ModelError> {
    Ok(match spec.provider.wire() {
        Wire::OllamaNative => Arc::new(OllamaClient::new(spec, base_url, settings, window)?),
        Wire::OpenAiChat => Arc::new(OpenAiClient::new(
            spec, base_url, api_key, settings, window,
        )?),
    })
}
