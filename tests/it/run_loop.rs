//! The agent loop with small-model habits: calls written as text, lenient arguments, wrong
//! tools, malformed streaks, the step limit, context compaction, and the root boundary.

use serde_json::json;

use crate::common::*;
use crate::support::{FakeModel, Harness, Reply};

#[tokio::test]
async fn a_hermes_block_in_the_text_is_taken_as_a_call() {
    let h = Harness::new();
    std::fs::write(h.work().join("notes.md"), "remember the milk\n").unwrap();
    let server = FakeModel::start().await;
    server.push(Reply::new().text(
        "I will read it.\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"notes.md\"}}\n</tool_call>\n",
    ));
    server.push(Reply::new().text("It says: remember the milk."));
    let out = openai_run(&h, &server, "what is in notes.md?").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let results = out.of_kind("tool_result");
    assert_eq!(results.len(), 1);
    assert!(
        results[0]["data"]["result"]["output"]
            .as_str()
            .unwrap()
            .contains("milk")
    );
    // The authoritative text has the block cut out.
    assert_eq!(authoritative(&out, "assistant_text")[0], "I will read it.");
    let second = messages(&server, 1);
    assert_eq!(second[second.len() - 1]["role"], "tool");
}

#[tokio::test]
async fn a_quoted_example_in_prose_is_not_a_call() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text(
        "To read a file you would write `<tool_call>{\"name\":\"read_file\",\"arguments\":{\"path\":\"x\"}}</tool_call>` in your reply.\n```\n<tool_call>\n{\"name\":\"read_file\",\"arguments\":{\"path\":\"y\"}}\n</tool_call>\n```",
    ));
    let out = openai_run(&h, &server, "how do tools work?").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.of_kind("tool_use").is_empty());
    assert!(out.of_kind("tool_result").is_empty());
    assert_eq!(server.chat_requests().len(), 1);
}

#[tokio::test]
async fn lenient_arguments_and_schema_coercion_let_small_models_through() {
    let h = Harness::new();
    std::fs::write(h.work().join("f.txt"), "one\ntwo\nthree\n").unwrap();
    let server = FakeModel::start().await;
    // Single quotes, a trailing comma, and a line number as a string.
    server.push(Reply::new().tool_call(
        "c1",
        "read_file",
        "{'path': 'f.txt', 'startLine': '2', 'endLine': 2,}",
    ));
    server.push(Reply::new().text("two"));
    let out = openai_run(&h, &server, "line 2?").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let result = &out.of_kind("tool_result")[0]["data"]["result"];
    assert_eq!(result["success"], true, "{result}");
    assert!(
        result["output"].as_str().unwrap().starts_with("two"),
        "{result}"
    );
    let uses = out.of_kind("tool_use");
    assert_eq!(
        uses[1]["data"]["call"]["rawInput"],
        json!({"path": "f.txt", "startLine": 2, "endLine": 2})
    );
}

