//! The runner fleet's control plane (docs/fleet.md): the runners that dialled in, the queue
//! of fleet sessions waiting for one, and which runner holds which session.
//!
//! Runners pull: a runner's `runner/poll` waits here until a queued session fits it (its
//! labels include the session's, its pool is under its cap, it has room), and only then is
//! the session assigned to it. A runner that stops beating (three heartbeats, or its
//! connection gone that long) is gone: its sessions are told (their running calls fail)
//! and queued again, to be restored from their newest checkpoint on the next runner.
//!
//! The fleet owns where each session stands ([`FleetInfo`]); the session keeps it in its
//! metadata (so a queued or assigned session survives a restart) through the
//! [`FleetSession`] it registered. **Invariant:** no session code runs under the fleet's
//! lock: what a change means for a session is collected and told after.
//!
//! - [`config`]: the `[fleet]` section.
//! - [`queue`]: the queue's order and label matching.
//! - [`control`]: one runner's control connection.

pub mod config;
pub(crate) mod control;
pub(crate) mod queue;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use amber_executor::runner_wire::{
    Assignment, HeartbeatParams, HeartbeatResult, HelloParams, HelloResult, POLL_WAIT_SECS, code,
};
use amber_executor::wire::RpcError;
use amber_proto::sync::Locked;
use amber_proto::{FleetInfo, FleetState};
use tokio::sync::Notify;

pub use config::FleetConfig;
use queue::{Labels, Queue};

/// How many heartbeats a runner may miss before it is gone.
const MISSED_BEATS: u32 = 3;

/// A fleet session, as the fleet reaches it.
pub(crate) trait FleetSession: Send + Sync {
    /// Its place in the fleet changed: keep it (info and metadata) and say so. `version`
    /// orders the changes as the fleet made them: one older than a change already kept
    /// (told late, from another thread) is not kept.
    fn changed(&self, fleet: &FleetInfo, reason: Option<&str>, version: u64);
    /// Its runner is gone: what runs there fails. It is queued again right after.
    fn runner_lost(&self, reason: &str);
    /// Its draining runner ran out of grace: move it at its next tool boundary.
    fn park(&self);
}

/// What one change means for a session, told after the lock is let go.
enum Tell {
    Changed(Arc<dyn FleetSession>, Box<FleetInfo>, Option<String>, u64),
    Lost(Arc<dyn FleetSession>, String),
    Park(Arc<dyn FleetSession>),
}

impl Tell {
    fn tell(self) {
        match self {
            Tell::Changed(session, info, reason, version) => {
                session.changed(&info, reason.as_deref(), version);
            }
            Tell::Lost(session, reason) => session.runner_lost(&reason),
            Tell::Park(session) => session.park(),
        }
    }
}

struct Tracked {
    info: FleetInfo,
    session: Arc<dyn FleetSession>,
    /// Assigned before amberd started: its runner must show it by then, or it is queued
    /// again.
    expect_by: Option<Instant>,
    /// When it was last assigned, and whether its runner has listed it since: a heartbeat
    /// sent before the runner took the assignment does not list it yet.
    assigned_at: Instant,
    confirmed: bool,
}

struct RunnerState {
    pool: String,
    labels: Labels,
    capacity: u32,
    hostname: String,
    draining: bool,
    /// Its control connection's number: a newer one replaces it.
    generation: u64,
    connected: bool,
    last_beat: Instant,
}

#[derive(Default)]
struct State {
    queue: Queue,
    sessions: HashMap<String, Tracked>,
    runners: HashMap<String, RunnerState>,
    next_generation: u64,
}

