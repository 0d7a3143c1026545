//! What nodes and the control plane say to each other over NATS: the node's announcement
//! (its heartbeat value), a session's assignment (the sessions bucket), and the commands a
//! node takes with their replies. All JSON.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::McpServers;
use crate::error::Error;
use crate::host::manager::RemoteCall;
use crate::host::open::{Limits, OpenSpec, mcp_request, parse_model_and_effort};
use crate::session::SessionMeta;

/// A node's heartbeat: who it is and how much room it has.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Announce {
    pub name: String,
    /// New each time the node starts: sessions of an earlier start are gone with it.
    pub instance: String,
    pub labels: BTreeMap<String, String>,
    pub capacity: usize,
    /// Live sessions it runs.
    pub running: usize,
    pub host: String,
    pub version: String,
}

impl Announce {
    /// Whether the node carries every label asked for: `gpu` (present) or `repo=x` (equal).
    pub fn matches(&self, wanted: &[String]) -> bool {
        wanted.iter().all(|label| match label.split_once('=') {
            Some((key, value)) => self.labels.get(key).is_some_and(|v| v == value),
            None => self.labels.contains_key(label.as_str()),
        })
    }
}

/// Parses `--labels gpu,repo=x` (also given more than once).
pub fn parse_labels(items: &[String]) -> Result<BTreeMap<String, String>, String> {
    let mut labels = BTreeMap::new();
    for label in items.iter().flat_map(|i| i.split(',')).map(str::trim) {
        if label.is_empty() {
            continue;
        }
        let (key, value) = label.split_once('=').unwrap_or((label, ""));
        let plain = |s: &str| {
            s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-/:".contains(c))
        };
        if key.is_empty() || !plain(key) || !plain(value) || key.len() > 64 || value.len() > 256 {
            return Err(format!(
                "label {label:?}: use name or name=value of letters, digits and ._-/:"
            ));
        }
        labels.insert(key.to_string(), value.to_string());
    }
    Ok(labels)
}

/// The sessions bucket's value for one session: written by the control plane before the
/// node is asked to open it (a node opens only what names it here), and completed by the
/// node once it is open.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Assignment {
    pub session: String,
    pub node: String,
    /// The node's instance it was given to.
    pub instance: String,
    pub owner: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opened: Option<Opened>,
}

/// What the node opened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Opened {
    pub meta: SessionMeta,
    pub backend: String,
    pub queues_prompts: bool,
    pub steers: bool,
}

/// `POST /api/v1/sessions`'s request, carried to the node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenRequest {
    pub owner: String,
    pub cwd: PathBuf,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub permission: Option<String>,
    #[serde(default)]
    pub worktree: bool,
    #[serde(default)]
    pub system_prompt: Option<String>,
    #[serde(default)]
    pub base_url: Option<String>,
    #[serde(default)]
    pub effort: Option<crate::model::Effort>,
    #[serde(default)]
    pub mcp_servers: Option<Value>,
    #[serde(default)]
    /// A `user` token's bounds, as the control plane judged them.
    pub limits: Option<Limits>,
}

impl OpenRequest {
    /// The session it opens (`id`: the one the control plane assigned; `None`: a fresh one),
    /// its model and MCP servers judged under its limits against `configured` servers.
    pub fn spec(&self, id: Option<String>, configured: &McpServers) -> Result<OpenSpec, Error> {
        let limits = self.limits.clone();
        let (model, effort) = match &self.model {
            Some(text) => {
                let (model, effort) = parse_model_and_effort(text, self.effort, limits.as_ref())?;
                (Some(model), effort)
            }
            None => (None, self.effort),
        };
        let mcp = mcp_request::parse(self.mcp_servers.clone(), limits.is_some(), configured)?;
        Ok(OpenSpec {
            id,
            cwd: Some(self.cwd.clone()),
            model,
            base_url: self.base_url.clone(),
            system: self.system_prompt.clone(),
            permission: self.permission.clone(),
            worktree: self.worktree,
            effort,
            attended: true,
            limits,
            mcp_servers: mcp.defined,
            mcp_select: mcp.select,
            ..OpenSpec::default()
        })
    }
}

/// A command for a node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeRequest {
    pub session: String,
    pub call: NodeCall,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeCall {
    Open(Box<OpenRequest>),
    Session(RemoteCall),
}

/// A node's answer: a value, or an error with the API's code.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeReply {
    Ok(Value),
    Error { code: String, message: String },
}

impl NodeReply {
    pub fn error(code: &str, message: impl Into<String>) -> NodeReply {
        NodeReply::Error {
            code: code.to_string(),
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_parse_and_match() {
        let labels = parse_labels(&["gpu,repo=x".into(), " zone=eu ".into()]).unwrap();
        let node = Announce {
            name: "a".into(),
            instance: "i".into(),
            labels,
            capacity: 1,
            running: 0,
            host: "h".into(),
            version: "v".into(),
        };
        assert!(node.matches(&["gpu".into(), "repo=x".into()]));
        assert!(!node.matches(&["repo=y".into()]));
        assert!(!node.matches(&["ssd".into()]));
        assert!(node.matches(&[]));
        assert!(parse_labels(&["a b".into()]).is_err());
        assert!(parse_labels(&["=x".into()]).is_err());
    }

    #[test]
    fn a_request_round_trips() {
        let request = NodeRequest {
            session: "abc".into(),
            call: NodeCall::Session(RemoteCall::Cancel),
        };
        let text = serde_json::to_string(&request).unwrap();
        assert_eq!(
            text,
            r#"{"session":"abc","call":{"session":{"op":"cancel"}}}"#
        );
        assert_eq!(serde_json::from_str::<NodeRequest>(&text).unwrap(), request);
    }
}
