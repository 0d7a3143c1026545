//! The secrets corral itself holds, beyond those its environment names as secrets: they are
//! redacted from everything tools print, in case a tool finds one (a file it may read, a
//! process that shares it).

use std::path::Path;

use crate::config::Config;
use crate::model::Provider;

/// `(name shown in the redaction, value)` for: the server's JWT secret from the config, from
/// `CORRAL_JWT_SECRET` and from the file `serve` generates; the variables holding API keys
/// (each provider's default and any `api_key_env` the config names, whatever their names).
pub(super) fn held(
    config: &Config,
    env: impl Fn(&str) -> Option<String>,
    secret_file: Option<&Path>,
) -> Vec<(String, String)> {
    let mut secrets = Vec::new();
    if let Some(secret) = &config.server.jwt_secret {
        secrets.push(("server.jwt_secret".to_string(), secret.clone()));
    }
    let mut variables: Vec<String> = vec!["CORRAL_JWT_SECRET".to_string()];
    variables.extend(
        Provider::ALL
            .iter()
            .filter_map(|p| p.api_key_env().map(str::to_string)),
    );
    variables.extend(
        config
            .providers
            .values()
            .filter_map(|p| p.api_key_env.clone()),
    );
    variables.sort();
    variables.dedup();
    for name in variables {
        if let Some(value) = env(&name) {
            secrets.push((name, value));
        }
    }
    if let Some(file) = secret_file
        && let Ok(bytes) = std::fs::read(file)
        && let Ok(text) = String::from_utf8(bytes)
    {
        // `load_secret` reads it trimmed; the tool may print it either way.
        secrets.push(("jwt-secret file".to_string(), text.trim().to_string()));
    }
    secrets.retain(|(_, value)| !value.trim().is_empty());
    secrets
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_keys_named_variables_and_the_secret_file_are_held() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("jwt-secret");
        std::fs::write(&file, "file-secret-0123456789\n").unwrap();
        let config: Config = toml::from_str(
            "[server]\njwt_secret = \"configured-secret\"\n\
             [providers.llamacpp]\napi_key_env = \"LLAMA_ACCESS\"\n",
        )
        .unwrap();
        let env = |name: &str| match name {
            "LLAMA_ACCESS" => Some("llama-key-123".to_string()),
            "OPENAI_API_KEY" => Some("sk-openai".to_string()),
            "CORRAL_JWT_SECRET" => Some(String::new()),
            _ => None,
        };
        let mut held = held(&config, env, Some(&file));
        held.sort();
        let expected = [
            ("LLAMA_ACCESS", "llama-key-123"),
            ("OPENAI_API_KEY", "sk-openai"),
            ("jwt-secret file", "file-secret-0123456789"),
            ("server.jwt_secret", "configured-secret"),
        ];
        let expected: Vec<(String, String)> = expected
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        assert_eq!(held, expected);
        let missing = dir.path().join("none");
        assert!(held_is_empty(&missing));
    }

    fn held_is_empty(missing: &Path) -> bool {
        held(&Config::default(), |_| None, Some(missing)).is_empty()
    }
}
