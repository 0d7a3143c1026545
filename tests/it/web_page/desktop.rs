//! A desktop action's approval on the page: the marked screenshot as an image built from its
//! base64 alone, the action at its real coordinates, the window it reaches and the text it
//! types, all as text. The request is the `tool_confirm_request` the server's projection sends
//! for a `computer` call (its payload as recorded), fed to the page's own message handler:
//! until the `computer` tool lands, no model can make the server open one.

use base64::Engine;
use serde_json::{Value, json};

use super::browser::{Browser, report};
use super::{create_session, open_session};
use crate::support::server::Server;
use crate::support::{FakeModel, Harness};

/// A screen of noise (it does not compress: the PNG is ~300 KB, as a real screen's is) with a
/// red cross at (170, 150), the point the lead's marker draws.
fn marked_screen() -> String {
    let (width, height) = (340u32, 300u32);
    let mut seed = 0x2545_f491_u32;
    let mut pixels = Vec::with_capacity((width * height * 3) as usize);
    for y in 0..height {
        for x in 0..width {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            let on_cross = (x.abs_diff(170) < 3 && y.abs_diff(150) < 30)
                || (y.abs_diff(150) < 3 && x.abs_diff(170) < 30);
            if on_cross {
                pixels.extend([255, 0, 0]);
            } else {
                pixels.extend(seed.to_le_bytes()[..3].iter().map(|b| b / 2 + 64));
            }
        }
    }
    let mut bytes = Vec::new();
    {
        let mut encoder = png::Encoder::new(&mut bytes, width, height);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header().unwrap();
        writer.write_image_data(&pixels).unwrap();
    }
    assert!(bytes.len() > 250 * 1024, "{} bytes", bytes.len());
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Untrusted text as a hostile window (or model) writes it: markup with handlers, a script,
/// an entity, a closing tag.
const HOSTILE: &str = "<img src=x onerror=\"window.__pwned='title'\"><script>window.__pwned='script'</script>&amp;</dd>";

/// The `tool_confirm_request` payload the projection sends for a desktop request.
fn confirm(id: &str, image: Value) -> Value {
    json!({
        "confirmation_id": id,
        "tool_call_id": format!("call_{id}"),
        "tool": "computer",
        "parameters": {"action": "type", "coordinate": [85, 75], "text": "rm -rf ~"},
        "message": "computer",
        "always": {"offered": false, "scope": "always is not offered: typed text is seen each time"},
        "danger": "dangerous",
        "desktop": {
            "action": "type",
            "description": format!("type 8 characters into XTerm {HOSTILE}"),
            "point": [412, 300],
            "text": format!("rm -rf ~\n{HOSTILE}"),
            "window": {"id": "0x3a00007", "title": HOSTILE, "app": "XTerm", "pid": 4242},
            "image": image,
        },
    })
}

/// Feeds a recorded socket message to the page's handler, as the socket would.
async fn feed(browser: &Browser, payload: &Value) {
    browser
        .js(&format!(
            "dropConfirms(); handle('tool_confirm_request', {payload}); return true;"
        ))
        .await;
}

/// Nothing of the untrusted text became an element or a handler anywhere on the page.
async fn nothing_injected(browser: &Browser) -> Value {
    browser
        .js("return {
               scripts: [...document.querySelectorAll('#approval script, #approval iframe')].length,
               images: [...document.querySelectorAll('#approval img')].map(i => i.id),
               handlers: [...document.querySelectorAll('#approval *')].flatMap(e => [...e.attributes]
                 .filter(a => a.name.startsWith('on')).map(a => e.tagName + ' ' + a.name)),
               pwned: window.__pwned ?? null,
             };")
        .await
}

#[tokio::test]
async fn a_desktop_approval_shows_the_marked_screen_and_its_untrusted_text_as_text() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let server = Server::start(&h, &[]).await;
    let token = server.token("web-user", false);
    create_session(&h, &server, &model, &token, json!({})).await;
    let browser = Browser::start().await;
    open_session(&browser, &server, &token).await;

    let screen = marked_screen();
    let payload = confirm(
        "perm_desk1",
        json!({"mime_type": "image/png", "data_base64": screen}),
    );
    feed(&browser, &payload).await;
    // The image decoded: its real size, from the data: URL of its base64 and nothing else.
    let size = browser
        .wait_for(
            "the marked screenshot",
            "(() => { const i = document.getElementById('approval-screen');
                      return i.complete && i.naturalWidth > 0 && !i.closest('[hidden]')
                        && [i.naturalWidth, i.naturalHeight]; })()",
        )
        .await;
    assert_eq!(size, json!([340, 300]));
    let src = browser
        .js("return document.getElementById('approval-screen').getAttribute('src');")
        .await;
    assert_eq!(
        src.as_str().unwrap(),
        format!("data:image/png;base64,{screen}")
    );
    let shown = browser
        .js("return {
               what: document.getElementById('approval-desktop-what').textContent,
               facts: [...document.querySelectorAll('#approval-desktop-facts dd')]
                 .map(d => d.textContent),
               keys: [...document.querySelectorAll('#approval-desktop-facts dt')]
                 .map(d => d.textContent),
               always: !document.querySelector('#approval [data-action=allow_all]').hidden,
             };")
        .await;
    assert_eq!(
        shown["what"].as_str().unwrap(),
        format!("type 8 characters into XTerm {HOSTILE}")
    );
    assert_eq!(shown["keys"], json!(["action", "window", "text to type"]));
    assert_eq!(shown["facts"][0], "type at (412, 300)");
    assert_eq!(
        shown["facts"][1].as_str().unwrap(),
        format!("XTerm (pid 4242) “{HOSTILE}” [id 0x3a00007]")
    );
    assert_eq!(
        shown["facts"][2].as_str().unwrap(),
        format!("rm -rf ~\n{HOSTILE}")
    );
    assert_eq!(shown["always"], false);
    assert_eq!(
        nothing_injected(&browser).await,
        json!({"scripts": 0, "images": ["approval-screen"], "handlers": [], "pwned": null})
    );
    let shot = browser.screenshot("web-page-desktop-approval.png").await;
    report(&shot);

    // Attack: "images" that are not what they say are not shown, and nothing of them gets in:
    // HTML and SVG under their own types, HTML under image/png, base64 that breaks out of an
    // attribute, and a type that would make the data: URL something else.
    let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    let png_start = &screen[..64];
    let hostile_images = [
        json!({"mime_type": "text/html", "data_base64": b64("<script>window.__pwned='html'</script>")}),
        json!({"mime_type": "image/svg+xml", "data_base64": b64("<svg xmlns='http://www.w3.org/2000/svg' onload=\"window.__pwned='svg'\"/>")}),
        json!({"mime_type": "image/png", "data_base64": b64("<script>window.__pwned='png'</script>")}),
        json!({"mime_type": "image/png", "data_base64": format!("{png_start}\" onerror=\"window.__pwned='attr'")}),
        json!({"mime_type": "image/png;base64,PHNjcmlwdD4=#", "data_base64": png_start}),
        json!("data:image/png;base64,iVBORw0KGgo="),
    ];
    for (i, image) in hostile_images.iter().enumerate() {
        feed(&browser, &confirm(&format!("perm_bad{i}"), image.clone())).await;
        let state = browser
            .wait_for(
                "the refused screenshot",
                "(() => { const refused = document.getElementById('approval-screen-refused');
                          return !refused.hidden && {
                            src: document.getElementById('approval-screen').getAttribute('src'),
                            box: document.getElementById('approval-screen-box').hidden,
                            facts: document.querySelectorAll('#approval-desktop-facts dd').length,
                          }; })()",
            )
            .await;
        assert_eq!(
            state,
            json!({"src": null, "box": true, "facts": 3}),
            "{image}"
        );
        assert_eq!(
            nothing_injected(&browser).await,
            json!({"scripts": 0, "images": ["approval-screen"], "handlers": [], "pwned": null}),
            "{image}"
        );
    }
    let shot = browser
        .screenshot("web-page-desktop-approval-refused.png")
        .await;
    report(&shot);

    // A request that is not a desktop one hides the section again.
    feed(
        &browser,
        &json!({"confirmation_id": "perm_plain", "tool": "shell",
                "parameters": {"command": "ls"}, "message": "Run ls", "danger": "dangerous"}),
    )
    .await;
    let hidden = browser
        .wait_for(
            "a plain request",
            "document.getElementById('approval-tool').textContent === 'shell'
               && document.getElementById('approval-desktop').hidden",
        )
        .await;
    assert_eq!(hidden, true);
    browser.quit().await;
    drop(browser);
    server.stop().await;
}
