//! Lines as the real programs wrote them (external-clis.md; qwen-code 0.24.4 and copilot
//! 1.0.102 against a fake server), and hostile ones.

use super::*;
use serde_json::json;

fn texts(steps: &[Step]) -> Vec<(&str, bool)> {
    steps
        .iter()
        .filter_map(|s| match s {
            Step::Text { text, delta } => Some((text.as_str(), *delta)),
            _ => None,
        })
        .collect()
}

#[test]
fn qwen_lines_read_as_claude_stream_json() {
    let init = r#"{"type":"system","subtype":"init","session_id":"8ad6","cwd":"/w","tools":[]}"#;
    assert_eq!(
        line(Format::ClaudeStream, init),
        vec![Step::Session("8ad6".into())]
    );
    let answer = r#"{"type":"assistant","session_id":"8ad6","parent_tool_use_id":null,"message":{"role":"assistant","content":[{"type":"text","text":"FAKE_REPLY"}]}}"#;
    assert_eq!(
        texts(&line(Format::ClaudeStream, answer)),
        vec![("FAKE_REPLY", false)]
    );
    let tool = r#"{"type":"assistant","parent_tool_use_id":null,"message":{"content":[{"type":"tool_use","id":"t1","name":"run_shell_command","input":{"command":"ls"}}]}}"#;
    assert_eq!(
        line(Format::ClaudeStream, tool),
        vec![Step::ToolCall {
            id: "t1".into(),
            name: "run_shell_command".into(),
            input: json!({"command":"ls"})
        }]
    );
    let failed = r#"{"type":"result","subtype":"error_during_execution","session_id":"3af1","is_error":true,"usage":{"input_tokens":0,"output_tokens":0},"error":{"message":"No auth type is selected."}}"#;
    let steps = line(Format::ClaudeStream, failed);
    assert_eq!(steps[0], Step::Session("3af1".into()));
    assert!(
        matches!(&steps[1], Step::End { error: Some(e), .. } if e == "No auth type is selected.")
    );
    let ok = r#"{"type":"result","subtype":"success","is_error":false,"result":"hi","usage":{"input_tokens":20,"output_tokens":10}}"#;
    assert!(
        matches!(&line(Format::ClaudeStream, ok)[0], Step::End { error: None, usage } if usage.input_tokens == 20)
    );
    // A sub-agent's traffic is the sub-agent's.
    let sub = r#"{"type":"assistant","parent_tool_use_id":"t0","message":{"content":[{"type":"text","text":"inner"}]}}"#;
    assert!(line(Format::ClaudeStream, sub).is_empty());
}

#[test]
fn cursor_tool_calls_are_matched_by_call_id() {
    let started = r#"{"type":"tool_call","subtype":"started","call_id":"c1","tool_call":{"shellToolCall":{"args":{"command":"echo hi"}}}}"#;
    assert_eq!(
        line(Format::CursorStream, started),
        vec![Step::ToolCall {
            id: "c1".into(),
            name: "Bash".into(),
            input: json!({"command":"echo hi"})
        }]
    );
    let done = r#"{"type":"tool_call","subtype":"completed","call_id":"c1","tool_call":{"shellToolCall":{"args":{},"result":{"success":{"stdout":"hi\n","exitCode":0}}}}}"#;
    assert_eq!(
        line(Format::CursorStream, done),
        vec![Step::ToolResult {
            id: "c1".into(),
            output: Ok("hi\n".into())
        }]
    );
    let piece = r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"par"}]}}"#;
    assert_eq!(
        texts(&line(Format::CursorStream, piece)),
        vec![("par", true)]
    );
}

#[test]
fn gemini_stream_json_lines() {
    assert_eq!(
        line(
            Format::GeminiStream,
            r#"{"type":"init","session_id":"s1","model":"auto"}"#
        ),
        vec![Step::Session("s1".into())]
    );
    let piece = r#"{"type":"message","role":"assistant","content":"Hel","delta":true}"#;
    assert_eq!(
        texts(&line(Format::GeminiStream, piece)),
        vec![("Hel", true)]
    );
    // The prompt echoed back is not the answer.
    assert!(
        line(
            Format::GeminiStream,
            r#"{"type":"message","role":"user","content":"hi"}"#
        )
        .is_empty()
    );
    let failed = r#"{"type":"tool_result","tool_id":"g1","status":"error","output":"","error":{"type":"x","message":"denied"}}"#;
    assert_eq!(
        line(Format::GeminiStream, failed),
        vec![Step::ToolResult {
            id: "g1".into(),
            output: Err("denied".into())
        }]
    );
    let end =
        r#"{"type":"result","status":"success","stats":{"input_tokens":12,"output_tokens":4}}"#;
    assert!(
        matches!(&line(Format::GeminiStream, end)[0], Step::End { error: None, usage } if usage.output_tokens == 4)
    );
}

