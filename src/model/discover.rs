//! The model servers running on this machine and the model `scripts/setup` installed: what
//! `corral init` offers, `corral doctor` reports and `corral run` falls back on when no model
//! is named.
//!
//! Each server is recognised by its own API, not by its port: Ollama by `/api/tags`, llama.cpp
//! by `/health` and `/v1/models`, LM Studio by `/api/v0/models` (else `/v1/models`), vLLM by
//! `/v1/models`. Only loopback addresses are probed, with short timeouts, all at once: when
//! nothing listens every probe is refused at once, so discovery costs a few milliseconds.

use std::path::PathBuf;
use std::time::Duration;

use reqwest::header::HeaderMap;
use serde_json::{Value, json};

use super::gguf;
use super::http::{self, HttpSettings};
use super::ollama::capabilities_of;
use super::spec::{ModelSpec, Provider};

/// Test-only: `ollama=PORT,llamacpp=PORT,lmstudio=PORT,vllm=PORT` replaces the usual ports
/// probed (only the named servers are probed), so tests run beside real servers and bind no
/// fixed port. Not meant for users: `--base-url` and `[providers.*]` name real servers.
pub const PROBE_PORTS_VAR: &str = "CORRAL_TEST_PROBE_PORTS";

/// The file `scripts/setup` (scripts/install-local-model) installs, under the data directory.
const EMBEDDED_MODEL: &str = "corral/models/SmolLM2-135M-Instruct.Q4_1.gguf";

/// How many of an older Ollama's models are asked about (one request each).
const SHOWN_MODELS: usize = 12;

/// Each probe's limit; a local server that needs longer is as good as absent here.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The servers probed, in the order they are preferred: provider and base URL.
pub fn local_candidates(var: &dyn Fn(&str) -> Option<String>) -> Vec<(Provider, String)> {
    let usual = [
        (Provider::Ollama, 11434),
        (Provider::LlamaCpp, 8080),
        (Provider::LmStudio, 1234),
        (Provider::Vllm, 8000),
    ];
    let ports: Vec<(Provider, u16)> = match var(PROBE_PORTS_VAR) {
        None => usual.to_vec(),
        Some(list) => usual
            .iter()
            .filter_map(|(provider, _)| {
                list.split(',')
                    .filter_map(|pair| pair.trim().split_once('='))
                    .find(|(name, _)| *name == provider.prefix())
                    .and_then(|(_, port)| port.parse().ok())
                    .map(|port| (*provider, port))
            })
            .collect(),
    };
    ports
        .into_iter()
        .map(|(provider, port)| (provider, base_url_at(provider, port)))
        .collect()
}

fn base_url_at(provider: Provider, port: u16) -> String {
    match provider.wire() {
        super::spec::Wire::OllamaNative => format!("http://127.0.0.1:{port}"),
        super::spec::Wire::OpenAiChat => format!("http://127.0.0.1:{port}/v1"),
    }
}

/// A server that answered its API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub provider: Provider,
    pub base_url: String,
    /// Every model it lists.
    pub models: Vec<String>,
    /// The models it says can call tools, in its order; empty when none can or it cannot
    /// tell (vLLM).
    pub tool_models: Vec<String>,
}

impl Found {
    /// The first model that can call tools.
    pub fn tool_model(&self) -> Option<&String> {
        self.tool_models.first()
    }

    /// The spec for one of its models.
    pub fn spec(&self, model: &str) -> ModelSpec {
        ModelSpec::new(self.provider, model)
    }
}

/// Probes every candidate at once; the servers that answered, in the candidates' order.
pub async fn probe_all(candidates: &[(Provider, String)]) -> Vec<Found> {
    let probes = candidates
        .iter()
        .map(|(provider, base)| probe(*provider, base));
    futures_util::future::join_all(probes)
        .await
        .into_iter()
        .filter_map(Result::ok)
        .collect()
}

