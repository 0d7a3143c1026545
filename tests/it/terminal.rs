//! The approval prompt at a real terminal: corral runs inside tmux, the test reads the screen
//! and presses keys.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::support::{FakeModel, Harness, Reply};

struct Tmux {
    socket: std::path::PathBuf,
}

impl Tmux {
    fn start(h: &Harness, command: &str) -> Tmux {
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
        tmux.args(["-e", "NO_COLOR=1"]).arg(command);
        let status = tmux
            .status()
            .expect("tmux is installed (scripts/setup installs it)");
        assert!(status.success(), "tmux new-session failed");
        Tmux { socket }
    }

    fn screen(&self) -> String {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(["capture-pane", "-p", "-J", "-S", "-100"])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &str) {
        let status = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(["send-keys", keys])
            .status()
            .expect("tmux send-keys");
        assert!(status.success());
    }

    async fn wait_for(&self, needle: &str) -> String {
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

fn command_line(server: &FakeModel, work: &Path, prompt: &str) -> String {
    format!(
        "{} run -m llamacpp:m --base-url {} -C {} '{prompt}'; echo EXIT=$?; sleep 60",
        env!("CARGO_BIN_EXE_corral"),
        server.openai_base(),
        work.display()
    )
}

#[tokio::test]
async fn a_person_approves_with_one_key_after_seeing_the_diff() {
    let h = Harness::new();
    std::fs::write(h.work().join("notes.txt"), "draft\n").unwrap();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call(
        "c1",
        "write_file",
        r#"{"path":"notes.txt","content":"final\n"}"#,
    ));
    server.push(Reply::new().text("Saved."));
    let tmux = Tmux::start(&h, &command_line(&server, &h.work(), "finish the notes"));
    let screen = tmux
        .wait_for("[y]es [n]o [a]lways [d]isable [f]orbid-all [c]ancel")
        .await;
    assert!(
        screen.contains("write_file wants to run (moderate"),
        "{screen}"
    );
    assert!(
        screen.contains("-draft") && screen.contains("+final"),
        "{screen}"
    );
    tmux.keys("y");
    let screen = tmux.wait_for("EXIT=").await;
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert!(screen.contains("Saved."), "{screen}");
    assert_eq!(
        std::fs::read_to_string(h.work().join("notes.txt")).unwrap(),
        "final\n"
    );
}

#[tokio::test]
async fn a_person_denies_and_the_model_is_told() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c1", "write_file", r#"{"path":"x.txt","content":"x"}"#));
    server.push(Reply::new().text("Understood, not writing."));
    let tmux = Tmux::start(&h, &command_line(&server, &h.work(), "write x"));
    tmux.wait_for("[c]ancel").await;
    tmux.keys("n");
    let screen = tmux.wait_for("EXIT=").await;
    assert!(
        screen.contains("EXIT=0") && screen.contains("the user denied this call"),
        "{screen}"
    );
    assert!(!h.work().join("x.txt").exists());
}
