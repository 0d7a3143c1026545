//! The full-screen session view in a real terminal (tmux) against the fake model server: what
//! a person sees and the keys they press. Each test keeps its last screen as a CI artifact.

use std::path::Path;
use std::time::Duration;

use crate::support::{FakeModel, Harness, Reply, Tmux};

fn chat_line(server: &FakeModel, work: &Path, extra: &str) -> String {
    format!(
        "{} chat -m llamacpp:m --base-url {} -C {} {extra}; echo EXIT=$?; sleep 60",
        env!("CARGO_BIN_EXE_corral"),
        server.openai_base(),
        work.display()
    )
}

/// Answers the approval on screen: after the modal's settle time (keys pressed as it opens are
/// not taken as an answer), one key.
pub(crate) async fn answer(tmux: &Tmux, key: &str) {
    tokio::time::sleep(Duration::from_millis(700)).await;
    tmux.keys(key);
}

/// The view is up: its status line names the model.
async fn ready(tmux: &Tmux) {
    tmux.wait_until("the status line", |s| s.contains("llamacpp:m"))
        .await;
}

#[tokio::test]
async fn a_streamed_turn_shows_markdown_and_a_tool_card() {
    let h = Harness::new();
    std::fs::write(h.work().join("notes.txt"), "alpha\nbeta\n").unwrap();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c1", "read_file", r#"{"path":"notes.txt"}"#));
    server.push(
        Reply::new()
            .text("## Summary\n\nThe file has **two** lines:\n\n")
            .text("```rust\nlet n = 2;\n```\n"),
    );
    let tmux = Tmux::start(
        &h,
        &chat_line(&server, &h.work(), "'what is in notes.txt?'"),
    );
    let screen = tmux
        .wait_until("the answer", |s| s.contains("let n = 2;"))
        .await;
    tmux.save("tui-streamed-turn");
    assert!(screen.contains("› what is in notes.txt?"), "{screen}");
    // The card: done mark, title, the argument, the result's text.
    assert!(screen.contains("✓ "), "{screen}");
    assert!(screen.contains("path: notes.txt"), "{screen}");
    assert!(screen.contains("alpha"), "{screen}");
    // Markdown: the heading without its hashes, emphasis without stars, a framed code block.
    assert!(
        screen.contains("Summary") && !screen.contains("## Summary"),
        "{screen}"
    );
    assert!(screen.contains("The file has two lines:"), "{screen}");
    assert!(screen.contains("│ let n = 2;"), "{screen}");
    assert!(screen.contains("turn 1 done"), "{screen}");
}

#[tokio::test]
async fn an_approval_is_a_modal_answered_with_one_key() {
    let h = Harness::new();
    std::fs::write(h.work().join("notes.txt"), "draft\n").unwrap();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call(
        "c1",
        "write_file",
        r#"{"path":"notes.txt","content":"final\n"}"#,
    ));
    server.push(Reply::new().text("Saved."));
    let tmux = Tmux::start(&h, &chat_line(&server, &h.work(), "'finish the notes'"));
    let screen = tmux
        .wait_until("the approval modal", |s| s.contains("[y] yes"))
        .await;
    tmux.save("tui-approval-modal");
    assert!(
        screen.contains("approval · write_file · moderate"),
        "{screen}"
    );
    assert!(
        screen.contains("-draft") && screen.contains("+final"),
        "{screen}"
    );
    assert!(screen.contains("[a] always"), "{screen}");
    assert!(
        screen.contains("always: write_file"),
        "what always covers:\n{screen}"
    );
    answer(&tmux, "y").await;
    let screen = tmux
        .wait_until("the answer", |s| s.contains("Saved."))
        .await;
    assert!(screen.contains("write_file → allowed once"), "{screen}");
    assert!(!screen.contains("[y] yes"), "{screen}");
    assert_eq!(
        std::fs::read_to_string(h.work().join("notes.txt")).unwrap(),
        "final\n"
    );
}

