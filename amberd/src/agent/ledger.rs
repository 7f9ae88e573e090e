//! The arithmetic of a spending cap, shared by every holder of one (a session's budget,
//! a sub-agent's caps): what has settled, what the requests in flight hold, and whether
//! one more request may go out.
//!
//! A request is admitted only while settled + reserved is under every cap; one that finds
//! the remainder held by requests in flight waits for them to settle, and one that finds
//! the settled spend at a cap is refused with a [`Spent`] that names the cap. A lone
//! request is always admitted while the spend is under the caps, so the spend passes a cap
//! by at most the request that crosses it, provided the requests in flight cost no more
//! than they reserved: a reservation is the larger of the request's estimated prompt and
//! the costliest request seen so far.

use amber_proto::{CostUsd, Limit, LimitKind, LimitScope, Usage};

use super::metered::RequestEstimate;

/// Tokens, dollars and requests together: what one request holds, or all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Amount {
    pub tokens: u64,
    pub cost: CostUsd,
    pub requests: u64,
}

impl Amount {
    pub(crate) fn plus(self, other: Amount) -> Amount {
        Amount {
            tokens: self.tokens.saturating_add(other.tokens),
            cost: self.cost.saturating_add(other.cost),
            requests: self.requests.saturating_add(other.requests),
        }
    }

    fn minus(self, other: Amount) -> Amount {
        Amount {
            tokens: self.tokens.saturating_sub(other.tokens),
            cost: CostUsd::from_nanos(self.cost.nanos().saturating_sub(other.cost.nanos())),
            requests: self.requests.saturating_sub(other.requests),
        }
    }

    fn max(self, other: Amount) -> Amount {
        Amount {
            tokens: self.tokens.max(other.tokens),
            cost: self.cost.max(other.cost),
            requests: self.requests.max(other.requests),
        }
    }

    /// What `requests` requests that used `usage` in all spent.
    pub(crate) fn spent(usage: &Usage, requests: u64) -> Amount {
        Amount {
            tokens: usage.total_tokens,
            cost: usage.cost_usd.unwrap_or_default(),
            requests,
        }
    }
}

/// The caps of one holder; `None` caps nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Caps {
    pub usd: Option<CostUsd>,
    pub tokens: Option<u64>,
    pub requests: Option<u64>,
}

impl Caps {
    /// Whether `taken` reaches any of the caps.
    fn reached(self, taken: Amount) -> bool {
        self.usd.is_some_and(|cap| taken.cost >= cap)
            || self.tokens.is_some_and(|cap| taken.tokens >= cap)
            || self.requests.is_some_and(|cap| taken.requests >= cap)
    }

    /// Whether any cap is set.
    pub(crate) fn any(self) -> bool {
        self.usd.is_some() || self.tokens.is_some() || self.requests.is_some()
    }

    /// What the caps leave once `taken` is spent (never less than nothing).
    pub(crate) fn remainder(self, taken: Amount) -> (Option<CostUsd>, Option<u64>) {
        let usd = self
            .usd
            .map(|cap| CostUsd::from_nanos(cap.nanos().saturating_sub(taken.cost.nanos())));
        let tokens = self.tokens.map(|cap| cap.saturating_sub(taken.tokens));
        (usd, tokens)
    }
}

/// Why no more requests may be made: the message names the spend and the cap, and
/// `limit` says it in types, for the turn's `error.limit`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Spent {
    pub message: String,
    pub limit: Option<Limit>,
}

impl Spent {
    /// A refusal that names no cap in types.
    pub(crate) fn untyped(message: String) -> Spent {
        Spent {
            message,
            limit: None,
        }
    }
}

/// What the requests in flight hold, and the costliest request so far.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    reserved: Amount,
    in_flight: usize,
    costliest: Amount,
}

/// A request's answer from the ledger (`T`: what an admitted request holds).
#[derive(Debug, PartialEq)]
pub(crate) enum Admission<T = Amount> {
    /// Sent now, holding this much until it settles.
    Go(T),
    /// The remainder is held by requests in flight: ask again once one settles.
    Wait,
    /// A cap is reached.
    Spent(Spent),
    /// A cap in dollars, and a request whose model has no price: never sent, since its
    /// cost could not be counted.
    Unpriced,
}

impl Ledger {
    /// Admits one request expected to cost `estimate` against `caps` (`scope`'s),
    /// `spent` settled.
    pub(crate) fn admit(
        &mut self,
        scope: LimitScope,
        caps: Caps,
        spent: Amount,
        estimate: RequestEstimate,
    ) -> Admission {
        if let Some(spent) = spent_cap(scope, caps, spent) {
            return Admission::Spent(spent);
        }
        // A sub-agent's agent, or `session/setModel`, may name a model without a price.
        if caps.usd.is_some() && estimate.cost.is_none() {
            return Admission::Unpriced;
        }
        if self.in_flight > 0 && caps.reached(spent.plus(self.reserved)) {
            return Admission::Wait;
        }
        let hold = self.costliest.max(Amount {
            tokens: estimate.tokens,
            cost: estimate.cost.unwrap_or_default(),
            requests: 1,
        });
        self.reserved = self.reserved.plus(hold);
        self.in_flight += 1;
        Admission::Go(hold)
    }

