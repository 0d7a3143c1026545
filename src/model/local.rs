//! `gguf:<file>` models: corral starts a llama.cpp server for the file as a child it owns, on a
//! free loopback port, waits for `/health`, talks to it as an OpenAI-compatible backend, and
//! stops it (the whole process group) when the session ends.
//!
//! A model whose own chat template cannot render tools gets corral's ChatML-with-tools template
//! when it is a ChatML model: llama.cpp's generic fallback makes small models ramble instead of
//! calling tools.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use super::client::{ModelClient, ModelFuture, ModelInfo, ModelStream};
use super::error::ModelError;
use super::gguf;
use super::http::{HttpSettings, RetryObserver};
use super::openai::OpenAiClient;
use super::spec::{ModelSpec, Provider};
use super::types::ChatRequest;
use crate::sandbox::programs::{self, Program, Source};
use crate::sandbox::reaper;

const CHATML_TOOLS: &str = include_str!("../../templates/chatml-tools.jinja");
const LOG_LINES: usize = 40;

#[derive(Debug, Clone, PartialEq)]
pub struct LocalSettings {
    /// The server program and leading arguments; `None`: `llama-server` on PATH, else the one
    /// `scripts/setup` installs under `$XDG_DATA_HOME/corral/llama-server/bin`.
    pub server_command: Option<String>,
    pub context_size: u32,
    /// Generation threads; `None`: every core corral may use (its CPU affinity and cgroup
    /// quota), which on a 2-core machine halves the prompt's evaluation time against one.
    pub threads: Option<u32>,
    /// Parallel slots (concurrent requests). Each session starts its own server and sends one
    /// request at a time, so one slot, which then has the whole context (the server splits
    /// `context_size` among its slots) and keeps the prompt cache of the previous step.
    pub parallel: u32,
    pub startup_timeout: Duration,
    /// A template file to use instead of the model's own.
    pub chat_template_file: Option<PathBuf>,
    pub extra_args: Vec<String>,
}

impl Default for LocalSettings {
    fn default() -> Self {
        LocalSettings {
            server_command: None,
            context_size: 8192,
            threads: None,
            parallel: 1,
            startup_timeout: Duration::from_secs(120),
            chat_template_file: None,
            extra_args: Vec::new(),
        }
    }
}

pub type Progress = Arc<dyn Fn(&str) + Send + Sync>;

fn start_error(message: impl Into<String>) -> ModelError {
    ModelError::Connect {
        url: "local llama-server".into(),
        reason: message.into(),
    }
}

fn default_threads() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
}

/// llama.cpp's server: on PATH, else the copy `scripts/setup` installs.
const LLAMA_SERVER: Program = Program {
    name: "llama-server",
    package: "llama.cpp",
    override_var: None,
    source: Source::LlamaCpp,
};

/// The program and its leading arguments.
fn server_command(settings: &LocalSettings) -> Result<Vec<String>, ModelError> {
    if let Some(command) = &settings.server_command {
        let words: Vec<String> = command.split_whitespace().map(str::to_string).collect();
        if words.is_empty() {
            return Err(start_error("local.server_command is empty"));
        }
        return Ok(words);
    }
    programs::find_installed(LLAMA_SERVER)
        .map(|p| vec![p.display().to_string()])
        .map_err(|e| start_error(e.to_string()))
}

/// The program a `gguf:` model would be served with, found the way a session finds it:
/// `local.server_command`'s first word (a path, or a name on PATH), else `llama-server` on
/// PATH, else the copy `scripts/setup` installs. `Err`: what is missing and how to install it.
pub fn find_server(settings: &LocalSettings) -> Result<PathBuf, String> {
    let words = server_command(settings).map_err(|e| match e {
        ModelError::Connect { reason, .. } => reason,
        e => e.to_string(),
    })?;
    let program = &words[0];
    let found = if program.contains('/') {
        Some(PathBuf::from(program)).filter(|p| programs::is_executable(p))
    } else {
        programs::on_path(program, |name| std::env::var(name).ok())
    };
    found.ok_or_else(|| {
        format!(
            "local.server_command names {program:?}, which is not an executable file or on \
             PATH; fix it, or remove it to use llama-server from PATH or scripts/setup"
        )
    })
}