#[tokio::test]
async fn escape_cancels_the_running_turn_and_the_session_goes_on() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(
        Reply::new()
            .text("starting")
            .stall(Duration::from_secs(60))
            .text("never"),
    );
    server.push(Reply::new().text("second answer"));
    let tmux = Tmux::start(&h, &chat_line(&server, &h.work(), "'take your time'"));
    tmux.wait_until("the working turn", |s| s.contains("Esc cancels"))
        .await;
    tmux.keys("Escape");
    let screen = tmux
        .wait_until("the cancelled turn", |s| s.contains("turn 1 cancelled"))
        .await;
    assert!(!screen.contains("never"), "{screen}");
    assert!(server.wait_for_cancelled(1, Duration::from_secs(10)).await);
    tmux.type_text("again");
    tmux.keys("Enter");
    tmux.wait_until("the next turn", |s| s.contains("second answer"))
        .await;
    tmux.save("tui-esc-cancel");
}

#[tokio::test]
async fn a_resize_redraws_everything_within_the_new_width() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    let long = "word ".repeat(60);
    server.push(Reply::new().text(&format!("{long}END")));
    let tmux = Tmux::start(&h, &chat_line(&server, &h.work(), "'say a lot'"));
    tmux.wait_until("the answer", |s| s.contains("END")).await;
    tmux.resize(80, 24);
    let screen = tmux
        .wait_until("the redraw at 80 columns", |s| {
            s.contains("END") && s.lines().count() <= 24 && s.contains("llamacpp:m")
        })
        .await;
    for line in screen.lines() {
        assert!(line.chars().count() <= 80, "{line:?}\n{screen}");
    }
    // Tiny: drawn as well as it can be, never a crash.
    tmux.resize(12, 4);
    tokio::time::sleep(Duration::from_millis(300)).await;
    tmux.resize(240, 70);
    tmux.wait_until("the redraw at 240 columns", |s| {
        s.lines().any(|l| l.chars().count() > 120) && s.contains("END")
    })
    .await;
    tmux.save("tui-resize");
}

#[tokio::test]
async fn slash_model_switches_the_model_for_the_next_turn() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("first"));
    server.push(Reply::new().text("second"));
    let tmux = Tmux::start(&h, &chat_line(&server, &h.work(), ""));
    ready(&tmux).await;
    tmux.type_text("hello");
    tmux.keys("Enter");
    tmux.wait_until("the first answer", |s| s.contains("first"))
        .await;
    tmux.type_text("/model llamacpp:other");
    tmux.keys("Enter");
    tmux.wait_until("the switch", |s| s.contains("model: llamacpp:other"))
        .await;
    tmux.type_text("again");
    tmux.keys("Enter");
    let screen = tmux
        .wait_until("the second answer", |s| s.contains("second"))
        .await;
    tmux.save("tui-slash-model");
    let requests = server.chat_requests();
    assert_eq!(requests.last().unwrap()["model"], "other", "{requests:?}");
    // Commands never reach the model.
    assert!(
        !requests
            .iter()
            .any(|r| r.to_string().contains("/model llamacpp:other")),
        "{requests:?}"
    );
    assert!(screen.contains("llamacpp:other"), "status line:\n{screen}");
}

#[tokio::test]
async fn at_path_completes_a_file_and_inlines_it() {
    let h = Harness::new();
    std::fs::write(h.work().join("notes.txt"), "the secret word is PLUM\n").unwrap();
    std::fs::write(h.work().join("other.md"), "x\n").unwrap();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("It says PLUM."));
    let tmux = Tmux::start(&h, &chat_line(&server, &h.work(), ""));
    ready(&tmux).await;
    tmux.type_text("summarize @no");
    // Typed keys arrive one by one: after `@` alone both files are candidates, so wait for
    // the list narrowed by `no` (never narrowing fails the wait).
    tmux.wait_until("only the matching candidate", |s| {
        s.contains("summarize @no") && s.contains("@notes.txt") && !s.contains("@other.md")
    })
    .await;
    tmux.keys("Tab");
    tmux.wait_until("the completed path", |s| {
        s.contains("› summarize @notes.txt")
    })
    .await;
    tmux.keys("Enter");
    tmux.wait_until("the answer", |s| s.contains("It says PLUM."))
        .await;
    tmux.save("tui-at-file");
    let request = server.chat_requests().last().unwrap().to_string();
    assert!(request.contains("path=\\\"notes.txt\\\""), "{request}");
    assert!(request.contains("the secret word is PLUM"), "{request}");
}

