//! Sessions on the page: made in a worktree from the form, its diff viewed, closed with the
//! page's button; "connected" only once a token has worked; a server that stays away shown
//! as one counted line, not a line per attempt.

use serde_json::{Value, json};

use super::browser::{Browser, report};
use super::{create_session, open_session};
use crate::support::server::Server;
use crate::support::{FakeModel, Harness, Reply};

fn git(h: &Harness, args: &[&str]) {
    crate::common::git(&h.work(), args);
}

#[tokio::test]
async fn a_worktree_session_made_from_the_form_shows_its_diff_and_closes_from_the_page() {
    let h = Harness::new();
    std::fs::write(h.work().join("README"), "a project\n").unwrap();
    git(&h, &["init", "-q", "-b", "main"]);
    git(&h, &["add", "."]);
    git(&h, &["commit", "-q", "-m", "first"]);
    let model = FakeModel::start().await;
    model.push(Reply::new().tool_call(
        "w1",
        "write_file",
        r#"{"path":"note.txt","content":"made by the agent\n"}"#,
    ));
    model.push(Reply::new().text("Wrote note.txt."));
    let server = Server::start(&h, &[]).await;
    let token = server.token("web-user", false);

    let browser = Browser::start().await;
    browser
        .goto(&format!("{}/#token={token}", server.base))
        .await;
    browser
        .wait_for(
            "the token accepted",
            "document.getElementById('conn').textContent === 'signed in'",
        )
        .await;
    browser
        .type_into("#new-cwd", h.work().to_str().unwrap())
        .await;
    browser.type_into("#new-model", "llamacpp:fake-model").await;
    browser
        .type_into("#new-base-url", &model.openai_base())
        .await;
    browser.click("#new-permission option[value=auto]").await;
    browser.click("#new-worktree").await;
    browser.click("#create-form button[type=submit]").await;
    browser
        .wait_for(
            "the new session's socket",
            "document.querySelector('#sessions [aria-current=true]')
                && document.getElementById('conn').textContent === 'connected'",
        )
        .await;
    let (_, listed) = server.get("/api/v1/sessions", &token).await;
    let session = &listed["sessions"][0];
    let id = session["id"].as_str().unwrap().to_string();
    let worktree = std::path::PathBuf::from(
        session["worktree"]
            .as_str()
            .unwrap_or_else(|| panic!("made in a worktree: {session}")),
    );

    browser.type_into("#message", "Write a note").await;
    browser.click("#send").await;
    browser
        .wait_for(
            "the end of the turn",
            "document.querySelector('#log .done')",
        )
        .await;
    assert_eq!(
        std::fs::read_to_string(worktree.join("note.txt")).unwrap(),
        "made by the agent\n"
    );
    assert!(
        !h.work().join("note.txt").exists(),
        "the project is untouched"
    );
    browser.click("#worktree-toggle").await;
    browser
        .wait_for(
            "the worktree's diff",
            "document.getElementById('worktree-diff').textContent.includes('+made by the agent')",
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
    let added = browser
        .js("return [...document.querySelectorAll('#worktree-diff .diff-add')].map(l => l.textContent);")
        .await;
    assert_eq!(added, json!(["+made by the agent\n"]));
    let shot = browser.screenshot("web-page-worktree-form.png").await;
    report(&shot);

    // Closing asks twice; then the header and the list both say closed.
    browser.click("#close-session").await;
    let armed = browser
        .js("return document.getElementById('close-session').textContent;")
        .await;
    assert_eq!(armed, "Close it: click again");
    let (_, before) = server.get(&format!("/api/v1/sessions/{id}"), &token).await;
    assert_ne!(before["status"], "dead", "one click closes nothing");
    browser.click("#close-session").await;
    let statuses = browser
        .wait_for(
            "the closed session",
            "(() => { const h = document.querySelector('#session-status .status')?.innerText;
                      const l = document.querySelector('#sessions [aria-current=true] .status')?.innerText;
                      return h === 'closed' && l === 'closed' && [h, l]; })()",
        )
        .await;
    assert_eq!(statuses, json!(["closed", "closed"]));
    let (_, after) = server.get(&format!("/api/v1/sessions/{id}"), &token).await;
    assert_eq!(after["status"], "dead");
    let hidden = browser
        .js("return [document.getElementById('close-session').hidden,
                     document.getElementById('message').disabled];")
        .await;
    assert_eq!(hidden, json!([true, true]));
    let shot = browser.screenshot("web-page-closed.png").await;
    report(&shot);
    browser.quit().await;
    drop(browser);
    server.stop().await;
}

/// Records every text the connection line shows from now on.
const WATCH_CONN: &str = "window.__conn = [];
    new MutationObserver((records) => records.forEach((r) =>
        r.addedNodes.forEach((n) => window.__conn.push(n.textContent))))
      .observe(document.getElementById('conn'), {childList: true, characterData: true, subtree: true});";

#[tokio::test]
async fn connected_is_shown_only_once_the_token_has_worked() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let server = Server::start(&h, &[]).await;
    let token = server.token("web-user", false);
    create_session(&h, &server, &model, &token, json!({})).await;
    let browser = Browser::start().await;

    // A token the server refuses: never "connected", and the page asks for another.
    browser
        .goto(&format!("{}/#token=not-a-token", server.base))
        .await;
    browser
        .wait_for(
            "the token form",
            "!document.getElementById('token-form').hidden",
        )
        .await;
    let conn = browser
        .js("return document.getElementById('conn').textContent;")
        .await;
    assert!(
        conn.as_str().unwrap().starts_with("token refused"),
        "{conn}"
    );

    // A socket opened with a token the server then refuses (4001 after the upgrade, as for
    // an expired token or a changed secret) is not "connected", not even for a moment.
    open_session(&browser, &server, &token).await;
    browser.js(WATCH_CONN).await;
    browser
        .js("state.token = 'not-a-token'; disconnect(); connect(); return null;")
        .await;
    browser
        .wait_for(
            "the refused socket",
            "!document.getElementById('token-form').hidden",
        )
        .await;
    let shown = browser.js("return window.__conn;").await;
    assert!(
        !shown.as_array().unwrap().iter().any(|t| t == "connected"),
        "{shown}"
    );
    assert!(shown.to_string().contains("token refused"), "{shown}");
    browser.quit().await;
    drop(browser);
    server.stop().await;
}

#[tokio::test]
async fn a_server_that_stays_away_is_one_line_with_a_count() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let server = Server::start(&h, &[]).await;
    let token = server.token("web-user", false);
    create_session(&h, &server, &model, &token, json!({})).await;
    let browser = Browser::start().await;
    open_session(&browser, &server, &token).await;
    server.stop().await;
    let lines = browser
        .wait_for(
            "three failed reconnects",
            "(() => { const lines = [...document.querySelectorAll('#log .entry.error')];
                      return lines.length && Number(lines[0].dataset.count) >= 3
                        && lines.map(l => l.textContent); })()",
        )
        .await;
    let lines: Vec<Value> = lines.as_array().unwrap().clone();
    assert_eq!(lines.len(), 1, "one line, however many attempts: {lines:?}");
    assert!(
        lines[0].as_str().unwrap().contains("reconnecting"),
        "{lines:?}"
    );
    let shot = browser.screenshot("web-page-reconnects.png").await;
    report(&shot);
    browser.quit().await;
}
