//! Budgets as a session feature: a session's caps (`maxBudgetUsd`, `maxTokensTotal`, fixed
//! at creation in its `SessionInfo`) as its requests spend them.
//!
//! The settled spend is every usage the session recorded (its sub-agents' included, the
//! same sum as `SessionInfo.usage`); the [`Ledger`] beside it, under the same lock, holds
//! what the requests in flight have reserved. Every
//! request reserves before it is sent (`agent::metered`) and is admitted only while the
//! settled spend plus the reservations in flight is under every budget; a request that finds
//! the remainder held by others waits for them to settle, and one that finds the settled
//! spend at the budget is refused. A lone request is always admitted while the spend is
//! under the budget, so the overshoot is at most the request that crosses it, provided the
//! requests in flight cost no more than they reserved: a reservation is the larger of the
//! request's estimated prompt and the costliest request the session has made so far.
//!
//! Sub-agents reserve from their parent session, so the overshoot is one request per
//! session, not per agent; a turn asks whether the budget is spent before each round, so a
//! spent budget starts no compaction; `session/new` refuses a dollar cap for a model with
//! no price (it could never be enforced); a fork's caps are its source's remainder.

use std::sync::{Arc, Mutex};

use amber_proto::sync::Locked;
use amber_proto::{CostUsd, SessionInfo, SessionNewParams, Usage};
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::agent::metered::{Refusal, RequestEstimate};
use crate::session::SessionError;
use crate::session::feature::{Attach, Feature, NewSession, SessionFeature};

/// The feature: caps from `session/new` (else `[agent]`), kept per request.
pub(crate) struct BudgetsFeature;

impl Feature for BudgetsFeature {
    /// A new session's budgets: the params', else `[agent]`'s. A budget in dollars needs a
    /// price: without one it could never be enforced, and a cap that silently does nothing
    /// is worse than a refusal.
    fn shape_info(&self, new: &NewSession<'_>, info: &mut SessionInfo) -> Result<(), SessionError> {
        let config = &new.services.live().config.agent;
        let params = new.params;
        info.max_budget_usd = params.max_budget_usd.or(config.max_budget_usd);
        info.max_tokens_total = params.max_tokens_total.or(config.max_tokens_total);
        let priced = new
            .services
            .llm
            .price(info.provider.as_deref(), &info.model)
            .is_some();
        if let Some(budget) = info.max_budget_usd
            && !priced
        {
            let from = if params.max_budget_usd.is_some() {
                "maxBudgetUsd"
            } else {
                "maxBudgetUsd ([agent] max_budget_usd)"
            };
            return Err(SessionError::InvalidParams(format!(
                "{from}: the model `{}` has no known price, so a budget of {budget} cannot be \
                 kept; give it one with [[provider.prices]] in config.toml, or cap tokens with \
                 maxTokensTotal instead",
                info.model
            )));
        }
        Ok(())
    }

    fn attach(&self, session: &Attach<'_>) -> Option<Arc<dyn SessionFeature>> {
        Some(Arc::new(SessionBudget::new(&session.meta.info)))
    }
}

/// Tokens and dollars together: what one request holds, or all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Amount {
    tokens: u64,
    cost: CostUsd,
}

impl Amount {
    fn plus(self, other: Amount) -> Amount {
        Amount {
            tokens: self.tokens.saturating_add(other.tokens),
            cost: self.cost.saturating_add(other.cost),
        }
    }

    fn minus(self, other: Amount) -> Amount {
        Amount {
            tokens: self.tokens.saturating_sub(other.tokens),
            cost: CostUsd::from_nanos(self.cost.nanos().saturating_sub(other.cost.nanos())),
        }
    }

    fn max(self, other: Amount) -> Amount {
        Amount {
            tokens: self.tokens.max(other.tokens),
            cost: self.cost.max(other.cost),
        }
    }

    fn spent(usage: &Usage) -> Amount {
        Amount {
            tokens: usage.total_tokens,
            cost: usage.cost_usd.unwrap_or_default(),
        }
    }
}

/// A session's budgets: `SessionInfo.max_budget_usd` and `max_tokens_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Caps {
    usd: Option<CostUsd>,
    tokens: Option<u64>,
}

