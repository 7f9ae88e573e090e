//! Loop guards (SEED.md "guards"), evaluated every iteration of a turn.
//!
//! Pure bookkeeping: the loop feeds it what the model did and what the tools returned,
//! and it answers continue / steer / stop. Thresholds are DESIGN.md's.

use std::collections::HashMap;

use amber_proto::{SteerReason, StopReason, ToolCall, ToolStatus};

use amber_tools::dispatch::normalized_arguments;

/// Identical tool-call sets in a row that count as a loop.
pub(crate) const IDENTICAL_CALL_SETS: usize = 3;
/// Occurrences of the same reply text that trigger a steer, then a stop.
pub(crate) const REPEATED_TEXT_STEER: usize = 2;
pub(crate) const REPEATED_TEXT_STOP: usize = 5;
/// Consecutive failed tool calls that trigger a recovery steer, then a stop.
pub(crate) const TOOL_FAILURES_STEER: usize = 3;
pub(crate) const TOOL_FAILURES_STOP: usize = 6;

/// What the loop should do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    Continue,
    Steer { reason: SteerReason, text: String },
    Stop(StopReason),
}

/// Per-turn guard state.
#[derive(Debug, Default)]
pub(crate) struct Guards {
    last_call_set: Option<Vec<(String, String)>>,
    identical_sets: usize,
    reply_counts: HashMap<String, usize>,
    consecutive_failures: usize,
    failure_steered: bool,
}

impl Guards {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Called with every model reply: its text and the tool calls it made.
    pub(crate) fn on_reply(&mut self, text: &str, calls: &[ToolCall]) -> Verdict {
        if !calls.is_empty() {
            let set = call_set(calls);
            if self.last_call_set.as_ref() == Some(&set) {
                self.identical_sets += 1;
            } else {
                self.identical_sets = 1;
                self.last_call_set = Some(set);
            }
            if self.identical_sets >= IDENTICAL_CALL_SETS {
                return Verdict::Stop(StopReason::LoopDetected);
            }
        } else {
            self.last_call_set = None;
            self.identical_sets = 0;
        }

        let normalised = text.trim();
        if normalised.is_empty() {
            return Verdict::Continue;
        }
        let count = self.reply_counts.entry(normalised.to_owned()).or_insert(0);
        *count += 1;
        match *count {
            n if n >= REPEATED_TEXT_STOP => Verdict::Stop(StopReason::LoopDetected),
            REPEATED_TEXT_STEER => Verdict::Steer {
                reason: SteerReason::RepeatedText,
                text: "You are repeating a reply you already gave. Do not repeat yourself: \
                       take a different approach, use a tool to make progress, or finish."
                    .to_owned(),
            },
            _ => Verdict::Continue,
        }
    }

    /// Called with the statuses of one dispatched batch, in order.
    pub(crate) fn on_results(&mut self, statuses: &[ToolStatus]) -> Verdict {
        for status in statuses {
            if *status == ToolStatus::Ok {
                self.consecutive_failures = 0;
                self.failure_steered = false;
            } else {
                self.consecutive_failures += 1;
            }
        }
        if self.consecutive_failures >= TOOL_FAILURES_STOP {
            return Verdict::Stop(StopReason::ToolFailures);
        }
        if self.consecutive_failures >= TOOL_FAILURES_STEER && !self.failure_steered {
            self.failure_steered = true;
            return Verdict::Steer {
                reason: SteerReason::ToolFailures,
                text: format!(
                    "Your last {} tool calls failed. Stop and reconsider: read the error \
                     messages, check paths and arguments, and try a different approach.",
                    self.consecutive_failures
                ),
            };
        }
        Verdict::Continue
    }
}

/// A call set compares by name and normalised arguments, ignoring call ids and order.
fn call_set(calls: &[ToolCall]) -> Vec<(String, String)> {
    let mut set: Vec<(String, String)> = calls
        .iter()
        .map(|c| (c.name.clone(), normalized_arguments(&c.arguments)))
        .collect();
    set.sort();
    set
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str, args: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "read".into(),
            arguments: args.into(),
        }
    }

    #[test]
    fn three_identical_call_sets_stop_with_loop_detected() {
        let mut g = Guards::new();
        assert_eq!(
            g.on_reply("", &[call("1", r#"{"path":"a"}"#)]),
            Verdict::Continue
        );
        assert_eq!(
            g.on_reply("", &[call("2", r#"{ "path": "a" }"#)]),
            Verdict::Continue
        );
        assert_eq!(
            g.on_reply("", &[call("3", r#"{"path":"a"}"#)]),
            Verdict::Stop(StopReason::LoopDetected)
        );
    }

    #[test]
    fn a_different_call_set_resets_the_count() {
        let mut g = Guards::new();
        g.on_reply("", &[call("1", r#"{"path":"a"}"#)]);
        g.on_reply("", &[call("2", r#"{"path":"a"}"#)]);
        g.on_reply("", &[call("3", r#"{"path":"b"}"#)]);
        assert_eq!(
            g.on_reply("", &[call("4", r#"{"path":"b"}"#)]),
            Verdict::Continue
        );
    }

    #[test]
    fn repeated_text_steers_at_the_second_and_stops_at_the_fifth() {
        let mut g = Guards::new();
        assert_eq!(g.on_reply("same", &[]), Verdict::Continue);
        assert!(matches!(
            g.on_reply(" same ", &[]),
            Verdict::Steer {
                reason: SteerReason::RepeatedText,
                ..
            }
        ));
        assert_eq!(g.on_reply("same", &[]), Verdict::Continue);
        assert_eq!(g.on_reply("same", &[]), Verdict::Continue);
        assert_eq!(
            g.on_reply("same", &[]),
            Verdict::Stop(StopReason::LoopDetected)
        );
    }

    #[test]
    fn tool_failures_steer_at_three_and_stop_at_six() {
        let mut g = Guards::new();
        let e = ToolStatus::Error;
        assert_eq!(g.on_results(&[e, e]), Verdict::Continue);
        assert!(matches!(
            g.on_results(&[ToolStatus::Denied]),
            Verdict::Steer {
                reason: SteerReason::ToolFailures,
                ..
            }
        ));
        assert_eq!(g.on_results(&[e, e]), Verdict::Continue);
        assert_eq!(g.on_results(&[e]), Verdict::Stop(StopReason::ToolFailures));
    }

    #[test]
    fn a_success_resets_the_failure_streak() {
        let mut g = Guards::new();
        g.on_results(&[ToolStatus::Error, ToolStatus::Error, ToolStatus::Ok]);
        assert_eq!(
            g.on_results(&[ToolStatus::Error, ToolStatus::Error]),
            Verdict::Continue
        );
    }
}
