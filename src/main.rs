//! The `corral` command line. Everything real lives in the library; this is the edge where
//! errors become messages and exit codes.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use corral::{
    Danger, Exit, ModelChoice, NetworkMode, OpenSpec, RunArgs, SandboxMode, ToolChoice,
    ToolChoiceMode,
};

#[derive(Parser)]
#[command(
    name = "corral",
    version,
    about = "A sandboxed, tool-executing AI agent runtime with its own LLM loop"
)]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// With no command: the session view, with the session flags of `corral chat`.
    #[command(flatten)]
    session: Box<SessionFlags>,
}

#[derive(Subcommand)]
enum Command {
    /// The full-screen session view (also `corral` with no command): the conversation with
    /// tool cards, approvals as a modal, @file completion, slash commands (/help).
    Chat(Box<Chat>),
    /// Run one task in the terminal (or a conversation with -i).
    Run(Box<Run>),
    /// List the permission presets, or show what one means in effect.
    Policies {
        #[command(subcommand)]
        action: Option<PoliciesAction>,
    },
    /// Review, merge and clean up the isolated worktrees of `run --worktree` sessions.
    Worktree {
        #[command(subcommand)]
        action: WorktreeAction,
    },
    /// Serve sessions over REST + WebSocket (API v1) with a web page, on 127.0.0.1:7777.
    Serve {
        /// Address to listen on (default: config `server.listen`, else 127.0.0.1:7777).
        #[arg(long, value_name = "ADDR")]
        listen: Option<String>,
        /// Allow a non-loopback address (anyone who reaches it with a token drives this
        /// machine).
        #[arg(long)]
        allow_remote: bool,
        /// Config file (default: $XDG_CONFIG_HOME/corral/config.toml).
        #[arg(long, value_name = "PATH")]
        config: Option<PathBuf>,
        /// Load no project instructions (AGENTS.md) into the native loop's system prompt.
        #[arg(long)]
        no_instructions: bool,
    },
    /// Serve sessions as MCP tools (agent_open, agent_send, agent_output, agent_approve …)
    /// on stdin/stdout until stdin closes; then every session is closed.
    Mcp {
        /// Config file (default: $XDG_CONFIG_HOME/corral/config.toml).
        #[arg(long, value_name = "PATH")]
        config: Option<PathBuf>,
        /// Load no project instructions (AGENTS.md) into the native loop's system prompt.
        #[arg(long)]
        no_instructions: bool,
    },
    /// Be an Agent Client Protocol agent on stdin/stdout: an editor (Zed, any ACP client)
    /// opens corral sessions, prompts them and answers their permission questions.
    Acp {
        /// Model spec for new sessions (as for `corral run -m`).
        #[arg(short, long, value_name = "SPEC")]
        model: Option<String>,
        /// Base URL of the model server (wins over config and environment).
        #[arg(long, value_name = "URL")]
        base_url: Option<String>,
        /// Permission preset new sessions start in (the client can switch modes).
        #[arg(short, long, value_name = "PRESET")]
        permission: Option<String>,
        /// Work in a new git worktree of each session's directory.
        #[arg(long)]
        worktree: bool,
        /// Config file (default: $XDG_CONFIG_HOME/corral/config.toml).
        #[arg(long, value_name = "PATH")]
        config: Option<PathBuf>,
        /// Load no project instructions (AGENTS.md) into the native loop's system prompt.
        #[arg(long)]
        no_instructions: bool,
        /// MCP servers every session gets, beyond the config's (JSON `{"mcpServers": …}` or
        /// TOML `[mcp_servers.NAME]`).
        #[arg(long, value_name = "FILE")]
        mcp_config: Option<PathBuf>,
    },
    /// Run the coding tasks of evals/ (or --tasks DIR) with a model, each in a fresh
    /// repository, and print a table of what passed (JSON in --out).
    Eval(Box<EvalCli>),
    /// Mint a bearer token (HS256 JWT) for corral serve.
    Token {
        /// The owner the token speaks for.
        #[arg(long)]
        sub: String,
        #[arg(long, value_enum, default_value = "user")]
        role: RoleArg,
        /// Lifetime: 90s, 30m, 24h, 7d.
        #[arg(long, default_value = "24h")]
        ttl: String,
        /// Config file (for `server.jwt_secret`).
        #[arg(long, value_name = "PATH")]
        config: Option<PathBuf>,
    },
    /// What this machine gives corral: sandbox support (landlock, namespaces), display,
    /// clipboard, session bus, notifications, model servers, config and log locations.
    Doctor {
        /// Config file (default: $XDG_CONFIG_HOME/corral/config.toml).
        #[arg(long, value_name = "PATH")]
        config: Option<PathBuf>,
    },
    /// The MCP servers sessions take tools from (config `[mcp_servers]` plus --mcp-config),
    /// started as a session in -C DIR would start them (inside its sandbox): status and tools.
    #[command(name = "mcp-servers")]
    McpServers {
        #[command(subcommand)]
        action: McpServersAction,
    },
    /// Every agent at a glance: the sessions of a running `corral serve` (or, without
    /// --server, this machine's local ones, read-only), live, full-screen.
    Top {
        /// A running server, e.g. http://127.0.0.1:7777.
        #[arg(long, value_name = "URL")]
        server: Option<String>,
        /// The server's bearer token (`corral token`).
        #[arg(
            long,
            value_name = "TOKEN",
            env = "CORRAL_TOKEN",
            hide_env_values = true
        )]
        token: Option<String>,
    },
    /// The sessions on this machine, newest activity first: id, title, model, status, turns,
    /// tokens, last activity and directory (read from their event logs; no server needed).
    Sessions {
        /// One JSON array of the sessions instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// A session's event log: a readable line per event, or its envelopes with --json.
    Logs {
        /// The session's id, or the start of it when no other id starts the same.
        id: String,
        /// Keep printing events as they are appended, until the session is closed.
        #[arg(short, long)]
        follow: bool,
        /// The envelopes as the log has them, one JSON object a line.
        #[arg(long)]
        json: bool,
    },
    /// A completion script for a shell, on stdout (`source <(corral completions bash)`).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// The man page of corral and every subcommand (roff), on stdout
    /// (`corral man > ~/.local/share/man/man1/corral.1`).
    Man,
    /// Internal: the clipboard tools' helper process (`read`, or `own` to serve a value).
    #[command(name = "__clipboard", hide = true)]
    Clipboard { mode: String },
}

