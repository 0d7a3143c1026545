//! A per-turn runtime's [`Step`]s as corral's events: answer pieces as `delta` chunks and each
//! message's whole text once it is done (at a tool call or the turn's end), tool calls and
//! their results matched by id.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};

use super::parse::Step;
use crate::event::{
    ContentBlock, Payload, TextData, ToolCallInfo, ToolCallStatus, ToolResultData, ToolUseData,
    Usage, UsageData,
};
use crate::session::Session;

pub struct Emitter {
    session: Arc<Session>,
    agent: &'static str,
    /// The message being streamed, not yet emitted whole.
    text: String,
    thought: String,
    /// The last whole message: the turn's answer.
    answer: String,
    tools: HashMap<String, (String, Instant)>,
    /// The runtime's session id, once it said it.
    pub session_id: Option<String>,
    /// The runtime ended the turn: its error, if it failed, and the usage.
    pub end: Option<(Option<String>, Usage)>,
}

impl Emitter {
    pub fn new(session: Arc<Session>, agent: &'static str) -> Emitter {
        Emitter {
            session,
            agent,
            text: String::new(),
            thought: String::new(),
            answer: String::new(),
            tools: HashMap::new(),
            session_id: None,
            end: None,
        }
    }

    pub fn apply(&mut self, step: Step) {
        match step {
            Step::Session(id) => self.session_id = Some(id),
            Step::Text { text, delta: true } if !text.is_empty() => {
                self.flush_thought();
                self.text.push_str(&text);
                self.session.emit(Payload::AssistantText(TextData {
                    delta: true,
                    content: ContentBlock::text(text),
                }));
            }
            Step::Text { text, delta: false } if !text.is_empty() => {
                // The whole message: it replaces the pieces streamed before it.
                self.flush_thought();
                self.text.clear();
                self.emit_whole(text);
            }
            Step::Text { .. } => {}
            Step::Thinking(text) if !text.is_empty() => {
                self.thought.push_str(&text);
                self.session.emit(Payload::Thought(TextData {
                    delta: true,
                    content: ContentBlock::text(text),
                }));
            }
            Step::Thinking(_) => {}
            Step::ToolCall { id, name, input } => {
                self.flush();
                if self.tools.contains_key(&id) {
                    return;
                }
                let (kind, title) = describe(&name, &input);
                self.tools
                    .insert(id.clone(), (name.clone(), Instant::now()));
                self.session.emit(Payload::ToolUse(ToolUseData::new(
                    &name,
                    ToolCallInfo {
                        tool_call_id: id,
                        title,
                        kind: kind.to_string(),
                        status: ToolCallStatus::InProgress,
                        content: Vec::new(),
                        locations: Vec::new(),
                        raw_input: Some(input),
                    },
                )));
            }
            Step::ToolResult { id, output } => {
                self.flush();
                let (tool, started) = self
                    .tools
                    .remove(&id)
                    .unwrap_or_else(|| ("unknown".to_string(), Instant::now()));
                let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                self.session
                    .emit(Payload::ToolResult(ToolResultData::finished(
                        &id,
                        &tool,
                        output,
                        duration_ms,
                        Vec::new(),
                    )));
            }
            Step::End { error, usage } => {
                self.flush();
                self.session.emit(Payload::Usage(UsageData {
                    usage,
                    context_tokens: None,
                    context_window: None,
                }));
                self.end = Some((error, usage));
            }
            Step::Error(message) => self
                .session
                .emit_error(message, json!({"agent": self.agent})),
        }
    }

    /// Ends the turn's last message; returns the answer.
    pub fn finish(&mut self) -> String {
        self.flush();
        // Calls the agent never finished (it was stopped) end as failed.
        for (id, (tool, started)) in std::mem::take(&mut self.tools) {
            let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            self.session
                .emit(Payload::ToolResult(ToolResultData::finished(
                    &id,
                    &tool,
                    Err("the agent's turn ended before this call did".to_string()),
                    duration_ms,
                    Vec::new(),
                )));
        }
        std::mem::take(&mut self.answer)
    }

    fn flush_thought(&mut self) {
        if !self.thought.is_empty() {
            let thought = std::mem::take(&mut self.thought);
            self.session.emit(Payload::Thought(TextData {
                delta: false,
                content: ContentBlock::text(thought),
            }));
        }
    }

    fn flush(&mut self) {
        self.flush_thought();
        if !self.text.is_empty() {
            let text = std::mem::take(&mut self.text);
            self.emit_whole(text);
        }
    }

    fn emit_whole(&mut self, text: String) {
        self.answer = text.clone();
        self.session.emit(Payload::AssistantText(TextData {
            delta: false,
            content: ContentBlock::text(text),
        }));
    }
}

/// The ACP kind of a runtime's tool and a title for it. Each runtime names its tools its own
/// way (`run_shell_command`, `bash`, `Bash`, `shellToolCall`).
pub fn describe(name: &str, input: &Value) -> (&'static str, String) {
    let field = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| input[*k].as_str())
            .unwrap_or_default()
            .to_string()
    };
    let path = || field(&["file_path", "filePath", "absolute_path", "path", "dir_path"]);
    let lower = name.to_ascii_lowercase();
    let (kind, title) = match lower.as_str() {
        "bash" | "shell" | "run_shell_command" | "execute" | "command" => {
            ("execute", field(&["command", "cmd"]))
        }
        "read" | "read_file" | "read_many_files" | "view" => ("read", format!("Read {}", path())),
        "write" | "edit" | "write_file" | "replace" | "create" | "str_replace" | "multiedit"
        | "apply_patch" => ("edit", format!("Edit {}", path())),
        "glob" | "grep" | "search_file_content" | "search" | "find" => {
            ("search", format!("{name} {}", field(&["pattern", "query"])))
        }
        "ls" | "list" | "list_directory" => ("read", format!("List {}", path())),
        "web_fetch" | "webfetch" | "fetch" | "url" => {
            ("fetch", format!("Fetch {}", field(&["url", "prompt"])))
        }
        _ => ("other", name.to_string()),
    };
    let title: String = title.chars().take(200).collect();
    if title.trim().is_empty() {
        (kind, name.to_string())
    } else {
        (kind, title)
    }
}
