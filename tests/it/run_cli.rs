//! The `corral run` command line: cancel with Ctrl-C, resume from the log, conversations,
//! the plain-text surface, and usage errors with exit code 2.

use std::time::Duration;

use crate::common::*;
use crate::support::{FakeModel, Harness, Reply};

#[tokio::test]
async fn ctrl_c_cancels_the_turn_closes_the_stream_and_exits_130() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(
        Reply::new()
            .text("thinking about it")
            .stall(Duration::from_secs(30))
            .text("never"),
    );
    let running = openai_run(&h, &server, "long task").spawn().await;
    // Interrupted once the first chunk is out: the stall holds the rest back for 30 s.
    running
        .wait_for_event(0, |e| {
            e["kind"] == "assistant_text" && e["data"]["content"]["text"] == "thinking about it"
        })
        .await;
    running.sigint().await;
    let out = running.wait().await;
    assert_eq!(out.code, Some(130), "{out:?}");
    let result = result_of(&out);
    assert_eq!(result["stopReason"], "cancelled");
    assert_eq!(authoritative(&out, "assistant_text"), ["thinking about it"]);
    assert_eq!(statuses(&out).last().unwrap(), "dead");
    assert!(
        server.wait_for_cancelled(1, Duration::from_secs(5)).await,
        "the upstream request was closed"
    );
}

#[tokio::test]
async fn resume_continues_the_conversation_from_the_event_log() {
    let h = Harness::new();
    std::fs::write(h.work().join("a.txt"), "apple\n").unwrap();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c1", "read_file", r#"{"path":"a.txt"}"#));
    server.push(Reply::new().text("It says apple."));
    let first = openai_run(&h, &server, "read a.txt").run().await;
    assert_eq!(first.code, Some(0), "{first:?}");
    let id = first.events()[0]["agent"].as_str().unwrap().to_owned();
    let last_seq = first.events().last().unwrap()["seq"].as_u64().unwrap();

    server.push(Reply::new().text("You asked me to read a.txt."));
    let second = h
        .corral()
        .args([
            "run",
            "--json",
            "--base-url",
            &server.openai_base(),
            "--resume",
            &id,
        ])
        .arg("what did I ask?")
        .run()
        .await;
    assert_eq!(second.code, Some(0), "{second:?}");
    assert_eq!(second.events()[0]["agent"], id.as_str());
    assert!(second.events()[0]["seq"].as_u64().unwrap() > last_seq);
    assert_eq!(second.of_kind("turn_started")[0]["turn"], 2);

    let resumed = messages(&server, 2);
    let roles: Vec<&str> = resumed
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "assistant", "user"]
    );
    assert_eq!(resumed[1]["content"], "read a.txt");
    assert_eq!(resumed[2]["tool_calls"][0]["function"]["name"], "read_file");
    assert!(resumed[3]["content"].as_str().unwrap().contains("apple"));
    assert_eq!(resumed[4]["content"], "It says apple.");
    assert_eq!(h.event_logs().len(), 1, "one log, appended to");
}

#[tokio::test]
async fn interactive_mode_runs_one_turn_per_line() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("one"));
    server.push(Reply::new().text("two"));
    let out = h
        .corral()
        .args([
            "run",
            "--json",
            "-i",
            "-m",
            "mlx:m",
            "--base-url",
            &server.openai_base(),
        ])
        .stdin_text("first\n\nsecond\n")
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(out.of_kind("result").len(), 2);
    assert_eq!(authoritative(&out, "assistant_text"), ["one", "two"]);
    let second = messages(&server, 1);
    let contents: Vec<&str> = second
        .iter()
        .map(|m| m["content"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(&contents[1..], ["first", "one", "second"]);
    assert_eq!(
        statuses(&out),
        [
            "starting", "idle", "working", "idle", "working", "idle", "dead"
        ]
    );
}

#[tokio::test]
async fn the_prompt_can_come_from_stdin() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("piped"));
    let out = h
        .corral()
        .args([
            "run",
            "--json",
            "-m",
            "vllm:m",
            "--base-url",
            &server.openai_base(),
        ])
        .stdin_text("from a pipe\n")
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(messages(&server, 0)[1]["content"], "from a pipe\n");
}

