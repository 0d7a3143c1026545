//! The web page at `/`, driven in headless Debian chromium through chromedriver's WebDriver
//! HTTP API: select a session, send a message, watch it stream, approve a write_file in the
//! dialog, see the result, open a worktree session's diff; all under the page's strict CSP.
//! Needs `chromium` and `chromium-driver` (scripts/setup).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};

use crate::support::server::Server;
use crate::support::{FakeModel, Harness, Reply};

/// The W3C WebDriver key of an element reference.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

/// chromedriver and the chromium it starts. Dropping it kills both on every way out of the
/// test, a panic included: chromedriver runs in its own process group, and any chromium
/// process that left the group is found by the profile directory only this browser uses.
struct Browser {
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
    async fn start() -> Browser {
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
    async fn call(&self, method: &str, path: &str, body: Value) -> Value {
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

    async fn session_call(&self, method: &str, path: &str, body: Value) -> Value {
        let path = format!("/session/{}{path}", self.session);
        self.call(method, &path, body).await
    }

    async fn goto(&self, url: &str) {
        self.session_call("POST", "/url", json!({ "url": url }))
            .await;
    }

    async fn js(&self, script: &str) -> Value {
        self.session_call(
            "POST",
            "/execute/sync",
            json!({"script": script, "args": []}),
        )
        .await
    }

    async fn find(&self, css: &str) -> String {
        let found = self
            .session_call(
                "POST",
                "/element",
                json!({"using": "css selector", "value": css}),
            )
            .await;
        found[ELEMENT_KEY].as_str().unwrap().to_string()
    }

    async fn click(&self, css: &str) {
        let id = self.find(css).await;
        self.session_call("POST", &format!("/element/{id}/click"), json!({}))
            .await;
    }

    async fn type_into(&self, css: &str, text: &str) {
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
    async fn wait_for(&self, what: &str, expression: &str) -> Value {
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

    async fn screenshot(&self, name: &str) -> PathBuf {
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

    async fn quit(&self) {
        self.session_call("DELETE", "", Value::Null).await;
    }
}

/// The worktree view: a session working in a worktree of a repository, with one file written
/// there, shows its diff on the page.
async fn worktree_view(
    h: &Harness,
    server: &Server,
    model: &FakeModel,
    token: &str,
    browser: &Browser,
) {
    let git = |args: &[&str]| {
        let status = std::process::Command::new("git")
            .args(args)
            .current_dir(h.work())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "Test")
            .env("GIT_AUTHOR_EMAIL", "test@example.com")
            .env("GIT_COMMITTER_NAME", "Test")
            .env("GIT_COMMITTER_EMAIL", "test@example.com")
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    };
    git(&["init", "-q", "-b", "main"]);
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "first"]);
    let res = reqwest::Client::new()
        .post(format!("{}/api/v1/sessions", server.base))
        .bearer_auth(token)
        .json(&json!({
            "cwd": h.work(),
            "model": "llamacpp:fake-model",
            "base_url": model.openai_base(),
            "worktree": true,
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let session: Value = res.json().await.unwrap();
    let id = session["id"].as_str().unwrap();
    let worktree = PathBuf::from(session["worktree"].as_str().unwrap());
    std::fs::write(worktree.join("note.txt"), "written in the worktree\n").unwrap();

    browser.goto(&format!("{}/", server.base)).await;
    browser
        .wait_for(
            "both sessions in the list",
            "document.querySelectorAll('#sessions .session').length === 2",
        )
        .await;
    browser.click("#sessions li:last-child .session").await;
    browser
        .wait_for(
            "the worktree button",
            "!document.getElementById('worktree-toggle').hidden",
        )
        .await;
    browser.click("#worktree-toggle").await;
    browser
        .wait_for(
            "the worktree diff",
            "document.getElementById('worktree-diff').textContent
                .includes('+written in the worktree')",
        )
        .await;
    let summary = browser
        .js("return document.getElementById('worktree-summary').textContent;")
        .await;
    let summary = summary.as_str().unwrap();
    assert!(
        summary.contains(&format!("branch corral/{id}")),
        "{summary}"
    );
    assert!(summary.contains("1 changed file"), "{summary}");
    let shot = browser.screenshot("web-page-worktree.png").await;
    report(&shot);
}

/// Where the screenshots went must be visible in the test output.
#[allow(clippy::print_stderr)]
fn report(path: &std::path::Path) {
    eprintln!("web page screenshot: {}", path.display());
}

#[tokio::test]
async fn approve_a_write_from_the_web_page() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    model.push(
        Reply::new()
            .reasoning("The user wants a file.")
            .text("Let me write ")
            .text("the file.")
            .tool_call(
                "c1",
                "write_file",
                r#"{"path":"hello.txt","content":"hello from the web page\n"}"#,
            )
            .usage(40, 12)
            .chunk_delay(Duration::from_millis(20)),
    );
    model.push(
        Reply::new()
            .text("I wrote ")
            .text("hello.txt for you.")
            .usage(40, 12)
            .chunk_delay(Duration::from_millis(20)),
    );
    let server = Server::start(&h, &[]).await;
    let token = server.token("web-user", false);
    let http = reqwest::Client::new();
    let res = http
        .post(format!("{}/api/v1/sessions", server.base))
        .bearer_auth(&token)
        .json(&json!({
            "cwd": h.work(),
            "model": "llamacpp:fake-model",
            "permission": "default",
            "base_url": model.openai_base(),
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(
        res.status(),
        201,
        "{}",
        res.text().await.unwrap_or_default()
    );
    let session: Value = res.json().await.unwrap();
    let id = session["id"].as_str().unwrap().to_string();

    // The assets are served with their types and must be revalidated.
    for (path, kind) in [
        ("/", "text/html"),
        ("/assets/app.js", "text/javascript"),
        ("/assets/view.js", "text/javascript"),
        ("/assets/style.css", "text/css"),
    ] {
        let res = http
            .get(format!("{}{path}", server.base))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "{path}");
        let header = |name: &str| {
            res.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string()
        };
        assert!(header("content-type").starts_with(kind), "{path}");
        assert_eq!(header("cache-control"), "no-cache", "{path}");
        // Everything below runs under this policy: no inline code, no framing.
        let csp = header("content-security-policy");
        assert!(csp.contains("script-src 'self'"), "{path}: {csp}");
        assert!(csp.contains("frame-ancestors 'none'"), "{path}: {csp}");
        assert_eq!(header("x-frame-options"), "DENY", "{path}");
    }

    let browser = Browser::start().await;
    browser
        .goto(&format!("{}/?token={token}", server.base))
        .await;
    // The token moved to sessionStorage and left the address bar.
    let url = browser.js("return location.href;").await;
    assert!(!url.as_str().unwrap().contains("token="), "{url}");
    browser
        .wait_for(
            "the session in the list",
            "document.querySelector('#sessions .session')",
        )
        .await;
    browser.click("#sessions .session").await;
    browser
        .wait_for(
            "the WebSocket",
            "document.getElementById('conn').textContent === 'connected'",
        )
        .await;
    let title = browser
        .js("return document.getElementById('session-title').textContent;")
        .await;
    assert!(title.as_str().unwrap().contains(&id[..8]), "{title}");
    browser
        .type_into("#message", "Please write hello.txt")
        .await;
    browser.click("#send").await;

    browser
        .wait_for(
            "the streamed preamble",
            "[...document.querySelectorAll('#log .assistant')]
                .some(e => e.textContent.includes('Let me write the file.'))",
        )
        .await;
    // Thoughts are kept apart from the answer, folded away.
    let thought = browser
        .wait_for(
            "the thought",
            "document.querySelector('#log details.thought')?.textContent",
        )
        .await;
    assert!(
        thought.as_str().unwrap().contains("The user wants a file."),
        "{thought}"
    );
    browser
        .wait_for(
            "the approval dialog",
            "document.getElementById('approval').open",
        )
        .await;
    let tool = browser
        .js("return document.getElementById('approval-tool').textContent;")
        .await;
    assert_eq!(tool, "write_file");
    let params = browser
        .js("return document.getElementById('approval').innerText;")
        .await;
    assert!(
        params.as_str().unwrap().contains("hello from the web page"),
        "the dialog shows the content: {params}"
    );
    // The danger level and the diff come from the pending permission over REST.
    browser
        .wait_for(
            "the diff in the dialog",
            "document.getElementById('approval-diff').textContent
                .includes('+hello from the web page')",
        )
        .await;
    let danger = browser
        .js("return document.getElementById('approval-danger').textContent;")
        .await;
    assert!(danger.as_str().unwrap().starts_with("danger: "), "{danger}");
    let shot = browser.screenshot("web-page-approval.png").await;
    report(&shot);

    // A page opened while the agent waits (here: reloaded, the token now only in
    // sessionStorage) finds the open request over REST and can still answer it.
    browser.goto(&format!("{}/", server.base)).await;
    browser
        .wait_for(
            "the session in the list",
            "document.querySelector('#sessions .session')",
        )
        .await;
    browser.click("#sessions .session").await;
    browser
        .wait_for(
            "the reopened approval dialog",
            "document.getElementById('approval').open",
        )
        .await;
    browser
        .wait_for(
            "the WebSocket",
            "document.getElementById('conn').textContent === 'connected'",
        )
        .await;
    browser.click("#approval [data-action=allow]").await;

    browser
        .wait_for(
            "the tool result",
            "[...document.querySelectorAll('#log .tool-card .tool-result')]
                .some(e => !e.hidden && e.textContent.startsWith('Finished'))",
        )
        .await;
    browser
        .wait_for(
            "the final text",
            "[...document.querySelectorAll('#log .assistant')]
                .some(e => e.textContent.includes('I wrote hello.txt for you.'))",
        )
        .await;
    browser
        .wait_for(
            "the end of the turn",
            "document.querySelector('#log .done')",
        )
        .await;
    assert!(
        !browser
            .js("return document.getElementById('approval').open;")
            .await
            .as_bool()
            .unwrap()
    );
    let written = std::fs::read_to_string(h.work().join("hello.txt")).unwrap();
    assert_eq!(written, "hello from the web page\n");
    // Both model calls' usage (40 + 12 each), summed in the turn's `done`.
    browser
        .wait_for(
            "the turn's usage",
            "document.querySelector('#log .done')?.textContent.includes('104 tokens')",
        )
        .await;
    // The same totals, as the server keeps them per session, in the refreshed list.
    browser
        .wait_for(
            "the session list's usage",
            "document.querySelector('#sessions .session-usage')?.textContent
                .includes('80 in / 24 out tokens')",
        )
        .await;

    let shot = browser.screenshot("web-page.png").await;
    report(&shot);
    // The stylesheet applies under the CSP.
    let display = browser
        .js("return getComputedStyle(document.querySelector('.layout')).display;")
        .await;
    assert_eq!(display, "grid");

    // Readable on a narrow window: one column, nothing wider than the viewport.
    browser
        .session_call("POST", "/window/rect", json!({"width": 420, "height": 900}))
        .await;
    let overflow = browser
        .js("return document.documentElement.scrollWidth > window.innerWidth;")
        .await;
    assert_eq!(
        overflow, false,
        "the page scrolls sideways on a narrow window"
    );
    let shot = browser.screenshot("web-page-narrow.png").await;
    report(&shot);
    browser
        .session_call(
            "POST",
            "/window/rect",
            json!({"width": 1280, "height": 1000}),
        )
        .await;
    worktree_view(&h, &server, &model, &token, &browser).await;
    browser.quit().await;
    drop(browser);
    server.stop().await;
}

/// The page shows the project instructions the session loaded above the conversation, and
/// the model's plan as one box updated in place; the model's step text is text, never markup.
#[tokio::test]
async fn the_page_shows_the_instructions_and_a_plan_updated_in_place() {
    let h = Harness::new();
    std::fs::write(h.work().join("AGENTS.md"), "Keep the tests green.\n").unwrap();
    let model = FakeModel::start().await;
    let plan = |statuses: [&str; 2]| {
        json!({"plan": [
            {"step": "Read <img src=x onerror=alert(1)> the code", "status": statuses[0]},
            {"step": "Fix it", "status": statuses[1]},
        ]})
        .to_string()
    };
    model.push(Reply::new().tool_call("p1", "update_plan", &plan(["in_progress", "pending"])));
    model.push(Reply::new().tool_call("p2", "update_plan", &plan(["completed", "in_progress"])));
    model.push(Reply::new().text("Planned."));
    let server = Server::start(&h, &[]).await;
    let token = server.token("web-user", false);
    let res = reqwest::Client::new()
        .post(format!("{}/api/v1/sessions", server.base))
        .bearer_auth(&token)
        .json(&json!({
            "cwd": h.work(),
            "model": "llamacpp:fake-model",
            "base_url": model.openai_base(),
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);

    let browser = Browser::start().await;
    browser
        .goto(&format!("{}/?token={token}", server.base))
        .await;
    browser
        .wait_for(
            "the session in the list",
            "document.querySelector('#sessions .session')",
        )
        .await;
    browser.click("#sessions .session").await;
    let shown = browser
        .wait_for(
            "the instructions",
            "document.querySelector('#log .instructions')?.textContent",
        )
        .await;
    let agents = h.work().canonicalize().unwrap().join("AGENTS.md");
    assert!(
        shown
            .as_str()
            .unwrap()
            .contains(&format!("{} (22 bytes)", agents.display())),
        "{shown}"
    );
    browser.type_into("#message", "Plan it").await;
    browser.click("#send").await;
    browser
        .wait_for(
            "the end of the turn",
            "document.querySelector('#log .done')",
        )
        .await;
    let steps = browser
        .js("return [...document.querySelectorAll('#log .plan li')]
                .map(li => li.dataset.status + ' ' + li.textContent);")
        .await;
    assert_eq!(
        steps,
        json!([
            "completed ✔Read <img src=x onerror=alert(1)> the code",
            "in_progress ▸Fix it"
        ])
    );
    let boxes = browser
        .js("return [document.querySelectorAll('#log .plan').length,
                     document.querySelectorAll('#log img').length];")
        .await;
    assert_eq!(boxes, json!([1, 0]), "one box, updated in place; no markup");
    let shot = browser.screenshot("web-page-plan.png").await;
    report(&shot);
    browser.quit().await;
}