/// The running server.
struct LocalServer {
    child: Child,
    pgid: i32,
    base_url: String,
    log: Arc<Mutex<VecDeque<String>>>,
    _tracked: Option<reaper::TrackGuard>,
    /// The chat template written for the server, removed once it is up (it is read at
    /// start-up), so not even a corral killed later leaves it behind.
    template: Option<tempfile::NamedTempFile>,
}

impl LocalServer {
    fn log_tail(&self) -> String {
        tail(&self.log)
    }
}

fn tail(log: &Mutex<VecDeque<String>>) -> String {
    let lines = log.lock().unwrap_or_else(|p| p.into_inner());
    lines.iter().cloned().collect::<Vec<_>>().join("\n")
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        // Best effort on every path out; `shutdown` is the orderly way.
        let _ = killpg(Pid::from_raw(self.pgid), Signal::SIGKILL);
    }
}

async fn start(
    model: &Path,
    settings: &LocalSettings,
    progress: &Progress,
) -> Result<LocalServer, ModelError> {
    let template = gguf::chat_template(model).map_err(|e| {
        start_error(format!(
            "cannot read the model file {}: {e}",
            model.display()
        ))
    })?;
    let mut template_file = None;
    let template_path = match &settings.chat_template_file {
        Some(path) => Some(path.clone()),
        None => match template.as_deref() {
            Some(t) if gguf::template_supports_tools(t) => None,
            Some(t) if gguf::template_is_chatml(t) => {
                let mut file = tempfile::Builder::new()
                    .prefix("corral-chatml-tools-")
                    .suffix(".jinja")
                    .tempfile()
                    .map_err(|e| start_error(format!("cannot write the chat template: {e}")))?;
                std::io::Write::write_all(&mut file, CHATML_TOOLS.as_bytes())
                    .map_err(|e| start_error(format!("cannot write the chat template: {e}")))?;
                let path = file.path().to_path_buf();
                template_file = Some(file);
                progress(
                    "the model's chat template has no tool support; using corral's ChatML tool template",
                );
                Some(path)
            }
            _ => {
                progress(
                    "warning: the model's chat template has no tool support; tool calls may fail",
                );
                None
            }
        },
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| start_error(format!("no free loopback port: {e}")))?
        .port();
    let words = server_command(settings)?;
    let mut command = Command::new(&words[0]);
    command
        .args(&words[1..])
        .arg("--model")
        .arg(model)
        .args([
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--jinja",
        ])
        .args(["--ctx-size", &settings.context_size.to_string()])
        .args([
            "--threads",
            &settings.threads.unwrap_or_else(default_threads).to_string(),
        ])
        .args(["--parallel", &settings.parallel.max(1).to_string()])
        .arg("--alias")
        .arg(model.file_stem().unwrap_or_default())
        .args(&settings.extra_args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(path) = &template_path {
        command.arg("--chat-template-file").arg(path);
    }
    let mut child = command
        .spawn()
        .map_err(|e| start_error(format!("cannot start {}: {e}", words[0])))?;
    let pid = child.id().unwrap_or_default();
    let log = Arc::new(Mutex::new(VecDeque::with_capacity(LOG_LINES)));
    for pipe in [
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
    ]
    .into_iter()
    .flatten()
    {
        let log = log.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(pipe).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::debug!(target: "corral::llama_server", "{line}");
                let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
                if log.len() == LOG_LINES {
                    log.pop_front();
                }
                log.push_back(line);
            }
        });
    }
    let mut server = LocalServer {
        child,
        pgid: pid as i32,
        base_url: format!("http://127.0.0.1:{port}/v1"),
        log,
        _tracked: reaper::track(pid, pid, "model-server"),
        template: template_file,
    };
    wait_healthy(&mut server, port, settings.startup_timeout, progress).await?;
    server.template = None;
    Ok(server)
}

