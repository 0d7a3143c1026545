//! `$XDG_CONFIG_HOME/corral/config.toml`. Every key is optional; flags win over the file.
//!
//! ```toml
//! model = "ollama:qwen3"          # default model spec
//! max_steps = 50
//! max_tokens = 8192                # output tokens per reply
//! temperature = 0.2
//! system = "Answer in English."    # appended to the system prompt
//! tool_output_cap = 32768          # bytes of tool output the model sees (head+tail kept)
//! compaction_threshold = 0.8       # share of the context window that triggers compaction
//! permission = "default"           # preset: default, readonly, auto, specialist, bypass, or a path
//! approval_timeout_secs = 600      # a permission request nobody answers is denied after this
//! shell_timeout_secs = 120         # default timeout of shell and python calls
//! screenshot_max_long_edge = 1568  # screenshots are downsampled to this long edge (px)
//! open_url_command = "firefox %s"  # how open_url opens a URL (default: xdg-open)
//! sandbox = "best-effort"          # shell/python confinement: strict | best-effort | off
//! network = "on"                   # network for shell/python: on | off
//! prompt = "auto"                  # compact | full | auto (compact for windows ≤ 8192 tokens)
//! instructions = ["AGENTS.md", "CLAUDE.md"]  # project instruction files (default AGENTS.md); [] = none
//!
//! [timeouts]
//! connect_secs = 10
//! idle_secs = 300                  # longest silence while a reply streams
//!
//! [retry]
//! max_attempts = 5
//! base_delay_ms = 500
//! max_delay_ms = 20000
//!
//! [limits]                         # what a model server may send
//! max_stream_line_bytes = 16777216 # one SSE event / NDJSON line (16 MiB); longer fails the reply
//! max_error_body_bytes = 65536     # read of an error reply's body (64 KiB); the rest is skipped
//!
//! Every number is range-checked at load: timeouts and delays are above 0 and at most 30
//! days, counts and sizes within the bounds `config/check.rs` lists; an error names the key.
//!
//! tool_choice = "first-required"   # auto | required | none | first-required
//!
//! [agents]                         # external agents (claude, codex, acp:…)
//! project_settings = false         # true: they load the project's own settings and hooks
//! acp_permission_timeout_secs = 50 # an ACP agent's question nobody answers is refused after this
//! idle_sleep_secs = 900            # an idle agent's process is stopped, woken by the next message (0: never)
//! stall_secs = 1800                # a turn with no event this long is interrupted (0: never)
//! stall_grace_secs = 30            # … and ended, its session closed, if the interrupt is not heeded
//!
//! [server]                         # corral serve
//! listen = "127.0.0.1:7777"
//! jwt_secret = "…"                 # else CORRAL_JWT_SECRET, else a generated 0600 file
//! roots = ["/srv/projects"]        # where user sessions may work (default: serve's directory)
//! user_backends = ["claude"]       # external agents user tokens may start (default: none)
//! max_sessions_per_owner = 16      # live sessions one user may hold
//! allowed_hosts = ["corral.lan"]   # Host names accepted besides the listen address
//!
//! [local]                          # gguf: models corral serves itself
//! server_command = "llama-server"  # default: llama-server on PATH, else the one setup installs
//! context_size = 8192
//! threads = 2                      # default: every core corral may use
//! parallel = 1                     # concurrent requests (slots); each gets context_size / parallel
//! startup_timeout_secs = 120
//! chat_template_file = "/path/to/template.jinja"
//! extra_args = ["--flash-attn", "on"]
//!
//! [providers.ollama]
//! base_url = "http://127.0.0.1:11434"
//! num_ctx = 16384                  # Ollama context window to request
//!
//! [providers.llamacpp]
//! base_url = "http://127.0.0.1:8080/v1"
//! context_window = 8192            # when the server cannot tell
//! api_key_env = "MY_KEY_VAR"       # read the API key from this variable
//!
//! [mcp_servers.git]                # tools from MCP servers (see config/mcp.rs)
//! command = "uvx"
//! args = ["mcp-server-git"]
//! ```

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Deserializer};

use crate::model::{HttpSettings, ModelChoice, Provider, RetryPolicy, ToolChoiceMode};

