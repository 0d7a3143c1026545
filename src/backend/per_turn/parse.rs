//! A per-turn runtime's stdout lines, in one small vocabulary ([`Step`]) whatever the runtime:
//! seed 003's `parseLine` for gemini, qwen, copilot, cursor, opencode and antigravity.

use serde_json::Value;

use super::runtimes::Format;
use crate::event::Usage;

/// One thing a runtime said.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// The runtime's own session id, for the next turn's resume flag.
    Session(String),
    /// Answer text: a chunk of it (`delta`), or a whole message that replaces the chunks
    /// before it.
    Text {
        text: String,
        delta: bool,
    },
    Thinking(String),
    /// A tool call the agent makes (or made: the runtimes in this table decide themselves).
    ToolCall {
        id: String,
        name: String,
        input: Value,
    },
    ToolResult {
        id: String,
        output: Result<String, String>,
    },
    /// The turn is over. `error`: the runtime's own account of a failed turn.
    End {
        error: Option<String>,
        usage: Usage,
    },
    /// Something went wrong that did not end the turn.
    Error(String),
}

/// The steps of one stdout line. A line that is not what the format expects becomes an
/// [`Step::Error`] naming it, never a panic.
pub fn line(format: Format, text: &str) -> Vec<Step> {
    if format == Format::PlainText {
        return vec![Step::Text {
            text: format!("{text}\n"),
            delta: true,
        }];
    }
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Vec::new();
    }
    match serde_json::from_str(trimmed) {
        Ok(value @ Value::Object(_)) => object(format, &value),
        _ => {
            let shown: String = trimmed.chars().take(300).collect();
            vec![Step::Error(format!(
                "the agent wrote a line that is not a JSON object: {shown}"
            ))]
        }
    }
}

/// The steps of one JSON object the runtime wrote.
pub fn object(format: Format, value: &Value) -> Vec<Step> {
    match format {
        Format::ClaudeStream => claude_like(value, false),
        Format::CursorStream => claude_like(value, true),
        Format::GeminiStream => gemini(value),
        Format::OpencodeJson => opencode(value),
        Format::CopilotJson => copilot(value),
        Format::PiRpc => pi(value),
        Format::PlainText => Vec::new(),
    }
}

fn text_of(value: &Value, key: &str) -> String {
    value[key].as_str().unwrap_or_default().to_string()
}

fn count(value: &Value, key: &str) -> u64 {
    value[key].as_u64().unwrap_or_default()
}

