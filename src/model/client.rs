//! The one trait every model wire format implements.

use std::future::Future;
use std::pin::Pin;

use futures_util::Stream;

use super::error::ModelError;
use super::http::RetryObserver;
use super::spec::ModelSpec;
use super::types::{ChatRequest, ModelEvent};

pub type ModelStream = Pin<Box<dyn Stream<Item = Result<ModelEvent, ModelError>> + Send>>;
pub type ModelFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, ModelError>> + Send + 'a>>;

/// What a session learns about its model before the first turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelInfo {
    /// Tokens the model can see at once, as corral will use it.
    pub context_window: u64,
    pub supports_thinking: bool,
}

pub trait ModelClient: Send + Sync {
    fn spec(&self) -> &ModelSpec;
    fn base_url(&self) -> &str;

    /// Checks the model exists and sizes the context window. Called once per session.
    fn prepare(&self) -> ModelFuture<'_, ModelInfo>;

    /// Starts one streamed reply. Resolves once the server accepted the request (retrying
    /// before that as the policy allows); dropping the stream cancels the request upstream.
    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest<'a>,
        observer: RetryObserver<'a>,
    ) -> ModelFuture<'a, ModelStream>;

    /// Why this model cannot take `effort`, when it cannot; `None`: the request carries it.
    fn effort_note(&self, effort: super::Effort) -> Option<String> {
        let _ = effort;
        None
    }

    /// Releases what the client owns (a local model server). Idempotent.
    fn shutdown(&self) -> ModelFuture<'_, ()> {
        Box::pin(async { Ok(()) })
    }
}
