//! corral's own agent loop as a backend: the model client it talks to can be swapped
//! between turns, keeping the conversation.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{Backend, BackendInfo, BoxFuture, TurnOutcome};
use crate::agent::Agent;
use crate::config::Config;
use crate::model::{self, ModelClient};
use crate::session::open::{OpenError, OpenSpec};

pub struct NativeBackend {
    agent: Agent,
    client: Arc<dyn ModelClient>,
    /// What the session was opened with: a new model resolves its base URL and key the same way.
    spec: OpenSpec,
    config: Config,
}

impl NativeBackend {
    pub fn new(
        agent: Agent,
        client: Arc<dyn ModelClient>,
        spec: OpenSpec,
        config: Config,
    ) -> NativeBackend {
        NativeBackend {
            agent,
            client,
            spec,
            config,
        }
    }

    async fn switch(&mut self, model_text: &str) -> Result<bool, String> {
        let mut spec = self.spec.clone();
        spec.model = Some(model_text.to_string());
        let progress: model::Progress =
            Arc::new(|line: &str| tracing::info!(target: "corral::llama_server", "{line}"));
        let (client, _) = crate::session::open::model_client(&spec, &self.config, None, progress)
            .await
            .map_err(|e: OpenError| e.to_string())?;
        let info = match client.prepare().await {
            Ok(info) => info,
            Err(e) => {
                let _ = client.shutdown().await;
                return Err(e.to_string());
            }
        };
        let old = std::mem::replace(&mut self.client, client.clone());
        self.agent.switch_model(client, info.context_window);
        if let Err(e) = old.shutdown().await {
            tracing::warn!(error = %e, "stopping the previous model server");
        }
        self.spec = spec;
        Ok(true)
    }
}

impl Backend for NativeBackend {
    fn run_turn<'a>(
        &'a mut self,
        prompt: &'a str,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, TurnOutcome> {
        Box::pin(self.agent.run_turn(prompt, cancel))
    }

    fn run_turn_with_images<'a>(
        &'a mut self,
        prompt: &'a str,
        images: Vec<crate::model::Image>,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, TurnOutcome> {
        Box::pin(self.agent.run_turn_with_images(prompt, images, cancel))
    }

    fn set_model<'a>(&'a mut self, model: &'a str) -> BoxFuture<'a, Result<bool, String>> {
        Box::pin(self.switch(model))
    }

    fn set_policy(&mut self, policy: crate::policy::Policy) -> BoxFuture<'_, Result<bool, String>> {
        self.agent.set_policy(policy);
        Box::pin(async { Ok(true) })
    }

    fn shutdown(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
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
