//! Scheduled routines: prompts the daemon runs on a cron schedule, from `[[routines]]` of
//! config.toml (read live, so a config edit is in force at the next tick) and from
//! `routine/add` (kept in `<data_dir>/routines.json`). Each fire runs in a new session
//! (in a worktree or on the fleet, with its own budget) or in a named one, marked
//! `SessionInfo.routine`; the session's `turn_completed` is the result, and a durable
//! `routine_finished` follows it (`session::features::routines`), which `session/watch`
//! carries to every console.
//!
//! The daemon ticks every few seconds, and on `routine/tick` (systemd's timer wakes a
//! socket-activated daemon with it); missed fire times follow the routine's policy.
//!
//! - [`cron`]: the schedule and local time.
//! - [`config`]: `[[routines]]` and the checks of every routine.
//! - [`store`]: what is kept on disk.
//! - [`scheduler`]: the clock, the missed-run policy and a fire, exactly once.

pub mod config;
pub mod cron;
pub(crate) mod scheduler;
pub(crate) mod store;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use amber_proto::sync::Locked;
use amber_proto::{
    RoutineAddParams, RoutineFired, RoutineInfo, RoutineRun, RoutineSource, SessionInfo,
    SessionNewParams,
};

pub use config::RoutineConfig;
use cron::{LocalTime, SystemTime, rfc3339};
use scheduler::{Clock, Routine, Sessions};
use store::{FireState, RoutineState, RunState, StoredRoutine};

use crate::daemon::Daemon;
use crate::session::SessionManager;

/// Why a routine method was refused.
#[derive(Debug, thiserror::Error)]
pub enum RoutineError {
    #[error("invalid params: {0}")]
    Invalid(String),
    #[error("no routine named `{0}`")]
    NotFound(String),
    #[error("routine `{0}` is defined in config.toml: change or remove it there")]
    FromConfig(String),
    #[error("invalid params: name: a routine named `{0}` exists")]
    Exists(String),
    #[error(transparent)]
    Store(#[from] store::StoreError),
}

/// The routines added at runtime and every routine's fire state.
pub struct Routines {
    dir: PathBuf,
    clock: Arc<dyn Clock>,
    tz: Box<dyn LocalTime + Send + Sync>,
    inner: Mutex<Inner>,
    /// One tick (or run, or recovery) at a time: two never fire one fire time.
    firing: Mutex<()>,
}

struct Inner {
    stored: Vec<StoredRoutine>,
    state: FireState,
}

impl Routines {
    /// The routines of the data directory `dir`, on the daemon's clock and local time. A
    /// file that cannot be read is set aside (`.broken`) and logged, never overwritten.
    pub fn open(dir: &Path) -> Routines {
        Routines::with(dir, scheduler::clock(), Box::new(SystemTime))
    }

    fn with(dir: &Path, clock: Arc<dyn Clock>, tz: Box<dyn LocalTime + Send + Sync>) -> Routines {
        let stored = store::load_routines(dir).unwrap_or_else(|err| {
            let aside = store::set_aside(dir, store::ROUTINES_FILE);
            tracing::error!(%err, aside = ?aside, "the stored routines cannot be read; starting without them");
            Vec::new()
        });
        let state = store::load_state(dir).unwrap_or_else(|err| {
            let aside = store::set_aside(dir, store::STATE_FILE);
            tracing::error!(%err, aside = ?aside, "the routines' fire state cannot be read; their fire times count from now");
            FireState::default()
        });
        Routines {
            dir: dir.to_owned(),
            clock,
            tz,
            inner: Mutex::new(Inner { stored, state }),
            firing: Mutex::new(()),
        }
    }

    /// Whether a test sets the clock (then nothing ticks on its own).
    pub fn is_controlled(&self) -> bool {
        self.clock.is_controlled()
    }

    /// Writes the fire state; whether it was written (a failure is logged).
    fn save_state(&self, state: &FireState) -> bool {
        match store::save_state(&self.dir, state) {
            Ok(()) => true,
            Err(err) => {
                tracing::error!(%err, "cannot write the routines' fire state");
                false
            }
        }
    }

