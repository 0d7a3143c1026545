//! A session's conversation for `GET …/messages`, rebuilt from its authoritative envelopes:
//! user text, whole assistant blocks (not the liveness deltas), and one `tool` entry per tool
//! call carrying its input and, once it finished, its result (and the diff a person approved
//! for it, when the call wrote a file).

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::event::{ContentBlock, Envelope, Payload};
use crate::session::{Session, read_log};

fn text_of(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text { text } => text.clone(),
        ContentBlock::Image { mime_type, .. } => format!("[image {mime_type}]"),
    }
}

/// The session's envelopes, oldest first: the replay ring, completed from the event log when
/// the ring no longer reaches back to the start.
fn envelopes(session: &Session) -> Vec<Envelope> {
    let subscription = session.subscribe(Some(0));
    let ring: Vec<Envelope> = subscription
        .replay
        .iter()
        .map(|e| e.envelope.clone())
        .collect();
    if !subscription.gap {
        return ring;
    }
    let first = ring.first().map_or(u64::MAX, |e| e.seq);
    let mut older = session
        .log_path()
        .and_then(|path| read_log(path).ok())
        .unwrap_or_default();
    older.retain(|e| e.seq < first);
    older.extend(ring);
    older
}

pub fn messages(session: &Session) -> Vec<Value> {
    build(&envelopes(session))
}

fn build(envelopes: &[Envelope]) -> Vec<Value> {
    let mut messages: Vec<Value> = Vec::new();
    // Tool call id → index of its entry, so the result lands on the call.
    let mut tools: HashMap<String, usize> = HashMap::new();
    // Tool call id → the diff its approval request showed.
    let mut diffs: HashMap<String, String> = HashMap::new();
    for envelope in envelopes {
        let ts = envelope.ts.to_string();
        match &envelope.payload {
            Payload::UserText(data) => messages.push(json!({
                "role": "user", "text": text_of(&data.content),
                "turn": envelope.turn, "ts": ts,
            })),
            Payload::AssistantText(data) if !data.delta => messages.push(json!({
                "role": "assistant", "text": text_of(&data.content),
                "turn": envelope.turn, "ts": ts,
            })),
            // The announce comes without input; the authoritative copy carries `rawInput`.
            Payload::ToolUse(data) if data.call.raw_input.is_some() => {
                let call = &data.call;
                let entry = json!({
                    "role": "tool", "text": call.title,
                    "turn": envelope.turn, "ts": ts,
                    "tool": {
                        "call_id": call.tool_call_id, "title": call.title,
                        "kind": call.kind, "input": call.raw_input,
                    },
                });
                match tools.get(&call.tool_call_id) {
                    Some(&i) => messages[i] = entry,
                    None => {
                        tools.insert(call.tool_call_id.clone(), messages.len());
                        messages.push(entry);
                    }
                }
            }
            Payload::ToolResult(data) => {
                let result = &data.result;
                let text = result
                    .output
                    .clone()
                    .or_else(|| result.error.clone())
                    .unwrap_or_default();
                let index = match tools.get(&result.tool_call_id) {
                    Some(&i) => i,
                    None => {
                        tools.insert(result.tool_call_id.clone(), messages.len());
                        messages.push(json!({
                            "role": "tool", "turn": envelope.turn, "ts": ts,
                            "tool": {"call_id": result.tool_call_id},
                        }));
                        messages.len() - 1
                    }
                };
                let entry = &mut messages[index];
                entry["text"] = Value::String(text);
                entry["tool"]["name"] = Value::String(result.tool.clone());
                entry["tool"]["success"] = Value::Bool(result.success);
                entry["tool"]["output"] = json!(result.output);
                entry["tool"]["error"] = json!(result.error);
                entry["tool"]["duration_ms"] = json!(result.duration_ms);
                if let Some(diff) = diffs.remove(&result.tool_call_id)
                    && result.success
                {
                    entry["tool"]["diff"] = Value::String(diff);
                }
            }
            Payload::Permission(crate::event::PermissionData::Request(request)) => {
                if let Some(diff) = &request.preview.diff {
                    diffs.insert(request.tool_call.tool_call_id.clone(), diff.clone());
                }
            }
            _ => {}
        }
    }
    messages
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::event::*;

    fn env(seq: u64, payload: Payload) -> Envelope {
        Envelope {
            seq,
            ts: Timestamp::now(),
            session: Arc::from("a"),
            turn: 1,
            payload,
        }
    }

    fn call(input: Option<Value>) -> Payload {
        Payload::ToolUse(ToolUseData::new(
            "read_file",
            ToolCallInfo {
                tool_call_id: "c1".into(),
                title: "read a.txt".into(),
                kind: "read".into(),
                status: ToolCallStatus::Pending,
                content: vec![],
                locations: vec![],
                raw_input: input,
            },
        ))
    }

    #[test]
    fn keeps_authoritative_blocks_and_joins_tool_results() {
        let text = |delta, t: &str| {
            Payload::AssistantText(TextData {
                delta,
                content: ContentBlock::text(t),
            })
        };
        let all = vec![
            env(
                1,
                Payload::UserText(UserTextData {
                    content: ContentBlock::text("hi"),
                }),
            ),
            env(2, text(true, "he")),
            env(3, text(false, "hello")),
            env(4, call(None)),
            env(5, call(Some(json!({"path": "a.txt"})))),
            env(
                6,
                Payload::ToolResult(ToolResultData::sample("c1", "read_file", "data")),
            ),
        ];
        let messages = build(&all);
        let roles: Vec<&str> = messages
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["user", "assistant", "tool"]);
        assert_eq!(messages[1]["text"], "hello");
        assert_eq!(messages[2]["tool"]["input"]["path"], "a.txt");
        assert_eq!(messages[2]["tool"]["name"], "read_file");
        assert_eq!(messages[2]["text"], "data");
        assert_eq!(
            messages[2]["tool"]["diff"],
            Value::Null,
            "nothing was approved"
        );
    }

    #[test]
    fn an_approved_change_stays_on_its_call_and_a_refused_one_does_not() {
        let asked = |id: &str, diff: &str| {
            let mut request = PermissionRequest::sample("write_file", json!({"path": "a"}));
            request.tool_call.tool_call_id = id.into();
            request.preview.diff = Some(diff.into());
            Payload::Permission(PermissionData::Request(Box::new(request)))
        };
        let refused = ToolResultData::finished("c2", "write_file", Err("denied".into()), 1, vec![]);
        let messages = build(&[
            env(1, asked("c1", "+yes")),
            env(
                2,
                Payload::ToolResult(ToolResultData::sample("c1", "write_file", "ok")),
            ),
            env(3, asked("c2", "+no")),
            env(4, Payload::ToolResult(refused)),
        ]);
        assert_eq!(messages[0]["tool"]["diff"], "+yes");
        assert_eq!(messages[1]["tool"]["diff"], Value::Null);
    }
}