impl Caps {
    fn of(info: &SessionInfo) -> Caps {
        Caps {
            usd: info.max_budget_usd,
            tokens: info.max_tokens_total,
        }
    }

    /// Whether `taken` reaches any of the budgets.
    fn reached(self, taken: Amount) -> bool {
        self.usd.is_some_and(|cap| taken.cost >= cap)
            || self.tokens.is_some_and(|cap| taken.tokens >= cap)
    }
}

/// What the requests in flight hold, and the costliest request so far.
#[derive(Debug, Default)]
struct Ledger {
    reserved: Amount,
    in_flight: usize,
    costliest: Amount,
}

/// A request's answer from the ledger.
#[derive(Debug, PartialEq, Eq)]
enum Admission {
    /// Sent now, holding this much until it settles.
    Go(Amount),
    /// The remainder is held by requests in flight: ask again once one settles.
    Wait,
    /// The budget is spent; the message names the spend and the budget.
    Spent(String),
    /// A budget in dollars, and a request whose model has no price: never sent, since
    /// its cost could not be counted.
    Unpriced,
}

impl Ledger {
    /// Admits one request expected to cost `estimate` against `caps`, `spent` settled.
    fn admit(&mut self, caps: Caps, spent: &Usage, estimate: RequestEstimate) -> Admission {
        if let Some(message) = spent_message(caps, spent) {
            return Admission::Spent(message);
        }
        // A sub-agent's agent, or `session/setModel`, may name a model without a price.
        if caps.usd.is_some() && estimate.cost.is_none() {
            return Admission::Unpriced;
        }
        let spent = Amount::spent(spent);
        if self.in_flight > 0 && caps.reached(spent.plus(self.reserved)) {
            return Admission::Wait;
        }
        let hold = self.costliest.max(Amount {
            tokens: estimate.tokens,
            cost: estimate.cost.unwrap_or_default(),
        });
        self.reserved = self.reserved.plus(hold);
        self.in_flight += 1;
        Admission::Go(hold)
    }

    /// A request settled (its usage, if any, is in the spend already).
    fn release(&mut self, hold: Amount) {
        self.reserved = self.reserved.minus(hold);
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    /// A request's usage was recorded: later reservations hold at least as much.
    fn observe(&mut self, usage: &Usage) {
        self.costliest = self.costliest.max(Amount::spent(usage));
    }

    /// What the budgets leave once the settled spend and the reservations in flight are
    /// taken: a fork's budgets.
    fn remainder(&self, caps: Caps, spent: &Usage) -> (Option<CostUsd>, Option<u64>) {
        let taken = Amount::spent(spent).plus(self.reserved);
        let usd = caps
            .usd
            .map(|cap| CostUsd::from_nanos(cap.nanos().saturating_sub(taken.cost.nanos())));
        let tokens = caps.tokens.map(|cap| cap.saturating_sub(taken.tokens));
        (usd, tokens)
    }
}

/// Why no request may be made: the settled spend reached a budget.
fn spent_message(caps: Caps, usage: &Usage) -> Option<String> {
    if let Some(budget) = caps.usd {
        let spent = usage.cost_usd.unwrap_or_default();
        if spent >= budget {
            return Some(format!(
                "budget exceeded: the session has spent ${:.6} of its ${:.6} budget \
                 (maxBudgetUsd)",
                spent.usd(),
                budget.usd()
            ));
        }
    }
    if let Some(cap) = caps.tokens
        && usage.total_tokens >= cap
    {
        return Some(format!(
            "budget exceeded: the session has used {} tokens of its {cap}-token budget \
             (maxTokensTotal)",
            usage.total_tokens
        ));
    }
    None
}

/// One session's budgets, its settled spend and the requests in flight.
pub(crate) struct SessionBudget {
    caps: Caps,
    /// The settled spend and the ledger, under one lock.
    state: Mutex<(Usage, Ledger)>,
    /// Woken whenever a request's reservation is released.
    settled: tokio::sync::Notify,
}

/// One admitted request's hold on the budget; dropping it releases the hold and wakes the
/// requests waiting for it.
struct Hold<'a> {
    budget: &'a SessionBudget,
    amount: Amount,
}

