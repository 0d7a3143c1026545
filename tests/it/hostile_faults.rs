//! Hostile model servers and configs (issue 14): endless lines and error bodies, invalid
//! UTF-8, nameless tool calls, malformed-call streaks, numbers that used to panic, presets
//! naming tools that do not exist, base URLs that are not http(s), a deleted working
//! directory and Latin-1 files.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::*;
use crate::support::server::Server;
use crate::support::{FakeModel, Harness, Outcome, Reply};

/// Everything the run said: its error envelopes, its result and stderr.
fn said(out: &Outcome) -> String {
    let mut text: Vec<String> = out
        .of_kind("error")
        .iter()
        .map(|e| e["data"]["message"].as_str().unwrap_or("").to_owned())
        .collect();
    for result in out.of_kind("result") {
        text.push(result["data"]["error"].as_str().unwrap_or("").to_owned());
    }
    text.push(out.stderr.clone());
    text.join("\n")
}

fn openai_line(content: &str) -> Vec<u8> {
    let chunk = json!({"choices": [{"index": 0, "delta": {"content": content}}]});
    format!("data: {chunk}\n\n").into_bytes()
}

#[tokio::test]
async fn a_line_that_never_ends_fails_at_the_cap_naming_the_key() {
    for ollama in [false, true] {
        // The default cap: without one the client buffered (and rescanned) forever.
        let h = Harness::new();
        let server = FakeModel::start().await;
        let opening = if ollama {
            br#"{"message":{"role":"assistant","content":""#.to_vec()
        } else {
            br#"data: {"choices":[{"index":0,"delta":{"content":""#.to_vec()
        };
        server.push(Reply::new().text("a").raw(&opening).endless(&[b'x'; 65536]));
        let run = if ollama {
            ollama_run(&h, &server, "x")
        } else {
            openai_run(&h, &server, "x")
        };
        let out = run.run().await;
        assert_eq!(out.code, Some(1), "{out:?}");
        let text = said(&out);
        assert!(
            text.contains("longer than 16777216 bytes") && text.contains("max_stream_line_bytes"),
            "ollama {ollama}: {text}"
        );
        assert!(
            server.wait_for_cancelled(1, Duration::from_secs(10)).await,
            "the endless reply was dropped"
        );
    }
}

#[tokio::test]
async fn an_error_body_that_never_ends_is_cut_at_the_cap() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(
        Reply::new()
            .stream_status(400)
            .raw(br#"{"error":{"message":"#)
            .endless(b"no no no "),
    );
    let out = openai_run(&h, &server, "x").run().await;
    assert_eq!(out.code, Some(1), "{out:?}");
    let text = said(&out);
    assert!(
        text.contains("HTTP 400") && text.contains("[limits] max_error_body_bytes"),
        "{text}"
    );
}

#[tokio::test]
async fn invalid_utf8_in_one_event_is_replaced_and_the_turn_goes_on() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    let mut bad = openai_line("caf\u{e9}!");
    // "é" as Latin-1: one byte that is not UTF-8.
    let at = bad
        .windows(2)
        .position(|w| w == "\u{e9}".as_bytes())
        .unwrap();
    bad.splice(at..at + 2, [0xe9]);
    server.push(Reply::new().text("1 ").raw(&bad).text(" 2"));
    let out = openai_run(&h, &server, "x").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(authoritative(&out, "assistant_text"), ["1 caf\u{fffd}! 2"]);
    let notes = out.of_kind("error");
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!(
        notes[0]["data"]["data"]["note"], "repaired_stream",
        "{notes:?}"
    );
    assert!(said(&out).contains("invalid UTF-8"));
}

#[tokio::test]
async fn a_tool_call_without_a_name_goes_back_to_the_model() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c1", "", "{}"));
    server.push(Reply::new().text("fixed"));
    let out = openai_run(&h, &server, "x").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(result_of(&out)["stopReason"], "end_turn");
    let second = messages(&server, 1);
    let told = second.last().unwrap();
    assert_eq!(told["role"], "tool", "{second:?}");
    let content = told["content"].as_str().unwrap();
    assert!(
        content.contains("no name") && content.contains("read_file"),
        "{content}"
    );
}

#[tokio::test]
async fn malformed_calls_are_counted_one_by_one() {
    // Each reply makes a malformed call and a good one: no three malformed calls in a row.
    let h = Harness::new();
    let server = FakeModel::start().await;
    std::fs::write(h.work().join("a.txt"), "hello\n").unwrap();
    for i in 0..3 {
        server.push(
            Reply::new()
                .tool_call(&format!("bad{i}"), "read_file", "{\"path\": 5")
                .tool_call(&format!("ok{i}"), "read_file", "{\"path\": \"a.txt\"}"),
        );
    }
    server.push(Reply::new().text("done"));
    let out = openai_run(&h, &server, "x").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(result_of(&out)["stopReason"], "end_turn");

    // Three malformed calls in one reply are three in a row.
    let h = Harness::new();
    let server = FakeModel::start().await;
    let mut reply = Reply::new();
    for i in 0..3 {
        reply = reply.tool_call(&format!("bad{i}"), "read_file", "{\"path\": 5");
    }
    server.push(reply);
    server.push(Reply::new().text("never asked"));
    let out = openai_run(&h, &server, "x").run().await;
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        said(&out).contains("3 malformed tool calls in a row"),
        "{out:?}"
    );
    assert_eq!(server.chat_requests().len(), 1);
}

