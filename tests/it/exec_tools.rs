//! shell and python end to end: output streamed as `tool_output` events while the process
//! runs, the result the model sees, failures, timeouts and floods.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::*;
use crate::support::{Cmd, FakeModel, Harness, Outcome, PidTally, Reply, assert_all_gone};

/// A run whose model makes one call `name(args)` and then answers "done".
async fn one_call(h: &Harness, name: &str, args: Value) -> Outcome {
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c1", name, &args.to_string()));
    server.push(Reply::new().text("done"));
    let out = exec_run(h, &server).run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_well_formed(&out);
    out
}

fn exec_run(h: &Harness, server: &FakeModel) -> Cmd {
    // shell and python are dangerous: without the bypass preset the gate would ask.
    openai_run(h, server, "run it")
        .args(["-p", "bypass"])
        .timeout(Duration::from_secs(30))
}

/// The `{toolCallId, tool, success, output, error, durationMs}` record of the only call.
fn record(out: &Outcome) -> Value {
    let results = out.of_kind("tool_result");
    assert_eq!(results.len(), 1, "{out:?}");
    results[0]["data"]["result"].clone()
}

/// The streamed chunks of call c1, in order.
fn streamed(out: &Outcome) -> Vec<String> {
    out.of_kind("tool_output")
        .iter()
        .map(|e| {
            assert_eq!(e["data"]["toolCallId"], "c1", "{e}");
            e["data"]["text"].as_str().unwrap().to_owned()
        })
        .collect()
}

/// Streaming happened while the call ran: every chunk is announced before the result.
fn assert_streamed_before_result(out: &Outcome) {
    let kinds = out.kinds();
    let last_chunk = kinds.iter().rposition(|k| k == "tool_output").unwrap();
    let result = kinds.iter().position(|k| k == "tool_result").unwrap();
    assert!(last_chunk < result, "{kinds:?}");
}

/// One call `name(args)` whose process prints `steps` one by one, each time waiting until
/// `ack-<i>` exists in the work dir; the test creates it once step `i` arrived as a
/// `tool_output` event. So each chunk is seen while the process still runs, and in order.
async fn call_in_steps(h: &Harness, name: &str, args: Value, steps: &[&str]) -> Outcome {
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c1", name, &args.to_string()));
    server.push(Reply::new().text("done"));
    let running = exec_run(h, &server).spawn().await;
    for (i, step) in steps.iter().enumerate() {
        running
            .wait_for_event(0, |e| {
                e["kind"] == "tool_output" && e["data"]["text"] == *step
            })
            .await;
        std::fs::write(h.work().join(format!("ack-{i}")), "").unwrap();
    }
    let out = running.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_well_formed(&out);
    out
}

#[tokio::test]
async fn shell_output_streams_in_chunks_and_comes_back_whole() {
    let h = Harness::new();
    let command = "for i in 0 1 2; do echo $((i + 1)); until [ -e ack-$i ]; do sleep 0.02; done; \
                   done; echo err >&2";
    let out = call_in_steps(
        &h,
        "shell",
        json!({"command": command}),
        &["1\n", "2\n", "3\n"],
    )
    .await;
    assert_eq!(streamed(&out), ["1\n", "2\n", "3\n", "err\n"]);
    let streams: Vec<Value> = out
        .of_kind("tool_output")
        .iter()
        .map(|e| e["data"]["stream"].clone())
        .collect();
    assert_eq!(streams, ["stdout", "stdout", "stdout", "stderr"]);
    assert_streamed_before_result(&out);
    let result = record(&out);
    assert_eq!(result["success"], true, "{result}");
    assert_eq!(result["output"], "1\n2\n3\nerr\n");
    assert_eq!(result["tool"], "shell");
}

#[tokio::test]
async fn python_output_streams_in_chunks_and_comes_back_whole() {
    let h = Harness::new();
    std::fs::write(h.work().join("data.txt"), "payload\n").unwrap();
    // One write per line: `print` under `python3 -u` writes the text and the newline apart.
    let code = "import os, sys, time\nfor i in range(3):\n    sys.stdout.write(f'{i}\\n')\n    \
                while not os.path.exists(f'ack-{i}'):\n        time.sleep(0.02)\n\
                sys.stdout.write(open('data.txt').read())";
    let out = call_in_steps(&h, "python", json!({"code": code}), &["0\n", "1\n", "2\n"]).await;
    assert_eq!(streamed(&out), ["0\n", "1\n", "2\n", "payload\n"]);
    assert_streamed_before_result(&out);
    let result = record(&out);
    assert_eq!(result["success"], true, "{result}");
    assert_eq!(result["output"], "0\n1\n2\npayload\n");
}

#[tokio::test]
async fn a_failing_command_is_a_failed_call_carrying_its_output() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    let args = json!({"command": "echo before the failure; exit 3"});
    server.push(Reply::new().tool_call("c1", "shell", &args.to_string()));
    server.push(Reply::new().text("it failed"));
    let out = exec_run(&h, &server).run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let result = record(&out);
    assert_eq!(result["success"], false, "{result}");
    assert_eq!(result["error"], "before the failure\n[exit code 3]");
    let update = &out.of_kind("tool_result")[0]["data"]["update"];
    assert_eq!(update["status"], "failed", "{update}");
    // The model sees the output and the exit code.
    let second = messages(&server, 1);
    let tool = &second[second.len() - 1];
    assert_eq!(tool["role"], "tool");
    assert_eq!(tool["content"], "Error: before the failure\n[exit code 3]");
}

/// The timeout takes down the call's processes, one that left the process group included.
#[tokio::test]
async fn a_timeout_kills_the_call_and_says_so() {
    let h = Harness::new();
    let tally = PidTally::bind(&h.work());
    let command = format!(
        "{} &\nsetsid {} &\nuntil [ -e a.held ] && [ -e b.held ]; do sleep 0.02; done\n\
         echo begun; sleep 1000",
        tally.hold("a"),
        tally.hold("b")
    );
    let out = one_call(&h, "shell", json!({"command": command, "timeout": 3})).await;
    let result = record(&out);
    assert_eq!(result["success"], false, "{result}");
    assert_eq!(
        result["error"],
        "begun\n[timed out after 3 s; the process group was killed]"
    );
    let pids = tally.pids().await;
    assert_eq!(pids.len(), 2, "{pids:?}");
    assert_all_gone(&pids, "after the timeout").await;
}

#[tokio::test]
async fn a_flood_is_capped_in_the_result_and_in_the_stream() {
    let h = Harness::new();
    let command = "echo first; yes | head -c 5000000; echo last";
    let out = one_call(&h, "shell", json!({"command": command})).await;
    let result = record(&out);
    assert_eq!(result["success"], true, "{result}");
    let output = result["output"].as_str().unwrap();
    assert!(output.len() <= 32 * 1024, "{}", output.len());
    assert!(output.starts_with("first\ny\n") && output.ends_with("y\nlast\n"));
    assert!(output.contains("bytes omitted"), "{output}");
    let chunks = streamed(&out);
    let total: usize = chunks.iter().map(String::len).sum();
    assert!(total < (1 << 20) + 64 * 1024, "{total}");
    assert!(
        chunks.last().unwrap().contains("streaming stopped"),
        "{:?}",
        chunks.last()
    );
}
