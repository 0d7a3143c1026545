//! The one way a finished call becomes a `tool_result`, for the native loop and every
//! backend: the record (`success`, `output` or `error`), and the update a client shows
//! (status, the output or `Error: …` as text, then whatever else the call returned).

use serde_json::{Value, json};

use super::{ToolCallStatus, ToolResultData, ToolResultRecord, ToolUpdate};

impl ToolResultData {
    /// A call that ended with `Ok(output)` or `Err(error)`; `more` follows the text in the
    /// update's content (images a tool returned).
    pub fn finished(
        id: &str,
        tool: &str,
        outcome: Result<String, String>,
        duration_ms: u64,
        more: Vec<Value>,
    ) -> Self {
        let mut content = vec![json!({"type": "content", "content": {
            "type": "text", "text": shown(&outcome)}})];
        content.extend(more);
        Self::with_content(id, tool, outcome, duration_ms, content)
    }

    /// The same with the update's content given whole (an ACP agent's own content blocks).
    pub fn with_content(
        id: &str,
        tool: &str,
        outcome: Result<String, String>,
        duration_ms: u64,
        content: Vec<Value>,
    ) -> Self {
        let success = outcome.is_ok();
        let (output, error) = match outcome {
            Ok(output) => (Some(output), None),
            Err(error) => (None, Some(error)),
        };
        ToolResultData {
            update: ToolUpdate {
                tool_call_id: id.to_string(),
                status: if success {
                    ToolCallStatus::Completed
                } else {
                    ToolCallStatus::Failed
                },
                content,
            },
            result: ToolResultRecord {
                tool_call_id: id.to_string(),
                tool: tool.to_string(),
                success,
                output,
                error,
                duration_ms,
            },
        }
    }
}

/// What the model and a client are shown of a call's outcome.
/// An image as a tool result's content block (ACP's shape).
pub fn image_content(data: &str, mime_type: &str) -> Value {
    json!({"type": "content", "content": {"type": "image", "data": data, "mimeType": mime_type}})
}

pub fn shown(outcome: &Result<String, String>) -> String {
    match outcome {
        Ok(output) => output.clone(),
        Err(error) => format!("Error: {error}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_is_shown_as_an_error_and_recorded_as_one() {
        let data = ToolResultData::finished("c1", "shell", Err("boom".into()), 7, Vec::new());
        assert_eq!(data.update.status, ToolCallStatus::Failed);
        assert_eq!(data.update.content[0]["content"]["text"], "Error: boom");
        assert_eq!(
            (data.result.success, data.result.output, data.result.error),
            (false, None, Some("boom".to_string()))
        );
        assert_eq!(
            (data.result.tool.as_str(), data.result.duration_ms),
            ("shell", 7)
        );
    }

    #[test]
    fn a_success_shows_its_output_then_what_else_it_returned() {
        let image = json!({"type": "content", "content": {"type": "image"}});
        let data =
            ToolResultData::finished("c2", "screenshot", Ok("ok".into()), 1, vec![image.clone()]);
        assert_eq!(data.update.status, ToolCallStatus::Completed);
        assert_eq!(data.update.content.len(), 2);
        assert_eq!(data.update.content[0]["content"]["text"], "ok");
        assert_eq!(data.update.content[1], image);
        assert_eq!(data.result.output.as_deref(), Some("ok"));
        assert_eq!(data.update.tool_call_id, data.result.tool_call_id);
    }
}