/// What waits for each pool's runners: the sessions that ask for it, and those that ask for
/// no pool (any pool's runner may take them: they count for every pool). Sessions asking for
/// a pool the config does not name are listed under it; with no pool configured, the ones
/// asking for none are listed as `any`.
fn demand_of(pools: &[&str], by_asked: BTreeMap<String, usize>) -> BTreeMap<String, usize> {
    let any = by_asked.get("").copied().unwrap_or(0);
    let mut demand: BTreeMap<String, usize> = by_asked
        .into_iter()
        .filter(|(pool, _)| !pool.is_empty())
        .collect();
    for pool in pools {
        *demand.entry((*pool).to_owned()).or_insert(0) += any;
    }
    if pools.is_empty() && any > 0 {
        demand.insert("any".to_owned(), any);
    }
    demand
}

/// One runner, as `daemon/status` and the metrics show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerSummary {
    pub id: String,
    pub pool: String,
    pub hostname: String,
    pub capacity: u32,
    pub held: u32,
    pub draining: bool,
    pub connected: bool,
}

/// The fleet at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FleetStatus {
    /// Queued sessions each pool's runners could take (those asking for no pool count for
    /// every pool).
    pub queued: BTreeMap<String, usize>,
    pub runners: Vec<RunnerSummary>,
    /// Sessions by where they stand.
    pub sessions: BTreeMap<&'static str, usize>,
}

/// What the fleet sessions have cost so far.
pub type Spent = Arc<dyn Fn() -> amber_proto::CostUsd + Send + Sync>;

/// The control plane.
pub struct Fleet {
    config: FleetConfig,
    /// What the fleet sessions have cost, read for `[fleet] budget_usd`, and whether it
    /// was spent at the last reading (said once when it becomes so).
    spent: Mutex<Option<Spent>>,
    spend_seen: std::sync::atomic::AtomicBool,
    state: Mutex<State>,
    /// Work was queued or a runner's room changed: waiting polls look again.
    work: Notify,
    /// Numbers every change of a session's place, in the order made (under the lock).
    versions: std::sync::atomic::AtomicU64,
}

impl Fleet {
    pub fn new(config: FleetConfig) -> Arc<Self> {
        Arc::new(Self {
            config,
            spent: Mutex::new(None),
            spend_seen: std::sync::atomic::AtomicBool::new(false),
            state: Mutex::new(State::default()),
            work: Notify::new(),
            versions: std::sync::atomic::AtomicU64::new(1),
        })
    }

    pub fn config(&self) -> &FleetConfig {
        &self.config
    }

    /// The next change's number; taken under the state lock.
    fn stamp(&self) -> u64 {
        self.versions
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    }

    fn heartbeat(&self) -> Duration {
        Duration::from_secs(self.config.heartbeat_secs.max(1))
    }

    /// The window after which a silent runner is gone.
    fn silence(&self) -> Duration {
        self.heartbeat() * MISSED_BEATS
    }

    /// Where session `id`'s workspace is on whichever runner takes it.
    pub fn workspace_of(&self, id: &str) -> PathBuf {
        self.config.workspace_root.join(id)
    }

    /// Queues session `id` (new, after a release, or again): it waits for a runner.
    pub(crate) fn enqueue(
        &self,
        id: &str,
        mut info: FleetInfo,
        session: Arc<dyn FleetSession>,
        reason: Option<String>,
    ) {
        info.state = FleetState::Queued;
        info.runner = None;
        info.pool = None;
        let version = {
            let mut state = self.state.locked();
            state.queue.push(id, info.priority, info.labels.clone());
            state.sessions.insert(
                id.to_owned(),
                Tracked {
                    info: info.clone(),
                    session: Arc::clone(&session),
                    expect_by: None,
                    assigned_at: Instant::now(),
                    confirmed: false,
                },
            );
            self.stamp()
        };
        // Told before any poll may assign it (a later change has a later number anyway).
        session.changed(&info, reason.as_deref(), version);
        self.work.notify_waiters();
    }

