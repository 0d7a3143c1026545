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
    // A definition corral cannot use (an http URL that is not http): refused, naming the
    // server, nothing opened.
    let bad = request(
        &mut running,
        1,
        "session/new",
        json!({"cwd": h.work(), "mcpServers": [{"type": "http", "name": "bad-web",
                                                "url": "file:///etc", "headers": []}]}),
    )
    .await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap()
            .contains("bad-web"),
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

/// server-everything serving `transport` (`streamableHttp`, `sse`) on a free loopback port,
/// once it accepts connections; killed on drop.
async fn http_everything(transport: &str) -> (tokio::process::Child, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = tokio::process::Command::new(server_bin("mcp-server-everything"))
        .arg(transport)
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "server-everything {transport} did not listen on {port}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    (child, port)
}

#[tokio::test]
async fn http_and_sse_servers_from_the_client_are_reached() {
    let (_http, http_port) = http_everything("streamableHttp").await;
    let (_sse, sse_port) = http_everything("sse").await;
    let h = Harness::new();
    let model = FakeModel::start().await;
    model.push(Reply::new().tool_call("c1", "web__echo", r#"{"message":"over http"}"#));
    model.push(Reply::new().tool_call("c2", "old__echo", r#"{"message":"over sse"}"#));
    model.push(Reply::new().text("Both."));
    let mut running = start(&h, &model).await;
    let servers = json!([
        {"type": "http", "name": "web", "url": format!("http://127.0.0.1:{http_port}/mcp"),
         "headers": [{"name": "X-Client", "value": "editor"}]},
        {"type": "sse", "name": "old", "url": format!("http://127.0.0.1:{sse_port}/sse"),
         "headers": []},
    ]);
    let created = request(
        &mut running,
        1,
        "session/new",
        json!({"cwd": h.work(), "mcpServers": servers}),
    )
    .await;
    let session = created["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("session/new: {created}"))
        .to_owned();
    let prompt = json!({"sessionId": session, "prompt": [{"type": "text", "text": "go"}]});
    let line = json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": prompt});
    running.send_line(&line.to_string()).await;
    // Each call asks the editor first; both are allowed.
    for n in 0..2 {
        let ask = running
            .wait_for_event(n, |m| m["method"] == "session/request_permission")
            .await;
        let answer = json!({"jsonrpc": "2.0", "id": ask["id"],
                            "result": {"outcome": {"outcome": "selected", "optionId": "allow"}}});
        running.send_line(&answer.to_string()).await;
    }
    let done = running.wait_for_event(0, |m| m["id"] == 2).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    for (id, text) in [("c1", "Echo: over http"), ("c2", "Echo: over sse")] {
        let results = finished(&running, id);
        assert_eq!(results.len(), 1, "{id}: {:?}", running.events_so_far());
        assert!(results[0].to_string().contains(text), "{results:?}");
    }
    running.close_stdin();
    assert!(running.wait().await.success());
}
