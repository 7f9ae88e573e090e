//! Budgets as a session feature: a session's caps (`maxBudgetUsd`, `maxTokensTotal`, fixed
//! at creation in its `SessionInfo`) as its requests spend them.
//!
//! The settled spend is every usage the session recorded (its sub-agents' included, the
//! same sum as `SessionInfo.usage`); the [`Ledger`] beside it, under the same lock, holds
//! what the requests in flight have reserved. Every request reserves before it is sent
//! (`agent::metered`) and is admitted as `agent::ledger` says: the overshoot is at most the
//! request that crosses the budget.
//!
//! Sub-agents reserve from their parent session, so the overshoot is one request per
//! session, not per agent; a turn asks whether the budget is spent before each round, so a
//! spent budget starts no compaction; `session/new` refuses a dollar cap for a model with
//! no price (it could never be enforced); a fork's caps are its source's remainder.

use std::sync::{Arc, Mutex};

use amber_proto::sync::Locked;
use amber_proto::{LimitScope, SessionInfo, SessionNewParams, Usage};
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::agent::ledger::{Amount, Caps, Ledger, Spent, admit_waiting, spent_cap};
use crate::agent::metered::{Refusal, RequestEstimate, RequestMeta};
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

/// A session's budgets: `SessionInfo.max_budget_usd` and `max_tokens_total`.
fn caps_of(info: &SessionInfo) -> Caps {
    Caps {
        usd: info.max_budget_usd,
        tokens: info.max_tokens_total,
        requests: None,
    }
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
            caps: caps_of(info),
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
        let amount = admit_waiting(&self.settled, cancel, || {
            let mut state = self.state.locked();
            let (spent, ledger) = &mut *state;
            ledger.admit(
                LimitScope::Session,
                self.caps,
                Amount::spent(spent, 0),
                estimate,
            )
        })
        .await?;
        Ok(Hold {
            budget: self,
            amount,
        })
    }
}

impl SessionFeature for SessionBudget {
    fn usage_added(&self, usage: &Usage, _model: &str) {
        let mut state = self.state.locked();
        state.0.add(usage);
        state.1.observe(usage);
    }

    /// Why the session may make no further model request: its cost or its tokens reached
    /// the budget it was created with. The spend includes its sub-agents'.
    fn refuses_requests(&self) -> Option<Spent> {
        spent_cap(
            LimitScope::Session,
            self.caps,
            Amount::spent(&self.state.locked().0, 0),
        )
    }

    fn reserve<'a>(
        &'a self,
        request: RequestMeta<'a>,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<Option<Box<dyn Send + 'a>>, Refusal>> {
        Box::pin(async move {
            let hold = self.reserve(request.estimate, cancel).await?;
            Ok(Some(Box::new(hold) as Box<dyn Send + 'a>))
        })
    }

    /// What the budgets leave now (spent and in flight taken), not a fresh budget of the
    /// same size: forking is no way around a budget.
    fn fork(&self, params: &mut SessionNewParams) {
        let state = self.state.locked();
        let (usd, tokens) = self
            .caps
            .remainder(Amount::spent(&state.0, 0).plus(state.1.reserved()));
        params.max_budget_usd = usd;
        params.max_tokens_total = tokens;
    }
}
