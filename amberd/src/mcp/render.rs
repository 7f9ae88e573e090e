//! MCP results as the text a model reads: tool results (text, images and audio as a
//! placeholder line, embedded resources, resource links, structuredContent), resource
//! contents and prompt messages.

use rmcp::model::{CallToolResult, ContentBlock, GetPromptResult, ResourceContents, Role};

/// A tool result's content blocks, one after another; `structuredContent` is added as
/// JSON unless a text block already carries exactly that JSON (servers are asked to
/// mirror it there).
pub(super) fn call_result(result: &CallToolResult) -> String {
    let mut parts: Vec<String> = result.content.iter().map(block).collect();
    if let Some(structured) = &result.structured_content {
        let mirrored = result.content.iter().any(|b| match b {
            ContentBlock::Text(t) => {
                serde_json::from_str::<serde_json::Value>(&t.text)
                    .ok()
                    .as_ref()
                    == Some(structured)
            }
            _ => false,
        });
        if !mirrored {
            parts.push(format!("structuredContent: {structured}"));
        }
    }
    if parts.is_empty() {
        "(no content)".to_owned()
    } else {
        parts.join("\n")
    }
}

/// `resources/read` contents: text as is, binary as a placeholder.
pub(super) fn contents(contents: &[ResourceContents]) -> String {
    if contents.is_empty() {
        return "(empty resource)".to_owned();
    }
    contents.iter().map(resource).collect::<Vec<_>>().join("\n")
}

/// A prompt's messages as one text; messages not from the user are labelled so the
/// conversation they sketch stays readable.
pub(super) fn prompt(result: &GetPromptResult) -> String {
    result
        .messages
        .iter()
        .map(|m| match m.role {
            Role::User => block(&m.content),
            Role::Assistant => format!("Assistant: {}", block(&m.content)),
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

fn block(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(t) => t.text.clone(),
        ContentBlock::Image(i) => {
            format!(
                "[image: {}, {} bytes, not shown]",
                i.mime_type,
                decoded_len(&i.data)
            )
        }
        ContentBlock::Audio(a) => {
            format!(
                "[audio: {}, {} bytes, not shown]",
                a.mime_type,
                decoded_len(&a.data)
            )
        }
        ContentBlock::Resource(r) => resource(&r.resource),
        ContentBlock::ResourceLink(link) => {
            let mut line = format!("[resource link: {} ({})", link.uri, link.name);
            if let Some(mime) = &link.mime_type {
                line.push_str(&format!(", {mime}"));
            }
            line.push(']');
            if let Some(description) = &link.description {
                line.push_str(&format!(" {description}"));
            }
            line
        }
        // A content type newer than this host: show it rather than drop it.
        other => serde_json::to_string(other).unwrap_or_else(|_| "[unsupported content]".into()),
    }
}

fn resource(contents: &ResourceContents) -> String {
    match contents {
        ResourceContents::TextResourceContents { uri, text, .. } => {
            format!("[resource {uri}]\n{text}")
        }
        ResourceContents::BlobResourceContents {
            uri,
            mime_type,
            blob,
            ..
        } => format!(
            "[resource {uri}: {}, {} bytes of binary data, not shown]",
            mime_type.as_deref().unwrap_or("application/octet-stream"),
            decoded_len(blob)
        ),
        other => serde_json::to_string(other).unwrap_or_else(|_| "[unsupported resource]".into()),
    }
}

/// Bytes a base64 string decodes to.
fn decoded_len(b64: &str) -> usize {
    let trimmed = b64.trim_end_matches('=');
    trimmed.len() * 3 / 4
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(value: serde_json::Value) -> CallToolResult {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn content_blocks_render_as_text() {
        let r = result(json!({
            "content": [
                {"type": "text", "text": "hello"},
                {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "demo://a", "text": "body"}},
                {"type": "resource", "resource": {"uri": "demo://b", "blob": "AAAA", "mimeType": "application/gzip"}},
                {"type": "resource_link", "uri": "demo://c", "name": "c"}
            ],
            "structuredContent": {"x": 1}
        }));
        assert_eq!(
            call_result(&r),
            "hello\n[image: image/png, 5 bytes, not shown]\n[resource demo://a]\nbody\n\
             [resource demo://b: application/gzip, 3 bytes of binary data, not shown]\n\
             [resource link: demo://c (c)]\nstructuredContent: {\"x\":1}"
        );
    }

    #[test]
    fn mirrored_structured_content_is_not_repeated() {
        let r = result(json!({
            "content": [{"type": "text", "text": "{\"x\": 1}"}],
            "structuredContent": {"x": 1}
        }));
        assert_eq!(call_result(&r), "{\"x\": 1}");
        assert_eq!(call_result(&result(json!({"content": []}))), "(no content)");
    }
}