#[tokio::test]
async fn plain_output_puts_the_answer_on_stdout_and_the_rest_on_stderr() {
    let h = Harness::new();
    std::fs::write(h.work().join("a.txt"), "A\n").unwrap();
    let server = FakeModel::start().await;
    server.push(
        Reply::new()
            .reasoning("hm")
            .tool_call("c1", "read_file", r#"{"path":"a.txt"}"#),
    );
    server.push(Reply::new().text("The answer.").usage(10, 3));
    let out = text_run(&h, &server).arg("go").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(out.stdout, "The answer.\n");
    assert!(
        out.stderr.contains("Read file") && out.stderr.contains("✓ read_file"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("end_turn · 10 in · 3 out tokens"),
        "{}",
        out.stderr
    );
    assert!(
        !out.stderr.contains('\x1b'),
        "NO_COLOR and no terminal: no escapes"
    );
}

#[tokio::test]
async fn bad_usage_exits_2_with_a_clear_message() {
    let h = Harness::new();
    let cases: [(&[&str], &str); 4] = [
        (&["run", "-m", "a:b:c", "x"], "unknown model spec"),
        (
            &["run", "-m", "vllm:m", "-C", "/does/not/exist", "x"],
            "/does/not/exist",
        ),
        (&["run", "-m", "vllm:m"], "prompt on stdin is empty"),
        (
            &["run", "--resume", "abc123", "x"],
            "cannot resume session abc123",
        ),
    ];
    for (args, expected) in cases {
        let out = h.corral().args(args.iter().copied()).run().await;
        assert_eq!(out.code, Some(2), "{args:?}: {out:?}");
        assert!(out.stderr.contains(expected), "{args:?}: {}", out.stderr);
    }
    let out = h.corral().args(["run", "--bogus"]).run().await;
    assert_eq!(out.code, Some(2));
    h.write_config("max_steps = \"many\"\n");
    let out = h.corral().args(["run", "-m", "vllm:m", "x"]).run().await;
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("config.toml") && out.stderr.contains("max_steps"));
}

/// `corral run … > answer.txt`: what the model said before calling a tool is not the answer.
#[tokio::test]
async fn only_the_final_answer_reaches_stdout() {
    let h = Harness::new();
    std::fs::write(h.work().join("a.txt"), "A\n").unwrap();
    let server = FakeModel::start().await;
    server.push(
        Reply::new()
            .text("Let me look at the file first.")
            .tool_call("c1", "read_file", r#"{"path":"a.txt"}"#),
    );
    server.push(Reply::new().text("The file says A."));
    let out = text_run(&h, &server).arg("what is in a.txt?").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(out.stdout, "The file says A.\n");
    assert!(
        out.stderr.contains("Let me look at the file first."),
        "the text before the call is shown on stderr: {}",
        out.stderr
    );
}

/// A tool line previews its output: the first and last lines, escaped; `-v` shows it whole.
#[tokio::test]
async fn tool_results_are_previewed_and_verbose_shows_them_whole() {
    let h = Harness::new();
    let mut text: String = (1..=30).map(|i| format!("row {i}\n")).collect();
    text = text.replace("row 30", "row \u{1b}]0;owned\u{7}30");
    std::fs::write(h.work().join("rows.txt"), &text).unwrap();
    let server = FakeModel::start().await;
    for _ in 0..2 {
        server.push(Reply::new().tool_call("c1", "read_file", r#"{"path":"rows.txt"}"#));
        server.push(Reply::new().text("Read."));
    }
    let run = |verbose: bool| {
        let cmd = text_run(&h, &server);
        let cmd = if verbose { cmd.arg("-v") } else { cmd };
        cmd.arg("read rows.txt").run()
    };
    let out = run(false).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let stderr = &out.stderr;
    assert!(stderr.contains("Read file · path: rows.txt"), "{stderr}");
    assert!(
        stderr.contains("row 1") && stderr.contains("row 2"),
        "{stderr}"
    );
    assert!(stderr.contains("more lines"), "{stderr}");
    assert!(stderr.contains(r"row \x1b]0;owned\x0730"), "{stderr}");
    assert!(
        !stderr.contains("row 15"),
        "a preview, not the whole: {stderr}"
    );
    assert!(!stderr.contains('\u{1b}'), "escaped: {stderr:?}");
    let out = run(true).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stderr.contains("row 15"),
        "-v shows it whole: {}",
        out.stderr
    );
    assert!(!out.stderr.contains("more lines"), "{}", out.stderr);
}

/// Without a terminal a shell's output is printed once as it comes, never redrawn.
#[tokio::test]
async fn shell_output_streams_without_redrawing_when_there_is_no_terminal() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    let args = serde_json::json!({"command": "for i in $(seq 1 5); do echo out$i; done"});
    server.push(Reply::new().tool_call("c1", "shell", &args.to_string()));
    server.push(Reply::new().text("Done."));
    let out = h
        .corral()
        .args(["run", "-p", "bypass", "-m", "llamacpp:m"])
        .args(["--base-url", &server.openai_base(), "count"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    for i in 1..=5 {
        assert_eq!(
            out.stderr.matches(&format!("out{i}")).count(),
            1,
            "each line once: {}",
            out.stderr
        );
    }
    assert!(!out.stderr.contains('\r') && !out.stderr.contains('\u{1b}'));
    assert!(out.stderr.contains("✓ shell ·"), "{}", out.stderr);
}

/// Text mode ends with the session's id and the exact command that continues it; `--json`
/// does not (the id is in every event).
#[tokio::test]
async fn text_mode_ends_with_the_command_that_resumes_the_session() {
    let h = Harness::new();
    let elsewhere = h.home_dir().join("project");
    std::fs::create_dir(&elsewhere).unwrap();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("hi"));
    let out = text_run(&h, &server)
        .arg("-C")
        .arg(elsewhere.to_str().unwrap())
        .arg("hello")
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let id = h.event_logs()[0]
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .trim_end_matches(".events.jsonl")
        .to_owned();
    let expected = format!(
        "corral run --resume {id} -C {}",
        elsewhere.canonicalize().unwrap().display()
    );
    assert!(out.stderr.contains(&expected), "{expected}\n{}", out.stderr);
    assert_eq!(out.stdout, "hi\n");

    server.push(Reply::new().text("again"));
    let out = text_run(&h, &server)
        .args(["--resume", &id, "more"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stderr.contains(&format!("corral run --resume {id}\n")),
        "no -C in the directory itself: {}",
        out.stderr
    );

    server.push(Reply::new().text("json"));
    let out = openai_run(&h, &server, "json please").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(!out.stderr.contains("--resume"), "{}", out.stderr);
}

/// A failure is said once: a session that failed to start showed its error as an event,
/// and the exit path does not print it again.
#[tokio::test]
async fn a_model_that_is_not_there_is_reported_once() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    let out = h
        .corral()
        .args([
            "run",
            "-m",
            "ollama:no-such-model",
            "--base-url",
            &server.base_url(),
        ])
        .arg("hi")
        .run()
        .await;
    assert_ne!(out.code, Some(0), "{out:?}");
    let lines: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("no-such-model"))
        .collect();
    assert_eq!(lines.len(), 1, "said once: {}", out.stderr);
}

/// `-i` answers slash commands itself: nothing of them reaches the model, an unknown one is
/// an error, and `/exit` ends the conversation.
#[tokio::test]
async fn interactive_slash_commands_never_reach_the_model() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text("hello back"));
    let out = h
        .corral()
        .args([
            "run",
            "-i",
            "-m",
            "llamacpp:m",
            "--base-url",
            &server.openai_base(),
        ])
        .stdin_text("/help\n/frobnicate now\n/model\n/preset\nhello\n/exit\nnever sent\n")
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(server.chat_requests().len(), 1, "{out:?}");
    let sent: Vec<String> = messages(&server, 0)
        .iter()
        .map(|m| m["content"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(sent.last().unwrap(), "hello");
    assert!(
        !sent
            .iter()
            .any(|m| m.contains("/help") || m.contains("frobnicate"))
    );
    let stderr = &out.stderr;
    assert!(
        stderr.contains("/model SPEC") && stderr.contains("/compact"),
        "{stderr}"
    );
    assert!(stderr.contains("unknown command /frobnicate"), "{stderr}");
    assert!(stderr.contains("model: llamacpp:m"), "{stderr}");
    assert!(stderr.contains("preset: default"), "{stderr}");
    assert_eq!(out.stdout, "hello back\n");
}

/// With nobody to ask, the refusal says whole what would let the call run.
#[tokio::test]
async fn the_refusal_without_a_terminal_is_printed_whole() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    let command = serde_json::json!({"command": format!("echo {}", "long ".repeat(60))});
    server.push(Reply::new().tool_call("c1", "shell", &command.to_string()));
    server.push(Reply::new().text("Not allowed."));
    let out = text_run(&h, &server).arg("go").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let line = out
        .stderr
        .lines()
        .find(|l| l.contains("✗ shell"))
        .unwrap_or_else(|| panic!("{}", out.stderr));
    assert!(
        line.contains("needs a person's approval")
            && line.ends_with("or answer requests with --approve-stdin"),
        "{line}"
    );
}

/// `corral run` in text mode (no `--json`) against the fake server's OpenAI endpoint.
fn text_run(h: &Harness, server: &FakeModel) -> crate::support::Cmd {
    h.corral().args([
        "run",
        "-m",
        "llamacpp:m",
        "--base-url",
        &server.openai_base(),
    ])
}
