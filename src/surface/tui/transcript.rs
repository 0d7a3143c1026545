//! A session's conversation as a person reads it, built from its envelopes: what was said,
//! each tool call as one card, errors in place, plus what the status line and the approval
//! modal need (usage, context, status, open permission requests).
//!
//! The same model serves a live session (deltas, then the authoritative block) and a log
//! read back (authoritative blocks only). Text is kept raw here; the renderer makes it safe
//! for the terminal. What a tool prints is capped per card (its tail is kept) so a long
//! session's memory stays bounded by what can usefully be shown.

use std::collections::HashMap;
use std::time::Instant;

use serde_json::Value;

use crate::event::{
    ContentBlock, Envelope, Payload, PermissionData, PermissionRequest, Status, StopReason,
    ToolCallStatus, Usage,
};

/// The most of one tool's output a card keeps (its end).
pub const OUTPUT_CAP: usize = 32 * 1024;
/// The most of one text block (an answer, a thought, a prompt) kept for the screen; a longer
/// one shows its start and says how much is not shown. The session's own log has it whole.
pub const TEXT_CAP: usize = 256 * 1024;
/// Arguments or a result longer than this are kept cut (the card shows a few lines anyway).
const VALUE_CAP: usize = 16 * 1024;
/// Files whose old and new text together exceed this get no diff on the card.
const DIFF_INPUT_CAP: usize = 512 * 1024;

