//! Daemon-wide budgets as a session feature: `[budget] daily_usd` and `monthly_usd` cap
//! what every session of the daemon spends together in a day and a month of the daemon's
//! local time. Every request of every session reserves from them before it is sent
//! (`agent::ledger`, as a session's budget), so once a period's cap is reached nothing more
//! is sent anywhere until the next period; requests already in flight may pass it, one per
//! session at most.
//!
//! **Durable:** the spend book, `<data_dir>/spend/YYYY-MM.log`, holds one line per priced
//! request (`{"day","session","model","nanos"}`), appended in one write before the request's
//! usage event is published; at start the month's file is read again (a torn last line is
//! dropped), so a restart forgets nothing spent. `[budget] warn_at` (a fraction, default
//! 0.8) publishes a durable `budget_warning` in the session whose request first passed it,
//! once per cap and period.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use amber_proto::sync::Locked;
use amber_proto::{BudgetUse, CostUsd, EventKind, LimitScope, Usage};
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::agent::ledger::{Admission, Amount, Caps, Ledger, Spent, spent_cap};
use crate::agent::metered::{Refusal, RequestEstimate};
use crate::session::SessionShared;
use crate::session::feature::{Attach, Feature, SessionFeature};

/// `[budget]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BudgetConfig {
    /// What all sessions together may spend in a day (local time), in US dollars.
    pub daily_usd: Option<CostUsd>,
    /// ... in a month.
    pub monthly_usd: Option<CostUsd>,
    /// The share of a cap whose crossing is announced (`budget_warning`); default 0.8.
    pub warn_at: Option<f64>,
}

impl BudgetConfig {
    pub(crate) fn check(&self) -> Result<(), String> {
        if let Some(warn) = self.warn_at
            && !(warn > 0.0 && warn <= 1.0)
        {
            return Err(format!("budget.warn_at: {warn} is not in (0, 1]"));
        }
        Ok(())
    }

    fn warn_at(&self) -> f64 {
        self.warn_at.unwrap_or(0.8)
    }
}

/// A day and a month of local time: `2026-12-07`, `2026-12`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Period {
    day: String,
    month: String,
}

impl Period {
    fn now() -> Period {
        let (year, month, day) = local_date();
        Period {
            day: format!("{year:04}-{month:02}-{day:02}"),
            month: format!("{year:04}-{month:02}"),
        }
    }
}

/// Today's date in the daemon's local time zone (`TZ`, else the system's).
fn local_date() -> (i32, u32, u32) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let t = libc::time_t::try_from(now).unwrap_or(libc::time_t::MAX);
    // SAFETY: `localtime_r` writes only into the `tm` we pass and reads `t`; both live for
    // the call.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let filled = unsafe { !libc::localtime_r(&t, &mut tm).is_null() };
    if !filled {
        return (1970, 1, 1);
    }
    (
        tm.tm_year + 1900,
        u32::try_from(tm.tm_mon + 1).unwrap_or(1),
        u32::try_from(tm.tm_mday).unwrap_or(1),
    )
}

/// One line of the spend book.
#[derive(Debug, Serialize, Deserialize)]
struct Line {
    day: String,
    session: String,
    model: String,
    nanos: u64,
}

/// What the daemon spent this day and month, the requests in flight, and the book.
pub(crate) struct SpendBook {
    dir: Option<PathBuf>,
    state: Mutex<BookState>,
    settled: tokio::sync::Notify,
}

struct BookState {
    period: Period,
    day: CostUsd,
    month: CostUsd,
    daily: Ledger,
    monthly: Ledger,
    /// Caps already announced this period (`daily`, `monthly`).
    warned: HashSet<LimitScope>,
}

impl SpendBook {
    /// The book under `data_dir` (none in memory-only daemons), this month's spend read.
    pub(crate) fn open(data_dir: Option<&Path>) -> SpendBook {
        let period = Period::now();
        let dir = data_dir.map(|d| d.join("spend"));
        let (day, month) = dir
            .as_deref()
            .map(|dir| read_month(&dir.join(format!("{}.log", period.month)), &period.day))
            .unwrap_or_default();
        SpendBook {
            dir,
            state: Mutex::new(BookState {
                period,
                day,
                month,
                daily: Ledger::default(),
                monthly: Ledger::default(),
                warned: HashSet::new(),
            }),
            settled: tokio::sync::Notify::new(),
        }
    }

