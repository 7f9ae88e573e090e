//! When routines fire and how: the [`Clock`] (the system's, or in test builds the time
//! written in the file `AMBER_TEST_NOW_FILE` names), the missed-run policy ([`plan`]), and
//! a fire: a `starting` record (synced), the session made or found and marked with the
//! fire, its prompt queued, then the record `started`.
//!
//! **Exactly once per fire time.** A tick fires only fire times after the newest one
//! handled, and a fire's record advances that before its session is made; one tick runs at
//! a time. A daemon that stopped between the record and the prompt finds the `starting`
//! record when it starts again ([`Routines::recover`]) and completes the fire only if no
//! session carries that fire time.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use amber_proto::sync::Locked;
use amber_proto::{
    MissedPolicy, RoutineDef, RoutineFired, RoutineRun, RoutineSource, SessionInfo,
    SessionNewParams, WorktreeRequest,
};

use super::Routines;
use super::cron::{Cron, LocalTime, parse_rfc3339, rfc3339};
use super::store::{RoutineState, RunRecord, RunState};

/// The test switch naming the file the test clock reads.
pub(crate) const TEST_NOW_FILE: &str = "AMBER_TEST_NOW_FILE";

/// A fire time at most this old when a tick finds it is on time, not missed: a timer's
/// slack and a daemon's start-up fit in it.
pub(crate) const ON_TIME_SECS: i64 = 120;

/// How often the daemon looks for due routines on its own.
pub(crate) const TICK_EVERY: Duration = Duration::from_secs(5);

/// Where "now" comes from.
pub(crate) trait Clock: Send + Sync {
    /// Seconds since the Unix epoch.
    fn now(&self) -> i64;
    /// A test sets the time: nothing ticks on its own.
    fn is_controlled(&self) -> bool {
        false
    }
}

/// The system's clock.
pub(crate) struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
    }
}

/// The time a test wrote in a file (RFC 3339, or seconds since the epoch); the system's
/// while the file is missing or unreadable.
struct FileClock {
    path: PathBuf,
}

impl Clock for FileClock {
    fn now(&self) -> i64 {
        let text = std::fs::read_to_string(&self.path).unwrap_or_default();
        parse_instant(&text).unwrap_or_else(|| {
            tracing::warn!(file = %self.path.display(), "no time in the test clock's file; using the system's");
            SystemClock.now()
        })
    }

    fn is_controlled(&self) -> bool {
        true
    }
}

/// The daemon's clock: the test clock when a test build is given `AMBER_TEST_NOW_FILE`.
pub(crate) fn clock() -> Arc<dyn Clock> {
    match amber_exec::test_switches::var(TEST_NOW_FILE) {
        Some(path) if !path.is_empty() => Arc::new(FileClock {
            path: PathBuf::from(path),
        }),
        _ => Arc::new(SystemClock),
    }
}

/// `1736146800` or `2025-01-06T07:00:00Z` as seconds since the epoch.
pub(crate) fn parse_instant(text: &str) -> Option<i64> {
    let text = text.trim();
    text.parse().ok().or_else(|| parse_rfc3339(text))
}

/// The sessions, as routines reach them: the port the daemon's session manager fills.
pub(crate) trait Sessions {
    fn all(&self) -> Vec<SessionInfo>;
    fn info(&self, id: &str) -> Option<SessionInfo>;
    fn create(&self, params: SessionNewParams) -> Result<SessionInfo, String>;
    /// Records the fire in the session's info (kept in its metadata).
    fn mark(&self, id: &str, run: &RoutineRun) -> Result<(), String>;
    /// Queues `text` as the session's turn `turn_id`.
    fn prompt(&self, id: &str, turn_id: &str, text: String) -> Result<(), String>;
}

/// A routine in force.
#[derive(Debug, Clone)]
pub(crate) struct Routine {
    pub name: String,
    pub source: RoutineSource,
    pub def: RoutineDef,
    pub cron: Cron,
}

/// What a tick does with one routine's due fire times.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Plan {
    /// The fire times to run, oldest first.
    pub runs: Vec<i64>,
    /// The newest due fire time: handled from now on, run or not.
    pub newest: Option<i64>,
}

