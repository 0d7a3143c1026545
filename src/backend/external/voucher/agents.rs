//! Where each agent program takes its key and API URL from, and what it is launched with
//! instead: claude reads `ANTHROPIC_*` variables, codex the provider its `config.toml` names.

use std::path::Path;

use super::{Api, Proxy, Voucher, VoucherError};

/// Variables that hold model API keys: none reaches claude or codex. Each gets a voucher in
/// the one variable its own configuration reads, or nothing (a login of its own).
pub const KEY_VARS: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "COPILOT_PROVIDER_API_KEY",
    "COPILOT_PROVIDER_BEARER_TOKEN",
    "COPILOT_PROVIDER_API_KEY_COMMAND",
];

/// What an agent is started with in place of a key.
#[derive(Debug, Default)]
pub struct AgentKey {
    /// Held for the session's life; dropped, the voucher is revoked.
    pub voucher: Option<Voucher>,
    /// Set in the agent's environment (the voucher, the proxy's URL).
    pub env: Vec<(String, String)>,
    /// Removed from the agent's environment: every key variable not set above.
    pub remove: Vec<String>,
    /// Extra arguments before the agent's own (codex's `-c` overrides).
    pub args: Vec<String>,
}

impl AgentKey {
    /// No voucher: the key variables are still kept from the agent.
    fn without_voucher(also: Option<&str>) -> AgentKey {
        let mut remove: Vec<String> = KEY_VARS.iter().map(|v| (*v).to_string()).collect();
        remove.extend(also.map(str::to_string));
        AgentKey {
            remove,
            ..AgentKey::default()
        }
    }