    /// The state, rolled into the current period first.
    fn current(&self) -> std::sync::MutexGuard<'_, BookState> {
        let mut state = self.state.locked();
        let now = Period::now();
        if now.month != state.period.month {
            state.month = CostUsd::ZERO;
            state.warned.clear();
        }
        if now.day != state.period.day {
            state.day = CostUsd::ZERO;
            state.warned.remove(&LimitScope::Daily);
        }
        state.period = now;
        state
    }

    /// Records one priced request; the caps whose `warn_at` it crossed first.
    fn record(
        &self,
        config: &BudgetConfig,
        session: &str,
        model: &str,
        cost: CostUsd,
    ) -> Vec<BudgetUse> {
        let mut state = self.current();
        state.day = state.day.saturating_add(cost);
        state.month = state.month.saturating_add(cost);
        if let Some(dir) = &self.dir {
            let line = Line {
                day: state.period.day.clone(),
                session: session.to_owned(),
                model: model.to_owned(),
                nanos: cost.nanos(),
            };
            if let Err(err) = append(dir, &state.period.month, &line) {
                tracing::warn!(%err, "cannot write the spend book");
            }
        }
        let mut crossed = Vec::new();
        for used in uses(config, &state) {
            let near = used.spent_usd.usd() >= used.cap_usd.usd() * config.warn_at();
            if near && state.warned.insert(used.scope) {
                crossed.push(used);
            }
        }
        crossed
    }

    /// The daemon's spend against each cap of `config`.
    pub(crate) fn uses(&self, config: &BudgetConfig) -> Vec<BudgetUse> {
        uses(config, &self.current())
    }
}

fn uses(config: &BudgetConfig, state: &BookState) -> Vec<BudgetUse> {
    let mut out = Vec::new();
    if let Some(cap) = config.daily_usd {
        out.push(BudgetUse {
            scope: LimitScope::Daily,
            period: state.period.day.clone(),
            spent_usd: state.day,
            cap_usd: cap,
        });
    }
    if let Some(cap) = config.monthly_usd {
        out.push(BudgetUse {
            scope: LimitScope::Monthly,
            period: state.period.month.clone(),
            spent_usd: state.month,
            cap_usd: cap,
        });
    }
    out
}

/// Appends one line in one write, so a crash leaves at most a torn last line.
fn append(dir: &Path, month: &str, line: &Line) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut text = serde_json::to_string(line).map_err(std::io::Error::other)?;
    text.push('\n');
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("{month}.log")))?;
    file.write_all(text.as_bytes())
}

/// A month's file: what `day` spent and what the month spent. Lines that do not parse
/// (a torn last line) are skipped.
fn read_month(path: &Path, day: &str) -> (CostUsd, CostUsd) {
    let Ok(text) = std::fs::read_to_string(path) else {
        return (CostUsd::ZERO, CostUsd::ZERO);
    };
    let mut totals = (CostUsd::ZERO, CostUsd::ZERO);
    for line in text
        .lines()
        .filter_map(|l| serde_json::from_str::<Line>(l).ok())
    {
        let cost = CostUsd::from_nanos(line.nanos);
        if line.day == day {
            totals.0 = totals.0.saturating_add(cost);
        }
        totals.1 = totals.1.saturating_add(cost);
    }
    totals
}

/// The feature: the daemon's book, shared by every session.
pub(crate) struct DaemonBudgetFeature {
    book: Arc<SpendBook>,
}

impl DaemonBudgetFeature {
    pub(crate) fn new(book: Arc<SpendBook>) -> Self {
        DaemonBudgetFeature { book }
    }
}

impl Feature for DaemonBudgetFeature {
    fn attach(&self, session: &Attach<'_>) -> Option<Arc<dyn SessionFeature>> {
        Some(Arc::new(SessionSpend {
            book: self.book.clone(),
            shared: session.session.clone(),
            services: session.services.clone(),
        }))
    }
}

/// One session's share of the daemon's budgets.
struct SessionSpend {
    book: Arc<SpendBook>,
    shared: Weak<SessionShared>,
    services: Arc<crate::session::services::Services>,
}

/// One admitted request's hold on the daemon's caps.
struct Hold<'a> {
    book: &'a SpendBook,
    daily: Option<Amount>,
    monthly: Option<Amount>,
}

impl Drop for Hold<'_> {
    fn drop(&mut self) {
        {
            let mut state = self.book.state.locked();
            if let Some(amount) = self.daily {
                state.daily.release(amount);
            }
            if let Some(amount) = self.monthly {
                state.monthly.release(amount);
            }
        }
        self.book.settled.notify_waiters();
    }
}

fn caps(usd: Option<CostUsd>) -> Caps {
    Caps {
        usd,
        tokens: None,
        requests: None,
    }
}

impl SessionSpend {
    fn config(&self) -> BudgetConfig {
        self.services.live().config.budget.clone()
    }

    /// A daemon cap reached, if one is.
    fn spent(&self, config: &BudgetConfig) -> Option<Spent> {
        let state = self.book.current();
        let spent = |cost| Amount {
            cost,
            ..Amount::default()
        };
        spent_cap(LimitScope::Daily, caps(config.daily_usd), spent(state.day))
            .or_else(|| {
                spent_cap(
                    LimitScope::Monthly,
                    caps(config.monthly_usd),
                    spent(state.month),
                )
            })
            .map(|s| Spent {
                message: format!(
                    "{} ([budget] of the daemon, all sessions together)",
                    s.message
                ),
                ..s
            })
    }

