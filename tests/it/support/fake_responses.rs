//! The OpenAI Responses API on the fake model server (`POST /v1/responses`, SSE), as codex
//! calls it: the next queued [`Reply`] rendered as `response.*` events. Text is a `message`
//! item, reasoning a `reasoning` item with a summary, a tool call a `function_call` item
//! (codex's shell tool is `exec_command` with `{"cmd": …}`). A child of fake_model.rs, so it
//! shares its queue, request log and body writer.

use super::*;
use crate::support::reply::Step;

const RESPONSE_ID: &str = "resp_fake";

impl FakeModel {
    /// Bodies of `POST /v1/responses`, in order.
    pub fn responses_requests(&self) -> Vec<Value> {
        lock(&self.state)
            .requests
            .iter()
            .filter(|r| r.path == "/v1/responses")
            .map(|r| r.body.clone())
            .collect()
    }

    /// True once at least `n` Responses requests arrived; false on timeout.
    pub async fn wait_for_responses_requests(&self, n: usize, timeout: Duration) -> bool {
        self.wait_until(timeout, || self.responses_requests().len() >= n)
            .await
    }
}

/// `POST /v1/responses`.
pub(super) fn respond(state: &Shared, body: &Value, arrived: Instant) -> Response {
    let model = body["model"].as_str().unwrap_or(DEFAULT_MODEL).to_owned();
    let (reply, index) = {
        let mut inner = lock(state);
        let Some(reply) = inner.queue.pop_front() else {
            return json_response(
                500,
                &json!({"error": {"message": "fake model: no scripted reply left"}}),
            );
        };
        inner.chat_times.push((arrived, None));
        (reply, inner.chat_times.len() - 1)
    };
    let mut resp = if let Some((code, body)) = &reply.status {
        lock(state).chat_times[index].1 = Some(Instant::now());
        let mut r = text_response(*code, body);
        set_header(&mut r, "content-type", "application/json");
        r
    } else {
        let (tx, rx) = mpsc::channel::<Result<Bytes, io::Error>>(1);
        tokio::spawn(write_body(
            render(&reply, &model),
            reply.chunk_delay,
            tx,
            state.clone(),
            index,
        ));
        let stream = futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        });
        let mut r = Response::new(Body::from_stream(stream));
        set_header(&mut r, "content-type", "text/event-stream");
        set_header(&mut r, "cache-control", "no-cache");
        r
    };
    for (k, v) in &reply.headers {
        set_header(&mut resp, k, v);
    }
    resp
}

fn event(value: Value) -> Action {
    let kind = value["type"].as_str().unwrap_or("message").to_owned();
    Action::Send(Bytes::from(format!("event: {kind}\ndata: {value}\n\n")))
}

/// A text or reasoning item being streamed.
struct Open {
    reasoning: bool,
    id: String,
    index: usize,
    text: String,
}

impl Open {
    fn done(self, out: &mut Vec<Action>, items: &mut Vec<Value>) {
        let item = if self.reasoning {
            json!({"type": "reasoning", "id": self.id,
                   "summary": [{"type": "summary_text", "text": self.text}],
                   "content": [{"type": "reasoning_text", "text": self.text}],
                   "encrypted_content": null})
        } else {
            json!({"type": "message", "id": self.id, "role": "assistant", "status": "completed",
                   "content": [{"type": "output_text", "text": self.text, "annotations": []}]})
        };
        out.push(event(json!({"type": "response.output_item.done",
                              "output_index": self.index, "item": item})));
        items.push(item);
    }
}