#[test]
fn opencode_parts_and_the_last_step() {
    let tool = r#"{"type":"tool_use","sessionID":"ses_1","part":{"type":"tool","tool":"bash","callID":"call_1","state":{"status":"completed","input":{"command":"echo hi-oc"},"output":"hi-oc\n"}}}"#;
    let steps = line(Format::OpencodeJson, tool);
    assert_eq!(steps[0], Step::Session("ses_1".into()));
    assert_eq!(
        steps[2],
        Step::ToolResult {
            id: "call_1".into(),
            output: Ok("hi-oc\n".into())
        }
    );
    let more = r#"{"type":"step_finish","sessionID":"ses_1","part":{"reason":"tool-calls","tokens":{"input":10,"output":5}}}"#;
    assert!(
        !line(Format::OpencodeJson, more)
            .iter()
            .any(|s| matches!(s, Step::End { .. }))
    );
    let last = r#"{"type":"step_finish","sessionID":"ses_1","part":{"reason":"stop","tokens":{"input":10,"output":5,"cache":{"read":2,"write":0}},"cost":0}}"#;
    assert!(
        line(Format::OpencodeJson, last)
            .iter()
            .any(|s| matches!(s, Step::End { error: None, usage } if usage.cache_read_tokens == 2))
    );
}

#[test]
fn copilot_events() {
    let delta = r#"{"type":"assistant.message_delta","data":{"messageId":"m","deltaContent":"FAKE"},"ephemeral":true}"#;
    assert_eq!(
        texts(&line(Format::CopilotJson, delta)),
        vec![("FAKE", true)]
    );
    let start = r#"{"type":"tool.execution_start","data":{"toolCallId":"call_1","toolName":"bash","arguments":{"command":"echo hi-cop"}}}"#;
    assert!(
        matches!(&line(Format::CopilotJson, start)[0], Step::ToolCall { name, .. } if name == "bash")
    );
    let done = r#"{"type":"tool.execution_complete","data":{"toolCallId":"call_1","success":true,"result":{"content":"hi-cop\n"}}}"#;
    assert_eq!(
        line(Format::CopilotJson, done),
        vec![Step::ToolResult {
            id: "call_1".into(),
            output: Ok("hi-cop\n".into())
        }]
    );
    let end = r#"{"type":"result","sessionId":"5e84","exitCode":0,"usage":{"premiumRequests":0}}"#;
    let steps = line(Format::CopilotJson, end);
    assert_eq!(steps[0], Step::Session("5e84".into()));
    assert!(matches!(&steps[1], Step::End { error: None, .. }));
}

#[test]
fn hostile_lines_are_errors_never_panics() {
    for format in [
        Format::ClaudeStream,
        Format::CursorStream,
        Format::GeminiStream,
        Format::OpencodeJson,
        Format::CopilotJson,
    ] {
        for text in [
            "not json",
            "[1,2]",
            "\"str\"",
            "{\"type\":5}",
            "{\"type\":\"result\",\"usage\":\"x\",\"stats\":[]}",
            "{\"type\":\"tool_call\",\"tool_call\":[]}",
            "{\"type\":\"tool_use\",\"part\":null}",
            "{\"type\":\"assistant\",\"message\":{\"content\":{}}}",
        ] {
            let steps = line(format, text);
            if !text.starts_with('{') {
                assert!(
                    matches!(&steps[..], [Step::Error(_)]),
                    "{format:?} {text}: {steps:?}"
                );
            }
        }
        assert!(line(format, "   ").is_empty());
    }
    assert_eq!(
        line(Format::PlainText, "just text"),
        vec![Step::Text {
            text: "just text\n".into(),
            delta: true
        }]
    );
}
