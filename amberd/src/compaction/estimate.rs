//! Token estimates and the compaction gate's threshold test.
//!
//! The estimate is a character count: about four bytes of UTF-8 per token (bytes, not
//! chars, so non-Latin text is over- rather than under-counted), plus a small fixed
//! overhead per message and per tool call for the role and framing tokens. Tool schemas
//! count as their JSON text. Estimates are additive per message, which `apply` relies on.

use amber_llm::ToolSpec;
use amber_proto::Message;

use super::CompactionSettings;

/// Bytes per token of the character estimate.
const BYTES_PER_TOKEN: u64 = 4;
/// Framing tokens per message (role, separators).
const MESSAGE_OVERHEAD: u64 = 4;
/// Framing tokens per tool call and per tool schema.
const ITEM_OVERHEAD: u64 = 8;

fn text_tokens(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(BYTES_PER_TOKEN)
}

/// Estimated tokens of one message.
pub(super) fn message_tokens(message: &Message) -> u64 {
    let mut bytes = message.content.len();
    let mut tokens = MESSAGE_OVERHEAD;
    for call in &message.tool_calls {
        bytes += call.id.len() + call.name.len() + call.arguments.len();
        tokens += ITEM_OVERHEAD;
    }
    bytes += message.tool_call_id.as_deref().map_or(0, str::len);
    tokens + text_tokens(bytes)
}

/// Estimated tokens of the tool schemas sent with every request.
pub(crate) fn tools_tokens(tools: &[ToolSpec]) -> u64 {
    tools
        .iter()
        .map(|t| {
            let bytes = t.name.len() + t.description.len() + t.parameters.to_string().len();
            ITEM_OVERHEAD + text_tokens(bytes)
        })
        .sum()
}

/// Estimated prompt tokens of a request carrying `messages` and `tools`.
pub(crate) fn estimate_tokens(messages: &[Message], tools: &[ToolSpec]) -> u64 {
    messages.iter().map(message_tokens).sum::<u64>() + tools_tokens(tools)
}

/// The provider's prompt-token count of the last LLM call, with this module's estimate of
/// that same request, so the tokens of a later request can be projected from the exact
/// count plus the estimate of what was added since. Forget it after a compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PromptUsage {
    /// `Usage::prompt_tokens` of the last call.
    pub prompt_tokens: u64,
    /// `estimate_tokens` of the messages and tools of that call.
    pub estimated: u64,
}

impl PromptUsage {
    /// The projected prompt tokens of a request whose estimate is `estimated_now`: the
    /// provider's count, moved by the change of the estimate since.
    pub(crate) fn project(&self, estimated_now: u64) -> u64 {
        if estimated_now >= self.estimated {
            self.prompt_tokens
                .saturating_add(estimated_now - self.estimated)
        } else {
            self.prompt_tokens
                .saturating_sub(self.estimated - estimated_now)
        }
    }
}

/// Whether the context must be compacted before the next call: the provider-based count
/// when known (`last_prompt_tokens`, e.g. [`PromptUsage::project`]), else `estimated`, over
/// `threshold × context_window`. A window of 0 (unknown) never triggers.
pub(crate) fn needs_compaction(
    estimated: u64,
    last_prompt_tokens: Option<u64>,
    s: &CompactionSettings,
) -> bool {
    if s.context_window == 0 {
        return false;
    }
    let used = last_prompt_tokens.unwrap_or(estimated);
    used as f64 > s.threshold * s.context_window as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use amber_proto::ToolCall;

    fn settings(window: u64) -> CompactionSettings {
        CompactionSettings {
            context_window: window,
            ..CompactionSettings::default()
        }
    }

    #[test]
    fn estimate_counts_content_calls_and_schemas() {
        let plain = Message::user("x".repeat(400));
        assert_eq!(message_tokens(&plain), MESSAGE_OVERHEAD + 100);
        let call = Message::assistant(
            "",
            vec![ToolCall {
                id: "c1".into(),
                name: "read".into(),
                arguments: r#"{"path":"a"}"#.into(),
            }],
        );
        assert!(message_tokens(&call) > MESSAGE_OVERHEAD + ITEM_OVERHEAD);
        let tool = ToolSpec {
            name: "read".into(),
            description: "d".repeat(100),
            parameters: serde_json::json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        };
        let with_tools = estimate_tokens(std::slice::from_ref(&plain), std::slice::from_ref(&tool));
        assert_eq!(with_tools, message_tokens(&plain) + tools_tokens(&[tool]));
        assert!(tools_tokens(&[]) == 0 && estimate_tokens(&[], &[]) == 0);
        // Multi-byte text counts by bytes.
        assert_eq!(
            message_tokens(&Message::user("é".repeat(4))),
            MESSAGE_OVERHEAD + 2
        );
    }

    #[test]
    fn threshold_uses_provider_usage_when_known() {
        let s = settings(1000);
        assert!(!needs_compaction(800, None, &s));
        assert!(needs_compaction(801, None, &s));
        // Provider usage wins over the estimate, either way.
        assert!(needs_compaction(100, Some(900), &s));
        assert!(!needs_compaction(900, Some(700), &s));
        // Unknown window: never.
        assert!(!needs_compaction(u64::MAX, None, &settings(0)));
    }

    #[test]
    fn projection_adds_what_came_since() {
        let last = PromptUsage {
            prompt_tokens: 700,
            estimated: 600,
        };
        assert_eq!(last.project(650), 750);
        assert_eq!(last.project(500), 600);
        assert_eq!(last.project(0), 100);
        let s = settings(1000);
        assert!(needs_compaction(750, Some(last.project(750)), &s));
    }
}
