//! Finding a model when none was named: a running Ollama with an installed model that has
//! the `tools` capability.

use reqwest::header::HeaderMap;
use serde_json::{Value, json};

use super::error::ModelError;
use super::http::{self, HttpSettings};
use super::ollama::capabilities_of;

#[derive(Debug, thiserror::Error)]
pub enum DetectError {
    #[error(
        "no model given (--model or `model` in the config) and no Ollama server answered at \
         {url}: {reason}. Start one (`ollama serve`, then `ollama pull qwen3`) or name a model, \
         e.g. `--model llamacpp:local --base-url http://127.0.0.1:8080/v1`"
    )]
    NoServer { url: String, reason: String },
    #[error(
        "no model given and the Ollama server at {url} has no installed model with the `tools` \
         capability (installed: {installed}). Pull one (`ollama pull qwen3`) or pass --model"
    )]
    NoToolModel { url: String, installed: String },
}

/// The first installed model that can call tools, as an `ollama:` model name.
pub async fn find_ollama_tool_model(
    base_url: &str,
    settings: &HttpSettings,
) -> Result<String, DetectError> {
    let no_server = |e: ModelError| DetectError::NoServer {
        url: base_url.to_string(),
        reason: e.to_string(),
    };
    let client = http::build_client(settings).map_err(no_server)?;
    let tags = http::get_json(
        &client,
        &format!("{base_url}/api/tags"),
        &HeaderMap::new(),
        settings,
    )
    .await
    .map_err(no_server)?;
    let models: Vec<&Value> = tags
        .get("models")
        .and_then(Value::as_array)
        .map(|m| m.iter().collect())
        .unwrap_or_default();
    let mut names = Vec::new();
    for model in models {
        let Some(name) = model
            .get("name")
            .or_else(|| model.get("model"))
            .and_then(Value::as_str)
        else {
            continue;
        };
        names.push(name.to_string());
        // Newer servers list capabilities in /api/tags; older ones only in /api/show.
        let capabilities = match model.get("capabilities") {
            Some(_) => capabilities_of(model),
            None => http::post_json_once(
                &client,
                &format!("{base_url}/api/show"),
                &HeaderMap::new(),
                &json!({ "model": name }),
                settings,
            )
            .await
            .map(|shown| capabilities_of(&shown))
            .unwrap_or_default(),
        };
        if capabilities.iter().any(|c| c == "tools") {
            return Ok(name.to_string());
        }
    }
    Err(DetectError::NoToolModel {
        url: base_url.to_string(),
        installed: if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        },
    })
}