    /// Session `id`, loaded again, stands where its metadata says: queued ones wait again,
    /// assigned ones wait for their runner to show them.
    pub(crate) fn watch(&self, id: &str, info: FleetInfo, session: Arc<dyn FleetSession>) {
        match info.state {
            FleetState::Queued => {
                self.state
                    .locked()
                    .queue
                    .push(id, info.priority, info.labels.clone());
                self.work.notify_waiters();
            }
            FleetState::Assigned => {}
            FleetState::Parked | FleetState::Failed => return,
        }
        let expect_by = (info.state == FleetState::Assigned)
            .then(|| Instant::now() + self.silence() + self.heartbeat());
        self.state.locked().sessions.insert(
            id.to_owned(),
            Tracked {
                info,
                session,
                expect_by,
                assigned_at: Instant::now(),
                // Its runner must list it before anything counts it lost.
                confirmed: false,
            },
        );
    }

    /// Session `id` leaves its runner (idle): parked until its next turn.
    pub(crate) fn release(&self, id: &str, reason: &str) {
        let tell = {
            let mut state = self.state.locked();
            state.queue.remove(id);
            let Some(tracked) = state.sessions.remove(id) else {
                return;
            };
            let mut info = tracked.info;
            info.state = FleetState::Parked;
            info.runner = None;
            info.pool = None;
            Tell::Changed(
                tracked.session,
                Box::new(info),
                Some(reason.to_owned()),
                self.stamp(),
            )
        };
        self.work.notify_waiters();
        tell.tell();
    }

    /// Session `id`'s workspace could not be made (its setup failed on the runner).
    pub(crate) fn fail(&self, id: &str, reason: &str) {
        let tell = {
            let mut state = self.state.locked();
            state.queue.remove(id);
            let Some(tracked) = state.sessions.get_mut(id) else {
                return;
            };
            tracked.info.state = FleetState::Failed;
            tracked.info.runner = None;
            tracked.info.pool = None;
            Tell::Changed(
                Arc::clone(&tracked.session),
                Box::new(tracked.info.clone()),
                Some(reason.to_owned()),
                self.stamp(),
            )
        };
        self.work.notify_waiters();
        tell.tell();
    }

    /// Session `id` leaves its runner for another (its runner drains, out of grace): queued
    /// again now, its runner told to drop it.
    pub(crate) fn move_elsewhere(&self, id: &str, reason: &str) {
        let mut tells = Vec::new();
        {
            let mut state = self.state.locked();
            let assigned = state
                .sessions
                .get(id)
                .is_some_and(|t| t.info.state == FleetState::Assigned);
            if assigned {
                self.requeue(&mut state, id, reason.to_owned(), &mut tells);
            }
        }
        for tell in tells {
            tell.tell();
        }
        self.work.notify_waiters();
    }

    /// Session `id` is gone (deleted or stopped): it holds nothing any more.
    pub(crate) fn forget(&self, id: &str) {
        let mut state = self.state.locked();
        state.queue.remove(id);
        state.sessions.remove(id);
        drop(state);
        self.work.notify_waiters();
    }

    /// The runner and pool holding session `id`, if one does.
    pub(crate) fn holder_of(&self, id: &str) -> Option<(String, String)> {
        let state = self.state.locked();
        let tracked = state.sessions.get(id)?;
        if tracked.info.state != FleetState::Assigned {
            return None;
        }
        Some((tracked.info.runner.clone()?, tracked.info.pool.clone()?))
    }

    /// Runner `runner` of `pool` said hello and took session `id` (for tests of what
    /// relies on an assignment).
    #[cfg(test)]
    pub(crate) fn watch_for_tests_assign(&self, runner: &str, pool: &str, id: &str) {
        let params = HelloParams {
            protocol_version: amber_executor::wire::PROTOCOL_VERSION,
            runner: runner.to_owned(),
            pool: pool.to_owned(),
            labels: BTreeMap::new(),
            capacity: 1,
            version: String::new(),
            hostname: String::new(),
            running: Vec::new(),
        };
        if let Ok((generation, _)) = self.hello(pool, runner, params) {
            let (assigned, _, _) = self.assign(runner, generation, 1);
            assert_eq!(assigned.first().map(|a| a.session.as_str()), Some(id));
        }
    }

