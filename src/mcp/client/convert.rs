//! Translation between rmcp's model types and ours ([`McpTool`], [`McpToolResult`],
//! resources, prompts): tool descriptions, call results (text joined, other blocks
//! summarised), resource contents, prompt messages, arguments.

use rmcp::model::{
    CallToolResult, ContentBlock, GetPromptResult, JsonObject, Prompt, Resource, ResourceContents,
    Tool,
};
use serde_json::Value;

use crate::mcp::{
    McpError, McpPrompt, McpPromptArgument, McpPromptMessage, McpPromptResult, McpResource,
    McpResourceContent, McpTool, McpToolHints, McpToolResult,
};

pub(super) fn resource_from_rmcp(resource: Resource) -> McpResource {
    McpResource {
        uri: resource.uri,
        name: resource.name,
        description: resource.description.or(resource.title),
        mime_type: resource.mime_type,
    }
}

pub(super) fn content_from_rmcp(contents: ResourceContents) -> McpResourceContent {
    match contents {
        ResourceContents::TextResourceContents {
            uri,
            mime_type,
            text,
            ..
        } => McpResourceContent {
            uri,
            mime_type,
            text,
        },
        ResourceContents::BlobResourceContents {
            uri,
            mime_type,
            blob,
            ..
        } => McpResourceContent {
            text: format!(
                "[blob {} {} bytes]",
                mime_type.as_deref().unwrap_or("application/octet-stream"),
                base64_decoded_len(&blob)
            ),
            uri,
            mime_type,
        },
        _ => McpResourceContent {
            uri: String::new(),
            mime_type: None,
            text: "[resource contents of an unknown kind]".to_owned(),
        },
    }
}

pub(super) fn prompt_from_rmcp(prompt: Prompt) -> McpPrompt {
    McpPrompt {
        name: prompt.name,
        description: prompt.description.or(prompt.title),
        arguments: prompt
            .arguments
            .unwrap_or_default()
            .into_iter()
            .map(|argument| McpPromptArgument {
                name: argument.name,
                description: argument.description,
                required: argument.required.unwrap_or(false),
            })
            .collect(),
    }
}

pub(super) fn prompt_result_from_rmcp(result: GetPromptResult) -> McpPromptResult {
    McpPromptResult {
        description: result.description,
        messages: result
            .messages
            .iter()
            .map(|message| McpPromptMessage {
                role: serde_json::to_value(&message.role)
                    .ok()
                    .and_then(|role| role.as_str().map(str::to_owned))
                    .unwrap_or_else(|| "user".to_owned()),
                text: block_text(&message.content),
            })
            .collect(),
    }
}

/// Our view of a tool the server lists.
pub(super) fn tool_from_rmcp(tool: Tool) -> McpTool {
    let description = tool
        .description
        .map(|description| description.into_owned())
        .or(tool.title)
        .unwrap_or_default();
    let hints = tool
        .annotations
        .as_ref()
        .map(|a| McpToolHints {
            read_only: a.read_only_hint,
            idempotent: a.idempotent_hint,
            destructive: a.destructive_hint,
        })
        .unwrap_or_default();
    McpTool {
        name: tool.name.into_owned(),
        description,
        input_schema: Value::Object(tool.input_schema.as_ref().clone()),
        hints,
    }
}

/// Our view of a `tools/call` result: text blocks joined by newlines, other blocks as short
/// bracketed summaries in their place.
pub(super) fn result_from_rmcp(result: CallToolResult) -> McpToolResult {
    let text = result
        .content
        .iter()
        .map(block_text)
        .collect::<Vec<_>>()
        .join("\n");
    McpToolResult {
        is_error: result.is_error.unwrap_or(false),
        text,
        structured: result.structured_content,
    }
}

