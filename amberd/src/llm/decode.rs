//! The internal chunk shape every dialect decodes into, and `StreamState`, which folds
//! chunks into a `ChatResponse` while forwarding text and reasoning deltas to the caller.

use amber_proto::Usage;

use super::accumulate::{ToolCallAccumulator, ToolCallDelta};
use super::{ApiError, ChatResponse, StreamEvent};

/// One decoded chunk, dialect-independent.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChunkDelta {
    pub text: Option<String>,
    pub reasoning: Option<String>,
    pub tool_calls: Vec<ToolCallDelta>,
    pub finish_reason: Option<String>,
    pub usage: Option<Usage>,
}

/// What one SSE event meant.
#[derive(Debug, Clone, PartialEq)]
pub enum Decoded {
    Chunk(ChunkDelta),
    /// The `[DONE]` sentinel.
    Done,
    /// Keep-alive or other payload without meaning.
    Skip,
}

/// Accumulates one reply.
#[derive(Debug, Default)]
pub(crate) struct StreamState {
    text: String,
    reasoning: String,
    calls: ToolCallAccumulator,
    usage: Option<Usage>,
    finish_reason: Option<String>,
    done: bool,
}

impl StreamState {
    /// Fold a chunk in, forwarding non-empty text and reasoning to `emit`.
    pub(crate) fn apply(&mut self, delta: ChunkDelta, emit: &mut dyn FnMut(StreamEvent)) {
        if let Some(r) = delta.reasoning.filter(|r| !r.is_empty()) {
            self.reasoning.push_str(&r);
            emit(StreamEvent::ReasoningDelta(r));
        }
        if let Some(t) = delta.text.filter(|t| !t.is_empty()) {
            self.text.push_str(&t);
            emit(StreamEvent::TextDelta(t));
        }
        for call in delta.tool_calls {
            self.calls.push(call);
        }
        if delta.usage.is_some() {
            self.usage = delta.usage;
        }
        if delta.finish_reason.is_some() {
            self.finish_reason = delta.finish_reason;
        }
    }

    /// Record the `[DONE]` sentinel.
    pub(crate) fn mark_done(&mut self) {
        self.done = true;
    }

    /// True once the reply is known to be complete: a `finish_reason` or `[DONE]` was seen.
    pub(crate) fn is_complete(&self) -> bool {
        self.done || self.finish_reason.is_some()
    }

    /// The assembled reply, or `Truncated` when neither `finish_reason` nor `[DONE]` came.
    pub(crate) fn finish(self) -> Result<ChatResponse, ApiError> {
        if !self.is_complete() {
            return Err(ApiError::Truncated);
        }
        Ok(ChatResponse {
            text: self.text,
            reasoning: self.reasoning,
            tool_calls: self.calls.finish(),
            usage: self.usage,
            finish_reason: self.finish_reason,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn empty_deltas_are_not_emitted() {
        let mut st = StreamState::default();
        let mut seen = Vec::new();
        st.apply(
            ChunkDelta {
                text: Some(String::new()),
                ..ChunkDelta::default()
            },
            &mut |e| seen.push(e),
        );
        assert!(seen.is_empty());
        assert!(matches!(st.finish(), Err(ApiError::Truncated)));
    }

    #[test]
    fn done_without_finish_reason_is_complete() {
        let mut st = StreamState::default();
        st.apply(
            ChunkDelta {
                text: Some("hi".into()),
                ..ChunkDelta::default()
            },
            &mut |_| {},
        );
        st.mark_done();
        let r = st.finish().unwrap();
        assert_eq!(r.text, "hi");
        assert_eq!(r.finish_reason, None);
    }
}