    /// The fleet now.
    pub fn status(&self) -> FleetStatus {
        let state = self.state.locked();
        let mut held: HashMap<&str, u32> = HashMap::new();
        let mut sessions: BTreeMap<&'static str, usize> = BTreeMap::new();
        for tracked in state.sessions.values() {
            let name = match tracked.info.state {
                FleetState::Queued => "queued",
                FleetState::Assigned => "assigned",
                FleetState::Parked => "parked",
                FleetState::Failed => "failed",
            };
            *sessions.entry(name).or_insert(0) += 1;
            if let Some(runner) = &tracked.info.runner {
                *held.entry(runner.as_str()).or_insert(0) += 1;
            }
        }
        let mut runners: Vec<RunnerSummary> = state
            .runners
            .iter()
            .map(|(id, r)| RunnerSummary {
                id: id.clone(),
                pool: r.pool.clone(),
                hostname: r.hostname.clone(),
                capacity: r.capacity,
                held: held.get(id.as_str()).copied().unwrap_or(0),
                draining: r.draining,
                connected: r.connected,
            })
            .collect();
        runners.sort_by(|a, b| a.id.cmp(&b.id));
        FleetStatus {
            queued: self.demand(state.queue.depth_by_pool()),
            runners,
            sessions,
        }
    }

    fn demand(&self, by_asked: BTreeMap<String, usize>) -> BTreeMap<String, usize> {
        let pools: Vec<&str> = self.config.pools.keys().map(String::as_str).collect();
        demand_of(&pools, by_asked)
    }

    /// Runner `params.runner` of `pool` said hello on a new control connection: returns its
    /// connection's generation and the answer.
    pub(crate) fn hello(
        &self,
        pool: &str,
        runner: &str,
        params: HelloParams,
    ) -> Result<(u64, HelloResult), RpcError> {
        let refused = |why: String| RpcError::new(code::REFUSED, why);
        if params.pool != pool || params.runner != runner {
            return Err(refused(
                "the hello names another pool or runner than the connection".to_owned(),
            ));
        }
        if params.protocol_version != amber_executor::wire::PROTOCOL_VERSION {
            return Err(refused(format!(
                "amberd speaks executor protocol {}, the runner {}",
                amber_executor::wire::PROTOCOL_VERSION,
                params.protocol_version
            )));
        }
        if params.capacity == 0
            || params
                .labels
                .iter()
                .any(|(k, v)| !config::is_word(k) || !config::is_word(v))
        {
            return Err(refused(
                "a capacity of 0, or a label that is not a word".to_owned(),
            ));
        }
        let mut tells = Vec::new();
        let (generation, release) = {
            let mut state = self.state.locked();
            state.next_generation += 1;
            let generation = state.next_generation;
            let mut labels = params.labels.clone();
            labels.insert("pool".to_owned(), pool.to_owned());
            state.runners.insert(
                runner.to_owned(),
                RunnerState {
                    pool: pool.to_owned(),
                    labels,
                    capacity: params.capacity,
                    hostname: params.hostname.clone(),
                    draining: false,
                    generation,
                    connected: true,
                    last_beat: Instant::now(),
                },
            );
            // What it holds that amberd did not give it: dropped. What amberd gave it and it
            // no longer holds (it started again): queued again.
            let release = self.confirm(&mut state, runner, &params.running, true, &mut tells);
            (generation, release)
        };
        for tell in tells {
            tell.tell();
        }
        self.work.notify_waiters();
        tracing::info!(%runner, %pool, capacity = params.capacity, "a runner said hello");
        Ok((
            generation,
            HelloResult {
                heartbeat_secs: self.config.heartbeat_secs,
                release,
            },
        ))
    }