#[derive(clap::Args)]
struct EvalCli {
    /// Model spec (as for `corral run -m`).
    #[arg(short, long, value_name = "SPEC")]
    model: String,
    /// Base URL of the model server (wins over config and environment).
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// Directory of tasks (default: ./evals, else the evals/ corral was built with).
    #[arg(long, value_name = "DIR")]
    tasks: Option<PathBuf>,
    /// Run only the tasks whose name contains this (repeatable).
    #[arg(long = "task", value_name = "NAME")]
    only: Vec<String>,
    /// Step limit for every task (default: the task's, else 20).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    max_steps: Option<u32>,
    /// Permission preset of the runs; each works in a throwaway repository, sandboxed with
    /// the network off.
    #[arg(short, long, value_name = "PRESET", default_value = "bypass")]
    permission: String,
    /// Where the results go as JSON.
    #[arg(long, value_name = "PATH", default_value = "corral-eval.json")]
    out: PathBuf,
    /// Keep each task's working copy (its path is in the JSON).
    #[arg(long)]
    keep: bool,
    /// Config file for the runs (default: $XDG_CONFIG_HOME/corral/config.toml).
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
}

#[derive(Subcommand)]
enum WorktreeAction {
    /// Session, branch, base, changed files, age and path of each worktree; orphans marked.
    List,
    /// Everything a worktree changed against its base, as a unified diff on stdout.
    Diff { id: String },
    /// Bring a worktree's changes into the current branch of the original repository
    /// (fast-forward, else a merge commit); refuses on conflicts and changes nothing.
    Merge { id: String },
    /// Record the worktree as it is now as the state to review and merge (after it changed
    /// since its session ended, which makes merge refuse).
    Snapshot { id: String },
    /// Delete a worktree, its git admin data and its branch.
    Remove {
        id: String,
        /// Also when it holds unmerged changes (they are lost).
        #[arg(long)]
        force: bool,
    },
    /// Remove worktrees with nothing unmerged, and orphaned ones.
    Prune {
        /// Also orphans that still hold unmerged changes.
        #[arg(long)]
        force: bool,
    },
}