mod check;
pub mod mcp;
mod range;
pub use mcp::{McpServer, McpServers, McpTransport};
pub use range::{RangeError, env_seconds, seconds};

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default, deserialize_with = "model_choice")]
    pub model: Option<ModelChoice>,
    pub max_steps: Option<u32>,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f32>,
    pub system: Option<String>,
    pub tool_output_cap: Option<usize>,
    pub compaction_threshold: Option<f64>,
    pub permission: Option<String>,
    pub approval_timeout_secs: Option<u64>,
    pub shell_timeout_secs: Option<u64>,
    pub screenshot_max_long_edge: Option<u32>,
    pub open_url_command: Option<String>,
    pub sandbox: Option<crate::sandbox::SandboxMode>,
    pub network: Option<crate::sandbox::NetworkMode>,
    /// File names looked for in each directory from the config directory and the repository
    /// root down to the session's, for the native loop's system prompt. `[]`: none loaded.
    pub instructions: Option<Vec<String>>,
    #[serde(default, deserialize_with = "tool_choice")]
    pub tool_choice: Option<ToolChoiceMode>,
    /// `compact`, `full` or `auto` (compact for windows of 8192 tokens or less).
    pub prompt: Option<crate::model::PromptMode>,
    /// How hard models reason: `low`, `medium` or `high` (default: each model's own).
    pub effort: Option<crate::model::Effort>,
    #[serde(default)]
    pub local: Local,
    #[serde(default)]
    pub agents: Agents,
    #[serde(default)]
    pub delegate: Delegate,
    #[serde(default)]
    pub tui: Tui,
    #[serde(default)]
    pub server: Server,
    #[serde(default)]
    pub timeouts: Timeouts,
    #[serde(default)]
    pub retry: Retry,
    #[serde(default)]
    pub limits: Limits,
    #[serde(default, deserialize_with = "providers")]
    pub providers: BTreeMap<Provider, ProviderConfig>,
    /// MCP servers every session takes tools from (see `config::mcp`).
    #[serde(default)]
    pub mcp_servers: McpServers,
    /// `corral node` and `corral serve --nats`: the NATS deployment they share.
    #[serde(default)]
    pub nats: Nats,
}

/// The default model spec, parsed as it is read: a bad one names the specs corral takes.
fn model_choice<'de, D: Deserializer<'de>>(d: D) -> Result<Option<ModelChoice>, D::Error> {
    let Some(text) = Option::<String>::deserialize(d)? else {
        return Ok(None);
    };
    if let (head, Some(effort)) = crate::model::split_effort_suffix(&text) {
        return Err(serde::de::Error::custom(format!(
            "model {text:?}: write the effort as its own key: model = {head:?} and effort = \
             {:?}",
            effort.as_str()
        )));
    }
    text.parse().map(Some).map_err(serde::de::Error::custom)
}

fn listen_address<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SocketAddr>, D::Error> {
    let Some(text) = Option::<String>::deserialize(d)? else {
        return Ok(None);
    };
    text.parse().map(Some).map_err(|e| {
        serde::de::Error::custom(format!(
            "server.listen must be an address such as 127.0.0.1:7777, got {text:?}: {e}"
        ))
    })
}

fn tool_choice<'de, D: Deserializer<'de>>(d: D) -> Result<Option<ToolChoiceMode>, D::Error> {
    let Some(text) = Option::<String>::deserialize(d)? else {
        return Ok(None);
    };
    ToolChoiceMode::parse(&text).map(Some).ok_or_else(|| {
        serde::de::Error::custom(format!(
            "tool_choice must be auto, required, none or first-required, got {text:?}"
        ))
    })
}

/// `[providers.<name>]` tables, by provider: a name corral does not know is an error listing
/// the ones it does.
fn providers<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<Provider, ProviderConfig>, D::Error> {
    BTreeMap::<String, ProviderConfig>::deserialize(d)?
        .into_iter()
        .map(|(name, config)| {
            let provider = Provider::ALL.into_iter().find(|p| p.prefix() == name);
            provider.map(|p| (p, config)).ok_or_else(|| {
                let known: Vec<&str> = Provider::ALL.iter().map(|p| p.prefix()).collect();
                serde::de::Error::custom(format!(
                    "unknown provider [providers.{name}]; known: {}",
                    known.join(", ")
                ))
            })
        })
        .collect()
}

/// External agents.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Agents {
    /// Whether an external agent loads the settings planted in the project it works on
    /// (hooks, MCP servers, which run outside corral's sandbox). Default: no.
    pub project_settings: Option<bool>,
    /// How long an ACP agent's permission request (or gated `fs/*` call) waits for a person
    /// before corral refuses it. Default: `DEFAULT_ACP_PERMISSION_TIMEOUT` (50 s).
    pub acp_permission_timeout_secs: Option<u64>,
    /// An agent process idle this long is stopped and woken, on its own session, by the next
    /// message (where its backend can resume: claude). `0`: never. Default 900.
    pub idle_sleep_secs: Option<u64>,
    /// A turn that produces no event for this long has stalled: an `error`, then an
    /// interrupt. `0`: never. Default 1800.
    pub stall_secs: Option<u64>,
    /// How long a stalled turn's interrupt may take before the session is ended. Default 30.
    pub stall_grace_secs: Option<u64>,
}

