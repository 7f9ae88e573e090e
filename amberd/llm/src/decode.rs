//! The internal chunk shape every dialect decodes into, and `StreamState`, which folds
//! chunks into a `ChatResponse` while forwarding text and reasoning deltas to the caller.
//!
//! Deltas are forwarded per burst, not per chunk: the reader applies every chunk that is
//! already in hand and then calls `flush`, so a provider that streams faster than amber
//! relays costs one event per burst instead of one per token. Text and reasoning are
//! forwarded in the order they arrived (a switch of kind flushes what was pending).
//!
//! Every chunk is charged to the reply's budget (`limits.rs`) before it is kept: a reply
//! past `max_reply_bytes` ends with `ReplyTooLarge` instead of growing.

use amber_proto::{ReasoningItem, Usage};

use super::accumulate::{ToolCallAccumulator, ToolCallDelta};
use super::limits::{ReplyBudget, ReplyLimits};
use super::{ApiError, ChatResponse, StreamEvent};

/// One decoded chunk, dialect-independent.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChunkDelta {
    pub text: Option<String>,
    pub reasoning: Option<String>,
    pub tool_calls: Vec<ToolCallDelta>,
    pub finish_reason: Option<String>,
    /// What the model said instead of an answer (OpenAI's `delta.refusal`, the Responses
    /// API's refusal parts).
    pub refusal: Option<String>,
    pub usage: Option<Usage>,
    /// Complete reasoning items (a dialect assembles each across its events).
    pub reasoning_items: Vec<ReasoningItem>,
    /// Bytes the dialect keeps for the reply that no field above carries yet (an Anthropic
    /// thinking block's signature, held until the block completes): charged to the reply's
    /// bound like its text, so nothing a stream sends grows unbounded.
    pub held_bytes: usize,
}

impl ChunkDelta {
    /// Bytes this chunk adds to a reply: its text, reasoning, tool-call pieces and
    /// reasoning items (what the reply keeps).
    pub(crate) fn size(&self) -> usize {
        let len = |s: &Option<String>| s.as_ref().map_or(0, String::len);
        let calls: usize = self
            .tool_calls
            .iter()
            .map(|c| len(&c.id) + len(&c.name) + len(&c.arguments))
            .sum();
        let items: usize = self
            .reasoning_items
            .iter()
            .map(|i| ITEM_BYTES + i.format.len() + i.data.len())
            .sum();
        len(&self.text)
            + len(&self.reasoning)
            + len(&self.refusal)
            + calls
            + items
            + self.held_bytes
    }
}

/// What a tool call or a reasoning item costs a reply beyond its text (its bookkeeping):
/// no model makes thousands of calls in one reply, and a stream of empty ones stays bounded.
const CALL_BYTES: usize = 1024;
const ITEM_BYTES: usize = 64;

/// What one SSE event meant.
#[derive(Debug, Clone, PartialEq)]
pub enum Decoded {
    Chunk(ChunkDelta),
    /// The dialect's last event, carrying the end of the reply (the Responses API's
    /// `response.completed`): nothing after it is read.
    Final(ChunkDelta),
    /// The `[DONE]` sentinel (Anthropic's `message_stop`): nothing after it is read.
    Done,
    /// Keep-alive or other payload without meaning.
    Skip,
}

/// Which stream a pending delta belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    Text,
    Reasoning,
}

/// Accumulates one reply.
#[derive(Debug, Default)]
pub(crate) struct StreamState {
    text: String,
    reasoning: String,
    /// `text[text_sent..]` and `reasoning[reasoning_sent..]` are not forwarded yet; at most
    /// one of them is non-empty, the one `pending` names.
    text_sent: usize,
    reasoning_sent: usize,
    pending: Option<Pending>,
    calls: ToolCallAccumulator,
    usage: Option<Usage>,
    finish_reason: Option<String>,
    refusal: Option<String>,
    reasoning_items: Vec<ReasoningItem>,
    done: bool,
    budget: ReplyBudget,
}

impl StreamState {
    /// An empty reply bounded by `limits`.
    pub(crate) fn new(limits: ReplyLimits) -> Self {
        StreamState {
            budget: ReplyBudget::new(limits),
            ..StreamState::default()
        }
    }

    /// Fold a chunk in. Its text and reasoning are forwarded by the next `flush` (or
    /// sooner, when the other kind arrives first). A chunk that takes the reply past its
    /// bound is not kept: `ReplyTooLarge`.
    pub(crate) fn apply(
        &mut self,
        delta: ChunkDelta,
        emit: &mut dyn FnMut(StreamEvent),
    ) -> Result<(), ApiError> {
        let slots = self.calls.len();
        self.budget.charge(delta.size())?;
        if let Some(r) = delta.reasoning.filter(|r| !r.is_empty()) {
            self.switch_to(Pending::Reasoning, emit);
            self.reasoning.push_str(&r);
        }
        if let Some(t) = delta.text.filter(|t| !t.is_empty()) {
            self.switch_to(Pending::Text, emit);
            self.text.push_str(&t);
        }
        for call in delta.tool_calls {
            self.calls.push(call);
        }
        // A call costs more than its text: charged by the call, so a stream of empty calls
        // (each a new index) is bounded too.
        let new_calls = self.calls.len() - slots;
        self.budget.charge(new_calls.saturating_mul(CALL_BYTES))?;
        if delta.usage.is_some() {
            self.usage = delta.usage;
        }
        if delta.finish_reason.is_some() {
            self.finish_reason = delta.finish_reason;
        }
        if let Some(refusal) = delta.refusal {
            self.refusal.get_or_insert_default().push_str(&refusal);
        }
        self.reasoning_items.extend(delta.reasoning_items);
        Ok(())
    }

