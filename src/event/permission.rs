//! The `permission` event: a request for a person's answer, and later its resolution.
//!
//! Both travel under the one kind `permission`, told apart by their fields (a resolution says
//! `"resolved": true`), so the JSON stays what every surface and client already reads.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::ToolCallStatus;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum PermissionData {
    /// Boxed: a request is large, and every payload is as large as its largest kind.
    Request(Box<PermissionRequest>),
    Resolution(PermissionResolution),
}

/// A question to a person: what the call is, why the gate asks, what they may answer, and
/// what the call would do (the command, the code, a diff).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PermissionRequest {
    pub tool_call: PermissionToolCall,
    /// The corral tool whose rules apply, else an external agent's own name for it.
    pub tool: String,
    /// An external agent's own name for the tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_tool: Option<String>,
    /// The danger level the preset gives the tool: `safe`, `moderate`, `dangerous`.
    pub danger: String,
    /// Why the gate asks.
    pub reason: String,
    /// Missing from requests written before "allow always" was scoped; those offered it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub always: Option<AlwaysOffer>,
    pub options: Vec<PermissionOption>,
    #[serde(flatten)]
    pub preview: ApprovalPreview,
    /// The delegated sub-session that asks (its requests are asked on its parent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_session: Option<String>,
    /// Given by the session when it opens the request; answers name it.
    pub request_id: String,
}

impl PermissionRequest {
    /// Whether the person may answer "allow always".
    pub fn always_offered(&self) -> bool {
        self.always.as_ref().is_none_or(|always| always.offered)
    }
}

#[cfg(test)]
impl PermissionRequest {
    /// A request for `tool` with nothing but its input said: what surfaces' tests start from.
    pub(crate) fn sample(tool: &str, raw_input: Value) -> Self {
        PermissionRequest {
            tool_call: PermissionToolCall::pending("c1", tool, "other", raw_input),
            tool: tool.into(),
            agent_tool: None,
            danger: String::new(),
            reason: String::new(),
            always: None,
            options: Vec::new(),
            preview: ApprovalPreview::default(),
            sub_session: None,
            request_id: "perm_c1".into(),
        }
    }
}

/// The call as the person is shown it, in the ACP shape of a pending tool call.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PermissionToolCall {
    pub tool_call_id: String,
    pub title: String,
    /// ACP tool kind: read, edit, search, execute, fetch, other.
    pub kind: String,
    pub status: ToolCallStatus,
    /// The caller's own input, shown as is.
    pub raw_input: Value,
}

impl PermissionToolCall {
    pub fn pending(
        tool_call_id: impl Into<String>,
        title: impl Into<String>,
        kind: impl Into<String>,
        raw_input: Value,
    ) -> Self {
        PermissionToolCall {
            tool_call_id: tool_call_id.into(),
            title: title.into(),
            kind: kind.into(),
            status: ToolCallStatus::Pending,
            raw_input,
        }
    }
}

/// What "allow always" would cover, read by the person before choosing it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct AlwaysOffer {
    pub offered: bool,
    /// "always: `git status` with any arguments, …", or "always is not offered: …".
    pub scope: String,
}

/// One answer a person may choose, as ACP describes options.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PermissionOption {
    pub option_id: String,
    pub name: String,
    /// ACP option kind: allow_once, allow_always, reject_once, reject_always.
    pub kind: String,
}

/// What the call would do, in the request's own fields: `command` (shell), `code` (python),
/// `url` (open_url), or a write's `path` with `exists`, `bytes` and a unified `diff`, or a
/// `note` on why there is no diff. Other tools have none of them.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ApprovalPreview {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exists: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// A `computer` or `windows` call: where it lands, on which window, and the screen with
    /// the target marked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desktop: Option<Box<DesktopPreview>>,
}

/// What a desktop action will do, for the person approving it. Coordinates are real screen
/// pixels (the model's, mapped back from the screenshot it saw).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DesktopPreview {
    /// The action as the model named it: `left_click`, `type`, `key`, `drag`, `focus` …
    pub action: String,
    /// One line: "left click at (412, 300) in Gnome-calculator “Calculator”".
    pub description: String,
    /// Where the pointer acts (a click, the start of a drag, a scroll).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub point: Option<[i32; 2]>,
    /// The end of a drag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<[i32; 2]>,
    /// The text a `type` enters, or the combos a `key` presses, whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The window the action reaches: under the point, else the focused one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<DesktopWindow>,
    /// The screen now, downsampled, with the point, path or target window marked (PNG).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<PreviewImage>,
}

/// An image in a preview (the model layer's image, restated here: events sit below it).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PreviewImage {
    pub mime_type: String,
    pub data_base64: String,
}

/// A window as a person is shown it. Title and application are the window's own words:
/// untrusted text, escaped by every surface.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DesktopWindow {
    pub id: String,
    pub title: String,
    pub app: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
}

/// A request closed: answered, timed out, cancelled, or given up when its asker went away.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PermissionResolution {
    pub request_id: String,
    pub resolved: Resolved,
    /// The decision by its name (`allow`, `deny`, `allow_all`, `disable`, `forbid_all`,
    /// `cancel`).
    pub decision: String,
    /// What the decision did (a grant's scope), or why nobody's answer counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl PermissionResolution {
    pub fn new(request_id: impl Into<String>, decision: &str, note: Option<String>) -> Self {
        PermissionResolution {
            request_id: request_id.into(),
            resolved: Resolved,
            decision: decision.to_string(),
            note,
        }
    }
}

/// The `"resolved": true` that marks a resolution; nothing else reads as one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resolved;

impl Serialize for Resolved {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bool(true)
    }
}

impl<'de> Deserialize<'de> for Resolved {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if bool::deserialize(d)? {
            Ok(Resolved)
        } else {
            Err(serde::de::Error::custom(
                "a resolution says \"resolved\": true",
            ))
        }
    }
}

#[cfg(test)]
mod tests;
