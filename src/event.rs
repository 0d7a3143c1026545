//! The one event vocabulary. Every backend and every surface speaks these envelopes:
//! `{seq, ts, agent, turn, kind, data}`. `seq` is per agent and strictly increasing.
//!
//! `assistant_text` and `thought` come twice: `delta: true` chunks for liveness, then one
//! `delta: false` authoritative block. `tool_use` likewise: an announce without input, then the
//! authoritative copy with the full `rawInput`, same `toolCallId`. Consumers that persist or
//! replay skip the liveness-only envelopes (see [`Payload::is_liveness_only`]).

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;

mod de;
mod permission;
mod tool_result;

pub use permission::{
    AlwaysOffer, ApprovalPreview, DesktopPreview, DesktopWindow, PermissionData, PermissionOption, PermissionRequest,
    PermissionResolution, PermissionToolCall, Resolved,
};

pub(crate) use tool_result::{image_content, shown as shown_outcome};

/// One event as it travels: the typed envelope plus its JSON, serialized once and shared by
/// every subscriber.
#[derive(Debug)]
pub struct Event {
    pub envelope: Envelope,
    pub json: Box<str>,
}

pub type SharedEvent = Arc<Event>;

/// Deserialized by hand (see `de`), to read logs without buffering each envelope.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Envelope {
    pub seq: u64,
    pub ts: Timestamp,
    /// The session's id. `agent` on the wire (the seed's name for a session); in the code
    /// "agent" means an external agent program only.
    #[serde(rename = "agent")]
    pub session: Arc<str>,
    pub turn: u32,
    #[serde(flatten)]
    pub payload: Payload,
}

/// Kind and data of an envelope. Serialized adjacently as `"kind": …, "data": {…}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", content = "data", rename_all = "snake_case")]
pub enum Payload {
    AssistantText(TextData),
    Thought(TextData),
    UserText(UserTextData),
    ToolUse(ToolUseData),
    ToolInputDelta(ToolInputDeltaData),
    ToolOutput(ToolOutputData),
    ToolResult(ToolResultData),
    Permission(PermissionData),
    Plan(PlanData),
    Instructions(InstructionsData),
    Usage(UsageData),
    TurnStarted(Empty),
    Result(ResultData),
    Status(StatusData),
    Error(ErrorData),
    Compaction(CompactionData),
}

impl Payload {
    /// Chunks that exist only for liveness: not written to the event log, not replayed.
    pub fn is_liveness_only(&self) -> bool {
        match self {
            Payload::AssistantText(t) | Payload::Thought(t) => t.delta,
            Payload::ToolInputDelta(_) => true,
            _ => false,
        }
    }

    /// What only a model (or an external agent) produces: a session holding none of these
    /// never reached one.
    pub fn is_from_model(&self) -> bool {
        matches!(
            self,
            Payload::AssistantText(_)
                | Payload::Thought(_)
                | Payload::ToolUse(_)
                | Payload::ToolInputDelta(_)
                | Payload::Plan(_)
                | Payload::Usage(_)
                | Payload::Compaction(_)
        )
    }

    pub fn kind_name(&self) -> &'static str {
        match self {
            Payload::AssistantText(_) => "assistant_text",
            Payload::Thought(_) => "thought",
            Payload::UserText(_) => "user_text",
            Payload::ToolUse(_) => "tool_use",
            Payload::ToolInputDelta(_) => "tool_input_delta",
            Payload::ToolOutput(_) => "tool_output",
            Payload::ToolResult(_) => "tool_result",
            Payload::Permission(_) => "permission",
            Payload::Plan(_) => "plan",
            Payload::Instructions(_) => "instructions",
            Payload::Usage(_) => "usage",
            Payload::TurnStarted(_) => "turn_started",
            Payload::Result(_) => "result",
            Payload::Status(_) => "status",
            Payload::Error(_) => "error",
            Payload::Compaction(_) => "compaction",
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Empty {}

/// A content block as the model APIs and ACP know it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    Text {
        text: String,
    },
    Image {
        data: String,
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
}

impl ContentBlock {
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text { text: text.into() }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TextData {
    pub delta: bool,
    pub content: ContentBlock,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct UserTextData {
    pub content: ContentBlock,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ToolCallStatus {
    Pending,
    InProgress,
    Completed,
    Failed,
}

/// A tool invocation, in the ACP shape.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallInfo {
    pub tool_call_id: String,
    pub title: String,
    /// ACP tool kind: read, edit, search, execute, fetch, other …
    pub kind: String,
    pub status: ToolCallStatus,
    #[serde(default)]
    pub content: Vec<Value>,
    #[serde(default)]
    pub locations: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_input: Option<Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ToolUseData {
    pub call: ToolCallInfo,
    /// The tool's name as its `tool_result` names it (`shell`, an external agent's own
    /// `Bash`…), so a surface never maps the display title back. Empty in logs written
    /// before it existed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tool: String,
    /// The text shape corral's loop recovered this call from when the server sent it as
    /// text instead of a native call (`hermes`, `qwen3_xml`, `json`, `mistral`, `llama3`,
    /// `codex_patch`), so recovered calls can be counted. Absent for native calls.
    #[serde(
        default,
        rename = "recoveredFrom",
        skip_serializing_if = "Option::is_none"
    )]
    pub recovered_from: Option<String>,
}

impl ToolUseData {
    pub fn new(tool: impl Into<String>, call: ToolCallInfo) -> Self {
        ToolUseData {
            call,
            tool: tool.into(),
            recovered_from: None,
        }
    }