/// The fire times of `(after, now]` and which of them `policy` runs: the newest is on time
/// if at most [`ON_TIME_SECS`] old (`skip` runs it, and nothing else), `latest` runs the
/// newest, `all` each, oldest first, at most [`MissedPolicy::MAX_RUNS`].
pub(crate) fn plan(
    cron: &Cron,
    policy: MissedPolicy,
    after: i64,
    now: i64,
    tz: &dyn LocalTime,
) -> Plan {
    let keep = match policy {
        MissedPolicy::All => MissedPolicy::MAX_RUNS,
        MissedPolicy::Skip | MissedPolicy::Latest => 1,
    };
    let due = newest_due(cron, after, now, keep, tz);
    let Some(&newest) = due.last() else {
        return Plan::default();
    };
    let runs = match policy {
        MissedPolicy::Skip if now - newest > ON_TIME_SECS => Vec::new(),
        _ => due,
    };
    Plan {
        runs,
        newest: Some(newest),
    }
}

/// The newest `keep` fire times of `(after, now]`, oldest first. A long downtime of a
/// frequent routine is not walked fire by fire: the recent past is searched first, and
/// further back only while it holds too few.
fn newest_due(cron: &Cron, after: i64, now: i64, keep: usize, tz: &dyn LocalTime) -> Vec<i64> {
    const DAY: i64 = 86_400;
    for window in [DAY, 32 * DAY, 367 * DAY, i64::MAX] {
        let from = after.max(now.saturating_sub(window));
        let mut due = std::collections::VecDeque::new();
        let mut at = from;
        while let Some(next) = cron.next_after(at, tz).filter(|t| *t <= now) {
            if due.len() == keep {
                due.pop_front();
            }
            due.push_back(next);
            at = next;
        }
        if due.len() == keep || from == after {
            return due.into();
        }
    }
    Vec::new()
}

impl Routines {
    /// Fires what is due now among `routines`; the runs made, oldest fire time first
    /// within each routine.
    pub(crate) fn tick_with(
        &self,
        routines: &[Routine],
        sessions: &dyn Sessions,
    ) -> Vec<RoutineFired> {
        let _firing = self.firing.locked();
        let now = self.clock.now();
        self.track(routines, now, true);
        let mut fired = Vec::new();
        for routine in routines {
            let Some(after) = self.state_of(&routine.name).map(|s| s.handled_until()) else {
                continue;
            };
            let plan = plan(
                &routine.cron,
                routine.def.missed,
                after,
                now,
                self.tz.as_ref(),
            );
            let Some(newest) = plan.newest else { continue };
            for at in plan.runs {
                fired.push(self.fire(routine, at, false, sessions));
            }
            if self.state_of(&routine.name).and_then(|s| s.last_fire) != Some(newest) {
                let _ = self.record(&routine.name, |state| {
                    state.last_fire = Some(newest.max(state.last_fire.unwrap_or(newest)));
                });
            }
        }
        fired
    }

    /// Fires `routine` now, whatever its schedule (its schedule goes on as before).
    pub(crate) fn run_now_with(&self, routine: &Routine, sessions: &dyn Sessions) -> RoutineFired {
        let _firing = self.firing.locked();
        let now = self.clock.now();
        self.track(std::slice::from_ref(routine), now, false);
        self.fire(routine, now, true, sessions)
    }

    /// Completes the fires a stop cut short: a `starting` record whose fire time no
    /// session carries is fired again; one a session carries was made: `started`.
    pub(crate) fn recover_with(&self, routines: &[Routine], sessions: &dyn Sessions) {
        let _firing = self.firing.locked();
        let starting: Vec<(String, i64)> = {
            let inner = self.inner.locked();
            inner
                .state
                .routines
                .iter()
                .filter_map(|(name, state)| {
                    let run = state.last_run.as_ref()?;
                    (run.state == RunState::Starting).then(|| (name.clone(), run.fire_time))
                })
                .collect()
        };
        if starting.is_empty() {
            return;
        }
        let all = sessions.all();
        for (name, at) in starting {
            let carried = all.iter().find(|info| {
                info.routine.as_ref().is_some_and(|run| {
                    run.name == name && parse_rfc3339(&run.fire_time) == Some(at)
                })
            });
            let outcome = match (carried, routines.iter().find(|r| r.name == name)) {
                (Some(info), _) => Ok(info.session_id.clone()),
                (None, Some(routine)) => {
                    tracing::info!(routine = %name, "completing a fire a stop cut short");
                    start_run(routine, &rfc3339(at, self.tz.as_ref()), sessions)
                }
                (None, None) => Err("the routine was removed before its run started".to_owned()),
            };
            self.finish(&name, at, outcome);
        }
    }