/// The body as writer actions.
pub(super) fn render(reply: &Reply, model: &str) -> Vec<Action> {
    let response = |status: &str, output: &[Value]| {
        json!({"id": RESPONSE_ID, "object": "response", "created_at": 1_767_225_600,
               "status": status, "model": model, "output": output})
    };
    let mut out = vec![event(
        json!({"type": "response.created", "response": response("in_progress", &[])}),
    )];
    let mut items: Vec<Value> = Vec::new();
    let mut open: Option<Open> = None;
    let mut next_index = 0usize;
    for step in reply.steps() {
        let text_step = match step {
            Step::Text(t) => Some((false, t)),
            Step::Reasoning(t) => Some((true, t)),
            _ => None,
        };
        if let Some((reasoning, text)) = text_step {
            if open.as_ref().is_some_and(|o| o.reasoning != reasoning)
                && let Some(o) = open.take()
            {
                o.done(&mut out, &mut items);
            }
            let o = open.get_or_insert_with(|| {
                let index = next_index;
                next_index += 1;
                let (id, item) = if reasoning {
                    let id = format!("rs_{index}");
                    (
                        id.clone(),
                        json!({"type": "reasoning", "id": id, "summary": []}),
                    )
                } else {
                    let id = format!("msg_{index}");
                    (
                        id.clone(),
                        json!({"type": "message", "id": id, "role": "assistant",
                               "status": "in_progress", "content": []}),
                    )
                };
                out.push(event(json!({"type": "response.output_item.added",
                                      "output_index": index, "item": item})));
                if reasoning {
                    out.push(event(
                        json!({"type": "response.reasoning_summary_part.added",
                        "item_id": id, "output_index": index, "summary_index": 0,
                        "part": {"type": "summary_text", "text": ""}}),
                    ));
                }
                Open {
                    reasoning,
                    id,
                    index,
                    text: String::new(),
                }
            });
            o.text.push_str(text);
            out.push(event(if reasoning {
                json!({"type": "response.reasoning_summary_text.delta", "item_id": o.id,
                       "output_index": o.index, "summary_index": 0, "delta": text})
            } else {
                json!({"type": "response.output_text.delta", "item_id": o.id,
                       "output_index": o.index, "content_index": 0, "delta": text})
            }));
            continue;
        }
        if let Some(o) = open.take() {
            o.done(&mut out, &mut items);
        }
        match step {
            Step::ToolCall {
                id,
                name,
                fragments,
                ..
            } => {
                let index = next_index;
                next_index += 1;
                let item_id = format!("fc_{index}");
                out.push(event(
                    json!({"type": "response.output_item.added", "output_index": index,
                    "item": {"type": "function_call", "id": item_id, "call_id": id, "name": name,
                             "arguments": "", "status": "in_progress"}}),
                ));
                for f in fragments {
                    out.push(event(
                        json!({"type": "response.function_call_arguments.delta",
                        "item_id": item_id, "output_index": index, "delta": f}),
                    ));
                }
                let item = json!({"type": "function_call", "id": item_id, "call_id": id,
                    "name": name, "arguments": fragments.concat(), "status": "completed"});
                out.push(event(json!({"type": "response.output_item.done",
                                      "output_index": index, "item": item})));
                items.push(item);
            }
            // The Responses API has no finish reason; the end is `response.completed`.
            Step::Finish(_) => {}
            Step::Truncate => return out,
            Step::Keepalive => out.push(Action::Send(Bytes::from_static(b": keepalive\n\n"))),
            Step::Error(m) => {
                let mut failed = response("failed", &items);
                failed["error"] = json!({"code": "server_error", "message": m});
                out.push(event(
                    json!({"type": "response.failed", "response": failed}),
                ));
                return out;
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
            Step::Text(_) | Step::Reasoning(_) => {}
        }
    }
    if let Some(o) = open.take() {
        o.done(&mut out, &mut items);
    }
    let mut completed = response("completed", &items);
    let (input, output) = reply.usage_counts().unwrap_or((0, 0));
    completed["usage"] = json!({
        "input_tokens": input, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output, "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input + output});
    out.push(event(
        json!({"type": "response.completed", "response": completed}),
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(reply: &Reply) -> Vec<Value> {
        render(reply, "m")
            .into_iter()
            .filter_map(|a| match a {
                Action::Send(bytes) => {
                    let text = String::from_utf8(bytes.to_vec()).unwrap();
                    let data = text.lines().find_map(|l| l.strip_prefix("data: "))?;
                    serde_json::from_str(data).ok()
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn text_and_a_call_render_as_items_then_completed_with_usage() {
        let reply = Reply::new()
            .text("a")
            .text("b")
            .tool_call("call_1", "exec_command", r#"{"cmd":"ls"}"#)
            .usage(3, 4);
        let events = events(&reply);
        let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            types,
            [
                "response.created",
                "response.output_item.added",
                "response.output_text.delta",
                "response.output_text.delta",
                "response.output_item.done",
                "response.output_item.added",
                "response.function_call_arguments.delta",
                "response.output_item.done",
                "response.completed",
            ]
        );
        assert_eq!(events[4]["item"]["content"][0]["text"], "ab");
        let call = &events[7]["item"];
        assert_eq!(call["call_id"], "call_1");
        assert_eq!(call["arguments"], r#"{"cmd":"ls"}"#);
        let completed = &events[8]["response"];
        assert_eq!(completed["usage"]["total_tokens"], 7);
        assert_eq!(completed["output"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn an_error_fails_the_response_and_truncate_ends_early() {
        let failed = events(&Reply::new().text("x").error_mid_stream("boom"));
        let last = failed.last().unwrap();
        assert_eq!(last["type"], "response.failed");
        assert_eq!(last["response"]["error"]["message"], "boom");
        let cut = events(&Reply::new().text("x").truncate());
        assert!(cut.iter().all(|e| e["type"] != "response.completed"));
    }
}
