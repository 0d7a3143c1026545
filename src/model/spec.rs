//! Model spec strings (`ollama:qwen3`, `llamacpp:local`, …) and where each provider lives.
//!
//! The base URL is resolved in one order on every surface: an explicit override (`--base-url`),
//! else the config file, else the variable the ecosystem already uses (`OLLAMA_HOST`,
//! `OPENAI_BASE_URL`), else the provider's default.

use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Provider {
    Ollama,
    OpenAi,
    Mlx,
    LlamaCpp,
    LmStudio,
    Vllm,
    /// A GGUF file corral serves itself with llama.cpp.
    Gguf,
}

/// Which wire format a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    OllamaNative,
    OpenAiChat,
}

impl Provider {
    pub const ALL: [Provider; 7] = [
        Provider::Ollama,
        Provider::OpenAi,
        Provider::Mlx,
        Provider::LlamaCpp,
        Provider::LmStudio,
        Provider::Vllm,
        Provider::Gguf,
    ];

    pub fn prefix(self) -> &'static str {
        match self {
            Provider::Ollama => "ollama",
            Provider::OpenAi => "openai",
            Provider::Mlx => "mlx",
            Provider::LlamaCpp => "llamacpp",
            Provider::LmStudio => "lmstudio",
            Provider::Vllm => "vllm",
            Provider::Gguf => "gguf",
        }
    }

    pub fn wire(self) -> Wire {
        match self {
            Provider::Ollama => Wire::OllamaNative,
            _ => Wire::OpenAiChat,
        }
    }

    pub fn default_base_url(self) -> &'static str {
        match self {
            Provider::Ollama => "http://127.0.0.1:11434",
            Provider::OpenAi => "https://api.openai.com/v1",
            Provider::Mlx | Provider::LlamaCpp => "http://127.0.0.1:8080/v1",
            Provider::LmStudio => "http://127.0.0.1:1234/v1",
            Provider::Vllm => "http://127.0.0.1:8000/v1",
            // Started by corral on a free port; never resolved from here.
            Provider::Gguf => "http://127.0.0.1:0/v1",
        }
    }

    /// The environment variable that already names this provider's address.
    pub fn base_url_env(self) -> &'static str {
        match self {
            Provider::Ollama => "OLLAMA_HOST",
            _ => "OPENAI_BASE_URL",
        }
    }

    /// The environment variable holding an API key, where the provider needs one.
    pub fn api_key_env(self) -> Option<&'static str> {
        match self {
            Provider::OpenAi => Some("OPENAI_API_KEY"),
            _ => None,
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.prefix())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSpec {
    pub provider: Provider,
    /// The model name as the server knows it (may itself contain colons: `qwen3:8b`).
    pub model: String,
    /// The text named no provider (`-m qwen3`): `provider` is Ollama until the session's
    /// config says otherwise (see [`ModelSpec::with_default_provider`]).
    pub provider_implied: bool,
}

impl ModelSpec {
    /// A spec that names its provider.
    pub fn new(provider: Provider, model: impl Into<String>) -> ModelSpec {
        ModelSpec {
            provider,
            model: model.into(),
            provider_implied: false,
        }
    }

    /// A bare model name given the provider it runs on; a spec that named one stays as it is.
    pub fn with_default_provider(self, provider: Provider) -> ModelSpec {
        if self.provider_implied {
            ModelSpec::new(provider, self.model)
        } else {
            self
        }
    }
}

/// Every form a model text may take, for messages and help: the native providers (from
/// [`Provider::ALL`], so a new one is listed by itself) and the external agents.
pub fn known_specs() -> String {
    let native: Vec<String> = Provider::ALL
        .iter()
        .map(|p| match p {
            Provider::Ollama => "ollama:<tag>".to_string(),
            Provider::Gguf => "gguf:<path-to.gguf>".to_string(),
            p => format!("{}:<model>", p.prefix()),
        })
        .collect();
    format!(
        "{}, claude[:<model>], codex[:<model>], acp:opencode|gemini|claude[:<model>], \
         acp:cmd=<command line>, or a bare model name (qwen3, qwen3:8b) for the default \
         provider (Ollama, else the one the config's [providers] names)",
        native.join(", ")
    )
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("unknown model spec {0:?}: expected {list}", list = known_specs())]
    Unknown(String),
    #[error("model spec {0:?} names no model after the provider prefix")]
    Empty(String),
}

