//! Conversation messages as the daemon stores them and `session/get` returns them.
//!
//! The shape follows OpenAI chat-completions roles; tool-call arguments stay the raw
//! JSON text the model produced (it may be invalid, and the history must say so).

use serde::{Deserialize, Serialize};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

/// One tool call requested by the model.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// Provider-assigned call id (`call_…`); synthesised when the provider omits it.
    pub id: String,
    pub name: String,
    /// Raw JSON text of the arguments, exactly as streamed by the model.
    pub arguments: String,
}

/// Reasoning a provider wants back verbatim on the next request: an Anthropic `thinking`
/// block with its signature, an OpenAI Responses `reasoning` item with its
/// `encrypted_content`. Opaque to everything but the dialect that made it: `format` names
/// that dialect (`anthropic`, `openai-responses`) and other dialects leave the item out.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningItem {
    pub format: String,
    /// The provider's JSON object, as compact text (kept as text so a message stays `Eq`
    /// and `Hash`, and is sent back byte for byte).
    pub data: String,
}

/// One message of a session's conversation.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    pub role: Role,
    #[serde(default)]
    pub content: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For `role: tool`: the call this message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// For `role: assistant`: the provider's reasoning items, in reply order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasoning_items: Vec<ReasoningItem>,
}

impl Message {
    pub fn system(content: impl Into<String>) -> Self {
        Self::plain(Role::System, content)
    }

    pub fn user(content: impl Into<String>) -> Self {
        Self::plain(Role::User, content)
    }

    pub fn assistant(content: impl Into<String>, tool_calls: Vec<ToolCall>) -> Self {
        Self {
            role: Role::Assistant,
            content: content.into(),
            tool_calls,
            tool_call_id: None,
            reasoning_items: Vec::new(),
        }
    }

    pub fn tool(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            role: Role::Tool,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: Some(call_id.into()),
            reasoning_items: Vec::new(),
        }
    }

    /// This message with the provider's reasoning items attached.
    #[must_use]
    pub fn with_reasoning_items(mut self, items: Vec<ReasoningItem>) -> Self {
        self.reasoning_items = items;
        self
    }

    fn plain(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            reasoning_items: Vec::new(),
        }
    }
}
