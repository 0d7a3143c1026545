//! The desktop tools through the xdg-desktop-portal: a headless GNOME of the test's own
//! (gnome-shell, PipeWire, xdg-desktop-portal-gnome; tests/fixtures/desktop/gnome/start.sh)
//! whose compositor offers clients no input or capture protocol, so corral takes pixels from
//! the Screenshot portal and drives the pointer and keyboard through the RemoteDesktop
//! portal. The person's consent dialog is answered by robot.py, which plays the person at the
//! desktop through mutter's own remote desktop API.

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::{decode_png, eventually};
use crate::common::*;
use crate::support::{Cmd, FakeModel, Harness, Reply};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/desktop/gnome")
        .join(name)
}

struct Gnome {
    group: Child,
    env: Vec<(String, String)>,
    run: tempfile::TempDir,
}

impl Gnome {
    async fn start() -> Gnome {
        let run = tempfile::tempdir().unwrap();
        let group = Command::new("bash")
            .arg(fixture("start.sh"))
            .arg(run.path())
            .env_remove("DISPLAY")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(run.path().join("start.log")).unwrap())
            .process_group(0)
            .spawn()
            .expect("bash");
        let mut gnome = Gnome {
            group,
            env: Vec::new(),
            run,
        };
        // Minutes, not seconds: the whole suite runs beside it, and start.sh retries a backend.
        let ready = eventually(Duration::from_secs(300), || {
            gnome.run.path().join("ready").exists()
        })
        .await;
        assert!(
            ready,
            "the GNOME desktop did not come up (scripts/setup installs gnome-shell): {}",
            std::fs::read_to_string(gnome.run.path().join("start.log")).unwrap_or_default()
        );
        let env = std::fs::read_to_string(gnome.run.path().join("env")).unwrap();
        gnome.env = env
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        gnome
    }

    fn var(&self, name: &str) -> &str {
        &self.env.iter().find(|(k, _)| k == name).unwrap().1
    }

    fn command(&self, program: &str) -> Command {
        let mut command = Command::new(program);
        command.env_remove("DISPLAY");
        for (k, v) in &self.env {
            command.env(k, v);
        }
        command
    }

    /// corral run against `server`, on this desktop.
    fn corral(&self, h: &Harness, server: &FakeModel, prompt: &str) -> Cmd {
        let mut cmd = openai_run(h, server, prompt).env("DISPLAY", "");
        for name in [
            "WAYLAND_DISPLAY",
            "XDG_RUNTIME_DIR",
            "DBUS_SESSION_BUS_ADDRESS",
        ] {
            cmd = cmd.env(name, self.var(name));
        }
        cmd
    }
}

impl Drop for Gnome {
    fn drop(&mut self) {
        let group = self.group.id().to_string();
        let _ = Command::new("kill")
            .args(["-TERM", "--", &format!("-{group}")])
            .status();
        std::thread::sleep(Duration::from_millis(500));
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{group}")])
            .status();
        let _ = self.group.wait();
    }
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn on_gnome_the_portal_asks_once_then_clicks_and_keys_reach_the_window() {
    let gnome = Gnome::start().await;
    let h = Harness::new();
    let log = h.work().join("probe.log");
    std::fs::write(&log, "").unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/desktop/gtk_probe.py");
    let _probe = Killed(
        gnome
            .command("/usr/bin/python3")
            .arg(script)
            .arg(&log)
            .arg("corral-gnome-probe")
            .arg("fullscreen")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let answers = h.work().join("consent.log");
    let _person = Killed(
        gnome
            .command("/usr/bin/python3")
            .arg(fixture("robot.py"))
            .arg("consent")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&answers).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c0", "computer", r#"{"action": "screenshot"}"#));
    server.push(Reply::new().tool_call(
        "c1",
        "computer",
        r#"{"action": "left_click", "coordinate": [300, 400], "screenshot_after": false}"#,
    ));
    server.push(Reply::new().tool_call(
        "c2",
        "computer",
        r#"{"action": "type", "text": "hi", "screenshot_after": false}"#,
    ));
    server.push(Reply::new().tool_call(
        "c3",
        "computer",
        r#"{"action": "key", "text": "Return", "screenshot_after": false}"#,
    ));
    server.push(Reply::new().tool_call("c4", "windows", r#"{"action": "list"}"#));
    server.push(Reply::new().text("done"));
    // The model looks once the probe is on screen (and done growing to fill it).
    let mapped = eventually(Duration::from_secs(30), || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("mapped"))
    })
    .await;
    assert!(mapped, "the probe window never showed");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let out = gnome
        .corral(&h, &server, "use the desktop")
        .args(["-p", "bypass"])
        .env("RUST_LOG", "corral=warn")
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let results = out.of_kind("tool_result");
    assert_eq!(results.len(), 5, "{out:?}");
    let shot = &results[0]["data"];
    let image = shot["update"]["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["content"]["type"] == "image")
        .expect("the screenshot");
    let (w, hgt, pixels) = decode_png(image["content"]["data"].as_str().unwrap());
    assert_eq!((w, hgt), (1280, 800), "the whole monitor");
    let i = ((400 * w + 300) * 3) as usize;
    assert_eq!(
        &pixels[i..i + 3],
        &[255, 0, 0],
        "the probe's red half is shown"
    );
    for r in &results[1..4] {
        assert_eq!(r["data"]["result"]["success"], true, "{r}");
    }
    let refused = results[4]["data"]["result"]["error"]
        .as_str()
        .unwrap_or_default();
    assert!(
        refused.contains("tells no program about other"),
        "{refused}"
    );
    assert!(
        eventually(Duration::from_secs(10), || {
            let got = std::fs::read_to_string(&log).unwrap_or_default();
            got.contains("button red 1") && got.contains("char 69") && got.contains("key Return")
        })
        .await,
        "probe log: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let got = std::fs::read_to_string(&log).unwrap();
    assert!(got.contains("char 68"), "h typed: {got}");
    // The person was asked once for the whole session, and told so in the terminal.
    let asked = std::fs::read_to_string(&answers).unwrap_or_default();
    assert_eq!(asked.lines().count(), 1, "{asked}");
    assert!(
        out.stderr.contains("Allow remote interaction"),
        "{}",
        out.stderr
    );
    // The portal's screenshot files do not pile up in the person's home.
    let home = PathBuf::from(gnome.var("HOME"));
    let left: Vec<_> = std::fs::read_dir(&home)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".png"))
        .collect();
    assert!(left.is_empty(), "{left:?}");

    // doctor says the desktop is Wayland and the portal is there, with no X lines.
    let mut doctor = h.corral().args(["doctor"]).env("DISPLAY", "");
    for name in [
        "WAYLAND_DISPLAY",
        "XDG_RUNTIME_DIR",
        "DBUS_SESSION_BUS_ADDRESS",
    ] {
        doctor = doctor.env(name, gnome.var(name));
    }
    let report = doctor.run().await.stdout;
    assert!(
        report
            .contains("display: WAYLAND_DISPLAY=wayland-0: the desktop tools act through Wayland"),
        "{report}"
    );
    assert!(
        report.contains("org.freedesktop.portal.Desktop running (used for input"),
        "{report}"
    );
    assert!(!report.contains("X11 CLIPBOARD"), "{report}");
}
