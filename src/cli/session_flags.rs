//! The flags a session is opened with (`run`, `chat`, and `corral` with no command), and how
//! they become the library's `OpenSpec`.

use std::path::PathBuf;

use clap::ValueEnum;
use corral::{
    Danger, ModelChoice, NetworkMode, OpenSpec, RunArgs, SandboxMode, ToolChoice, ToolChoiceMode,
};

#[derive(clap::Args)]
pub(crate) struct Run {
    /// The task. Read from stdin when absent.
    pub(crate) prompt: Option<String>,
    /// Print every event envelope as NDJSON on stdout (and nothing else there).
    #[arg(long)]
    pub(crate) json: bool,
    /// A conversation: one turn per line until EOF or /exit (a line editor with history at a
    /// terminal; /help lists the commands, which never reach the model).
    #[arg(short = 'i', long)]
    pub(crate) interactive: bool,
    /// Read permission decisions as NDJSON lines on stdin:
    /// {"requestId":"…","decision":"allow|deny|allow_all|disable|forbid_all|cancel"}.
    #[arg(long)]
    pub(crate) approve_stdin: bool,
    /// Show each tool's output whole (default: its first and last lines).
    #[arg(short = 'v', long)]
    pub(crate) verbose: bool,
    #[command(flatten)]
    pub(crate) session: SessionFlags,
}

#[derive(clap::Args)]
pub(crate) struct Chat {
    /// A first message, sent as the view opens.
    pub(crate) prompt: Option<String>,
    #[command(flatten)]
    pub(crate) session: SessionFlags,
}