impl From<&WorktreeAction> for corral::WorktreeCommand {
    fn from(action: &WorktreeAction) -> Self {
        use corral::WorktreeCommand as C;
        match action {
            WorktreeAction::List => C::List,
            WorktreeAction::Diff { id } => C::Diff { id: id.clone() },
            WorktreeAction::Merge { id } => C::Merge { id: id.clone() },
            WorktreeAction::Snapshot { id } => C::Snapshot { id: id.clone() },
            WorktreeAction::Remove { id, force } => C::Remove {
                id: id.clone(),
                force: *force,
            },
            WorktreeAction::Prune { force } => C::Prune { force: *force },
        }
    }
}

#[derive(Subcommand)]
enum McpServersAction {
    /// Every configured server: its transport, status and tools.
    List(McpServersFlags),
    /// Start one server: exit 0 when it comes up, 1 (with its error and stderr tail) when not.
    Check {
        name: String,
        #[command(flatten)]
        flags: McpServersFlags,
    },
}

#[derive(clap::Args)]
struct McpServersFlags {
    /// Config file (default: $XDG_CONFIG_HOME/corral/config.toml).
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
    /// More servers, beyond the config's (JSON `{"mcpServers": …}` or TOML
    /// `[mcp_servers.NAME]`).
    #[arg(long, value_name = "FILE")]
    mcp_config: Option<PathBuf>,
    /// The session root the servers start in (default: the current directory).
    #[arg(short = 'C', long = "cwd", value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// One JSON array of the servers instead of text.
    #[arg(long)]
    json: bool,
}

impl From<McpServersAction> for corral::McpServersArgs {
    fn from(action: McpServersAction) -> Self {
        let (command, flags) = match action {
            McpServersAction::List(flags) => (corral::McpServersCommand::List, flags),
            McpServersAction::Check { name, flags } => {
                (corral::McpServersCommand::Check { name }, flags)
            }
        };
        corral::McpServersArgs {
            command,
            config_path: flags.config,
            mcp_config: flags.mcp_config,
            cwd: flags.cwd,
            json: flags.json,
        }
    }
}

#[derive(Subcommand)]
enum PoliciesAction {
    /// Print the effective rules of a preset (a name or a path to a preset file).
    Show { name: String },
}

#[derive(clap::Args)]
struct Run {
    /// The task. Read from stdin when absent.
    prompt: Option<String>,
    /// Print every event envelope as NDJSON on stdout (and nothing else there).
    #[arg(long)]
    json: bool,
    /// A conversation: one turn per line of stdin until EOF or /exit.
    #[arg(short = 'i', long)]
    interactive: bool,
    /// Read permission decisions as NDJSON lines on stdin:
    /// {"requestId":"…","decision":"allow|deny|allow_all|disable|forbid_all|cancel"}.
    #[arg(long)]
    approve_stdin: bool,
    #[command(flatten)]
    session: SessionFlags,
}

#[derive(clap::Args)]
struct Chat {
    /// A first message, sent as the view opens.
    prompt: Option<String>,
    #[command(flatten)]
    session: SessionFlags,
}

