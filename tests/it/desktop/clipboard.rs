//! The clipboard tools against the display's real CLIPBOARD, with xclip as the other program.

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;

use super::{
    Desktop, desktop, desktop_run, error_of, eventually, only_result, output_of, run_tool, unique,
};
use crate::support::{FakeModel, Harness, Reply};

/// The X11 CLIPBOARD is one per display: clipboard tests take turns.
static CLIPBOARD: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn clipboard_now(d: &Desktop) -> Option<String> {
    let out = run_tool("xclip", &["-selection", "clipboard", "-o"], d);
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The targets the clipboard's owner offers (`None` while nobody owns it).
fn clipboard_targets(d: &Desktop) -> Option<Vec<String>> {
    let out = run_tool(
        "xclip",
        &["-selection", "clipboard", "-t", "TARGETS", "-o"],
        d,
    );
    out.status.success().then(|| {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect()
    })
}

/// Puts `bytes` on the clipboard with xclip (which stays in the background as the owner).
async fn xclip_set(d: &Desktop, target: &str, bytes: &[u8]) {
    let mut child = Command::new("xclip")
        .args(["-selection", "clipboard", "-t", target, "-i"])
        .env("DISPLAY", &d.display)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("xclip (scripts/setup installs it)");
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    // xclip's first process exits once its forked owner is serving.
    assert!(child.wait().unwrap().success());
}

/// Pids of corral clipboard owners serving this display.
fn clipboard_owners(d: &Desktop) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let display = format!("DISPLAY={}", d.display);
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let read = |what| std::fs::read(format!("/proc/{pid}/{what}")).unwrap_or_default();
            let is_owner = read("cmdline")
                .split(|&b| b == 0)
                .collect::<Vec<_>>()
                .windows(2)
                .any(|w| w == [b"__clipboard".as_slice(), b"own".as_slice()]);
            is_owner
                && read("environ")
                    .split(|&b| b == 0)
                    .any(|kv| kv == display.as_bytes())
        })
        .collect()
}

#[tokio::test]
async fn a_copied_value_stays_on_the_clipboard_after_corral_exits() {
    let d = desktop();
    let _turn = CLIPBOARD.lock().await;
    let harness = Harness::new();
    let first = format!("first {} ✓", unique("corral-clip"));
    let second = format!("second {}\nwith two lines", unique("corral-clip"));
    for value in [&first, &second] {
        let server = FakeModel::start().await;
        let args = json!({ "text": value }).to_string();
        server.push(Reply::new().tool_call("c1", "clipboard_write", &args));
        server.push(Reply::new().text("Copied."));
        let out = desktop_run(&harness, &server, &d, "copy it").run().await;
        let chars = value.chars().count();
        assert_eq!(
            output_of(&only_result(&out)),
            format!("copied {chars} characters")
        );
        // corral has exited; a separate program reads the value from the detached owner.
        assert_eq!(clipboard_now(&d).as_deref(), Some(value.as_str()));
    }
    // Taking the selection ended the first owner; only the second one still serves.
    assert!(
        eventually(Duration::from_secs(3), || clipboard_owners(&d).len() == 1).await,
        "owners still running: {:?}",
        clipboard_owners(&d)
    );
    // Another program copying something ends the last one too.
    xclip_set(&d, "UTF8_STRING", b"taken over").await;
    assert!(
        eventually(Duration::from_secs(3), || clipboard_owners(&d).is_empty()).await,
        "owners still running: {:?}",
        clipboard_owners(&d)
    );
}

#[tokio::test]
async fn clipboard_read_returns_what_another_program_copied() {
    let d = desktop();
    let _turn = CLIPBOARD.lock().await;
    let value = format!("héllo from xclip ✓ {}", unique("xclip"));
    xclip_set(&d, "UTF8_STRING", value.as_bytes()).await;
    assert!(
        eventually(Duration::from_secs(5), || clipboard_now(&d).as_deref()
            == Some(&value))
        .await,
        "xclip did not take the clipboard"
    );
    let harness = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c1", "clipboard_read", "{}"));
    server.push(Reply::new().text("Got it."));
    let out = desktop_run(&harness, &server, &d, "what did I copy?")
        .run()
        .await;
    assert_eq!(output_of(&only_result(&out)), value);

    // An image on the clipboard is not text.
    xclip_set(&d, "image/png", b"\x89PNG not really").await;
    assert!(
        eventually(Duration::from_secs(5), || clipboard_targets(&d)
            .is_some_and(
                |t| t.contains(&"image/png".to_owned()) && !t.iter().any(|t| t == "UTF8_STRING")
            ))
        .await,
        "xclip did not take the clipboard with an image: {:?}",
        clipboard_targets(&d)
    );
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c1", "clipboard_read", "{}"));
    server.push(Reply::new().text("No text."));
    let out = desktop_run(&harness, &server, &d, "what did I copy?")
        .run()
        .await;
    let err = error_of(&only_result(&out));
    assert!(err.starts_with("the clipboard holds no text"), "{err}");
}
