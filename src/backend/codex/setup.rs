//! What a codex session starts from: the program, its private home, the approval policy and
//! sandbox a corral preset amounts to, and the model a switch names.

use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::model::{ChoiceError, ExternalKind, ExternalSpec, ModelChoice};
use crate::policy::Policy;
use crate::sandbox::programs::{self, Program, Source};

/// `$CORRAL_CODEX`, else `codex` on PATH, else the copy scripts/install-agent-clis installs.
pub fn find_program() -> Result<PathBuf, Error> {
    let program = Program {
        name: "codex",
        package: "@openai/codex",
        override_var: Some("CORRAL_CODEX"),
        source: Source::Npm,
    };
    programs::find_installed(program).map_err(|e| Error::Runtime(e.to_string()))
}

/// The environment for a private HOME: codex keeps its config, logins and threads under
/// `CODEX_HOME`. The user's model-provider config is copied in, since without it codex could
/// not reach a model at all; logins are not.
pub fn private_home(home: &Path) -> Result<Vec<(String, String)>, Error> {
    let codex_home = home.join(".codex");
    std::fs::create_dir_all(&codex_home)
        .map_err(|e| Error::Runtime(format!("cannot create {}: {e}", codex_home.display())))?;
    let user_config = std::env::var_os("CODEX_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".codex")))
        .map(|dir| dir.join("config.toml"))
        .filter(|p| p.is_file());
    if let Some(config) = user_config
        && let Err(e) = std::fs::copy(&config, codex_home.join("config.toml"))
    {
        tracing::warn!(path = %config.display(), error = %e, "cannot copy codex's config");
    }
    Ok(vec![
        ("HOME".into(), home.display().to_string()),
        ("CODEX_HOME".into(), codex_home.display().to_string()),
    ])
}

/// codex's own approval policy and sandbox for a corral preset. codex asks about anything it
/// does not know to be safe (`untrusted`) and corral's gate answers, so the preset's rules
/// decide; only `bypass`, where nothing asks, lets codex run everything unasked.
pub fn codex_policy(policy: &Policy) -> (&'static str, &'static str) {
    if policy.bypass {
        ("never", "workspace-write")
    } else if !policy.offers("shell") && !policy.offers("write_file") {
        ("untrusted", "read-only")
    } else {
        ("untrusted", "workspace-write")
    }
}

/// The codex model a `set_model` names: `codex:<model>` or a bare model name. `None`: it
/// names another agent or a model of corral's own, which a codex thread cannot switch to.
pub fn codex_model(text: &str) -> Result<Option<String>, String> {
    let text = text.trim();
    let unnamed = || "name the model to switch to: codex:<model>".to_string();
    match text.parse::<ModelChoice>() {
        Ok(ModelChoice::External(ExternalSpec {
            kind: ExternalKind::Codex,
            model,
            ..
        })) => model.map(Some).ok_or_else(unnamed),
        // A bare name is codex's own model.
        Ok(ModelChoice::Native(spec)) if spec.provider_implied => Ok(Some(spec.model)),
        // Another agent, or a model corral would talk to itself (`ollama:…`, `openai:…`).
        Ok(_) => Ok(None),
        Err(ChoiceError::Agent(e)) => Err(e),
        Err(ChoiceError::Model(_)) if text.is_empty() => Err(unnamed()),
        // A bare name is codex's own model; anything else with a prefix is no model of codex.
        Err(ChoiceError::Model(_)) => Ok((!text.contains(':')).then(|| text.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_switch_names_a_codex_model() {
        assert_eq!(codex_model("codex:gpt-5"), Ok(Some("gpt-5".into())));
        assert_eq!(codex_model("o4-mini"), Ok(Some("o4-mini".into())));
        assert_eq!(codex_model("claude:sonnet"), Ok(None));
        assert_eq!(codex_model("ollama:qwen3"), Ok(None));
        assert!(codex_model("codex").is_err());
        assert!(codex_model(" ").is_err());
    }

    #[test]
    fn presets_map_to_codex_policies() {
        let load = |name: &str| {
            Policy::load(name, None, &Default::default()).unwrap_or_else(|e| panic!("{name}: {e}"))
        };
        assert_eq!(
            codex_policy(&load("default")),
            ("untrusted", "workspace-write")
        );
        assert_eq!(codex_policy(&load("readonly")), ("untrusted", "read-only"));
        assert_eq!(codex_policy(&load("bypass")), ("never", "workspace-write"));
    }
}