    async fn reserve(
        &self,
        estimate: RequestEstimate,
        cancel: &CancellationToken,
    ) -> Result<Option<Hold<'_>>, Refusal> {
        let config = self.config();
        if config.daily_usd.is_none() && config.monthly_usd.is_none() {
            return Ok(None);
        }
        loop {
            let settled = self.book.settled.notified();
            tokio::pin!(settled);
            settled.as_mut().enable();
            let outcome = {
                let mut state = self.book.current();
                let day = Amount {
                    cost: state.day,
                    ..Amount::default()
                };
                let month = Amount {
                    cost: state.month,
                    ..Amount::default()
                };
                let daily =
                    state
                        .daily
                        .admit(LimitScope::Daily, caps(config.daily_usd), day, estimate);
                match daily {
                    Admission::Go(held) => {
                        match state.monthly.admit(
                            LimitScope::Monthly,
                            caps(config.monthly_usd),
                            month,
                            estimate,
                        ) {
                            Admission::Go(month_held) => Ok(Some((held, month_held))),
                            other => {
                                state.daily.release(held);
                                Err(other)
                            }
                        }
                    }
                    other => Err(other),
                }
            };
            match outcome {
                Ok(Some((daily, monthly))) => {
                    return Ok(Some(Hold {
                        book: &self.book,
                        daily: Some(daily),
                        monthly: Some(monthly),
                    }));
                }
                Ok(None) => return Ok(None),
                Err(Admission::Spent(spent)) => {
                    return Err(Refusal::BudgetExceeded(Spent {
                        message: format!(
                            "{} ([budget] of the daemon, all sessions together)",
                            spent.message
                        ),
                        ..spent
                    }));
                }
                Err(Admission::Unpriced) => return Err(Refusal::Unpriced),
                Err(Admission::Wait | Admission::Go(_)) => {
                    tokio::select! {
                        () = &mut settled => {}
                        () = cancel.cancelled() => return Err(Refusal::Cancelled),
                    }
                }
            }
        }
    }
}

impl SessionFeature for SessionSpend {
    fn usage_added(&self, usage: &Usage) {
        let Some(cost) = usage.cost_usd.filter(|c| *c > CostUsd::ZERO) else {
            return;
        };
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        let config = self.config();
        let crossed = self.book.record(&config, &shared.id, &shared.model(), cost);
        let turn = shared.lock_live().turn_id.clone();
        for used in crossed {
            shared.hub.publish(
                turn.as_deref(),
                EventKind::BudgetWarning {
                    scope: used.scope,
                    period: used.period,
                    spent_usd: used.spent_usd,
                    cap_usd: used.cap_usd,
                },
            );
        }
    }

    fn refuses_requests(&self) -> Option<Spent> {
        self.spent(&self.config())
    }

    fn reserve<'a>(
        &'a self,
        estimate: RequestEstimate,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<Option<Box<dyn Send + 'a>>, Refusal>> {
        Box::pin(async move {
            let hold = self.reserve(estimate, cancel).await?;
            Ok(hold.map(|hold| Box::new(hold) as Box<dyn Send + 'a>))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usd(v: f64) -> CostUsd {
        CostUsd::from_usd(v).unwrap()
    }

    #[test]
    fn the_book_is_read_back_and_a_torn_line_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let config = BudgetConfig {
            daily_usd: Some(usd(1.0)),
            monthly_usd: Some(usd(10.0)),
            warn_at: None,
        };
        let book = SpendBook::open(Some(dir.path()));
        book.record(&config, "s1", "m", usd(0.25));
        book.record(&config, "s2", "m", usd(0.5));
        let period = Period::now();
        let file = dir
            .path()
            .join("spend")
            .join(format!("{}.log", period.month));
        // A line of an earlier day counts for the month only; a torn one not at all.
        let mut text = std::fs::read_to_string(&file).unwrap();
        text.push_str(
            "{\"day\":\"1999-01-01\",\"session\":\"old\",\"model\":\"m\",\"nanos\":2000000000}\n",
        );
        text.push_str("{\"day\":\"");
        std::fs::write(&file, text).unwrap();
        let again = SpendBook::open(Some(dir.path()));
        let uses = again.uses(&config);
        assert_eq!(uses[0].spent_usd, usd(0.75), "{uses:?}");
        assert_eq!(uses[1].spent_usd, usd(2.75), "{uses:?}");
        assert_eq!(uses[0].period, period.day);
    }

    #[test]
    fn each_cap_warns_once_per_period() {
        let config = BudgetConfig {
            daily_usd: Some(usd(1.0)),
            monthly_usd: Some(usd(100.0)),
            warn_at: Some(0.5),
        };
        let book = SpendBook::open(None);
        assert!(book.record(&config, "s", "m", usd(0.4)).is_empty());
        let crossed = book.record(&config, "s", "m", usd(0.2));
        assert_eq!(crossed.len(), 1);
        assert_eq!(crossed[0].scope, LimitScope::Daily);
        assert!(book.record(&config, "s", "m", usd(0.2)).is_empty());
    }

    #[test]
    fn warn_at_must_be_a_share() {
        for bad in [0.0, -1.0, 1.5] {
            let config = BudgetConfig {
                warn_at: Some(bad),
                ..BudgetConfig::default()
            };
            assert!(config.check().is_err(), "{bad}");
        }
    }
}
