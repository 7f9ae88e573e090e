//! One sub-agent's own caps (`task {max_*}`, `[agents] subagent_max_*`): tokens, dollars
//! and requests kept by an `agent::ledger` like a session's budget, and a wall clock.
//!
//! A sub-agent's request reserves here first, then from its session (its parent's budget
//! binds it too), so it stops at whichever is reached first. Past its deadline it sends
//! nothing more, and its cancel token fires at the deadline, so a hung tool call ends too.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use amber_proto::sync::Locked;
use amber_proto::{Limit, LimitKind, LimitScope, Usage};
use tokio_util::sync::CancellationToken;

use crate::agent::ledger::{Amount, Caps, Ledger, Spent, admit_waiting, spent_cap};
use crate::agent::metered::{Refusal, RequestEstimate};
use crate::config::SubagentCaps;

/// The settled spend of one sub-agent, its requests in flight and its clock.
pub(crate) struct SubagentBudget {
    caps: Caps,
    seconds: Option<u64>,
    started: Instant,
    state: Mutex<Settled>,
    /// Woken whenever a request's reservation is released.
    settled: tokio::sync::Notify,
}

#[derive(Default)]
struct Settled {
    usage: Usage,
    /// Requests that went out and ended, whatever their fate.
    requests: u64,
    ledger: Ledger,
}

impl Settled {
    fn spent(&self) -> Amount {
        Amount::spent(&self.usage, self.requests)
    }
}

/// One admitted request's hold; dropping it settles the request.
pub(crate) struct SubagentHold<'a> {
    budget: &'a SubagentBudget,
    amount: Amount,
}

impl Drop for SubagentHold<'_> {
    fn drop(&mut self) {
        {
            let mut state = self.budget.state.locked();
            state.ledger.release(self.amount);
            state.requests += 1;
        }
        self.budget.settled.notify_waiters();
    }
}

impl SubagentBudget {
    pub(crate) fn new(caps: SubagentCaps) -> SubagentBudget {
        SubagentBudget {
            caps: Caps {
                usd: caps.usd,
                tokens: caps.tokens,
                requests: caps.requests,
            },
            seconds: caps.seconds,
            started: Instant::now(),
            state: Mutex::new(Settled::default()),
            settled: tokio::sync::Notify::new(),
        }
    }

    /// The budget of a sub-agent that has run for `age` and spent `usage` already (a
    /// background one, loaded again).
    pub(crate) fn resume(caps: SubagentCaps, usage: Usage, age: Duration) -> SubagentBudget {
        let budget = SubagentBudget::new(caps);
        budget.state.locked().usage = usage;
        SubagentBudget {
            started: Instant::now().checked_sub(age).unwrap_or_else(Instant::now),
            ..budget
        }
    }

    /// What is left of the wall-clock cap, if there is one.
    pub(crate) fn time_left(&self) -> Option<Duration> {
        let cap = Duration::from_secs(self.seconds?);
        Some(cap.saturating_sub(self.started.elapsed()))
    }

    /// A token that fires when `parent` does or at the deadline, whichever is first.
    pub(crate) fn cancel_token(&self, parent: &CancellationToken) -> CancellationToken {
        let token = parent.child_token();
        if let Some(seconds) = self.seconds {
            let deadline = self.started + Duration::from_secs(seconds);
            let fire = token.clone();
            tokio::spawn(async move {
                tokio::select! {
                    () = tokio::time::sleep_until(deadline) => fire.cancel(),
                    () = fire.cancelled() => {}
                }
            });
        }
        token
    }

    /// The wall-clock cap, when it has passed.
    pub(crate) fn out_of_time(&self) -> Option<Spent> {
        let cap = self.seconds?;
        let used = self.started.elapsed();
        (used >= Duration::from_secs(cap)).then(|| Spent {
            message: format!(
                "budget exceeded: the sub-agent has run {:.1} s of its {cap} s (max_seconds)",
                used.as_secs_f64()
            ),
            limit: Some(Limit {
                scope: LimitScope::Subagent,
                kind: LimitKind::Seconds,
                used: used.as_secs_f64(),
                cap: cap as f64,
            }),
        })
    }

