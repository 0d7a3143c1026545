//! One codex turn's notifications as corral envelopes: `item/*` become text, thoughts and
//! tool calls, `thread/tokenUsage/updated` usage, `turn/completed` the end of the turn.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde_json::{Value, json};

use crate::event::{
    ContentBlock, OutputStream, Payload, PlanData, StopReason, TextData, ToolCallInfo,
    ToolCallStatus, ToolOutputData, ToolResultData, ToolUseData, Usage, UsageData,
};
use crate::session::{Session, TurnEnd};

/// What one turn has seen so far.
pub struct TurnState<'a> {
    session: &'a Session,
    /// The session root: paths in titles are shown relative to it.
    root: &'a Path,
    pub turn_id: Option<String>,
    /// Items as `item/started` described them: approval requests name only the item.
    pub items: HashMap<String, Value>,
    /// Why corral declined an item, for its result.
    pub denials: HashMap<String, String>,
    announced: HashSet<String>,
    /// The last agent message: the turn's answer.
    pub text: String,
    pub usage: Usage,
    /// The thread's token total when the turn began: codex reports totals per thread.
    base: Usage,
    pub thread_total: Usage,
    last_error: Option<String>,
}

impl<'a> TurnState<'a> {
    pub fn new(session: &'a Session, root: &'a Path, thread_total: Usage) -> TurnState<'a> {
        TurnState {
            session,
            root,
            turn_id: None,
            items: HashMap::new(),
            denials: HashMap::new(),
            announced: HashSet::new(),
            text: String::new(),
            usage: Usage::default(),
            base: thread_total,
            thread_total,
            last_error: None,
        }
    }

    /// Handles one notification; `Some` when it ended the turn.
    pub fn notification(&mut self, method: &str, params: &Value) -> Option<TurnEnd> {
        match method {
            "turn/started" => {
                if self.turn_id.is_none() {
                    self.turn_id = params["turn"]["id"].as_str().map(str::to_string);
                }
            }
            "item/started" => self.item_started(&params["item"]),
            "item/completed" => self.item_completed(&params["item"]),
            "item/agentMessage/delta" => self.text_delta(params, false),
            "item/reasoning/summaryTextDelta" | "item/reasoning/textDelta" => {
                self.text_delta(params, true)
            }
            "item/commandExecution/outputDelta" => {
                if let (Some(id), Some(delta)) =
                    (params["itemId"].as_str(), params["delta"].as_str())
                {
                    self.session.emit(Payload::ToolOutput(ToolOutputData {
                        tool_call_id: id.to_string(),
                        stream: OutputStream::Stdout,
                        text: delta.to_string(),
                    }));
                }
            }
            "thread/tokenUsage/updated" => self.token_usage(&params["tokenUsage"]),
            "turn/plan/updated" => {
                let entries = params["plan"]
                    .as_array()
                    .map(|steps| {
                        steps
                            .iter()
                            .map(|s| {
                                let text = |key: &str| s[key].as_str().unwrap_or_default();
                                PlanData::entry(text("step"), text("status"))
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let explanation = params["explanation"].as_str().map(str::to_string);
                self.session.emit(Payload::Plan(PlanData {
                    entries,
                    explanation,
                }));
            }
            "error" => {
                let message = params["error"]["message"]
                    .as_str()
                    .unwrap_or("codex reported an error")
                    .to_string();
                if params["willRetry"].as_bool() == Some(true) {
                    tracing::warn!(%message, "codex is retrying");
                } else {
                    self.last_error = Some(message);
                }
            }
            "turn/completed" => return self.completed(&params["turn"]),
            other => tracing::debug!(method = other, "codex notification not shown"),
        }
        None
    }

    fn text_delta(&self, params: &Value, thought: bool) {
        let Some(delta) = params["delta"].as_str().filter(|d| !d.is_empty()) else {
            return;
        };
        let data = TextData {
            delta: true,
            content: ContentBlock::text(delta),
        };
        self.session.emit(if thought {
            Payload::Thought(data)
        } else {
            Payload::AssistantText(data)
        });
    }

    fn item_started(&mut self, item: &Value) {
        let Some(id) = item["id"].as_str() else {
            return;
        };
        self.items.insert(id.to_string(), item.clone());
        self.announce(item);
    }

    /// The `tool_use` of a tool item, once.
    fn announce(&mut self, item: &Value) {
        let Some(id) = item["id"].as_str() else {
            return;
        };
        let (title, kind, raw_input, locations) = match item["type"].as_str() {
            Some("commandExecution") => {
                let command = item["command"].as_str().unwrap_or_default();
                let inner = super::approve::inner_command(command);
                (
                    inner.clone(),
                    "execute",
                    json!({"command": inner, "cwd": item["cwd"]}),
                    Vec::new(),
                )
            }
            Some("fileChange") => {
                let paths: Vec<&str> = changes(item)
                    .iter()
                    .filter_map(|c| c["path"].as_str())
                    .collect();
                let shown: Vec<String> = paths
                    .iter()
                    .map(|p| {
                        Path::new(p)
                            .strip_prefix(self.root)
                            .map_or_else(|_| p.to_string(), |r| r.display().to_string())
                    })
                    .collect();
                (
                    format!("edit {}", shown.join(", ")),
                    "edit",
                    json!({"changes": item["changes"]}),
                    paths.iter().map(|p| json!({"path": p})).collect(),
                )
            }
            Some("mcpToolCall") => (
                format!(
                    "{}.{}",
                    item["server"].as_str().unwrap_or_default(),
                    item["tool"].as_str().unwrap_or_default()
                ),
                "other",
                item["arguments"].clone(),
                Vec::new(),
            ),
            Some("webSearch") => (
                format!(
                    "search the web: {}",
                    item["query"].as_str().unwrap_or_default()
                ),
                "fetch",
                json!({"query": item["query"]}),
                Vec::new(),
            ),
            _ => return,
        };
        if !self.announced.insert(id.to_string()) {
            return;
        }
        self.session.emit(Payload::ToolUse(ToolUseData::new(
            tool_name(item),
            ToolCallInfo {
                tool_call_id: id.to_string(),
                title,
                kind: kind.to_string(),
                status: ToolCallStatus::InProgress,
                content: Vec::new(),
                locations,
                raw_input: Some(raw_input),
            },
        )));
    }

    fn item_completed(&mut self, item: &Value) {
        let id = item["id"].as_str().unwrap_or_default().to_string();
        match item["type"].as_str() {
            Some("agentMessage") => {
                let text = item["text"].as_str().unwrap_or_default().to_string();
                self.session.emit(Payload::AssistantText(TextData {
                    delta: false,
                    content: ContentBlock::text(text.clone()),
                }));
                self.text = text;
            }
            Some("reasoning") => {
                let mut parts: Vec<&str> = Vec::new();
                for key in ["summary", "content"] {
                    if let Some(list) = item[key].as_array() {
                        parts.extend(list.iter().filter_map(Value::as_str));
                    }
                }
                let text = parts.join("\n");
                if !text.is_empty() {
                    self.session.emit(Payload::Thought(TextData {
                        delta: false,
                        content: ContentBlock::text(text),
                    }));
                }
            }
            Some("commandExecution") => {
                self.announce(item);
                let status = item["status"].as_str().unwrap_or_default();
                let output = item["aggregatedOutput"].as_str().unwrap_or_default();
                let exit = item["exitCode"].as_i64();
                let outcome = match (status, exit) {
                    ("declined", _) => Err(self.declined(&id)),
                    ("completed", Some(0) | None) => Ok(output.to_string()),
                    (_, Some(code)) => Err(format!("exit code {code}\n{output}")),
                    (status, None) => Err(format!("the command {status}\n{output}")),
                };
                self.result(&id, &tool_name(item), outcome, item["durationMs"].as_u64());
            }
            Some("fileChange") => {
                self.announce(item);
                let diffs: Vec<String> = changes(item)
                    .iter()
                    .map(|c| {
                        format!(
                            "{}\n{}",
                            c["path"].as_str().unwrap_or_default(),
                            c["diff"].as_str().unwrap_or_default()
                        )
                    })
                    .collect();
                let outcome = match item["status"].as_str() {
                    Some("completed") => Ok(diffs.join("\n")),
                    Some("declined") => Err(self.declined(&id)),
                    other => Err(format!(
                        "the change was not applied ({})",
                        other.unwrap_or("unknown status")
                    )),
                };
                self.result(&id, &tool_name(item), outcome, None);
            }
            Some("mcpToolCall") | Some("webSearch") => {
                self.announce(item);
                let outcome = match item["status"].as_str() {
                    Some("failed") => Err(item["error"]["message"]
                        .as_str()
                        .unwrap_or("the call failed")
                        .to_string()),
                    _ => Ok(match &item["result"] {
                        Value::Null => String::new(),
                        result => result.to_string(),
                    }),
                };
                self.result(&id, &tool_name(item), outcome, item["durationMs"].as_u64());
            }
            _ => {}
        }
    }

    fn declined(&self, id: &str) -> String {
        self.denials
            .get(id)
            .cloned()
            .unwrap_or_else(|| "declined".to_string())
    }

    fn result(&self, id: &str, tool: &str, outcome: Result<String, String>, duration: Option<u64>) {
        self.session
            .emit(Payload::ToolResult(ToolResultData::finished(
                id,
                tool,
                outcome,
                duration.unwrap_or_default(),
                Vec::new(),
            )));
    }

    fn token_usage(&mut self, usage: &Value) {
        let count = |v: &Value, key: &str| v[key].as_u64().unwrap_or_default();
        let total = &usage["total"];
        self.thread_total = Usage {
            input_tokens: count(total, "inputTokens"),
            output_tokens: count(total, "outputTokens"),
            cache_read_tokens: count(total, "cachedInputTokens"),
            cache_creation_tokens: count(total, "cacheWriteInputTokens"),
            cost_usd: 0.0,
        };
        let minus = |a: u64, b: u64| a.saturating_sub(b);
        self.usage = Usage {
            input_tokens: minus(self.thread_total.input_tokens, self.base.input_tokens),
            output_tokens: minus(self.thread_total.output_tokens, self.base.output_tokens),
            cache_read_tokens: minus(
                self.thread_total.cache_read_tokens,
                self.base.cache_read_tokens,
            ),
            cache_creation_tokens: minus(
                self.thread_total.cache_creation_tokens,
                self.base.cache_creation_tokens,
            ),
            cost_usd: 0.0,
        };
        let last = &usage["last"];
        self.session.emit(Payload::Usage(UsageData {
            usage: self.usage,
            context_tokens: Some(count(last, "inputTokens") + count(last, "outputTokens")),
            context_window: usage["modelContextWindow"].as_u64(),
        }));
    }

    fn completed(&mut self, turn: &Value) -> Option<TurnEnd> {
        if let (Some(ours), Some(theirs)) = (&self.turn_id, turn["id"].as_str())
            && ours != theirs
        {
            tracing::debug!(turn = theirs, "a turn/completed for another turn");
            return None;
        }
        Some(match turn["status"].as_str() {
            Some("completed") => TurnEnd::Stop(StopReason::EndTurn),
            Some("interrupted") => TurnEnd::Stop(StopReason::Cancelled),
            _ => TurnEnd::Error(
                turn["error"]["message"]
                    .as_str()
                    .map(str::to_string)
                    .or_else(|| self.last_error.clone())
                    .unwrap_or_else(|| "codex: the turn failed".to_string()),
            ),
        })
    }
}

fn changes(item: &Value) -> &[Value] {
    item["changes"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;

/// The name corral gives a codex tool item, in its `tool_use` and its `tool_result` alike.
fn tool_name(item: &Value) -> String {
    match item["type"].as_str() {
        Some("commandExecution") => "shell".into(),
        Some("fileChange") => "write_file".into(),
        _ => item["tool"].as_str().unwrap_or("web_search").into(),
    }
}