#[derive(Debug, Clone, PartialEq)]
pub enum BlockKind {
    User(String),
    Assistant(String),
    Thought(String),
    Tool(Box<ToolCard>),
    Plan(Vec<String>),
    Error(String),
    /// Something corral says: a turn's end, a compaction, an approval's answer, a command's
    /// result.
    Notice(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    pub kind: BlockKind,
    /// Streaming: more deltas may come.
    pub open: bool,
    /// Bumped on every change, so a renderer can cache a block's lines.
    pub version: u64,
    /// Thoughts start folded; a person unfolds them.
    pub folded: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolCard {
    pub id: String,
    pub tool: String,
    pub title: String,
    /// The call's arguments, compact.
    pub args: Option<Value>,
    pub status: ToolCallStatus,
    /// The tail of what it printed (both streams), at most [`OUTPUT_CAP`].
    pub output: String,
    /// Bytes of output dropped from the front.
    pub output_dropped: usize,
    /// `(success, what the model got back)`.
    pub result: Option<(bool, String)>,
    pub duration_ms: Option<u64>,
    /// Unified diffs of the files an edit changes.
    pub diff: Option<String>,
    /// When the card was announced here (a live call's elapsed time).
    pub started: Option<Instant>,
}

/// A session's conversation and the state around it.
#[derive(Debug, Default)]
pub struct Transcript {
    blocks: Vec<Block>,
    pending: Vec<PermissionRequest>,
    pub status: Option<Status>,
    pub turn: u32,
    pub usage: Usage,
    pub context_tokens: Option<u64>,
    pub context_window: Option<u64>,
    /// When the running turn began (for the elapsed time).
    pub turn_started: Option<Instant>,
    /// The running turn's start as its envelope says: a log read back gets true durations.
    turn_started_at: Option<crate::event::Timestamp>,
    next_version: u64,
    /// Each tool call's block, by call id: blocks are only ever appended, so indexes hold.
    cards: HashMap<String, usize>,
}

impl Transcript {
    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// Open permission requests, oldest first.
    pub fn pending(&self) -> &[PermissionRequest] {
        &self.pending
    }

    /// Drops a request nobody can answer any more (left in a log by a process that died, or
    /// closed elsewhere before its resolution arrived).
    pub fn forget_request(&mut self, request_id: &str) {
        self.pending.retain(|p| p.request_id != request_id);
    }

    /// Keeps only the requests `open` names: a log read back holds requests whose process is
    /// gone; only the live session's own are still open.
    pub fn keep_requests(&mut self, open: &[PermissionRequest]) {
        self.pending
            .retain(|p| open.iter().any(|o| o.request_id == p.request_id));
    }

    pub fn is_working(&self) -> bool {
        matches!(
            self.status,
            Some(Status::Working | Status::WaitingApproval | Status::Starting)
        )
    }

    fn version(&mut self) -> u64 {
        self.next_version += 1;
        self.next_version
    }

    pub fn push(&mut self, kind: BlockKind) {
        let version = self.version();
        let folded = matches!(kind, BlockKind::Thought(_));
        self.blocks.push(Block {
            kind,
            open: false,
            version,
            folded,
        });
    }

    /// A line of corral's own (a command's answer) in the conversation.
    pub fn notice(&mut self, text: impl Into<String>) {
        self.push(BlockKind::Notice(text.into()));
    }

    pub fn error(&mut self, text: impl Into<String>) {
        self.push(BlockKind::Error(text.into()));
    }

    /// Folds or unfolds every thought; returns whether they are folded now.
    pub fn toggle_thoughts(&mut self) -> bool {
        let fold = !self
            .blocks
            .iter()
            .any(|b| matches!(b.kind, BlockKind::Thought(_)) && b.folded);
        for i in 0..self.blocks.len() {
            if matches!(self.blocks[i].kind, BlockKind::Thought(_)) {
                let version = self.version();
                let block = &mut self.blocks[i];
                block.folded = fold;
                block.version = version;
            }
        }
        fold
    }

    pub fn apply(&mut self, envelope: &Envelope) {
        if envelope.turn > self.turn {
            self.turn = envelope.turn;
        }
        match &envelope.payload {
            Payload::AssistantText(t) => self.text(t.delta, &t.content, false),
            Payload::Thought(t) => self.text(t.delta, &t.content, true),
            Payload::UserText(u) => {
                if let ContentBlock::Text { text } = &u.content {
                    self.push(BlockKind::User(capped(text)));
                } else {
                    self.push(BlockKind::User("[image]".into()));
                }
            }
            Payload::ToolUse(u) => {
                let call = &u.call;
                if let Some(card) = self.card(&call.tool_call_id, &u.tool) {
                    if !call.title.is_empty() {
                        card.title = call.title.clone();
                    }
                    if let Some(input) = &call.raw_input {
                        card.args = Some(capped_value(input));
                    }
                    card.status = call.status;
                    if let Some(diff) = diffs(&call.content) {
                        card.diff = Some(diff);
                    }
                }
                self.touch_card(&call.tool_call_id);
            }
            Payload::ToolInputDelta(_) => {}
            Payload::ToolOutput(o) => {
                if let Some(card) = self.card(&o.tool_call_id, "") {
                    card.push_output(&o.text);
                }
                self.touch_card(&o.tool_call_id);
            }
            Payload::ToolResult(r) => {
                let id = &r.update.tool_call_id;
                if let Some(card) = self.card(id, &r.result.tool) {
                    card.status = r.update.status;
                    card.duration_ms = Some(r.result.duration_ms);
                    let text = if r.result.success {
                        r.result.output.clone()
                    } else {
                        r.result.error.clone().or(r.result.output.clone())
                    };
                    let text = text.unwrap_or_default();
                    card.result = Some((r.result.success, cut_middle(&text, VALUE_CAP)));
                    if let Some(diff) = diffs(&r.update.content) {
                        card.diff = Some(diff);
                    }
                }
                self.touch_card(id);
            }
            Payload::Permission(PermissionData::Request(request)) => {
                if let Some(diff) = &request.preview.diff {
                    let id = request.tool_call.tool_call_id.clone();
                    if let Some(card) = self.find_card(&id) {
                        card.diff.get_or_insert_with(|| diff.clone());
                        self.touch_card(&id);
                    }
                }
                self.pending.push((**request).clone());
            }
            Payload::Permission(PermissionData::Resolution(r)) => {
                let tool = self
                    .pending
                    .iter()
                    .find(|p| p.request_id == r.request_id)
                    .map(|p| p.tool.clone());
                self.pending.retain(|p| p.request_id != r.request_id);
                let mut text = format!(
                    "{} → {}",
                    tool.as_deref().unwrap_or("permission"),
                    decision_words(&r.decision)
                );
                if let Some(note) = &r.note {
                    text.push_str(&format!(" ({note})"));
                }
                self.notice(text);
            }
            Payload::Plan(plan) => self.push(BlockKind::Plan(plan.checklist().collect())),
            Payload::Instructions(i) => {
                if !i.files.is_empty() {
                    let names: Vec<&str> = i.files.iter().map(|f| f.path.as_str()).collect();
                    self.notice(format!("instructions: {}", names.join(", ")));
                }
            }
            Payload::Usage(u) => {
                if u.context_tokens.is_some() {
                    self.context_tokens = u.context_tokens;
                }
                if u.context_window.is_some() {
                    self.context_window = u.context_window;
                }
            }
            Payload::TurnStarted(_) => {
                self.turn_started = Some(Instant::now());
                self.turn_started_at = Some(envelope.ts);
            }
            Payload::Result(r) => {
                self.close_text();
                self.usage.add(&r.usage);
                self.turn_started = None;
                let elapsed = self
                    .turn_started_at
                    .take()
                    .map(|start| {
                        let seconds = (envelope.ts.0 - start.0).as_seconds_f64().max(0.0);
                        format!(" in {seconds:.1}s")
                    })
                    .unwrap_or_default();
                let how = match r.stop_reason {
                    StopReason::EndTurn => "done",
                    StopReason::MaxSteps => "stopped at the step limit",
                    StopReason::Cancelled => "cancelled",
                    StopReason::Error => "failed",
                };
                self.notice(format!(
                    "turn {} {how}{elapsed} · {} in / {} out tokens",
                    envelope.turn, r.usage.input_tokens, r.usage.output_tokens
                ));
            }
            Payload::Status(s) => {
                self.status = Some(s.status);
                if s.status == Status::Dead {
                    self.pending.clear();
                }
            }
            Payload::Error(e) => self.error(e.message.clone()),
            Payload::Compaction(c) => self.notice(format!(
                "context compacted: {} messages summarized ({} tokens before)",
                c.messages_compacted, c.tokens_before
            )),
        }
    }

    fn text(&mut self, delta: bool, content: &ContentBlock, thought: bool) {
        let ContentBlock::Text { text } = content else {
            return;
        };
        let open_index = self.blocks.len().checked_sub(1).filter(|&i| {
            let b = &self.blocks[i];
            b.open
                && match b.kind {
                    BlockKind::Thought(_) => thought,
                    BlockKind::Assistant(_) => !thought,
                    _ => false,
                }
        });
        let version = self.version();
        match open_index {
            Some(i) => {
                let block = &mut self.blocks[i];
                block.version = version;
                let (BlockKind::Assistant(current) | BlockKind::Thought(current)) = &mut block.kind
                else {
                    return;
                };
                if delta {
                    // Once cut (longer than the cap with its note), later deltas are
                    // dropped too.
                    if current.len() <= TEXT_CAP {
                        current.push_str(text);
                        if current.len() > TEXT_CAP {
                            *current = capped(current);
                        }
                    }
                } else {
                    // The authoritative block replaces what the deltas built.
                    *current = capped(text);
                    block.open = false;
                }
            }
            None => {
                // Whatever was streaming before is over.
                self.close_text();
                if !delta && text.is_empty() {
                    return;
                }
                let kind = if thought {
                    BlockKind::Thought(capped(text))
                } else {
                    BlockKind::Assistant(capped(text))
                };
                self.blocks.push(Block {
                    kind,
                    open: delta,
                    version,
                    folded: thought,
                });
            }
        }
    }

    fn close_text(&mut self) {
        if let Some(last) = self.blocks.last_mut() {
            last.open = false;
        }
    }

    fn find_card(&mut self, id: &str) -> Option<&mut ToolCard> {
        let index = self.card_index(id)?;
        match &mut self.blocks[index].kind {
            BlockKind::Tool(card) => Some(card),
            _ => None,
        }
    }

    fn card_index(&self, id: &str) -> Option<usize> {
        self.cards.get(id).copied()
    }

    /// The card of a call, made when this is the first word of it.
    fn card(&mut self, id: &str, tool: &str) -> Option<&mut ToolCard> {
        let index = match self.card_index(id) {
            Some(index) => index,
            None => {
                self.close_text();
                self.push(BlockKind::Tool(Box::new(ToolCard::new(id, tool))));
                let index = self.blocks.len() - 1;
                self.cards.insert(id.to_string(), index);
                index
            }
        };
        match &mut self.blocks[index].kind {
            BlockKind::Tool(card) => {
                if card.tool.is_empty() && !tool.is_empty() {
                    card.tool = tool.to_string();
                }
                Some(card)
            }
            _ => None,
        }
    }

    fn touch_card(&mut self, id: &str) {
        let version = self.version();
        if let Some(index) = self.card_index(id) {
            self.blocks[index].version = version;
        }
    }
}

impl ToolCard {
    fn new(id: &str, tool: &str) -> ToolCard {
        ToolCard {
            id: id.to_string(),
            tool: tool.to_string(),
            title: tool.to_string(),
            args: None,
            status: ToolCallStatus::Pending,
            output: String::new(),
            output_dropped: 0,
            result: None,
            duration_ms: None,
            diff: None,
            started: Some(Instant::now()),
        }
    }

    fn push_output(&mut self, text: &str) {
        self.output.push_str(text);
        if self.output.len() > OUTPUT_CAP {
            let mut cut = self.output.len() - OUTPUT_CAP;
            while !self.output.is_char_boundary(cut) {
                cut += 1;
            }
            self.output.drain(..cut);
            self.output_dropped += cut;
        }
    }
}

/// The unified diffs of ACP `diff` content blocks, if there are any.
fn diffs(content: &[Value]) -> Option<String> {
    let mut out = String::new();
    for block in content.iter().filter(|c| c["type"] == "diff") {
        let path = block["path"].as_str().unwrap_or("file");
        let old = block["oldText"].as_str().unwrap_or("");
        let new = block["newText"].as_str().unwrap_or("");
        if old.len() + new.len() > DIFF_INPUT_CAP {
            out.push_str(&format!("{path}: too large to diff here\n"));
            continue;
        }
        let diff = similar::TextDiff::from_lines(old, new);
        out.push_str(
            &diff
                .unified_diff()
                .context_radius(3)
                .header(path, path)
                .to_string(),
        );
    }
    (!out.is_empty()).then_some(out)
}

/// `text`, or its first [`TEXT_CAP`] bytes and a note of what is left out.
fn capped(text: &str) -> String {
    if text.len() <= TEXT_CAP {
        return text.to_string();
    }
    let mut end = TEXT_CAP;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[… {} more bytes not shown; `corral logs` has them]",
        &text[..end],
        text.len() - end
    )
}

/// Head and tail of a long text, the middle replaced by a note.
fn cut_middle(text: &str, cap: usize) -> String {
    if text.len() <= cap {
        return text.to_string();
    }
    let mut head = cap / 2;
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = text.len() - cap / 2;
    while !text.is_char_boundary(tail) {
        tail += 1;
    }
    format!(
        "{}\n[… {} bytes …]\n{}",
        &text[..head],
        tail - head,
        &text[tail..]
    )
}

/// Arguments as the card keeps them: whole when small, else each long string cut.
fn capped_value(value: &Value) -> Value {
    match value {
        Value::String(s) if s.len() > VALUE_CAP => Value::String(cut_middle(s, VALUE_CAP)),
        Value::Object(map) => Value::Object(
            map.iter()
                .take(64)
                .map(|(k, v)| (k.clone(), capped_value(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().take(64).map(capped_value).collect()),
        other => other.clone(),
    }
}

fn decision_words(decision: &str) -> &str {
    match decision {
        "allow" => "allowed once",
        "allow_all" => "allowed always",
        "deny" => "denied",
        "disable" => "disabled for this session",
        "forbid_all" => "no more tools this turn",
        "cancel" => "turn cancelled",
        other => other,
    }
}

#[cfg(test)]
#[path = "transcript_tests.rs"]
mod tests;