    fn set(&mut self, name: &str, value: &str) {
        self.remove.retain(|v| v != name);
        self.env.push((name.to_string(), value.to_string()));
    }
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// claude: `ANTHROPIC_API_KEY` (sent as `x-api-key`), else `ANTHROPIC_AUTH_TOKEN` (a bearer
/// token), to `ANTHROPIC_BASE_URL` or Anthropic's API. Neither set: claude uses its own
/// login, and no voucher is needed.
pub async fn claude(session: &str) -> Result<AgentKey, VoucherError> {
    let mut key = AgentKey::without_voucher(None);
    let (name, real, bearer) = match (var("ANTHROPIC_API_KEY"), var("ANTHROPIC_AUTH_TOKEN")) {
        (Some(real), _) => ("ANTHROPIC_API_KEY", real, false),
        (None, Some(real)) => ("ANTHROPIC_AUTH_TOKEN", real, true),
        (None, None) => return Ok(key),
    };
    let upstream = var("ANTHROPIC_BASE_URL").unwrap_or_else(|| "https://api.anthropic.com".into());
    let voucher =
        Proxy::shared()
            .await?
            .mint(Api::Anthropic { bearer }, &upstream, real, session)?;
    key.set(name, voucher.token());
    key.set("ANTHROPIC_BASE_URL", voucher.base_url());
    key.voucher = Some(voucher);
    Ok(key)
}

/// gemini: `GEMINI_API_KEY`, else `GOOGLE_API_KEY`, to `GOOGLE_GEMINI_BASE_URL` or Google's
/// API (sent upstream as `x-goog-api-key`). Neither set: gemini's own login (or Vertex AI's
/// credentials, which are not a key).
pub async fn gemini(session: &str) -> Result<AgentKey, VoucherError> {
    let mut key = AgentKey::without_voucher(None);
    let Some(real) = var("GEMINI_API_KEY").or_else(|| var("GOOGLE_API_KEY")) else {
        return Ok(key);
    };
    let upstream = var("GOOGLE_GEMINI_BASE_URL")
        .unwrap_or_else(|| "https://generativelanguage.googleapis.com".into());
    let voucher = Proxy::shared()
        .await?
        .mint(Api::Gemini, &upstream, real, session)?;
    key.set("GEMINI_API_KEY", voucher.token());
    key.set("GOOGLE_GEMINI_BASE_URL", voucher.base_url());
    key.voucher = Some(voucher);
    Ok(key)
}

/// An agent that reads an OpenAI-compatible key from `key_var` and its base URL from
/// `url_var` (qwen-code: `OPENAI_API_KEY`, `OPENAI_BASE_URL`). No key: nothing to vouch for.
pub async fn openai_compatible(
    session: &str,
    key_var: &str,
    url_var: &str,
    default_url: Option<&str>,
) -> Result<AgentKey, VoucherError> {
    let mut key = AgentKey::without_voucher(None);
    let Some(real) = var(key_var) else {
        return Ok(key);
    };
    let upstream = var(url_var)
        .or_else(|| default_url.map(str::to_string))
        .unwrap_or_else(|| "https://api.openai.com/v1".into());
    let voucher = Proxy::shared()
        .await?
        .mint(Api::OpenAi, &upstream, real, session)?;
    key.set(key_var, voucher.token());
    key.set(url_var, voucher.base_url());
    key.voucher = Some(voucher);
    Ok(key)
}

/// copilot with a provider of its own (BYOK: `COPILOT_PROVIDER_BASE_URL` with
/// `COPILOT_PROVIDER_API_KEY` or `…_BEARER_TOKEN`; `COPILOT_PROVIDER_TYPE` says which API).
/// Without one, copilot uses its GitHub login, which is not a model key.
pub async fn copilot(session: &str) -> Result<AgentKey, VoucherError> {
    let mut key = AgentKey::without_voucher(None);
    let Some(upstream) = var("COPILOT_PROVIDER_BASE_URL") else {
        return Ok(key);
    };
    let (name, real, bearer) = match (
        var("COPILOT_PROVIDER_BEARER_TOKEN"),
        var("COPILOT_PROVIDER_API_KEY"),
    ) {
        (Some(real), _) => ("COPILOT_PROVIDER_BEARER_TOKEN", real, true),
        (None, Some(real)) => ("COPILOT_PROVIDER_API_KEY", real, false),
        (None, None) => return Ok(key),
    };
    let api = match var("COPILOT_PROVIDER_TYPE").as_deref() {
        Some("anthropic") => Api::Anthropic { bearer },
        _ => Api::OpenAi,
    };
    let voucher = Proxy::shared().await?.mint(api, &upstream, real, session)?;
    key.set(name, voucher.token());
    key.set("COPILOT_PROVIDER_BASE_URL", voucher.base_url());
    key.voucher = Some(voucher);
    Ok(key)
}

/// The provider codex's `config.toml` selects, as far as keys go.
#[derive(Debug, PartialEq)]
enum CodexProvider {
    /// The built-in OpenAI provider (`OPENAI_API_KEY`, `OPENAI_BASE_URL`).
    OpenAi,
    /// `[model_providers.<name>]`.
    Custom {
        name: String,
        base_url: Option<String>,
        env_key: Option<String>,
    },
    /// Another built-in (`oss`, `ollama`, `lmstudio`: local servers with no key) or a name
    /// codex would not find: nothing to vouch for.
    Other,
}

/// codex's built-in providers; a `[model_providers.<name>]` table of the same name is ignored
/// by codex, so it is here too.
const CODEX_BUILT_INS: &[&str] = &["openai", "oss", "ollama", "lmstudio", "ollama-chat"];

/// What codex will use: the active profile's `model_provider`, else the top-level one, else
/// OpenAI. Returns the active profile's name too (its `model_provider` wins over a top-level
/// override).
fn codex_provider(config: &str) -> (CodexProvider, Option<String>) {
    let table: toml::Table = config.parse().unwrap_or_default();
    let profile = table
        .get("profile")
        .and_then(|v| v.as_str())
        .map(str::to_string);
    let from_profile = profile.as_deref().and_then(|p| {
        table
            .get("profiles")?
            .get(p)?
            .get("model_provider")?
            .as_str()
    });
    let name = from_profile
        .or_else(|| table.get("model_provider").and_then(|v| v.as_str()))
        .unwrap_or("openai");
    let custom = table
        .get("model_providers")
        .and_then(|p| p.get(name))
        .and_then(|p| p.as_table());
    let provider = match (name, custom) {
        ("openai", _) => CodexProvider::OpenAi,
        (name, _) if CODEX_BUILT_INS.contains(&name) => CodexProvider::Other,
        (name, Some(custom)) => {
            let field = |key: &str| custom.get(key).and_then(|v| v.as_str()).map(str::to_string);
            CodexProvider::Custom {
                name: name.to_string(),
                base_url: field("base_url"),
                env_key: field("env_key"),
            }
        }
        (_, None) => CodexProvider::Other,
    };
    (provider, profile)
}

/// A name usable in a dotted `-c` key as it is.
fn bare_key(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// codex: the provider its config selects (its active profile's, else the top-level one).
/// A custom provider's `env_key` variable gets the voucher and its `base_url` the proxy
/// (`-c model_providers.<name>.base_url=…`); the built-in OpenAI provider (`OPENAI_API_KEY`,
/// `OPENAI_BASE_URL`) is replaced by an equal one pointed at the proxy. A provider with no key
/// variable, one whose variable is unset, or a local built-in needs no voucher: codex gets no
/// key at all.
pub async fn codex(session: &str, codex_home: &Path) -> Result<AgentKey, VoucherError> {
    let config = std::fs::read_to_string(codex_home.join("config.toml")).unwrap_or_default();
    let (provider, profile) = codex_provider(&config);
    match provider {
        CodexProvider::Other => Ok(AgentKey::without_voucher(None)),
        CodexProvider::Custom {
            name,
            base_url,
            env_key,
        } => {
            let mut key = AgentKey::without_voucher(env_key.as_deref());
            let (Some(env_key), Some(upstream)) = (env_key, base_url) else {
                return Ok(key);
            };
            let Some(real) = var(&env_key) else {
                return Ok(key);
            };
            if !bare_key(&name) {
                tracing::warn!(provider = %name, "codex's provider name cannot be overridden: no voucher, codex gets no key");
                return Ok(key);
            }
            let voucher = Proxy::shared()
                .await?
                .mint(Api::OpenAi, &upstream, real, session)?;
            key.args = vec![
                "-c".into(),
                format!(
                    "model_providers.{name}.base_url={}",
                    toml_string(voucher.base_url())
                ),
            ];
            key.set(&env_key, voucher.token());
            key.voucher = Some(voucher);
            Ok(key)
        }
        CodexProvider::OpenAi => {
            let mut key = AgentKey::without_voucher(None);
            key.remove.push("OPENAI_BASE_URL".into());
            let Some(real) = var("OPENAI_API_KEY") else {
                return Ok(key);
            };
            // The active profile names the provider over a top-level override: it is
            // overridden too.
            let mut selects = vec!["model_provider".to_string()];
            match profile.as_deref() {
                Some(p) if bare_key(p) => selects.push(format!("profiles.{p}.model_provider")),
                Some(_) => return Ok(key),
                None => {}
            }
            let upstream =
                var("OPENAI_BASE_URL").unwrap_or_else(|| "https://api.openai.com/v1".into());
            let voucher = Proxy::shared()
                .await?
                .mint(Api::OpenAi, &upstream, real, session)?;
            let base = toml_string(voucher.base_url());
            key.args = selects
                .into_iter()
                .map(|select| format!("{select}=\"corral-openai\""))
                .chain([
                    "model_providers.corral-openai.name=\"OpenAI (through corral)\"".to_string(),
                    format!("model_providers.corral-openai.base_url={base}"),
                    "model_providers.corral-openai.env_key=\"OPENAI_API_KEY\"".to_string(),
                    "model_providers.corral-openai.wire_api=\"responses\"".to_string(),
                ])
                .flat_map(|value| ["-c".to_string(), value])
                .collect();
            key.set("OPENAI_API_KEY", voucher.token());
            key.voucher = Some(voucher);
            Ok(key)
        }
    }
}

/// A TOML basic string.
fn toml_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codex_provider_is_read_as_codex_reads_it() {
        let custom = "model_provider = \"fake\"\n[model_providers.fake]\nbase_url = \"http://127.0.0.1:9/v1\"\nenv_key = \"FAKE_API_KEY\"\n";
        let fake = CodexProvider::Custom {
            name: "fake".into(),
            base_url: Some("http://127.0.0.1:9/v1".into()),
            env_key: Some("FAKE_API_KEY".into()),
        };
        assert_eq!(codex_provider(custom), (fake, None));
        for builtin in ["", "model = \"gpt-5\"\n", "not toml at all [[["] {
            assert_eq!(codex_provider(builtin), (CodexProvider::OpenAi, None));
        }
        // The active profile's provider wins over the top-level one.
        let profiled = format!(
            "profile = \"work\"\n{custom}[profiles.work]\nmodel_provider = \"azure\"\n\
             [model_providers.azure]\nbase_url = \"https://x/openai\"\nenv_key = \"AZURE_KEY\"\n"
        );
        let (provider, profile) = codex_provider(&profiled);
        assert_eq!(profile.as_deref(), Some("work"));
        assert!(
            matches!(&provider, CodexProvider::Custom { name, env_key, .. }
                if name == "azure" && env_key.as_deref() == Some("AZURE_KEY")),
            "{provider:?}"
        );
        // Local built-ins are not OpenAI, and a table cannot take a built-in's name.
        for local in ["oss", "ollama", "lmstudio"] {
            let config = format!("model_provider = \"{local}\"\n");
            assert_eq!(codex_provider(&config).0, CodexProvider::Other, "{local}");
        }
        let shadow = "model_provider = \"openai\"\n[model_providers.openai]\nbase_url = \"http://evil/v1\"\n";
        assert_eq!(codex_provider(shadow).0, CodexProvider::OpenAi);
        assert_eq!(
            codex_provider("model_provider = \"nowhere\"\n").0,
            CodexProvider::Other
        );
        let keyless = "model_provider = \"local\"\n[model_providers.local]\nbase_url = \"http://127.0.0.1:11434/v1\"\n";
        assert!(matches!(
            codex_provider(keyless).0,
            CodexProvider::Custom { env_key: None, .. }
        ));
    }

    #[test]
    fn a_value_is_one_toml_string() {
        assert_eq!(
            toml_string("http://127.0.0.1:1/v1"),
            "\"http://127.0.0.1:1/v1\""
        );
        let hostile = "a\"\nb\\";
        let parsed: toml::Table = format!("x = {}", toml_string(hostile)).parse().unwrap();
        assert_eq!(parsed["x"].as_str(), Some(hostile));
    }

    #[test]
    fn only_bare_provider_names_go_in_a_dotted_key() {
        assert!(bare_key("fake") && bare_key("my-provider_2"));
        for bad in ["", "a.b", "a b", "a\"b", "x=1"] {
            assert!(!bare_key(bad), "{bad}");
        }
    }

    #[test]
    fn without_a_voucher_no_key_variable_reaches_the_agent() {
        let key = AgentKey::without_voucher(Some("FAKE_API_KEY"));
        for var in KEY_VARS.iter().chain(&["FAKE_API_KEY"]) {
            assert!(key.remove.iter().any(|v| v == var), "{var}");
        }
        let mut key = key;
        key.set("OPENAI_API_KEY", "corral-voucher-x");
        assert!(!key.remove.iter().any(|v| v == "OPENAI_API_KEY"));
    }
}
