//! A real terminal for tests: tmux on a private socket in the harness home, a command in
//! its one pane, keys sent and the screen read back as text.

use std::process::Command;
use std::time::Duration;

use super::Harness;

pub struct Tmux {
    socket: std::path::PathBuf,
}

impl Tmux {
    /// Like [`Tmux::start`], with every byte written to the terminal recorded in `raw` (the
    /// command waits for the recording to begin) and OSC 52 allowed to set tmux's clipboard
    /// buffers, as a terminal that honours it would.
    pub fn start_recorded(h: &Harness, command: &str) -> (Tmux, std::path::PathBuf) {
        let raw = h.home_dir().join("pane.raw");
        let tmux = Tmux::start(h, &format!("read -r _; {command}"));
        tmux.run(&["set-option", "-g", "set-clipboard", "on"]);
        tmux.run(&["pipe-pane", "-O", &format!("cat >> '{}'", raw.display())]);
        tmux.keys("Enter");
        (tmux, raw)
    }

    pub fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux");
        assert!(out.status.success(), "tmux {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn start(h: &Harness, command: &str) -> Tmux {
        Tmux::start_with_env(h, command, &[])
    }

    /// [`Tmux::start`] with more environment for the command.
    pub fn start_with_env(h: &Harness, command: &str, env: &[(&str, &str)]) -> Tmux {
        let socket = h.home_dir().join("tmux.sock");
        let mut tmux = Command::new("tmux");
        tmux.arg("-S")
            .arg(&socket)
            .args(["new-session", "-d", "-x", "160", "-y", "60"]);
        for (key, value) in [
            ("HOME", h.home_dir()),
            ("XDG_CACHE_HOME", h.cache_dir()),
            ("XDG_CONFIG_HOME", h.config_dir()),
            ("XDG_DATA_HOME", h.data_dir()),
        ] {
            tmux.arg("-e").arg(format!("{key}={}", value.display()));
        }
        for (key, value) in env {
            tmux.arg("-e").arg(format!("{key}={value}"));
        }
        tmux.args(["-e", "NO_COLOR=1"]).arg(command);
        let status = tmux
            .status()
            .expect("tmux is installed (scripts/setup installs it)");
        assert!(status.success(), "tmux new-session failed");
        Tmux { socket }
    }

    pub fn screen(&self) -> String {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(["capture-pane", "-p", "-J", "-S", "-100"])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn keys(&self, keys: &str) {
        let status = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(["send-keys", keys])
            .status()
            .expect("tmux send-keys");
        assert!(status.success());
    }

    pub async fn wait_for(&self, needle: &str) -> String {
        for _ in 0..200 {
            let screen = self.screen();
            if screen.contains(needle) {
                return screen;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "{needle:?} never appeared on the terminal:\n{}",
            self.screen()
        );
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .status();
    }
}

impl Tmux {
    /// Like [`Tmux::start`] at a given size.
    pub fn start_sized(h: &Harness, command: &str, width: u16, height: u16) -> Tmux {
        let tmux = Tmux::start(h, command);
        tmux.resize(width, height);
        tmux
    }

    pub fn resize(&self, width: u16, height: u16) {
        self.run(&[
            "resize-window",
            "-x",
            &width.to_string(),
            "-y",
            &height.to_string(),
        ]);
    }

    /// The visible screen only (no scrollback), lines as drawn.
    pub fn visible(&self) -> String {
        self.run(&["capture-pane", "-p"])
    }

    /// Waits until `test` holds for the visible screen; panics with the screen when it never does.
    pub async fn wait_until(&self, what: &str, test: impl Fn(&str) -> bool) -> String {
        for _ in 0..200 {
            let screen = self.visible();
            if test(&screen) {
                return screen;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{what} never showed on the terminal:\n{}", self.visible());
    }

    /// Sends text literally (no key names).
    pub fn type_text(&self, text: &str) {
        self.run(&["send-keys", "-l", text]);
    }

    /// Keeps the screen as text among the CI artifacts (`$CARGO_TARGET_DIR/ci-artifacts`).
    pub fn save(&self, name: &str) {
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"));
        let dir = target.join("ci-artifacts");
        let _ = std::fs::create_dir_all(&dir);
        let _ = std::fs::write(dir.join(format!("{name}.txt")), self.visible());
    }
}
