//! A scripted model reply: a list of steps, rendered either as Ollama NDJSON (`/api/chat`) or
//! as OpenAI chat-completion SSE (`/v1/chat/completions`). See wire-formats.md §1–3 and §9.

use std::time::Duration;

use axum::body::Bytes;
use serde_json::{Map, Value, json};

/// Fixed values so test output is deterministic.
const OPENAI_ID: &str = "chatcmpl-fake";
const CREATED: u64 = 1_767_225_600;
const CREATED_AT: &str = "2026-01-01T00:00:00.000000Z";

/// Which wire format a chat request asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Ollama,
    OpenAi,
}

#[derive(Clone, Debug)]
pub(super) enum Step {
    Text(String),
    Reasoning(String),
    ToolCall {
        id: String,
        name: String,
        fragments: Vec<String>,
        split: bool,
    },
    Finish(String),
    Truncate,
    Keepalive,
    Error(String),
    Garbage(String),
    Stall(Duration),
    Disconnect,
    /// Bytes written as they are, in either format.
    Raw(Vec<u8>),
    /// These bytes again and again until the client goes away.
    Endless(Vec<u8>),
}

/// What the writer task does, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Write and flush one body chunk.
    Send(Bytes),
    /// Sleep (a stall); the client may go away meanwhile.
    Sleep(Duration),
    /// Abort the body with an io error: hyper drops the connection without a clean end.
    Fail,
    /// Write this chunk until the client goes away.
    Repeat(Bytes),
}

/// Builder for one scripted reply. Each chat request takes the next queued reply.
#[derive(Clone, Debug, Default)]
pub struct Reply {
    steps: Vec<Step>,
    reasoning_field: Option<String>,
    usage: Option<(u64, u64)>,
    no_done: bool,
    pub(crate) status: Option<(u16, String)>,
    /// The streamed body goes out under this status instead of 200.
    pub(crate) stream_status: Option<u16>,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) chunk_delay: Option<Duration>,
    /// Taken only by a chat request whose body contains this (parallel sessions on one fake).
    pub(crate) only_for: Option<String>,
}

impl Reply {
    /// Only a chat request whose body contains `needle` takes this reply; the others skip it
    /// (and take the first reply in the queue that is theirs).
    pub fn only_for(mut self, needle: &str) -> Reply {
        self.only_for = Some(needle.to_owned());
        self
    }

    pub fn new() -> Reply {
        Reply::default()
    }

    fn step(mut self, step: Step) -> Reply {
        self.steps.push(step);
        self
    }

    /// OpenAI: `delta.content`; Ollama: `message.content`.
    pub fn text(self, text: &str) -> Reply {
        self.step(Step::Text(text.to_owned()))
    }

    /// OpenAI: `delta.reasoning_content` (or the field set by [`Reply::reasoning_field`]);
    /// Ollama: `message.thinking`.
    pub fn reasoning(self, text: &str) -> Reply {
        self.step(Step::Reasoning(text.to_owned()))
    }

    /// OpenAI only: the delta field carrying reasoning, e.g. `"reasoning"` (vLLM, mlx, Ollama /v1).
    pub fn reasoning_field(mut self, field: &str) -> Reply {
        self.reasoning_field = Some(field.to_owned());
        self
    }