    /// Sets what runner `runner` holds against what amberd gave it: returns what it must
    /// drop; queues again what it lost. On a new connection (`hello`) its list is the whole
    /// truth; a heartbeat may have been sent before the runner took an assignment, so there
    /// only a session it listed before, or one given to it longer ago than the silence
    /// window, counts as lost when missing.
    fn confirm(
        &self,
        state: &mut State,
        runner: &str,
        running: &[String],
        hello: bool,
        tells: &mut Vec<Tell>,
    ) -> Vec<String> {
        let now = Instant::now();
        let silence = self.silence();
        let release: Vec<String> = running
            .iter()
            .filter(|id| {
                state.sessions.get(*id).is_none_or(|t| {
                    t.info.state != FleetState::Assigned || t.info.runner.as_deref() != Some(runner)
                })
            })
            .cloned()
            .collect();
        let lost: Vec<String> = state
            .sessions
            .iter_mut()
            .filter(|(_, t)| {
                t.info.state == FleetState::Assigned && t.info.runner.as_deref() == Some(runner)
            })
            .filter_map(|(id, t)| {
                if running.contains(id) {
                    t.expect_by = None;
                    t.confirmed = true;
                    None
                } else if hello || t.confirmed || now.duration_since(t.assigned_at) > silence {
                    Some(id.clone())
                } else {
                    None
                }
            })
            .collect();
        for id in lost {
            self.requeue(
                state,
                &id,
                format!("runner {runner} no longer holds it"),
                tells,
            );
        }
        release
    }

    /// Queues session `id` again after its runner lost it.
    fn requeue(&self, state: &mut State, id: &str, reason: String, tells: &mut Vec<Tell>) {
        let Some(tracked) = state.sessions.get_mut(id) else {
            return;
        };
        tracked.info.state = FleetState::Queued;
        tracked.info.runner = None;
        tracked.info.pool = None;
        tracked.expect_by = None;
        let (priority, labels) = (tracked.info.priority, tracked.info.labels.clone());
        tells.push(Tell::Lost(Arc::clone(&tracked.session), reason.clone()));
        tells.push(Tell::Changed(
            Arc::clone(&tracked.session),
            Box::new(tracked.info.clone()),
            Some(reason),
            self.stamp(),
        ));
        state.queue.push(id, priority, labels);
    }