impl FromStr for ModelSpec {
    type Err = SpecError;

    fn from_str(text: &str) -> Result<Self, SpecError> {
        let text = text.trim();
        let named = text.split_once(':').and_then(|(prefix, model)| {
            Provider::ALL
                .into_iter()
                .find(|p| p.prefix().eq_ignore_ascii_case(prefix))
                .map(|provider| (provider, model))
        });
        match named {
            Some((_, model)) if model.trim().is_empty() => Err(SpecError::Empty(text.to_string())),
            Some((provider, model)) => Ok(ModelSpec::new(provider, model.trim())),
            None if is_bare_model_name(text) => Ok(ModelSpec {
                provider: Provider::Ollama,
                model: text.to_string(),
                provider_implied: true,
            }),
            None => Err(SpecError::Unknown(text.to_string())),
        }
    }
}

/// A model name as servers spell them: `qwen3`, `qwen3:8b`, `hf.co/org/repo:Q4_K_M`. At most
/// one `:` (Ollama's tag) with no `/` after it, so a URL or a mistyped spec with more parts is
/// refused with the list of forms rather than sent to a server as a name.
fn is_bare_model_name(text: &str) -> bool {
    let (name, tag) = text.split_once(':').unwrap_or((text, ""));
    let fits = |part: &str, extra: &str| {
        part.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c) || extra.contains(c))
    };
    !name.is_empty()
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && fits(name, "/")
        && fits(tag, "")
        // A `:` must be followed by a tag.
        && (tag.is_empty() != text.contains(':'))
}

impl fmt::Display for ModelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.provider, self.model)
    }
}

/// Where a base URL came from, for messages such as "cannot reach … (from OLLAMA_HOST)".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BaseUrlSource {
    Flag,
    Config,
    Env(&'static str),
    Default,
}

impl fmt::Display for BaseUrlSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BaseUrlSource::Flag => f.write_str("--base-url"),
            BaseUrlSource::Config => f.write_str("config file"),
            BaseUrlSource::Env(var) => f.write_str(var),
            BaseUrlSource::Default => f.write_str("provider default"),
        }
    }
}

