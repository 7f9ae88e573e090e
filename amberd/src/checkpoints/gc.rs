//! Retention and garbage collection. A session keeps the checkpoints of its last
//! `[checkpoints.retention] turns` turns that are younger than `days`; older rows are
//! marked `expired` (their turn stays in the history, only its files can no longer be
//! restored). [`Checkpoints::collect`] then removes every blob no kept row of any session
//! still reaches — content of expired checkpoints and of deleted sessions.
//!
//! A collection runs in the background ([`Checkpoints::collect_soon`]): at daemon start,
//! after a `session/delete`, and after a turn's bookkeeping expired rows — the last at most
//! once per [`EXPIRY_COLLECT_INTERVAL`] (each reads every kept checkpoint and lists the
//! store; a run asked for sooner is put off to then, and requests meanwhile share it).
//!
//! The newest checkpoint of a session is never expired: the next snapshot is incremental
//! from it and reuses its blobs. The stat cache's pointer to a workspace's newest snapshot
//! (`Checkpoints::stat_cache`) keeps nothing: a sweep drops the pointers to what it removes.

use amber_proto::sync::Locked;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

use amber_store::{Hash, Snapshot, SweepStats};

use super::rows::{self, Record};
use super::session::SessionCheckpoints;
use super::{CheckpointFailure, Checkpoints};

/// Collections asked for by expiry run at most this often.
pub(super) const EXPIRY_COLLECT_INTERVAL: Duration = Duration::from_secs(60);

/// The background collections of a daemon: the one queued, and when expiry last ran one.
#[derive(Debug)]
pub(super) struct Collector {
    /// When the queued collection starts; `None`: none is queued.
    due: Option<Instant>,
    /// The queued one was (also) asked for by expiry.
    for_expiry: bool,
    /// When the last collection asked for by expiry started.
    last_for_expiry: Option<Instant>,
    /// How often expiry may start one ([`EXPIRY_COLLECT_INTERVAL`]; tests shorten it).
    interval: Duration,
    /// Collections running now, and run so far (tests wait on them).
    running: usize,
    runs: u64,
}

impl Default for Collector {
    fn default() -> Self {
        Self {
            due: None,
            for_expiry: false,
            last_for_expiry: None,
            interval: EXPIRY_COLLECT_INTERVAL,
            running: 0,
            runs: 0,
        }
    }
}

impl SessionCheckpoints {
    /// Marks the rows retention no longer keeps; how many it marked. Blocking (appends to
    /// the rows file).
    pub(super) fn expire(&self) -> usize {
        let retention = self.daemon.config().retention.clone();
        let now = std::time::SystemTime::now();
        let doomed: Vec<String> = {
            let state = self.lock();
            let kept: Vec<_> = state.rows.iter().filter(|r| r.has_checkpoint()).collect();
            let newest = kept.len().saturating_sub(1);
            kept.iter()
                .enumerate()
                .filter(|&(i, row)| {
                    if i == newest {
                        return false;
                    }
                    let too_many = retention.turns > 0 && newest - i >= retention.turns as usize;
                    let too_old = retention.days > 0
                        && row.before.as_ref().is_some_and(|b| {
                            humantime::parse_rfc3339_weak(&b.time).is_ok_and(|t| {
                                now.duration_since(t).is_ok_and(|age| {
                                    age.as_secs() >= u64::from(retention.days) * 86_400
                                })
                            })
                        });
                    too_many || too_old
                })
                .map(|(_, row)| row.turn_id.clone())
                .collect()
        };
        let expired = doomed.len();
        for turn_id in doomed {
            self.append(Record::Expired { turn_id }, false);
        }
        expired
    }
}

