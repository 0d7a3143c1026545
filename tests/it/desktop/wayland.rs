//! The desktop tools on Wayland: a headless sway of the test's own (no X display at all),
//! with wl-clipboard's wl-copy and wl-paste, and a GTK window (tests/fixtures/desktop/
//! gtk_probe.py) as the other programs.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::json;

use super::{decode_png, eventually, only_result, output_of, unique};
use crate::common::*;
use crate::support::{FakeModel, Harness, Reply};

/// A headless sway (see src/tool/desktop/wayland/tests/sway.rs for the same start, commented).
struct Sway {
    child: Child,
    runtime: PathBuf,
    display: String,
    _dir: tempfile::TempDir,
}

impl Sway {
    async fn start() -> Sway {
        let dir = tempfile::tempdir().unwrap();
        let runtime = dir.path().join("run");
        std::fs::create_dir(&runtime).unwrap();
        std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
        let config = dir.path().join("config");
        std::fs::write(&config, "xwayland disable\n").unwrap();
        // sway refuses to run as root; a user namespace with root unmapped satisfies it.
        let as_root = std::fs::metadata("/proc/self").is_ok_and(|m| {
            use std::os::unix::fs::MetadataExt as _;
            m.uid() == 0
        });
        let mut command = if as_root {
            let mut c = Command::new("unshare");
            c.args(["--user", "--map-user=1000", "--map-group=1000", "sway"]);
            c
        } else {
            Command::new("sway")
        };
        let child = command
            .arg("-c")
            .arg(&config)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", dir.path())
            .env("XDG_RUNTIME_DIR", &runtime)
            .env("WLR_BACKENDS", "headless")
            .env("WLR_LIBINPUT_NO_DEVICES", "1")
            .env("WLR_RENDERER", "pixman")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("sway (scripts/setup installs it)");
        let mut sway = Sway {
            child,
            runtime,
            display: String::new(),
            _dir: dir,
        };
        let found = eventually(Duration::from_secs(20), || {
            sway.display = socket(&sway.runtime).unwrap_or_default();
            !sway.display.is_empty()
                && std::os::unix::net::UnixStream::connect(sway.runtime.join(&sway.display)).is_ok()
        })
        .await;
        assert!(
            found,
            "sway did not create its socket in {}",
            sway.runtime.display()
        );
        sway
    }

    fn wl(&self, program: &str) -> Command {
        let mut command = Command::new(program);
        command
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("XDG_RUNTIME_DIR", &self.runtime)
            .env("WAYLAND_DISPLAY", &self.display);
        command
    }