#[tokio::test]
async fn escape_sequences_from_the_model_never_reach_the_terminal() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(
        Reply::new()
            .reasoning("thinking\u{1b}]0;window title\u{7}\n")
            .text("Here.\u{1b}]5")
            .text("2;c;Y3VybCBldmlsLnNofHNo\u{7} Done: \u{202e}txt.exe\u{202c}\n"),
    );
    let (tmux, raw) = Tmux::start_recorded(&h, &chat_line(&server, &h.work(), "'fix it'"));
    let screen = tmux.wait_until("the answer", |s| s.contains("Done:")).await;
    tmux.save("tui-escapes");
    assert!(
        screen.contains(r"\x1b]52;c;Y3VybCBldmlsLnNofHNo\x07"),
        "{screen}"
    );
    assert!(screen.contains(r"\u{202e}txt.exe"), "{screen}");
    let buffers = tmux.run(&["list-buffers"]);
    assert!(
        buffers.trim().is_empty(),
        "OSC 52 set the clipboard: {buffers}"
    );
    let written = std::fs::read(&raw).unwrap();
    for sequence in [&b"\x1b]52"[..], b"\x1b]0;", b"\x07", b"\xe2\x80\xae"] {
        assert!(
            !written.windows(sequence.len()).any(|w| w == sequence),
            "{sequence:?} reached the terminal raw"
        );
    }
}

#[tokio::test]
async fn ctrl_c_twice_quits_and_says_how_to_resume() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("hi there"));
    let tmux = Tmux::start(&h, &chat_line(&server, &h.work(), "'hello'"));
    tmux.wait_until("the answer", |s| s.contains("hi there"))
        .await;
    tmux.keys("C-c");
    tmux.wait_until("the hint", |s| s.contains("Ctrl-C again to quit"))
        .await;
    tmux.keys("C-c");
    let screen = tmux.wait_for("EXIT=").await;
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert!(
        screen.contains("continue it with `corral chat --resume "),
        "{screen}"
    );
}

/// The session id the status line ends with.
fn status_id(screen: &str) -> String {
    let status = screen
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default();
    status
        .split_whitespace()
        .last()
        .unwrap_or_default()
        .to_string()
}

async fn turn(tmux: &Tmux, prompt: &str, answer: &str) {
    tmux.type_text(prompt);
    tmux.keys("Enter");
    tmux.wait_until(answer, |s| s.contains(answer)).await;
}

#[tokio::test]
async fn bare_corral_opens_the_view_and_slash_commands_act_locally() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    for i in 1..=4 {
        server.push(Reply::new().text(&format!("answer number {i}")));
    }
    server.push(Reply::new().text("SUMMARY: four answers were given"));
    server.push(Reply::new().text("fresh start"));
    server.push(Reply::new().text("back again"));
    // No subcommand: the session view, with the session flags.
    let command = format!(
        "{} -m llamacpp:m --base-url {} -C {}; echo EXIT=$?; sleep 60",
        env!("CARGO_BIN_EXE_corral"),
        server.openai_base(),
        h.work().display()
    );
    let tmux = Tmux::start(&h, &command);
    ready(&tmux).await;
    for i in 1..=3 {
        turn(
            &tmux,
            &format!("question {i}"),
            &format!("answer number {i}"),
        )
        .await;
    }
    tmux.type_text("/effort high");
    tmux.keys("Enter");
    tmux.wait_until("the effort", |s| s.contains("effort: high"))
        .await;
    turn(&tmux, "question 4", "answer number 4").await;
    assert_eq!(
        server.chat_requests().last().unwrap()["reasoning_effort"],
        "high"
    );
    let first_id = status_id(&tmux.visible());
    assert_eq!(first_id.len(), 8, "{first_id:?}");

    tmux.type_text("/compact");
    tmux.keys("Enter");
    let screen = tmux
        .wait_until("the compaction", |s| s.contains("context compacted"))
        .await;
    assert!(screen.contains("· compacted"), "{screen}");
    let summary_request = server.chat_requests().last().unwrap().to_string();
    assert!(summary_request.contains("question 1"), "{summary_request}");

    tmux.type_text("/bogus");
    tmux.keys("Enter");
    tmux.wait_until("the refusal", |s| s.contains("unknown command /bogus"))
        .await;
    tmux.type_text("/help");
    tmux.keys("Enter");
    tmux.wait_until("the help", |s| s.contains("/worktree diff|merge"))
        .await;
    tmux.keys("Escape");

    tmux.type_text("/clear");
    tmux.keys("Enter");
    let screen = tmux
        .wait_until("a new session", |s| {
            status_id(s) != first_id && !s.contains("answer number")
        })
        .await;
    let second_id = status_id(&screen);
    turn(&tmux, "hello again", "fresh start").await;

    tmux.type_text(&format!("/resume {first_id}"));
    tmux.keys("Enter");
    let screen = tmux
        .wait_until("the first session back", |s| status_id(s) == first_id)
        .await;
    assert!(screen.contains("answer number 4"), "{screen}");
    assert!(!screen.contains("fresh start"), "{screen}");
    turn(&tmux, "and now?", "back again").await;
    tmux.save("tui-slash-commands");
    // The resumed session's model request has the conversation before the switch.
    let last = server.chat_requests().last().unwrap().to_string();
    assert!(last.contains("SUMMARY: four answers"), "{last}");
    assert_ne!(first_id, second_id);
    // Nothing typed as a command reached the model.
    for request in server.chat_requests() {
        let text = request.to_string();
        for command in [
            "/effort", "/compact", "/bogus", "/help", "/clear", "/resume",
        ] {
            assert!(
                !text.contains(command),
                "{command} reached the model: {text}"
            );
        }
    }
}