    /// A whole tool call in one chunk/line. `arguments` is a JSON text.
    pub fn tool_call(self, id: &str, name: &str, arguments: &str) -> Reply {
        self.step(Step::ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            fragments: vec![arguments.to_owned()],
            split: false,
        })
    }

    /// OpenAI: a head chunk (id, type, name, arguments "") then one chunk per fragment.
    /// Ollama: one line with the joined arguments as an object (a string if not valid JSON).
    pub fn tool_call_split(self, id: &str, name: &str, fragments: &[&str]) -> Reply {
        self.step(Step::ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            fragments: fragments.iter().map(|f| (*f).to_owned()).collect(),
            split: true,
        })
    }

    /// OpenAI: a final `choices: []` chunk with `usage`; Ollama: counts on the done line.
    pub fn usage(mut self, prompt: u64, completion: u64) -> Reply {
        self.usage = Some((prompt, completion));
        self
    }

    /// OpenAI: empty delta + `finish_reason`; Ollama: the `done:true` line with `done_reason`.
    /// Without it a finish is added at the end ("stop", or "tool_calls" for OpenAI after a tool
    /// call) unless the reply uses `disconnect`, `no_done` or `truncate`.
    pub fn finish(self, reason: &str) -> Reply {
        self.step(Step::Finish(reason.to_owned()))
    }

    /// OpenAI: omit `data: [DONE]` (an explicit finish chunk is still sent);
    /// Ollama: omit the `done:true` line.
    pub fn no_done(mut self) -> Reply {
        self.no_done = true;
        self
    }

    /// End the body cleanly here: no finish, no usage, no `[DONE]`/done line.
    pub fn truncate(self) -> Reply {
        self.step(Step::Truncate)
    }

    /// OpenAI: an SSE comment `: keepalive 1/2`; Ollama: nothing.
    pub fn keepalive(self) -> Reply {
        self.step(Step::Keepalive)
    }

    /// OpenAI: `data: {"error":{…}}`; Ollama: an `{"error":…}` line. HTTP status stays 200.
    pub fn error_mid_stream(self, message: &str) -> Reply {
        self.step(Step::Error(message.to_owned()))
    }

    /// Raw text as a payload: OpenAI `data: <text>`; Ollama `<text>` as a line.
    pub fn garbage(self, text: &str) -> Reply {
        self.step(Step::Garbage(text.to_owned()))
    }

    /// Sleep before the next step.
    pub fn stall(self, duration: Duration) -> Reply {
        self.step(Step::Stall(duration))
    }

    /// Abort the connection mid-body.
    pub fn disconnect(self) -> Reply {
        self.step(Step::Disconnect)
    }

    /// Reply with this HTTP status and JSON body instead of a stream.
    pub fn status(mut self, code: u16, body: &str) -> Reply {
        self.status = Some((code, body.to_owned()));
        self
    }

    /// Bytes written as they are (invalid UTF-8, odd framing), in either format.
    pub fn raw(self, bytes: &[u8]) -> Reply {
        self.step(Step::Raw(bytes.to_vec()))
    }

    /// `bytes` written again and again until the client goes away; nothing follows.
    pub fn endless(self, bytes: &[u8]) -> Reply {
        self.step(Step::Endless(bytes.to_vec()))
    }

    /// Stream the body under HTTP `code` (an error reply whose body never ends, say).
    pub fn stream_status(mut self, code: u16) -> Reply {
        self.stream_status = Some(code);
        self
    }

    /// An extra response header.
    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Sleep between every written chunk.
    pub fn chunk_delay(mut self, delay: Duration) -> Reply {
        self.chunk_delay = Some(delay);
        self
    }

    /// `n` text steps of `text`.
    pub fn many_text_chunks(mut self, n: usize, text: &str) -> Reply {
        self.steps
            .extend(std::iter::repeat_n(Step::Text(text.to_owned()), n));
        self
    }

    fn has_tool_call(&self) -> bool {
        self.steps
            .iter()
            .any(|s| matches!(s, Step::ToolCall { .. }))
    }

    /// The body as writer actions, for `model` (echoed from the request).
    pub fn render(&self, format: Format, model: &str) -> Vec<Action> {
        match format {
            Format::OpenAi => self.render_openai(model),
            Format::Ollama => self.render_ollama(model),
        }
    }

    fn render_openai(&self, model: &str) -> Vec<Action> {
        let chunk = |delta: Value, finish: Option<&str>| {
            let mut c = json!({
                "id": OPENAI_ID, "object": "chat.completion.chunk", "created": CREATED, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            });
            if self.usage.is_some() {
                c["usage"] = Value::Null;
            }
            Action::Send(Bytes::from(format!("data: {c}\n\n")))
        };
        let reasoning_field = self
            .reasoning_field
            .as_deref()
            .unwrap_or("reasoning_content");
        let mut out = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
        let mut tool_index = 0;
        let mut finished = false;
        for step in &self.steps {
            match step {
                Step::Text(t) => out.push(chunk(json!({ "content": t }), None)),
                Step::Reasoning(t) => out.push(chunk(json!({ reasoning_field: t }), None)),
                Step::ToolCall {
                    id,
                    name,
                    fragments,
                    split,
                } => {
                    let head_args = if *split {
                        String::new()
                    } else {
                        fragments.concat()
                    };
                    out.push(chunk(
                        json!({"tool_calls": [{"index": tool_index, "id": id, "type": "function",
                            "function": {"name": name, "arguments": head_args}}]}),
                        None,
                    ));
                    if *split {
                        for f in fragments {
                            out.push(chunk(
                                json!({"tool_calls": [{"index": tool_index, "function": {"arguments": f}}]}),
                                None,
                            ));
                        }
                    }
                    tool_index += 1;
                }
                Step::Finish(reason) => {
                    out.push(chunk(json!({}), Some(reason)));
                    finished = true;
                }
                Step::Truncate => return out,
                Step::Keepalive => {
                    out.push(Action::Send(Bytes::from_static(b": keepalive 1/2\n\n")))
                }
                Step::Error(m) => {
                    let e = json!({"error": {"message": m, "type": "server_error"}});
                    out.push(Action::Send(Bytes::from(format!("data: {e}\n\n"))));
                }
                Step::Garbage(g) => out.push(Action::Send(Bytes::from(format!("data: {g}\n\n")))),
                Step::Raw(bytes) => out.push(Action::Send(Bytes::from(bytes.clone()))),
                Step::Endless(bytes) => {
                    out.push(Action::Repeat(Bytes::from(bytes.clone())));
                    return out;
                }
                Step::Stall(d) => out.push(Action::Sleep(*d)),
                Step::Disconnect => {
                    out.push(Action::Fail);
                    return out;
                }
            }
        }
        if !finished && !self.no_done {
            let reason = if self.has_tool_call() {
                "tool_calls"
            } else {
                "stop"
            };
            out.push(chunk(json!({}), Some(reason)));
        }
        if let Some((prompt, completion)) = self.usage {
            let u = json!({
                "id": OPENAI_ID, "object": "chat.completion.chunk", "created": CREATED, "model": model,
                "choices": [],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                          "total_tokens": prompt + completion},
            });
            out.push(Action::Send(Bytes::from(format!("data: {u}\n\n"))));
        }
        if !self.no_done {
            out.push(Action::Send(Bytes::from_static(b"data: [DONE]\n\n")));
        }
        out
    }

    fn render_ollama(&self, model: &str) -> Vec<Action> {
        let line = |v: Value| Action::Send(Bytes::from(format!("{v}\n")));
        let msg = |message: Value| {
            line(
                json!({"model": model, "created_at": CREATED_AT, "message": message, "done": false}),
            )
        };
        let done = |reason: &str| line(self.ollama_done_line(model, reason));
        let mut out = Vec::new();
        let mut tool_index = 0;
        let mut finished = false;
        for step in &self.steps {
            match step {
                Step::Text(t) => out.push(msg(json!({"role": "assistant", "content": t}))),
                Step::Reasoning(t) => {
                    out.push(msg(
                        json!({"role": "assistant", "content": "", "thinking": t}),
                    ));
                }
                Step::ToolCall {
                    id,
                    name,
                    fragments,
                    ..
                } => {
                    let joined = fragments.concat();
                    let args =
                        serde_json::from_str::<Value>(&joined).unwrap_or(Value::String(joined));
                    out.push(msg(json!({"role": "assistant", "content": "", "tool_calls": [
                        {"id": id, "function": {"index": tool_index, "name": name, "arguments": args}}]})));
                    tool_index += 1;
                }
                Step::Finish(reason) => {
                    if !self.no_done {
                        out.push(done(reason));
                    }
                    finished = true;
                }
                Step::Truncate => return out,
                Step::Keepalive => {}
                Step::Error(m) => out.push(line(json!({ "error": m }))),
                Step::Garbage(g) => out.push(Action::Send(Bytes::from(format!("{g}\n")))),
                Step::Raw(bytes) => out.push(Action::Send(Bytes::from(bytes.clone()))),
                Step::Endless(bytes) => {
                    out.push(Action::Repeat(Bytes::from(bytes.clone())));
                    return out;
                }
                Step::Stall(d) => out.push(Action::Sleep(*d)),
                Step::Disconnect => {
                    out.push(Action::Fail);
                    return out;
                }
            }
        }
        if !finished && !self.no_done {
            out.push(done("stop"));
        }
        out
    }

    fn ollama_done_line(&self, model: &str, reason: &str) -> Value {
        let mut m = Map::new();
        m.insert("model".into(), json!(model));
        m.insert("created_at".into(), json!(CREATED_AT));
        m.insert(
            "message".into(),
            json!({"role": "assistant", "content": ""}),
        );
        m.insert("done".into(), json!(true));
        m.insert("done_reason".into(), json!(reason));
        m.insert("total_duration".into(), json!(4_883_583_458_u64));
        m.insert("load_duration".into(), json!(1_334_875_u64));
        if let Some((prompt, _)) = self.usage {
            m.insert("prompt_eval_count".into(), json!(prompt));
        }
        m.insert("prompt_eval_duration".into(), json!(342_546_000_u64));
        if let Some((_, completion)) = self.usage {
            m.insert("eval_count".into(), json!(completion));
        }
        m.insert("eval_duration".into(), json!(4_535_599_000_u64));
        Value::Object(m)
    }
}

