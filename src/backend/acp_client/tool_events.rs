//! The agent's tool calls as corral events. ACP sends a call in pieces (`tool_call`, then
//! `tool_call_update`s whose fields all but the id are optional, or only a permission request
//! and a final update, as gemini does for calls it confirms), so the merged state of each call
//! lives here, and each call is announced (`tool_use`) and finished (`tool_result`) exactly
//! once whichever message comes first.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use serde_json::{Value, json};

use crate::backend::external::ToolAsk;
use crate::event::{Payload, ToolCallInfo, ToolCallStatus, ToolResultData, ToolUseData};
use crate::session::Session;

struct Call {
    merged: Value,
    /// The tool's name, fixed when the call is first announced: a call the agent retitles
    /// keeps it, so its `tool_use`, `tool_result` and permission request agree.
    name: Option<String>,
    announced: bool,
    /// The authoritative `tool_use` (with `rawInput`) went out.
    input_sent: bool,
    finished: bool,
    started: Instant,
}

pub(crate) struct Calls {
    session: Arc<Session>,
    calls: Mutex<HashMap<String, Call>>,
}

impl Calls {
    pub(crate) fn new(session: Arc<Session>) -> Calls {
        Calls {
            session,
            calls: Mutex::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Call>> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Merges a `tool_call`, `tool_call_update` or a permission request's `toolCall` into the
    /// call's state; returns its id and the merged fields.
    pub(crate) fn merge(&self, update: &Value) -> Option<(String, Value)> {
        let id = update.get("toolCallId")?.as_str()?.to_owned();
        let mut calls = self.lock();
        let call = calls.entry(id.clone()).or_insert_with(|| Call {
            merged: json!({"toolCallId": id}),
            name: None,
            announced: false,
            input_sent: false,
            finished: false,
            started: Instant::now(),
        });
        if let (Value::Object(target), Value::Object(fields)) = (&mut call.merged, update) {
            for (key, value) in fields {
                if key != "sessionUpdate" && !value.is_null() {
                    target.insert(key.clone(), value.clone());
                }
            }
        }
        Some((id, call.merged.clone()))
    }

    /// Emits `tool_use` for a call not announced yet, and again once its input arrives.
    pub(crate) fn announce(&self, id: &str) {
        let (tool, info) = {
            let mut calls = self.lock();
            let Some(call) = calls.get_mut(id) else {
                return;
            };
            // claude-agent-acp announces with `rawInput: {}` and fills it in later.
            let has_input = call
                .merged
                .get("rawInput")
                .is_some_and(|v| !v.is_null() && v.as_object().is_none_or(|o| !o.is_empty()));
            if call.finished || (call.announced && (call.input_sent || !has_input)) {
                return;
            }
            call.announced = true;
            call.input_sent = has_input;
            (name_of(call).to_owned(), info_of(&call.merged))
        };
        self.session
            .emit(Payload::ToolUse(ToolUseData::new(tool, info)));
    }

    /// Emits the call's `tool_result` once. `error`: corral's own reason (a refusal) when the
    /// agent will not report one.
    pub(crate) fn finish(&self, id: &str, success: bool, error: Option<String>) {
        self.announce(id);
        let (merged, started, name) = {
            let mut calls = self.lock();
            let Some(call) = calls.get_mut(id) else {
                return;
            };
            if call.finished {
                return;
            }
            call.finished = true;
            (call.merged.clone(), call.started, name_of(call).to_owned())
        };
        let content = merged
            .get("content")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let output = output_text(&merged);
        let outcome = if success {
            Ok(output)
        } else {
            Err(error.unwrap_or(output))
        };
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.session
            .emit(Payload::ToolResult(ToolResultData::with_content(
                id,
                &name,
                outcome,
                duration_ms,
                content,
            )));
    }

    /// The call's name: the one it was announced with, else the best its fields give now.
    pub(crate) fn name(&self, id: &str) -> String {
        match self.lock().get_mut(id) {
            Some(call) => name_of(call).to_owned(),
            None => "tool".to_owned(),
        }
    }

    /// A new turn: calls of earlier turns will not be updated again.
    pub(crate) fn clear(&self) {
        self.lock().clear();
    }
}

fn info_of(merged: &Value) -> ToolCallInfo {
    let text = |key: &str| merged.get(key).and_then(Value::as_str).unwrap_or_default();
    let list = |key: &str| {
        merged
            .get(key)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    ToolCallInfo {
        tool_call_id: text("toolCallId").to_owned(),
        title: text("title").to_owned(),
        kind: merged
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("other")
            .to_owned(),
        status: serde_json::from_value(merged.get("status").cloned().unwrap_or(Value::Null))
            .unwrap_or(ToolCallStatus::Pending),
        content: list("content"),
        locations: list("locations"),
        raw_input: merged.get("rawInput").filter(|v| !v.is_null()).cloned(),
    }
}

/// The call's name, fixed the first time anyone needs it.
fn name_of(call: &mut Call) -> &str {
    call.name
        .get_or_insert_with(|| agent_tool_name(&call.merged))
}

/// The agent's name for the tool: claude-agent-acp's own (`_meta.claudeCode.toolName`, or a
/// `name` field), else the corral tool the gate judges the call as (opencode and gemini send a
/// `kind` and a title that is often the command itself), else the title.
fn agent_tool_name(merged: &Value) -> String {
    fn text(value: Option<&Value>) -> Option<&str> {
        value
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
    }
    text(merged.pointer("/_meta/claudeCode/toolName"))
        .or_else(|| text(merged.get("name")))
        .or_else(|| gate_tool(merged).map(|(tool, _)| tool))
        .or_else(|| text(merged.get("title")))
        .unwrap_or("tool")
        .to_owned()
}

/// What a call returned: its `rawOutput` when the agent sends one (claude-agent-acp keeps a
/// Bash call's description in `content`, its output in `rawOutput`), else the text of its
/// `content` blocks.
fn output_text(merged: &Value) -> String {
    match merged.get("rawOutput") {
        Some(Value::String(text)) => return text.clone(),
        Some(Value::Object(o)) => {
            return match o.get("output").and_then(Value::as_str) {
                Some(text) => text.to_owned(),
                None => Value::Object(o.clone()).to_string(),
            };
        }
        Some(other) if !other.is_null() => return other.to_string(),
        _ => {}
    }
    let mut parts = Vec::new();
    for item in merged
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        match item["type"].as_str() {
            Some("content") => {
                if let Some(text) = item["content"]["text"].as_str() {
                    parts.push(text.to_owned());
                }
            }
            Some("diff") => {
                parts.push(format!(
                    "edited {}",
                    item["path"].as_str().unwrap_or("a file")
                ));
            }
            _ => {}
        }
    }
    parts.join("\n")
}

/// A tool call described in corral's terms, for the gate. `name`: the call's name as its
/// events show it ([`Calls::name`]).
pub(crate) fn tool_ask(merged: &Value, name: String) -> ToolAsk {
    let raw = merged.get("rawInput").cloned().unwrap_or(Value::Null);
    let title = merged
        .get("title")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let kind: &'static str = match merged.get("kind").and_then(Value::as_str) {
        Some("read") => "read",
        Some("edit") => "edit",
        Some("delete") => "delete",
        Some("move") => "move",
        Some("search") => "search",
        Some("execute") => "execute",
        Some("think") => "think",
        Some("fetch") => "fetch",
        Some("switch_mode") => "switch_mode",
        _ => "other",
    };
    let (corral_tool, args) = match gate_tool(merged) {
        Some((tool, args)) => (Some(tool), args),
        None => (None, Value::Null),
    };
    ToolAsk {
        tool_call_id: merged["toolCallId"].as_str().unwrap_or_default().to_owned(),
        agent_tool: name,
        corral_tool,
        args,
        title,
        kind,
        paths: call_paths(merged, &raw, kind),
        raw_input: raw,
    }
}

/// The corral tool a call amounts to, whose rules and danger the gate applies, and its
/// arguments in that tool's shape; `None`: the call's kind has no corral tool (delete, move,
/// think, other) or lacks what the tool needs (an edit or read without a path), and a person
/// is asked. `search` stays the agent's own: its pattern may be a glob that starts outside
/// the root (claude's `Glob` with `/etc/**`) or a regex, which only the agent's tool name
/// tells apart, and `search_files` is safe, so the gate would let it through unasked.
fn gate_tool(merged: &Value) -> Option<(&'static str, Value)> {
    let raw = merged.get("rawInput").unwrap_or(&Value::Null);
    let title = merged
        .get("title")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let raw_text = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| raw.get(*k).and_then(Value::as_str).map(str::to_owned))
    };
    let path = || call_path(merged).or_else(|| raw_text(&["file_path", "filePath", "path"]));
    match merged.get("kind").and_then(Value::as_str)? {
        "execute" => {
            let command: String = match raw.get("command").or_else(|| raw.get("cmd")) {
                Some(Value::String(c)) => c.clone(),
                // codex-style argv arrays
                Some(Value::Array(words)) => words
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(" "),
                _ => title.to_owned(),
            };
            Some(("shell", json!({ "command": command })))
        }
        "edit" => {
            let path = path()?;
            let content = diff_new_text(merged)
                .or_else(|| raw_text(&["content", "new_string", "newText"]))
                .unwrap_or_default();
            Some(("write_file", json!({"path": path, "content": content})))
        }
        "read" => Some(("read_file", json!({ "path": path()? }))),
        "fetch" => {
            let url = raw_text(&["url", "uri"]).unwrap_or_else(|| title.to_owned());
            Some(("open_url", json!({ "url": url })))
        }
        _ => None,
    }
}