    /// Runner `runner` (connection `generation`) has room for `free`: waits for work up to
    /// the poll's wait and assigns what fits.
    pub(crate) async fn poll(&self, runner: &str, generation: u64, free: u32) -> Vec<Assignment> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(POLL_WAIT_SECS);
        loop {
            let work = self.work.notified();
            tokio::pin!(work);
            work.as_mut().enable();
            let (assigned, tells, current) = self.assign(runner, generation, free);
            if !assigned.is_empty() || !current {
                for tell in tells {
                    tell.tell();
                }
                return assigned;
            }
            tokio::select! {
                () = work => {}
                () = tokio::time::sleep_until(deadline) => return Vec::new(),
            }
        }
    }

    /// Reads what the fleet sessions cost with `spent`, for the budget.
    pub fn set_spent(&self, spent: Spent) {
        *self.spent.locked() = Some(spent);
    }

    /// Whether `[fleet] budget_usd` is spent, read now (what every fleet session recorded).
    fn over_budget(&self) -> bool {
        let Some(budget) = self
            .config
            .budget_usd
            .and_then(amber_proto::CostUsd::from_usd)
        else {
            return false;
        };
        let spent = self.spent.locked().clone();
        let over = spent.is_some_and(|spent| spent() >= budget);
        let was = self
            .spend_seen
            .swap(over, std::sync::atomic::Ordering::SeqCst);
        if over && !was {
            tracing::warn!(
                budget_usd = budget.usd(),
                "the fleet's budget is spent: no more work is assigned"
            );
        }
        over
    }

    /// Assigns what fits runner `runner` now; also says whether its connection is current.
    fn assign(
        &self,
        runner: &str,
        generation: u64,
        free: u32,
    ) -> (Vec<Assignment>, Vec<Tell>, bool) {
        let mut state = self.state.locked();
        let Some(r) = state.runners.get(runner) else {
            return (Vec::new(), Vec::new(), false);
        };
        if r.generation != generation || !r.connected {
            return (Vec::new(), Vec::new(), false);
        }
        if r.draining {
            return (Vec::new(), Vec::new(), true);
        }
        let (pool, labels, capacity) = (r.pool.clone(), r.labels.clone(), r.capacity);
        if !state.queue.is_empty() {
            drop(state);
            if self.over_budget() {
                return (Vec::new(), Vec::new(), true);
            }
            state = self.state.locked();
        }
        let held_here = state
            .sessions
            .values()
            .filter(|t| {
                t.info.state == FleetState::Assigned && t.info.runner.as_deref() == Some(runner)
            })
            .count();
        let mut room = (capacity as usize)
            .saturating_sub(held_here)
            .min(free as usize);
        if let Some(cap) = self.config.pools.get(&pool).and_then(|p| p.max_sessions) {
            let in_pool = state
                .sessions
                .values()
                .filter(|t| {
                    t.info.state == FleetState::Assigned
                        && t.info.pool.as_deref() == Some(pool.as_str())
                })
                .count();
            room = room.min((cap as usize).saturating_sub(in_pool));
        }
        let taken = state.queue.take(&labels, room);
        let mut assigned = Vec::new();
        let mut tells = Vec::new();
        for id in taken {
            let Some(tracked) = state.sessions.get_mut(&id) else {
                continue;
            };
            tracked.info.state = FleetState::Assigned;
            tracked.info.runner = Some(runner.to_owned());
            tracked.info.pool = Some(pool.clone());
            tracked.info.attempts += 1;
            tracked.assigned_at = Instant::now();
            tracked.confirmed = false;
            tells.push(Tell::Changed(
                Arc::clone(&tracked.session),
                Box::new(tracked.info.clone()),
                None,
                self.stamp(),
            ));
            assigned.push(Assignment {
                session: id.clone(),
                workspace: self.workspace_of(&id),
                repo: tracked.info.repo.clone(),
                git_ref: tracked.info.git_ref.clone(),
                push: tracked.info.push.is_some(),
            });
        }
        if !assigned.is_empty() {
            tracing::info!(%runner, sessions = assigned.len(), "assigned work");
        }
        (assigned, tells, true)
    }

    /// A heartbeat of runner `runner` (connection `generation`).
    pub(crate) fn beat(
        &self,
        runner: &str,
        generation: u64,
        params: HeartbeatParams,
    ) -> Result<HeartbeatResult, RpcError> {
        let mut tells = Vec::new();
        let release = {
            let mut state = self.state.locked();
            let Some(r) = state.runners.get_mut(runner) else {
                return Err(RpcError::new(code::NO_HELLO, "say runner/hello again"));
            };
            if r.generation != generation {
                return Err(RpcError::new(
                    code::NO_HELLO,
                    "a newer connection replaced this one",
                ));
            }
            r.last_beat = Instant::now();
            let was_draining = r.draining;
            r.draining = params.draining;
            if params.draining && !was_draining {
                tracing::info!(%runner, "a runner is draining");
            }
            for failure in &params.failed {
                let Some(tracked) = state.sessions.get_mut(&failure.session) else {
                    continue;
                };
                if tracked.info.runner.as_deref() != Some(runner) {
                    continue;
                }
                tracked.info.state = FleetState::Failed;
                tracked.info.runner = None;
                tracked.info.pool = None;
                tells.push(Tell::Changed(
                    Arc::clone(&tracked.session),
                    Box::new(tracked.info.clone()),
                    Some(failure.reason.clone()),
                    self.stamp(),
                ));
            }
            for id in &params.park {
                if let Some(tracked) = state.sessions.get(id)
                    && tracked.info.runner.as_deref() == Some(runner)
                {
                    tells.push(Tell::Park(Arc::clone(&tracked.session)));
                }
            }
            let release = self.confirm(&mut state, runner, &params.running, false, &mut tells);
            // Failed ones are dropped too.
            let failed_here = params.failed.iter().map(|f| f.session.clone());
            let mut release: Vec<String> = release.into_iter().chain(failed_here).collect();
            release.sort();
            release.dedup();
            release
        };
        for tell in tells {
            tell.tell();
        }
        self.work.notify_waiters();
        Ok(HeartbeatResult { release })
    }

    /// Runner `runner`'s control connection `generation` ended: gone unless it dials again
    /// within the silence window.
    pub(crate) fn disconnected(self: &Arc<Self>, runner: &str, generation: u64) {
        {
            let mut state = self.state.locked();
            match state.runners.get_mut(runner) {
                Some(r) if r.generation == generation => r.connected = false,
                _ => return,
            }
        }
        self.work.notify_waiters();
        let fleet = Arc::clone(self);
        let runner = runner.to_owned();
        tokio::spawn(async move {
            tokio::time::sleep(fleet.silence()).await;
            let back = fleet
                .state
                .locked()
                .runners
                .get(&runner)
                .is_none_or(|r| r.generation != generation || r.connected);
            if !back {
                fleet.runner_gone(
                    &runner,
                    format!("runner {runner} disconnected and did not come back"),
                );
            }
        });
    }

    /// Runner `runner` is gone: its sessions are queued again.
    fn runner_gone(&self, runner: &str, reason: String) {
        let mut tells = Vec::new();
        {
            let mut state = self.state.locked();
            if state.runners.remove(runner).is_none() {
                return;
            }
            let held: Vec<String> = state
                .sessions
                .iter()
                .filter(|(_, t)| {
                    t.info.state == FleetState::Assigned && t.info.runner.as_deref() == Some(runner)
                })
                .map(|(id, _)| id.clone())
                .collect();
            tracing::warn!(%runner, sessions = held.len(), "{reason}");
            for id in held {
                self.requeue(&mut state, &id, reason.clone(), &mut tells);
            }
        }
        for tell in tells {
            tell.tell();
        }
        self.work.notify_waiters();
    }

    /// Watches the runners' heartbeats and the sessions restored as assigned, until
    /// `shutdown`.
    pub fn watch_heartbeats(self: &Arc<Self>, shutdown: tokio_util::sync::CancellationToken) {
        let fleet = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = tokio::time::sleep(fleet.heartbeat()) => {}
                    () = shutdown.cancelled() => return,
                }
                fleet.sweep(Instant::now());
            }
        });
    }

    /// Runners silent past the window are gone; sessions restored as assigned whose runner
    /// did not show them in time are queued again.
    fn sweep(&self, now: Instant) {
        let silence = self.silence();
        let silent: Vec<String> = self
            .state
            .locked()
            .runners
            .iter()
            .filter(|(_, r)| r.connected && now.duration_since(r.last_beat) > silence)
            .map(|(id, _)| id.clone())
            .collect();
        for runner in silent {
            self.runner_gone(
                &runner,
                format!("runner {runner} missed {MISSED_BEATS} heartbeats"),
            );
        }
        let mut tells = Vec::new();
        {
            let mut state = self.state.locked();
            let late: Vec<(String, Option<String>)> = state
                .sessions
                .iter()
                .filter(|(_, t)| t.expect_by.is_some_and(|by| now > by))
                .map(|(id, t)| (id.clone(), t.info.runner.clone()))
                .collect();
            for (id, runner) in late {
                let reason = format!(
                    "runner {} did not come back after amberd restarted",
                    runner.as_deref().unwrap_or("?")
                );
                self.requeue(&mut state, &id, reason, &mut tells);
            }
        }
        let any = !tells.is_empty();
        for tell in tells {
            tell.tell();
        }
        if any {
            self.work.notify_waiters();
        }
    }
}
