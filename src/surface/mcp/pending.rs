//! `agent_pending`'s answer: the open requests as JSON, and for each desktop action its
//! marked screenshot as an MCP image block, so a client that shows images (an editor, an
//! agent that looks) sees where the click lands before it approves.
//!
//! The image's base64 is not repeated inside the JSON text (a caller that is a model would
//! read ~100k tokens of it): there `desktop.image` names the content block that holds it.
//! Only a real PNG or JPEG becomes an image block (`desktop_preview::checked_image`).

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};

use crate::event::PermissionRequest;
use crate::surface::desktop_preview::checked_image;

pub fn pending_result(agent_id: &str, pending: &[PermissionRequest]) -> CallToolResult {
    let mut listed = Vec::with_capacity(pending.len());
    let mut images = Vec::new();
    for request in pending {
        let mut entry = json!(request);
        if let Some(desktop) = &request.preview.desktop {
            let image = match checked_image(desktop) {
                Some(Ok(image)) => {
                    // Block 0 is the JSON; each image follows its caption.
                    let block = 2 + 2 * images.len();
                    images.push((
                        request.request_id.as_str(),
                        desktop.description.as_str(),
                        image,
                    ));
                    json!({"mime_type": image.mime_type, "content_block": block})
                }
                Some(Err(refused)) => json!({"refused": refused.to_string()}),
                None => Value::Null,
            };
            if image.is_null() {
                if let Some(desktop) = entry.get_mut("desktop").and_then(Value::as_object_mut) {
                    desktop.remove("image");
                }
            } else {
                entry["desktop"]["image"] = image;
            }
        }
        listed.push(entry);
    }
    let mut content = vec![ContentBlock::text(
        json!({"agent_id": agent_id, "pending": listed}).to_string(),
    )];
    for (request_id, description, image) in images {
        content.push(ContentBlock::text(format!(
            "{request_id}: the screen with the target marked: {description}"
        )));
        content.push(ContentBlock::image(image.data_base64, image.mime_type));
    }
    CallToolResult::success(content)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::DesktopPreview;
    use crate::surface::desktop_preview::tests::png_base64;

    fn desktop(request_id: &str, mime_type: &str, data: &str) -> PermissionRequest {
        let mut request = PermissionRequest::sample("computer", json!({"action": "left_click"}));
        request.request_id = request_id.into();
        request.preview.desktop = Some(Box::new(DesktopPreview {
            action: "left_click".into(),
            description: format!("left click for {request_id}"),
            point: Some([1, 2]),
            image: Some(crate::event::PreviewImage {
                mime_type: mime_type.into(),
                data_base64: data.into(),
            }),
            ..DesktopPreview::default()
        }));
        request
    }

    #[test]
    fn each_desktop_request_brings_its_screenshot_as_an_image_block() {
        let png = png_base64();
        let pending = [
            PermissionRequest::sample("shell", json!({"command": "ls"})),
            desktop("perm_a", "image/png", &png),
            desktop("perm_b", "text/html", "PHNjcmlwdD4="),
            desktop("perm_c", "image/png", &png),
        ];
        let result = pending_result("a1", &pending);
        let wire = serde_json::to_value(&result).unwrap();
        let content = wire["content"].as_array().unwrap();
        assert_eq!(content.len(), 5, "{wire}");
        let listed: Value = serde_json::from_str(content[0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(listed["agent_id"], "a1");
        let entries = listed["pending"].as_array().unwrap();
        assert_eq!(entries[0]["tool"], "shell");
        assert!(entries[0].get("desktop").is_none());
        // The JSON names the block; the base64 is not in the text.
        assert_eq!(entries[1]["desktop"]["image"]["content_block"], 2);
        assert_eq!(entries[1]["desktop"]["point"], json!([1, 2]));
        assert_eq!(entries[3]["desktop"]["image"]["content_block"], 4);
        assert!(!content[0]["text"].as_str().unwrap().contains(&png));
        // Attack: HTML called an image is refused, said so, never sent as one.
        assert!(
            entries[2]["desktop"]["image"]["refused"]
                .as_str()
                .unwrap()
                .contains("text/html")
        );
        assert_eq!(content[1]["type"], "text");
        assert!(content[1]["text"].as_str().unwrap().starts_with("perm_a: "));
        assert_eq!(content[2]["type"], "image");
        assert_eq!(content[2]["mimeType"], "image/png");
        assert_eq!(content[2]["data"], png.as_str());
        assert!(content[3]["text"].as_str().unwrap().starts_with("perm_c: "));
        assert_eq!(content[4]["type"], "image");
    }
}