/// What a session is opened with, the same for `run` and `chat`.
#[derive(clap::Args)]
struct SessionFlags {
    /// Model spec: ollama:<tag>, openai:<model>, mlx:<model>, llamacpp:<model>,
    /// lmstudio:<model>, vllm:<model>, gguf:<path-to.gguf> (corral runs llama-server for it).
    /// Default: config `model`, else a tool-capable model of a running Ollama.
    #[arg(short = 'm', long)]
    model: Option<String>,
    /// Base URL of the model server (wins over config and OLLAMA_HOST / OPENAI_BASE_URL).
    #[arg(long)]
    base_url: Option<String>,
    /// Working directory: the session root the tools are confined to.
    #[arg(short = 'C', long = "cwd")]
    cwd: Option<PathBuf>,
    /// Most model steps in one turn.
    #[arg(long)]
    max_steps: Option<u32>,
    /// Continue a session from its event log.
    #[arg(long, value_name = "ID")]
    resume: Option<String>,
    /// Extra instructions appended to the system prompt.
    #[arg(long, value_name = "TEXT")]
    system: Option<String>,
    /// Load no project instructions (AGENTS.md) into the system prompt.
    #[arg(long)]
    no_instructions: bool,
    /// Config file (default: $XDG_CONFIG_HOME/corral/config.toml).
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
    /// MCP servers this session takes tools from, beyond the config's (JSON
    /// `{"mcpServers": …}` or TOML `[mcp_servers.NAME]`).
    #[arg(long, value_name = "FILE")]
    mcp_config: Option<PathBuf>,
    /// Tool choice sent to servers that take it.
    #[arg(long, value_enum)]
    tool_choice: Option<ToolChoiceArg>,
    /// System prompt and tool descriptions: compact (short, for small windows), full, or auto
    /// (compact when the model's window is 8192 tokens or less). Default: config `prompt`, else
    /// auto.
    #[arg(long = "prompt", value_name = "compact|full|auto")]
    prompt_mode: Option<corral::PromptMode>,
    /// How hard the model reasons: low, medium or high (Ollama think, reasoning_effort,
    /// claude --effort, codex effort). Wins over a /high suffix on --model. Default: config
    /// `effort`, else the model's own.
    #[arg(long, value_name = "low|medium|high")]
    effort: Option<corral::Effort>,
    /// Permission preset (default, readonly, auto, specialist, bypass, or your own) or a path
    /// to a preset file.
    #[arg(short = 'p', long = "permission", value_name = "PRESET|PATH")]
    permission: Option<String>,
    /// Run tools up to this danger level without asking.
    #[arg(long, value_enum, value_name = "LEVEL")]
    auto_approve: Option<AutoApproveArg>,
    /// Offer these tools and run them without asking.
    #[arg(long, value_delimiter = ',', value_name = "TOOL[,TOOL]")]
    allow: Vec<String>,
    /// Never offer these tools.
    #[arg(long, value_delimiter = ',', value_name = "TOOL[,TOOL]")]
    deny: Vec<String>,
    /// Work in a new git worktree of the current repository, on branch corral/<session-id>;
    /// kept afterwards if it holds changes (see `corral worktree`), removed if not.
    #[arg(long)]
    worktree: bool,
    /// For an external agent (claude, acp:…, codex): give it a private HOME and config
    /// directory instead of yours, so its settings and logins are its own.
    #[arg(long)]
    hermetic: bool,
    /// Confinement of shell and python: strict refuses to run them unless everything is
    /// enforced; best-effort (default) reports what is not; off runs them unconfined.
    #[arg(long, value_enum, value_name = "MODE")]
    sandbox: Option<SandboxArg>,
    /// Network for shell and python (off: an empty network namespace plus landlock rules).
    #[arg(long, value_enum, value_name = "on|off")]
    network: Option<NetworkArg>,
}

#[derive(Clone, Copy, ValueEnum)]
enum SandboxArg {
    Strict,
    BestEffort,
    Off,
}

#[derive(Clone, Copy, ValueEnum)]
enum NetworkArg {
    On,
    Off,
}

#[derive(Clone, Copy, ValueEnum)]
enum RoleArg {
    User,
    Admin,
}

#[derive(Clone, Copy, ValueEnum)]
enum AutoApproveArg {
    Safe,
    Moderate,
}

