//! Turning raw calls into executed tool results: validate against the manifest schema
//! (leniently, for small models), run, cut the output, report.
//!
//! Every failure here is told to the model as an error result naming the expected signature,
//! so it can retry; the loop counts consecutive malformed calls and gives up at a limit.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::repair;
use super::step::{RawCall, announce};
use crate::event::shown_outcome;
use crate::event::{
    Payload, PermissionToolCall, ToolCallStatus, ToolOutputData, ToolResultData, ToolUseData,
};
use crate::model::{Image, Message, ToolCall};
use crate::policy::{Call, CallTarget, Caller};
use crate::sandbox::OutputSink;
use crate::session::Session;
use crate::tool::{
    DesktopTarget as Target, PlanSink, RegisteredTool, ToolContext, ToolError, ToolRegistry,
    ToolSettings, cut_head_tail,
};

/// A call that passed validation, ready to run.
pub struct ValidCall {
    pub call: ToolCall,
    pub tool: RegisteredTool,
}

impl ValidCall {
    /// The call as the approver judges it and a person is shown it.
    pub fn to_approve<'a>(&'a self, target: Option<&'a CallTarget>) -> Call<'a> {
        let manifest = &self.tool.manifest;
        Call {
            caller: Caller::Model,
            tool: Some(&self.call.name),
            args: &self.call.arguments,
            tool_call: PermissionToolCall::pending(
                &self.call.id,
                &manifest.title,
                &manifest.kind,
                self.call.arguments.clone(),
            ),
            target,
        }
    }
}

/// A `computer` call's target (where it lands, the window there, the marked screen), found
/// before the gate judges it; other calls have none. Err: the call cannot run (bad
/// coordinates, no display), told to the model.
pub async fn desktop_target(
    valid: &ValidCall,
    settings: &ToolSettings,
    cancel: &CancellationToken,
) -> Result<Option<Arc<Target>>, String> {
    if valid.call.name != "computer" {
        return Ok(None);
    }
    crate::tool::inspect_computer_call(&valid.call.arguments, settings, cancel)
        .await
        .map(|target| Some(Arc::new(target)))
        .map_err(|e| e.to_string())
}

/// Validates a raw call. Err carries the message for the model.
pub fn validate(tools: &ToolRegistry, raw: &RawCall) -> Result<ValidCall, String> {
    let Some(tool) = tools.get(&raw.name) else {
        let known: Vec<&str> = tools.names().collect();
        if let Some(why) = tools.withheld(&raw.name) {
            return Err(format!(
                "{} is not available in this session ({why}). Available tools: {}",
                raw.name,
                known.join(", ")
            ));
        }
        if raw.name.is_empty() {
            return Err(format!(
                "the tool call has no name. Available tools: {}",
                known.join(", ")
            ));
        }
        return Err(format!(
            "unknown tool {:?}. Available tools: {}",
            raw.name,
            known.join(", ")
        ));
    };
    let signature = repair::signature(&raw.name, &tool.manifest.parameters);
    let arguments = match &raw.arguments_value {
        Some(Value::String(text)) => repair::parse_arguments(text),
        Some(value) => Ok(value.clone()),
        None => repair::parse_arguments(&raw.arguments_text),
    }
    .map_err(|e| format!("{e}. Expected {signature}"))?;
    let invalid = |e: String| {
        format!(
            "invalid arguments for {}: {e}. Expected {signature}",
            raw.name
        )
    };
    // Aliases first: what is validated, gated and run carries only the schema's names.
    let arguments = tool
        .manifest
        .normalise_aliases(arguments)
        .map_err(invalid)?;
    let arguments =
        repair::coerce_and_validate(arguments, &tool.manifest.parameters).map_err(invalid)?;
    Ok(ValidCall {
        call: ToolCall {
            id: raw.id.clone(),
            name: raw.name.clone(),
            arguments,
        },
        tool: tool.clone(),
    })
}

/// The arguments as they best can be shown when a call is malformed.
pub fn raw_arguments(raw: &RawCall) -> Value {
    match &raw.arguments_value {
        Some(value) => value.clone(),
        None if raw.arguments_text.trim().is_empty() => json!({}),
        None => repair::parse_arguments(&raw.arguments_text)
            .unwrap_or_else(|_| Value::String(raw.arguments_text.clone())),
    }
}