    /// The routines in force: the config's, then the stored ones of other names.
    fn in_force(&self, config: &[RoutineConfig]) -> Vec<Routine> {
        let from_config = config
            .iter()
            .map(|r| (r.name.clone(), RoutineSource::Config, r.def()));
        let stored: Vec<(String, RoutineSource, amber_proto::RoutineDef)> = self
            .inner
            .locked()
            .stored
            .iter()
            .filter(|s| config.iter().all(|c| c.name != s.name))
            .map(|s| (s.name.clone(), RoutineSource::Stored, s.routine.clone()))
            .collect();
        from_config
            .chain(stored)
            .filter_map(|(name, source, def)| match config::check(&name, &def) {
                Ok(cron) => Some(Routine {
                    name,
                    source,
                    def,
                    cron,
                }),
                Err(err) => {
                    tracing::warn!(routine = %name, %err, "routine skipped");
                    None
                }
            })
            .collect()
    }

    /// `routine/add`.
    pub(crate) fn add(
        &self,
        params: RoutineAddParams,
        config: &[RoutineConfig],
        sessions: &dyn Sessions,
    ) -> Result<RoutineInfo, RoutineError> {
        let mut routine = params.routine;
        routine.session = config::session_name(routine.session.as_deref());
        let taken = |name: &str| {
            config.iter().any(|c| c.name == name)
                || self.inner.locked().stored.iter().any(|s| s.name == name)
        };
        let name = match params.name.filter(|n| !n.trim().is_empty()) {
            Some(name) if taken(&name) => return Err(RoutineError::Exists(name)),
            Some(name) => name,
            None => {
                let base = config::name_from_prompt(&routine.prompt);
                (1..)
                    .map(|n| {
                        if n == 1 {
                            base.clone()
                        } else {
                            format!("{base}-{n}")
                        }
                    })
                    .find(|name| !taken(name))
                    .unwrap_or(base)
            }
        };
        config::check(&name, &routine).map_err(RoutineError::Invalid)?;
        let local = routine
            .environment
            .as_deref()
            .is_none_or(|e| e.is_empty() || e == "local");
        if local && !Path::new(&routine.cwd).is_dir() {
            return Err(RoutineError::Invalid(format!(
                "cwd: `{}` is not a directory",
                routine.cwd
            )));
        }
        let now = self.clock.now();
        {
            let mut inner = self.inner.locked();
            if inner.stored.iter().any(|s| s.name == name) {
                return Err(RoutineError::Exists(name));
            }
            inner.stored.push(StoredRoutine {
                name: name.clone(),
                routine,
            });
            if let Err(err) = store::save_routines(&self.dir, &inner.stored) {
                inner.stored.pop();
                return Err(err.into());
            }
            // Its fire times count from now, even if a routine of its name was here before.
            inner.state.routines.insert(
                name.clone(),
                RoutineState {
                    since: now,
                    ..RoutineState::default()
                },
            );
            self.save_state(&inner.state);
        }
        self.list(config, sessions)
            .into_iter()
            .find(|r| r.name == name)
            .ok_or(RoutineError::NotFound(name))
    }

    /// `routine/remove`: stored routines only.
    pub(crate) fn remove(&self, name: &str, config: &[RoutineConfig]) -> Result<(), RoutineError> {
        if config.iter().any(|c| c.name == name) {
            return Err(RoutineError::FromConfig(name.to_owned()));
        }
        let mut inner = self.inner.locked();
        let Some(at) = inner.stored.iter().position(|s| s.name == name) else {
            return Err(RoutineError::NotFound(name.to_owned()));
        };
        let removed = inner.stored.remove(at);
        if let Err(err) = store::save_routines(&self.dir, &inner.stored) {
            inner.stored.insert(at, removed);
            return Err(err.into());
        }
        inner.state.routines.remove(name);
        self.save_state(&inner.state);
        Ok(())
    }

    /// `routine/list`: each routine with its next and last fire and its last run.
    pub(crate) fn list(
        &self,
        config: &[RoutineConfig],
        sessions: &dyn Sessions,
    ) -> Vec<RoutineInfo> {
        let now = self.clock.now();
        let tz = self.tz.as_ref();
        self.in_force(config)
            .into_iter()
            .map(|routine| {
                let state = self
                    .inner
                    .locked()
                    .state
                    .routines
                    .get(&routine.name)
                    .cloned();
                let after = state.as_ref().map_or(now, |s| s.handled_until().max(now));
                let run = state.as_ref().and_then(|s| s.last_run.clone());
                let session = run
                    .as_ref()
                    .and_then(|r| r.session_id.as_deref())
                    .and_then(|id| sessions.info(id));
                let stop = session.as_ref().and_then(|info| {
                    let marked = info.routine.as_ref().filter(|r| {
                        run.as_ref().is_some_and(|run| {
                            cron::parse_rfc3339(&r.fire_time) == Some(run.fire_time)
                        })
                    })?;
                    let prompted = run.as_ref().is_some_and(|r| r.state == RunState::Started);
                    // Idle after its prompt was accepted, without a stop reason: the daemon
                    // stopped during the turn, which then ended `error` (`interrupted`).
                    let interrupted = prompted && info.state == amber_proto::SessionState::Idle;
                    marked
                        .stop_reason
                        .or(interrupted.then_some(amber_proto::StopReason::Error))
                });
                RoutineInfo {
                    next_fire: routine.cron.next_after(after, tz).map(|t| rfc3339(t, tz)),
                    last_fire: state.and_then(|s| s.last_fire).map(|t| rfc3339(t, tz)),
                    last_session_id: run.as_ref().and_then(|r| r.session_id.clone()),
                    last_stop_reason: stop,
                    last_error: run.and_then(|r| r.error),
                    on_calendar: routine.cron.on_calendar(),
                    name: routine.name,
                    source: routine.source,
                    routine: routine.def,
                }
            })
            .collect()
    }

