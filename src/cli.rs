//! The command line's definition (clap): every command and its flags. `main.rs` runs them.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

mod session_flags;
pub(crate) use session_flags::*;

#[derive(Parser)]
#[command(
    name = "corral",
    version,
    about = "A sandboxed, tool-executing AI agent runtime with its own LLM loop"
)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Option<Command>,
    /// With no command: the session view, with the session flags of `corral chat`.
    #[command(flatten)]
    pub(crate) session: Box<SessionFlags>,
}

#[derive(Subcommand)]
pub(crate) enum Command {
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
        /// Run sessions on the `corral node`s of this NATS deployment (nats://host:port)
        /// instead of in this process.
        #[arg(long, value_name = "URL")]
        nats: Option<String>,
    },
    /// Run sessions on this host for `corral serve --nats` (announces itself, takes commands
    /// and publishes every envelope over NATS JetStream).
    Node {
        /// The NATS server (nats://host:port).
        #[arg(long, value_name = "URL")]
        nats: String,
        /// This node's name (default: the host name).
        #[arg(long, value_name = "N")]
        name: Option<String>,
        /// Labels sessions may ask for: `gpu,repo=x` (repeatable).
        #[arg(long, value_name = "LABELS")]
        labels: Vec<String>,
        /// Sessions it runs at once (default 8).
        #[arg(long, value_name = "K")]
        capacity: Option<usize>,
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
        /// Model spec for new sessions (as for `corral run -m`: ollama:, openai:, mlx:,
        /// llamacpp:, lmstudio:, vllm:, gguf:, claude, codex, acp:NAME, or a bare name).
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
    /// Find the model servers running here (Ollama, llama.cpp, LM Studio, vLLM) and the model
    /// scripts/setup installed, choose one (asked on a terminal), and write a commented
    /// config.toml that makes it the default.
    Init {
        /// Where to write (default: $XDG_CONFIG_HOME/corral/config.toml).
        #[arg(long, value_name = "PATH")]
        config: Option<PathBuf>,
        /// Take the best model found without asking (also the way without a terminal).
        #[arg(short, long)]
        yes: bool,
        /// Replace an existing file (the old one is kept as config.toml.bak).
        #[arg(long)]
        force: bool,
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
        /// Write every image of the log into DIR, named by event number (the screen after
        /// each desktop action, the marked screen each approval showed), to step through.
        #[arg(long, value_name = "DIR")]
        images: Option<std::path::PathBuf>,
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
pub(crate) struct EvalCli {
    /// Model spec (as for `corral run -m`).
    #[arg(short, long, value_name = "SPEC")]
    pub(crate) model: String,
    /// Base URL of the model server (wins over config and environment).
    #[arg(long, value_name = "URL")]
    pub(crate) base_url: Option<String>,
    /// Directory of tasks (default: ./evals, else the evals/ corral was built with).
    #[arg(long, value_name = "DIR")]
    pub(crate) tasks: Option<PathBuf>,
    /// Run only the tasks whose name contains this (repeatable).
    #[arg(long = "task", value_name = "NAME")]
    pub(crate) only: Vec<String>,
    /// Step limit for every task (default: the task's, else 20).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub(crate) max_steps: Option<u32>,
    /// Permission preset of the runs; each works in a throwaway repository, sandboxed with
    /// the network off.
    #[arg(short, long, value_name = "PRESET", default_value = "bypass")]
    pub(crate) permission: String,
    /// Where the results go as JSON.
    #[arg(long, value_name = "PATH", default_value = "corral-eval.json")]
    pub(crate) out: PathBuf,
    /// Keep each task's working copy (its path is in the JSON).
    #[arg(long)]
    pub(crate) keep: bool,
    /// Config file for the runs (default: $XDG_CONFIG_HOME/corral/config.toml).
    #[arg(long, value_name = "PATH")]
    pub(crate) config: Option<PathBuf>,
}

#[derive(Subcommand)]
pub(crate) enum WorktreeAction {
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
pub(crate) enum McpServersAction {
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
pub(crate) struct McpServersFlags {
    /// Config file (default: $XDG_CONFIG_HOME/corral/config.toml).
    #[arg(long, value_name = "PATH")]
    pub(crate) config: Option<PathBuf>,
    /// More servers, beyond the config's (JSON `{"mcpServers": …}` or TOML
    /// `[mcp_servers.NAME]`).
    #[arg(long, value_name = "FILE")]
    pub(crate) mcp_config: Option<PathBuf>,
    /// The session root the servers start in (default: the current directory).
    #[arg(short = 'C', long = "cwd", value_name = "DIR")]
    pub(crate) cwd: Option<PathBuf>,
    /// One JSON array of the servers instead of text.
    #[arg(long)]
    pub(crate) json: bool,
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
pub(crate) enum PoliciesAction {
    /// Print the effective rules of a preset (a name or a path to a preset file).
    Show { name: String },
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum RoleArg {
    User,
    Admin,
}
