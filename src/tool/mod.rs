//! Tools: described once in `tools/*.toml` (embedded at build time), implemented one family per
//! file, looked up through the [`ToolRegistry`].

mod call_target;
mod delegate;
mod desktop;
pub use call_target::CallTarget;
pub use desktop::computer::{Target as DesktopTarget, inspect_call as inspect_computer_call};
pub use desktop::{
    automation_report as desktop_automation, window_titles as desktop_window_titles,
};
mod edit;
mod editor;
mod exec;
mod fs;
mod guard;
mod manifest;
pub mod mcp;
mod output;
mod plan;
mod registry;
mod search;
mod settings;
mod write;

pub use delegate::{DelegateFuture, DelegateLink, Delegated, Delegator, SubPreset};
pub(crate) use desktop::notify_person;
pub use desktop::{Presence, clipboard_helper_main};
pub(crate) use edit::{FileChange, planned_changes, write_paths};
pub use editor::{Editor, EditorFuture, EditorLink};
pub(crate) use guard::{Guard, guard as write_guard};
pub use manifest::{Danger, ToolManifest, manifests, tool_names};
pub use output::cut_head_tail;
pub use plan::PlanSink;
pub use registry::{RegisteredTool, ToolRegistry};
pub use settings::ToolSettings;

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::model::Image;
use crate::sandbox::OutputSink;

/// A tool of an MCP server (`SERVER__TOOL`): built-in names never hold the separator.
pub fn is_mcp_name(name: &str) -> bool {
    name.contains(crate::config::mcp::NAME_SEPARATOR)
}

/// What a tool needs to know about the session it runs in.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The session root, canonicalized: file tools never reach outside it.
    pub root: PathBuf,
    pub call_id: String,
    pub cancel: CancellationToken,
    /// Largest output handed back to the model, in bytes (head and tail kept).
    pub max_output_bytes: usize,
    /// Streams a running process's stdout/stderr as `tool_output` events.
    pub output: OutputSink,
    /// Takes `update_plan`'s plan to the session's `plan` event.
    pub plan: PlanSink,
    /// Session-wide settings: timeouts, the environment tool processes get, desktop options.
    pub settings: Arc<ToolSettings>,
    /// A person answered the prompt for this very call with yes (not a rule, a grant from an
    /// earlier call, bypass or an automatic answer): only then may shell and python leave new
    /// or changed agent config in the root.
    pub person_approved: bool,
    /// A desktop action's target as the gate judged it and the person approved it: the call
    /// acts on exactly that, or not at all.
    pub desktop_target: Option<std::sync::Arc<desktop::computer::Target>>,
    /// The whole turn's token (`cancel` is this call's): the desktop's stop key ends the turn.
    pub turn: CancellationToken,
}

impl ToolContext {
    /// A context for tests and one-off calls: no output streaming, default settings.
    pub fn new(root: PathBuf, call_id: impl Into<String>) -> Self {
        ToolContext {
            root,
            call_id: call_id.into(),
            cancel: CancellationToken::new(),
            max_output_bytes: 32 * 1024,
            output: OutputSink::none(),
            plan: PlanSink::none(),
            settings: Arc::new(ToolSettings::default()),
            person_approved: false,
            desktop_target: None,
            turn: CancellationToken::new(),
        }
    }
}

/// A tool's successful output: text for the model, optional images.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolOutput {
    pub text: String,
    pub images: Vec<Image>,
    /// Images for the record only (the event log, clients), not sent to the model: a desktop
    /// action's screen after it, when the model asked for no screenshot.
    pub recorded: Vec<Image>,
}

impl ToolOutput {
    pub fn text(text: impl Into<String>) -> Self {
        ToolOutput {
            text: text.into(),
            images: Vec::new(),
            recorded: Vec::new(),
        }
    }
}

/// Why a tool call failed. Every variant is reported to the model as an error result so it
/// can adapt; none of them ends the session.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ToolError {
    /// The arguments do not fit the tool (wrong type, missing field, bad value).
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// A path that would lead outside the session root.
    #[error("path outside the session root: {0}")]
    OutsideRoot(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Io(String),
    #[error("cancelled")]
    Cancelled,
    /// The tool ran and failed (a process's non-zero exit, timeout, or failure to start); the
    /// message is complete as it is, output included.
    #[error("{0}")]
    Failed(String),
    /// The sandbox refused to run the tool (strict mode and something it needs is not
    /// enforced); nothing ran.
    #[error("{0}")]
    Sandbox(String),
    /// The tool ran and failed because the sandbox blocked it (a write outside the writable
    /// paths, a network connection with network off): the output, the exit line and a note
    /// saying what the sandbox allows. Such calls do not count as a successful turn.
    #[error("{0}")]
    SandboxDenied(String),
}

pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send + 'a>>;

/// One built-in tool. Its name, description and schema come from its manifest.
pub trait Tool: Send + Sync {
    fn name(&self) -> &'static str;
    /// Runs the call. `args` has been validated against the manifest's schema.
    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a>;
}