async fn wait_healthy(
    server: &mut LocalServer,
    port: u16,
    timeout: Duration,
    progress: &Progress,
) -> Result<(), ModelError> {
    let started = Instant::now();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .map_err(|e| start_error(e.to_string()))?;
    let url = format!("http://127.0.0.1:{port}/health");
    let mut last_report = Instant::now();
    loop {
        if let Ok(Some(status)) = server.child.try_wait() {
            return Err(start_error(format!(
                "llama-server exited during start-up ({status}); its last lines:\n{}",
                server.log_tail()
            )));
        }
        if let Ok(response) = http.get(&url).send().await
            && response.status().is_success()
        {
            progress(&format!(
                "llama-server ready on 127.0.0.1:{port} after {:.1}s",
                started.elapsed().as_secs_f64()
            ));
            return Ok(());
        }
        if started.elapsed() > timeout {
            return Err(start_error(format!(
                "llama-server did not become healthy within {} s; its last lines:\n{}",
                timeout.as_secs(),
                server.log_tail()
            )));
        }
        if last_report.elapsed() >= Duration::from_secs(2) {
            progress(&format!(
                "starting llama-server… {:.0}s",
                started.elapsed().as_secs_f64()
            ));
            last_report = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

struct Running {
    server: tokio::sync::Mutex<Option<LocalServer>>,
    client: OpenAiClient,
}

/// A `gguf:` model: the local server plus an OpenAI-compatible client for it.
pub struct GgufClient {
    spec: ModelSpec,
    path: PathBuf,
    settings: LocalSettings,
    http: HttpSettings,
    progress: Progress,
    running: tokio::sync::OnceCell<Running>,
}

impl GgufClient {
    pub fn new(
        spec: ModelSpec,
        settings: LocalSettings,
        http: HttpSettings,
        progress: Progress,
    ) -> Result<Self, ModelError> {
        let path = PathBuf::from(&spec.model);
        if !path.is_file() {
            return Err(ModelError::ModelNotFound {
                model: spec.model,
                url: "the local filesystem".into(),
                hint: " (gguf: takes the path of a .gguf file)".into(),
            });
        }
        Ok(GgufClient {
            spec,
            path,
            settings,
            http,
            progress,
            running: tokio::sync::OnceCell::new(),
        })
    }

    async fn running(&self) -> Result<&Running, ModelError> {
        self.running
            .get_or_try_init(|| async {
                (self.progress)(&format!(
                    "starting llama-server for {}",
                    self.path.display()
                ));
                let server = start(&self.path, &self.settings, &self.progress).await?;
                let inner_spec = ModelSpec::new(
                    Provider::LlamaCpp,
                    self.path
                        .file_stem()
                        .map(|s| s.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                );
                let client =
                    OpenAiClient::new(inner_spec, server.base_url.clone(), None, self.http, None)?;
                Ok(Running {
                    server: tokio::sync::Mutex::new(Some(server)),
                    client,
                })
            })
            .await
    }
}

impl ModelClient for GgufClient {
    fn spec(&self) -> &ModelSpec {
        &self.spec
    }

    fn base_url(&self) -> &str {
        self.running
            .get()
            .map_or("(not started)", |r| r.client.base_url())
    }

    fn prepare(&self) -> ModelFuture<'_, ModelInfo> {
        Box::pin(async move { self.running().await?.client.prepare().await })
    }

    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest<'a>,
        observer: RetryObserver<'a>,
    ) -> ModelFuture<'a, ModelStream> {
        Box::pin(async move { self.running().await?.client.stream(request, observer).await })
    }

    fn shutdown(&self) -> ModelFuture<'_, ()> {
        Box::pin(async move {
            let Some(running) = self.running.get() else {
                return Ok(());
            };
            let Some(mut server) = running.server.lock().await.take() else {
                return Ok(());
            };
            let group = Pid::from_raw(server.pgid);
            let _ = killpg(group, Signal::SIGTERM);
            if tokio::time::timeout(Duration::from_secs(5), server.child.wait())
                .await
                .is_err()
            {
                let _ = killpg(group, Signal::SIGKILL);
                let _ = server.child.wait().await;
            }
            Ok(())
        })
    }
}
