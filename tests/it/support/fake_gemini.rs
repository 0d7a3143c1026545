//! Gemini API routes for the fake model server (what `gemini --acp` calls with
//! `GOOGLE_GEMINI_BASE_URL`): `POST /v1beta/models/{model}:streamGenerateContent?alt=sse` and
//! `:generateContent`, rendering the same scripted [`Reply`] queue as the other formats.
//!
//! Side calls that ask for JSON (`generationConfig.responseJsonSchema`, `responseSchema` or
//! `responseMimeType: application/json`: gemini's model router and next-speaker check) are
//! answered with JSON shaped by their schema and take nothing from the queue; the CLI retries
//! and hangs on anything else.

use std::io;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::{Map, Value, json};

use super::reply::{Reply, Scripted};

/// Whether a request path is one of these routes.
pub fn is_gemini_path(path: &str) -> bool {
    path.starts_with("/v1beta/")
}

/// Whether a recorded request is a scripted turn (not a JSON side call).
pub fn is_turn_request(path: &str, body: &Value) -> bool {
    (path.ends_with(":streamGenerateContent") || path.ends_with(":generateContent"))
        && !wants_json(body)
}

/// Answers one request; `next` takes the next scripted reply; `cancelled` is called when the
/// client drops a stream before its end (as `cancelled_streams` counts for the other formats).
pub fn handle(
    path: &str,
    body: &Value,
    next: impl FnOnce() -> Option<Reply>,
    cancelled: impl FnOnce() + Send + 'static,
) -> Response {
    let Some((_, action)) = path.rsplit_once(':') else {
        return json_response(
            404,
            &json!({"error": {"message": format!("no route {path}")}}),
        );
    };
    let model = path
        .trim_start_matches("/v1beta/models/")
        .split(':')
        .next()
        .unwrap_or("gemini")
        .to_owned();
    let stream = match action {
        "streamGenerateContent" => true,
        "generateContent" => false,
        "countTokens" => return json_response(200, &json!({"totalTokens": 10})),
        _ => {
            return json_response(
                404,
                &json!({"error": {"code": 404, "message": format!("fake gemini: no route {path}")}}),
            );
        }
    };
    if wants_json(body) {
        let schema = schema_of(body);
        let text = fill_schema(&schema).to_string();
        let chunk = chunk(
            &model,
            vec![json!({"text": text})],
            Some("STOP"),
            Some((10, 5)),
        );
        return if stream {
            sse(vec![Piece::Send(chunk)], cancelled)
        } else {
            json_response(200, &chunk)
        };
    }
    let Some(reply) = next() else {
        return json_response(
            500,
            &json!({"error": {"code": 500, "message": "fake model: no scripted reply left"}}),
        );
    };
    if let Some((code, text)) = &reply.status {
        let mut r = text_response(*code, text);
        r.headers_mut()
            .insert("content-type", HeaderValue::from_static("application/json"));
        return r;
    }
    let pieces = render(&reply, &model);
    if stream {
        sse(pieces, cancelled)
    } else {
        json_response(200, &merge(&pieces, &model))
    }
}

fn wants_json(body: &Value) -> bool {
    let config = &body["generationConfig"];
    config.get("responseJsonSchema").is_some()
        || config.get("responseSchema").is_some()
        || config["responseMimeType"] == "application/json"
}

fn schema_of(body: &Value) -> Value {
    let config = &body["generationConfig"];
    config
        .get("responseJsonSchema")
        .or_else(|| config.get("responseSchema"))
        .cloned()
        .unwrap_or(Value::Null)
}

