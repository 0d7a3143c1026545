//! The model client of a native session: which model, at which base URL, with which key.
//!
//! An API key from the environment is bound to the base URL it was configured for (the
//! config's `base_url`, else the environment's, else the provider's default): a session whose
//! request names another base URL is sent no key, so whoever chooses the URL cannot collect it.

use std::sync::Arc;

use crate::config::Config;
use crate::error::{Error, runtime, usage};
use crate::model::{self, ModelClient, ModelSpec};

/// The client for `model` at `requested_url` (each `None` when the session names none: the first
/// Ollama model that takes tools, at the configured or default address).
pub(crate) async fn model_client(
    model: Option<ModelSpec>,
    requested_url: Option<&str>,
    config: &Config,
    progress: model::Progress,
) -> Result<(Arc<dyn ModelClient>, ModelSpec), Error> {
    // Refused before anything is resolved or reached: a file: or unix: URL is never a model.
    if let Some(raw) = requested_url {
        model::check_base_url("base_url", raw).map_err(usage)?;
    }
    let env = |name: &str| std::env::var(name).ok();
    let settings = config.http_settings();
    let model_spec = match model {
        Some(model) => model,
        None => {
            let (base, _) = model::resolve_base_url(
                model::Provider::Ollama,
                requested_url,
                config.provider(model::Provider::Ollama).base_url.as_deref(),
                &env,
            );
            let name = model::find_ollama_tool_model(&base, &settings)
                .await
                .map_err(usage)?;
            format!("ollama:{name}")
                .parse::<ModelSpec>()
                .map_err(usage)?
        }
    };
    let provider_config = config.provider(model_spec.provider);
    let (base_url, _) = model::resolve_base_url(
        model_spec.provider,
        requested_url,
        provider_config.base_url.as_deref(),
        &env,
    );
    // Where the key was configured to go: the config's base URL, the environment's, or the
    // provider's default; never one a request names.
    let (key_base_url, _) = model::resolve_base_url(
        model_spec.provider,
        None,
        provider_config.base_url.as_deref(),
        &env,
    );
    let key_var = provider_config
        .api_key_env
        .clone()
        .or_else(|| model_spec.provider.api_key_env().map(str::to_string));
    let api_key = model::bound_api_key(key_var.as_deref().and_then(env), &key_base_url, &base_url);
    // Only OpenAI's own endpoint is refused up front: a local server named by OPENAI_BASE_URL,
    // the config or --base-url may take no key, and one that wants it answers 401 itself.
    if api_key.is_none() && model::requires_api_key(model_spec.provider, &base_url) {
        let var = key_var.as_deref().unwrap_or("OPENAI_API_KEY");
        let why = if key_var
            .as_deref()
            .and_then(env)
            .is_some_and(|k| !k.is_empty())
        {
            format!("{var} is configured for {key_base_url}, so it is not sent there")
        } else {
            format!("set {var}")
        };
        return Err(usage(format!(
            "{model_spec} needs an API key for {base_url}: {why}"
        )));
    }
    let window = match model_spec.provider.wire() {
        model::Wire::OllamaNative => provider_config.num_ctx,
        model::Wire::OpenAiChat => provider_config.context_window,
    };
    let client: Arc<dyn ModelClient> = if model_spec.provider == model::Provider::Gguf {
        Arc::new(
            model::GgufClient::new(
                model_spec.clone(),
                config.local.settings(),
                settings,
                progress,
            )
            .map_err(usage)?,
        )
    } else {
        model::connect(model_spec.clone(), base_url, api_key, settings, window).map_err(runtime)?
    };
    Ok((client, model_spec))
}