impl Drop for Hold<'_> {
    fn drop(&mut self) {
        self.budget.state.locked().1.release(self.amount);
        self.budget.settled.notify_waiters();
    }
}

impl SessionBudget {
    /// The budgets of a session with `info` (its caps, its spend so far).
    fn new(info: &SessionInfo) -> SessionBudget {
        SessionBudget {
            caps: Caps::of(info),
            state: Mutex::new((info.usage, Ledger::default())),
            settled: tokio::sync::Notify::new(),
        }
    }

    /// Reserves the budget for one request of the session or its sub-agents, waiting while
    /// requests in flight hold the remainder (see the module docs).
    async fn reserve(
        &self,
        estimate: RequestEstimate,
        cancel: &CancellationToken,
    ) -> Result<Hold<'_>, Refusal> {
        loop {
            // Registered before the ledger is read, so a release in between is not missed.
            let settled = self.settled.notified();
            tokio::pin!(settled);
            settled.as_mut().enable();
            let admission = {
                let mut state = self.state.locked();
                let (spent, ledger) = &mut *state;
                ledger.admit(self.caps, spent, estimate)
            };
            match admission {
                Admission::Go(amount) => {
                    return Ok(Hold {
                        budget: self,
                        amount,
                    });
                }
                Admission::Spent(message) => return Err(Refusal::BudgetExceeded(message)),
                Admission::Unpriced => return Err(Refusal::Unpriced),
                Admission::Wait => {
                    tokio::select! {
                        () = &mut settled => {}
                        () = cancel.cancelled() => return Err(Refusal::Cancelled),
                    }
                }
            }
        }
    }
}

impl SessionFeature for SessionBudget {
    fn usage_added(&self, usage: &Usage) {
        let mut state = self.state.locked();
        state.0.add(usage);
        state.1.observe(usage);
    }

    /// Why the session may make no further model request: its cost or its tokens reached
    /// the budget it was created with. The spend includes its sub-agents'.
    fn refuses_requests(&self) -> Option<String> {
        spent_message(self.caps, &self.state.locked().0)
    }

