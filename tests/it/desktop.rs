//! The desktop tools against a real X display, session bus and notification daemon.
//!
//! Run under `scripts/desktop-session cargo test --test integration desktop::`, which starts
//! Xvfb (1280x800), a private D-Bus session bus and dunst. On a machine whose session already
//! has DISPLAY and DBUS_SESSION_BUS_ADDRESS the tests run there too (and use its clipboard).

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

use crate::common::*;
use crate::support::{Cmd, FakeModel, Harness, Outcome, Reply};

mod clipboard;
mod computer;
mod eval;
mod gnome;
mod wayland;

/// The default `screenshot_max_long_edge`.
const DEFAULT_MAX_EDGE: u32 = 1568;

struct Desktop {
    display: String,
    bus: String,
}

/// The desktop this process runs in; fails (never skips) without one.
fn desktop() -> Desktop {
    let var = |name| std::env::var(name).ok().filter(|v| !v.is_empty());
    match (var("DISPLAY"), var("DBUS_SESSION_BUS_ADDRESS")) {
        (Some(display), Some(bus)) => Desktop { display, bus },
        (display, bus) => panic!(
            "desktop tests need an X display and a D-Bus session bus (DISPLAY {}, \
             DBUS_SESSION_BUS_ADDRESS {}): run them under scripts/desktop-session, e.g. \
             `scripts/desktop-session cargo test --test integration desktop::`",
            if display.is_some() { "set" } else { "unset" },
            if bus.is_some() { "set" } else { "unset" },
        ),
    }
}

/// `corral run --json` with the desktop's display and bus (the harness clears everything else,
/// XDG_CURRENT_DESKTOP included).
fn desktop_run(h: &Harness, server: &FakeModel, d: &Desktop, prompt: &str) -> Cmd {
    // The tools themselves are under test here, not the approval gate.
    let mut cmd = openai_run(h, server, prompt)
        .args(["-p", "bypass"])
        .env("DISPLAY", &d.display)
        .env("DBUS_SESSION_BUS_ADDRESS", &d.bus);
    if let Ok(auth) = std::env::var("XAUTHORITY") {
        cmd = cmd.env("XAUTHORITY", auth);
    }
    cmd
}

/// The one tool result of a run that made one call, after checking the run succeeded.
fn only_result(out: &Outcome) -> Value {
    assert_eq!(out.code, Some(0), "{out:?}");
    let results = out.of_kind("tool_result");
    assert_eq!(results.len(), 1, "{out:?}");
    results[0]["data"].clone()
}

