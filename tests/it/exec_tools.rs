//! shell and python end to end: output streamed as `tool_output` events while the process
//! runs, the result the model sees, failures, timeouts and floods.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::*;
use crate::support::{Cmd, FakeModel, Harness, Outcome, Reply};

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

#[tokio::test]
async fn shell_output_streams_in_chunks_and_comes_back_whole() {
    let h = Harness::new();
    let command = "for i in 1 2 3; do echo $i; sleep 0.2; done; echo err >&2";
    let out = one_call(&h, "shell", json!({"command": command})).await;
    let chunks = streamed(&out);
    assert!(chunks.len() >= 3, "{chunks:?}");
    assert_eq!(chunks.concat(), "1\n2\n3\nerr\n");
    let streams: Vec<Value> = out
        .of_kind("tool_output")
        .iter()
        .map(|e| e["data"]["stream"].clone())
        .collect();
    assert_eq!(streams.first(), Some(&json!("stdout")));
    assert_eq!(streams.last(), Some(&json!("stderr")));
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
    let code = "import time\nfor i in range(3):\n    print(i)\n    time.sleep(0.2)\nprint(open('data.txt').read().strip())";
    let out = one_call(&h, "python", json!({"code": code})).await;
    let chunks = streamed(&out);
    assert!(chunks.len() >= 3, "{chunks:?}");
    assert_eq!(chunks.concat(), "0\n1\n2\npayload\n");
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

#[tokio::test]
async fn a_timeout_stops_the_command_quickly_and_says_so() {
    let h = Harness::new();
    let started = Instant::now();
    let args = json!({"command": "echo begun; sleep 30", "timeout": 1});
    let out = one_call(&h, "shell", args).await;
    let result = record(&out);
    assert_eq!(result["success"], false, "{result}");
    assert_eq!(
        result["error"],
        "begun\n[timed out after 1 s; the process group was killed]"
    );
    assert!(result["durationMs"].as_u64().unwrap() < 5000, "{result}");
    assert!(started.elapsed() < Duration::from_secs(15));
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
