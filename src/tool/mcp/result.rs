//! A `tools/call` result as the model sees it: content blocks mapped to corral's text and
//! images, read from the wire shape (so every protocol revision maps the same way).

use serde_json::Value;

use crate::model::Image;
use crate::tool::{ToolError, ToolOutput};

/// Images beyond this many in one result are named, not passed on: each costs the model a
/// large part of its window.
const MAX_IMAGES: usize = 4;
/// An image (base64) larger than this is named, not passed on.
const MAX_IMAGE_BASE64: usize = 8 * 1024 * 1024;

/// Maps a result (`content`, `structuredContent`, `isError`) to a tool outcome. Text is cut
/// to the tool's cap later, like a built-in tool's; `isError` is a tool error the model sees.
pub fn map_result(result: &Value) -> Result<ToolOutput, ToolError> {
    let mut text: Vec<String> = Vec::new();
    let mut images = Vec::new();
    let blocks = result
        .get("content")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for block in blocks {
        map_block(block, &mut text, &mut images);
    }
    if let Some(structured) = result.get("structuredContent").filter(|v| !v.is_null()) {
        let rendered = structured.to_string();
        // Servers are asked to repeat structured content as text; said once is enough.
        let repeated = text
            .iter()
            .any(|t| serde_json::from_str::<Value>(t).is_ok_and(|parsed| parsed == *structured));
        if !repeated {
            text.push(format!("structured content: {rendered}"));
        }
    }
    let text = text.join("\n");
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        let message = if text.is_empty() {
            "the tool reported an error and said nothing more".to_string()
        } else {
            text
        };
        return Err(ToolError::Failed(message));
    }
    Ok(ToolOutput {
        text,
        images,
        recorded: Vec::new(),
    })
}

fn map_block(block: &Value, text: &mut Vec<String>, images: &mut Vec<Image>) {
    let field = |name: &str| block.get(name).and_then(Value::as_str).unwrap_or_default();
    match field("type") {
        "text" => text.push(field("text").to_string()),
        "image" => {
            let mime = field("mimeType");
            let data = field("data");
            if images.len() >= MAX_IMAGES || data.len() > MAX_IMAGE_BASE64 {
                text.push(format!(
                    "[an image ({mime}, {} bytes of base64) was left out: too many or too large]",
                    data.len()
                ));
            } else if !mime.starts_with("image/") || data.is_empty() {
                text.push(format!("[an image block without usable data ({mime:?})]"));
            } else {
                images.push(Image {
                    mime_type: mime.to_string(),
                    data_base64: data.to_string(),
                });
            }
        }
        "audio" => text.push(format!(
            "[audio ({}), {} bytes of base64, not shown]",
            field("mimeType"),
            field("data").len()
        )),
        "resource_link" => {
            let mut line = format!("resource link: {}", field("uri"));
            for (label, key) in [("name", "name"), ("type", "mimeType")] {
                let value = field(key);
                if !value.is_empty() {
                    line.push_str(&format!(" ({label}: {value})"));
                }
            }
            let description = field("description");
            if !description.is_empty() {
                line.push_str(&format!(" — {description}"));
            }
            text.push(line);
        }
        "resource" => {
            let resource = block.get("resource").unwrap_or(&Value::Null);
            let get = |name: &str| resource.get(name).and_then(Value::as_str);
            let uri = get("uri").unwrap_or_default();
            let mime = get("mimeType").unwrap_or("unknown type");
            match (get("text"), get("blob")) {
                (Some(body), _) => text.push(format!("resource {uri} ({mime}):\n{body}")),
                (None, Some(blob)) => text.push(format!(
                    "resource {uri} ({mime}): {} bytes of base64 binary data, not shown",
                    blob.len()
                )),
                (None, None) => text.push(format!("resource {uri} ({mime}), empty")),
            }
        }
        other => text.push(format!("[a content block of unknown type {other:?}]")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_block_type_maps_and_is_error_is_a_tool_error() {
        let out = map_result(&json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
            {"type": "resource_link", "uri": "test://static/resource/1", "name": "Resource 1",
             "mimeType": "text/plain"},
            {"type": "resource", "resource": {"uri": "test://x", "mimeType": "text/plain",
             "text": "inside"}},
            {"type": "resource", "resource": {"uri": "test://b", "blob": "AAAA"}},
            {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
            {"type": "weird"}
        ]}))
        .unwrap();
        assert_eq!(out.images.len(), 1);
        for want in [
            "hello",
            "resource link: test://static/resource/1 (name: Resource 1) (type: text/plain)",
            "resource test://x (text/plain):\ninside",
            "4 bytes of base64 binary data",
            "[audio (audio/wav)",
            "unknown type \"weird\"",
        ] {
            assert!(out.text.contains(want), "{want} in {}", out.text);
        }
        let err = map_result(&json!({"content": [{"type": "text", "text": "boom"}],
                                      "isError": true}))
        .unwrap_err();
        assert_eq!(err, ToolError::Failed("boom".into()));
    }

    #[test]
    fn structured_content_is_said_once() {
        let structured = json!({"temperature": 22.5});
        let repeated = map_result(&json!({"content": [{"type": "text",
            "text": structured.to_string()}], "structuredContent": structured}))
        .unwrap();
        assert_eq!(repeated.text, structured.to_string());
        let alone = map_result(&json!({"content": [], "structuredContent": structured})).unwrap();
        assert_eq!(alone.text, format!("structured content: {structured}"));
    }

    #[test]
    fn too_many_images_are_named_not_passed() {
        let image = json!({"type": "image", "data": "AAAA", "mimeType": "image/png"});
        let out = map_result(&json!({"content": vec![image; 6]})).unwrap();
        assert_eq!(out.images.len(), MAX_IMAGES);
        assert_eq!(out.text.matches("left out").count(), 2);
    }
}
