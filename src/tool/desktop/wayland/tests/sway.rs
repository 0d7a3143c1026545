//! A headless sway of the test's own (private runtime directory, pixman renderer, no input
//! devices, no XWayland) and the GTK probe window that logs what it receives.

use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use super::super::super::backend::{Desktop as _, DesktopEnv, Point, Rect, WindowInfo};
use super::super::WaylandDesktop;
use super::eventually;

const CONFIG: &str = "xwayland disable
output HEADLESS-1 resolution 1280x800 position 0 0
default_border none
focus_follows_mouse no
";

/// A GTK window split in a red and a blue half; it logs buttons and scrolls by half, keys by
/// name (with the modifiers held as `combo ctrl+s`), typed characters as code points.
/// The GTK window the tests drive (tests/fixtures/desktop/gtk_probe.py).
const PROBE: &str = include_str!("../../../../../tests/fixtures/desktop/gtk_probe.py");

pub(super) struct Sway {
    child: Child,
    pub env: DesktopEnv,
    dir: tempfile::TempDir,
}

impl Sway {
    pub fn start() -> Sway {
        let dir = tempfile::tempdir().unwrap();
        let runtime = dir.path().join("run");
        std::fs::create_dir(&runtime).unwrap();
        std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
        let config = dir.path().join("config");
        std::fs::write(&config, CONFIG).unwrap();
        let log = std::fs::File::create(dir.path().join("sway.log")).unwrap();
        // sway refuses to run as root (it checks that root cannot be regained); as root, a
        // user namespace with root unmapped satisfies it. The sockets stay reachable.
        let mut command = if rustix::process::geteuid().is_root() {
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
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("sway (scripts/setup installs it)");
        let mut sway = Sway {
            child,
            env: DesktopEnv::default(),
            dir,
        };
        let (display, ipc) = eventually("sway's sockets", || {
            if let Ok(Some(status)) = sway.child.try_wait() {
                panic!("sway exited ({status}): {}", sway.log());
            }
            let names: Vec<String> = std::fs::read_dir(&runtime)
                .ok()?
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect();
            let display = names
                .iter()
                .find(|n| n.starts_with("wayland-") && !n.ends_with(".lock"))?;
            let ipc = names.iter().find(|n| n.starts_with("sway-ipc."))?;
            Some((display.clone(), runtime.join(ipc)))
        });
        sway.env = DesktopEnv {
            wayland_display: Some(display),
            xdg_runtime_dir: Some(runtime.display().to_string()),
            swaysock: Some(ipc.display().to_string()),
            ..DesktopEnv::default()
        };
        // Accepting connections, not only listening.
        eventually("sway to answer", || WaylandDesktop::connect(&sway.env).ok());
        sway
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sway.log")).unwrap_or_default()
    }

    /// The variables a session's tool environment would carry.
    pub fn tool_env(&self) -> Vec<(String, String)> {
        let pairs = [
            ("WAYLAND_DISPLAY", &self.env.wayland_display),
            ("XDG_RUNTIME_DIR", &self.env.xdg_runtime_dir),
            ("SWAYSOCK", &self.env.swaysock),
        ];
        pairs
            .into_iter()
            .filter_map(|(k, v)| Some((k.to_owned(), v.clone()?)))
            .collect()
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

impl Drop for Sway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(super) struct Probe {
    child: Child,
    log: PathBuf,
    title: String,
}

impl Probe {
    pub fn start(sway: &Sway, name: &str) -> Probe {
        let script = sway.path("probe.py");
        if !script.exists() {
            std::fs::write(&script, PROBE).unwrap();
        }
        let log = sway.path(&format!("{name}.log"));
        std::fs::write(&log, "").unwrap();
        let title = format!("probe {name}");
        let child = Command::new("/usr/bin/python3")
            .arg(&script)
            .arg(&log)
            .arg(&title)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", sway.dir.path())
            .env(
                "XDG_RUNTIME_DIR",
                sway.env.xdg_runtime_dir.as_deref().unwrap_or_default(),
            )
            .env(
                "WAYLAND_DISPLAY",
                sway.env.wayland_display.as_deref().unwrap_or_default(),
            )
            .env("GDK_BACKEND", "wayland")
            .env("NO_AT_BRIDGE", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(sway.path(&format!("{name}.err"))).unwrap())
            .spawn()
            .expect("/usr/bin/python3 with python3-gi and gir1.2-gtk-3.0 (scripts/setup)");
        Probe { child, log, title }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The probe's window once sway has it mapped.
    pub fn window(&self, desktop: &mut WaylandDesktop) -> WindowInfo {
        eventually(&format!("the window {:?}", self.title), || {
            desktop
                .windows()
                .ok()?
                .into_iter()
                .find(|w| w.title == self.title && w.geometry.width > 0)
        })
    }

    /// Waits until the probe's window has the keyboard focus.
    pub fn wait_focused(&self, desktop: &mut WaylandDesktop) {
        eventually(&format!("the focus on {:?}", self.title), || {
            let focused = desktop.focused().ok()??;
            (focused.title == self.title).then_some(())
        });
    }

    pub fn wait_line(&self, line: &str) {
        eventually(&format!("{line:?} in {}", self.log.display()), || {
            self.log().lines().any(|l| l == line).then_some(())
        });
    }

    /// The characters typed into the probe so far.
    pub fn typed(&self) -> String {
        self.log()
            .lines()
            .filter_map(|l| l.strip_prefix("char "))
            .filter_map(|hex| char::from_u32(u32::from_str_radix(hex, 16).ok()?))
            .collect()
    }

    /// Waits until the screen shows `rgb` at `at` (the probe has drawn itself).
    pub fn wait_drawn(&self, desktop: &mut WaylandDesktop, at: Point, rgb: [u8; 3]) {
        let spot = Rect {
            x: at.x,
            y: at.y,
            width: 1,
            height: 1,
        };
        eventually(&format!("{rgb:?} at {at:?}"), || {
            let frame = desktop.capture(Some(spot)).ok()?;
            (frame.rgb == rgb).then_some(())
        });
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