impl Checkpoints {
    fn collector(&self) -> MutexGuard<'_, Collector> {
        // Every writer leaves it consistent between statements.
        self.collector.locked()
    }

    /// Collects unreferenced content in the background (on the blocking pool), never
    /// holding up the caller. Right away, unless `after_expiry` and expiry already started
    /// one within the interval: then when the interval is over. A request that a queued
    /// collection will cover (it starts no later) adds nothing. Safe beside snapshots being
    /// taken: [`Checkpoints::collect`] holds the store's write lock.
    pub(crate) fn collect_soon(self: &Arc<Self>, sessions_dir: PathBuf, after_expiry: bool) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!("no runtime to collect checkpoint content on");
            return;
        };
        let now = Instant::now();
        let due = {
            let mut gc = self.collector();
            let due = match (after_expiry, gc.last_for_expiry) {
                (true, Some(last)) => (last + gc.interval).max(now),
                _ => now,
            };
            gc.for_expiry |= after_expiry;
            if gc.due.is_some_and(|queued| queued <= due) {
                return;
            }
            gc.due = Some(due);
            due
        };
        let this = self.clone();
        runtime.spawn(async move {
            tokio::time::sleep_until(tokio::time::Instant::from_std(due)).await;
            let ran =
                tokio::task::spawn_blocking(move || this.collect_due(due, &sessions_dir)).await;
            if let Err(err) = ran {
                tracing::error!(%err, "the checkpoint collection task failed");
            }
        });
    }

    /// Runs the collection queued for `due`, unless an earlier one replaced it (that one
    /// started after this was asked for, so it covered it).
    fn collect_due(&self, due: Instant, sessions_dir: &Path) {
        {
            let mut gc = self.collector();
            if gc.due != Some(due) {
                return;
            }
            gc.due = None;
            if std::mem::take(&mut gc.for_expiry) {
                gc.last_for_expiry = Some(Instant::now());
            }
            gc.running += 1;
        }
        match self.collect(sessions_dir) {
            Ok(stats) if stats.removed > 0 => tracing::info!(
                removed = stats.removed,
                bytes = stats.bytes_freed,
                "collected unreferenced checkpoint content"
            ),
            Ok(_) => {}
            Err(err) => tracing::warn!(%err, "cannot collect checkpoint content"),
        }
        let mut gc = self.collector();
        gc.running -= 1;
        gc.runs += 1;
    }

    /// Test hooks: how often expiry may start a collection; whether none is queued or
    /// running; how many have run.
    #[cfg(test)]
    pub(super) fn set_collect_interval(&self, interval: Duration) {
        self.collector().interval = interval;
    }

    #[cfg(test)]
    pub(super) fn collections(&self) -> (bool, u64) {
        let gc = self.collector();
        (gc.due.is_none() && gc.running == 0, gc.runs)
    }

    /// Removes the blobs that no kept checkpoint of any session under `sessions_dir`
    /// refers to. Blocking; holds the store's write lock while it decides and sweeps.
    pub(crate) fn collect(&self, sessions_dir: &Path) -> Result<SweepStats, CheckpointFailure> {
        if !self.dir.join("objects").is_dir() {
            return Ok(SweepStats::default());
        }
        let store = self.store()?;
        let _sweeping = self.sweeping();
        let mut keep = HashSet::new();
        let entries = std::fs::read_dir(sessions_dir).map_err(|source| CheckpointFailure::Io {
            path: sessions_dir.to_owned(),
            source,
        })?;
        for entry in entries.flatten() {
            let path = entry.path().join(rows::ROWS_FILE);
            let rows = rows::load(&path).map_err(|source| CheckpointFailure::Io {
                path: path.clone(),
                source,
            })?;
            for row in rows.iter().filter(|r| !r.expired) {
                let named = [
                    row.before.as_ref().and_then(|b| b.snapshot.as_deref()),
                    row.after.as_ref().and_then(|a| a.snapshot.as_deref()),
                ];
                for hex in named.into_iter().flatten() {
                    let Ok(hash) = Hash::from_str(hex) else {
                        continue;
                    };
                    // A snapshot that cannot be read keeps what was reached of it; the
                    // rewind that needs it fails either way.
                    if let Err(err) = Snapshot::reach(store, &hash, &mut keep) {
                        tracing::warn!(snapshot = %hash, %err, "a kept checkpoint is unreadable");
                    }
                }
            }
        }
        // A workspace's newest snapshot outlives no kept checkpoint: the stat cache points
        // only at what stays, so a first snapshot never reuses a hash whose blob is gone.
        self.stat_cache().retain(|hash| keep.contains(hash));
        Ok(store.sweep(&keep)?)
    }
}
