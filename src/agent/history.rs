//! Rebuilding the model's view of a conversation from the event log, for `--resume`.
//! Only authoritative envelopes are read: `user_text`, `assistant_text`/`thought` blocks,
//! authoritative `tool_use` (with `rawInput`), `tool_result`, and `compaction`.

use crate::event::{ContentBlock, Envelope, Payload, UserTextData};
use crate::model::{Image, Message, Role, ToolCall};

pub struct Rebuilt {
    /// Every message after the system prompt.
    pub messages: Vec<Message>,
    /// The latest compaction summary, to append to the system prompt.
    pub summary: Option<String>,
}

pub fn rebuild(envelopes: &[Envelope]) -> Rebuilt {
    let mut messages: Vec<Message> = Vec::new();
    let mut summary = None;
    let mut open: Option<Message> = None;
    let flush = |open: &mut Option<Message>, messages: &mut Vec<Message>| {
        if let Some(message) = open.take() {
            messages.push(message);
        }
    };
    for envelope in envelopes {
        match &envelope.payload {
            // A prompt's images follow its text as their own envelopes.
            Payload::UserText(UserTextData {
                content: ContentBlock::Image { data, mime_type },
            }) if open.is_none() && messages.last().is_some_and(|m| m.role == Role::User) => {
                if let Some(last) = messages.last_mut() {
                    last.images.push(Image {
                        mime_type: mime_type.clone(),
                        data_base64: data.clone(),
                    });
                }
            }
            Payload::UserText(data) => {
                flush(&mut open, &mut messages);
                messages.push(Message::user(text_of(&data.content)));
            }
            Payload::AssistantText(data) if !data.delta => {
                let message = open.get_or_insert_with(|| Message::assistant(""));
                message.content.push_str(text_of(&data.content));
            }
            Payload::Thought(data) if !data.delta => {
                let message = open.get_or_insert_with(|| Message::assistant(""));
                message
                    .thinking
                    .get_or_insert_with(String::new)
                    .push_str(text_of(&data.content));
            }
            Payload::ToolUse(data) => {
                if let Some(input) = &data.call.raw_input {
                    let message = open.get_or_insert_with(|| Message::assistant(""));
                    let arguments = if input.is_object() {
                        input.clone()
                    } else {
                        serde_json::json!({})
                    };
                    message.tool_calls.push(ToolCall {
                        id: data.call.tool_call_id.clone(),
                        name: name_of(&data.call.title, &data.call.tool_call_id, envelopes),
                        arguments,
                    });
                }
            }
            Payload::ToolResult(data) => {
                flush(&mut open, &mut messages);
                let record = &data.result;
                let call = ToolCall {
                    id: record.tool_call_id.clone(),
                    name: record.tool.clone(),
                    arguments: serde_json::json!({}),
                };
                let content = match (&record.output, &record.error) {
                    (Some(output), _) => output.clone(),
                    (None, error) => format!("Error: {}", error.as_deref().unwrap_or_default()),
                };
                messages.push(Message::tool_result(&call, content));
            }
            Payload::Result(_) => flush(&mut open, &mut messages),
            Payload::Compaction(data) => {
                flush(&mut open, &mut messages);
                let drop = data.messages_compacted.min(messages.len());
                messages.drain(..drop);
                summary = Some(data.summary.clone());
            }
            _ => {}
        }
    }
    flush(&mut open, &mut messages);
    // A turn cut off mid-call leaves calls without results; the model APIs reject that.
    drop_unanswered_calls(&mut messages);
    Rebuilt { messages, summary }
}

/// The tool name is in the matching `tool_result`; the announce carries only a title.
fn name_of(title: &str, call_id: &str, envelopes: &[Envelope]) -> String {
    envelopes
        .iter()
        .find_map(|e| match &e.payload {
            Payload::ToolResult(r) if r.result.tool_call_id == call_id => {
                Some(r.result.tool.clone())
            }
            _ => None,
        })
        .unwrap_or_else(|| title.to_string())
}

fn drop_unanswered_calls(messages: &mut [Message]) {
    let answered: std::collections::HashSet<String> = messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .filter_map(|m| m.tool_call_id.clone())
        .collect();
    for message in messages.iter_mut() {
        message.tool_calls.retain(|c| answered.contains(&c.id));
    }
}

fn text_of(content: &ContentBlock) -> &str {
    match content {
        ContentBlock::Text { text } => text,
        ContentBlock::Image { .. } => "",
    }
}
