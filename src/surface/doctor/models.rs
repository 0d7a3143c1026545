//! The model lines: the configured default model checked for what it really needs (a server
//! that answers; for a `gguf:` model the file and the llama-server program), the small model
//! `scripts/setup` installs, and each usual local server probed by its own API.

use std::time::Duration;

use super::{Report, State};
use crate::config::Config;
use crate::model::discover::{self, Found};
use crate::model::{self, ModelChoice, ModelSpec, Provider};
use crate::surface::safe_text::escape_line;

/// Each network check; a machine that needs longer is as good as unreachable here.
const CHECK_TIMEOUT: Duration = Duration::from_secs(3);

pub(super) async fn models(report: &mut Report, config: &Config) {
    let env = |name: &str| std::env::var(name).ok();
    match &config.model {
        None => report.line(
            State::Ok,
            "default model",
            "none configured: a running server's tool-capable model, else the model \
             scripts/setup installs (`corral init` writes one into the config)",
        ),
        Some(ModelChoice::External(spec)) => report.line(
            State::Ok,
            "default model",
            format!("{spec} (an external agent)"),
        ),
        Some(ModelChoice::Native(spec)) if spec.provider == Provider::Gguf => {
            let (state, detail) = gguf(spec, config);
            report.line(state, "default model", detail);
        }
        Some(ModelChoice::Native(spec)) => {
            let provider_base = config.provider(spec.provider).base_url;
            let (base, _) =
                model::resolve_base_url(spec.provider, None, provider_base.as_deref(), &env);
            // The spec may be a server's text (a model name `corral init` wrote).
            let what = escape_line(&format!("default model {spec}"));
            match reqwest::Client::builder().timeout(CHECK_TIMEOUT).build() {
                Ok(client) => reach(report, &client, &what, &base, probe_path(spec.provider)).await,
                Err(e) => report.line(State::Warn, &what, format!("no HTTP client: {e}")),
            }
        }
    }
    match discover::embedded_model(&env) {
        Some(spec) => {
            let (state, detail) = gguf(&spec, config);
            report.line(state, "local model (scripts/setup)", detail);
        }
        None => report.line(
            State::Missing,
            "local model (scripts/setup)",
            format!(
                "not installed{}: run scripts/setup (SmolLM2-135M, 98 MB, and llama.cpp's server)",
                discover::embedded_model_path(&env)
                    .map(|p| format!(" at {}", p.display()))
                    .unwrap_or_default()
            ),
        ),
    }
    let mut candidates = discover::local_candidates(&env);
    // Ollama where sessions would look for it (config, OLLAMA_HOST), not only its usual port.
    let ollama_base = config.provider(Provider::Ollama).base_url;
    let (ollama, source) =
        model::resolve_base_url(Provider::Ollama, None, ollama_base.as_deref(), &env);
    if source != model::BaseUrlSource::Default {
        for (provider, base) in &mut candidates {
            if *provider == Provider::Ollama {
                base.clone_from(&ollama);
            }
        }
    }
    let probes = candidates
        .iter()
        .map(|(provider, base)| discover::probe(*provider, base));
    let results = futures_util::future::join_all(probes).await;
    for ((provider, base), result) in candidates.iter().zip(results) {
        let what = format!("model server {provider}");
        match result {
            Ok(found) => report.line(State::Ok, &what, server_detail(&found)),
            Err(why) => report.line(
                State::Missing,
                &what,
                format!("{base}: {}", escape_line(&why)),
            ),
        }
    }
}

fn server_detail(found: &Found) -> String {
    let tools = if found.tool_models.is_empty() {
        match found.provider {
            Provider::Vllm => "tool calling not shown by its API".to_string(),
            _ => "none calls tools".to_string(),
        }
    } else {
        format!("calls tools: {}", found.tool_models.join(", "))
    };
    escape_line(&format!(
        "{} answers: {} model{} ({}; {tools})",
        found.base_url,
        found.models.len(),
        if found.models.len() == 1 { "" } else { "s" },
        model::excerpt(&found.models.join(", "), 160),
    ))
}

/// A `gguf:` model needs its file and the server program corral starts for it.
fn gguf(spec: &ModelSpec, config: &Config) -> (State, String) {
    let path = std::path::Path::new(&spec.model);
    let file = match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => Ok(meta.len()),
        Ok(_) => Err("is not a file".to_string()),
        Err(e) => Err(e.to_string()),
    };
    let server = model::find_local_server(&config.local.settings());
    let shown = escape_line(&spec.to_string());
    match (file, server) {
        (Ok(bytes), Ok(program)) => (
            State::Ok,
            format!(
                "{shown} (served by corral: {}, model file {} MB)",
                escape_line(&program.display().to_string()),
                bytes / 1_000_000
            ),
        ),
        (file, server) => {
            let mut missing = Vec::new();
            if let Err(why) = file {
                missing.push(format!(
                    "the model file is missing ({why}): run scripts/setup, or point `model` at \
                     a .gguf file"
                ));
            }
            if let Err(why) = server {
                missing.push(escape_line(&why));
            }
            (State::Missing, format!("{shown}: {}", missing.join("; ")))
        }
    }
}

fn probe_path(provider: Provider) -> &'static str {
    match provider.wire() {
        model::Wire::OllamaNative => "/api/version",
        model::Wire::OpenAiChat => "/models",
    }
}

/// Any HTTP answer means the server is there (an API key may still be missing).
async fn reach(report: &mut Report, client: &reqwest::Client, what: &str, base: &str, path: &str) {
    match client.get(format!("{base}{path}")).send().await {
        Ok(response) => report.line(
            State::Ok,
            what,
            format!("{base} answers ({})", response.status()),
        ),
        Err(e) => {
            let why = if e.is_timeout() {
                "no answer".to_owned()
            } else if e.is_connect() {
                "nothing listens there".to_owned()
            } else {
                e.to_string()
            };
            report.line(State::Missing, what, format!("{base}: {why}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_closed_port_is_missing() {
        let mut report = Report(Vec::new());
        let client = reqwest::Client::new();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        drop(listener);
        reach(&mut report, &client, "ollama", &base, "/api/version").await;
        assert!(
            report
                .text()
                .starts_with("missing  ollama: http://127.0.0.1:")
        );
    }

    #[test]
    fn a_gguf_model_without_its_file_or_server_is_missing_and_says_how_to_install() {
        let config = Config {
            local: crate::config::Local {
                server_command: Some("/nonexistent/llama-server --x".into()),
                ..Default::default()
            },
            ..Config::default()
        };
        let spec = ModelSpec::new(Provider::Gguf, "/nonexistent/m.gguf");
        let (state, detail) = gguf(&spec, &config);
        assert_eq!(state, State::Missing);
        assert!(detail.contains("the model file is missing"), "{detail}");
        assert!(detail.contains("scripts/setup"), "{detail}");
        assert!(detail.contains("\"/nonexistent/llama-server\""), "{detail}");
    }
}