#[derive(Clone, Copy, ValueEnum)]
enum ToolChoiceArg {
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

fn main() -> ExitCode {
    // Descriptors corral inherited (a launcher's log, make's jobserver) must reach none of its
    // children: tools, agents, servers. Failing that, the sandbox helper says so for tools.
    let _ = corral::close_inherited_fds();
    // The sandbox helper runs before anything else, clap included: it must stay
    // single-threaded until it execs the tool (see corral's sandbox/confine.rs).
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if argv
        .get(1)
        .is_some_and(|a| a == corral::SANDBOX_HELPER_COMMAND)
    {
        let code = corral::sandbox_exec_main(&argv[2..]);
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { Exit::Usage as u8 } else { 0 });
        }
    };
    // No command: the session view, with whatever session flags were given.
    let command = cli.command.unwrap_or(Command::Chat(Box::new(Chat {
        prompt: None,
        session: *cli.session,
    })));
    // The clipboard helper is plain blocking X11 work: no runtime, no logging.
    if let Command::Clipboard { mode } = &command {
        return ExitCode::from(u8::try_from(corral::clipboard_helper_main(mode)).unwrap_or(1));
    }
    if let Command::Policies { action } = &command {
        return policies(action.as_ref());
    }
    // Plain blocking git work: no runtime either.
    if let Command::Worktree { action } = &command {
        let code = corral::worktree_main(
            &action.into(),
            &mut std::io::stdout().lock(),
            &mut std::io::stderr(),
        );
        return ExitCode::from(code as u8);
    }
    if let Command::Token {
        sub,
        role,
        ttl,
        config,
    } = &command
    {
        return token(sub, *role, ttl, config.as_ref());
    }
    let logs = corral::LogHub::default();
    init_tracing(
        matches!(command, Command::Serve { .. }).then_some(&logs),
        matches!(command, Command::Chat(_)),
    );
    if let Some(code) = reading_command(&command) {
        return code;
    }
    // One session in the terminal is sequential work: a single-threaded runtime saves a
    // cross-thread wake-up per streamed token. The server runs many sessions at once.
    let runtime = if matches!(
        command,
        Command::Serve { .. } | Command::Mcp { .. } | Command::Acp { .. }
    ) {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    };
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(e) => {
            report(&anyhow::anyhow!("cannot start the async runtime: {e}"));
            return ExitCode::from(Exit::Failure as u8);
        }
    };
    let code = runtime.block_on(async {
        catch_file_size_signal();
        match command {
            Command::Run(run) => match RunArgs::try_from(*run) {
                Ok(args) => corral::run(args).await,
                Err(e) => Err(e),
            },
            Command::Chat(chat) => match corral::ChatArgs::try_from(*chat) {
                Ok(args) => corral::chat(args).await,
                Err(e) => Err(e),
            },
            Command::Serve {
                listen,
                allow_remote,
                config,
                no_instructions,
            } => {
                let args = corral::ServeArgs {
                    listen,
                    allow_remote,
                    config_path: config,
                    no_instructions,
                };
                corral::serve(args, logs).await
            }
            Command::Mcp {
                config,
                no_instructions,
            } => corral::mcp(config, no_instructions).await,
            Command::Acp {
                model,
                base_url,
                permission,
                worktree,
                config,
                no_instructions,
                mcp_config,
            } => {
                let (model, effort) = match model_choice(model) {
                    Ok(choice) => choice,
                    Err(e) => return Err(e),
                };
                let mcp_servers = match mcp_config.as_deref().map(corral::load_mcp_config) {
                    Some(Err(e)) => return Err(e),
                    Some(Ok(servers)) => servers,
                    None => corral::McpServers::new(),
                };
                let args = corral::AcpArgs {
                    sessions: OpenSpec {
                        model,
                        effort,
                        base_url,
                        permission,
                        worktree,
                        mcp_servers,
                        ..OpenSpec::default()
                    },
                    config_path: config,
                    no_instructions,
                };
                corral::acp(args).await
            }
            Command::Eval(cli) => match cli.model.parse::<ModelChoice>() {
                Ok(_) => {
                    corral::eval(corral::EvalArgs {
                        model: cli.model,
                        base_url: cli.base_url,
                        tasks: cli.tasks,
                        only: cli.only,
                        max_steps: cli.max_steps,
                        permission: cli.permission,
                        config_path: cli.config,
                        out: cli.out,
                        keep: cli.keep,
                    })
                    .await
                }
                Err(e) => Err(corral::Error::Usage(e.to_string())),
            },
            Command::Doctor { config } => {
                use std::io::Write;
                let text = corral::doctor(config).await;
                let _ = std::io::stdout().write_all(text.as_bytes());
                Ok(Exit::Ok)
            }
            Command::McpServers { action } => {
                use std::io::Write;
                match corral::mcp_servers(action.into()).await {
                    Ok(out) => {
                        let _ = std::io::stdout().write_all(out.stdout.as_bytes());
                        if !out.stderr.is_empty() {
                            report(&anyhow::anyhow!("{}", out.stderr.trim_end()));
                        }
                        Ok(out.exit)
                    }
                    Err(e) => Err(e),
                }
            }
            Command::Top { server, token } => corral::top(corral::TopArgs { server, token }).await,
            Command::Clipboard { .. }
            | Command::Policies { .. }
            | Command::Worktree { .. }
            | Command::Token { .. }
            | Command::Sessions { .. }
            | Command::Logs { .. }
            | Command::Completions { .. }
            | Command::Man => Ok(Exit::Ok),
        }
    });
    // Whatever an exit path left running (a tool ignoring SIGTERM, a group whose background
    // kill was still pending) ends here, synchronously: nothing can drop this wait.
    let left = corral::end_own_children();
    if left > 0 {
        tracing::info!(left, "ended child processes at exit");
    }
    // Blocking stdin readers must not hold the process open.
    runtime.shutdown_background();
    match code {
        Ok(exit) => ExitCode::from(exit as u8),
        Err(e) => {
            let exit = e.exit();
            report(&anyhow::Error::new(e));
            ExitCode::from(exit as u8)
        }
    }
}