/// Every path a call names: its locations and diffs (ACP's own fields, always file paths),
/// and for calls on files or commands the path keys of the agent's `rawInput` (opencode's
/// `filePath` and `workdir`, gemini's `absolute_path` and `dir_path`, claude's `file_path`).
/// Other kinds' `rawInput` (an MCP tool's arguments, say) may name remote things.
fn call_paths(merged: &Value, raw: &Value, kind: &str) -> Vec<String> {
    let mut paths: Vec<String> = merged["locations"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|l| l["path"].as_str().map(str::to_owned))
        .collect();
    paths.extend(
        merged["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["type"] == "diff")
            .filter_map(|c| c["path"].as_str().map(str::to_owned)),
    );
    if matches!(
        kind,
        "read" | "edit" | "delete" | "move" | "search" | "execute"
    ) {
        paths.extend(crate::backend::external::confine::paths_in(raw));
    }
    paths
}

/// The file a call touches: a diff's path, else its first location.
pub(crate) fn call_path(merged: &Value) -> Option<String> {
    let from_diff = merged["content"].as_array().and_then(|items| {
        items
            .iter()
            .find(|i| i["type"] == "diff")
            .and_then(|i| i["path"].as_str())
    });
    from_diff
        .or_else(|| merged["locations"][0]["path"].as_str())
        .map(str::to_owned)
}

fn diff_new_text(merged: &Value) -> Option<String> {
    merged["content"].as_array().and_then(|items| {
        items
            .iter()
            .find(|i| i["type"] == "diff")
            .and_then(|i| i["newText"].as_str())
            .map(str::to_owned)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(merged: &Value) -> ToolAsk {
        tool_ask(merged, agent_tool_name(merged))
    }

    #[test]
    fn names_prefer_the_agents_own_then_the_gates_tool_then_the_title() {
        let name = |merged: Value| agent_tool_name(&merged);
        // claude-agent-acp: its tool's name in _meta, whatever the title says.
        assert_eq!(
            name(json!({"title": "`ls`", "kind": "execute", "name": "X",
                "_meta": {"claudeCode": {"toolName": "Bash"}}})),
            "Bash"
        );
        assert_eq!(name(json!({"title": "`ls`", "name": "Bash"})), "Bash");
        // opencode and gemini: a title (often the command) and a kind.
        assert_eq!(
            name(json!({"title": "mkdir x", "kind": "execute"})),
            "shell"
        );
        assert_eq!(
            name(json!({"title": "a.txt", "kind": "read", "locations": [{"path": "/r/a.txt"}]})),
            "read_file"
        );
        assert_eq!(
            name(json!({"title": "Write a.txt", "kind": "edit",
                "content": [{"type": "diff", "path": "/r/a.txt", "newText": "x"}]})),
            "write_file"
        );
        assert_eq!(
            name(json!({"title": "https://x", "kind": "fetch"})),
            "open_url"
        );
        // The name is the tool the gate judges: an edit without a path is not write_file.
        assert_eq!(name(json!({"title": "Edit", "kind": "edit"})), "Edit");
        assert_eq!(
            name(json!({"title": "grep foo", "kind": "search"})),
            "grep foo"
        );
        assert_eq!(name(json!({"title": " ", "kind": "other"})), "tool");
        assert_eq!(
            name(
                json!({"title": "x", "kind": "execute", "_meta": {"claudeCode": {"toolName": ""}}})
            ),
            "shell"
        );
    }

    #[test]
    fn a_call_keeps_its_name_when_retitled_or_given_more_fields() {
        let session = crate::session::Session::create(None).unwrap();
        let calls = Calls::new(session.clone());
        calls.merge(&json!({"toolCallId": "c1", "title": "list files", "kind": "other"}));
        calls.announce("c1");
        calls.merge(
            &json!({"toolCallId": "c1", "title": "ls -la", "kind": "execute",
            "_meta": {"claudeCode": {"toolName": "Bash"}}}),
        );
        assert_eq!(calls.name("c1"), "list files");
        let (_, merged) = calls.merge(&json!({"toolCallId": "c1"})).unwrap();
        let ask = tool_ask(&merged, calls.name("c1"));
        assert_eq!(ask.agent_tool, "list files");
        assert_eq!(ask.corral_tool, Some("shell"));
        calls.merge(&json!({"toolCallId": "c1", "rawInput": {"command": "ls -la"}}));
        calls.announce("c1");
        calls.finish("c1", true, None);
        let mut tap = session.tap(0);
        let mut tools = Vec::new();
        while let Ok(event) = tap.try_recv() {
            let value: Value = serde_json::from_str(&event.json).unwrap();
            match value["kind"].as_str() {
                Some("tool_use") => tools.push(value["data"]["tool"].clone()),
                Some("tool_result") => tools.push(value["data"]["result"]["tool"].clone()),
                _ => {}
            }
        }
        // The announce, the authoritative copy with its input, and the result.
        assert_eq!(tools, ["list files", "list files", "list files"]);
    }

    #[test]
    fn asks_are_built_from_the_acp_fields() {
        let shell = ask(&json!({"toolCallId": "c1", "title": "touch x", "kind": "execute"}));
        assert_eq!(shell.corral_tool, Some("shell"));
        assert_eq!(shell.args, json!({"command": "touch x"}));
        let shell = ask(
            &json!({"toolCallId": "c1", "title": "Bash", "kind": "execute",
            "rawInput": {"command": "ls -l"}}),
        );
        assert_eq!(shell.args, json!({"command": "ls -l"}));
        let edit = ask(
            &json!({"toolCallId": "c2", "kind": "edit", "title": "Write a.txt",
            "content": [{"type": "diff", "path": "/r/a.txt", "oldText": null, "newText": "hi"}]}),
        );
        assert_eq!(edit.corral_tool, Some("write_file"));
        assert_eq!(edit.args, json!({"path": "/r/a.txt", "content": "hi"}));
        let read = ask(&json!({"toolCallId": "c3", "kind": "read",
            "locations": [{"path": "/r/b.txt"}]}));
        assert_eq!(read.args, json!({"path": "/r/b.txt"}));
        let other = ask(&json!({"toolCallId": "c4", "kind": "think"}));
        assert_eq!(other.corral_tool, None);
        // Every path the call names goes to the approver, whatever its kind.
        let moved = ask(&json!({"toolCallId": "c5", "kind": "other",
            "locations": [{"path": "/r/a"}, {"path": "/elsewhere/b"}],
            "content": [{"type": "diff", "path": "/r/c", "newText": ""}],
            "rawInput": {"path": "/remote/thing"}}));
        assert_eq!(moved.paths, ["/r/a", "/elsewhere/b", "/r/c"]);
        let shell = ask(&json!({"toolCallId": "c6", "kind": "execute",
            "rawInput": {"command": "ls", "workdir": "/tmp"}}));
        assert_eq!(shell.paths, ["/tmp"]);
    }

    #[test]
    fn output_comes_from_content_or_raw_output() {
        let merged =
            json!({"content": [{"type": "content", "content": {"type": "text", "text": "ok"}}]});
        assert_eq!(output_text(&merged), "ok");
        assert_eq!(
            output_text(&json!({"rawOutput": {"output": "(no output)"}})),
            "(no output)"
        );
        let both = json!({"rawOutput": "(Bash completed with no output)",
            "content": [{"type": "content", "content": {"type": "text", "text": "Make a file"}}]});
        assert_eq!(output_text(&both), "(Bash completed with no output)");
        assert_eq!(output_text(&json!({})), "");
    }
}