    /// Which cap is reached, if one is.
    pub(crate) fn exceeded(&self) -> Option<Spent> {
        self.out_of_time()
            .or_else(|| spent_cap(LimitScope::Subagent, self.caps, self.state.locked().spent()))
    }

    /// One request's usage was recorded.
    pub(crate) fn add(&self, usage: &Usage) {
        let mut state = self.state.locked();
        state.usage.add(usage);
        state.ledger.observe(usage);
    }

    /// Reserves this sub-agent's share for one request, waiting while its requests in
    /// flight hold the remainder.
    pub(crate) async fn reserve(
        &self,
        estimate: RequestEstimate,
        cancel: &CancellationToken,
    ) -> Result<Option<SubagentHold<'_>>, Refusal> {
        if let Some(spent) = self.out_of_time() {
            return Err(Refusal::BudgetExceeded(spent));
        }
        if !self.caps.any() {
            return Ok(None);
        }
        let amount = admit_waiting(&self.settled, cancel, || {
            let mut state = self.state.locked();
            let spent = state.spent();
            state
                .ledger
                .admit(LimitScope::Subagent, self.caps, spent, estimate)
        })
        .await?;
        Ok(Some(SubagentHold {
            budget: self,
            amount,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(tokens: u64) -> Usage {
        Usage {
            prompt_tokens: tokens,
            total_tokens: tokens,
            ..Usage::default()
        }
    }

    #[tokio::test]
    async fn each_cap_stops_the_sub_agent_with_its_kind() {
        let cancel = CancellationToken::new();
        let estimate = RequestEstimate {
            tokens: 10,
            cost: None,
        };
        // (caps, what one request uses, requests admitted before the cap, the cap's kind)
        let table = [
            (
                SubagentCaps {
                    tokens: Some(250),
                    ..SubagentCaps::default()
                },
                100,
                3,
                LimitKind::Tokens,
            ),
            (
                SubagentCaps {
                    requests: Some(2),
                    ..SubagentCaps::default()
                },
                100,
                2,
                LimitKind::Requests,
            ),
        ];
        for (caps, each, admitted, kind) in table {
            let budget = SubagentBudget::new(caps);
            let mut sent = 0;
            loop {
                match budget.reserve(estimate, &cancel).await {
                    Ok(hold) => {
                        budget.add(&usage(each));
                        drop(hold);
                        sent += 1;
                        assert!(sent < 100, "never stopped");
                    }
                    Err(Refusal::BudgetExceeded(spent)) => {
                        let limit = spent.limit.unwrap();
                        assert_eq!((limit.scope, limit.kind), (LimitScope::Subagent, kind));
                        break;
                    }
                    Err(other) => panic!("{other:?}"),
                }
            }
            assert_eq!(sent, admitted, "{caps:?}");
            assert_eq!(budget.exceeded().unwrap().limit.unwrap().kind, kind);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_wall_clock_refuses_requests_and_fires_the_cancel() {
        let budget = SubagentBudget::new(SubagentCaps {
            seconds: Some(5),
            ..SubagentCaps::default()
        });
        let parent = CancellationToken::new();
        let token = budget.cancel_token(&parent);
        assert!(budget.exceeded().is_none());
        tokio::time::sleep(Duration::from_secs(6)).await;
        assert!(token.is_cancelled());
        assert!(!parent.is_cancelled());
        let spent = budget.exceeded().unwrap();
        assert!(spent.message.contains("(max_seconds)"), "{}", spent.message);
        assert_eq!(spent.limit.unwrap().kind, LimitKind::Seconds);
        let refused = budget
            .reserve(RequestEstimate::default(), &parent)
            .await
            .err()
            .unwrap();
        assert!(matches!(refused, Refusal::BudgetExceeded(_)));
    }
}
