//! Rebuilding the model's view of a conversation from the event log, for `--resume`.
//! Only authoritative envelopes are read: `user_text`, `assistant_text`/`thought` blocks,
//! authoritative `tool_use` (with `rawInput`), `tool_result`, `result` and `compaction`.
//!
//! A turn the log leaves without a `result` was cut off (the process was killed or crashed).
//! Sent as it stands it would break the conversation: a user message straight after another
//! (templates that require alternating roles reject that) and tool calls the model never learns
//! the fate of. [`rebuild`] closes such a turn with the envelopes a finished one would have had:
//! a failed `tool_result` for each call left without one (the call is not run again), an
//! assistant note saying the turn was interrupted (merged into the turn's last answer when there
//! is one, so roles keep alternating), and a `result` (`stopReason: error`). The log is never
//! rewritten: the closing of the last turn is returned in [`Rebuilt::repair`] for the caller to
//! append, and a later rebuild reads those envelopes like any others, arriving at the same
//! messages. Turns cut off earlier in a log (one an older corral resumed) are closed the same
//! way in memory.
//!
//! Linear in the log: tool names are looked up in a map built in one pass.

use std::collections::HashMap;

use crate::event::{
    ContentBlock, Envelope, Payload, ResultData, StopReason, TextData, ToolResultData, Usage,
    UserTextData,
};
use crate::model::{Image, Message, Role, ToolCall};

/// What an interrupted call's result says.
pub const INTERRUPTED_CALL: &str = "interrupted: corral stopped (killed or crashed) before this \
     call finished; it was not run again, and it may or may not have taken effect";

/// The note that closes an interrupted turn.
pub const INTERRUPTED_TURN: &str = "[This turn was interrupted: corral stopped (killed or \
     crashed) before it finished. The session was resumed afterwards.]";

/// The `result` error of a turn closed on resume.
pub const INTERRUPTED_RESULT: &str =
    "interrupted: the turn had no result when the session was resumed";

pub struct Rebuilt {
    /// Every message after the system prompt.
    pub messages: Vec<Message>,
    /// The latest compaction summary, to append to the system prompt.
    pub summary: Option<String>,
    /// Envelopes that close the log's last turn, cut off without a result; already applied
    /// to `messages`. Empty when the log ends cleanly.
    pub repair: Vec<Payload>,
}

/// `tool_name` maps a `tool_use` title to its tool's name, for a call whose `tool_result`
/// (which carries the name) never came.
pub fn rebuild(envelopes: &[Envelope], tool_name: &dyn Fn(&str) -> Option<String>) -> Rebuilt {
    let names: HashMap<&str, &str> = envelopes
        .iter()
        .filter_map(|e| match &e.payload {
            Payload::ToolResult(r) => {
                Some((r.result.tool_call_id.as_str(), r.result.tool.as_str()))
            }
            _ => None,
        })
        .collect();
    let mut builder = Builder::default();
    for envelope in envelopes {
        if matches!(&envelope.payload, Payload::UserText(d) if !is_image(&d.content))
            && builder.turn != Some(envelope.turn)
        {
            if builder.open_turn {
                let turn = builder.turn.unwrap_or_default();
                tracing::warn!(turn, "closing a turn the event log left without a result");
                for payload in builder.closing() {
                    builder.apply(&payload, &names, tool_name);
                }
            }
            builder.turn = Some(envelope.turn);
        }
        builder.apply(&envelope.payload, &names, tool_name);
    }
    let repair = if builder.open_turn {
        builder.closing()
    } else {
        Vec::new()
    };
    for payload in &repair {
        builder.apply(payload, &names, tool_name);
    }
    builder.flush();
    let mut messages = builder.messages;
    // A turn that ended (cancelled, say) with calls left unanswered: the model APIs reject
    // calls without results, and that turn's end is on record, so they are left out.
    drop_unanswered_calls(&mut messages);
    Rebuilt {
        messages,
        summary: builder.summary,
        repair,
    }
}

#[derive(Default)]
struct Builder {
    messages: Vec<Message>,
    summary: Option<String>,
    /// The assistant message being put together (text, thinking, calls of one step).
    open: Option<Message>,
    /// The turn of the last prompt.
    turn: Option<u32>,
    /// A prompt has been read and its turn's `result` has not.
    open_turn: bool,
    /// Calls of the open turn without a result yet, in order.
    unanswered: Vec<ToolCall>,
}

impl Builder {
    fn flush(&mut self) {
        if let Some(message) = self.open.take() {
            self.messages.push(message);
        }
    }

