//! The live part of the status: tokens and context use that move while a reply streams,
//! how long the running turn has taken, and how many prompts wait behind it.
//!
//! The daemon's `tokens` and `context` segments change only when `status/get` is asked
//! again, and the numbers behind them only when an LLM call ends (`usage`). In between, a
//! long first reply would show `0 tok`. So the app keeps the last reported numbers (from
//! `usage` events, `status/get`'s `context` and the session's info) and adds an estimate
//! of what streamed since — a quarter token per character, the usual rule of thumb — until
//! the next `usage` event replaces the estimate with the truth.

use amber_proto::{ContextUse, CostUsd, StatusSegmentInfo, Usage};

use crate::transcript::cell::tokens;

/// Characters per token of the estimate.
const CHARS_PER_TOKEN: u64 = 4;

/// What the status shows live; fed by events, read when drawing.
#[derive(Debug, Default, Clone)]
pub struct LiveStatus {
    /// The session's total tokens as last reported.
    total_tokens: Option<u64>,
    /// The session's total cost as last reported (none: the model has no known price).
    cost: Option<CostUsd>,
    /// The context use as `status/get` last reported it (its window is what matters).
    context: Option<ContextUse>,
    /// Characters of replies and reasoning streamed since the last report.
    streamed_chars: u64,
    /// A `usage` event came after the last `status/get`: its numbers are newer than the
    /// daemon's segments.
    fresh: bool,
    /// When the running turn started (Unix ms, from its `turn_started`'s time).
    turn_started_ms: Option<i64>,
    /// Turns accepted (`prompt_queued`) that have not started yet, oldest first.
    queued: Vec<String>,
}

impl LiveStatus {
    /// The session's info at attach: its total so far.
    pub fn seed(&mut self, usage: &Usage) {
        self.total_tokens = Some(total_of(usage));
        self.cost = usage.cost_usd;
    }

    /// `status/get` answered: its `context` numbers are the new baseline.
    pub fn set_context(&mut self, context: Option<ContextUse>) {
        if context.is_some() {
            self.context = context;
        }
        self.fresh = false;
    }

    pub fn prompt_queued(&mut self, turn_id: Option<&str>) {
        if let Some(id) = turn_id
            && !self.queued.iter().any(|q| q == id)
        {
            self.queued.push(id.to_owned());
        }
    }

    pub fn turn_started(&mut self, turn_id: Option<&str>, time: &str) {
        if let Some(id) = turn_id {
            self.queued.retain(|q| q != id);
        }
        self.turn_started_ms = crate::picker::parse_rfc3339(time).map(|s| s * 1000);
    }

    pub fn turn_completed(&mut self, turn_id: Option<&str>) {
        if let Some(id) = turn_id {
            // A turn that ends without starting (cancelled while queued) leaves the queue.
            self.queued.retain(|q| q != id);
        }
        self.turn_started_ms = None;
        // Whatever was estimated is settled by the daemon now (its status refresh follows).
        self.streamed_chars = 0;
    }

    /// A reply or reasoning delta.
    pub fn streamed(&mut self, delta: &str) {
        self.streamed_chars += delta.chars().count() as u64;
    }

    /// A `usage` event: the truth about the call that just ended.
    pub fn usage(&mut self, call: &Usage, total: &Usage) {
        self.total_tokens = Some(total_of(total));
        self.cost = total.cost_usd.or(self.cost);
        if let Some(ctx) = &mut self.context {
            ctx.tokens = call.prompt_tokens + call.completion_tokens;
        }
        self.streamed_chars = 0;
        self.fresh = true;
    }

    /// Prompts waiting for their turn in the daemon (from every client).
    pub fn queued(&self) -> usize {
        self.queued.len()
    }

    /// Milliseconds the running turn has taken at `now_ms`, if one runs.
    pub fn elapsed_ms(&self, now_ms: i64) -> Option<u64> {
        self.turn_started_ms
            .map(|start| u64::try_from(now_ms.saturating_sub(start)).unwrap_or(0))
    }

    fn estimate(&self) -> u64 {
        self.streamed_chars.div_ceil(CHARS_PER_TOKEN)
    }

