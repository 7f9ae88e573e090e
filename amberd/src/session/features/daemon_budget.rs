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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use amber_proto::sync::Locked;
use amber_proto::{BudgetUse, CostUsd, EventKind, LimitScope, Usage};
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::agent::ledger::{Admission, Amount, Caps, Ledger, Spent, admit_waiting, spent_cap};
use crate::agent::metered::{Refusal, RequestMeta};
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
    /// `[budget.models."NAME"]`: what requests to one model may spend (exact model id).
    pub models: BTreeMap<String, PeriodCaps>,
    /// `[budget.pools.NAME]`: what the fleet sessions of one runner pool may spend.
    pub pools: BTreeMap<String, PeriodCaps>,
}

/// A day's and a month's cap.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PeriodCaps {
    pub daily_usd: Option<CostUsd>,
    pub monthly_usd: Option<CostUsd>,
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

    fn any(&self) -> bool {
        self.daily_usd.is_some()
            || self.monthly_usd.is_some()
            || !self.models.is_empty()
            || !self.pools.is_empty()
    }

    /// Every cap that binds a request to `model` from a session in `pool`.
    fn caps_for(&self, model: &str, pool: Option<&str>) -> Vec<(Whose, Span, CostUsd)> {
        let mut caps = Vec::new();
        let mut both = |whose: Whose, daily: Option<CostUsd>, monthly: Option<CostUsd>| {
            if let Some(cap) = daily {
                caps.push((whose.clone(), Span::Day, cap));
            }
            if let Some(cap) = monthly {
                caps.push((whose, Span::Month, cap));
            }
        };
        both(Whose::All, self.daily_usd, self.monthly_usd);
        if let Some(c) = self.models.get(model) {
            both(Whose::Model(model.to_owned()), c.daily_usd, c.monthly_usd);
        }
        if let Some((name, c)) = pool.and_then(|p| self.pools.get_key_value(p)) {
            both(Whose::Pool(name.clone()), c.daily_usd, c.monthly_usd);
        }
        caps
    }

    /// Every cap configured.
    fn all_caps(&self) -> Vec<(Whose, Span, CostUsd)> {
        let mut caps = self.caps_for("", None);
        for (name, c) in &self.models {
            for (span, cap) in [(Span::Day, c.daily_usd), (Span::Month, c.monthly_usd)] {
                if let Some(cap) = cap {
                    caps.push((Whose::Model(name.clone()), span, cap));
                }
            }
        }
        for (name, c) in &self.pools {
            for (span, cap) in [(Span::Day, c.daily_usd), (Span::Month, c.monthly_usd)] {
                if let Some(cap) = cap {
                    caps.push((Whose::Pool(name.clone()), span, cap));
                }
            }
        }
        caps
    }
}

/// Whose spend a cap counts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Whose {
    All,
    Model(String),
    Pool(String),
}

/// A cap's period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Span {
    Day,
    Month,
}

impl Whose {
    fn scope(&self, span: Span) -> LimitScope {
        match (self, span) {
            (Whose::All, Span::Day) => LimitScope::Daily,
            (Whose::All, Span::Month) => LimitScope::Monthly,
            (Whose::Model(_), _) => LimitScope::Model,
            (Whose::Pool(_), _) => LimitScope::Pool,
        }
    }

    fn key(&self) -> Option<String> {
        match self {
            Whose::All => None,
            Whose::Model(name) | Whose::Pool(name) => Some(name.clone()),
        }
    }

