//! The model client of a native session: which model, at which base URL, with which key.
//!
//! An API key from the environment is bound to the base URL it was configured for (the
//! config's `base_url`, else the environment's, else the provider's default): a session whose
//! request names another base URL is sent no key, so whoever chooses the URL cannot collect it.

use std::sync::Arc;

use crate::config::Config;
use crate::error::{Error, runtime, usage};
use crate::model::discover::{self, Found};
use crate::model::{self, ModelClient, ModelSpec, Provider};

/// The client for `model` at `requested_url` (`None` when the session names none: see
/// [`default_model`]).
pub(crate) async fn model_client(
    model: Option<ModelSpec>,
    requested_url: Option<&str>,
    config: &Config,
    progress: model::Progress,
    fallback: Fallback,
) -> Result<(Arc<dyn ModelClient>, ModelSpec), Error> {
    // Refused before anything is resolved or reached: a file: or unix: URL is never a model.
    if let Some(raw) = requested_url {
        model::check_base_url("base_url", raw).map_err(usage)?;
    }
    let env = |name: &str| std::env::var(name).ok();
    let settings = config.http_settings();
    // A server found running is used where it was found.
    let (model_spec, found_url) = match model {
        Some(model) => (
            model.with_default_provider(default_provider(requested_url, config)),
            None,
        ),
        None => default_model(requested_url, config, &env, &progress, fallback).await?,
    };
    let requested_url = requested_url.or(found_url.as_deref());
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

/// Whether a session that names no model may fall back to the installed gguf model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fallback {
    /// The person at the terminal, an admin: the small model `scripts/setup` installed.
    Embedded,
    /// A bounded caller (a server `user` token), who may not name a `gguf:` model either:
    /// each session would start a llama-server process on the host.
    RunningServersOnly,
}

/// The provider of a bare model name (`-m qwen3`): an OpenAI-compatible server when the
/// request's base URL ends in `/v1`, else Ollama unless the config configures only other
/// providers' addresses, then the first of those.
fn default_provider(requested_url: Option<&str>, config: &Config) -> Provider {
    if requested_url.is_some_and(|url| url.trim_end_matches('/').ends_with("/v1")) {
        return Provider::OpenAi;
    }
    let addressed: Vec<Provider> = config
        .providers
        .iter()
        .filter(|(_, p)| p.base_url.is_some())
        .map(|(provider, _)| *provider)
        .collect();
    match addressed.first() {
        Some(first) if !addressed.contains(&Provider::Ollama) && *first != Provider::Gguf => *first,
        _ => Provider::Ollama,
    }
}

/// The model of a session that names none: the first tool-capable model of a running server
/// (Ollama at its configured address first, then llama.cpp, LM Studio and vLLM on their usual
/// loopback ports), else the small model `scripts/setup` installed. Either way one line says
/// which and why. With `--base-url` only that server is asked: Ollama's API, or for a URL
/// ending in `/v1` the OpenAI-compatible model listing.
async fn default_model(
    requested_url: Option<&str>,
    config: &Config,
    env: &(dyn Fn(&str) -> Option<String> + Sync),
    progress: &model::Progress,
    fallback: Fallback,
) -> Result<(ModelSpec, Option<String>), Error> {
    // `--base-url …/v1` names an OpenAI-compatible server: its first model (the person chose
    // the server; most serve one model).
    if let Some(url) = requested_url.filter(|u| u.trim_end_matches('/').ends_with("/v1")) {
        let (base, _) = model::resolve_base_url(Provider::OpenAi, Some(url), None, env);
        let found = discover::probe(Provider::OpenAi, &base).await;
        let first = found
            .as_ref()
            .ok()
            .and_then(|f| f.tool_model().or(f.models.first()).map(|name| f.spec(name)));
        return match first {
            Some(spec) => {
                note(
                    progress,
                    &format!(
                        "no model named: using {spec}, the first model the server at {base} lists"
                    ),
                );
                Ok((spec, None))
            }
            None => Err(usage(format!(
                "no model given (--model or `model` in the config) and the server at {base} \
                 lists none ({}); name one with --model",
                match found {
                    Ok(_) => "an empty list".to_string(),
                    Err(why) => why,
                }
            ))),
        };
    }
    let ollama_config = config.provider(Provider::Ollama).base_url;
    let (ollama, source) = model::resolve_base_url(
        Provider::Ollama,
        requested_url,
        ollama_config.as_deref(),
        env,
    );
    let mut candidates = if requested_url.is_some() {
        vec![(Provider::Ollama, ollama.clone())]
    } else {
        discover::local_candidates(env)
    };
    if source != model::BaseUrlSource::Default {
        for (provider, base) in &mut candidates {
            if *provider == Provider::Ollama {
                base.clone_from(&ollama);
            }
        }
    }
    let found = discover::probe_all(&candidates).await;
    if let Some((server, name)) = found
        .iter()
        .find_map(|f| f.tool_model().map(|name| (f, name)))
    {
        let spec = server.spec(name);
        note(
            progress,
            &format!(
                "no model named: using {spec}, the first tool-capable model of the {} server \
                 at {} (-m names another; `corral init` makes one the default)",
                server.provider, server.base_url
            ),
        );
        return Ok((spec, Some(server.base_url.clone())));
    }
    let embedded = discover::embedded_model_path(env);
    if requested_url.is_none()
        && fallback == Fallback::Embedded
        && let Some(spec) = discover::embedded_model(env)
    {
        let why = if found.is_empty() {
            "no model server is running".to_string()
        } else {
            format!(
                "no running server has a tool-capable model ({})",
                listed(&found)
            )
        };
        note(
            progress,
            &format!(
                "no model named and {why}: using {spec}, the model scripts/setup installed. {}",
                discover::EMBEDDED_MODEL_LIMITS
            ),
        );
        return Ok((spec, None));
    }
    let servers = if found.is_empty() {
        let asked: Vec<&str> = candidates.iter().map(|(_, base)| base.as_str()).collect();
        format!("no model server answered at {}", asked.join(", "))
    } else {
        format!(
            "no running server has a model with the `tools` capability ({})",
            listed(&found)
        )
    };
    let setup = match (&embedded, requested_url) {
        (Some(path), None) => format!(
            "; the small model scripts/setup installs is not at {}",
            path.display()
        ),
        _ => String::new(),
    };
    Err(usage(format!(
        "no model given (--model or `model` in the config), {servers}{setup}. Run scripts/setup \
         (a small local model), start a server (`ollama serve`, then `ollama pull qwen3`), or \
         name a model, e.g. `--model llamacpp:local --base-url http://127.0.0.1:8080/v1`"
    )))
}

fn listed(found: &[Found]) -> String {
    found
        .iter()
        .map(|f| {
            let models = if f.models.is_empty() {
                "no models".to_string()
            } else {
                format!("installed: {}", model::excerpt(&f.models.join(", "), 200))
            };
            format!("{} at {}: {models}", f.provider, f.base_url)
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn note(progress: &model::Progress, line: &str) {
    tracing::info!(note = line, "default model");
    progress(line);
}
