//! The web page at `/`, driven in headless Debian chromium through chromedriver's WebDriver
//! HTTP API: select a session, send a message, watch it stream, approve a write_file in the
//! dialog, see the result, open a worktree session's diff; all under the page's strict CSP.
//! Needs `chromium` and `chromium-driver` (scripts/setup).

mod answers;
mod browser;
mod desktop;
mod link;
mod sessions;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use self::browser::{Browser, report};
use crate::support::server::Server;
use crate::support::{FakeModel, Harness, Reply};

/// Opens a session over REST for the fake model; `extra` adds fields to the request body.
async fn create_session(
    h: &Harness,
    server: &Server,
    model: &FakeModel,
    token: &str,
    extra: Value,
) -> String {
    let mut body = json!({
        "cwd": h.work(),
        "model": "llamacpp:fake-model",
        "base_url": model.openai_base(),
    });
    for (key, value) in extra.as_object().into_iter().flatten() {
        body[key] = value.clone();
    }
    let res = reqwest::Client::new()
        .post(format!("{}/api/v1/sessions", server.base))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let session: Value = res.json().await.unwrap();
    session["id"].as_str().unwrap().to_string()
}

/// The page signed in with `token` (through the fragment, as `serve`'s link does), the first
/// listed session selected and its socket answering.
async fn open_session(browser: &Browser, server: &Server, token: &str) {
    browser
        .goto(&format!("{}/#token={token}", server.base))
        .await;
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
        crate::common::git(&h.work(), args);
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
        ("/assets/markdown.js", "text/javascript"),
        ("/assets/vendor/marked.umd.js", "text/javascript"),
        ("/assets/vendor/purify.min.js", "text/javascript"),
        ("/assets/vendor/highlight.min.js", "text/javascript"),
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
        .goto(&format!("{}/#token={token}", server.base))
        .await;
    // The token moved to sessionStorage and left the address bar.
    let url = browser.js("return location.href;").await;
    assert!(!url.as_str().unwrap().contains("token"), "{url}");
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
    let meta = browser
        .js("return document.getElementById('session-meta').textContent;")
        .await;
    assert!(meta.as_str().unwrap().contains(&id[..8]), "{meta}");
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
    // Each answer says what it does in visible words, the terminal's six.
    let buttons = browser
        .js(
            "return [...document.querySelectorAll('#approval [data-action]')]
                .map(b => b.dataset.action + '=' + b.querySelector('strong').innerText);",
        )
        .await;
    assert_eq!(
        buttons,
        json!([
            "allow=Yes",
            "deny=No",
            "allow_all=Always",
            "disable=Disable tool",
            "forbid_all=Forbid all this turn",
            "cancel=Cancel turn"
        ])
    );
    // While it waits, the header and the list say so in the same words.
    let statuses = browser
        .wait_for(
            "the waiting status in the header and the list",
            "(() => { const h = document.querySelector('#session-status .status')?.innerText;
                      const l = document.querySelector('#sessions [aria-current=true] .status')?.innerText;
                      return h === 'needs approval' && h === l && [h, l]; })()",
        )
        .await;
    assert_eq!(statuses, json!(["needs approval", "needs approval"]));
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
    // The approved change stays in the conversation, with the call, after the dialog closed.
    browser
        .wait_for(
            "the approved diff in the conversation",
            "[...document.querySelectorAll('#log .tool-card .tool-diff')]
                .some(d => !d.hidden && d.textContent.includes('+hello from the web page'))",
        )
        .await;
    // The session is named by its first prompt, in the list and the header alike; its
    // status is the same words in both.
    browser
        .wait_for(
            "the title in the list",
            "document.querySelector('#sessions [aria-current=true] .session-title')
                ?.textContent === 'Please write hello.txt'",
        )
        .await;
    let header = browser
        .js(
            "return [document.getElementById('session-title').textContent,
                     document.querySelector('#session-status .status').innerText,
                     document.querySelector('#sessions [aria-current=true] .status').innerText];",
        )
        .await;
    assert_eq!(header, json!(["Please write hello.txt", "idle", "idle"]));
    let (_, listed) = server.get("/api/v1/sessions", &token).await;
    assert_eq!(listed["sessions"][0]["title"], "Please write hello.txt");
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
    // Read back from the history (the page opened again), the approved change is still
    // shown with its call.
    browser.goto(&format!("{}/?again", server.base)).await;
    browser
        .wait_for(
            "the session in the list",
            "document.querySelector('#sessions .session')",
        )
        .await;
    browser.click("#sessions .session").await;
    browser
        .wait_for(
            "the approved diff from the history",
            "[...document.querySelectorAll('#log .tool-card .tool-diff')]
                .some(d => !d.hidden && d.textContent.includes('+hello from the web page'))",
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