/// `delegate`'s sub-sessions.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Delegate {
    /// How many run at once (1 to 8; default 2).
    pub max_parallel: Option<u32>,
}

impl Delegate {
    pub fn max_parallel(&self) -> usize {
        self.max_parallel.unwrap_or(2).clamp(1, 8) as usize
    }
}

/// The full-screen terminal UI (`corral`, `corral chat`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tui {
    /// A desktop notification when an approval waits while the terminal is not focused, or
    /// nobody answered it for `notify_after_secs` (default off).
    #[serde(default)]
    pub notify_approvals: bool,
    /// Seconds an approval may wait on a focused terminal before it notifies (default 30).
    pub notify_after_secs: Option<u64>,
}

impl Tui {
    pub fn notify_after(&self) -> std::time::Duration {
        // Range-checked when the config loads.
        std::time::Duration::from_secs(self.notify_after_secs.unwrap_or(30))
    }
}

/// `corral serve`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Server {
    /// Default `127.0.0.1:7777`.
    #[serde(default, deserialize_with = "listen_address")]
    pub listen: Option<SocketAddr>,
    /// HS256 secret; else `CORRAL_JWT_SECRET`, else a generated 0600 file.
    pub jwt_secret: Option<String>,
    /// Directories `user` tokens' sessions must lie in (absolute). Empty: the directory
    /// `serve` started in, unless that is `/` or the home directory.
    #[serde(default)]
    pub roots: Vec<PathBuf>,
    /// External backends `user` tokens may start, by name: `claude`, `codex`,
    /// `acp:opencode`, `acp:gemini`, `acp:claude`, or one exact `acp:cmd=…`.
    #[serde(default)]
    pub user_backends: Vec<String>,
    /// Live sessions one `user` owner may hold (default 16).
    pub max_sessions_per_owner: Option<usize>,
    /// `Host` names (`name` or `name:port`) accepted besides the listen address.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
}

impl Server {
    /// Live sessions one `user` owner may hold: the config's number, else 16.
    pub fn max_sessions(&self) -> usize {
        self.max_sessions_per_owner.unwrap_or(16)
    }
}

/// Where `corral serve`'s JWT secret comes from when it is not the file `serve` generates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretSource {
    /// `server.jwt_secret`.
    Config,
    /// `CORRAL_JWT_SECRET`.
    Env,
}

