//! The parts of a multi-host deployment for tests: a real `nats-server -js` on a free
//! loopback port with a file store (it can be restarted on the same store), and `corral node`
//! processes, each in a hermetic home of its own as if on its own host.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use super::harness::Harness;

/// Heartbeat every second, a node silent for 3 s is lost: the tests' timers.
pub const CLUSTER_CONFIG: &str = "[nats]\nheartbeat_secs = 1\ndead_after_secs = 3\n";

pub struct Nats {
    child: Option<Child>,
    /// More server arguments (`--auth TOKEN`).
    extra: Vec<String>,
    pub port: u16,
    pub url: String,
    store: tempfile::TempDir,
}

/// The server scripts/install-nats-server installed (`CORRAL_NATS_SERVER` overrides it).
pub fn nats_server() -> std::path::PathBuf {
    if let Some(path) = std::env::var_os("CORRAL_NATS_SERVER") {
        return path.into();
    }
    let venv = std::env::var_os("CORRAL_NATS_VENV")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|home| std::path::Path::new(&home).join(".cache/corral-ci/nats-venv"))
        })
        .unwrap_or_default();
    venv.join("bin/nats-server")
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    listener
        .local_addr()
        .unwrap_or_else(|e| panic!("{e}"))
        .port()
}

impl Nats {
    pub async fn start() -> Nats {
        Nats::start_with(&[]).await
    }

    pub async fn start_with(extra: &[&str]) -> Nats {
        let store = tempfile::Builder::new()
            .prefix("corral-nats-")
            .tempdir()
            .unwrap_or_else(|e| panic!("{e}"));
        let port = free_port();
        let mut nats = Nats {
            child: None,
            extra: extra.iter().map(|a| a.to_string()).collect(),
            port,
            url: format!("nats://127.0.0.1:{port}"),
            store,
        };
        nats.spawn().await;
        nats
    }

    async fn spawn(&mut self) {
        let child = Command::new(nats_server())
            .args([
                "-js",
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-sd",
            ])
            .arg(self.store.path())
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("nats-server: {e} (scripts/install-nats-server installs it)")
            });
        self.child = Some(child);
        for _ in 0..200 {
            if tokio::net::TcpStream::connect(("127.0.0.1", self.port))
                .await
                .is_ok()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("nats-server did not listen on {} within 10 s", self.port);
    }

    /// Stops the server (SIGKILL: no goodbye to its clients) and starts it again on the same
    /// port and store.
    pub async fn restart(&mut self, down_for: Duration) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill().await;
            let _ = child.wait().await;
        }
        tokio::time::sleep(down_for).await;
        self.spawn().await;
    }
}

pub struct Node {
    pub child: Child,
    pub name: String,
    pub host: Harness,
}

impl Node {
    /// `corral node --nats URL --name NAME …` in a home of its own; returns once it
    /// announced itself.
    pub async fn start(nats: &Nats, name: &str, extra: &[&str]) -> Node {
        let host = Harness::new();
        host.write_config(CLUSTER_CONFIG);
        Node::start_on(nats, name, host, extra).await
    }

    /// A node on `host` (its home: a node started again on the host it ran on).
    pub async fn start_on(nats: &Nats, name: &str, host: Harness, extra: &[&str]) -> Node {
        let mut child = Command::new(env!("CARGO_BIN_EXE_corral"))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", host.home_dir())
            .env("XDG_CACHE_HOME", host.cache_dir())
            .env("XDG_CONFIG_HOME", host.config_dir())
            .env("XDG_DATA_HOME", host.data_dir())
            .env("NO_COLOR", "1")
            .args(["node", "--nats", &nats.url, "--name", name])
            .args(extra)
            .current_dir(host.work())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn corral node: {e}"));
        let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
        let mut lines = BufReader::new(stdout).lines();
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("corral node {name} did not start within 30 s"))
            .unwrap_or_else(|e| panic!("reading corral node's stdout: {e}"))
            .unwrap_or_else(|| panic!("corral node {name} exited before announcing itself"));
        assert!(line.starts_with(&format!("corral node: {name} ")), "{line}");
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Node {
            child,
            name: name.to_string(),
            host,
        }
    }

    /// SIGKILL: the node is gone without a word, as a host that lost power.
    pub async fn kill(&mut self) {
        let _ = self.child.kill().await;
        let _ = self.child.wait().await;
    }

    pub fn pid(&self) -> u32 {
        self.child
            .id()
            .unwrap_or_else(|| panic!("node {} has exited", self.name))
    }
}
