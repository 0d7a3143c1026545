//! The `corral` command line. Everything real lives in the library; this is the edge where
//! errors become messages and exit codes.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use corral::{Exit, ModelChoice, OpenSpec, RunArgs};

mod cli;
use cli::*;

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
        Command::Serve { .. } | Command::Node { .. } | Command::Mcp { .. } | Command::Acp { .. }
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
                nats,
            } => {
                let args = corral::ServeArgs {
                    listen,
                    allow_remote,
                    config_path: config,
                    no_instructions,
                    nats,
                };
                corral::serve(args, logs).await
            }
            Command::Node {
                nats,
                name,
                labels,
                capacity,
                config,
                no_instructions,
            } => {
                let args = corral::NodeArgs {
                    nats,
                    name,
                    labels,
                    capacity,
                    config_path: config,
                    no_instructions,
                };
                corral::node(args).await
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
            Command::Init { config, yes, force } => {
                use std::io::IsTerminal;
                let ask = !yes && std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
                let args = corral::InitArgs { config, yes, force };
                let mut input = std::io::stdin().lock();
                corral::init(args, ask, &mut input, &mut std::io::stdout())
                    .await
                    .map(|()| Exit::Ok)
            }
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
        Command::Logs {
            id,
            follow,
            json,
            images,
        } => {
            let args = corral::LogsArgs {
                id: id.clone(),
                follow: *follow,
                json: *json,
                images: images.clone(),
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
