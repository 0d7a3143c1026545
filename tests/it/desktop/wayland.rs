//! The clipboard tools on Wayland: a headless sway of the test's own (no X display at all),
//! with wl-clipboard's wl-copy and wl-paste as the other programs.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::json;

use super::{eventually, only_result, output_of, unique};
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

    fn paste(&self) -> Option<String> {
        let out = self.wl("wl-paste").arg("--no-newline").output().ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }
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