/// What a session is opened with, the same for `run` and `chat`.
#[derive(clap::Args)]
pub(crate) struct SessionFlags {
    /// Model spec: ollama:<tag>, openai:<model>, mlx:<model>, llamacpp:<model>,
    /// lmstudio:<model>, vllm:<model>, gguf:<path-to.gguf> (corral runs llama-server for it);
    /// an agent CLI: claude[:<model>], codex[:<model>], acp:opencode|gemini|claude[:<model>],
    /// acp:cmd=<command line>; or a bare name (qwen3, qwen3:8b) for the default provider
    /// (Ollama, else the one the config's [providers] names). Default: config `model`, else a
    /// running server's tool-capable model, else the small model scripts/setup installs.
    #[arg(short = 'm', long)]
    pub(crate) model: Option<String>,
    /// Base URL of the model server (wins over config and OLLAMA_HOST / OPENAI_BASE_URL).
    #[arg(long)]
    pub(crate) base_url: Option<String>,
    /// Working directory: the session root the tools are confined to.
    #[arg(short = 'C', long = "cwd")]
    pub(crate) cwd: Option<PathBuf>,
    /// Most model steps in one turn.
    #[arg(long)]
    pub(crate) max_steps: Option<u32>,
    /// Continue a session from its event log: its id, or a unique start of it.
    #[arg(long, value_name = "ID")]
    pub(crate) resume: Option<String>,
    /// Continue the most recent session of this directory (`-C`, else the current one).
    #[arg(long = "continue", visible_alias = "last", conflicts_with = "resume")]
    pub(crate) continue_last: bool,
    /// Extra instructions appended to the system prompt.
    #[arg(long, value_name = "TEXT")]
    pub(crate) system: Option<String>,
    /// Load no project instructions (AGENTS.md) into the system prompt.
    #[arg(long)]
    pub(crate) no_instructions: bool,
    /// Config file (default: $XDG_CONFIG_HOME/corral/config.toml).
    #[arg(long, value_name = "PATH")]
    pub(crate) config: Option<PathBuf>,
    /// MCP servers this session takes tools from, beyond the config's (JSON
    /// `{"mcpServers": …}` or TOML `[mcp_servers.NAME]`).
    #[arg(long, value_name = "FILE")]
    pub(crate) mcp_config: Option<PathBuf>,
    /// Tool choice sent to servers that take it.
    #[arg(long, value_enum)]
    pub(crate) tool_choice: Option<ToolChoiceArg>,
    /// System prompt and tool descriptions: compact (short, for small windows), full, or auto
    /// (compact when the model's window is 8192 tokens or less). Default: config `prompt`, else
    /// auto.
    #[arg(long = "prompt", value_name = "compact|full|auto")]
    pub(crate) prompt_mode: Option<corral::PromptMode>,
    /// How hard the model reasons: low, medium or high (Ollama think, reasoning_effort,
    /// claude --effort, codex effort). Wins over a /high suffix on --model. Default: config
    /// `effort`, else the model's own.
    #[arg(long, value_name = "low|medium|high")]
    pub(crate) effort: Option<corral::Effort>,
    /// Permission preset (default, readonly, auto, specialist, bypass, or your own) or a path
    /// to a preset file.
    #[arg(short = 'p', long = "permission", value_name = "PRESET|PATH")]
    pub(crate) permission: Option<String>,
    /// Run tools up to this danger level without asking.
    #[arg(long, value_enum, value_name = "LEVEL")]
    pub(crate) auto_approve: Option<AutoApproveArg>,
    /// Offer these tools and run them without asking.
    #[arg(long, value_delimiter = ',', value_name = "TOOL[,TOOL]")]
    pub(crate) allow: Vec<String>,
    /// Never offer these tools.
    #[arg(long, value_delimiter = ',', value_name = "TOOL[,TOOL]")]
    pub(crate) deny: Vec<String>,
    /// Work in a new git worktree of the current repository, on branch corral/<session-id>;
    /// kept afterwards if it holds changes (see `corral worktree`), removed if not.
    #[arg(long)]
    pub(crate) worktree: bool,
    /// For an external agent (claude, acp:…, codex): give it a private HOME and config
    /// directory instead of yours, so its settings and logins are its own.
    #[arg(long)]
    pub(crate) hermetic: bool,
    /// Confinement of shell and python: strict refuses to run them unless everything is
    /// enforced; best-effort (default) reports what is not; off runs them unconfined.
    #[arg(long, value_enum, value_name = "MODE")]
    pub(crate) sandbox: Option<SandboxArg>,
    /// Network for shell and python (off: an empty network namespace plus landlock rules).
    #[arg(long, value_enum, value_name = "on|off")]
    pub(crate) network: Option<NetworkArg>,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum SandboxArg {
    Strict,
    BestEffort,
    Off,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum NetworkArg {
    On,
    Off,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum AutoApproveArg {
    Safe,
    Moderate,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum ToolChoiceArg {
    Auto,
    Required,
    None,
    /// required on a turn's first step, auto after
    FirstRequired,
}

impl From<ToolChoiceArg> for ToolChoiceMode {
    fn from(arg: ToolChoiceArg) -> Self {
        match arg {
            ToolChoiceArg::Auto => ToolChoiceMode::Fixed(ToolChoice::Auto),
            ToolChoiceArg::Required => ToolChoiceMode::Fixed(ToolChoice::Required),
            ToolChoiceArg::None => ToolChoiceMode::Fixed(ToolChoice::None),
            ToolChoiceArg::FirstRequired => ToolChoiceMode::FirstRequired,
        }
    }
}

/// A model spec as the command line gives it, parsed once here, with an effort suffix
/// (`claude:sonnet/high`) split off.
pub(crate) fn model_choice(
    text: Option<String>,
) -> Result<(Option<ModelChoice>, Option<corral::Effort>), corral::Error> {
    let Some(text) = text else {
        return Ok((None, None));
    };
    let (text, effort) = corral::split_effort_suffix(&text);
    let choice = text
        .parse()
        .map_err(|e: corral::ChoiceError| corral::Error::Usage(e.to_string()))?;
    Ok((Some(choice), effort))
}

impl SessionFlags {
    /// The flags as the spec a session opens with, with the config path and
    /// `--no-instructions`.
    pub(crate) fn into_open(self) -> Result<(OpenSpec, Option<PathBuf>, bool), corral::Error> {
        let run = self;
        let (model, suffix_effort) = model_choice(run.model)?;
        let open = OpenSpec {
            resume: run.resume,
            continue_last: run.continue_last,
            discard_unused: true,
            cwd: run.cwd,
            model,
            effort: run.effort.or(suffix_effort),
            base_url: run.base_url,
            system: run.system,
            permission: run.permission,
            auto_approve: run.auto_approve.map(|level| match level {
                AutoApproveArg::Safe => Danger::Safe,
                AutoApproveArg::Moderate => Danger::Moderate,
            }),
            allow: run.allow,
            deny: run.deny,
            max_steps: run.max_steps,
            tool_choice: run.tool_choice.map(Into::into),
            prompt: run.prompt_mode,
            worktree: run.worktree,
            hermetic: run.hermetic,
            sandbox: run.sandbox.map(|mode| match mode {
                SandboxArg::Strict => SandboxMode::Strict,
                SandboxArg::BestEffort => SandboxMode::BestEffort,
                SandboxArg::Off => SandboxMode::Off,
            }),
            network: run.network.map(|network| match network {
                NetworkArg::On => NetworkMode::On,
                NetworkArg::Off => NetworkMode::Off,
            }),
            mcp_servers: match run.mcp_config.as_deref() {
                Some(path) => corral::load_mcp_config(path)?,
                None => corral::McpServers::new(),
            },
            ..OpenSpec::default()
        };
        Ok((open, run.config, run.no_instructions))
    }
}

impl TryFrom<Run> for RunArgs {
    type Error = corral::Error;

    fn try_from(run: Run) -> Result<Self, corral::Error> {
        let (open, config_path, no_instructions) = run.session.into_open()?;
        Ok(RunArgs {
            prompt: run.prompt,
            open,
            json: run.json,
            interactive: run.interactive,
            config_path,
            approve_stdin: run.approve_stdin,
            no_instructions,
            verbose: run.verbose,
        })
    }
}

impl TryFrom<Chat> for corral::ChatArgs {
    type Error = corral::Error;

    fn try_from(chat: Chat) -> Result<Self, corral::Error> {
        let (open, config_path, no_instructions) = chat.session.into_open()?;
        Ok(corral::ChatArgs {
            prompt: chat.prompt,
            open,
            config_path,
            no_instructions,
        })
    }
}