    /// How a refusal names the cap.
    fn describe(&self, span: Span) -> String {
        let period = match span {
            Span::Day => "daily",
            Span::Month => "monthly",
        };
        match self {
            Whose::All => format!("[budget] {period}_usd of the daemon, all sessions together"),
            Whose::Model(name) => format!("[budget.models.\"{name}\"] {period}_usd"),
            Whose::Pool(name) => format!("[budget.pools.{name}] {period}_usd"),
        }
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

    fn of(&self, span: Span) -> &str {
        match span {
            Span::Day => &self.day,
            Span::Month => &self.month,
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
    // the call, and a zeroed `tm` is a valid value of the plain C struct.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pool: Option<String>,
    nanos: u64,
}

/// A day's and a month's spend.
#[derive(Debug, Clone, Copy, Default)]
struct Totals {
    day: CostUsd,
    month: CostUsd,
}

impl Totals {
    fn of(self, span: Span) -> CostUsd {
        match span {
            Span::Day => self.day,
            Span::Month => self.month,
        }
    }
}

/// What the daemon spent this day and month, the requests in flight, and the book.
pub(crate) struct SpendBook {
    dir: Option<PathBuf>,
    state: Mutex<BookState>,
    settled: tokio::sync::Notify,
}

struct BookState {
    period: Period,
    spent: HashMap<Whose, Totals>,
    ledgers: HashMap<(Whose, Span), Ledger>,
    /// Caps already announced this period.
    warned: HashSet<(Whose, Span)>,
}

impl BookState {
    fn spent(&self, whose: &Whose, span: Span) -> CostUsd {
        self.spent.get(whose).copied().unwrap_or_default().of(span)
    }

    fn add(&mut self, whose: Whose, day: bool, cost: CostUsd) {
        let totals = self.spent.entry(whose).or_default();
        if day {
            totals.day = totals.day.saturating_add(cost);
        }
        totals.month = totals.month.saturating_add(cost);
    }
}

impl SpendBook {
    /// The book under `data_dir` (none in memory-only daemons), this month's spend read.
    pub(crate) fn open(data_dir: Option<&Path>) -> SpendBook {
        let period = Period::now();
        let dir = data_dir.map(|d| d.join("spend"));
        let mut state = BookState {
            period,
            spent: HashMap::new(),
            ledgers: HashMap::new(),
            warned: HashSet::new(),
        };
        if let Some(dir) = &dir {
            read_month(&dir.join(format!("{}.log", state.period.month)), &mut state);
        }
        SpendBook {
            dir,
            state: Mutex::new(state),
            settled: tokio::sync::Notify::new(),
        }
    }

    /// The state, rolled into the current period first.
    fn current(&self) -> std::sync::MutexGuard<'_, BookState> {
        let mut state = self.state.locked();
        let now = Period::now();
        if now.month != state.period.month {
            state.spent.clear();
            state.warned.clear();
        }
        if now.day != state.period.day {
            for totals in state.spent.values_mut() {
                totals.day = CostUsd::ZERO;
            }
            state.warned.retain(|(_, span)| *span == Span::Month);
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
        pool: Option<&str>,
        cost: CostUsd,
    ) -> Vec<BudgetUse> {
        let mut state = self.current();
        state.add(Whose::All, true, cost);
        state.add(Whose::Model(model.to_owned()), true, cost);
        if let Some(pool) = pool {
            state.add(Whose::Pool(pool.to_owned()), true, cost);
        }
        if let Some(dir) = &self.dir {
            let line = Line {
                day: state.period.day.clone(),
                session: session.to_owned(),
                model: model.to_owned(),
                pool: pool.map(str::to_owned),
                nanos: cost.nanos(),
            };
            if let Err(err) = append(dir, &state.period.month, &line) {
                tracing::warn!(%err, "cannot write the spend book");
            }
        }
        let mut crossed = Vec::new();
        for (whose, span, cap) in config.caps_for(model, pool) {
            let spent = state.spent(&whose, span);
            let near = spent.usd() >= cap.usd() * config.warn_at();
            if near && state.warned.insert((whose.clone(), span)) {
                crossed.push(use_of(&state, &whose, span, cap));
            }
        }
        crossed
    }

    /// The daemon's spend against each cap of `config`.
    pub(crate) fn uses(&self, config: &BudgetConfig) -> Vec<BudgetUse> {
        let state = self.current();
        config
            .all_caps()
            .iter()
            .map(|(whose, span, cap)| use_of(&state, whose, *span, *cap))
            .collect()
    }
}

fn use_of(state: &BookState, whose: &Whose, span: Span, cap: CostUsd) -> BudgetUse {
    BudgetUse {
        scope: whose.scope(span),
        key: whose.key(),
        period: state.period.of(span).to_owned(),
        spent_usd: state.spent(whose, span),
        cap_usd: cap,
    }
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

/// A month's file into `state`: each line counts for the month, and for the day when it is
/// today's. Lines that do not parse (a torn last line) are skipped.
fn read_month(path: &Path, state: &mut BookState) {
    let Ok(text) = std::fs::read_to_string(path) else {
        return;
    };
    for line in text
        .lines()
        .filter_map(|l| serde_json::from_str::<Line>(l).ok())
    {
        let cost = CostUsd::from_nanos(line.nanos);
        let today = line.day == state.period.day;
        state.add(Whose::All, today, cost);
        state.add(Whose::Model(line.model), today, cost);
        if let Some(pool) = line.pool {
            state.add(Whose::Pool(pool), today, cost);
        }
    }
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

/// One admitted request's holds on the daemon's caps.
struct Hold<'a> {
    book: &'a SpendBook,
    held: Vec<((Whose, Span), Amount)>,
}

impl Drop for Hold<'_> {
    fn drop(&mut self) {
        {
            let mut state = self.book.state.locked();
            for (key, amount) in self.held.drain(..) {
                if let Some(ledger) = state.ledgers.get_mut(&key) {
                    ledger.release(amount);
                }
            }
        }
        self.book.settled.notify_waiters();
    }
}

fn usd_caps(cap: CostUsd) -> Caps {
    Caps {
        usd: Some(cap),
        tokens: None,
        requests: None,
    }
}

/// A refusal naming the cap it reached.
fn named(spent: Spent, whose: &Whose, span: Span) -> Spent {
    Spent {
        message: format!("{} ({})", spent.message, whose.describe(span)),
        ..spent
    }
}

impl SessionSpend {
    /// The config in force (a snapshot shared, not copied).
    fn live(&self) -> Arc<crate::session::services::LiveConfig> {
        self.services.live()
    }

    /// The fleet pool the session runs in, if any.
    fn pool(&self) -> Option<String> {
        let shared = self.shared.upgrade()?;
        let live = shared.lock_live();
        live.info.environment.as_ref()?.fleet.as_ref()?.pool.clone()
    }

    /// A cap reached that binds the session's own model, if one is.
    fn spent(&self, config: &BudgetConfig) -> Option<Spent> {
        let model = self.shared.upgrade().map(|s| s.model()).unwrap_or_default();
        let pool = self.pool();
        let state = self.book.current();
        config
            .caps_for(&model, pool.as_deref())
            .into_iter()
            .find_map(|(whose, span, cap)| {
                let spent = Amount {
                    cost: state.spent(&whose, span),
                    ..Amount::default()
                };
                spent_cap(whose.scope(span), usd_caps(cap), spent).map(|s| named(s, &whose, span))
            })
    }

    /// Holds the request's share of every cap that binds it, waiting while requests in
    /// flight hold a remainder.
    async fn reserve(
        &self,
        request: RequestMeta<'_>,
        cancel: &CancellationToken,
    ) -> Result<Option<Hold<'_>>, Refusal> {
        let live = self.live();
        let config = &live.config.budget;
        if !config.any() {
            return Ok(None);
        }
        let caps = config.caps_for(request.model, self.pool().as_deref());
        if caps.is_empty() {
            return Ok(None);
        }
        let held = admit_waiting(&self.book.settled, cancel, || {
            let mut state = self.book.current();
            let mut held = Vec::new();
            for (whose, span, cap) in &caps {
                let spent = Amount {
                    cost: state.spent(whose, *span),
                    ..Amount::default()
                };
                let key = (whose.clone(), *span);
                let ledger = state.ledgers.entry(key.clone()).or_default();
                let admission =
                    ledger.admit(whose.scope(*span), usd_caps(*cap), spent, request.estimate);
                let refused = match admission {
                    Admission::Go(amount) => {
                        held.push((key, amount));
                        continue;
                    }
                    Admission::Spent(spent) => Admission::Spent(named(spent, whose, *span)),
                    Admission::Wait => Admission::Wait,
                    Admission::Unpriced => Admission::Unpriced,
                };
                // All or none: what the earlier caps held goes back.
                for (key, amount) in held.drain(..) {
                    if let Some(ledger) = state.ledgers.get_mut(&key) {
                        ledger.release(amount);
                    }
                }
                return refused;
            }
            Admission::Go(held)
        })
        .await?;
        Ok(Some(Hold {
            book: &self.book,
            held,
        }))
    }
}

impl SessionFeature for SessionSpend {
    fn usage_added(&self, usage: &Usage, model: &str) {
        let Some(cost) = usage.cost_usd.filter(|c| *c > CostUsd::ZERO) else {
            return;
        };
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        let live = self.live();
        let pool = self.pool();
        let crossed = self.book.record(
            &live.config.budget,
            &shared.id,
            model,
            pool.as_deref(),
            cost,
        );
        let turn = shared.lock_live().turn_id.clone();
        for used in crossed {
            shared.hub.publish(
                turn.as_deref(),
                EventKind::BudgetWarning {
                    scope: used.scope,
                    key: used.key,
                    period: used.period,
                    spent_usd: used.spent_usd,
                    cap_usd: used.cap_usd,
                },
            );
        }
    }

    fn refuses_requests(&self) -> Option<Spent> {
        self.spent(&self.live().config.budget)
    }

    fn reserve<'a>(
        &'a self,
        request: RequestMeta<'a>,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<Option<Box<dyn Send + 'a>>, Refusal>> {
        Box::pin(async move {
            let hold = self.reserve(request, cancel).await?;
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
            ..BudgetConfig::default()
        };
        let book = SpendBook::open(Some(dir.path()));
        book.record(&config, "s1", "m", None, usd(0.25));
        book.record(&config, "s2", "m", None, usd(0.5));
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
            ..BudgetConfig::default()
        };
        let book = SpendBook::open(None);
        assert!(book.record(&config, "s", "m", None, usd(0.4)).is_empty());
        let crossed = book.record(&config, "s", "m", None, usd(0.2));
        assert_eq!(crossed.len(), 1);
        assert_eq!(crossed[0].scope, LimitScope::Daily);
        assert!(book.record(&config, "s", "m", None, usd(0.2)).is_empty());
    }

    #[test]
    fn a_model_or_pool_cap_binds_only_its_model_or_pool() {
        let mut config = BudgetConfig::default();
        config.models.insert(
            "big".into(),
            PeriodCaps {
                daily_usd: Some(usd(1.0)),
                monthly_usd: None,
            },
        );
        config.pools.insert(
            "gpu".into(),
            PeriodCaps {
                daily_usd: None,
                monthly_usd: Some(usd(5.0)),
            },
        );
        let scopes = |model, pool| -> Vec<LimitScope> {
            config
                .caps_for(model, pool)
                .into_iter()
                .map(|(whose, span, _)| whose.scope(span))
                .collect()
        };
        assert_eq!(scopes("small", None), []);
        assert_eq!(scopes("big", None), [LimitScope::Model]);
        assert_eq!(scopes("small", Some("gpu")), [LimitScope::Pool]);
        assert_eq!(scopes("small", Some("cpu")), []);
        let book = SpendBook::open(None);
        book.record(&config, "s", "big", Some("gpu"), usd(0.75));
        book.record(&config, "s", "small", None, usd(2.0));
        let uses = book.uses(&config);
        let model = uses.iter().find(|u| u.scope == LimitScope::Model).unwrap();
        assert_eq!(
            (model.key.as_deref(), model.spent_usd),
            (Some("big"), usd(0.75))
        );
        let pool = uses.iter().find(|u| u.scope == LimitScope::Pool).unwrap();
        assert_eq!(
            (pool.key.as_deref(), pool.spent_usd),
            (Some("gpu"), usd(0.75))
        );
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