#[tokio::test]
async fn thoughts_are_folded_until_asked_for() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(
        Reply::new()
            .reasoning("first I weigh the options\nthen I pick one\n")
            .text("Picked."),
    );
    let tmux = Tmux::start(&h, &chat_line(&server, &h.work(), "'choose'"));
    let screen = tmux
        .wait_until("the answer", |s| s.contains("Picked."))
        .await;
    assert!(
        screen.contains("✻ thinking (2 lines, Ctrl-T shows)"),
        "{screen}"
    );
    assert!(!screen.contains("weigh the options"), "{screen}");
    tmux.keys("C-t");
    tmux.wait_until("the thought", |s| s.contains("first I weigh the options"))
        .await;
    tmux.save("tui-thoughts");
}

/// `-m claude` works the same: the real claude CLI against the fake Anthropic routes, its
/// Bash call asked through corral's gate as a modal and answered with one key.
#[tokio::test]
async fn a_claude_session_streams_and_asks_in_the_modal_too() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    crate::external_claude::scripted_tool_call(&server, "touch made-by-claude.txt");
    let claude = crate::external_claude::claude_program();
    let base = server.base_url();
    let command = format!(
        "{} chat -m claude:fake-model -C {} 'make the file'; echo EXIT=$?; sleep 60",
        env!("CARGO_BIN_EXE_corral"),
        h.work().display()
    );
    let claude = claude.display().to_string();
    let tmux = Tmux::start_with_env(
        &h,
        &command,
        &[
            ("CORRAL_CLAUDE", claude.as_str()),
            ("ANTHROPIC_BASE_URL", base.as_str()),
            ("ANTHROPIC_API_KEY", "sk-ant-dummy"),
            ("CLAUDE_CODE_MAX_RETRIES", "0"),
        ],
    );
    let screen = tmux
        .wait_until("claude's approval", |s| s.contains("[y] yes"))
        .await;
    tmux.save("tui-claude-approval");
    assert!(screen.contains("approval · shell · dangerous"), "{screen}");
    assert!(screen.contains("touch made-by-claude.txt"), "{screen}");
    assert!(screen.contains("I will run it."), "{screen}");
    answer(&tmux, "y").await;
    let screen = tmux
        .wait_until("claude's answer", |s| {
            s.contains("The command was handled.")
        })
        .await;
    assert!(
        screen.contains("claude:fake-model"),
        "status line:\n{screen}"
    );
    assert!(h.work().join("made-by-claude.txt").exists());
}