/// For renderers of other wire formats (fake_responses.rs).
impl Reply {
    pub(super) fn steps(&self) -> &[Step] {
        &self.steps
    }
}

/// One step of a script as plain data, for wire formats rendered in their own files.
#[derive(Clone, Debug, PartialEq)]
pub enum Scripted {
    Text(String),
    Reasoning(String),
    /// `arguments` is the JSON text (fragments joined).
    ToolCall {
        id: String,
        name: String,
        arguments: String,
    },
    Finish(String),
    Stall(Duration),
    Disconnect,
    /// A step the format has no equivalent for (keepalives, garbage, mid-stream errors).
    Other,
}

impl Reply {
    /// The steps, in order.
    pub fn scripted(&self) -> Vec<Scripted> {
        self.steps
            .iter()
            .map(|step| match step {
                Step::Text(t) => Scripted::Text(t.clone()),
                Step::Reasoning(t) => Scripted::Reasoning(t.clone()),
                Step::ToolCall {
                    id,
                    name,
                    fragments,
                    ..
                } => Scripted::ToolCall {
                    id: id.clone(),
                    name: name.clone(),
                    arguments: fragments.concat(),
                },
                Step::Finish(reason) => Scripted::Finish(reason.clone()),
                Step::Stall(d) => Scripted::Stall(*d),
                Step::Disconnect => Scripted::Disconnect,
                _ => Scripted::Other,
            })
            .collect()
    }

    /// `(prompt, completion)` tokens set with [`Reply::usage`].
    pub fn usage_counts(&self) -> Option<(u64, u64)> {
        self.usage
    }
}
