//! What one session did, for the feed and the history overlay, as the session view's
//! conversation pane ([`Conversation`]): the same transcript, cards and escaping as
//! `corral chat`. Envelopes go in as they are; a server's `GET …/messages` (the conversation
//! before what its event bus still holds) goes in as the blocks it describes.

use serde_json::Value;

use crate::event::{Envelope, ToolCallStatus};
use crate::surface::tui::Conversation;
use crate::surface::tui::transcript::{BlockKind, ToolCard, Transcript};

/// The blocks a server's message list describes, appended to `transcript`.
pub(super) fn push_messages(transcript: &mut Transcript, messages: &[Value]) {
    for message in messages {
        let text = message["text"].as_str().unwrap_or_default().to_string();
        let kind = match message["role"].as_str() {
            Some("user") => BlockKind::User(text),
            Some("tool") => BlockKind::Tool(Box::new(card(&message["tool"], text))),
            _ => BlockKind::Assistant(text),
        };
        transcript.push(kind);
    }
}

/// A finished (or never finished) call as the messages list records it.
fn card(tool: &Value, text: String) -> ToolCard {
    let name = tool["name"].as_str().unwrap_or_default().to_string();
    let success = tool["success"].as_bool();
    ToolCard {
        id: tool["call_id"].as_str().unwrap_or_default().to_string(),
        title: tool["title"].as_str().unwrap_or(&name).to_string(),
        tool: name,
        args: Some(tool["input"].clone()).filter(|v| !v.is_null()),
        status: match success {
            Some(true) => ToolCallStatus::Completed,
            Some(false) => ToolCallStatus::Failed,
            None => ToolCallStatus::Pending,
        },
        output: String::new(),
        output_dropped: 0,
        result: success.map(|ok| (ok, text)),
        duration_ms: tool["duration_ms"].as_u64(),
        diff: None,
        started: None,
    }
}

/// The feed of a session: what the server said came before the first envelope held (when
/// its bus no longer reached back to the session's start), then the envelopes.
pub(super) fn conversation<'a>(
    earlier: Option<&[Value]>,
    events: impl IntoIterator<Item = &'a Envelope>,
) -> Conversation {
    let mut events = events.into_iter().peekable();
    let mut view = Conversation::default();
    if let Some(messages) = earlier {
        match events.peek() {
            Some(first) if first.seq > 1 => {
                let cut = first.ts.to_string();
                let before: Vec<Value> = messages
                    .iter()
                    .filter(|m| m["ts"].as_str().is_some_and(|ts| ts < cut.as_str()))
                    .cloned()
                    .collect();
                push_messages(&mut view.transcript, &before);
            }
            Some(_) => {}
            None => push_messages(&mut view.transcript, messages),
        }
    }
    for envelope in events {
        view.apply(envelope);
    }
    view
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::event::{ContentBlock, Payload, TextData, Timestamp};

    fn text(seq: u64, at: &str, t: &str) -> Envelope {
        Envelope {
            seq,
            ts: Timestamp(
                time::OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339)
                    .unwrap(),
            ),
            session: Arc::from("s"),
            turn: 2,
            payload: Payload::AssistantText(TextData {
                delta: false,
                content: ContentBlock::text(t),
            }),
        }
    }

    fn kinds(view: &Conversation) -> Vec<String> {
        view.transcript
            .blocks()
            .iter()
            .map(|b| match &b.kind {
                BlockKind::User(t) | BlockKind::Assistant(t) => t.clone(),
                BlockKind::Tool(card) => format!("{} {:?}", card.title, card.result),
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn the_servers_record_fills_in_what_the_bus_no_longer_holds() {
        let messages = [
            json!({"role": "user", "text": "fix it", "ts": "2026-12-01T00:00:01.000Z"}),
            json!({"role": "tool", "text": "ok", "ts": "2026-12-01T00:00:02.000Z",
                   "tool": {"call_id": "c1", "title": "run ls", "name": "shell",
                            "input": {"command": "ls"}, "success": true, "duration_ms": 4}}),
            json!({"role": "assistant", "text": "Fixed.", "ts": "2026-12-01T00:00:03.000Z"}),
        ];
        // The bus holds from the answer on: the record gives what came before it.
        let held = [text(9, "2026-12-01T00:00:03.000Z", "Fixed.")];
        let view = conversation(Some(&messages), &held);
        assert_eq!(
            kinds(&view),
            ["fix it", r#"run ls Some((true, "ok"))"#, "Fixed."]
        );
        // The bus holds it all: the record adds nothing.
        let all = [text(1, "2026-12-01T00:00:00.000Z", "Fixed.")];
        assert_eq!(kinds(&conversation(Some(&messages), &all)), ["Fixed."]);
        // Nothing held yet: the record is all there is.
        assert_eq!(kinds(&conversation(Some(&messages), &[])).len(), 3);
    }
}
