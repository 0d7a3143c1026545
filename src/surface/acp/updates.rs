//! corral's envelopes as ACP `session/update`s. One [`Projection`] per ACP session keeps
//! what the mapping needs across envelopes: which tool calls the client has seen, whether a
//! message's text already went out as chunks, a write's diff, a command's output so far.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::event::{ContentBlock, Envelope, Payload, PermissionRequest, ToolCallStatus};

/// Shell output shown in a running tool call: the last this many bytes.
const OUTPUT_TAIL: usize = 16 * 1024;

#[derive(Default)]
pub struct Projection {
    /// Tool calls announced to the client, with the diff a write carries.
    calls: HashMap<String, Vec<Value>>,
    output: HashMap<String, String>,
    streamed_text: bool,
    streamed_thought: bool,
}

fn text_of(content: &ContentBlock) -> Option<&str> {
    match content {
        ContentBlock::Text { text } => Some(text),
        ContentBlock::Image { .. } => None,
    }
}

fn content_json(content: &ContentBlock) -> Value {
    match content {
        ContentBlock::Text { text } => json!({"type": "text", "text": text}),
        ContentBlock::Image { data, mime_type } => {
            json!({"type": "image", "data": data, "mimeType": mime_type})
        }
    }
}

fn status_name(status: ToolCallStatus) -> &'static str {
    match status {
        ToolCallStatus::Pending => "pending",
        ToolCallStatus::InProgress => "in_progress",
        ToolCallStatus::Completed => "completed",
        ToolCallStatus::Failed => "failed",
    }
}