    /// A request settled (its usage, if any, is in the spend already).
    pub(crate) fn release(&mut self, hold: Amount) {
        self.reserved = self.reserved.minus(hold);
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    /// A request's usage was recorded: later reservations hold at least as much.
    pub(crate) fn observe(&mut self, usage: &Usage) {
        self.costliest = self.costliest.max(Amount::spent(usage, 1));
    }

    /// What the requests in flight hold.
    pub(crate) fn reserved(&self) -> Amount {
        self.reserved
    }
}

/// Asks `admit` until it admits (`Go`) or refuses, waiting for `settled` (woken whenever a
/// reservation is released) while it says `Wait`; a cancel ends the wait.
pub(crate) async fn admit_waiting<T>(
    settled: &tokio::sync::Notify,
    cancel: &tokio_util::sync::CancellationToken,
    mut admit: impl FnMut() -> Admission<T>,
) -> Result<T, super::metered::Refusal> {
    use super::metered::Refusal;
    loop {
        // Registered before the ledger is read, so a release in between is not missed.
        let released = settled.notified();
        tokio::pin!(released);
        released.as_mut().enable();
        match admit() {
            Admission::Go(held) => return Ok(held),
            Admission::Spent(spent) => return Err(Refusal::BudgetExceeded(spent)),
            Admission::Unpriced => return Err(Refusal::Unpriced),
            Admission::Wait => {
                tokio::select! {
                    () = &mut released => {}
                    () = cancel.cancelled() => return Err(Refusal::Cancelled),
                }
            }
        }
    }
}

/// Which cap `spent` reached, if any, said in `scope`'s words.
pub(crate) fn spent_cap(scope: LimitScope, caps: Caps, spent: Amount) -> Option<Spent> {
    let whose = match scope {
        LimitScope::Session => "the session",
        LimitScope::Subagent => "the sub-agent",
        LimitScope::Parent => "the parent session",
        LimitScope::Daily => "the daemon today",
        LimitScope::Monthly => "the daemon this month",
        LimitScope::Model => "the model",
        LimitScope::Pool => "the pool",
    };
    let limit = |kind, used: f64, cap: f64| {
        Some(Limit {
            scope,
            kind,
            used,
            cap,
        })
    };
    if let Some(cap) = caps.usd
        && spent.cost >= cap
    {
        let key = match scope {
            LimitScope::Subagent => "max_usd",
            _ => "maxBudgetUsd",
        };
        return Some(Spent {
            message: format!(
                "budget exceeded: {whose} has spent ${:.6} of its ${:.6} budget ({key})",
                spent.cost.usd(),
                cap.usd()
            ),
            limit: limit(LimitKind::Usd, spent.cost.usd(), cap.usd()),
        });
    }
    if let Some(cap) = caps.tokens
        && spent.tokens >= cap
    {
        let key = match scope {
            LimitScope::Subagent => "max_tokens",
            _ => "maxTokensTotal",
        };
        return Some(Spent {
            message: format!(
                "budget exceeded: {whose} has used {} tokens of its {cap}-token budget ({key})",
                spent.tokens
            ),
            limit: limit(LimitKind::Tokens, spent.tokens as f64, cap as f64),
        });
    }
    if let Some(cap) = caps.requests
        && spent.requests >= cap
    {
        return Some(Spent {
            message: format!(
                "budget exceeded: {whose} has made {} model requests of its {cap} \
                 (max_requests)",
                spent.requests
            ),
            limit: limit(LimitKind::Requests, spent.requests as f64, cap as f64),
        });
    }
    None
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

    const SESSION: LimitScope = LimitScope::Session;

    fn caps(tokens: Option<u64>, usd: Option<f64>) -> Caps {
        Caps {
            tokens,
            usd: usd.and_then(CostUsd::from_usd),
            requests: None,
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

    fn spent(usage: &Usage) -> Amount {
        Amount::spent(usage, 0)
    }

    /// Requests admitted at once, none settling, until one must wait.
    fn admitted_at_once(
        ledger: &mut Ledger,
        caps: Caps,
        spent: Amount,
        each: RequestEstimate,
    ) -> usize {
        let mut admitted = 0;
        while let Admission::Go(_) = ledger.admit(SESSION, caps, spent, each) {
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
            let taken = Amount {
                tokens: spent,
                ..Amount::default()
            };
            let mut ledger = Ledger::default();
            let got = admitted_at_once(&mut ledger, caps(Some(cap), None), taken, estimate(each));
            assert_eq!(got, expected, "cap {cap}, spent {spent}, each {each}");
        }
    }

    #[test]
    fn a_request_cap_admits_that_many_in_flight_and_settled_together() {
        let caps = Caps {
            requests: Some(3),
            ..Caps::default()
        };
        let mut ledger = Ledger::default();
        assert_eq!(
            admitted_at_once(&mut ledger, caps, Amount::default(), estimate(1)),
            3
        );
        let two_made = Amount {
            requests: 2,
            ..Amount::default()
        };
        let mut ledger = Ledger::default();
        assert_eq!(
            admitted_at_once(&mut ledger, caps, two_made, estimate(1)),
            1
        );
        let Admission::Spent(spent) = Ledger::default().admit(
            LimitScope::Subagent,
            caps,
            Amount {
                requests: 3,
                ..Amount::default()
            },
            estimate(1),
        ) else {
            panic!("a fourth request was admitted");
        };
        assert!(
            spent.message.contains("(max_requests)"),
            "{}",
            spent.message
        );
        let limit = spent.limit.unwrap();
        assert_eq!(
            (limit.scope, limit.kind, limit.used, limit.cap),
            (LimitScope::Subagent, LimitKind::Requests, 3.0, 3.0)
        );
    }

    #[test]
    fn a_spent_budget_refuses_and_names_itself() {
        let mut ledger = Ledger::default();
        let Admission::Spent(refused) =
            ledger.admit(SESSION, caps(Some(1000), None), spent(&CALL), estimate(1))
        else {
            panic!("admitted past the budget");
        };
        assert!(
            refused.message.contains("1100 tokens of its 1000-token"),
            "{}",
            refused.message
        );
        assert_eq!(refused.limit.unwrap().kind, LimitKind::Tokens);

        let Admission::Spent(refused) = ledger.admit(
            SESSION,
            caps(None, Some(0.001)),
            spent(&priced(0.001)),
            estimate(1),
        ) else {
            panic!("admitted past the budget");
        };
        assert!(
            refused.message.contains("(maxBudgetUsd)"),
            "{}",
            refused.message
        );
        let limit = refused.limit.unwrap();
        assert_eq!((limit.scope, limit.kind), (SESSION, LimitKind::Usd));
    }

    #[test]
    fn a_dollar_budget_sends_no_request_it_cannot_price() {
        let mut ledger = Ledger::default();
        let usd = caps(None, Some(1.0));
        assert_eq!(
            ledger.admit(SESSION, usd, Amount::default(), estimate(10)),
            Admission::Unpriced
        );
        assert_eq!(ledger.in_flight, 0);
        // A token budget needs no price.
        let tokens = caps(Some(10_000), None);
        assert!(matches!(
            ledger.admit(SESSION, tokens, Amount::default(), estimate(10)),
            Admission::Go(_)
        ));
    }

    #[test]
    fn without_a_budget_nothing_waits() {
        let mut ledger = Ledger::default();
        for _ in 0..100 {
            assert!(matches!(
                ledger.admit(SESSION, Caps::default(), spent(&CALL), estimate(u64::MAX)),
                Admission::Go(_)
            ));
        }
    }

    #[test]
    fn releases_make_room_and_the_costliest_request_sets_the_floor() {
        let caps = caps(None, Some(0.006));
        let mut usage = Usage::default();
        let mut ledger = Ledger::default();
        // Nothing observed yet: the estimate (priced at $0 here) reserves no dollars.
        let Admission::Go(first) = ledger.admit(SESSION, caps, spent(&usage), priced_estimate(10))
        else {
            panic!("the first request waits");
        };
        usage.add(&priced(0.001));
        ledger.observe(&priced(0.001));
        ledger.release(first);
        assert_eq!(ledger.in_flight, 0);
        assert_eq!(ledger.reserved, Amount::default());
        // $0.001 spent, each reservation $0.001: five more at once, then a wait.
        assert_eq!(
            admitted_at_once(&mut ledger, caps, spent(&usage), priced_estimate(10)),
            5
        );
    }

    #[test]
    fn the_remainder_takes_the_spend_and_what_is_in_flight() {
        let caps = caps(Some(3300), Some(0.003));
        let mut usage = priced(0.001);
        let mut ledger = Ledger::default();
        ledger.observe(&priced(0.001));
        assert!(matches!(
            ledger.admit(SESSION, caps, spent(&usage), priced_estimate(10)),
            Admission::Go(_)
        ));
        let (usd, tokens) = caps.remainder(spent(&usage).plus(ledger.reserved()));
        assert_eq!(tokens, Some(1100));
        assert_eq!(usd, CostUsd::from_usd(0.001));
        // Overspent: nothing is left, never less.
        usage.add(&priced(0.005));
        let (usd, tokens) = caps.remainder(spent(&usage).plus(ledger.reserved()));
        assert_eq!((usd, tokens), (Some(CostUsd::ZERO), Some(0)));
    }
}
