//! History messages as chat completions takes them, borrowed from the history: a long
//! session's request is built without copying every message into a JSON tree first.

use serde::Serialize;
use serde_json::{Value, json};

use crate::model::types::{Image, Message, Role};

#[derive(Serialize)]
#[serde(untagged)]
pub enum WireMessage<'a> {
    Text {
        role: &'static str,
        content: &'a str,
    },
    /// A user message with images, or the images a run of tool results returned.
    Parts {
        role: &'static str,
        content: Vec<Value>,
    },
    Assistant {
        role: &'static str,
        /// `null` when the message is only calls.
        content: Option<&'a str>,
        tool_calls: Vec<WireCall<'a>>,
    },
    Tool {
        role: &'static str,
        tool_call_id: &'a str,
        content: &'a str,
    },
}

#[derive(Serialize)]
pub struct WireCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    /// Chat completions carries arguments as a JSON text.
    arguments: String,
}

/// Chat completions has no images in tool messages: images a run of tool results carried go
/// in one user message right after that run (tool messages must follow their call directly).
pub fn wire_messages(messages: &[Message]) -> Vec<WireMessage<'_>> {
    let mut wire = Vec::with_capacity(messages.len());
    let mut pending_images: Vec<Value> = Vec::new();
    for message in messages {
        if message.role != Role::Tool && !pending_images.is_empty() {
            wire.push(images_message(std::mem::take(&mut pending_images)));
        }
        wire.push(wire_message(message));
        if message.role == Role::Tool {
            pending_images.extend(message.images.iter().map(image_part));
        }
    }
    if !pending_images.is_empty() {
        wire.push(images_message(pending_images));
    }
    wire
}

fn image_part(image: &Image) -> Value {
    json!({"type": "image_url", "image_url": {
        "url": format!("data:{};base64,{}", image.mime_type, image.data_base64)}})
}

fn images_message(parts: Vec<Value>) -> WireMessage<'static> {
    let mut content =
        vec![json!({"type": "text", "text": "Images returned by the tool calls above:"})];
    content.extend(parts);
    WireMessage::Parts {
        role: "user",
        content,
    }
}

fn wire_message(message: &Message) -> WireMessage<'_> {
    match message.role {
        Role::System => WireMessage::Text {
            role: "system",
            content: &message.content,
        },
        Role::User if message.images.is_empty() => WireMessage::Text {
            role: "user",
            content: &message.content,
        },
        Role::User => {
            let mut content = vec![json!({"type": "text", "text": message.content})];
            content.extend(message.images.iter().map(image_part));
            WireMessage::Parts {
                role: "user",
                content,
            }
        }
        Role::Assistant if message.tool_calls.is_empty() => WireMessage::Text {
            role: "assistant",
            content: &message.content,
        },
        Role::Assistant => WireMessage::Assistant {
            role: "assistant",
            content: (!message.content.is_empty()).then_some(message.content.as_str()),
            tool_calls: message
                .tool_calls
                .iter()
                .map(|call| WireCall {
                    id: &call.id,
                    kind: "function",
                    function: WireFunction {
                        name: &call.name,
                        arguments: call.arguments.to_string(),
                    },
                })
                .collect(),
        },
        Role::Tool => WireMessage::Tool {
            role: "tool",
            tool_call_id: message.tool_call_id.as_deref().unwrap_or_default(),
            content: &message.content,
        },
    }
}