    /// State for routines seen for the first time (their fire times count from `now`);
    /// with `all` (these are every routine in force), the state of routines gone is dropped,
    /// so one that comes back later does not count fire times from its first life.
    fn track(&self, routines: &[Routine], now: i64, all: bool) {
        let mut inner = self.inner.locked();
        let before = inner.state.clone();
        if all {
            inner
                .state
                .routines
                .retain(|name, _| routines.iter().any(|r| r.name == *name));
        }
        for routine in routines {
            inner
                .state
                .routines
                .entry(routine.name.clone())
                .or_insert_with(|| RoutineState {
                    since: now,
                    ..RoutineState::default()
                });
        }
        if inner.state != before {
            self.save_state(&inner.state);
        }
    }

    fn state_of(&self, name: &str) -> Option<RoutineState> {
        self.inner.locked().state.routines.get(name).cloned()
    }

    /// Changes one routine's state and writes it; whether it was written.
    fn record(&self, name: &str, change: impl FnOnce(&mut RoutineState)) -> bool {
        let mut inner = self.inner.locked();
        let Some(state) = inner.state.routines.get_mut(name) else {
            return false;
        };
        change(state);
        self.save_state(&inner.state)
    }

    /// One run: the `starting` record first (a scheduled fire time is handled from then
    /// on), then the session, then the outcome.
    fn fire(
        &self,
        routine: &Routine,
        at: i64,
        manual: bool,
        sessions: &dyn Sessions,
    ) -> RoutineFired {
        let recorded = self.record(&routine.name, |state| {
            if !manual {
                state.last_fire = Some(at.max(state.last_fire.unwrap_or(at)));
            }
            state.last_run = Some(RunRecord {
                fire_time: at,
                state: RunState::Starting,
                session_id: None,
                error: None,
            });
        });
        let fire_time = rfc3339(at, self.tz.as_ref());
        let outcome = if recorded {
            start_run(routine, &fire_time, sessions)
        } else {
            // Without the record a stop could fire it twice: better not at all.
            Err("the fire could not be recorded in the data directory".to_owned())
        };
        if let Err(err) = &outcome {
            tracing::warn!(routine = %routine.name, %err, "a routine's fire made no run");
        }
        self.finish(&routine.name, at, outcome.clone());
        RoutineFired {
            name: routine.name.clone(),
            fire_time,
            session_id: outcome.as_ref().ok().cloned(),
            error: outcome.err(),
        }
    }

    fn finish(&self, name: &str, at: i64, outcome: Result<String, String>) {
        self.record(name, |state| {
            let (run_state, session_id, error) = match outcome {
                Ok(id) => (RunState::Started, Some(id), None),
                Err(err) => (RunState::Failed, None, Some(err)),
            };
            state.last_run = Some(RunRecord {
                fire_time: at,
                state: run_state,
                session_id,
                error,
            });
        });
    }
}

/// Makes (or finds) the run's session, marks it with the fire and queues the prompt under
/// a turn id chosen first, so the session knows which turn is the routine's.
fn start_run(
    routine: &Routine,
    fire_time: &str,
    sessions: &dyn Sessions,
) -> Result<String, String> {
    let turn_id = format!("turn_{}", uuid::Uuid::new_v4().simple());
    let run = RoutineRun {
        name: routine.name.clone(),
        fire_time: fire_time.to_owned(),
        turn_id: Some(turn_id.clone()),
        stop_reason: None,
    };
    let def = &routine.def;
    let named = def.session.as_ref().and_then(|name| {
        sessions
            .all()
            .into_iter()
            .find(|info| info.name.as_deref() == Some(name.as_str()))
    });
    let id = match named {
        Some(info) => {
            sessions.mark(&info.session_id, &run)?;
            info.session_id
        }
        None => {
            let params = SessionNewParams {
                cwd: def.cwd.clone(),
                name: def.session.clone(),
                worktree: def.worktree.then_some(WorktreeRequest::Enabled(true)),
                environment: def.environment.clone(),
                repo: def.repo.clone(),
                git_ref: def.git_ref.clone(),
                max_budget_usd: def.max_budget_usd,
                routine: Some(run),
                ..SessionNewParams::default()
            };
            sessions.create(params)?.session_id
        }
    };
    sessions.prompt(&id, &turn_id, def.prompt.clone())?;
    Ok(id)
}

#[cfg(test)]
#[path = "scheduler_tests.rs"]
mod tests;
