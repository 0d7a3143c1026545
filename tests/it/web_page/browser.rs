//! chromedriver driving Debian's chromium over the WebDriver HTTP API, for the page's tests.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};

/// The W3C WebDriver key of an element reference.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

/// chromedriver and the chromium it starts. Dropping it kills both on every way out of the
/// test, a panic included: chromedriver runs in its own process group, and any chromium
/// process that left the group is found by the profile directory only this browser uses.
pub struct Browser {
    driver: std::process::Child,
    http: reqwest::Client,
    base: String,
    session: String,
    profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        use nix::sys::signal::{Signal, kill, killpg};
        use nix::unistd::Pid;
        let group = Pid::from_raw(self.driver.id() as i32);
        let _ = killpg(group, Signal::SIGKILL);
        let marker = self.profile.path().to_string_lossy().into_owned();
        if let Ok(entries) = std::fs::read_dir("/proc") {
            for entry in entries.flatten() {
                let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
                    continue;
                };
                let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
                if String::from_utf8_lossy(&cmdline).contains(&marker) {
                    let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
                }
            }
        }
        let _ = self.driver.wait();
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

impl Browser {
    pub async fn start() -> Browser {
        use std::os::unix::process::CommandExt;
        let port = free_port();
        let driver = std::process::Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start chromedriver ({e}): install chromium chromium-driver")
            });
        let profile = tempfile::Builder::new()
            .prefix("corral-web-page-")
            .tempdir()
            .unwrap();
        let mut browser = Browser {
            driver,
            http: reqwest::Client::new(),
            base: format!("http://127.0.0.1:{port}"),
            session: String::new(),
            profile,
        };
        let mut ready = false;
        for _ in 0..100 {
            let status = browser.http.get(format!("{}/status", browser.base)).send();
            if let Ok(res) = status.await
                && let Ok(body) = res.json::<Value>().await
                && body["value"]["ready"] == true
            {
                ready = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(ready, "chromedriver did not become ready");
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1280,1000",
            &format!("--user-data-dir={}", browser.profile.path().display()),
        ];
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": "/usr/bin/chromium", "args": args},
        }}});
        let created = browser.call("POST", "/session", caps).await;
        browser.session = created["sessionId"].as_str().unwrap().to_string();
        browser
    }

    /// One WebDriver command; panics with the driver's message on an error.
    pub async fn call(&self, method: &str, path: &str, body: Value) -> Value {
        let url = format!("{}{path}", self.base);
        let request = match method {
            "GET" => self.http.get(url),
            "DELETE" => self.http.delete(url),
            _ => self.http.post(url).json(&body),
        };
        let res = request.send().await.unwrap();
        let status = res.status();
        let value: Value = res.json().await.unwrap();
        assert!(status.is_success(), "WebDriver {method} {path}: {value}");
        value["value"].clone()
    }

    pub async fn session_call(&self, method: &str, path: &str, body: Value) -> Value {
        let path = format!("/session/{}{path}", self.session);
        self.call(method, &path, body).await
    }

    pub async fn goto(&self, url: &str) {
        self.session_call("POST", "/url", json!({ "url": url }))
            .await;
    }

    pub async fn js(&self, script: &str) -> Value {
        self.session_call(
            "POST",
            "/execute/sync",
            json!({"script": script, "args": []}),
        )
        .await
    }

    pub async fn find(&self, css: &str) -> String {
        let found = self
            .session_call(
                "POST",
                "/element",
                json!({"using": "css selector", "value": css}),
            )
            .await;
        found[ELEMENT_KEY].as_str().unwrap().to_string()
    }

    pub async fn click(&self, css: &str) {
        let id = self.find(css).await;
        self.session_call("POST", &format!("/element/{id}/click"), json!({}))
            .await;
    }

    pub async fn type_into(&self, css: &str, text: &str) {
        let id = self.find(css).await;
        self.session_call(
            "POST",
            &format!("/element/{id}/value"),
            json!({ "text": text }),
        )
        .await;
    }

    /// Polls `expression` (JavaScript) until it is truthy; on timeout, fails with what the
    /// page shows.
    pub async fn wait_for(&self, what: &str, expression: &str) -> Value {
        let script = format!("return ({expression}) || null;");
        for _ in 0..300 {
            let value = self.js(&script).await;
            if !value.is_null() && value != false {
                return value;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let page = self.js("return document.body.innerText;").await;
        panic!(
            "timed out waiting for {what}; the page shows:\n{}",
            page.as_str().unwrap_or("")
        );
    }

    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let data = self.session_call("GET", "/screenshot", Value::Null).await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(data.as_str().unwrap())
            .unwrap();
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"));
        let dir = target.join("ci-artifacts");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, png).unwrap();
        path
    }

    pub async fn quit(&self) {
        self.session_call("DELETE", "", Value::Null).await;
    }
}

/// Where the screenshots went must be visible in the test output.
#[allow(clippy::print_stderr)]
pub fn report(path: &std::path::Path) {
    eprintln!("web page screenshot: {}", path.display());
}