    fn reserve<'a>(
        &'a self,
        estimate: RequestEstimate,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<Option<Box<dyn Send + 'a>>, Refusal>> {
        Box::pin(async move {
            let hold = self.reserve(estimate, cancel).await?;
            Ok(Some(Box::new(hold) as Box<dyn Send + 'a>))
        })
    }

    /// What the budgets leave now (spent and in flight taken), not a fresh budget of the
    /// same size: forking is no way around a budget.
    fn fork(&self, params: &mut SessionNewParams) {
        let state = self.state.locked();
        let (usd, tokens) = state.1.remainder(self.caps, &state.0);
        params.max_budget_usd = usd;
        params.max_tokens_total = tokens;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CALL: Usage = Usage {
        prompt_tokens: 1000,
        completion_tokens: 100,
        cached_tokens: 0,
        total_tokens: 1100,
        cache_write_tokens: 0,
        cost_usd: None,
    };

    fn caps(tokens: Option<u64>, usd: Option<f64>) -> Caps {
        Caps {
            tokens,
            usd: usd.and_then(CostUsd::from_usd),
        }
    }

    fn estimate(tokens: u64) -> RequestEstimate {
        RequestEstimate { tokens, cost: None }
    }

    fn priced_estimate(tokens: u64) -> RequestEstimate {
        RequestEstimate {
            tokens,
            cost: Some(CostUsd::ZERO),
        }
    }

    fn priced(usd: f64) -> Usage {
        Usage {
            cost_usd: CostUsd::from_usd(usd),
            ..CALL
        }
    }

    /// Requests admitted at once, none settling, until one must wait.
    fn admitted_at_once(
        ledger: &mut Ledger,
        caps: Caps,
        spent: &Usage,
        each: RequestEstimate,
    ) -> usize {
        let mut admitted = 0;
        while let Admission::Go(_) = ledger.admit(caps, spent, each) {
            admitted += 1;
            assert!(admitted < 1000, "never waits");
        }
        admitted
    }

    #[test]
    fn in_flight_reservations_count_as_spent() {
        // (budget in tokens, spent, each reservation, admitted at once)
        let table = [
            (6600, 1100, 1100, 5),
            (6600, 0, 1100, 6),
            (7150, 1100, 1100, 6),
            (6600, 1100, 3000, 2),
            // A lone request goes out whatever its estimate, while anything is left.
            (6600, 6000, 3000, 1),
        ];
        for (cap, spent, each, expected) in table {
            let usage = Usage {
                total_tokens: spent,
                ..Usage::default()
            };
            let mut ledger = Ledger::default();
            let got = admitted_at_once(&mut ledger, caps(Some(cap), None), &usage, estimate(each));
            assert_eq!(got, expected, "cap {cap}, spent {spent}, each {each}");
        }
    }

    #[test]
    fn a_spent_budget_refuses_and_names_itself() {
        let mut ledger = Ledger::default();
        let Admission::Spent(message) = ledger.admit(caps(Some(1000), None), &CALL, estimate(1))
        else {
            panic!("admitted past the budget");
        };
        assert!(
            message.contains("1100 tokens of its 1000-token"),
            "{message}"
        );

        let spent = priced(0.001);
        let Admission::Spent(message) = ledger.admit(caps(None, Some(0.001)), &spent, estimate(1))
        else {
            panic!("admitted past the budget");
        };
        assert!(message.contains("(maxBudgetUsd)"), "{message}");
    }

    #[test]
    fn a_dollar_budget_sends_no_request_it_cannot_price() {
        let mut ledger = Ledger::default();
        let usd = caps(None, Some(1.0));
        assert_eq!(
            ledger.admit(usd, &Usage::default(), estimate(10)),
            Admission::Unpriced
        );
        assert_eq!(ledger.in_flight, 0);
        // A token budget needs no price.
        let tokens = caps(Some(10_000), None);
        assert!(matches!(
            ledger.admit(tokens, &Usage::default(), estimate(10)),
            Admission::Go(_)
        ));
    }

    #[test]
    fn without_a_budget_nothing_waits() {
        let mut ledger = Ledger::default();
        for _ in 0..100 {
            assert!(matches!(
                ledger.admit(Caps::default(), &CALL, estimate(u64::MAX)),
                Admission::Go(_)
            ));
        }
    }

    #[test]
    fn releases_make_room_and_the_costliest_request_sets_the_floor() {
        let caps = caps(None, Some(0.006));
        let mut spent = Usage::default();
        let mut ledger = Ledger::default();
        // Nothing observed yet: the estimate (priced at $0 here) reserves no dollars.
        let Admission::Go(first) = ledger.admit(caps, &spent, priced_estimate(10)) else {
            panic!("the first request waits");
        };
        spent.add(&priced(0.001));
        ledger.observe(&priced(0.001));
        ledger.release(first);
        assert_eq!(ledger.in_flight, 0);
        assert_eq!(ledger.reserved, Amount::default());
        // $0.001 spent, each reservation $0.001: five more at once, then a wait.
        assert_eq!(
            admitted_at_once(&mut ledger, caps, &spent, priced_estimate(10)),
            5
        );
    }

    #[test]
    fn the_remainder_takes_the_spend_and_what_is_in_flight() {
        let caps = caps(Some(3300), Some(0.003));
        let mut spent = priced(0.001);
        let mut ledger = Ledger::default();
        ledger.observe(&priced(0.001));
        assert!(matches!(
            ledger.admit(caps, &spent, priced_estimate(10)),
            Admission::Go(_)
        ));
        let (usd, tokens) = ledger.remainder(caps, &spent);
        assert_eq!(tokens, Some(1100));
        assert_eq!(usd, CostUsd::from_usd(0.001));
        // Overspent: nothing is left, never less.
        spent.add(&priced(0.005));
        let (usd, tokens) = ledger.remainder(caps, &spent);
        assert_eq!((usd, tokens), (Some(CostUsd::ZERO), Some(0)));
    }
}
