//! The X11 backend against a real X server and real clients: the tkinter logger
//! (tests/fixtures/desktop/logger.py), which writes down every click and key it receives, and
//! `xev`. Run under `scripts/desktop-session cargo test --lib desktop::x11`; without a DISPLAY
//! these tests fail (they never skip).
//!
//! They move the one pointer and keyboard of the display, so they take turns (`exclusive`).

mod ewmh;
mod input;
mod windows;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::X11Desktop;
use crate::tool::desktop::backend::{Button, Desktop, Point, WindowInfo};

/// How long a client gets to show up or react; a deadline, not a measurement.
const PATIENCE: Duration = Duration::from_secs(15);

static DISPLAY_IN_USE: Mutex<()> = Mutex::new(());

/// The display to itself for one test, and a connection to it.
fn exclusive() -> (MutexGuard<'static, ()>, X11Desktop) {
    let guard = DISPLAY_IN_USE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let desktop = X11Desktop::connect(&display()).unwrap();
    (guard, desktop)
}

fn display() -> String {
    std::env::var("DISPLAY")
        .ok()
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| {
            panic!(
                "the X11 backend tests need an X display: run them under scripts/desktop-session, \
                 e.g. `scripts/desktop-session cargo test --lib desktop::x11`"
            )
        })
}

/// Polls `check` until it gives a value; panics with `what` (and `context()`) at the deadline.
fn wait_until<T>(
    what: &str,
    mut check: impl FnMut() -> Option<T>,
    context: impl Fn() -> String,
) -> T {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "gave up waiting for {what}; {}",
            context()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A client process, killed (by its pid) when the test ends.
struct Client {
    child: Child,
    log: Option<PathBuf>,
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(log) = &self.log {
            let _ = std::fs::remove_file(log);
        }
    }
}

impl Client {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The logger's lines so far.
    fn lines(&self) -> Vec<Value> {
        let log = self.log.as_ref().unwrap();
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// The first logged line after the first `skip` that `matches`.
    fn wait_line(&self, what: &str, skip: usize, matches: impl Fn(&Value) -> bool) -> Value {
        wait_until(
            what,
            || {
                self.lines()
                    .into_iter()
                    .skip(skip)
                    .find(|line| matches(line))
            },
            || format!("the log has: {:#?}", self.lines()),
        )
    }
}

/// The tkinter logger, titled `title`, at `geometry` (`WxH+X+Y`), shown and ready.
fn logger(title: &str, geometry: &str) -> Client {
    static COUNT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let log = std::env::temp_dir().join(format!(
        "corral-x11-logger-{}-{n}.jsonl",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&log);
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/desktop/logger.py");
    let child = Command::new("python3")
        .arg(&script)
        .arg(&log)
        .arg(title)
        .args(["--geometry", geometry])
        .env("DISPLAY", display())
        // A real desktop's locale: Tk translates keys to UTF-8 text through it.
        .env("LC_ALL", "C.UTF-8")
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let client = Client {
        child,
        log: Some(log),
    };
    client.wait_line("the logger to be ready", 0, |l| l["event"] == "ready");
    client
}

/// `xev` in a window of its own, titled `title`.
fn xev(title: &str, geometry: &str) -> Client {
    let child = Command::new("xev")
        .args(["-geometry", geometry, "-name", title])
        .env("DISPLAY", display())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    Client { child, log: None }
}

/// `xev` with its event report written to `output`.
fn xev_logged(title: &str, geometry: &str, output: &std::path::Path) -> Client {
    let child = Command::new("xev")
        .args(["-geometry", geometry, "-name", title, "-event", "button"])
        .env("DISPLAY", display())
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(output).unwrap())
        .spawn()
        .unwrap();
    Client { child, log: None }
}

/// The listed window titled `title`, once it is there.
fn window_titled(desktop: &mut X11Desktop, title: &str) -> WindowInfo {
    wait_until(
        &format!("a window titled {title:?}"),
        || {
            desktop
                .windows()
                .unwrap()
                .into_iter()
                .find(|w| w.title == title)
        },
        String::new,
    )
}

/// A left click at `at` (screen pixels).
fn click(desktop: &mut X11Desktop, at: Point, button: Button) {
    desktop.move_pointer(at).unwrap();
    desktop.button(button, true).unwrap();
    desktop.button(button, false).unwrap();
}

/// The screen point of the logger widget `name`'s centre (see the layout in logger.py).
fn widget_centre(window: &WindowInfo, name: &str) -> Point {
    let (x, y, w, h) = match name {
        "one" => (10, 10, 100, 40),
        "two" => (130, 10, 100, 40),
        "three" => (250, 10, 100, 40),
        "entry" => (10, 70, 380, 30),
        "text" => (10, 110, 380, 120),
        "pad" => (10, 240, 380, 50),
        other => panic!("no widget {other} in logger.py"),
    };
    Point {
        x: window.geometry.x + x + w / 2,
        y: window.geometry.y + y + h / 2,
    }
}
