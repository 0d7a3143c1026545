//! The `corral` command line. Everything real lives in the library; this is the edge where
//! errors become messages and exit codes.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use corral::{Danger, Exit, RunArgs, ToolChoice};

#[derive(Parser)]
#[command(
    name = "corral",
    version,
    about = "A sandboxed, tool-executing AI agent runtime with its own LLM loop"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one task in the terminal (or a conversation with -i).
    Run(Box<Run>),
    /// List the permission presets, or show what one means in effect.
    Policies {
        #[command(subcommand)]
        action: Option<PoliciesAction>,
    },
    /// Internal: the clipboard tools' helper process (`read`, or `own` to serve a value).
    #[command(name = "__clipboard", hide = true)]
    Clipboard { mode: String },
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
    /// Model spec: ollama:<tag>, openai:<model>, mlx:<model>, llamacpp:<model>,
    /// lmstudio:<model>, vllm:<model>. Default: config `model`, else a tool-capable model of a
    /// running Ollama.
    #[arg(short = 'm', long)]
    model: Option<String>,
    /// Base URL of the model server (wins over config and OLLAMA_HOST / OPENAI_BASE_URL).
    #[arg(long)]
    base_url: Option<String>,
    /// Working directory: the session root the tools are confined to.
    #[arg(short = 'C', long = "cwd")]
    cwd: Option<PathBuf>,
    /// Print every event envelope as NDJSON on stdout (and nothing else there).
    #[arg(long)]
    json: bool,
    /// Most model steps in one turn.
    #[arg(long)]
    max_steps: Option<u32>,
    /// A conversation: one turn per line of stdin until EOF or /exit.
    #[arg(short = 'i', long)]
    interactive: bool,
    /// Continue a session from its event log.
    #[arg(long, value_name = "ID")]
    resume: Option<String>,
    /// Extra instructions appended to the system prompt.
    #[arg(long, value_name = "TEXT")]
    system: Option<String>,
    /// Config file (default: $XDG_CONFIG_HOME/corral/config.toml).
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
    /// Tool choice sent to servers that take it.
    #[arg(long, value_enum)]
    tool_choice: Option<ToolChoiceArg>,
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
    /// Read permission decisions as NDJSON lines on stdin:
    /// {"requestId":"…","decision":"allow|deny|allow_all|disable|forbid_all|cancel"}.
    #[arg(long)]
    approve_stdin: bool,
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
}

impl From<ToolChoiceArg> for ToolChoice {
    fn from(arg: ToolChoiceArg) -> Self {
        match arg {
            ToolChoiceArg::Auto => ToolChoice::Auto,
            ToolChoiceArg::Required => ToolChoice::Required,
            ToolChoiceArg::None => ToolChoice::None,
        }
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { Exit::Usage as u8 } else { 0 });
        }
    };
    // The clipboard helper is plain blocking X11 work: no runtime, no logging.
    if let Command::Clipboard { mode } = &cli.command {
        return ExitCode::from(u8::try_from(corral::clipboard_helper_main(mode)).unwrap_or(1));
    }
    if let Command::Policies { action } = &cli.command {
        return policies(action.as_ref());
    }
    init_tracing();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            report(&anyhow::anyhow!("cannot start the async runtime: {e}"));
            return ExitCode::from(Exit::Failure as u8);
        }
    };
    let code = runtime.block_on(async {
        match cli.command {
            Command::Run(run) => corral::run((*run).into()).await,
            Command::Clipboard { .. } | Command::Policies { .. } => Ok(Exit::Ok),
        }
    });
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
    eprintln!("corral: {e:#}");
}

impl From<Run> for RunArgs {
    fn from(run: Run) -> Self {
        RunArgs {
            prompt: run.prompt,
            model: run.model,
            base_url: run.base_url,
            cwd: run.cwd,
            json: run.json,
            max_steps: run.max_steps,
            interactive: run.interactive,
            resume: run.resume,
            system: run.system,
            config_path: run.config,
            tool_choice: run.tool_choice.map(Into::into),
            permission: run.permission,
            auto_approve: run.auto_approve.map(|level| match level {
                AutoApproveArg::Safe => Danger::Safe,
                AutoApproveArg::Moderate => Danger::Moderate,
            }),
            allow: run.allow,
            deny: run.deny,
            approve_stdin: run.approve_stdin,
        }
    }
}

/// Logs go to stderr, quiet by default (`RUST_LOG=corral=debug` for more): everything a user
/// needs to see already arrives as events.
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}