#[tokio::test]
async fn numbers_that_used_to_panic_are_errors_naming_the_setting() {
    for (file, key) in [
        (
            "[timeouts]\nconnect_secs = 1e300\n",
            "timeouts.connect_secs",
        ),
        ("[timeouts]\nidle_secs = 1e300\n", "timeouts.idle_secs"),
        ("temperature = nan\n", "temperature"),
    ] {
        let h = Harness::new();
        h.write_config(file);
        let server = FakeModel::start().await;
        server.push(Reply::new().text("hi"));
        let out = openai_run(&h, &server, "x").run().await;
        assert_ne!(out.code, Some(101), "panicked: {out:?}");
        assert!(!out.success(), "{out:?}");
        assert!(out.stderr.contains(key), "{key}: {}", out.stderr);
    }
    for var in [
        "CORRAL_WS_IDLE_SECS",
        "CORRAL_WS_REPLAY_SECS",
        "CORRAL_WS_SEND_SECS",
    ] {
        for value in ["inf", "1e300", "-1", "soon"] {
            let h = Harness::new();
            let out = h
                .corral()
                .args(["serve", "--listen", "127.0.0.1:0"])
                .env("CORRAL_JWT_SECRET", "a-test-secret-of-enough-length-000000")
                .env(var, value)
                .run()
                .await;
            assert_ne!(out.code, Some(101), "{var}={value} panicked: {out:?}");
            assert!(!out.success(), "{out:?}");
            assert!(out.stderr.contains(var), "{var}={value}: {}", out.stderr);
        }
    }
}

#[tokio::test]
async fn a_retry_after_of_1e300_seconds_does_not_panic() {
    let h = Harness::new();
    h.write_config(FAST_RETRY);
    let server = FakeModel::start().await;
    server.push(
        Reply::new()
            .status(503, r#"{"error":"busy"}"#)
            .header("retry-after", "1e300"),
    );
    server.push(Reply::new().text("after the wait"));
    let out = openai_run(&h, &server, "x").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(authoritative(&out, "assistant_text"), ["after the wait"]);
}

#[tokio::test]
async fn a_preset_naming_a_tool_that_does_not_exist_is_refused() {
    let h = Harness::new();
    let preset = h.home_dir().join("team.toml");
    std::fs::write(
        &preset,
        "description = \"no writes\"\nauto_approve = \"moderate\"\n\
         [[rules]]\ntool = \"Write_File\"\ndeny = [\"**\"]\n",
    )
    .unwrap();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call(
        "c1",
        "write_file",
        r#"{"path": "out.txt", "content": "written"}"#,
    ));
    server.push(Reply::new().text("done"));
    let out = openai_run(&h, &server, "x")
        .args(["-p", preset.to_str().unwrap()])
        .run()
        .await;
    assert!(!out.success(), "{out:?}");
    assert!(!h.work().join("out.txt").exists(), "write_file wrote");
    assert!(
        out.stderr.contains("\"Write_File\"") && out.stderr.contains("known tools: read_file"),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn a_base_url_that_is_not_http_is_refused_at_session_create() {
    let h = Harness::new();
    let out = h
        .corral()
        .args(["run", "--json", "-m", "llamacpp:fake-model"])
        .args(["--base-url", "file:///etc/passwd", "x"])
        .run()
        .await;
    assert!(!out.success(), "{out:?}");
    assert!(
        out.stderr
            .contains("base_url \"file:///etc/passwd\" is not an http(s) URL"),
        "{}",
        out.stderr
    );

    let server = Server::start(&h, &[]).await;
    let token = server.token("admin", true);
    let body = json!({"cwd": h.work(), "model": "llamacpp:fake-model",
                      "base_url": "unix:///run/docker.sock"});
    let (status, answer) = server.post("/api/v1/sessions", &token, &body).await;
    assert_eq!(status, 422, "{answer}");
    let message = answer.to_string();
    assert!(
        message.contains("base_url") && message.contains("not an http(s) URL"),
        "{message}"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_deleted_working_directory_is_named_not_a_missing_bash() {
    let h = Harness::new();
    let root = h.work().join("gone");
    std::fs::create_dir(&root).unwrap();
    let server = FakeModel::start().await;
    let rm = json!({"command": format!("rm -rf {}", root.display())}).to_string();
    server.push(Reply::new().tool_call("c1", "shell", &rm));
    server.push(Reply::new().tool_call("c2", "shell", r#"{"command": "echo hi"}"#));
    server.push(Reply::new().text("done"));
    let out = openai_run(&h, &server, "x")
        .args(["-p", "bypass", "--sandbox", "off"])
        .current_dir(&root)
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let results = out.of_kind("tool_result");
    assert_eq!(results.len(), 2, "{out:?}");
    let second = results[1]["data"]["result"].to_string();
    assert!(
        second.contains("no longer exists") && !second.contains("not found"),
        "{second}"
    );
}

#[tokio::test]
async fn a_latin1_file_is_read_as_text_with_a_note() {
    let h = Harness::new();
    std::fs::write(h.work().join("old.txt"), b"caf\xe9 cr\xe8me\n").unwrap();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c1", "read_file", r#"{"path": "old.txt"}"#));
    server.push(Reply::new().text("done"));
    let out = openai_run(&h, &server, "x").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let result: Value = out.of_kind("tool_result")[0]["data"]["result"].clone();
    assert_eq!(result["success"], true, "{result}");
    let text = result["output"].as_str().unwrap_or_default();
    assert!(
        text.contains("caf\u{e9} cr\u{e8}me") && text.contains("read as Latin-1"),
        "{result}"
    );
}