    /// `routine/run`.
    pub(crate) fn run_now(
        &self,
        name: &str,
        config: &[RoutineConfig],
        sessions: &dyn Sessions,
    ) -> Result<RoutineFired, RoutineError> {
        let routine = self
            .in_force(config)
            .into_iter()
            .find(|r| r.name == name)
            .ok_or_else(|| RoutineError::NotFound(name.to_owned()))?;
        Ok(self.run_now_with(&routine, sessions))
    }

    /// Fires what is due now.
    pub(crate) fn tick(
        &self,
        config: &[RoutineConfig],
        sessions: &dyn Sessions,
    ) -> Vec<RoutineFired> {
        self.tick_with(&self.in_force(config), sessions)
    }

    /// Completes the fires a stop cut short.
    pub(crate) fn recover(&self, config: &[RoutineConfig], sessions: &dyn Sessions) {
        self.recover_with(&self.in_force(config), sessions);
    }

    /// Whether a routine fires within `secs` from now (or is due): idle exit waits for it.
    pub fn due_within(&self, config: &[RoutineConfig], secs: u64) -> bool {
        let now = self.clock.now();
        let horizon = now.saturating_add(i64::try_from(secs).unwrap_or(i64::MAX));
        self.in_force(config).iter().any(|routine| {
            let after = self
                .inner
                .locked()
                .state
                .routines
                .get(&routine.name)
                .map_or(now, RoutineState::handled_until);
            routine
                .cron
                .next_after(after, self.tz.as_ref())
                .is_some_and(|t| t <= horizon)
        })
    }
}

/// The daemon's session manager as the routines' port.
pub(crate) struct Manager<'a>(pub &'a SessionManager);

impl Sessions for Manager<'_> {
    fn all(&self) -> Vec<SessionInfo> {
        self.0.all_infos()
    }

    fn info(&self, id: &str) -> Option<SessionInfo> {
        self.0.info_of(id).ok()
    }

    fn create(&self, params: SessionNewParams) -> Result<SessionInfo, String> {
        self.0.create(params).map_err(|e| e.to_string())
    }

    fn mark(&self, id: &str, run: &RoutineRun) -> Result<(), String> {
        self.0
            .edit_info(id, &mut |info| info.routine = Some(run.clone()))
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    fn prompt(&self, id: &str, turn_id: &str, text: String) -> Result<(), String> {
        self.0
            .prompt_as(id, turn_id, text)
            .map_err(|e| e.to_string())
    }
}

/// The routines of the live config.
pub(crate) fn configured(daemon: &Daemon) -> Vec<RoutineConfig> {
    daemon.sessions.services().live().config.routines.clone()
}

/// Completes the fires a stop cut short, then ticks every few seconds until shutdown
/// (unless a test sets the clock: then only `routine/tick` fires).
pub fn spawn(daemon: &Arc<Daemon>) {
    let daemon = daemon.clone();
    tokio::spawn(async move {
        let first = daemon.clone();
        let recovered = tokio::task::spawn_blocking(move || {
            let config = configured(&first);
            let sessions = Manager(&first.sessions);
            first.routines.recover(&config, &sessions);
            first.routines.tick(&config, &sessions);
        });
        let _ = recovered.await;
        if daemon.routines.is_controlled() {
            return;
        }
        loop {
            tokio::select! {
                () = tokio::time::sleep(scheduler::TICK_EVERY) => {}
                () = daemon.shutdown.cancelled() => return,
            }
            let ticking = daemon.clone();
            let _ = tokio::task::spawn_blocking(move || {
                let config = configured(&ticking);
                ticking.routines.tick(&config, &Manager(&ticking.sessions));
            })
            .await;
        }
    });
}
