//! corral's own agent loop as a backend: the model client it talks to can be swapped
//! between turns, keeping the conversation.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{Backend, BackendInfo, BoxFuture};
pub(crate) use connect::{Fallback, model_client};

mod connect;
use crate::config::Config;
use crate::error::Error;
use crate::llm_loop::LlmLoop;
use crate::model::{self, ModelClient};
use crate::session::TurnOutcome;

pub struct NativeBackend {
    llm_loop: LlmLoop,
    client: Arc<dyn ModelClient>,
    /// The base URL the session was opened with: a new model resolves its URL and key the
    /// same way.
    base_url: Option<String>,
    config: Config,
}

impl NativeBackend {
    pub fn new(
        llm_loop: LlmLoop,
        client: Arc<dyn ModelClient>,
        base_url: Option<String>,
        config: Config,
    ) -> NativeBackend {
        NativeBackend {
            llm_loop,
            client,
            base_url,
            config,
        }
    }

    async fn switch(&mut self, model_text: &str) -> Result<bool, String> {
        let model = model_text
            .parse::<model::ModelSpec>()
            .map_err(|e| e.to_string())?;
        let progress: model::Progress =
            Arc::new(|line: &str| tracing::info!(target: "corral::llama_server", "{line}"));
        let (client, _) = model_client(
            Some(model),
            self.base_url.as_deref(),
            &self.config,
            progress,
            Fallback::Embedded,
        )
        .await
        .map_err(|e: Error| e.to_string())?;
        let info = match client.prepare().await {
            Ok(info) => info,
            Err(e) => {
                let _ = client.shutdown().await;
                return Err(e.to_string());
            }
        };
        let old = std::mem::replace(&mut self.client, client.clone());
        self.llm_loop.switch_model(client, info.context_window);
        if let Err(e) = old.shutdown().await {
            tracing::warn!(error = %e, "stopping the previous model server");
        }
        Ok(true)
    }
}

impl Backend for NativeBackend {
    fn run_turn<'a>(
        &'a mut self,
        prompt: &'a str,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, TurnOutcome> {
        Box::pin(self.llm_loop.run_turn(prompt, cancel))
    }

    fn run_turn_with_images<'a>(
        &'a mut self,
        prompt: &'a str,
        images: Vec<crate::model::Image>,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, TurnOutcome> {
        Box::pin(self.llm_loop.run_turn_with_images(prompt, images, cancel))
    }

    fn set_model<'a>(&'a mut self, model: &'a str) -> BoxFuture<'a, Result<bool, String>> {
        Box::pin(self.switch(model))
    }

    fn compact(&mut self, cancel: CancellationToken) -> BoxFuture<'_, Result<bool, String>> {
        Box::pin(async move { self.llm_loop.compact_now(&cancel).await })
    }

    fn set_policy(&mut self, policy: crate::policy::Policy) -> BoxFuture<'_, Result<bool, String>> {
        self.llm_loop.set_policy(policy);
        Box::pin(async { Ok(true) })
    }

    fn set_effort(&mut self, effort: Option<model::Effort>) -> BoxFuture<'_, Result<(), String>> {
        let applied = self.llm_loop.set_effort(effort);
        Box::pin(async move { applied })
    }

    fn set_delegating(&mut self, on: bool) -> Result<(), String> {
        self.llm_loop.set_delegating(on)
    }

    fn shutdown(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.llm_loop.shutdown_tools().await;
            if let Err(e) = self.client.shutdown().await {
                tracing::warn!(error = %e, "stopping the model server");
            }
        })
    }

    fn info(&self) -> BackendInfo {
        BackendInfo {
            kind: "native",
            queues_prompts: false,
        }
    }
}