/// A write past the file size limit (`ulimit -f`, RLIMIT_FSIZE) raises SIGXFSZ, whose default
/// action kills the process mid-write. Caught, the write fails with EFBIG instead and is
/// handled like any failed write: the event log says so and the session stops. A handler
/// rather than SIG_IGN because an ignored signal stays ignored across exec while a caught one
/// is reset, so tools, agents and model servers keep the default. The handler stays
/// installed after the `Signal` is dropped.
fn catch_file_size_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    if let Err(e) = signal(SignalKind::from_raw(libc::SIGXFSZ)) {
        tracing::warn!(error = %e, "cannot catch SIGXFSZ: a write past the file size limit kills corral");
    }
}

/// The commands that only read files (or the clap definition) and print: plain blocking
/// work, no runtime. `None` for every other command.
fn reading_command(command: &Command) -> Option<ExitCode> {
    use clap::CommandFactory;
    let mut out = std::io::stdout();
    let mut err = std::io::stderr();
    let exit = match command {
        Command::Sessions { json } => corral::sessions_main(*json, &mut out, &mut err),
        Command::Logs { id, follow, json } => {
            let args = corral::LogsArgs {
                id: id.clone(),
                follow: *follow,
                json: *json,
            };
            corral::logs_main(&args, &mut out, &mut err)
        }
        Command::Completions { shell } => {
            generated(corral::write_completions(*shell, Cli::command(), &mut out))
        }
        Command::Man => generated(corral::write_man_page(Cli::command(), &mut out)),
        _ => return None,
    };
    Some(ExitCode::from(exit as u8))
}

/// A generated script or page written out; a reader that stopped early (`| head`) is fine.
fn generated(written: std::io::Result<()>) -> Exit {
    match written {
        Ok(()) => Exit::Ok,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Exit::Ok,
        Err(e) => {
            report(&anyhow::anyhow!("cannot write to stdout: {e}"));
            Exit::Failure
        }
    }
}

