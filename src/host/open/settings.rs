//! A session's settings, resolved once in [`super::plan`]: what the request chose (a flag of
//! `corral run`, a field of a REST, MCP or ACP request), else the config file's value, else
//! the default. Opening reads the one [`Settings`] value from then on, never the request and
//! the config side by side. What comes from the environment is resolved where its provider is
//! known, in the same order (`model::resolve_base_url`: request, file, variable, default).

use std::path::Path;
use std::time::Duration;

use super::OpenSpec;
use crate::config::Config;
use crate::llm_loop::LoopConfig;
use crate::policy::Policy;
use crate::sandbox::{NetworkMode, SandboxMode};
use crate::tool::ToolSettings;

/// A value the request chose, or one the config (or the default) supplied: a preset may refuse
/// the first and raises the second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Chosen<T> {
    Requested(T),
    Configured(T),
}

impl<T: Copy> Chosen<T> {
    fn resolve(requested: Option<T>, configured: Option<T>, default: T) -> Chosen<T> {
        match requested {
            Some(value) => Chosen::Requested(value),
            None => Chosen::Configured(configured.unwrap_or(default)),
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// The permission preset, by name or path.
    pub permission: String,
    pub loop_config: LoopConfig,
    pub sandbox: Chosen<SandboxMode>,
    pub network: Chosen<NetworkMode>,
    /// shell/python timeout when a call names none, before a preset's ceiling.
    pub shell_timeout: Duration,
    pub screenshot_max_long_edge: u32,
    pub open_url_command: Option<String>,
    /// External agents load the project's own settings (`[agents] project_settings`).
    pub project_settings: bool,
    /// How long an ACP agent's request waits for a person (`[agents]
    /// acp_permission_timeout_secs`).
    pub acp_permission_timeout: Duration,
    /// Names of the project instruction files the native loop loads; empty: none.
    pub instructions: Vec<String>,
    /// How hard the model reasons: the request's, else a resumed session's, else the
    /// config's; `None`: the model's own default.
    pub effort: Option<crate::model::Effort>,
}

/// The preset a session starts in: the request's, else the config's, else `default`.
pub(crate) fn permission(requested: Option<&String>, config: &Config) -> String {
    requested
        .or(config.permission.as_ref())
        .cloned()
        .unwrap_or_else(|| "default".to_string())
}

impl Settings {
    pub(crate) fn resolve(spec: &OpenSpec, config: &Config) -> Settings {
        let loop_defaults = LoopConfig::default();
        let tools = ToolSettings::default();
        Settings {
            permission: permission(spec.permission.as_ref(), config),
            loop_config: LoopConfig {
                max_steps: spec
                    .max_steps
                    .or(config.max_steps)
                    .unwrap_or(loop_defaults.max_steps),
                max_tokens: config.max_tokens.unwrap_or(loop_defaults.max_tokens),
                temperature: config.temperature,
                tool_choice: spec
                    .tool_choice
                    .or(config.tool_choice)
                    .unwrap_or(loop_defaults.tool_choice),
                prompt: spec
                    .prompt
                    .or(config.prompt)
                    .unwrap_or(loop_defaults.prompt),
                compaction_threshold: config
                    .compaction_threshold
                    .unwrap_or(loop_defaults.compaction_threshold),
                system: spec.system.clone().or_else(|| config.system.clone()),
                tool_output_cap: config.tool_output_cap,
                attended: spec.attended,
                approval_timeout: spec
                    .approval_timeout
                    .or(config.approval_timeout_secs.map(Duration::from_secs)),
                ..loop_defaults
            },
            sandbox: Chosen::resolve(spec.sandbox, config.sandbox, SandboxMode::default()),
            network: Chosen::resolve(spec.network, config.network, NetworkMode::default()),
            shell_timeout: config
                .shell_timeout_secs
                .map_or(tools.default_timeout, Duration::from_secs),
            screenshot_max_long_edge: config
                .screenshot_max_long_edge
                .unwrap_or(tools.screenshot_max_long_edge),
            open_url_command: config.open_url_command.clone(),
            project_settings: config.agents.project_settings == Some(true),
            acp_permission_timeout: config.agents.acp_permission_timeout_secs.map_or(
                crate::backend::external::DEFAULT_ACP_PERMISSION_TIMEOUT,
                Duration::from_secs,
            ),
            instructions: config
                .instructions
                .clone()
                .unwrap_or_else(|| vec!["AGENTS.md".to_string()]),
            effort: spec.effort.or(config.effort),
        }
    }

    /// Tool settings for the session: these limits under the preset's, the scrubbed
    /// environment with the session's private temp dir, and the secrets to redact (those of
    /// the environment and those corral holds).
    pub(crate) fn tools(&self, config: &Config, policy: &Policy, tmpdir: &Path) -> ToolSettings {
        let defaults = ToolSettings::default();
        let runtime_env: Vec<(String, String)> = std::env::vars().collect();
        let max_timeout = policy
            .max_timeout_secs
            .map_or(defaults.max_timeout, Duration::from_secs);
        ToolSettings {
            default_timeout: self.shell_timeout.min(max_timeout),
            max_timeout,
            screenshot_max_long_edge: self.screenshot_max_long_edge,
            open_url_command: self.open_url_command.clone(),
            url_schemes: policy
                .url_schemes
                .clone()
                .unwrap_or(defaults.url_schemes.clone()),
            env: crate::sandbox::env::tool_env(runtime_env.clone(), &policy.env, Some(tmpdir)),
            redactor: crate::sandbox::env::Redactor::from_env(
                runtime_env,
                super::held_secrets(config),
            ),
            ..defaults
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ToolChoice, ToolChoiceMode};

    #[test]
    fn the_request_wins_over_the_file_and_the_file_over_the_default() {
        let config = Config {
            max_steps: Some(7),
            tool_choice: Some(ToolChoiceMode::FirstRequired),
            permission: Some("readonly".into()),
            sandbox: Some(SandboxMode::Strict),
            system: Some("from the file".into()),
            ..Config::default()
        };
        let from_file = Settings::resolve(&OpenSpec::default(), &config);
        assert_eq!(from_file.loop_config.max_steps, 7);
        assert_eq!(
            from_file.loop_config.tool_choice,
            ToolChoiceMode::FirstRequired
        );
        assert_eq!(from_file.permission, "readonly");
        assert_eq!(from_file.sandbox, Chosen::Configured(SandboxMode::Strict));
        assert_eq!(
            from_file.network,
            Chosen::Configured(NetworkMode::default())
        );
        let request = OpenSpec {
            max_steps: Some(3),
            tool_choice: Some(ToolChoiceMode::Fixed(ToolChoice::None)),
            permission: Some("auto".into()),
            sandbox: Some(SandboxMode::Off),
            system: Some("from the request".into()),
            ..OpenSpec::default()
        };
        let requested = Settings::resolve(&request, &config);
        assert_eq!(requested.loop_config.max_steps, 3);
        assert_eq!(
            requested.loop_config.tool_choice,
            ToolChoiceMode::Fixed(ToolChoice::None)
        );
        assert_eq!(requested.permission, "auto");
        assert_eq!(requested.sandbox, Chosen::Requested(SandboxMode::Off));
        assert_eq!(
            requested.loop_config.system.as_deref(),
            Some("from the request")
        );
        let defaults = Settings::resolve(&OpenSpec::default(), &Config::default());
        assert_eq!(defaults.loop_config, LoopConfig::default());
        assert_eq!(defaults.permission, "default");
        assert!(!defaults.project_settings);
        assert_eq!(defaults.instructions, ["AGENTS.md"]);
        let off = Settings::resolve(
            &OpenSpec::default(),
            &Config::default().without_instructions(),
        );
        assert!(off.instructions.is_empty());
    }

    /// The config's model is taken like a request's: one naming an external agent plans that
    /// agent (it used to be parsed as a native model spec and refused).
    #[tokio::test]
    async fn the_configured_model_may_name_an_external_agent() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config {
            model: Some("acp:cmd=true".parse().unwrap()),
            ..Config::default()
        };
        let spec = OpenSpec {
            cwd: Some(dir.path().to_path_buf()),
            ..OpenSpec::default()
        };
        let progress: crate::model::Progress = std::sync::Arc::new(|_: &str| {});
        let plan = super::super::plan(spec, config, progress).await.unwrap();
        assert!(matches!(
            &plan.engine,
            super::super::Engine::External(spec) if spec.to_string() == "acp:cmd=true"
        ));
    }
}
