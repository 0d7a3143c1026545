//! Provider-neutral conversation and streaming types. Each client maps these onto its wire.

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

/// A base64 image attached to a message (a screenshot in a tool result, say).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Image {
    pub mime_type: String,
    pub data_base64: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// Always a JSON object once the call is accepted.
    pub arguments: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For `Role::Tool`: the call this answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<Image>,
}

impl Message {
    fn plain(role: Role, content: impl Into<String>) -> Self {
        Message {
            role,
            content: content.into(),
            thinking: None,
            tool_calls: Vec::new(),
            tool_call_id: None,
            tool_name: None,
            images: Vec::new(),
        }
    }

    pub fn system(content: impl Into<String>) -> Self {
        Self::plain(Role::System, content)
    }

    pub fn user(content: impl Into<String>) -> Self {
        Self::plain(Role::User, content)
    }

    pub fn assistant(content: impl Into<String>) -> Self {
        Self::plain(Role::Assistant, content)
    }

    pub fn tool_result(call: &ToolCall, content: impl Into<String>) -> Self {
        let mut m = Self::plain(Role::Tool, content);
        m.tool_call_id = Some(call.id.clone());
        m.tool_name = Some(call.name.clone());
        m
    }

    /// A rough token estimate (4 bytes a token) for budgeting before the server has told us.
    pub fn estimated_tokens(&self) -> u64 {
        let mut bytes = self.content.len() + self.thinking.as_ref().map_or(0, String::len);
        for call in &self.tool_calls {
            bytes += call.name.len() + call.arguments.to_string().len();
        }
        (bytes as u64).div_ceil(4) + 4
    }
}

/// A tool as offered to the model: name, description and JSON schema of the arguments.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSchema {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ToolChoice {
    #[default]
    Auto,
    Required,
    None,
}

/// One request to a model: the whole conversation so far and the tools on offer.
#[derive(Debug, Clone)]
pub struct ChatRequest<'a> {
    pub messages: &'a [Message],
    pub tools: &'a [ToolSchema],
    pub tool_choice: Option<ToolChoice>,
    pub max_tokens: u32,
    pub temperature: Option<f32>,
    /// How hard the model reasons (`None`: the server's default).
    pub effort: Option<super::Effort>,
}

/// Token counts as a server reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenCounts {
    pub prompt: u64,
    pub completion: u64,
    pub cached: u64,
}

/// What a model stream yields, already normalized across wire formats.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    Text(String),
    Reasoning(String),
    /// A call begins (OpenAI: first fragment; Ollama: the whole call follows at once).
    ToolCallStart {
        index: usize,
        id: Option<String>,
        name: String,
    },
    /// A fragment of the argument JSON text of call `index`.
    ToolCallArguments {
        index: usize,
        fragment: String,
    },
    /// A whole argument object (Ollama sends arguments as an object, never in pieces).
    ToolCallWhole {
        index: usize,
        arguments: Value,
    },
    Usage(TokenCounts),
    /// Something the server got wrong that was repaired on the way (invalid UTF-8 replaced):
    /// the reply goes on, the session shows the note.
    Note(String),
    /// The server finished the reply. The stream ends after this.
    Finished {
        reason: Option<String>,
    },
}

/// How `tool_choice` is sent per step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolChoiceMode {
    /// Not sent: the server decides.
    #[default]
    ServerDefault,
    Fixed(ToolChoice),
    /// `required` on a turn's first step, `auto` after: small models that never call a tool
    /// on their own still start with one, and can then answer.
    FirstRequired,
}

impl ToolChoiceMode {
    pub fn parse(text: &str) -> Option<ToolChoiceMode> {
        Some(match text {
            "auto" => ToolChoiceMode::Fixed(ToolChoice::Auto),
            "required" => ToolChoiceMode::Fixed(ToolChoice::Required),
            "none" => ToolChoiceMode::Fixed(ToolChoice::None),
            "first-required" => ToolChoiceMode::FirstRequired,
            _ => return None,
        })
    }

    pub fn for_step(self, step: u32) -> Option<ToolChoice> {
        match self {
            ToolChoiceMode::ServerDefault => None,
            ToolChoiceMode::Fixed(choice) => Some(choice),
            ToolChoiceMode::FirstRequired if step == 0 => Some(ToolChoice::Required),
            ToolChoiceMode::FirstRequired => Some(ToolChoice::Auto),
        }
    }
}
