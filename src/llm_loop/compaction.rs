//! Keeping the conversation inside the context window: when the prompt passes a share of the
//! window, older messages are summarized by the model and replaced by the summary (the system
//! prompt and the most recent messages stay as they are).
//!
//! Compaction never runs on two consecutive steps: if one pass did not bring the prompt under
//! the threshold, the next step goes to the model as it is and the server's answer decides.

use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::model::{ChatRequest, Message, ModelClient, ModelError, ModelEvent, Role, TokenCounts};

const SUMMARY_INSTRUCTIONS: &str = "You write summaries of agent conversations so the agent can \
continue its work with less context. Keep: the user's goals and constraints, decisions made, \
files, paths, names and numbers exactly, tool results that matter, and what remains to do. \
Write plain prose or short bullet points, at most 400 words. Do not call tools.";

/// Per-message cap in the transcript sent for summarizing.
const TRANSCRIPT_MESSAGE_CHARS: usize = 4000;

/// Where the kept, recent part starts: at least `keep` messages from the end, moved back so
/// it never starts with tool results cut off from the call that produced them. Index 0 (the
/// system prompt) is never compacted; `None` when there is nothing older to compact.
pub fn split_point(history: &[Message], keep: usize) -> Option<usize> {
    let mut split = history.len().saturating_sub(keep).max(1);
    while split > 1 && history[split].role == Role::Tool {
        split -= 1;
    }
    (split > 1).then_some(split)
}

pub fn estimate_tokens(messages: &[Message]) -> u64 {
    messages.iter().map(Message::estimated_tokens).sum()
}

pub fn transcript(previous_summary: Option<&str>, messages: &[Message]) -> String {
    let mut text = String::new();
    if let Some(summary) = previous_summary {
        text.push_str("Summary of what came before:\n");
        text.push_str(summary);
        text.push_str("\n\n");
    }
    for message in messages {
        let who = match message.role {
            Role::System => "SYSTEM".to_string(),
            Role::User => "USER".to_string(),
            Role::Assistant => "ASSISTANT".to_string(),
            Role::Tool => format!(
                "TOOL RESULT ({})",
                message.tool_name.as_deref().unwrap_or("tool")
            ),
        };
        let body: String = message
            .content
            .chars()
            .take(TRANSCRIPT_MESSAGE_CHARS)
            .collect();
        text.push_str(&format!("{who}: {body}\n"));
        for call in &message.tool_calls {
            text.push_str(&format!(
                "ASSISTANT CALLS {}({})\n",
                call.name, call.arguments
            ));
        }
    }
    text
}

/// Asks the model for a summary. No tools are offered.
pub async fn summarize(
    client: &dyn ModelClient,
    transcript: String,
    max_tokens: u32,
    cancel: &CancellationToken,
) -> Result<(String, Option<TokenCounts>), ModelError> {
    let messages = [
        Message::system(SUMMARY_INSTRUCTIONS),
        Message::user(format!(
            "Summarize this conversation for your own later use:\n\n{transcript}"
        )),
    ];
    let request = ChatRequest {
        messages: &messages,
        tools: &[],
        tool_choice: None,
        max_tokens,
        temperature: None,
        // A summary needs no deliberation: the server's default, whatever the turn's effort.
        effort: None,
    };
    let quiet = |_| {};
    let mut stream = tokio::select! {
        _ = cancel.cancelled() => return Err(ModelError::Transport("cancelled".into())),
        s = client.stream(&request, &quiet) => s?,
    };
    let mut summary = String::new();
    let mut usage = None;
    loop {
        let next = tokio::select! {
            _ = cancel.cancelled() => return Err(ModelError::Transport("cancelled".into())),
            next = stream.next() => next,
        };
        match next {
            None | Some(Ok(ModelEvent::Finished { .. })) => break,
            Some(Ok(ModelEvent::Text(t))) => summary.push_str(&t),
            Some(Ok(ModelEvent::Usage(u))) => usage = Some(u),
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(e),
        }
    }
    let summary = summary.trim().to_string();
    if summary.is_empty() {
        return Err(ModelError::Malformed(
            "the model returned an empty summary".into(),
        ));
    }
    Ok((summary, usage))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ToolCall;

    #[test]
    fn split_keeps_tool_results_with_their_call() {
        let call = ToolCall {
            id: "c".into(),
            name: "read_file".into(),
            arguments: serde_json::json!({}),
        };
        let mut assistant = Message::assistant("");
        assistant.tool_calls.push(call.clone());
        let history = vec![
            Message::system("s"),
            Message::user("u1"),
            Message::assistant("a1"),
            Message::user("u2"),
            assistant,
            Message::tool_result(&call, "r"),
            Message::tool_result(&call, "r2"),
        ];
        assert_eq!(split_point(&history, 2), Some(4));
        assert_eq!(split_point(&history, 3), Some(4));
        assert_eq!(split_point(&history, 4), Some(3));
        assert_eq!(split_point(&history, 6), None);
        assert!(transcript(Some("old"), &history[1..4]).contains("USER: u2"));
    }
}
