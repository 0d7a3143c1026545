//! The `mcpServers` an ACP client sends: `session/new` and `session/load` start them for the
//! session (server-everything over stdio, a real server nobody here wrote), the model calls
//! their tools through the gate, and the result reaches the client; a bad definition is an
//! `invalid_params` error naming it.

use serde_json::{Value, json};

use super::{of_kind, prompt_answering};
use crate::mcp_client::basics::server_bin;
use crate::support::{FakeModel, Harness, Reply, Running};

fn everything() -> Value {
    json!([{"name": "everything", "command": server_bin("mcp-server-everything"),
            "args": [], "env": [{"name": "EVERYTHING_TEST", "value": "1"}]}])
}

async fn start(h: &Harness, model: &FakeModel) -> Running {
    let mut running = h
        .corral()
        .args(["acp", "-m", "llamacpp:fake-model"])
        .args(["--base-url", &model.openai_base()])
        .live_stdin()
        .spawn()
        .await;
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                      "params": {"protocolVersion": 1, "clientCapabilities": {}}});
    running.send_line(&init.to_string()).await;
    let init = running.wait_for_event(0, |m| m["id"] == 0).await;
    assert_eq!(
        init["result"]["agentCapabilities"]["mcpCapabilities"],
        json!({"http": true, "sse": true}),
        "{init}"
    );
    running
}

async fn request(running: &mut Running, id: u64, method: &str, params: Value) -> Value {
    let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    running.send_line(&line.to_string()).await;
    running.wait_for_event(0, |m| m["id"] == id).await
}

/// The `session/update`s of tool call `id` that finished, as the client got them.
fn finished(running: &Running, id: &str) -> Vec<Value> {
    let updates: Vec<Value> = running
        .events_so_far()
        .into_iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| m["params"]["update"].clone())
        .collect();
    of_kind(&Value::Array(updates), "tool_call_update")
        .into_iter()
        .filter(|u| u["toolCallId"] == id && u["status"] == "completed")
        .cloned()
        .collect()
}

#[tokio::test]
async fn servers_from_session_new_and_session_load_give_the_model_their_tools() {
    let h = Harness::new();
    let model = FakeModel::start().await;
    let echo = |id: &str, text: &str| {
        Reply::new().tool_call(
            id,
            "everything__echo",
            &json!({"message": text}).to_string(),
        )
    };
    model.push(echo("c1", "hi from the editor's server"));
    model.push(Reply::new().text("Echoed."));
    model.push(echo("c2", "again after load"));
    model.push(Reply::new().text("Echoed again."));

    let mut running = start(&h, &model).await;
    // A name the model's tool names cannot carry: refused, naming it, nothing opened.
    let bad = request(
        &mut running,
        1,
        "session/new",
        json!({"cwd": h.work(), "mcpServers": [{"name": "a__b", "command": "x",
                                                "args": [], "env": []}]}),
    )
    .await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    assert!(
        bad["error"]["message"].as_str().unwrap().contains("a__b"),
        "{bad}"
    );
    let created = request(
        &mut running,
        2,
        "session/new",
        json!({"cwd": h.work(), "mcpServers": everything()}),
    )
    .await;
    let session = created["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("session/new: {created}"))
        .to_owned();
    let (done, ask) = prompt_answering(&mut running, &session, 3, 0, "allow").await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    // The gate asked about the server's tool, showing its arguments.
    assert_eq!(ask["params"]["toolCall"]["toolCallId"], "c1", "{ask}");
    assert!(
        ask.to_string().contains("hi from the editor's server"),
        "{ask}"
    );
    let results = finished(&running, "c1");
    assert_eq!(results.len(), 1, "{:?}", running.events_so_far());
    assert!(
        results[0]
            .to_string()
            .contains("Echo: hi from the editor's server"),
        "{results:?}"
    );
    let offered = &model.chat_requests()[0]["tools"];
    assert!(
        offered.to_string().contains("everything__echo"),
        "{offered}"
    );
    running.close_stdin();
    assert!(running.wait().await.success());

    // A new process resumes the session from its log with the servers session/load gives.
    let mut running = start(&h, &model).await;
    let loaded = request(
        &mut running,
        1,
        "session/load",
        json!({"sessionId": session, "cwd": h.work(), "mcpServers": everything()}),
    )
    .await;
    assert!(loaded["result"].is_object(), "{loaded}");
    let (done, _) = prompt_answering(&mut running, &session, 2, 0, "allow").await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    let results = finished(&running, "c2");
    assert_eq!(results.len(), 1, "{:?}", running.events_so_far());
    assert!(
        results[0].to_string().contains("Echo: again after load"),
        "{results:?}"
    );
    running.close_stdin();
    assert!(running.wait().await.success());
}
