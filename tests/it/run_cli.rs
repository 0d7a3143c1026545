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
    let out = h
        .corral()
        .args([
            "run",
            "-m",
            "llamacpp:m",
            "--base-url",
            &server.openai_base(),
            "go",
        ])
        .run()
        .await;
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