#[tokio::test]
async fn a_paste_stays_in_the_input_and_history_survives_a_restart() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("got both lines"));
    let one = chat_line(&server, &h.work(), "");
    let one = one.trim_end_matches("; echo EXIT=$?; sleep 60");
    // The view twice in one pane: the second finds the first's history.
    let tmux = Tmux::start(&h, &format!("{one}; {one}; sleep 60"));
    ready(&tmux).await;
    tmux.run(&[
        "set-buffer",
        "-b",
        "p",
        "line one of the paste\nline two of the paste",
    ]);
    tmux.run(&["paste-buffer", "-p", "-b", "p"]);
    let screen = tmux
        .wait_until("the pasted lines", |s| s.contains("line two of the paste"))
        .await;
    assert!(screen.contains("› line one of the paste"), "{screen}");
    assert_eq!(server.chat_requests().len(), 0, "a paste never sends");
    tmux.keys("Enter");
    tmux.wait_until("the answer", |s| s.contains("got both lines"))
        .await;
    let request = server.chat_requests().last().unwrap().to_string();
    assert!(
        request.contains("line one of the paste\\nline two of the paste"),
        "{request}"
    );
    tmux.keys("C-c");
    tmux.keys("C-c");
    tmux.wait_until("the second view", |s| {
        s.contains("llamacpp:m") && !s.contains("got both lines")
    })
    .await;
    tmux.keys("Up");
    tmux.wait_until("the recalled entry", |s| {
        s.contains("› line one of the paste") && s.contains("line two of the paste")
    })
    .await;
}

#[tokio::test]
async fn page_up_scrolls_back_and_the_view_holds_still() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    let lines: Vec<String> = (1..=120).map(|i| format!("line {i:03}\n")).collect();
    server.push(Reply::new().text(&lines.join("\n")));
    let tmux = Tmux::start(&h, &chat_line(&server, &h.work(), "'count'"));
    tmux.wait_until("the end of the answer", |s| s.contains("line 120"))
        .await;
    for _ in 0..20 {
        tmux.keys("PageUp");
    }
    let screen = tmux
        .wait_until("the top", |s| {
            s.contains("line 001") && s.contains("more line")
        })
        .await;
    assert!(!screen.contains("line 120"), "{screen}");
    tmux.keys("C-End");
    tmux.wait_until("the bottom", |s| {
        s.contains("line 120") && !s.contains("more line")
    })
    .await;
}

#[tokio::test]
async fn worktree_diff_and_preset_act_on_the_session() {
    let h = Harness::new();
    let git = |args: &[&str]| {
        let status = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(h.work())
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(h.work().join("README"), "base\n").unwrap();
    git(&["add", "."]);
    git(&["commit", "-qm", "base"]);
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call(
        "c1",
        "write_file",
        r#"{"path":"new.txt","content":"hello from the worktree\n"}"#,
    ));
    server.push(Reply::new().text("written"));
    let tmux = Tmux::start(
        &h,
        &chat_line(&server, &h.work(), "-p bypass --worktree 'write it'"),
    );
    let screen = tmux
        .wait_until("the answer", |s| s.contains("written"))
        .await;
    assert!(
        screen.contains("worktree corral/"),
        "status line:\n{screen}"
    );
    assert!(
        !h.work().join("new.txt").exists(),
        "written in the worktree only"
    );
    tmux.type_text("/worktree diff");
    tmux.keys("Enter");
    tmux.wait_until("the diff", |s| s.contains("+hello from the worktree"))
        .await;
    tmux.save("tui-worktree-diff");
    tmux.keys("Escape");
    tmux.type_text("/preset readonly");
    tmux.keys("Enter");
    let screen = tmux
        .wait_until("the preset", |s| s.contains("preset: readonly"))
        .await;
    assert!(screen.contains("· readonly ·"), "status line:\n{screen}");
}

#[tokio::test]
async fn without_a_terminal_the_view_refuses_and_points_to_run() {
    let h = Harness::new();
    let out = h.corral().args(["chat", "-m", "llamacpp:m"]).run().await;
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("corral run"), "{}", out.stderr);
}

#[tokio::test]
async fn slash_sessions_lists_this_machines_sessions_and_resumes_one() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("the earlier answer"));
    let out = crate::common::openai_run(&h, &server, "an earlier task")
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let tmux = Tmux::start(&h, &chat_line(&server, &h.work(), ""));
    ready(&tmux).await;
    tmux.type_text("/sessions");
    tmux.keys("Enter");
    let screen = tmux
        .wait_until("the list", |s| s.contains("an earlier task"))
        .await;
    tmux.save("tui-sessions");
    assert!(screen.contains("Enter resumes"), "{screen}");
    tmux.keys("Down");
    tmux.keys("Enter");
    tmux.wait_until("the earlier session", |s| s.contains("the earlier answer"))
        .await;
}
