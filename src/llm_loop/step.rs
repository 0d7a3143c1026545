//! One model step: stream a reply, turn its events into envelopes as they arrive, and collect
//! the text, reasoning and tool calls it carried.

use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::event::{
    ContentBlock, Payload, TextData, ToolCallInfo, ToolCallStatus, ToolInputDeltaData, ToolUseData,
};
use crate::model::{ChatRequest, ModelClient, ModelError, ModelEvent, RetryNotice, TokenCounts};
use crate::session::Session;
use crate::tool::ToolRegistry;

/// A call as the model sent it, before validation.
#[derive(Debug, Clone, Default)]
pub struct RawCall {
    pub id: String,
    pub name: String,
    /// Argument text fragments joined (OpenAI), if any.
    pub arguments_text: String,
    /// Arguments as an object (Ollama), if sent whole.
    pub arguments_value: Option<serde_json::Value>,
    /// The family of text-written calls it was recovered from; `None` for a native call.
    pub recovered_from: Option<&'static str>,
}

#[derive(Debug)]
pub enum StepEnd {
    Finished,
    Cancelled,
    Failed(ModelError),
}

#[derive(Debug)]
pub struct StepOutput {
    pub text: String,
    pub thinking: String,
    pub calls: Vec<RawCall>,
    pub usage: Option<TokenCounts>,
    pub end: StepEnd,
    /// Text still open when the step ended: its authoritative copy is emitted by the caller
    /// once it knows whether text-written tool calls were cut out of it.
    pub open_text: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Block {
    Text,
    Thought,
}

/// Emits `delta:true` chunks and closes a block with its `delta:false` copy when the stream
/// switches to another block.
struct Blocks<'a> {
    session: &'a Session,
    open: Option<Block>,
    current: String,
}

impl Blocks<'_> {
    fn chunk(&mut self, block: Block, text: String, out: &mut StepOutput) {
        if self.open != Some(block) {
            self.close();
            self.open = Some(block);
        }
        self.current.push_str(&text);
        match block {
            Block::Text => out.text.push_str(&text),
            Block::Thought => out.thinking.push_str(&text),
        }
        self.session.emit(payload(block, true, text));
    }

    fn close(&mut self) {
        if let Some(block) = self.open.take() {
            let text = std::mem::take(&mut self.current);
            self.session.emit(payload(block, false, text));
        }
    }
}

fn payload(block: Block, delta: bool, text: String) -> Payload {
    let data = TextData {
        delta,
        content: ContentBlock::Text { text },
    };
    match block {
        Block::Text => Payload::AssistantText(data),
        Block::Thought => Payload::Thought(data),
    }
}

pub async fn stream_step(
    session: &Session,
    client: &dyn ModelClient,
    tools: &ToolRegistry,
    request: &ChatRequest<'_>,
    cancel: &CancellationToken,
) -> StepOutput {
    let mut out = StepOutput {
        text: String::new(),
        thinking: String::new(),
        calls: Vec::new(),
        usage: None,
        end: StepEnd::Finished,
        open_text: false,
    };
    let observer = |notice: RetryNotice| {
        session.emit_error(
            format!(
                "retry {}/{} in {} ms: {}",
                notice.retry,
                notice.max_retries,
                notice.delay.as_millis(),
                notice.reason
            ),
            serde_json::json!({"retry": {
                "number": notice.retry,
                "of": notice.max_retries,
                "delayMs": notice.delay.as_millis() as u64,
            }}),
        );
    };
    let mut stream = tokio::select! {
        biased;
        _ = cancel.cancelled() => {
            out.end = StepEnd::Cancelled;
            return out;
        }
        started = client.stream(request, &observer) => match started {
            Ok(stream) => stream,
            Err(e) => {
                out.end = StepEnd::Failed(e);
                return out;
            }
        },
    };
    let mut blocks = Blocks {
        session,
        open: None,
        current: String::new(),
    };
    loop {
        let next = tokio::select! {
            biased;
            _ = cancel.cancelled() => {
                // Dropping the stream closes the connection: the server stops generating.
                out.end = StepEnd::Cancelled;
                break;
            }
            next = stream.next() => next,
        };
        match next {
            None | Some(Ok(ModelEvent::Finished { .. })) => break,
            Some(Err(e)) => {
                out.end = StepEnd::Failed(e);
                break;
            }
            Some(Ok(ModelEvent::Text(text))) => blocks.chunk(Block::Text, text, &mut out),
            Some(Ok(ModelEvent::Reasoning(text))) => blocks.chunk(Block::Thought, text, &mut out),
            Some(Ok(ModelEvent::Usage(counts))) => out.usage = Some(counts),
            Some(Ok(ModelEvent::Note(note))) => {
                session.emit_error(note, serde_json::json!({"note": "repaired_stream"}));
            }
            Some(Ok(ModelEvent::ToolCallStart { index, id, name })) => {
                blocks.close();
                start_call(session, tools, &mut out.calls, index, id, name);
            }
            Some(Ok(ModelEvent::ToolCallArguments { index, fragment })) => {
                if let Some(call) = out.calls.get_mut(index) {
                    call.arguments_text.push_str(&fragment);
                    session.emit(Payload::ToolInputDelta(ToolInputDeltaData {
                        tool_call_id: call.id.clone(),
                        partial_json: fragment,
                    }));
                }
            }
            Some(Ok(ModelEvent::ToolCallWhole { index, arguments })) => {
                if let Some(call) = out.calls.get_mut(index) {
                    call.arguments_value = Some(arguments);
                }
            }
        }
    }
    drop(stream);
    if blocks.open == Some(Block::Text) {
        // Left open for the caller (see `open_text`).
        out.open_text = true;
    } else {
        blocks.close();
    }
    out
}

fn start_call(
    session: &Session,
    tools: &ToolRegistry,
    calls: &mut Vec<RawCall>,
    index: usize,
    id: Option<String>,
    name: String,
) {
    let id = id.unwrap_or_else(new_call_id);
    let call = RawCall {
        id,
        name: tools.canonical_name(&name),
        ..RawCall::default()
    };
    session.emit(Payload::ToolUse(ToolUseData::new(
        &call.name,
        announce(tools, &call),
    )));
    // Indices arrive dense from both clients; pad defensively rather than panic.
    while calls.len() < index {
        calls.push(RawCall {
            id: new_call_id(),
            ..RawCall::default()
        });
    }
    if index < calls.len() {
        calls[index] = call;
    } else {
        calls.push(call);
    }
}

pub fn new_call_id() -> String {
    format!("call_{:012x}", fastrand::u64(..) & 0xffff_ffff_ffff)
}

/// The `tool_use` announce: the call exists, its input is still coming.
pub fn announce(tools: &ToolRegistry, call: &RawCall) -> ToolCallInfo {
    let (title, kind) = match tools.get(&call.name) {
        Some(t) => (t.manifest.title.clone(), t.manifest.kind.clone()),
        None => (call.name.clone(), "other".to_string()),
    };
    ToolCallInfo {
        tool_call_id: call.id.clone(),
        title,
        kind,
        status: ToolCallStatus::Pending,
        content: Vec::new(),
        locations: Vec::new(),
        raw_input: None,
    }
}