/// Emits the authoritative `tool_use` for a call (after its input is complete).
pub fn emit_authoritative_use(
    session: &Session,
    tools: &ToolRegistry,
    raw: &RawCall,
    input: &Value,
    root: &std::path::Path,
) {
    let mut info = announce(tools, raw);
    info.status = ToolCallStatus::InProgress;
    info.raw_input = Some(input.clone());
    // An editor shows a write as a diff per file: each as it is now against what it will be.
    let blocks = crate::policy::diff_blocks(&raw.name, input, root);
    if !blocks.is_empty() {
        (info.content, info.locations) = blocks.into_iter().unzip();
    }
    session.emit(Payload::ToolUse(
        ToolUseData::new(&raw.name, info).recovered_from(raw.recovered_from),
    ));
}

/// How a call came to run: a person's yes (not a rule or grant), and the desktop target
/// they approved.
pub struct Approved {
    pub by_person: bool,
    pub desktop_target: Option<Arc<Target>>,
}

pub struct Finished {
    pub message: Message,
    pub cancelled: bool,
    /// The tool actually ran (not refused by validation or the gate).
    pub executed: bool,
    /// It ran and the sandbox or the root boundary stopped it: the reason.
    pub blocked: Option<String>,
}

/// Report a call that never ran (malformed, or skipped by a cancel).
pub fn reject(session: &Session, call: &ToolCall, error: String) -> Finished {
    report(session, call, Err(error), 0, false)
}

/// A result as reported: the text and images the model gets, and images only recorded.
struct Shown {
    text: String,
    images: Vec<Image>,
    recorded: Vec<Image>,
}

type Reported = Result<Shown, String>;

pub async fn execute(
    session: &Arc<Session>,
    valid: ValidCall,
    root: &std::path::Path,
    settings: &Arc<ToolSettings>,
    cap_override: Option<usize>,
    cancel: &CancellationToken,
    approved: Approved,
) -> Finished {
    let manifest = valid.tool.manifest.clone();
    let max_output_bytes = cap_override.map_or(manifest.max_output_bytes, |cap| {
        cap.min(manifest.max_output_bytes)
    });
    let call_id = valid.call.id.clone();
    let plan_session = session.clone();
    let sink_session = session.clone();
    let sink_settings = settings.clone();
    let context = ToolContext {
        root: root.to_path_buf(),
        call_id: valid.call.id.clone(),
        cancel: cancel.child_token(),
        max_output_bytes,
        output: OutputSink::new(move |stream, text| {
            sink_session.emit(Payload::ToolOutput(ToolOutputData {
                tool_call_id: call_id.clone(),
                stream,
                text: sink_settings.redactor.redact(text).into_owned(),
            }));
        }),
        plan: PlanSink::new(move |plan| {
            plan_session.emit(Payload::Plan(plan));
        }),
        settings: settings.clone(),
        person_approved: approved.by_person,
        desktop_target: approved.desktop_target,
        turn: cancel.clone(),
    };
    let started = Instant::now();
    let result = tokio::select! {
        biased;
        _ = cancel.cancelled() => Err(ToolError::Cancelled),
        result = valid.tool.tool.call(valid.call.arguments.clone(), &context) => result,
    };
    let duration_ms = started.elapsed().as_millis() as u64;
    let cancelled = matches!(result, Err(ToolError::Cancelled));
    let blocked = match &result {
        Err(
            e @ (ToolError::SandboxDenied(_) | ToolError::Sandbox(_) | ToolError::OutsideRoot(_)),
        ) => Some(e.to_string()),
        _ => None,
    };
    let redact = |text: &str| settings.redactor.redact(text).into_owned();
    let result = result
        .map(|output| Shown {
            text: redact(&cut_head_tail(&output.text, max_output_bytes)),
            images: output.images,
            recorded: output.recorded,
        })
        .map_err(|e| redact(&e.to_string()));
    let mut finished = report(session, &valid.call, result, duration_ms, cancelled);
    finished.executed = true;
    finished.blocked = blocked.map(|b| redact(&b));
    finished
}

fn report(
    session: &Session,
    call: &ToolCall,
    result: Reported,
    duration_ms: u64,
    cancelled: bool,
) -> Finished {
    let (outcome, images, recorded) = match result {
        Ok(shown) => (Ok(shown.text), shown.images, shown.recorded),
        Err(message) => (Err(message), Vec::new(), Vec::new()),
    };
    let shown = shown_outcome(&outcome);
    let more = images
        .iter()
        .chain(&recorded)
        .map(|image| crate::event::image_content(&image.data_base64, &image.mime_type))
        .collect();
    session.emit(Payload::ToolResult(ToolResultData::finished(
        &call.id,
        &call.name,
        outcome,
        duration_ms,
        more,
    )));
    let mut message = Message::tool_result(call, shown);
    message.images = images;
    Finished {
        message,
        cancelled,
        executed: false,
        blocked: None,
    }
}
