//! `corral serve` started on a terminal prints a link that opens the page signed in: the
//! token rides in the fragment, the page keeps it in the tab and takes it out of the address
//! bar.

use super::browser::{Browser, report};
use crate::support::server::TEST_SECRET;
use crate::support::{Harness, Tmux};

#[tokio::test]
async fn the_link_serve_prints_on_a_terminal_opens_the_page_signed_in() {
    let h = Harness::new();
    let command = format!(
        "USER=ana CORRAL_JWT_SECRET={TEST_SECRET} {} serve --listen 127.0.0.1:0; sleep 60",
        env!("CARGO_BIN_EXE_corral")
    );
    // Wide enough that the link is one line.
    let tmux = Tmux::start_sized(&h, &command, 400, 30);
    let screen = tmux.wait_for("#token=").await;
    tmux.save("serve-link");
    let link = screen
        .split_whitespace()
        .find(|word| word.contains("/#token="))
        .unwrap_or_else(|| panic!("no link on the screen:\n{screen}"))
        .to_string();
    assert!(link.starts_with("http://127.0.0.1:"), "{link}");
    let token = link.split_once("#token=").unwrap().1;
    let claims = corral::Auth::new(TEST_SECRET.as_bytes())
        .unwrap()
        .verify(token)
        .unwrap();
    assert_eq!(claims.sub, "ana");
    assert!(claims.is_admin(), "whoever started the server is its admin");
    let hours = claims.remaining().as_secs() / 3600;
    assert!((11..=12).contains(&hours), "{hours} h");
    assert!(
        screen.contains("signed in as ana, admin, for 12 hours"),
        "{screen}"
    );

    let browser = Browser::start().await;
    browser.goto(&link).await;
    browser
        .wait_for(
            "the page signed in",
            "document.getElementById('conn').textContent === 'signed in'
                && document.getElementById('token-form').hidden",
        )
        .await;
    let url = browser.js("return location.href;").await;
    let base = link.split_once('#').unwrap().0;
    assert_eq!(url, base, "the token left the address bar");
    let kept = browser
        .js("return sessionStorage.getItem('corral-token');")
        .await;
    assert_eq!(kept, token, "the tab keeps it for its requests");
    let shot = browser.screenshot("web-page-signed-in.png").await;
    report(&shot);
    browser.quit().await;
}