/// A tool's output given as text, an array of text blocks, or anything else (shown as JSON).
fn output_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Array(items) => items
            .iter()
            .map(|item| match item["text"].as_str() {
                Some(text) => text.to_string(),
                None => output_text(item),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

/// claude's stream-json as qwen-code writes it, and cursor-agent's variant of it (whose
/// `assistant` lines are pieces of the answer, not whole messages).
fn claude_like(value: &Value, cursor: bool) -> Vec<Step> {
    let mut steps = Vec::new();
    if let Some(id) = value["session_id"].as_str().filter(|id| !id.is_empty())
        && matches!(value["type"].as_str(), Some("system" | "result"))
    {
        steps.push(Step::Session(id.to_string()));
    }
    // Sub-agent traffic stays inside the agent's own tool call.
    if !value["parent_tool_use_id"].is_null() {
        return steps;
    }
    match value["type"].as_str().unwrap_or_default() {
        "stream_event" => {
            let delta = &value["event"]["delta"];
            match delta["type"].as_str() {
                Some("text_delta") => steps.push(Step::Text {
                    text: text_of(delta, "text"),
                    delta: true,
                }),
                Some("thinking_delta") => steps.push(Step::Thinking(text_of(delta, "thinking"))),
                _ => {}
            }
        }
        "assistant" => {
            for block in value["message"]["content"].as_array().into_iter().flatten() {
                match block["type"].as_str().unwrap_or_default() {
                    "text" => steps.push(Step::Text {
                        text: text_of(block, "text"),
                        delta: cursor,
                    }),
                    "thinking" => steps.push(Step::Thinking(text_of(block, "thinking"))),
                    "tool_use" => steps.push(Step::ToolCall {
                        id: text_of(block, "id"),
                        name: text_of(block, "name"),
                        input: block["input"].clone(),
                    }),
                    _ => {}
                }
            }
        }
        "user" => {
            for block in value["message"]["content"].as_array().into_iter().flatten() {
                if block["type"] == "tool_result" {
                    let shown = output_text(&block["content"]);
                    steps.push(Step::ToolResult {
                        id: text_of(block, "tool_use_id"),
                        output: if block["is_error"] == true {
                            Err(shown)
                        } else {
                            Ok(shown)
                        },
                    });
                }
            }
        }
        "tool_call" => steps.extend(cursor_tool_call(value)),
        "result" => {
            let usage = &value["usage"];
            let failed = value["is_error"] == true
                || value["subtype"]
                    .as_str()
                    .is_some_and(|s| s.starts_with("error"));
            let error = failed.then(|| {
                let message = value["error"]["message"]
                    .as_str()
                    .or_else(|| value["result"].as_str())
                    .filter(|m| !m.is_empty());
                message.map_or_else(
                    || format!("the turn ended with {}", value["subtype"]),
                    str::to_string,
                )
            });
            steps.push(Step::End {
                error,
                usage: Usage {
                    input_tokens: count(usage, "input_tokens"),
                    output_tokens: count(usage, "output_tokens"),
                    cache_read_tokens: count(usage, "cache_read_input_tokens"),
                    cache_creation_tokens: count(usage, "cache_creation_input_tokens"),
                    cost_usd: value["total_cost_usd"].as_f64().unwrap_or_default(),
                },
            });
        }
        _ => {}
    }
    steps
}

/// cursor's `tool_call` lines: `{"subtype":"started"|"completed","call_id",
/// "tool_call":{"<kind>ToolCall":{"args":{…},"result":{"success":{…}}|{"error":{…}}}}}`.
fn cursor_tool_call(value: &Value) -> Vec<Step> {
    let id = text_of(value, "call_id");
    let Some((kind, call)) = value["tool_call"].as_object().and_then(|o| o.iter().next()) else {
        return Vec::new();
    };
    let name = match kind.trim_end_matches("ToolCall") {
        "shell" => "Bash",
        "read" => "Read",
        "write" | "edit" => "Write",
        "grep" => "Grep",
        "glob" => "Glob",
        "ls" => "LS",
        other => other,
    }
    .to_string();
    match value["subtype"].as_str() {
        Some("started") => vec![Step::ToolCall {
            id,
            name,
            input: call["args"].clone(),
        }],
        Some("completed") => {
            let result = &call["result"];
            let output = if let Some(ok) = result.get("success") {
                let text = ok["stdout"]
                    .as_str()
                    .or_else(|| ok["content"].as_str())
                    .or_else(|| ok["output"].as_str())
                    .map_or_else(|| ok.to_string(), str::to_string);
                Ok(text)
            } else {
                Err(output_text(
                    result
                        .get("error")
                        .map_or(result, |e| e.get("message").unwrap_or(e)),
                ))
            };
            vec![Step::ToolResult { id, output }]
        }
        _ => Vec::new(),
    }
}

/// gemini's `-o stream-json`.
fn gemini(value: &Value) -> Vec<Step> {
    match value["type"].as_str().unwrap_or_default() {
        "init" => value["session_id"]
            .as_str()
            .filter(|id| !id.is_empty())
            .map(|id| vec![Step::Session(id.to_string())])
            .unwrap_or_default(),
        "message" if value["role"] == "assistant" => vec![Step::Text {
            text: text_of(value, "content"),
            delta: value["delta"] == true,
        }],
        "thought" => vec![Step::Thinking(text_of(value, "content"))],
        "tool_use" => vec![Step::ToolCall {
            id: text_of(value, "tool_id"),
            name: text_of(value, "tool_name"),
            input: value["parameters"].clone(),
        }],
        "tool_result" => {
            let output = output_text(&value["output"]);
            vec![Step::ToolResult {
                id: text_of(value, "tool_id"),
                output: if value["status"] == "success" {
                    Ok(output)
                } else {
                    let error = value["error"]["message"]
                        .as_str()
                        .map_or(output, str::to_string);
                    Err(error)
                },
            }]
        }
        "error" => vec![Step::Error(
            value["message"]
                .as_str()
                .map_or_else(|| value.to_string(), str::to_string),
        )],
        "result" => {
            let stats = &value["stats"];
            let error = (value["status"] != "success").then(|| {
                value["error"]["message"].as_str().map_or_else(
                    || format!("gemini ended the turn with status {}", value["status"]),
                    str::to_string,
                )
            });
            vec![Step::End {
                error,
                usage: Usage {
                    input_tokens: count(stats, "input_tokens"),
                    output_tokens: count(stats, "output_tokens"),
                    cache_read_tokens: count(stats, "cached"),
                    ..Usage::default()
                },
            }]
        }
        _ => Vec::new(),
    }
}

/// `opencode run --format json`: one line per finished part. The turn's end is the process's
/// exit; a `step_finish` whose reason is not `tool-calls` is the last step.
fn opencode(value: &Value) -> Vec<Step> {
    let mut steps = Vec::new();
    if let Some(id) = value["sessionID"].as_str().filter(|id| !id.is_empty()) {
        steps.push(Step::Session(id.to_string()));
    }
    let part = &value["part"];
    match value["type"].as_str().unwrap_or_default() {
        "text" => steps.push(Step::Text {
            text: text_of(part, "text"),
            delta: true,
        }),
        "reasoning" => steps.push(Step::Thinking(text_of(part, "text"))),
        "tool_use" => {
            let state = &part["state"];
            let id = text_of(part, "callID");
            steps.push(Step::ToolCall {
                id: id.clone(),
                name: text_of(part, "tool"),
                input: state["input"].clone(),
            });
            match state["status"].as_str() {
                Some("completed") => steps.push(Step::ToolResult {
                    id,
                    output: Ok(output_text(&state["output"])),
                }),
                Some("error") => steps.push(Step::ToolResult {
                    id,
                    output: Err(output_text(&state["error"])),
                }),
                _ => {}
            }
        }
        "step_finish" if part["reason"] != "tool-calls" => {
            let tokens = &part["tokens"];
            steps.push(Step::End {
                error: None,
                usage: Usage {
                    input_tokens: count(tokens, "input"),
                    output_tokens: count(tokens, "output"),
                    cache_read_tokens: count(&tokens["cache"], "read"),
                    cache_creation_tokens: count(&tokens["cache"], "write"),
                    cost_usd: part["cost"].as_f64().unwrap_or_default(),
                },
            });
        }
        "error" => {
            let error = &value["error"];
            let message = error["data"]["message"]
                .as_str()
                .or_else(|| error["message"].as_str())
                .map_or_else(|| error.to_string(), str::to_string);
            steps.push(Step::End {
                error: Some(message),
                usage: Usage::default(),
            });
        }
        _ => {}
    }
    steps
}

/// copilot's `--output-format json`.
fn copilot(value: &Value) -> Vec<Step> {
    let data = &value["data"];
    match value["type"].as_str().unwrap_or_default() {
        "assistant.message_delta" => vec![Step::Text {
            text: text_of(data, "deltaContent"),
            delta: true,
        }],
        "assistant.message" => {
            let text = text_of(data, "content");
            if text.is_empty() {
                Vec::new()
            } else {
                vec![Step::Text { text, delta: false }]
            }
        }
        "assistant.reasoning_delta" => vec![Step::Thinking(text_of(data, "deltaContent"))],
        "tool.execution_start" => vec![Step::ToolCall {
            id: text_of(data, "toolCallId"),
            name: text_of(data, "toolName"),
            input: data["arguments"].clone(),
        }],
        "tool.execution_complete" => {
            let shown = output_text(&data["result"]["content"]);
            vec![Step::ToolResult {
                id: text_of(data, "toolCallId"),
                output: if data["success"] == true {
                    Ok(shown)
                } else {
                    Err(data["error"]["message"]
                        .as_str()
                        .map_or(shown, str::to_string))
                },
            }]
        }
        "session.error" => vec![Step::Error(
            data["message"]
                .as_str()
                .map_or_else(|| data.to_string(), str::to_string),
        )],
        "result" => {
            let mut steps = Vec::new();
            if let Some(id) = value["sessionId"].as_str().filter(|id| !id.is_empty()) {
                steps.push(Step::Session(id.to_string()));
            }
            let code = value["exitCode"].as_i64().unwrap_or_default();
            steps.push(Step::End {
                error: (code != 0).then(|| format!("copilot ended the turn with exit code {code}")),
                usage: Usage::default(),
            });
            steps
        }
        _ => Vec::new(),
    }
}

/// pi's RPC mode events (`pi --mode rpc`, its docs/rpc.md). Responses to commands are the
/// backend's, not steps.
fn pi(value: &Value) -> Vec<Step> {
    match value["type"].as_str().unwrap_or_default() {
        "message_update" => {
            let event = &value["assistantMessageEvent"];
            match event["type"].as_str().unwrap_or_default() {
                "text_delta" => vec![Step::Text {
                    text: text_of(event, "delta"),
                    delta: true,
                }],
                "thinking_delta" => vec![Step::Thinking(text_of(event, "delta"))],
                _ => Vec::new(),
            }
        }
        "tool_execution_start" => vec![Step::ToolCall {
            id: text_of(value, "toolCallId"),
            name: text_of(value, "toolName"),
            input: value["args"].clone(),
        }],
        "tool_execution_end" => {
            let shown = output_text(&value["result"]["content"]);
            vec![Step::ToolResult {
                id: text_of(value, "toolCallId"),
                output: if value["isError"] == true {
                    Err(shown)
                } else {
                    Ok(shown)
                },
            }]
        }
        "agent_end" => {
            let mut usage = Usage::default();
            let mut error = None;
            for message in value["messages"].as_array().into_iter().flatten() {
                if message["role"] != "assistant" {
                    continue;
                }
                let used = &message["usage"];
                usage.add(&Usage {
                    input_tokens: count(used, "input"),
                    output_tokens: count(used, "output"),
                    cache_read_tokens: count(used, "cacheRead"),
                    cache_creation_tokens: count(used, "cacheWrite"),
                    cost_usd: used["cost"]["total"].as_f64().unwrap_or_default(),
                });
                error = (message["stopReason"] == "error").then(|| {
                    message["errorMessage"]
                        .as_str()
                        .unwrap_or("pi's model request failed")
                        .to_string()
                });
            }
            vec![Step::End { error, usage }]
        }
        "extension_error" => vec![Step::Error(format!(
            "a pi extension failed: {}",
            value["error"].as_str().unwrap_or_default()
        ))],
        "response" if value["success"] == false => vec![Step::Error(format!(
            "pi refused {}: {}",
            value["command"].as_str().unwrap_or("a command"),
            value["error"].as_str().unwrap_or_default()
        ))],
        _ => Vec::new(),
    }
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
