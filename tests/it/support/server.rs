//! `corral serve` for tests: started on a free loopback port in the harness's hermetic home,
//! with a fixed JWT secret so tests can mint tokens; killed (and waited for) on drop.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

use super::harness::Harness;

pub const TEST_SECRET: &str = "corral-test-secret";

pub struct Server {
    pub child: Child,
    /// `http://127.0.0.1:PORT`
    pub base: String,
    /// `ws://127.0.0.1:PORT`
    pub ws_base: String,
    pub home: std::path::PathBuf,
}

impl Server {
    /// Starts the server; `env` adds variables (e.g. CORRAL_WS_IDLE_SECS). Sessions it opens
    /// talk to whatever model the requests name.
    pub async fn start(h: &Harness, env: &[(&str, &str)]) -> Server {
        Server::start_with(h, env, &[]).await
    }

    /// [`Server::start`] with more arguments (`--nats URL`).
    pub async fn start_with(h: &Harness, env: &[(&str, &str)], args: &[&str]) -> Server {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_corral"));
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", h.home_dir())
            .env("XDG_CACHE_HOME", h.cache_dir())
            .env("XDG_CONFIG_HOME", h.config_dir())
            .env("XDG_DATA_HOME", h.data_dir())
            .env("CORRAL_JWT_SECRET", TEST_SECRET)
            .env("NO_COLOR", "1")
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .current_dir(h.work())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn corral serve: {e}"));
        let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
        let mut lines = BufReader::new(stdout).lines();
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("corral serve did not start within 30 s"))
            .unwrap_or_else(|e| panic!("reading corral serve's stdout: {e}"))
            .unwrap_or_else(|| panic!("corral serve exited before listening"));
        let base = line
            .rsplit(' ')
            .next()
            .unwrap_or_else(|| panic!("unexpected first line: {line}"))
            .to_string();
        assert!(base.starts_with("http://127.0.0.1:"), "{line}");
        // Keep draining stdout so the server never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Server {
            ws_base: base.replacen("http://", "ws://", 1),
            base,
            child,
            home: h.home_dir(),
        }
    }

    /// A token signed with the test secret.
    pub fn token(&self, sub: &str, admin: bool) -> String {
        let auth = corral::Auth::new(TEST_SECRET.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        let role = if admin {
            corral::ServerRole::Admin
        } else {
            corral::ServerRole::User
        };
        auth.mint(sub, role, Duration::from_secs(3600))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// A bare HTTP/1.1 POST with a bearer token: enough for tests and benchmarks that need
    /// one REST call. Returns the status and the JSON body (`Null` if none).
    pub async fn post(&self, path: &str, token: &str, body: &Value) -> (u16, Value) {
        self.request("POST", path, token, &body.to_string()).await
    }

    /// A bare HTTP/1.1 DELETE with a bearer token; the status and the JSON body.
    pub async fn request_delete(&self, path: &str, token: &str) -> (u16, Value) {
        self.request("DELETE", path, token, "").await
    }

    /// A bare HTTP/1.1 GET with a bearer token; the status and the JSON body.
    pub async fn get(&self, path: &str, token: &str) -> (u16, Value) {
        self.request("GET", path, token, "").await
    }

    async fn request(&self, method: &str, path: &str, token: &str, body: &str) -> (u16, Value) {
        let addr = self.base.trim_start_matches("http://");
        let mut stream = tokio::net::TcpStream::connect(addr)
            .await
            .unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        stream
            .write_all(request.as_bytes())
            .await
            .unwrap_or_else(|e| panic!("write to {addr}: {e}"));
        let mut response = String::new();
        stream
            .read_to_string(&mut response)
            .await
            .unwrap_or_else(|e| panic!("read from {addr}: {e}"));
        let status = response
            .get(9..12)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("not an HTTP response: {response}"));
        let json = response
            .split_once("\r\n\r\n")
            .map(|(_, b)| serde_json::from_str(b).unwrap_or(Value::Null))
            .unwrap_or(Value::Null);
        (status, json)
    }

    /// SIGTERM and wait (clean shutdown).
    pub async fn stop(mut self) -> std::process::ExitStatus {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
        }
        tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("corral serve did not stop within 20 s of SIGTERM"))
            .unwrap_or_else(|e| panic!("{e}"))
    }
}