/// The arguments of a call, which MCP requires to be a JSON object.
pub(super) fn arguments_object(
    server: &str,
    tool: &str,
    method: &str,
    arguments: Value,
) -> Result<JsonObject, McpError> {
    match arguments {
        Value::Object(map) => Ok(map),
        other => Err(McpError::Protocol {
            server: server.to_owned(),
            method: method.to_owned(),
            reason: format!(
                "arguments for `{tool}` must be a JSON object, got {}; pass {{}} when the \
                 tool takes no arguments",
                json_kind(&other)
            ),
        }),
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn block_text(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::Image(image) => format!(
            "[image {} {} bytes]",
            image.mime_type,
            base64_decoded_len(&image.data)
        ),
        ContentBlock::Audio(audio) => format!(
            "[audio {} {} bytes]",
            audio.mime_type,
            base64_decoded_len(&audio.data)
        ),
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents { uri, text, .. } => {
                format!("[resource {uri}]\n{text}")
            }
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => format!(
                "[resource {uri} {} {} bytes]",
                mime_type.as_deref().unwrap_or("application/octet-stream"),
                base64_decoded_len(blob)
            ),
            _ => "[resource of an unknown kind]".to_owned(),
        },
        ContentBlock::ResourceLink(link) => format!("[resource link {} {}]", link.name, link.uri),
        _ => "[content block of an unknown kind]".to_owned(),
    }
}

/// Size in bytes of base64 `data` once decoded (without decoding it).
fn base64_decoded_len(data: &str) -> usize {
    let symbols = data
        .bytes()
        .filter(|byte| !byte.is_ascii_whitespace() && *byte != b'=')
        .count();
    symbols * 3 / 4
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use rmcp::model::Resource;
    use serde_json::json;

    #[test]
    fn base64_length_accounts_for_padding() {
        assert_eq!(base64_decoded_len("TQ=="), 1);
        assert_eq!(base64_decoded_len("TWE="), 2);
        assert_eq!(base64_decoded_len("TWFu"), 3);
        assert_eq!(base64_decoded_len("TWFu\nTWE="), 5);
        assert_eq!(base64_decoded_len(""), 0);
    }

    #[test]
    fn text_blocks_are_joined_and_other_blocks_summarised() {
        let mut result = CallToolResult::success(vec![
            ContentBlock::text("first"),
            ContentBlock::image("iVBORw0KGgo=", "image/png"),
            ContentBlock::text("second"),
            ContentBlock::audio("AAAA", "audio/wav"),
            ContentBlock::embedded_text("file:///notes.txt", "note body"),
            ContentBlock::resource(ResourceContents::blob("AAAAAA==", "file:///a.bin")),
            ContentBlock::ResourceLink(Resource::new("file:///x.md", "x.md")),
        ]);
        result.structured_content = Some(json!({"ok": true}));
        let ours = result_from_rmcp(result);
        assert_eq!(
            ours,
            McpToolResult {
                is_error: false,
                text: "first\n[image image/png 8 bytes]\nsecond\n[audio audio/wav 3 bytes]\n\
                       [resource file:///notes.txt]\nnote body\n\
                       [resource file:///a.bin application/octet-stream 4 bytes]\n\
                       [resource link x.md file:///x.md]"
                    .to_owned(),
                structured: Some(json!({"ok": true})),
            }
        );
    }

    #[test]
    fn error_flag_is_carried_over() {
        let ours = result_from_rmcp(CallToolResult::error(vec![ContentBlock::text("boom")]));
        assert!(ours.is_error);
        assert_eq!(ours.text, "boom");
        assert_eq!(ours.structured, None);
    }

    #[test]
    fn non_object_arguments_are_a_protocol_error_naming_the_kind() {
        let error = arguments_object("srv", "echo", "tools/call", json!("hi")).unwrap_err();
        match error {
            McpError::Protocol { server, reason, .. } => {
                assert_eq!(server, "srv");
                assert!(reason.contains("got a string"), "{reason}");
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(arguments_object("srv", "echo", "tools/call", json!(null)).is_err());
        assert_eq!(
            arguments_object("srv", "echo", "tools/call", json!({"a": 1})).unwrap(),
            json!({"a": 1}).as_object().cloned().unwrap()
        );
    }

    #[test]
    fn tool_without_description_falls_back_to_title_then_empty() {
        let mut tool: Tool = serde_json::from_value(json!({
            "name": "t", "title": "Title", "inputSchema": {"type": "object"}
        }))
        .unwrap();
        assert_eq!(tool_from_rmcp(tool.clone()).description, "Title");
        tool.title = None;
        let ours = tool_from_rmcp(tool);
        assert_eq!(ours.description, "");
        assert_eq!(ours.input_schema, json!({"type": "object"}));
    }
}