fn probe_settings() -> HttpSettings {
    HttpSettings {
        connect_timeout: PROBE_TIMEOUT,
        idle_timeout: PROBE_TIMEOUT,
        ..HttpSettings::default()
    }
}

/// One server, by its own API. `Err`: why it is not there (refused, not this API).
pub async fn probe(provider: Provider, base_url: &str) -> Result<Found, String> {
    let settings = probe_settings();
    let client = http::build_client(&settings).map_err(|e| e.to_string())?;
    let client = &client;
    let get = |path: String| async move {
        tokio::time::timeout(
            PROBE_TIMEOUT,
            http::get_json(client, &path, &HeaderMap::new(), &settings),
        )
        .await
        .map_err(|_| format!("{path}: no answer"))?
        .map_err(|e| match e {
            super::error::ModelError::Refused { .. } => "nothing listens there".to_string(),
            e => e.to_string(),
        })
    };
    let origin = base_url.trim_end_matches("/v1");
    let found = |models: Vec<String>, tool_models: Vec<String>| Found {
        provider,
        base_url: base_url.to_string(),
        models,
        tool_models,
    };
    match provider {
        Provider::Ollama => {
            let tags = get(format!("{base_url}/api/tags")).await?;
            let mut models = Vec::new();
            let mut tool_models = Vec::new();
            for model in tags
                .get("models")
                .and_then(Value::as_array)
                .ok_or(format!("{base_url}/api/tags has no `models`: not Ollama"))?
            {
                let Some(name) = model
                    .get("name")
                    .or_else(|| model.get("model"))
                    .and_then(Value::as_str)
                else {
                    continue;
                };
                models.push(name.to_string());
                // Newer servers list capabilities in /api/tags; older ones only in /api/show,
                // asked for the first few models only.
                let capabilities = match model.get("capabilities") {
                    Some(_) => capabilities_of(model),
                    None if models.len() > SHOWN_MODELS => Vec::new(),
                    None => http::post_json_once(
                        client,
                        &format!("{base_url}/api/show"),
                        &HeaderMap::new(),
                        &json!({ "model": name }),
                        &settings,
                    )
                    .await
                    .map(|shown| capabilities_of(&shown))
                    .unwrap_or_default(),
                };
                if capabilities.iter().any(|c| c == "tools") {
                    tool_models.push(name.to_string());
                }
            }
            Ok(found(models, tool_models))
        }
        Provider::LlamaCpp => {
            get(format!("{origin}/health")).await?;
            let models = openai_ids(&get(format!("{base_url}/models")).await?)?;
            // Tools need a template that renders them (llama-server --jinja with one).
            let template = get(format!("{origin}/props")).await.ok().and_then(|props| {
                props
                    .get("chat_template")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            });
            let tools = template.is_some_and(|t| gguf::template_supports_tools(&t));
            // One server, one model (whatever name a request gives).
            let tool_models = if tools {
                models.iter().take(1).cloned().collect()
            } else {
                Vec::new()
            };
            Ok(found(models, tool_models))
        }
        Provider::LmStudio => {
            // LM Studio's own listing says which models use tools.
            if let Ok(listing) = get(format!("{origin}/api/v0/models")).await
                && let Some(data) = listing.get("data").and_then(Value::as_array)
            {
                let llm = |m: &&Value| m.get("type").and_then(Value::as_str) != Some("embeddings");
                let name = |m: &Value| m.get("id").and_then(Value::as_str).map(str::to_string);
                let models: Vec<String> = data.iter().filter(llm).filter_map(name).collect();
                let tool_models = data
                    .iter()
                    .filter(llm)
                    .filter(|m| capabilities_of(m).iter().any(|c| c == "tool_use"))
                    .filter_map(name)
                    .collect();
                return Ok(found(models, tool_models));
            }
            let models = openai_ids(&get(format!("{base_url}/models")).await?)?;
            Ok(found(models, Vec::new()))
        }
        _ => {
            // vLLM calls tools only when started with --enable-auto-tool-choice, which its
            // API does not show.
            let models = openai_ids(&get(format!("{base_url}/models")).await?)?;
            Ok(found(models, Vec::new()))
        }
    }
}