fn policies(action: Option<&PoliciesAction>) -> ExitCode {
    use std::io::Write;
    let text = match action {
        None => Ok(corral::list_policies()),
        Some(PoliciesAction::Show { name }) => corral::show_policy(name),
    };
    match text {
        Ok(text) => {
            let _ = std::io::stdout().write_all(text.as_bytes());
            ExitCode::SUCCESS
        }
        Err(e) => {
            report(&anyhow::Error::new(e));
            ExitCode::from(Exit::Usage as u8)
        }
    }
}

#[allow(clippy::print_stderr)]
fn report(e: &anyhow::Error) {
    // Errors can quote a model server's reply or a tool's words.
    eprintln!("corral: {}", corral::escape_for_terminal(&format!("{e:#}")));
}

/// A model spec as the command line gives it, parsed once here, with an effort suffix
/// (`claude:sonnet/high`) split off.
fn model_choice(
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
    fn into_open(self) -> Result<(OpenSpec, Option<PathBuf>, bool), corral::Error> {
        let run = self;
        let (model, suffix_effort) = model_choice(run.model)?;
        let open = OpenSpec {
            resume: run.resume,
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

/// Logs go to stderr, quiet by default (`RUST_LOG=corral=debug` for more). The server also
/// feeds log lines to `/ws/v1/logs`, under the hub's own filter (DEBUG when asked), so the
/// stderr filter is the stderr layer's alone. A full-screen view owns the terminal: its logs
/// go to `$XDG_CACHE_HOME/corral/tui.log` instead (nowhere when that cannot be opened).
fn init_tracing(hub: Option<&corral::LogHub>, full_screen: bool) {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let default = if hub.is_some() { "info" } else { "error" };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Log lines quote model and tool text too.
    let file = full_screen.then(tui_log_file);
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(move || -> Box<dyn std::io::Write> {
            match &file {
                Some(Some(file)) => match file.try_clone() {
                    Ok(file) => Box::new(corral::SafeWriter::new(file)),
                    Err(_) => Box::new(std::io::sink()),
                },
                Some(None) => Box::new(std::io::sink()),
                None => Box::new(corral::SafeWriter::new(std::io::stderr())),
            }
        })
        .with_ansi(false);
    let _ = tracing_subscriber::registry()
        .with(fmt.with_filter(filter))
        .with(hub.map(|h| h.layer()))
        .try_init();
}

fn tui_log_file() -> Option<std::fs::File> {
    let dir = dirs::cache_dir()?.join("corral");
    std::fs::create_dir_all(&dir).ok()?;
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join("tui.log");
    // Started afresh once it is large: it is for the latest runs, not an archive.
    let large = std::fs::metadata(&path).is_ok_and(|m| m.len() > 8 << 20);
    // Log lines can quote prompts, paths and model text: the user's alone.
    std::fs::OpenOptions::new()
        .create(true)
        .append(!large)
        .write(true)
        .truncate(large)
        .mode(0o600)
        .open(path)
        .ok()
}

fn token(sub: &str, role: RoleArg, ttl: &str, config: Option<&PathBuf>) -> ExitCode {
    use std::io::Write;
    let minted = (|| -> anyhow::Result<String> {
        let ttl = corral::parse_ttl(ttl).ok_or_else(|| {
            anyhow::anyhow!("--ttl {ttl:?}: use a number with s, m, h or d (e.g. 24h)")
        })?;
        let config = corral::load_config(config)?;
        let path = corral::default_secret_path().ok_or_else(|| {
            anyhow::anyhow!("cannot find a config directory: set XDG_CONFIG_HOME or HOME")
        })?;
        let secret = corral::load_secret(config.server.jwt_secret.as_deref(), &path)?;
        let role = match role {
            RoleArg::User => corral::ServerRole::User,
            RoleArg::Admin => corral::ServerRole::Admin,
        };
        Ok(corral::Auth::new(&secret)?.mint(sub, role, ttl)?)
    })();
    match minted {
        Ok(token) => {
            let _ = writeln!(std::io::stdout(), "{token}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            report(&e);
            ExitCode::from(Exit::Usage as u8)
        }
    }
}