#[tokio::test]
async fn unknown_tools_and_bad_arguments_are_errors_the_model_can_fix() {
    let h = Harness::new();
    std::fs::write(h.work().join("a.txt"), "A\n").unwrap();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c1", "cat_file", r#"{"path":"a.txt"}"#));
    server.push(Reply::new().tool_call("c2", "read_file", r#"{"file":"a.txt"}"#));
    server.push(Reply::new().tool_call("c3", "read_file", r#"{"path":"a.txt"}"#));
    server.push(Reply::new().text("done"));
    let out = openai_run(&h, &server, "read a").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let results = out.of_kind("tool_result");
    assert_eq!(results.len(), 3);
    let error = |i: usize| {
        results[i]["data"]["result"]["error"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert!(
        error(0).contains("unknown tool") && error(0).contains("read_file"),
        "{}",
        error(0)
    );
    assert!(error(1).contains("read_file(path: string"), "{}", error(1));
    assert_eq!(results[2]["data"]["result"]["success"], true);
    // The model saw the errors as tool results.
    let third = messages(&server, 2);
    let tool = &third[third.len() - 1];
    assert!(tool["content"].as_str().unwrap().starts_with("Error:"));
}

#[tokio::test]
async fn three_malformed_calls_in_a_row_end_the_turn() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    for i in 0..3 {
        server.push(Reply::new().tool_call(&format!("c{i}"), "read_file", "{\"path\": 5"));
    }
    let out = openai_run(&h, &server, "x").run().await;
    assert_eq!(out.code, Some(1), "{out:?}");
    let result = result_of(&out);
    assert_eq!(result["stopReason"], "error");
    assert!(
        result["error"]
            .as_str()
            .unwrap()
            .contains("3 malformed tool calls")
    );
    assert_eq!(server.chat_requests().len(), 3);
}

#[tokio::test]
async fn the_step_limit_ends_a_turn_with_max_steps() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    for i in 0..3 {
        server.push(Reply::new().tool_call(&format!("c{i}"), "list_directory", "{}"));
    }
    let out = openai_run(&h, &server, "loop")
        .arg("--max-steps")
        .arg("2")
        .run()
        .await;
    assert_eq!(out.code, Some(1), "{out:?}");
    assert_eq!(result_of(&out)["stopReason"], "max_steps");
    assert_eq!(server.chat_requests().len(), 2);
}

#[tokio::test]
async fn a_full_context_is_compacted_once_and_the_turn_goes_on() {
    let h = Harness::new();
    h.write_config("[providers.llamacpp]\ncontext_window = 2000\n");
    std::fs::write(h.work().join("a.txt"), "alpha\n").unwrap();
    let server = FakeModel::start().await;
    // Four steps of tool calls; the third reports a nearly full window.
    server.push(
        Reply::new()
            .tool_call("c1", "read_file", r#"{"path":"a.txt"}"#)
            .usage(300, 10),
    );
    server.push(
        Reply::new()
            .tool_call("c2", "list_directory", "{}")
            .usage(600, 10),
    );
    server.push(
        Reply::new()
            .tool_call("c3", "read_file", r#"{"path":"a.txt"}"#)
            .usage(1700, 10),
    );
    // The summary request, then the next step.
    server.push(
        Reply::new()
            .text("The user wants a.txt read; it says alpha.")
            .usage(400, 20),
    );
    server.push(Reply::new().text("alpha").usage(500, 5));
    let out = openai_run(&h, &server, "read a.txt").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let compactions = out.of_kind("compaction");
    assert_eq!(compactions.len(), 1, "{out:?}");
    let data = &compactions[0]["data"];
    assert_eq!(data["tokensBefore"], 1710);
    let after = data["tokensAfter"].as_u64().unwrap();
    assert!(
        after > 0 && after < 1710,
        "the context after summarizing: {data}"
    );
    assert_eq!(data["contextWindow"], 2000);
    assert!(data["messagesCompacted"].as_u64().unwrap() >= 1);

    let requests = server.chat_requests();
    assert_eq!(requests.len(), 5);
    let summary_request = &requests[3];
    assert!(
        summary_request.get("tools").is_none(),
        "no tools while summarizing"
    );
    let after = messages(&server, 4);
    let before = messages(&server, 2);
    assert!(
        after.len() < before.len() + 2,
        "older messages were replaced"
    );
    assert!(
        after[0]["content"]
            .as_str()
            .unwrap()
            .contains("it says alpha")
    );
    assert_eq!(
        result_of(&out)["usage"]["inputTokens"],
        300 + 600 + 1700 + 400 + 500
    );
}

#[tokio::test]
async fn a_prompt_larger_than_the_window_is_refused_before_sending() {
    let h = Harness::new();
    h.write_config("[providers.llamacpp]\ncontext_window = 1000\n");
    let server = FakeModel::start().await;
    let prompt = "word ".repeat(5000);
    let out = openai_run(&h, &server, &prompt).run().await;
    assert_eq!(out.code, Some(1), "{out:?}");
    let error = result_of(&out)["error"].as_str().unwrap().to_owned();
    assert!(error.contains("context window of 1000 tokens"), "{error}");
    assert!(server.chat_requests().is_empty());
}

#[tokio::test]
async fn tool_output_past_the_cap_is_cut_head_and_tail() {
    let h = Harness::new();
    h.write_config("tool_output_cap = 2000\n");
    let big: String = (0..2000).map(|i| format!("line {i}\n")).collect();
    std::fs::write(h.work().join("big.txt"), big).unwrap();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c1", "read_file", r#"{"path":"big.txt"}"#));
    server.push(Reply::new().text("ok"));
    let out = openai_run(&h, &server, "x").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let output = out.of_kind("tool_result")[0]["data"]["result"]["output"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(output.len() < 2300, "{}", output.len());
    assert!(
        output.starts_with("line 0\n") && output.contains("line 1999\n"),
        "{output}"
    );
    assert!(output.contains("bytes omitted") && output.contains("startLine/endLine"));
}

#[tokio::test]
async fn paths_outside_the_root_are_refused() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c1", "read_file", r#"{"path":"../../etc/passwd"}"#));
    server.push(Reply::new().tool_call("c2", "read_file", r#"{"path":"/etc/passwd"}"#));
    server.push(Reply::new().text("cannot"));
    let out = openai_run(&h, &server, "x").run().await;
    for result in out.of_kind("tool_result") {
        assert_eq!(result["data"]["result"]["success"], false);
        let error = result["data"]["result"]["error"].as_str().unwrap();
        assert!(error.contains("outside the session root"), "{error}");
    }
    // Every call hit the boundary: the turn is not reported as a success.
    assert_eq!(out.code, Some(1), "{out:?}");
    let error = result_of(&out)["error"].as_str().unwrap().to_owned();
    assert!(
        error.contains("blocked every tool call of this turn (2 of 2)"),
        "{error}"
    );

    // One call inside the root among them, and the turn succeeds.
    let h = Harness::new();
    std::fs::write(h.work().join("in.txt"), "in").unwrap();
    let server = FakeModel::start().await;
    server.push(Reply::new().tool_call("c1", "read_file", r#"{"path":"../x"}"#));
    server.push(Reply::new().tool_call("c2", "read_file", r#"{"path":"in.txt"}"#));
    server.push(Reply::new().text("read it"));
    let out = openai_run(&h, &server, "x").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
}