    fn switch_to(&mut self, kind: Pending, emit: &mut dyn FnMut(StreamEvent)) {
        if self.pending != Some(kind) {
            self.flush(emit);
            self.pending = Some(kind);
        }
    }

    /// Forward what was applied since the last flush, as one delta.
    pub(crate) fn flush(&mut self, emit: &mut dyn FnMut(StreamEvent)) {
        match self.pending.take() {
            Some(Pending::Text) => {
                emit(StreamEvent::TextDelta(
                    self.text[self.text_sent..].to_owned(),
                ));
                self.text_sent = self.text.len();
            }
            Some(Pending::Reasoning) => {
                emit(StreamEvent::ReasoningDelta(
                    self.reasoning[self.reasoning_sent..].to_owned(),
                ));
                self.reasoning_sent = self.reasoning.len();
            }
            None => {}
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

    /// Forward what is pending; then the assembled reply, or `Truncated` when neither
    /// `finish_reason` nor `[DONE]` came.
    pub(crate) fn finish(
        mut self,
        emit: &mut dyn FnMut(StreamEvent),
    ) -> Result<ChatResponse, ApiError> {
        self.flush(emit);
        if !self.is_complete() {
            return Err(ApiError::Truncated);
        }
        Ok(ChatResponse {
            text: self.text,
            reasoning: self.reasoning,
            tool_calls: self.calls.finish(),
            usage: self.usage,
            finish_reason: self.finish_reason,
            refusal: self.refusal,
            reasoning_items: self.reasoning_items,
        })
    }
}

#[cfg(test)]
mod tests {
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
        )
        .unwrap();
        assert!(matches!(
            st.finish(&mut |e| seen.push(e)),
            Err(ApiError::Truncated)
        ));
        assert!(seen.is_empty());
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
        )
        .unwrap();
        st.mark_done();
        let mut seen = Vec::new();
        let r = st.finish(&mut |e| seen.push(e)).unwrap();
        assert_eq!(r.text, "hi");
        assert_eq!(r.finish_reason, None);
        assert!(matches!(&seen[..], [StreamEvent::TextDelta(t)] if t == "hi"));
    }

    fn said(text: Option<&str>, reasoning: Option<&str>) -> ChunkDelta {
        ChunkDelta {
            text: text.map(str::to_owned),
            reasoning: reasoning.map(str::to_owned),
            ..ChunkDelta::default()
        }
    }

    #[test]
    fn a_burst_is_one_delta_per_kind_run_in_arrival_order() {
        let mut st = StreamState::default();
        let mut seen = Vec::new();
        let mut emit = |e: StreamEvent| seen.push(e);
        st.apply(said(None, Some("th")), &mut emit).unwrap();
        st.apply(said(None, Some("ink")), &mut emit).unwrap();
        // Reasoning and text in one chunk: the reasoning comes first.
        st.apply(said(Some("A"), Some("!")), &mut emit).unwrap();
        st.apply(said(Some("B"), None), &mut emit).unwrap();
        st.flush(&mut emit);
        st.flush(&mut emit); // nothing pending: nothing sent
        st.apply(said(Some("C"), None), &mut emit).unwrap();
        st.apply(said(None, Some("?")), &mut emit).unwrap();
        st.mark_done();
        let reply = st.finish(&mut emit).unwrap();
        let got: Vec<String> = seen
            .iter()
            .map(|e| match e {
                StreamEvent::TextDelta(t) => format!("text:{t}"),
                StreamEvent::ReasoningDelta(r) => format!("reasoning:{r}"),
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(
            got,
            ["reasoning:think!", "text:AB", "text:C", "reasoning:?"]
        );
        assert_eq!(
            (reply.text.as_str(), reply.reasoning.as_str()),
            ("ABC", "think!?")
        );
    }

    #[test]
    fn every_part_of_a_reply_counts_against_its_bound() {
        let limits = ReplyLimits::new(0); // raised to the smallest bound
        let third = limits.reply / 3;
        let call = |args: usize| ChunkDelta {
            tool_calls: vec![ToolCallDelta {
                index: Some(0),
                id: Some("c".into()),
                name: Some("n".into()),
                arguments: Some("a".repeat(args)),
            }],
            ..ChunkDelta::default()
        };
        let item = |data: usize| ChunkDelta {
            reasoning_items: vec![ReasoningItem {
                format: String::new(),
                data: "d".repeat(data),
            }],
            ..ChunkDelta::default()
        };
        let parts: [(&str, ChunkDelta); 4] = [
            ("text", said(Some(&"t".repeat(third + 2)), None)),
            ("reasoning", said(None, Some(&"r".repeat(third + 2)))),
            ("arguments", call(third)),
            ("reasoning items", item(third + 2)),
        ];
        for (name, over) in parts {
            let mut st = StreamState::new(limits);
            let mut seen = Vec::new();
            st.apply(said(Some(&"x".repeat(third)), None), &mut |e| seen.push(e))
                .unwrap();
            st.apply(said(None, Some(&"y".repeat(third))), &mut |e| seen.push(e))
                .unwrap();
            let err = st.apply(over, &mut |e| seen.push(e)).unwrap_err();
            assert_eq!(err.code(), "reply_too_large", "{name}");
            // What came before the chunk over the bound was forwarded; nothing of it.
            st.flush(&mut |e| seen.push(e));
            let forwarded: usize = seen
                .iter()
                .map(|e| match e {
                    StreamEvent::TextDelta(t) | StreamEvent::ReasoningDelta(t) => t.len(),
                    _ => 0,
                })
                .sum();
            assert_eq!(forwarded, 2 * third, "{name}");
        }
    }
}