/// A value that fits `schema`. The router's fields get what routes to the simple model;
/// an enum takes its first value (the next-speaker check's "user": the turn ends).
fn fill_schema(schema: &Value) -> Value {
    let kind = schema["type"]
        .as_str()
        .unwrap_or("object")
        .to_ascii_lowercase();
    if let Some(first) = schema["enum"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    match kind.as_str() {
        "string" => json!("simple"),
        "integer" | "number" => json!(1),
        "boolean" => json!(false),
        "array" => json!([]),
        _ => {
            let mut out = Map::new();
            if let Some(props) = schema["properties"].as_object() {
                for (name, sub) in props {
                    let value = match name.as_str() {
                        "complexity_reasoning" => json!("simple"),
                        "complexity_score" => json!(1),
                        _ => fill_schema(sub),
                    };
                    out.insert(name.clone(), value);
                }
            }
            if out.is_empty() && schema.is_null() {
                out.insert("complexity_reasoning".into(), json!("simple"));
                out.insert("complexity_score".into(), json!(1));
            }
            Value::Object(out)
        }
    }
}

enum Piece {
    Send(Value),
    Sleep(Duration),
    Fail,
}

fn chunk(model: &str, parts: Vec<Value>, finish: Option<&str>, usage: Option<(u64, u64)>) -> Value {
    let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    if let Some(finish) = finish {
        candidate["finishReason"] = json!(finish);
    }
    let mut c =
        json!({"candidates": [candidate], "modelVersion": model, "responseId": "fake-gemini"});
    if let Some((prompt, completion)) = usage {
        c["usageMetadata"] = json!({"promptTokenCount": prompt,
            "candidatesTokenCount": completion, "totalTokenCount": prompt + completion});
    }
    c
}

fn render(reply: &Reply, model: &str) -> Vec<Piece> {
    let usage = reply.usage_counts().unwrap_or((10, 5));
    let mut out = Vec::new();
    let mut finished = false;
    for step in reply.scripted() {
        match step {
            Scripted::Text(t) => out.push(Piece::Send(chunk(
                model,
                vec![json!({"text": t})],
                None,
                None,
            ))),
            Scripted::Reasoning(t) => out.push(Piece::Send(chunk(
                model,
                vec![json!({"text": t, "thought": true})],
                None,
                None,
            ))),
            Scripted::ToolCall {
                id,
                name,
                arguments,
            } => {
                let args: Value = serde_json::from_str(&arguments).unwrap_or(json!({}));
                out.push(Piece::Send(chunk(
                    model,
                    vec![json!({"functionCall": {"id": id, "name": name, "args": args}})],
                    None,
                    None,
                )));
            }
            Scripted::Finish(reason) => {
                let reason = match reason.as_str() {
                    "length" | "max_tokens" => "MAX_TOKENS",
                    _ => "STOP",
                };
                out.push(Piece::Send(chunk(model, vec![], Some(reason), Some(usage))));
                finished = true;
            }
            Scripted::Stall(d) => out.push(Piece::Sleep(d)),
            Scripted::Disconnect => {
                out.push(Piece::Fail);
                return out;
            }
            Scripted::Other => {}
        }
    }
    if !finished {
        // Gemini puts the finish reason and usage on the last chunk; an empty text part keeps
        // the chunk a valid candidate.
        out.push(Piece::Send(chunk(
            model,
            vec![json!({"text": ""})],
            Some("STOP"),
            Some(usage),
        )));
    }
    out
}

/// The non-streaming answer: all parts in one candidate.
fn merge(pieces: &[Piece], model: &str) -> Value {
    let mut parts = Vec::new();
    let mut finish = "STOP".to_owned();
    let mut usage = json!(null);
    for piece in pieces {
        if let Piece::Send(c) = piece {
            let candidate = &c["candidates"][0];
            for part in candidate["content"]["parts"]
                .as_array()
                .into_iter()
                .flatten()
            {
                if part["text"] != "" {
                    parts.push(part.clone());
                }
            }
            if let Some(f) = candidate["finishReason"].as_str() {
                finish = f.to_owned();
            }
            if !c["usageMetadata"].is_null() {
                usage = c["usageMetadata"].clone();
            }
        }
    }
    let mut c = chunk(model, parts, Some(&finish), None);
    c["usageMetadata"] = usage;
    c
}

fn sse(pieces: Vec<Piece>, cancelled: impl FnOnce() + Send + 'static) -> Response {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, io::Error>>(1);
    tokio::spawn(async move {
        for piece in pieces {
            match piece {
                Piece::Send(c) => {
                    if tx
                        .send(Ok(Bytes::from(format!("data: {c}\r\n\r\n"))))
                        .await
                        .is_err()
                    {
                        return cancelled();
                    }
                }
                Piece::Sleep(d) => {
                    tokio::select! {
                        () = tokio::time::sleep(d) => {}
                        () = tx.closed() => return cancelled(),
                    }
                }
                Piece::Fail => {
                    let _ = tx
                        .send(Err(io::Error::other("fake gemini: scripted disconnect")))
                        .await;
                    return;
                }
            }
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    let mut r = Response::new(Body::from_stream(stream));
    r.headers_mut().insert(
        "content-type",
        HeaderValue::from_static("text/event-stream"),
    );
    r
}

fn text_response(code: u16, body: &str) -> Response {
    let mut r = Response::new(Body::from(body.to_owned()));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r
}

fn json_response(code: u16, body: &Value) -> Response {
    let mut r = text_response(code, &body.to_string());
    r.headers_mut()
        .insert("content-type", HeaderValue::from_static("application/json"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_side_calls_get_schema_shaped_json() {
        let router = json!({"type": "object", "properties": {
            "complexity_reasoning": {"type": "string"}, "complexity_score": {"type": "integer"}}});
        assert_eq!(
            fill_schema(&router),
            json!({"complexity_reasoning": "simple", "complexity_score": 1})
        );
        let speaker = json!({"type": "OBJECT", "properties": {
            "reasoning": {"type": "STRING"}, "next_speaker": {"type": "STRING", "enum": ["user", "model"]}}});
        assert_eq!(
            fill_schema(&speaker),
            json!({"reasoning": "simple", "next_speaker": "user"})
        );
    }
}