/// Resolve the base URL in the documented order. `env` is a lookup so tests stay hermetic.
pub fn resolve_base_url(
    provider: Provider,
    flag: Option<&str>,
    config: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> (String, BaseUrlSource) {
    let from_env = env(provider.base_url_env()).filter(|v| !v.trim().is_empty());
    let (raw, source) = if let Some(url) = flag {
        (url.to_string(), BaseUrlSource::Flag)
    } else if let Some(url) = config {
        (url.to_string(), BaseUrlSource::Config)
    } else if let Some(url) = from_env {
        (url, BaseUrlSource::Env(provider.base_url_env()))
    } else {
        (
            provider.default_base_url().to_string(),
            BaseUrlSource::Default,
        )
    };
    (normalize_base_url(provider, &raw), source)
}

/// The API key for a request to `base_url`, given the key from the environment and the base
/// URL it was configured for (resolved without any override: config, environment, provider
/// default). A key goes only where it was meant to go: a request that names another server
/// gets none, so whoever chooses the base URL cannot collect the key. Both URLs are
/// normalized by [`resolve_base_url`]; any difference at all means another server.
pub fn bound_api_key(key: Option<String>, configured_for: &str, base_url: &str) -> Option<String> {
    let key = key.filter(|k| !k.is_empty())?;
    if configured_for == base_url {
        Some(key)
    } else {
        tracing::info!(
            base_url,
            configured_for,
            "not sending the API key: it is configured for another base URL"
        );
        None
    }
}

/// OpenAI's own API host: the one endpoint a request is refused without a key.
const OPENAI_API_HOST: &str = "api.openai.com";

/// Whether a request to `base_url` cannot go without an API key: only OpenAI's own endpoint.
/// Any other server an `openai:` spec is pointed at (`OPENAI_BASE_URL`, `--base-url`, the
/// config) is a local or self-hosted one that may take none; if it does want one, its own 401
/// says so. A URL that does not parse demands nothing here: connecting reports it.
pub fn requires_api_key(provider: Provider, base_url: &str) -> bool {
    provider == Provider::OpenAi
        && reqwest::Url::parse(base_url)
            .ok()
            .and_then(|u| {
                u.host_str()
                    .map(|h| h.eq_ignore_ascii_case(OPENAI_API_HOST))
            })
            .unwrap_or(false)
}

/// Refuses a base URL that is not an http(s) URL (after the same normalization requests get:
/// a bare `host:port` means `http://host:port`). `field` names the setting in the error.
pub fn check_base_url(field: &str, raw: &str) -> Result<(), String> {
    let trimmed = raw.trim();
    let url = if trimmed.contains("://") {
        trimmed.to_string()
    } else {
        format!("http://{trimmed}")
    };
    let problem = match reqwest::Url::parse(&url) {
        Err(e) => Some(e.to_string()),
        Ok(u) if !matches!(u.scheme(), "http" | "https") => {
            Some(format!("the scheme is {:?}, not http or https", u.scheme()))
        }
        Ok(u) if u.host_str().is_none_or(str::is_empty) => Some("it names no host".into()),
        Ok(u) if u.query().is_some() || u.fragment().is_some() => {
            Some("it has a query or fragment; paths are appended to it".into())
        }
        Ok(_) => None,
    };
    match problem {
        None => Ok(()),
        Some(why) => Err(format!("{field} {raw:?} is not an http(s) URL: {why}")),
    }
}

/// `OLLAMA_HOST` is often `0.0.0.0:11434` or a bare host: give it a scheme and a reachable
/// address. Trailing slashes go so paths can be appended.
fn normalize_base_url(provider: Provider, raw: &str) -> String {
    let raw = raw.trim().trim_end_matches('/');
    let mut url = if raw.contains("://") {
        raw.to_string()
    } else {
        format!("http://{raw}")
    };
    if provider == Provider::Ollama {
        url = url.replace("://0.0.0.0", "://127.0.0.1");
        let has_port = url
            .rsplit_once(':')
            .is_some_and(|(_, port)| port.chars().all(|c| c.is_ascii_digit()));
        if !has_port {
            url.push_str(":11434");
        }
    }
    url
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_must_be_http() {
        for good in [
            "http://127.0.0.1:8080/v1",
            "https://api.openai.com/v1/",
            "localhost:11434",
        ] {
            assert_eq!(check_base_url("base_url", good), Ok(()), "{good}");
        }
        for bad in [
            "file:///etc/passwd",
            "ftp://host/x",
            "unix:///run/x.sock",
            "",
            "http://",
            "http://[::1",
            "http://h/v1?x=1",
            "javascript:alert(1)",
        ] {
            let e = check_base_url("base_url", bad).expect_err(bad);
            assert!(e.starts_with("base_url "), "{bad}: {e}");
        }
    }

    #[test]
    fn parses_every_provider_and_keeps_colons_in_the_model() {
        let spec: ModelSpec = "ollama:qwen3:8b".parse().unwrap();
        assert_eq!(spec.provider, Provider::Ollama);
        assert_eq!(spec.model, "qwen3:8b");
        for p in Provider::ALL {
            let spec: ModelSpec = format!("{}:m", p.prefix()).parse().unwrap();
            assert_eq!(spec.provider, p);
        }
    }

    #[test]
    fn rejects_unknown_and_empty_specs() {
        for text in [
            "a:b:c",
            "http://host/v1",
            "foo bar",
            ":x",
            "qwen3:",
            "/abs/path",
        ] {
            let e = text.parse::<ModelSpec>().unwrap_err();
            assert!(matches!(e, SpecError::Unknown(_)), "{text}: {e:?}");
            let message = e.to_string();
            for form in [
                "ollama:",
                "openai:",
                "mlx:",
                "llamacpp:",
                "lmstudio:",
                "vllm:",
                "gguf:",
            ]
            .into_iter()
            .chain(["claude", "codex", "acp:opencode", "acp:cmd="])
            {
                assert!(message.contains(form), "{form} not in {message}");
            }
        }
        assert!(matches!(
            "ollama:".parse::<ModelSpec>(),
            Err(SpecError::Empty(_))
        ));
    }

    #[test]
    fn a_bare_name_is_the_default_providers_model() {
        for text in ["qwen3", "qwen3:8b", "hf.co/org/repo:Q4_K_M", "gpt-4.1"] {
            let spec: ModelSpec = text.parse().unwrap();
            assert_eq!(
                (spec.provider, spec.model.as_str(), spec.provider_implied),
                (Provider::Ollama, text, true)
            );
            let vllm = spec.with_default_provider(Provider::Vllm);
            assert_eq!(vllm, ModelSpec::new(Provider::Vllm, text));
        }
        let named: ModelSpec = "ollama:qwen3".parse().unwrap();
        assert!(!named.provider_implied);
        assert_eq!(named.clone().with_default_provider(Provider::Vllm), named);
    }

    #[test]
    fn a_key_goes_only_to_the_base_url_it_was_configured_for() {
        let none = |_: &str| None;
        let (configured, _) = resolve_base_url(Provider::OpenAi, None, None, &none);
        let key = || Some("sk-1".to_string());
        assert_eq!(bound_api_key(key(), &configured, &configured), key());
        let (same, _) = resolve_base_url(
            Provider::OpenAi,
            Some("https://api.openai.com/v1/"),
            None,
            &none,
        );
        assert_eq!(bound_api_key(key(), &configured, &same), key());
        for other in [
            "http://127.0.0.1:9/v1",
            "https://api.openai.com.evil.example/v1",
            "https://api.openai.com/v1@evil.example",
        ] {
            let (url, _) = resolve_base_url(Provider::OpenAi, Some(other), None, &none);
            assert_eq!(bound_api_key(key(), &configured, &url), None, "{other}");
        }
        assert_eq!(bound_api_key(Some(String::new()), "a", "a"), None);
    }

    #[test]
    fn only_openais_own_endpoint_demands_a_key() {
        let none = |_: &str| None;
        let (default, _) = resolve_base_url(Provider::OpenAi, None, None, &none);
        assert!(requires_api_key(Provider::OpenAi, &default));
        assert!(requires_api_key(
            Provider::OpenAi,
            "https://API.openai.com/v1"
        ));
        let local = |k: &str| (k == "OPENAI_BASE_URL").then(|| "http://127.0.0.1:9/v1".to_string());
        let (from_env, source) = resolve_base_url(Provider::OpenAi, None, None, &local);
        assert_eq!(source, BaseUrlSource::Env("OPENAI_BASE_URL"));
        assert!(!requires_api_key(Provider::OpenAi, &from_env));
        for other in [
            "https://api.openai.com.evil.example/v1",
            "http://localhost:8080/v1",
            "not a url",
        ] {
            assert!(!requires_api_key(Provider::OpenAi, other), "{other}");
        }
        assert!(!requires_api_key(Provider::Vllm, &default));
    }

    #[test]
    fn base_url_order_is_flag_config_env_default() {
        let env = |k: &str| (k == "OLLAMA_HOST").then(|| "0.0.0.0".to_string());
        let none = |_: &str| None;
        assert_eq!(
            resolve_base_url(
                Provider::Ollama,
                Some("http://a:1/"),
                Some("http://b:2"),
                &env
            ),
            ("http://a:1".into(), BaseUrlSource::Flag)
        );
        assert_eq!(
            resolve_base_url(Provider::Ollama, None, Some("http://b:2"), &env),
            ("http://b:2".into(), BaseUrlSource::Config)
        );
        assert_eq!(
            resolve_base_url(Provider::Ollama, None, None, &env),
            (
                "http://127.0.0.1:11434".into(),
                BaseUrlSource::Env("OLLAMA_HOST")
            )
        );
        assert_eq!(
            resolve_base_url(Provider::LmStudio, None, None, &none),
            ("http://127.0.0.1:1234/v1".into(), BaseUrlSource::Default)
        );
        let openai_env = |k: &str| (k == "OPENAI_BASE_URL").then(|| "http://x:9/v1".to_string());
        assert_eq!(
            resolve_base_url(Provider::Vllm, None, None, &openai_env).0,
            "http://x:9/v1"
        );
    }
}
