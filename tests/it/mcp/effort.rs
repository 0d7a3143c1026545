//! Kaimon's `effort` on `agent_open`, and the `/level` suffix on its model: applied, the
//! field winning over the suffix, refused when it is no level, and noted in the answer when
//! the model cannot take it.

use serde_json::json;

use crate::common::{mcp_call, mcp_initialize};
use crate::support::{FakeModel, Harness, ModelInfo, Reply};

#[tokio::test]
async fn agent_open_applies_the_effort_or_notes_why_not() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let mut running = h.corral().arg("mcp").live_stdin().spawn().await;
    mcp_initialize(&mut running).await;
    let run = |agent: &serde_json::Value| json!({"agent_id": agent, "text": "hi"});

    model.push(Reply::new().text("one"));
    let suffixed = json!({"cwd": h.work(), "model": "llamacpp:fake-model/high",
                          "base_url": model.openai_base()});
    let opened = mcp_call(&mut running, 1, "agent_open", suffixed).await;
    assert!(opened.get("notes").is_none(), "{opened}");
    mcp_call(&mut running, 2, "agent_run", run(&opened["agent_id"])).await;
    assert_eq!(model.chat_requests()[0]["reasoning_effort"], "high");
    assert_eq!(model.chat_requests()[0]["model"], "fake-model");

    model.push(Reply::new().text("two"));
    let both = json!({"cwd": h.work(), "model": "llamacpp:fake-model/high", "effort": "low",
                      "base_url": model.openai_base()});
    let opened = mcp_call(&mut running, 3, "agent_open", both).await;
    mcp_call(&mut running, 4, "agent_run", run(&opened["agent_id"])).await;
    assert_eq!(
        model.chat_requests()[1]["reasoning_effort"],
        "low",
        "the field overrides the suffix"
    );

    let bad = json!({"cwd": h.work(), "effort": "extreme"});
    let refused = crate::common::mcp_call_result(&mut running, 5, "agent_open", bad).await;
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(
        refused.to_string().contains("low, medium or high"),
        "{refused}"
    );

    // An Ollama model without the thinking capability: opened, used, and the answer says the
    // effort was not applied.
    model.set_models(vec![ModelInfo::new(
        "fake-model",
        &["completion", "tools"],
        8192,
    )]);
    model.push(Reply::new().text("three"));
    let plain = json!({"cwd": h.work(), "model": "ollama:fake-model", "effort": "high",
                       "base_url": model.base_url()});
    let opened = mcp_call(&mut running, 6, "agent_open", plain).await;
    let notes = opened["notes"].to_string();
    assert!(notes.contains("does not think"), "{opened}");
    let ran = mcp_call(&mut running, 7, "agent_run", run(&opened["agent_id"])).await;
    assert_eq!(ran, json!({"text": "three"}));
    running.close_stdin();
    running.wait().await;
}