/// Keeps the end of `text` within `max` bytes, on a character boundary.
fn tail(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

impl Projection {
    /// The diffs a write call carries (one per file), for the permission question about it.
    pub fn diffs_of(&self, tool_call_id: &str) -> Vec<Value> {
        self.calls.get(tool_call_id).cloned().unwrap_or_default()
    }

    /// The updates for one envelope. `replay`: the session is being loaded, so the user's
    /// own prompts are sent back too and every text goes out whole.
    pub fn updates(&mut self, envelope: &Envelope, replay: bool) -> Vec<Value> {
        match &envelope.payload {
            Payload::UserText(data) if replay => {
                vec![json!({"sessionUpdate": "user_message_chunk",
                            "content": content_json(&data.content)})]
            }
            Payload::AssistantText(data) => {
                self.chunk(data.delta, &data.content, replay, "agent_message_chunk")
            }
            Payload::Thought(data) => {
                self.chunk(data.delta, &data.content, replay, "agent_thought_chunk")
            }
            Payload::ToolUse(data) => {
                let call = &data.call;
                let known = self.calls.contains_key(&call.tool_call_id);
                let diffs: Vec<Value> = call
                    .content
                    .iter()
                    .filter(|c| c["type"] == "diff")
                    .cloned()
                    .collect();
                let entry = self.calls.entry(call.tool_call_id.clone()).or_default();
                if !diffs.is_empty() {
                    *entry = diffs;
                }
                let mut update = json!({
                    "toolCallId": call.tool_call_id,
                    "title": call.title,
                    "kind": call.kind,
                    "status": status_name(call.status),
                    "content": call.content,
                    "locations": call.locations,
                });
                if let Some(input) = &call.raw_input {
                    update["rawInput"] = input.clone();
                }
                update["sessionUpdate"] = json!(if known {
                    "tool_call_update"
                } else {
                    "tool_call"
                });
                vec![update]
            }
            Payload::ToolOutput(data) if !replay => {
                let shown = self.output.entry(data.tool_call_id.clone()).or_default();
                shown.push_str(&data.text);
                if shown.len() > 2 * OUTPUT_TAIL {
                    *shown = tail(shown, OUTPUT_TAIL).to_string();
                }
                vec![json!({
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": data.tool_call_id,
                    "status": "in_progress",
                    "content": [{"type": "content", "content": {
                        "type": "text", "text": tail(shown, OUTPUT_TAIL)}}],
                })]
            }
            Payload::ToolResult(data) => {
                let id = &data.update.tool_call_id;
                self.output.remove(id);
                let mut content = self.calls.remove(id).unwrap_or_default();
                content.extend(data.update.content.iter().cloned());
                let mut update = json!({
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": id,
                    "status": status_name(data.update.status),
                    "content": content,
                });
                if let Some(output) = data.result.output.as_ref().or(data.result.error.as_ref()) {
                    update["rawOutput"] = json!(output);
                }
                vec![update]
            }
            Payload::Plan(data) => vec![json!({"sessionUpdate": "plan", "entries": data.entries})],
            Payload::Instructions(data) => vec![instructions_read(envelope.seq, data)],
            Payload::Usage(data) => match (data.context_tokens, data.context_window) {
                (Some(used), Some(size)) => {
                    let mut update = json!({"sessionUpdate": "usage_update",
                                            "used": used, "size": size});
                    if data.usage.cost_usd > 0.0 {
                        update["cost"] = json!({"amount": data.usage.cost_usd, "currency": "USD"});
                    }
                    vec![update]
                }
                _ => Vec::new(),
            },
            _ => Vec::new(),
        }
    }

    /// A message's text: live, the deltas go out and the authoritative copy only when no
    /// delta did (a backend that sends whole blocks); replayed, only the authoritative copy.
    fn chunk(
        &mut self,
        delta: bool,
        content: &ContentBlock,
        replay: bool,
        kind: &str,
    ) -> Vec<Value> {
        let streamed = if kind == "agent_message_chunk" {
            &mut self.streamed_text
        } else {
            &mut self.streamed_thought
        };
        let send = if delta {
            *streamed = true;
            !replay
        } else {
            let send = replay || !*streamed;
            *streamed = false;
            send
        };
        match text_of(content) {
            Some(text) if send && !text.is_empty() => {
                vec![json!({"sessionUpdate": kind, "content": {"type": "text", "text": text}})]
            }
            _ => Vec::new(),
        }
    }
}

/// The project instructions a session loaded, as a finished `read` tool call: an editor shows
/// it as a card naming the files (each a location it can open), outside the agent's message
/// and thoughts, which a client may quote back to the model.
fn instructions_read(seq: u64, data: &crate::event::InstructionsData) -> Value {
    let lines: Vec<String> = data.file_lines().collect();
    let locations: Vec<Value> = data.files.iter().map(|f| json!({"path": f.path})).collect();
    json!({
        "sessionUpdate": "tool_call",
        "toolCallId": format!("instructions-{seq}"),
        "title": "Read the project instructions",
        "kind": "read",
        "status": "completed",
        "locations": locations,
        "content": [{"type": "content", "content": {"type": "text", "text": lines.join("\n")}}],
    })
}

/// The options a gate question offers an ACP client, by kind, and the corral decision each
/// stands for. `reject_always` takes the tool away for the session. "Always" is offered only
/// where the gate offers it, named with what it covers, since that name is all an editor shows.
pub fn permission_options(request: &PermissionRequest) -> Value {
    let mut options =
        vec![json!({"optionId": "allow", "name": "Allow once", "kind": "allow_once"})];
    if request.always_offered() {
        let name = match request
            .always
            .as_ref()
            .and_then(|always| always.scope.strip_prefix("always: "))
        {
            Some(scope) => format!("Always allow {scope}"),
            None => "Always allow".to_string(),
        };
        options.push(json!({"optionId": "allow_all", "name": name, "kind": "allow_always"}));
    }
    options.push(json!({"optionId": "deny", "name": "Reject", "kind": "reject_once"}));
    options.push(json!({"optionId": "disable", "name": "Reject always", "kind": "reject_always"}));
    Value::Array(options)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{TextData, Timestamp, ToolCallInfo, ToolUseData};

    fn envelope(payload: Payload) -> Envelope {
        Envelope {
            seq: 1,
            ts: Timestamp::now(),
            session: "a".into(),
            turn: 1,
            payload,
        }
    }

    fn text(delta: bool, text: &str) -> Envelope {
        envelope(Payload::AssistantText(TextData {
            delta,
            content: ContentBlock::text(text),
        }))
    }

    #[test]
    fn streamed_text_is_not_sent_twice_and_whole_blocks_are_sent_once() {
        let mut p = Projection::default();
        assert_eq!(p.updates(&text(true, "He"), false).len(), 1);
        assert_eq!(p.updates(&text(true, "llo"), false).len(), 1);
        assert!(p.updates(&text(false, "Hello"), false).is_empty());
        let whole = p.updates(&text(false, "Whole"), false);
        assert_eq!(whole[0]["content"]["text"], "Whole");
        // Replayed: only the authoritative copy.
        assert!(p.updates(&text(true, "x"), true).is_empty());
        assert_eq!(p.updates(&text(false, "Hello"), true).len(), 1);
    }

    #[test]
    fn a_write_is_announced_then_completed_with_its_diff() {
        let mut p = Projection::default();
        let mut call = ToolCallInfo {
            tool_call_id: "c1".into(),
            title: "Write file".into(),
            kind: "edit".into(),
            status: ToolCallStatus::Pending,
            content: Vec::new(),
            locations: Vec::new(),
            raw_input: None,
        };
        let first = p.updates(
            &envelope(Payload::ToolUse(ToolUseData::new(
                "write_file",
                call.clone(),
            ))),
            false,
        );
        assert_eq!(first[0]["sessionUpdate"], "tool_call");
        call.status = ToolCallStatus::InProgress;
        call.content =
            vec![json!({"type": "diff", "path": "/r/x", "oldText": null, "newText": "hi"})];
        let second = p.updates(
            &envelope(Payload::ToolUse(ToolUseData::new("write_file", call))),
            false,
        );
        assert_eq!(second[0]["sessionUpdate"], "tool_call_update");
        assert_eq!(second[0]["content"][0]["type"], "diff");
    }

    #[test]
    fn output_tail_keeps_char_boundaries() {
        assert_eq!(tail("héllo", 4), "llo");
        assert_eq!(tail("abc", 10), "abc");
    }
}