fn openai_ids(listing: &Value) -> Result<Vec<String>, String> {
    let data = listing
        .get("data")
        .and_then(Value::as_array)
        .ok_or("the model listing has no `data`: not an OpenAI-compatible server")?;
    Ok(data
        .iter()
        .filter_map(|m| m.get("id").and_then(Value::as_str))
        .map(str::to_string)
        .collect())
}

/// Where `scripts/setup` puts the small model: `$XDG_DATA_HOME/corral/models/…` (else
/// `~/.local/share`), whether or not it is there.
pub fn embedded_model_path(var: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let data = var("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| var("HOME").map(|home| PathBuf::from(home).join(".local/share")))?;
    Some(data.join(EMBEDDED_MODEL))
}

/// The installed small model as a `gguf:` spec, when its file is there.
pub fn embedded_model(var: &dyn Fn(&str) -> Option<String>) -> Option<ModelSpec> {
    embedded_model_path(var)
        .filter(|path| path.is_file())
        .map(|path| ModelSpec::new(Provider::Gguf, path.display().to_string()))
}

/// What the embedded model is good for, for notes and `corral init`'s config.
pub const EMBEDDED_MODEL_LIMITS: &str = "SmolLM2-135M: lists and reads files and answers short \
     questions; it cannot write or fix code reliably. For real work name a bigger model (-m) or \
     run `corral init` with a model server running";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_test_variable_replaces_the_usual_ports() {
        let none = |_: &str| None;
        let usual = local_candidates(&none);
        assert_eq!(
            usual,
            [
                (Provider::Ollama, "http://127.0.0.1:11434".to_string()),
                (Provider::LlamaCpp, "http://127.0.0.1:8080/v1".to_string()),
                (Provider::LmStudio, "http://127.0.0.1:1234/v1".to_string()),
                (Provider::Vllm, "http://127.0.0.1:8000/v1".to_string()),
            ]
        );
        let set = |name: &str| (name == PROBE_PORTS_VAR).then(|| "vllm=9, ollama=7,x=1".into());
        assert_eq!(
            local_candidates(&set),
            [
                (Provider::Ollama, "http://127.0.0.1:7".to_string()),
                (Provider::Vllm, "http://127.0.0.1:9/v1".to_string()),
            ]
        );
    }

    #[test]
    fn the_embedded_model_lives_under_the_data_directory() {
        let xdg = |name: &str| (name == "XDG_DATA_HOME").then(|| "/d".to_string());
        assert_eq!(
            embedded_model_path(&xdg),
            Some(PathBuf::from(
                "/d/corral/models/SmolLM2-135M-Instruct.Q4_1.gguf"
            ))
        );
        let home = |name: &str| (name == "HOME").then(|| "/h".to_string());
        assert_eq!(
            embedded_model_path(&home),
            Some(PathBuf::from(
                "/h/.local/share/corral/models/SmolLM2-135M-Instruct.Q4_1.gguf"
            ))
        );
        assert_eq!(embedded_model(&xdg), None);
    }

    #[tokio::test]
    async fn nothing_listening_is_found_quickly_and_as_nothing() {
        let ports: Vec<u16> = (0..4)
            .map(|_| {
                std::net::TcpListener::bind("127.0.0.1:0")
                    .unwrap()
                    .local_addr()
                    .unwrap()
                    .port()
            })
            .collect();
        let list = format!(
            "ollama={},llamacpp={},lmstudio={},vllm={}",
            ports[0], ports[1], ports[2], ports[3]
        );
        let var = |name: &str| (name == PROBE_PORTS_VAR).then(|| list.clone());
        assert!(probe_all(&local_candidates(&var)).await.is_empty());
    }
}
