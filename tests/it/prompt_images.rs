//! Images in a prompt reach the model as its wire format says (wire-formats.md): Ollama's
//! `images: [base64]` on the user message, chat completions' `image_url` parts with a
//! `data:` URL, and in both the file's bytes exactly. ACP's `session/prompt` is the surface
//! that takes prompt images (`promptCapabilities.image`).

use base64::Engine as _;
use serde_json::{Value, json};

use crate::support::{FakeModel, Harness, Reply};

const PROMPT: &str = "what is in this picture?";

/// A PNG signature and every byte value, so the base64 has `+`, `/` and padding.
fn image_file(h: &Harness) -> (Vec<u8>, String) {
    let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
    bytes.extend((0..=255u8).rev());
    bytes.extend((0..=255u8).step_by(3));
    let path = h.work().join("picture.png");
    std::fs::write(&path, &bytes).unwrap();
    let read = std::fs::read(&path).unwrap();
    (
        read.clone(),
        base64::engine::general_purpose::STANDARD.encode(read),
    )
}

/// One ACP prompt of text and the image on `model` through `corral acp`; the user message
/// of the one chat request it made.
async fn prompt_with_image(h: &Harness, server: &FakeModel, model: &str, base: &str) -> Value {
    let (_, data) = image_file(h);
    server.push(Reply::new().text("A test pattern."));
    let mut acp = h
        .corral()
        .args(["acp", "-m", model, "--base-url", base])
        .live_stdin()
        .spawn()
        .await;
    let requests = [
        json!({"method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
        json!({"method": "session/new", "params": {"cwd": h.work(), "mcpServers": []}}),
    ];
    let mut session = String::new();
    for (id, request) in requests.into_iter().enumerate() {
        let mut request = request;
        request["jsonrpc"] = json!("2.0");
        request["id"] = json!(id);
        acp.send_line(&request.to_string()).await;
        let answer = acp.wait_for_event(0, |m| m["id"] == id).await;
        if let Some(id) = answer["result"]["sessionId"].as_str() {
            session = id.to_owned();
        }
    }
    let blocks = json!([{"type": "text", "text": PROMPT},
                        {"type": "image", "mimeType": "image/png", "data": data}]);
    let prompt = json!({"jsonrpc": "2.0", "id": 9, "method": "session/prompt",
                        "params": {"sessionId": session, "prompt": blocks}});
    acp.send_line(&prompt.to_string()).await;
    let answer = acp.wait_for_event(0, |m| m["id"] == 9).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    acp.close_stdin();
    let out = acp.wait().await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let chats = server.chat_requests();
    assert_eq!(chats.len(), 1, "{chats:?}");
    let users: Vec<Value> = chats[0]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .cloned()
        .collect();
    assert_eq!(users.len(), 1, "{users:?}");
    users[0].clone()
}

#[tokio::test]
async fn a_prompt_image_reaches_ollama_as_base64_in_images() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    let user = prompt_with_image(&h, &server, "ollama:fake-model", &server.base_url()).await;
    let (bytes, data) = image_file(&h);
    assert_eq!(user["images"], json!([data]), "{user}");
    let sent = base64::engine::general_purpose::STANDARD
        .decode(user["images"][0].as_str().unwrap())
        .unwrap();
    assert_eq!(sent, bytes);
    assert_eq!(user["content"], PROMPT, "{user}");
}

#[tokio::test]
async fn a_prompt_image_reaches_chat_completions_as_a_data_url_part() {
    let h = Harness::new();
    let server = FakeModel::start().await;
    let model = "llamacpp:fake-model";
    let user = prompt_with_image(&h, &server, model, &server.openai_base()).await;
    let (bytes, data) = image_file(&h);
    let url = format!("data:image/png;base64,{data}");
    assert_eq!(
        user["content"],
        json!([{"type": "text", "text": PROMPT},
               {"type": "image_url", "image_url": {"url": url}}]),
        "{user}"
    );
    let sent = user["content"][1]["image_url"]["url"].as_str().unwrap();
    let sent = base64::engine::general_purpose::STANDARD
        .decode(sent.strip_prefix("data:image/png;base64,").unwrap())
        .unwrap();
    assert_eq!(sent, bytes);
    assert!(user.get("images").is_none(), "{user}");
}
