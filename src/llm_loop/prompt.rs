//! The system prompt: where the agent is, what day it is, how to use its tools.

use std::path::Path;

use time::OffsetDateTime;

pub fn system_prompt(root: &Path, tool_names: &[&str], extra: Option<&str>) -> String {
    let date = OffsetDateTime::now_utc().date();
    let mut prompt = format!(
        "You are corral, an agent that completes tasks on the user's computer by calling tools.\n\
         Working directory: {root}\n\
         Operating system: {os} ({arch})\n\
         Date: {date}\n\
         Tools available: {tools}\n\
         \n\
         How to work:\n\
         - Look at files with the tools instead of guessing what they contain.\n\
         - Paths are relative to the working directory; nothing outside it can be reached.\n\
         - When the next step depends on a result, call one tool and wait for its result.\n\
         - When a tool fails, read the error, fix the arguments and try again, or say what blocked you.\n\
         - When the task is done, answer briefly in plain text without calling a tool.",
        root = root.display(),
        os = std::env::consts::OS,
        arch = std::env::consts::ARCH,
        tools = if tool_names.is_empty() {
            "none".to_string()
        } else {
            tool_names.join(", ")
        },
    );
    if let Some(extra) = extra.map(str::trim).filter(|e| !e.is_empty()) {
        prompt.push_str("\n\nAdditional instructions:\n");
        prompt.push_str(extra);
    }
    prompt
}

/// The system prompt with a compaction summary appended.
pub fn with_summary(base: &str, summary: &str) -> String {
    format!("{base}\n\n# Summary of the earlier conversation\n{summary}")
}
