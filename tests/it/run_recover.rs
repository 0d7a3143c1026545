//! Issue 17: tool calls a model wrote as text in the shapes local models use (Qwen3-Coder XML,
//! a lone JSON call object), recovered when the server sent no native call, run for real, and
//! marked `recoveredFrom` on their `tool_use` events; quoted ones never run.

use serde_json::Value;

use crate::common::*;
use crate::support::{FakeModel, Harness, Outcome, Reply};

/// The `recoveredFrom` of every `tool_use` event (`Null` where absent).
fn recovered_from(out: &Outcome) -> Vec<Value> {
    out.of_kind("tool_use")
        .iter()
        .map(|e| e["data"].get("recoveredFrom").cloned().unwrap_or_default())
        .collect()
}

#[tokio::test]
async fn a_qwen3_xml_call_is_recovered_typed_and_run() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    server.push(Reply::new().text(
        "I'll write it.\n<tool_call>\n<function=write_file>\n<parameter=path>\nout.txt\n\
         </parameter>\n<parameter=content>\nline one\n  <b>two</b> </function>\n\n\
         </parameter>\n</function>\n</tool_call>\n",
    ));
    server.push(Reply::new().text(
        "<function=read_file>\n<parameter=path>\nout.txt\n</parameter>\n\
         <parameter=startLine>\n2\n</parameter>\n</function>",
    ));
    server.push(Reply::new().text("Written and checked."));
    let out = openai_run(&h, &server, "write out.txt")
        .args(["-p", "bypass"])
        .run()
        .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_well_formed(&out);
    let written = std::fs::read_to_string(h.work().join("out.txt")).unwrap();
    assert_eq!(written, "line one\n  <b>two</b> </function>\n");
    let results = out.of_kind("tool_result");
    assert_eq!(results.len(), 2, "{out:?}");
    for result in &results {
        assert_eq!(result["data"]["result"]["success"], true, "{result}");
    }
    // The integer parameter reached the tool as one: only line 2 on.
    let read = results[1]["data"]["result"]["output"].as_str().unwrap();
    assert!(
        read.contains("<b>two</b>") && !read.contains("line one"),
        "{read}"
    );
    // Announce and authoritative copy of both calls say where they came from.
    assert_eq!(recovered_from(&out), vec![Value::from("qwen3_xml"); 4]);
    let uses = out.of_kind("tool_use");
    assert_eq!(uses[1]["data"]["call"]["rawInput"]["path"], "out.txt");
    assert_eq!(uses[3]["data"]["call"]["rawInput"]["startLine"], 2);
    assert_eq!(authoritative(&out, "assistant_text")[0], "I'll write it.");
    let second = messages(&server, 1);
    assert_eq!(second[second.len() - 1]["role"], "tool");
}

#[tokio::test]
async fn a_reply_that_is_only_a_json_call_runs_it() {
    let h = Harness::new();
    std::fs::write(h.work().join("notes.md"), "remember the milk\n").unwrap();
    let server = FakeModel::start().await;
    server.push(Reply::new().text(
        "```json\n{\"name\": \"functions.read_file\", \"parameters\": {\"path\": \"notes.md\"}}\n```",
    ));
    server.push(Reply::new().text("It says: remember the milk."));
    let out = openai_run(&h, &server, "what is in notes.md?").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_well_formed(&out);
    let results = out.of_kind("tool_result");
    assert_eq!(results.len(), 1, "{out:?}");
    let result = &results[0]["data"]["result"];
    assert_eq!(result["tool"], "read_file", "{result}");
    assert!(result["output"].as_str().unwrap().contains("milk"));
    assert_eq!(recovered_from(&out), vec![Value::from("json"); 2]);
}

#[tokio::test]
async fn a_native_call_is_not_marked_recovered() {
    let h = Harness::new();
    std::fs::write(h.work().join("a.txt"), "A\n").unwrap();
    let server = FakeModel::start().await;
    server.push(
        Reply::new()
            .tool_call("c1", "read_file", r#"{"path": "a.txt"}"#)
            .finish("tool_calls"),
    );
    server.push(Reply::new().text("A."));
    let out = openai_run(&h, &server, "read a.txt").run().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let marks = recovered_from(&out);
    assert!(
        !marks.is_empty() && marks.iter().all(Value::is_null),
        "{marks:?}"
    );
}

/// Attack: calls the model only quotes (an example in a fence, a JSON call inside prose, an
/// XML call in an inline code span) and calls in two shapes at once must not run.
#[tokio::test]
async fn quoted_or_mixed_calls_in_the_text_never_run() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    let write = "<function=write_file>\n<parameter=path>\npwned.txt\n</parameter>\n\
                 <parameter=content>\nx\n</parameter>\n</function>";
    server.push(Reply::new().text(&format!(
        "Qwen writes calls like this:\n```xml\n<tool_call>\n{write}\n</tool_call>\n```\n\
         or inline `{write}`, and the JSON form is \
         {{\"name\": \"write_file\", \"arguments\": {{\"path\": \"pwned.txt\", \"content\": \"x\"}}}}."
    )));
    server.push(Reply::new().text(&format!(
        "{write}\n[TOOL_CALLS]write_file[ARGS]{{\"path\": \"pwned.txt\", \"content\": \"y\"}}"
    )));
    for prompt in ["how do tool calls look?", "again"] {
        let out = openai_run(&h, &server, prompt)
            .args(["-p", "bypass"])
            .run()
            .await;
        assert_eq!(out.code, Some(0), "{out:?}");
        assert!(out.of_kind("tool_use").is_empty(), "{out:?}");
        assert!(out.of_kind("tool_result").is_empty(), "{out:?}");
    }
    assert!(!h.work().join("pwned.txt").exists());
    assert_eq!(server.chat_requests().len(), 2);
}