/// The server's JWT secret in the documented order: the config's, else `CORRAL_JWT_SECRET`
/// (`env` reads it); `None`: the generated file's. An empty value is no value.
pub fn jwt_secret(
    configured: Option<&str>,
    env: impl Fn(&str) -> Option<String>,
) -> Option<(SecretSource, String)> {
    match configured.filter(|s| !s.is_empty()) {
        Some(secret) => Some((SecretSource::Config, secret.to_string())),
        None => env("CORRAL_JWT_SECRET")
            .filter(|s| !s.is_empty())
            .map(|secret| (SecretSource::Env, secret)),
    }
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Local {
    pub server_command: Option<String>,
    pub context_size: Option<u32>,
    pub threads: Option<u32>,
    pub parallel: Option<u32>,
    pub startup_timeout_secs: Option<u64>,
    pub chat_template_file: Option<PathBuf>,
    #[serde(default)]
    pub extra_args: Vec<String>,
}

impl Local {
    pub fn settings(&self) -> crate::model::LocalSettings {
        let defaults = crate::model::LocalSettings::default();
        crate::model::LocalSettings {
            server_command: self.server_command.clone(),
            context_size: self.context_size.unwrap_or(defaults.context_size),
            threads: self.threads,
            parallel: self.parallel.unwrap_or(defaults.parallel),
            startup_timeout: self
                .startup_timeout_secs
                .map_or(defaults.startup_timeout, Duration::from_secs),
            chat_template_file: self.chat_template_file.clone(),
            extra_args: self.extra_args.clone(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timeouts {
    pub connect_secs: Option<f64>,
    pub idle_secs: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Retry {
    pub max_attempts: Option<u32>,
    pub base_delay_ms: Option<u64>,
    pub max_delay_ms: Option<u64>,
}

/// `[nats]`: how nodes and the control plane reach NATS. The URL itself is `--nats`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Nats {
    /// Every subject, stream and bucket of one deployment starts with it (default `corral`):
    /// deployments sharing a NATS server never see each other's sessions.
    pub prefix: Option<String>,
    /// A token the NATS server requires (else `CORRAL_NATS_TOKEN`).
    pub token: Option<String>,
    /// A file holding the nkey seed (`SU…`) this process authenticates with.
    pub nkey_seed_file: Option<PathBuf>,
    /// How often a node announces itself (default 2 s).
    pub heartbeat_secs: Option<u64>,
    /// A node silent this long is lost: its sessions end (default 10 s).
    pub dead_after_secs: Option<u64>,
    /// How long a session's events stay in the stream (default 30 days).
    pub retention_days: Option<u64>,
}

/// Caps on what a model server may send.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Longest streamed line (SSE event data, NDJSON line) or JSON document; longer fails the
    /// reply with an error naming this key. Default 16 MiB.
    pub max_stream_line_bytes: Option<usize>,
    /// How much of an error body is read for its message. Default 64 KiB.
    pub max_error_body_bytes: Option<usize>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    pub base_url: Option<String>,
    pub num_ctx: Option<u64>,
    pub context_window: Option<u64>,
    pub api_key_env: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "the config file {path} does not exist (`corral init` writes one; without --config \
         the default location is used, and may be missing)"
    )]
    Missing { path: PathBuf },
    #[error("cannot read the config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the config file {path} is invalid: {message}")]
    Invalid { path: PathBuf, message: String },
}

impl Config {
    /// `$XDG_CONFIG_HOME/corral`: the config file, the generated JWT secret, the global
    /// `AGENTS.md`.
    pub fn dir() -> Option<PathBuf> {
        dirs::config_dir().map(|d| d.join("corral"))
    }

    pub fn default_path() -> Option<PathBuf> {
        Config::dir().map(|d| d.join("config.toml"))
    }

    /// Where `corral serve` keeps the JWT secret it generated: `$XDG_CONFIG_HOME/corral/
    /// jwt-secret`. Here, below the server, because sessions redact it from tool output.
    pub fn jwt_secret_path() -> Option<PathBuf> {
        Config::dir().map(|d| d.join("jwt-secret"))
    }

    /// `--no-instructions`: no project instructions for the sessions opened with this config.
    pub fn without_instructions(mut self) -> Config {
        self.instructions = Some(Vec::new());
        self
    }

    /// Loads the file if it exists; a missing file is an empty config.
    /// A config file someone named (`--config`): it must exist.
    pub fn load_named(path: &Path) -> Result<Config, ConfigError> {
        match std::fs::symlink_metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(ConfigError::Missing {
                path: path.to_path_buf(),
            }),
            _ => Config::load(path),
        }
    }

    /// The config file at `path`; a missing one is the empty config (the default location
    /// need not exist).
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Config::default()),
            Err(source) => {
                return Err(ConfigError::Read {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        let config: Config = toml::from_str(&text).map_err(|e| ConfigError::Invalid {
            path: path.to_path_buf(),
            message: toml_error(&text, &e),
        })?;
        config.check(path)?;
        Ok(config)
    }

    pub fn provider(&self, provider: Provider) -> ProviderConfig {
        self.providers.get(&provider).cloned().unwrap_or_default()
    }

    pub fn http_settings(&self) -> HttpSettings {
        let defaults = HttpSettings::default();
        let retry_defaults = RetryPolicy::default();
        HttpSettings {
            connect_timeout: self
                .timeouts
                .connect_secs
                .and_then(|s| seconds("timeouts.connect_secs", s).ok())
                .unwrap_or(defaults.connect_timeout),
            idle_timeout: self
                .timeouts
                .idle_secs
                .and_then(|s| seconds("timeouts.idle_secs", s).ok())
                .unwrap_or(defaults.idle_timeout),
            retry: RetryPolicy {
                max_attempts: self
                    .retry
                    .max_attempts
                    .unwrap_or(retry_defaults.max_attempts),
                base_delay: self
                    .retry
                    .base_delay_ms
                    .map_or(retry_defaults.base_delay, Duration::from_millis),
                max_delay: self
                    .retry
                    .max_delay_ms
                    .map_or(retry_defaults.max_delay, Duration::from_millis),
            },
            max_stream_line: self
                .limits
                .max_stream_line_bytes
                .unwrap_or(defaults.max_stream_line),
            max_error_body: self
                .limits
                .max_error_body_bytes
                .unwrap_or(defaults.max_error_body),
        }
    }
}

/// A TOML error as "line L, column C: message", without the excerpt toml's `Display` adds:
/// that excerpt quotes the offending line, and an error can reach someone who may not read
/// the file (a preset path named over the network).
pub fn toml_error(text: &str, error: &toml::de::Error) -> String {
    // Without its input, toml renders the message and the key it concerns, no excerpt.
    let mut bare = error.clone();
    bare.set_input(None);
    let rendered = bare.to_string();
    let message = rendered.trim_end().replace('\n', " ");
    let Some(before) = error.span().and_then(|span| text.get(..span.start)) else {
        return message;
    };
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!("line {line}, column {column}: {message}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_errors_name_the_place_without_quoting_the_line() {
        let text = "model = \"x\"\naws_secret = hunter2-is-the-password\n";
        let error = toml::from_str::<Config>(text).unwrap_err();
        assert!(
            error.to_string().contains("hunter2"),
            "toml quotes the line"
        );
        let summary = toml_error(text, &error);
        assert!(!summary.contains("hunter2"), "{summary}");
        assert!(summary.starts_with("line 2, column "), "{summary}");
        // A wrong type is named by its key.
        let text = "max_steps = \"many\"\n";
        let error = toml::from_str::<Config>(text).unwrap_err();
        let summary = toml_error(text, &error);
        assert!(summary.contains("in `max_steps`"), "{summary}");
    }

    #[test]
    fn full_example_parses_and_maps_to_settings() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(
            &path,
            "model = \"ollama:qwen3\"\n[timeouts]\nidle_secs = 2.5\n[retry]\nbase_delay_ms = 10\n\
             [providers.ollama]\nnum_ctx = 4096\n",
        )
        .unwrap();
        let config = Config::load(&path).unwrap();
        assert_eq!(
            config.model.as_ref().map(|m| m.to_string()).as_deref(),
            Some("ollama:qwen3")
        );
        assert_eq!(config.provider(Provider::Ollama).num_ctx, Some(4096));
        let http = config.http_settings();
        assert_eq!(http.idle_timeout, Duration::from_millis(2500));
        assert_eq!(http.retry.base_delay, Duration::from_millis(10));
    }

    #[test]
    fn typed_keys_are_parsed_as_read_and_bad_values_name_the_key_and_the_choices() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(
            &path,
            "model = \"claude:sonnet\"\ntool_choice = \"first-required\"\n",
        )
        .unwrap();
        let config = Config::load(&path).unwrap();
        assert!(matches!(config.model, Some(ModelChoice::External(_))));
        assert_eq!(config.tool_choice, Some(ToolChoiceMode::FirstRequired));
        for (text, key, choices) in [
            (
                "tool_choice = \"sometimes\"\n",
                "tool_choice",
                "first-required",
            ),
            ("model = \"a:b:c\"\n", "model", "ollama:<tag>"),
            ("model = \"acp:zed\"\n", "model", "cmd=<command line>"),
            ("[providers.olama]\n", "providers.olama", "llamacpp"),
            (
                "[server]\nlisten = \"lan:80\"\n",
                "server.listen",
                "127.0.0.1:7777",
            ),
        ] {
            std::fs::write(&path, text).unwrap();
            let e = Config::load(&path).unwrap_err().to_string();
            assert!(e.contains(key) && e.contains(choices), "{text}: {e}");
        }
    }

    #[test]
    fn the_jwt_secret_comes_from_the_config_then_the_environment() {
        let env = |name: &str| (name == "CORRAL_JWT_SECRET").then(|| "from-env".to_string());
        assert_eq!(
            jwt_secret(Some("from-file"), env),
            Some((SecretSource::Config, "from-file".into()))
        );
        assert_eq!(
            jwt_secret(Some(""), env),
            Some((SecretSource::Env, "from-env".into()))
        );
        assert_eq!(jwt_secret(None, |_| Some(String::new())), None);
    }

    #[test]
    fn mistakes_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "modle = \"x\"\n").unwrap();
        let e = Config::load(&path).unwrap_err().to_string();
        assert!(e.contains("modle"), "{e}");
        std::fs::write(&path, "[providers.olama]\n").unwrap();
        let e = Config::load(&path).unwrap_err().to_string();
        assert!(e.contains("olama"), "{e}");
        assert_eq!(
            Config::load(&dir.path().join("missing.toml")).unwrap(),
            Config::default()
        );
        // Named with --config, a missing file is a mistake, not an empty config.
        let e = Config::load_named(&dir.path().join("missing.toml")).unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
        std::fs::write(&path, "max_steps = 7\n").unwrap();
        assert_eq!(Config::load_named(&path).unwrap().max_steps, Some(7));
    }
}