fn output_of(data: &Value) -> String {
    assert_eq!(data["result"]["success"], true, "{data}");
    data["result"]["output"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn error_of(data: &Value) -> String {
    assert_eq!(data["result"]["success"], false, "{data}");
    data["result"]["error"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// A value no other run has put anywhere.
fn unique(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{tag}-{}-{nanos}", std::process::id())
}

fn run_tool(program: &str, args: &[&str], d: &Desktop) -> std::process::Output {
    Command::new(program)
        .args(args)
        .env("DISPLAY", &d.display)
        .env("DBUS_SESSION_BUS_ADDRESS", &d.bus)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program} (scripts/setup installs it): {e}"))
}

/// Polls `check` every 50 ms for up to `limit`.
async fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if check() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn screen_size(d: &Desktop) -> (u32, u32) {
    let out = run_tool("xdpyinfo", &[], d);
    let text = String::from_utf8_lossy(&out.stdout);
    let dims = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("dimensions:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|wxh| wxh.split_once('x'))
        .unwrap_or_else(|| panic!("xdpyinfo shows no dimensions: {text}"));
    (dims.0.parse().unwrap(), dims.1.parse().unwrap())
}

/// The size a screenshot of `w`x`h` is scaled to for a long edge of at most `max`.
fn fitted(w: u32, h: u32, max: u32) -> (u32, u32) {
    let long = w.max(h);
    if long <= max {
        return (w, h);
    }
    let scale = |e: u32| {
        ((u64::from(e) * u64::from(max) + u64::from(long) / 2) / u64::from(long)).max(1) as u32
    };
    (scale(w), scale(h))
}

/// Decodes a base64 PNG; returns its size and RGB(A) pixels.
fn decode_png(data_base64: &str) -> (u32, u32, Vec<u8>) {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data_base64)
        .expect("valid base64");
    let mut reader = png::Decoder::new(std::io::Cursor::new(bytes))
        .read_info()
        .expect("a PNG header");
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).expect("PNG data");
    buf.truncate(info.buffer_size());
    (info.width, info.height, buf)
}

/// Every ACP image block (`{"type":"content","content":{"type":"image",…}}`) in `value`.
fn image_blocks(value: &Value) -> Vec<Value> {
    let mut found = Vec::new();
    match value {
        Value::Object(map) => {
            if map.get("type") == Some(&json!("content"))
                && map.get("content").and_then(|c| c.get("type")) == Some(&json!("image"))
            {
                found.push(map["content"].clone());
            }
            map.values().for_each(|v| found.extend(image_blocks(v)));
        }
        Value::Array(items) => items.iter().for_each(|v| found.extend(image_blocks(v))),
        _ => {}
    }
    found
}

#[tokio::test]
async fn a_screenshot_comes_back_as_a_png_image_of_the_screen() {
    let d = desktop();
    let (w, h) = screen_size(&d);
    let (ew, eh) = fitted(w, h, DEFAULT_MAX_EDGE);
    let harness = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c1", "screenshot", "{}"));
    server.push(Reply::new().text("A black screen."));
    let out = desktop_run(&harness, &server, &d, "what is on screen?")
        .run()
        .await;
    let data = only_result(&out);
    let text = output_of(&data);
    assert!(
        text.starts_with(&format!("screenshot of screen {ew}x{eh}")),
        "{text}"
    );
    let images = image_blocks(&data);
    assert_eq!(
        images.len(),
        1,
        "the tool_result must carry the screenshot as an image content block: {data}"
    );
    assert_eq!(images[0]["mimeType"], "image/png", "{}", images[0]);
    let (pw, ph, _) = decode_png(images[0]["data"].as_str().unwrap());
    assert_eq!((pw, ph), (ew, eh));
}

#[tokio::test]
async fn screenshots_are_downsampled_to_the_long_edge_and_monitors_are_checked() {
    let d = desktop();
    let (w, h) = screen_size(&d);
    let registry = corral::ToolRegistry::builtin().unwrap();
    let screenshot = registry.get("screenshot").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut ctx = corral::ToolContext::new(dir.path().to_path_buf(), "c1");
    let mut settings = (*ctx.settings).clone();
    settings.screenshot_max_long_edge = 640;
    settings.env = vec![("DISPLAY".into(), d.display.clone())];
    if let Ok(auth) = std::env::var("XAUTHORITY") {
        settings.env.push(("XAUTHORITY".into(), auth));
    }
    ctx.settings = Arc::new(settings);

    let (ew, eh) = fitted(w, h, 640);
    let shot = screenshot.tool.call(json!({}), &ctx).await.unwrap();
    assert_eq!(
        shot.text,
        format!("screenshot of screen {ew}x{eh} (downsampled from {w}x{h})")
    );
    assert_eq!(shot.images.len(), 1);
    assert_eq!(shot.images[0].mime_type, "image/png");
    let (pw, ph, pixels) = decode_png(&shot.images[0].data_base64);
    assert_eq!((pw, ph), (ew, eh));
    assert_eq!(
        pixels.len(),
        (pw * ph * 3) as usize,
        "RGB, 8 bits a channel"
    );

    let first = screenshot
        .tool
        .call(json!({"monitor": 0}), &ctx)
        .await
        .unwrap();
    assert!(
        first.text.starts_with("screenshot of monitor 0"),
        "{}",
        first.text
    );
    let err = screenshot
        .tool
        .call(json!({"monitor": 99}), &ctx)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("invalid arguments: monitor 99 does not exist: display")
            && err.contains(" monitor"),
        "{err}"
    );
}

/// A child process killed (and reaped) when dropped, also when the test fails.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Where a window titled `title` is on screen, once it is mapped.
async fn window_origin(d: &Desktop, title: &str) -> (u32, u32) {
    let mut origin = None;
    let mapped = eventually(Duration::from_secs(5), || {
        let info = run_tool("xwininfo", &["-name", title], d);
        let text = String::from_utf8_lossy(&info.stdout);
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.trim().strip_prefix(name))
                .and_then(|v| v.trim().parse::<u32>().ok())
        };
        if text.contains("IsViewable") {
            origin = field("Absolute upper-left X:").zip(field("Absolute upper-left Y:"));
        }
        origin.is_some()
    })
    .await;
    assert!(mapped, "window {title} did not appear");
    origin.unwrap()
}

