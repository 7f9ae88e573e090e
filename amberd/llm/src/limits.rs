//! The size bound of one model reply: its text, reasoning, tool calls and reasoning items
//! together ([`ReplyLimits::reply`], `[provider] max_reply_bytes`), any one piece of the wire
//! that carries it — an SSE line or event, a whole JSON body ([`ReplyLimits::event`]) — and
//! the whole stream, framing and keep-alives included ([`ReplyLimits::wire`]). Past any of
//! them the request ends with [`ApiError::ReplyTooLarge`], so a stream that never ends, or
//! one delta of 50 MB, costs a bounded amount of memory (and of the LLM I/O thread's time)
//! instead of growing until the turn is cancelled.
//!
//! The default is far above what any model sends: the largest output windows are about
//! 128k tokens, half a MiB of text.

use super::ApiError;

/// `[provider] max_reply_bytes` when unset: 8 MiB.
pub const DEFAULT_MAX_REPLY_BYTES: usize = 8 * 1024 * 1024;

/// A smaller configured bound is raised to this (a reply of a few hundred KiB is normal).
const MIN_MAX_REPLY_BYTES: usize = 64 * 1024;

/// Room an event has beyond twice the reply bound: its JSON framing, ids and usage.
const EVENT_OVERHEAD_BYTES: usize = 1024 * 1024;

/// Wire bytes a stream may take per byte of reply: a chat-completions chunk carries a token
/// of about 4 bytes in about 250 bytes of JSON, so a reply at the bound needs about this.
const WIRE_PER_REPLY_BYTE: usize = 64;

/// What was too large (the error message names it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Oversized {
    /// The reply's text, reasoning, tool calls and reasoning items together.
    Reply,
    /// One line or event of the SSE stream.
    Event,
    /// The whole SSE stream, framing and keep-alives included.
    Stream,
    /// A whole (non-streamed) JSON response body.
    Body,
}

impl std::fmt::Display for Oversized {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Oversized::Reply => "the reply (text, reasoning and tool-call arguments together)",
            Oversized::Event => "one event of the stream",
            Oversized::Stream => "the stream (framing and keep-alives included)",
            Oversized::Body => "the response body",
        })
    }
}

/// The bounds of one reply, resolved from `max_reply_bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReplyLimits {
    /// Most bytes of text, reasoning, tool calls and reasoning items.
    pub reply: usize,
    /// Most bytes of one SSE line, one event's data, or a whole JSON body. An event may
    /// carry the whole reply again (the Responses API's `response.completed`), escaped.
    pub event: usize,
    /// Most bytes of a whole SSE body: what a stream of keep-alives, or of empty chunks,
    /// may take of the I/O thread before it is ended.
    pub wire: usize,
}

impl ReplyLimits {
    pub(crate) fn new(max_reply_bytes: usize) -> Self {
        let reply = max_reply_bytes.max(MIN_MAX_REPLY_BYTES);
        ReplyLimits {
            reply,
            event: reply.saturating_mul(2).saturating_add(EVENT_OVERHEAD_BYTES),
            wire: reply.saturating_mul(WIRE_PER_REPLY_BYTE),
        }
    }

    /// The error for `what` being over its bound.
    pub(crate) fn exceeded(&self, what: Oversized) -> ApiError {
        let limit = match what {
            Oversized::Reply => self.reply,
            Oversized::Event | Oversized::Body => self.event,
            Oversized::Stream => self.wire,
        };
        ApiError::ReplyTooLarge { what, limit }
    }
}

impl Default for ReplyLimits {
    fn default() -> Self {
        ReplyLimits::new(DEFAULT_MAX_REPLY_BYTES)
    }
}

/// Bytes of a reply counted against [`ReplyLimits::reply`] as they arrive.
#[derive(Debug, Default)]
pub(crate) struct ReplyBudget {
    limits: ReplyLimits,
    used: usize,
}

impl ReplyBudget {
    pub(crate) fn new(limits: ReplyLimits) -> Self {
        ReplyBudget { limits, used: 0 }
    }

    /// Counts `bytes` more; past the bound, the reply is over.
    pub(crate) fn charge(&mut self, bytes: usize) -> Result<(), ApiError> {
        self.used = self.used.saturating_add(bytes);
        if self.used > self.limits.reply {
            return Err(self.limits.exceeded(Oversized::Reply));
        }
        Ok(())
    }
}

/// `8 MiB`, `1.5 KiB`, `100 bytes`: a size as people read it (one decimal at most).
pub(crate) fn human_bytes(n: usize) -> String {
    const KIB: usize = 1024;
    const MIB: usize = 1024 * KIB;
    let (unit, name) = match n {
        n if n >= MIB => (MIB, "MiB"),
        n if n >= KIB => (KIB, "KiB"),
        n => return format!("{n} bytes"),
    };
    if n.is_multiple_of(unit) {
        format!("{} {name}", n / unit)
    } else {
        let tenths = (n as u128 * 10 + unit as u128 / 2) / unit as u128;
        match tenths % 10 {
            0 => format!("{} {name}", tenths / 10),
            d => format!("{}.{d} {name}", tenths / 10),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_bound_is_raised_and_events_get_room_for_the_whole_reply() {
        let l = ReplyLimits::new(1);
        assert_eq!(l.reply, MIN_MAX_REPLY_BYTES);
        let l = ReplyLimits::default();
        assert_eq!(l.reply, 8 << 20);
        assert_eq!(l.event, 17 << 20);
        assert_eq!(l.wire, 512 << 20);
        let huge = ReplyLimits::new(usize::MAX);
        assert_eq!(huge.event, usize::MAX);
    }

    #[test]
    fn the_budget_holds_exactly_the_bound() {
        let mut b = ReplyBudget::new(ReplyLimits::new(MIN_MAX_REPLY_BYTES));
        b.charge(MIN_MAX_REPLY_BYTES - 1).unwrap();
        b.charge(1).unwrap();
        let err = b.charge(1).unwrap_err();
        assert_eq!(err.code(), "reply_too_large");
        assert!(!err.is_retryable());
        assert!(err.to_string().contains("64 KiB"), "{err}");
    }

    #[test]
    fn sizes_read_as_people_say_them() {
        for (n, want) in [
            (100, "100 bytes"),
            (1024, "1 KiB"),
            (1536, "1.5 KiB"),
            (8 << 20, "8 MiB"),
            ((17 << 20) + 1, "17 MiB"),
        ] {
            assert_eq!(human_bytes(n), want);
        }
    }
}