    /// The same call, marked as recovered from the text shape `family`.
    pub fn recovered_from(mut self, family: Option<&str>) -> Self {
        self.recovered_from = family.map(str::to_owned);
        self
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ToolInputDeltaData {
    pub tool_call_id: String,
    pub partial_json: String,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum OutputStream {
    Stdout,
    Stderr,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ToolOutputData {
    pub tool_call_id: String,
    pub stream: OutputStream,
    pub text: String,
}

/// `{toolCallId, tool, success, output, error, durationMs}`: what every tool returns.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultRecord {
    pub tool_call_id: String,
    pub tool: String,
    pub success: bool,
    pub output: Option<String>,
    pub error: Option<String>,
    pub duration_ms: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ToolUpdate {
    pub tool_call_id: String,
    pub status: ToolCallStatus,
    pub content: Vec<Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ToolResultData {
    pub update: ToolUpdate,
    pub result: ToolResultRecord,
}

#[cfg(test)]
impl ToolResultData {
    /// A call's successful result: what surfaces' tests start from.
    pub(crate) fn sample(tool_call_id: &str, tool: &str, output: &str) -> Self {
        ToolResultData {
            update: ToolUpdate {
                tool_call_id: tool_call_id.into(),
                status: ToolCallStatus::Completed,
                content: vec![],
            },
            result: ToolResultRecord {
                tool_call_id: tool_call_id.into(),
                tool: tool.into(),
                success: true,
                output: Some(output.into()),
                error: None,
                duration_ms: 3,
            },
        }
    }
}

/// The agent's plan as it stands: ACP plan entries, `{content, priority, status}` (status
/// `pending | in_progress | completed`). Each `plan` event replaces the previous one.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PlanData {
    pub entries: Vec<Value>,
    /// Why the plan changed, when the agent said (codex's `explanation`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explanation: Option<String>,
}

impl PlanData {
    pub fn new(entries: Vec<Value>) -> Self {
        PlanData {
            entries,
            explanation: None,
        }
    }

    /// One entry in the shape every surface reads. Plans from corral's loop and codex carry
    /// no priorities; ACP requires one, so each gets `medium`. codex's `inProgress` is
    /// spelled as ACP spells it.
    pub fn entry(content: &str, status: &str) -> Value {
        let status = if status == "inProgress" {
            "in_progress"
        } else {
            status
        };
        serde_json::json!({"content": content, "priority": "medium", "status": status})
    }

    /// Each entry as a checklist line, `[x] step` (completed), `[>] step` (in progress) or
    /// `[ ] step`, unescaped: a surface that prints them escapes them.
    pub fn checklist(&self) -> impl Iterator<Item = String> + '_ {
        self.entries.iter().map(|entry| {
            let mark = match entry["status"].as_str() {
                Some("completed") => "[x]",
                // codex spells it inProgress.
                Some("in_progress" | "inProgress") => "[>]",
                _ => "[ ]",
            };
            let content = entry["content"].as_str().unwrap_or_default();
            format!("{mark} {content}")
        })
    }
}

/// The project instructions (`AGENTS.md` and the like) a native session put in its system
/// prompt when it opened, farthest first.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct InstructionsData {
    pub files: Vec<InstructionFile>,
}

impl InstructionsData {
    /// Each file as `AGENTS.md (812 bytes)` or `src/AGENTS.md (9000 bytes, truncated)`,
    /// unescaped: a surface that prints them escapes them.
    pub fn file_lines(&self) -> impl Iterator<Item = String> + '_ {
        self.files.iter().map(|f| {
            let cut = if f.truncated { ", truncated" } else { "" };
            format!("{} ({} bytes{cut})", f.path, f.bytes)
        })
    }

    /// The files on one line, `·` between them (unescaped).
    pub fn listing(&self) -> String {
        self.file_lines().collect::<Vec<_>>().join(" · ")
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct InstructionFile {
    pub path: String,
    /// Bytes of the file that went into the prompt.
    pub bytes: u64,
    /// The file was cut at corral's cap (or left out once the cap was reached).
    pub truncated: bool,
}

/// Token usage in the vocabulary's units. `costUsd` is 0.0 for local models.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_creation_tokens: u64,
    pub cost_usd: f64,
}

impl Usage {
    /// Saturating: counts reported by an agent or read from a log are not trusted to stay
    /// small.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cache_read_tokens = self
            .cache_read_tokens
            .saturating_add(other.cache_read_tokens);
        self.cache_creation_tokens = self
            .cache_creation_tokens
            .saturating_add(other.cache_creation_tokens);
        self.cost_usd += other.cost_usd;
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct UsageData {
    pub usage: Usage,
    /// Prompt tokens of the latest request: how full the context window is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    MaxSteps,
    Cancelled,
    Error,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::MaxSteps => "max_steps",
            StopReason::Cancelled => "cancelled",
            StopReason::Error => "error",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResultData {
    pub stop_reason: StopReason,
    pub usage: Usage,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Starting,
    Idle,
    Working,
    WaitingApproval,
    Dead,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Starting => "starting",
            Status::Idle => "idle",
            Status::Working => "working",
            Status::WaitingApproval => "waiting_approval",
            Status::Dead => "dead",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StatusData {
    pub status: Status,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ErrorData {
    pub message: String,
    #[serde(default)]
    pub data: Value,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CompactionData {
    /// The summary that replaced the older messages in the model's view.
    pub summary: String,
    pub messages_compacted: usize,
    pub tokens_before: u64,
    pub context_window: u64,
    /// The context after summarizing: the system prompt with the summary and the messages
    /// kept (estimated as the loop budgets it; logs from before it was recorded read 0).
    #[serde(default)]
    pub tokens_after: u64,
}

/// UTC time with milliseconds, serialized as `2026-11-30T12:00:00.123Z` without allocating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timestamp(pub OffsetDateTime);

impl Timestamp {
    pub fn now() -> Self {
        Timestamp(OffsetDateTime::now_utc())
    }

    /// An RFC 3339 time, as envelopes carry it.
    pub fn parse(text: &str) -> Result<Self, time::error::Parse> {
        OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).map(Timestamp)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = self.0.to_offset(time::UtcOffset::UTC);
        write!(
            f,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second(),
            t.millisecond()
        )
    }
}

impl Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_round_trips_with_kind_and_data() {
        let env = Envelope {
            seq: 12,
            ts: Timestamp(time::macros::datetime!(2026-11-30 12:00:00.123 UTC)),
            session: Arc::from("9f3a1c20"),
            turn: 1,
            payload: Payload::AssistantText(TextData {
                delta: true,
                content: ContentBlock::text("two-"),
            }),
        };
        let json = serde_json::to_string(&env).unwrap();
        assert_eq!(
            json,
            r#"{"seq":12,"ts":"2026-11-30T12:00:00.123Z","agent":"9f3a1c20","turn":1,"kind":"assistant_text","data":{"delta":true,"content":{"type":"text","text":"two-"}}}"#
        );
        let back: Envelope = serde_json::from_str(&json).unwrap();
        assert_eq!(back, env);
    }

    #[test]
    fn liveness_only_covers_deltas_and_input_fragments() {
        let delta = Payload::Thought(TextData {
            delta: true,
            content: ContentBlock::text("x"),
        });
        let block = Payload::Thought(TextData {
            delta: false,
            content: ContentBlock::text("x"),
        });
        assert!(delta.is_liveness_only());
        assert!(!block.is_liveness_only());
        assert!(
            Payload::ToolInputDelta(ToolInputDeltaData {
                tool_call_id: "a".into(),
                partial_json: "{".into()
            })
            .is_liveness_only()
        );
    }

    #[test]
    fn plan_entries_have_one_shape_whoever_made_them() {
        assert_eq!(
            PlanData::entry("Fix it", "inProgress"),
            serde_json::json!({"content": "Fix it", "priority": "medium", "status": "in_progress"})
        );
        let plan = PlanData::new(vec![
            PlanData::entry("a", "completed"),
            PlanData::entry("b", "in_progress"),
            PlanData::entry("c", "pending"),
            serde_json::json!({"content": "d"}),
        ]);
        let lines: Vec<String> = plan.checklist().collect();
        assert_eq!(lines, ["[x] a", "[>] b", "[ ] c", "[ ] d"]);
        // No explanation, no field: a plan event from before it existed reads the same.
        let json = serde_json::to_value(&plan).unwrap();
        assert!(json.get("explanation").is_none(), "{json}");
        let old: PlanData = serde_json::from_str(r#"{"entries": []}"#).unwrap();
        assert_eq!(old, PlanData::new(Vec::new()));
    }
}