#[tokio::test]
async fn the_screenshot_shows_what_is_on_screen_in_the_right_colours() {
    // Its window must not come up under another test's click (an action is refused when the
    // window under its point changed, as it should be).
    let _screen = computer::screen().await;
    let d = desktop();
    let title = unique("corral-probe");
    let _window = KillOnDrop(
        Command::new("xmessage")
            .args([
                "-bg",
                "#ff0000",
                "-geometry",
                "300x200+40+60",
                "-title",
                &title,
                "probe",
            ])
            .env("DISPLAY", &d.display)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("xmessage (x11-utils, scripts/setup installs it)"),
    );
    let (x, y) = window_origin(&d, &title).await;

    let registry = corral::ToolRegistry::builtin().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut ctx = corral::ToolContext::new(dir.path().to_path_buf(), "c1");
    let mut settings = (*ctx.settings).clone();
    settings.screenshot_max_long_edge = 0; // full resolution
    settings.env = vec![("DISPLAY".into(), d.display.clone())];
    ctx.settings = Arc::new(settings);
    let screenshot = &registry.get("screenshot").unwrap().tool;
    // Inside the window, clear of its border and text: pure red, so the channels are in
    // RGB order (the server's BGRX turned around) and the capture is where the window is.
    // A mapped window may not be painted yet: shots are taken until it is, or the deadline.
    let probes = [(x + 4, y + 4), (x + 290, y + 190)];
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let shot = screenshot.call(json!({}), &ctx).await.unwrap();
        let (w, _, pixels) = decode_png(&shot.images[0].data_base64);
        let seen: Vec<[u8; 3]> = probes
            .iter()
            .map(|&(px, py)| {
                let at = ((py * w + px) * 3) as usize;
                [pixels[at], pixels[at + 1], pixels[at + 2]]
            })
            .collect();
        if seen.iter().all(|p| *p == [255, 0, 0]) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the window at {probes:?} never showed pure red [255, 0, 0]: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_notification_reaches_the_notification_daemon() {
    let d = desktop();
    let title = unique("corral-notify");
    let harness = Harness::new();
    let server = FakeModel::start().await;
    let args = json!({"title": title, "message": "the build finished", "urgency": "low"});
    server.push(Reply::new().tool_call("c1", "notify", &args.to_string()));
    server.push(Reply::new().text("Told you."));
    let out = desktop_run(&harness, &server, &d, "tell me").run().await;
    let text = output_of(&only_result(&out));
    assert!(
        text.starts_with("notification ") && text.ends_with(" shown"),
        "{text}"
    );
    // dunst lists a notification in its history once it is closed.
    let arrived = eventually(Duration::from_secs(5), || {
        run_tool("dunstctl", &["close-all"], &d);
        let history = run_tool("dunstctl", &["history"], &d);
        String::from_utf8_lossy(&history.stdout).contains(&title)
    })
    .await;
    assert!(arrived, "dunstctl history does not list {title}");
}

/// `[tui] notify_approvals`: an approval nobody answers in the session view becomes a desktop
/// notification (through the notify tool's D-Bus call), once.
#[tokio::test]
async fn a_waiting_approval_in_the_session_view_notifies_the_desktop() {
    let d = desktop();
    let h = Harness::new();
    h.write_config("[tui]\nnotify_approvals = true\nnotify_after_secs = 1\n");
    let server = FakeModel::start().await;
    let marker = unique("approve-me");
    let args = json!({"path": format!("{marker}.txt"), "content": "x"});
    server.push(Reply::new().tool_call("c1", "write_file", &args.to_string()));
    server.push(Reply::new().text("done"));
    let command = format!(
        "{} chat -m llamacpp:m --base-url {} -C {} 'write it'; sleep 60",
        env!("CARGO_BIN_EXE_corral"),
        server.openai_base(),
        h.work().display()
    );
    let mut env = vec![
        ("DISPLAY", d.display.as_str()),
        ("DBUS_SESSION_BUS_ADDRESS", d.bus.as_str()),
    ];
    let auth = std::env::var("XAUTHORITY").unwrap_or_default();
    if !auth.is_empty() {
        env.push(("XAUTHORITY", auth.as_str()));
    }
    let tmux = crate::support::Tmux::start_with_env(&h, &command, &env);
    tmux.wait_until("the approval modal", |s| s.contains("[y] yes"))
        .await;
    let arrived = eventually(Duration::from_secs(10), || {
        run_tool("dunstctl", &["close-all"], &d);
        let history = run_tool("dunstctl", &["history"], &d);
        String::from_utf8_lossy(&history.stdout).contains(&marker)
    })
    .await;
    assert!(arrived, "no notification names the waiting call {marker}");
    crate::tui::answer(&tmux, "n").await;
    tmux.wait_until("the answer", |s| s.contains("write_file → denied"))
        .await;
}

#[tokio::test]
async fn open_url_hands_the_url_to_the_browser() {
    let d = desktop();
    let harness = Harness::new();
    let log = harness.home_dir().join("opened-urls.log");
    let browser = harness.home_dir().join("record-url");
    write_script(
        &browser,
        &format!("printf '%s\\n' \"$*\" >> '{}'", log.display()),
    );
    let url = "https://example.com/c?q=1&r=2#frag";
    let server = FakeModel::start().await;
    let args = json!({ "url": url }).to_string();
    server.push(Reply::new().tool_call("c1", "open_url", &args));
    server.push(Reply::new().text("Opened."));
    // xdg-open honours BROWSER only when it detects no desktop: the harness clears
    // XDG_CURRENT_DESKTOP.
    let out = desktop_run(&harness, &server, &d, "open it")
        .env("BROWSER", &browser)
        .run()
        .await;
    assert_eq!(output_of(&only_result(&out)), format!("opened {url}"));
    assert_eq!(std::fs::read_to_string(&log).unwrap(), format!("{url}\n"));
}

#[tokio::test]
async fn without_a_display_or_bus_the_desktop_tools_say_what_is_missing() {
    let harness = Harness::new();
    let server = FakeModel::start().await;
    // open_url in the middle: three refused calls in a row would end the turn as malformed.
    let calls = [
        ("screenshot", "{}"),
        ("clipboard_read", "{}"),
        ("open_url", r#"{"url":"file:///etc/passwd"}"#),
        ("clipboard_write", r#"{"text":"x"}"#),
        ("notify", r#"{"title":"t","message":"m"}"#),
    ];
    for (i, (name, args)) in calls.iter().enumerate() {
        server.push(Reply::new().tool_call(&format!("c{i}"), name, args));
    }
    server.push(Reply::new().text("Nothing works here."));
    // The harness environment has neither DISPLAY nor DBUS_SESSION_BUS_ADDRESS.
    let out = openai_run(&harness, &server, "try the desktop")
        .args(["-p", "bypass"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let errors: Vec<String> = out
        .of_kind("tool_result")
        .iter()
        .map(|r| error_of(&r["data"]))
        .collect();
    // Not offered at all; a call made anyway is refused before the gate, saying why.
    let withheld =
        |tool: &str, why: &str| format!("{tool} is not available in this session ({why})");
    let display = "no display: DISPLAY is not set";
    let bus = "no session bus: DBUS_SESSION_BUS_ADDRESS is not set";
    let expected = [
        (0, withheld("screenshot", display)),
        (1, withheld("clipboard_read", display)),
        (3, withheld("clipboard_write", display)),
        (4, withheld("notify", bus)),
    ];
    for (i, expected) in expected {
        assert!(errors[i].starts_with(&expected), "{}", errors[i]);
    }
    assert_eq!(
        errors[2],
        "open_url does not open file: URLs; allowed schemes: http, https"
    );
}

#[tokio::test]
async fn with_a_display_and_a_bus_the_desktop_tools_are_offered() {
    let d = desktop();
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("ok"));
    let out = desktop_run(&h, &server, &d, "hi").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let offered = offered_tools(&server, 0);
    for tool in [
        "screenshot",
        "clipboard_read",
        "clipboard_write",
        "notify",
        "open_url",
    ] {
        assert!(offered.iter().any(|t| t == tool), "{tool}: {offered:?}");
    }
    assert!(
        !out.stderr.contains("desktop tools not offered"),
        "{}",
        out.stderr
    );
}

/// Moved here from gate_attacks: the desktop tools are offered only where there is a desktop.
#[tokio::test]
async fn auto_asks_before_a_desktop_tool_once_a_secret_was_read() {
    let d = desktop();
    let h = Harness::new();
    std::fs::write(h.work().join("secret.txt"), "TOPSECRET\n").unwrap();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c1", "shell", r#"{"command":"cat secret.txt"}"#));
    for (i, tool) in ["clipboard_read", "screenshot"].iter().enumerate() {
        server.push(Reply::new().tool_call(&format!("d{i}"), tool, "{}"));
    }
    server.push(Reply::new().text("done"));
    let mut cmd = openai_run(&h, &server, "go")
        .args(["-p", "auto"])
        .env("DISPLAY", &d.display)
        .env("DBUS_SESSION_BUS_ADDRESS", &d.bus);
    if let Ok(auth) = std::env::var("XAUTHORITY") {
        cmd = cmd.env("XAUTHORITY", auth);
    }
    let out = cmd.run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let results = out.of_kind("tool_result");
    assert_eq!(results[0]["data"]["result"]["success"], true, "cat ran");
    for result in &results[1..] {
        let error = error_of(&result["data"]);
        assert!(
            error.contains("needs a person's approval"),
            "ran without a person: {error:?}"
        );
    }
}

fn write_script(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}