    /// sway's IPC socket, which it makes beside the display's.
    fn ipc(&self) -> PathBuf {
        std::fs::read_dir(&self.runtime)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("sway-ipc."))
            })
            .expect("sway's IPC socket")
    }

    /// The GTK probe window titled `title`, logging to `log`.
    fn probe(&self, title: &str, log: &Path) -> Child {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/desktop/gtk_probe.py");
        std::fs::write(log, "").unwrap();
        self.wl("/usr/bin/python3")
            .arg(script)
            .arg(log)
            .arg(title)
            .env("HOME", self.runtime.parent().unwrap())
            .env("GDK_BACKEND", "wayland")
            .env("NO_AT_BRIDGE", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("/usr/bin/python3 with python3-gi and gir1.2-gtk-3.0 (scripts/setup)")
    }

    fn paste(&self) -> Option<String> {
        let out = self.wl("wl-paste").arg("--no-newline").output().ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// Waits (up to 10 s) for the probe to log `line`.
async fn probe_received(log: &Path, line: &str) {
    let got = eventually(Duration::from_secs(10), || {
        std::fs::read_to_string(log).is_ok_and(|l| l.contains(line))
    })
    .await;
    assert!(
        got,
        "no {line:?} in the probe log: {}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

fn socket(runtime: &Path) -> Option<String> {
    std::fs::read_dir(runtime)
        .ok()?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .find(|n| n.starts_with("wayland-") && !n.ends_with(".lock"))
}

impl Drop for Sway {
    fn drop(&mut self) {
        // The clipboard owners (corral's and wl-copy's) end with the compositor.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn the_clipboard_tools_work_on_wayland_without_an_x_display() {
    let sway = Sway::start().await;
    let harness = Harness::new();
    let run = |server: &FakeModel, prompt: &str| {
        openai_run(&harness, server, prompt)
            .args(["-p", "bypass"])
            .env("WAYLAND_DISPLAY", &sway.display)
            .env("XDG_RUNTIME_DIR", &sway.runtime)
    };

    let value = format!("héllo wayland € {}", unique("wl"));
    let server = FakeModel::start().await;
    let args = json!({ "text": value }).to_string();
    server.push(Reply::new().tool_call("c1", "clipboard_write", &args));
    server.push(Reply::new().text("Copied."));
    let out = run(&server, "copy it").run().await;
    let chars = value.chars().count();
    assert_eq!(
        output_of(&only_result(&out)),
        format!("copied {chars} characters")
    );
    // corral has exited; wl-paste reads the value from the detached owner.
    assert_eq!(sway.paste().as_deref(), Some(value.as_str()));

    let theirs = format!("from wl-copy ✓ {}", unique("wl"));
    let copied = sway.wl("wl-copy").arg(&theirs).status().unwrap();
    assert!(copied.success(), "wl-copy failed");
    assert!(
        eventually(Duration::from_secs(10), || sway.paste().as_deref()
            == Some(&theirs))
        .await,
        "wl-copy did not take the clipboard"
    );
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c1", "clipboard_read", "{}"));
    server.push(Reply::new().text("Got it."));
    let out = run(&server, "what did I copy?").run().await;
    assert_eq!(output_of(&only_result(&out)), theirs);
}

#[tokio::test]
async fn on_sway_a_click_is_approved_on_the_marked_screen_and_a_window_rule_lets_the_next_run() {
    let sway = Sway::start().await;
    let h = Harness::new();
    let log = h.work().join("probe.log");
    let mut probe = sway.probe("corral-sway-probe", &log);
    let ipc = sway.ipc();
    let shown = eventually(Duration::from_secs(20), || {
        let tree = Command::new("swaymsg")
            .args(["-s"])
            .arg(&ipc)
            .args(["-t", "get_tree"])
            .output();
        tree.is_ok_and(|t| String::from_utf8_lossy(&t.stdout).contains("corral-sway-probe"))
    })
    .await;
    assert!(shown, "the probe window never showed");
    let preset = h.work().join("probe.toml");
    std::fs::write(
        &preset,
        "description = \"the probe\"\nauto_approve = \"safe\"\noffer = \"all\"\n\
         [[rules]]\ntool = \"computer\"\nask = [\"title:*\"]\n",
    )
    .unwrap();
    let run = |server: &FakeModel, extra: &[&str]| {
        openai_run(&h, server, "click")
            .args(extra.iter().copied())
            .env("WAYLAND_DISPLAY", &sway.display)
            .env("XDG_RUNTIME_DIR", &sway.runtime)
            .env("SWAYSOCK", &ipc)
    };
    // The probe fills the output: its left half red, its right half blue. A quarter across is
    // red whatever the output's size; the screenshot is the model's first look.
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c0", "computer", r#"{"action": "screenshot"}"#));
    server.push(Reply::new().tool_call(
        "c1",
        "computer",
        r#"{"action": "left_click", "coordinate": [300, 300]}"#,
    ));
    server.push(Reply::new().text("clicked"));
    let mut running = run(
        &server,
        &["--approve-stdin", "-p", preset.to_str().unwrap()],
    )
    .live_stdin()
    .spawn()
    .await;
    let is_request =
        |e: &serde_json::Value| e["kind"] == "permission" && e["data"].get("resolved").is_none();
    // The screenshot asks too (the preset asks for anything with a title); the click's
    // request is the second.
    for n in 0..2 {
        let request = running.wait_for_event(n, is_request).await;
        let id = request["data"]["requestId"].as_str().unwrap().to_owned();
        running
            .send_line(&json!({"requestId": id, "decision": "allow"}).to_string())
            .await;
        if n == 1 {
            let desktop = &request["data"]["desktop"];
            assert_eq!(desktop["window"]["title"], "corral-sway-probe", "{desktop}");
            assert_eq!(desktop["window"]["app"], "corral-probe", "{desktop}");
            let image = desktop["image"]["data_base64"]
                .as_str()
                .expect("a marked screen");
            let (w, _, pixels) = decode_png(image);
            let i = ((300 * w + 300) * 3) as usize;
            assert_eq!(&pixels[i..i + 3], &[235, 20, 60], "the point is marked");
        }
    }
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    probe_received(&log, "button red 1").await;

    // A rule for the probe's application lets a click in it run unasked; `windows` lists it.
    std::fs::write(
        &preset,
        "description = \"the probe\"\nauto_approve = \"moderate\"\noffer = \"all\"\n\
         [[rules]]\ntool = \"computer\"\nallow = [\"window:corral-probe\"]\n",
    )
    .unwrap();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c1", "windows", r#"{"action": "list"}"#));
    server.push(Reply::new().tool_call(
        "c2",
        "computer",
        r#"{"action": "left_click", "coordinate": [1100, 300], "screenshot_after": false}"#,
    ));
    server.push(Reply::new().text("clicked"));
    let out = run(&server, &["-p", preset.to_str().unwrap()]).run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.of_kind("permission").is_empty(),
        "nothing asked: {out:?}"
    );
    let results = out.of_kind("tool_result");
    let list = output_of(&results[0]["data"]);
    assert!(
        list.contains("app=\"corral-probe\" title=\"corral-sway-probe\""),
        "{list}"
    );
    assert_eq!(
        results[1]["data"]["result"]["success"], true,
        "{}",
        results[1]
    );
    probe_received(&log, "button blue 1").await;
    let _ = probe.kill();
    let _ = probe.wait();
}

#[tokio::test]
async fn on_sway_pause_stops_a_running_desktop_turn_and_its_binding_is_taken_back() {
    let sway = Sway::start().await;
    let h = Harness::new();
    let ipc = sway.ipc();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c1", "computer", r#"{"action": "wait", "duration": 25}"#));
    server.push(Reply::new().text("never asked"));
    let running = openai_run(&h, &server, "wait for me")
        .args(["-p", "bypass"])
        .env("WAYLAND_DISPLAY", &sway.display)
        .env("XDG_RUNTIME_DIR", &sway.runtime)
        .env("SWAYSOCK", &ipc)
        .env("RUST_LOG", "corral=warn")
        .spawn()
        .await;
    running
        .wait_for_event(0, |e| {
            e["kind"] == "tool_use" && e["data"]["call"]["status"] == "in_progress"
        })
        .await;
    // The person presses Pause (wtype types through the virtual keyboard, as a keyboard
    // would): sway runs the binding corral made when the action started.
    let mut ended = false;
    let started = std::time::Instant::now();
    while !ended && started.elapsed() < Duration::from_secs(20) {
        let typed = sway.wl("wtype").args(["-k", "Pause"]).status();
        assert!(typed.is_ok_and(|s| s.success()), "wtype (scripts/setup)");
        tokio::time::sleep(Duration::from_millis(200)).await;
        ended = running
            .events_so_far()
            .iter()
            .any(|e| e["kind"] == "result");
    }
    let out = running.wait().await;
    let result = &out.of_kind("result")[0]["data"];
    assert_eq!(result["stopReason"], "cancelled", "{out:?}");
    assert_eq!(
        server.chat_requests().len(),
        1,
        "the model was not asked again"
    );
    assert!(out.stderr.contains("stop key (Pause)"), "{}", out.stderr);
    // corral has exited and taken its binding back: there is none left to remove.
    let unbind = Command::new("swaymsg")
        .arg("-s")
        .arg(&ipc)
        .arg("unbindsym --no-repeat Pause")
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&unbind.stdout).contains("Could not find binding"),
        "{}",
        String::from_utf8_lossy(&unbind.stdout)
    );
}

#[tokio::test]
async fn after_a_screenshot_of_one_output_coordinates_are_in_that_outputs_picture() {
    let sway = Sway::start().await;
    let h = Harness::new();
    let ipc = sway.ipc();
    let swaymsg = |command: &str| {
        let out = Command::new("swaymsg")
            .arg("-s")
            .arg(&ipc)
            .arg(command)
            .output()
            .unwrap();
        assert!(out.status.success(), "swaymsg {command}: {out:?}");
    };
    // A second output to the right of the first, and the probe on it.
    swaymsg("create_output");
    swaymsg("output HEADLESS-1 position 0 0");
    swaymsg("output HEADLESS-2 position 1280 0");
    swaymsg("focus output HEADLESS-2");
    let log = h.work().join("probe.log");
    let mut probe = sway.probe("corral-second-output", &log);
    let mapped = eventually(Duration::from_secs(20), || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("mapped"))
    })
    .await;
    assert!(mapped, "the probe window never showed");
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c0", "screenshot", r#"{"monitor": 1}"#));
    // Near the top-left of the second output's picture: the probe's red half. Read against
    // the whole layout instead, the point would be on the empty first output.
    server.push(Reply::new().tool_call(
        "c1",
        "computer",
        r#"{"action": "left_click", "coordinate": [100, 100], "screenshot_after": false}"#,
    ));
    server.push(Reply::new().text("clicked"));
    let out = openai_run(&h, &server, "click")
        .args(["-p", "bypass"])
        .env("WAYLAND_DISPLAY", &sway.display)
        .env("XDG_RUNTIME_DIR", &sway.runtime)
        .env("SWAYSOCK", &ipc)
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let results = out.of_kind("tool_result");
    assert!(
        output_of(&results[0]["data"]).contains("monitor 1"),
        "{}",
        results[0]
    );
    probe_received(&log, "button red 1").await;
    let _ = probe.kill();
    let _ = probe.wait();
}
