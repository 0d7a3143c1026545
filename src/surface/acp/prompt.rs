//! An ACP prompt (content blocks) as corral's turn input: text, with resources inlined and
//! links named, plus images.

use serde_json::Value;

use crate::model::Image;

/// Text resources larger than this are cut (with a note) rather than flooding the context.
const MAX_RESOURCE_BYTES: usize = 256 * 1024;

pub fn from_blocks(blocks: &Value) -> Result<(String, Vec<Image>), String> {
    let blocks = blocks
        .as_array()
        .ok_or("prompt must be an array of content blocks")?;
    let mut text = String::new();
    let mut images = Vec::new();
    let mut push = |part: &str| {
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(part);
    };
    for block in blocks {
        match block["type"].as_str() {
            Some("text") => push(block["text"].as_str().unwrap_or_default()),
            Some("image") => {
                let (Some(data), Some(mime)) = (block["data"].as_str(), block["mimeType"].as_str())
                else {
                    return Err("an image block needs data and mimeType".into());
                };
                images.push(Image {
                    mime_type: mime.to_string(),
                    data_base64: data.to_string(),
                });
            }
            Some("resource_link") => {
                let uri = block["uri"].as_str().unwrap_or_default();
                push(&format!("[attached: {uri}]"));
            }
            Some("resource") => {
                let resource = &block["resource"];
                let uri = resource["uri"].as_str().unwrap_or_default();
                match resource["text"].as_str() {
                    Some(body) => {
                        let (body, cut) = if body.len() > MAX_RESOURCE_BYTES {
                            let mut end = MAX_RESOURCE_BYTES;
                            while !body.is_char_boundary(end) {
                                end -= 1;
                            }
                            (&body[..end], true)
                        } else {
                            (body, false)
                        };
                        let note = if cut { "\n[… cut]" } else { "" };
                        push(&format!("Contents of {uri}:\n```\n{body}{note}\n```"));
                    }
                    None => push(&format!("[attached binary resource: {uri}]")),
                }
            }
            Some(other) => {
                return Err(format!(
                    "content blocks of type {other:?} are not supported"
                ));
            }
            None => return Err("a content block has no type".into()),
        }
    }
    if text.trim().is_empty() && images.is_empty() {
        return Err("the prompt is empty".into());
    }
    Ok((text, images))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn blocks_become_text_and_images() {
        let (text, images) = from_blocks(&json!([
            {"type": "text", "text": "fix it"},
            {"type": "resource_link", "uri": "file:///r/a.rs", "name": "a.rs"},
            {"type": "resource", "resource": {"uri": "file:///r/b.rs", "text": "fn b() {}"}},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
        ]))
        .unwrap();
        assert!(text.starts_with("fix it\n\n[attached: file:///r/a.rs]"));
        assert!(text.contains("fn b() {}"));
        assert_eq!(images.len(), 1);
        assert!(from_blocks(&json!([])).is_err());
        assert!(from_blocks(&json!([{"type": "audio", "data": "x"}])).is_err());
        assert!(from_blocks(&json!("text")).is_err());
    }
}