    /// The daemon's segments with `tokens`, `cost` and `context` replaced by the live numbers
    /// (marked `~` while they include an estimate) when those are newer.
    pub fn segments(&self, daemon: &[StatusSegmentInfo]) -> Vec<String> {
        let estimate = self.estimate();
        let approx = if estimate > 0 { "~" } else { "" };
        let newer = estimate > 0 || self.fresh;
        daemon
            .iter()
            .map(|s| match s.name.as_str() {
                _ if !newer => s.text.clone(),
                "tokens" => match self.total_tokens {
                    Some(total) => format!("{approx}{} tok", tokens(total + estimate)),
                    None => s.text.clone(),
                },
                // Only the cost of what ended: streamed text has no price yet.
                "cost" => self.cost.map_or_else(|| s.text.clone(), |c| c.to_string()),
                "context" => match self.context {
                    Some(ctx) if ctx.window > 0 => {
                        let pct = (ctx.tokens + estimate).saturating_mul(100) / ctx.window;
                        format!("ctx {approx}{pct}%")
                    }
                    _ => s.text.clone(),
                },
                _ => s.text.clone(),
            })
            .collect()
    }
}

/// A session total as the `tokens` segment counts it.
fn total_of(usage: &Usage) -> u64 {
    usage
        .total_tokens
        .max(usage.prompt_tokens + usage.completion_tokens)
}

/// `7s`, `1m05s`, `2h03m`.
pub fn elapsed(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(name: &str, text: &str) -> StatusSegmentInfo {
        StatusSegmentInfo {
            name: name.into(),
            text: text.into(),
        }
    }

    fn usage(prompt: u64, completion: u64) -> Usage {
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt + completion,
            ..Usage::default()
        }
    }

    #[test]
    fn streaming_moves_tokens_and_context_until_usage_says_the_truth() {
        let daemon = [
            seg("model", "m"),
            seg("context", "ctx 0%"),
            seg("tokens", "0 tok"),
        ];
        let mut live = LiveStatus::default();
        live.seed(&Usage::default());
        live.set_context(Some(ContextUse {
            tokens: 0,
            window: 1000,
        }));
        assert_eq!(live.segments(&daemon), ["m", "ctx 0%", "0 tok"]);
        live.streamed(&"x".repeat(400));
        assert_eq!(live.segments(&daemon), ["m", "ctx ~10%", "~100 tok"]);
        live.usage(&usage(300, 120), &usage(300, 120));
        assert_eq!(live.segments(&daemon), ["m", "ctx 42%", "420 tok"]);
    }

    #[test]
    fn without_newer_numbers_the_daemon_segments_stay() {
        let daemon = [seg("context", "ctx 5%"), seg("tokens", "1.2k tok")];
        let mut live = LiveStatus::default();
        live.streamed("abcd");
        assert_eq!(live.segments(&daemon), ["ctx 5%", "1.2k tok"]);
        live.seed(&usage(1000, 200));
        live.set_context(Some(ContextUse {
            tokens: 50,
            window: 1000,
        }));
        live.usage(&usage(50, 0), &usage(1000, 200));
        live.set_context(None);
        // A status refresh after the usage event: the daemon's text is as new.
        assert_eq!(live.segments(&daemon), ["ctx 5%", "1.2k tok"]);
    }

    #[test]
    fn the_cost_segment_follows_the_session_total_of_usage_events() {
        let daemon = [seg("tokens", "0 tok"), seg("cost", "$0.00")];
        let mut live = LiveStatus::default();
        live.seed(&Usage {
            cost_usd: CostUsd::from_usd(0.0),
            ..Usage::default()
        });
        let priced = |usd: f64| Usage {
            cost_usd: CostUsd::from_usd(usd),
            ..usage(1000, 200)
        };
        live.usage(&priced(0.2), &priced(0.4213));
        assert_eq!(live.segments(&daemon), ["1.2k tok", "$0.42"]);
        // Streaming moves the tokens, never the cost: nothing is billed until usage says so.
        live.streamed(&"x".repeat(4000));
        assert_eq!(live.segments(&daemon)[1], "$0.42");
    }

    #[test]
    fn queue_and_elapsed_follow_the_turns() {
        let mut live = LiveStatus::default();
        live.prompt_queued(Some("t1"));
        live.prompt_queued(Some("t2"));
        live.prompt_queued(Some("t2"));
        assert_eq!(live.queued(), 2);
        live.turn_started(Some("t1"), "2026-01-01T00:00:00Z");
        assert_eq!(live.queued(), 1);
        let start = crate::picker::parse_rfc3339("2026-01-01T00:00:00Z").unwrap_or(0) * 1000;
        assert_eq!(live.elapsed_ms(start + 65_000), Some(65_000));
        assert_eq!(elapsed(65_000), "1m05s");
        assert_eq!(elapsed(7_400), "7s");
        assert_eq!(elapsed(7_380_000), "2h03m");
        live.turn_completed(Some("t1"));
        assert_eq!(live.elapsed_ms(start), None);
        live.turn_completed(Some("t2"));
        assert_eq!(live.queued(), 0);
    }
}