    fn apply(
        &mut self,
        payload: &Payload,
        names: &HashMap<&str, &str>,
        tool_name: &dyn Fn(&str) -> Option<String>,
    ) {
        match payload {
            // A prompt's images follow its text as their own envelopes.
            Payload::UserText(UserTextData {
                content: ContentBlock::Image { data, mime_type },
            }) => {
                let image = Image {
                    mime_type: mime_type.clone(),
                    data_base64: data.clone(),
                };
                match self.messages.last_mut() {
                    Some(last) if self.open.is_none() && last.role == Role::User => {
                        last.images.push(image);
                    }
                    _ => {
                        self.flush();
                        let mut message = Message::user("");
                        message.images.push(image);
                        self.messages.push(message);
                    }
                }
            }
            Payload::UserText(data) => {
                self.flush();
                self.open_turn = true;
                self.messages.push(Message::user(text_of(&data.content)));
            }
            Payload::AssistantText(data) if !data.delta => {
                let message = self.open.get_or_insert_with(|| Message::assistant(""));
                message.content.push_str(text_of(&data.content));
            }
            Payload::Thought(data) if !data.delta => {
                let message = self.open.get_or_insert_with(|| Message::assistant(""));
                message
                    .thinking
                    .get_or_insert_with(String::new)
                    .push_str(text_of(&data.content));
            }
            Payload::ToolUse(data) => {
                if let Some(input) = &data.call.raw_input {
                    let id = &data.call.tool_call_id;
                    let name = match names.get(id.as_str()) {
                        Some(name) => (*name).to_string(),
                        None => {
                            tool_name(&data.call.title).unwrap_or_else(|| data.call.title.clone())
                        }
                    };
                    let arguments = if input.is_object() {
                        input.clone()
                    } else {
                        serde_json::json!({})
                    };
                    let call = ToolCall {
                        id: id.clone(),
                        name,
                        arguments,
                    };
                    self.unanswered.push(call.clone());
                    let message = self.open.get_or_insert_with(|| Message::assistant(""));
                    message.tool_calls.push(call);
                }
            }
            Payload::ToolResult(data) => {
                self.flush();
                let record = &data.result;
                if let Some(i) = self
                    .unanswered
                    .iter()
                    .position(|c| c.id == record.tool_call_id)
                {
                    self.unanswered.remove(i);
                }
                let call = ToolCall {
                    id: record.tool_call_id.clone(),
                    name: record.tool.clone(),
                    arguments: serde_json::json!({}),
                };
                let content = match (&record.output, &record.error) {
                    (Some(output), _) => output.clone(),
                    (None, error) => format!("Error: {}", error.as_deref().unwrap_or_default()),
                };
                self.messages.push(Message::tool_result(&call, content));
            }
            Payload::Result(_) => {
                self.flush();
                self.open_turn = false;
                self.unanswered.clear();
            }
            Payload::Compaction(data) => {
                self.flush();
                let drop = data.messages_compacted.min(self.messages.len());
                self.messages.drain(..drop);
                self.summary = Some(data.summary.clone());
            }
            _ => {}
        }
    }

    /// The envelopes a cut-off turn lacks, given where it stopped.
    fn closing(&self) -> Vec<Payload> {
        let mut payloads: Vec<Payload> = self.unanswered.iter().map(interrupted_call).collect();
        // With no call to answer, the turn's own last answer (if it got one) takes the note.
        let merge =
            payloads.is_empty() && self.open.as_ref().is_some_and(|m| !m.content.is_empty());
        let note = if merge {
            format!("\n\n{INTERRUPTED_TURN}")
        } else {
            INTERRUPTED_TURN.to_string()
        };
        payloads.push(Payload::AssistantText(TextData {
            delta: false,
            content: ContentBlock::Text { text: note },
        }));
        payloads.push(Payload::Result(ResultData {
            stop_reason: StopReason::Error,
            usage: Usage::default(),
            error: Some(INTERRUPTED_RESULT.to_string()),
        }));
        payloads
    }
}

fn interrupted_call(call: &ToolCall) -> Payload {
    Payload::ToolResult(ToolResultData::finished(
        &call.id,
        &call.name,
        Err(INTERRUPTED_CALL.to_string()),
        0,
        Vec::new(),
    ))
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

fn is_image(content: &ContentBlock) -> bool {
    matches!(content, ContentBlock::Image { .. })
}

fn text_of(content: &ContentBlock) -> &str {
    match content {
        ContentBlock::Text { text } => text,
        ContentBlock::Image { .. } => "",
    }
}

#[cfg(test)]
#[path = "history_tests.rs"]
mod tests;
