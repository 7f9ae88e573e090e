//! Retention and garbage collection. A session keeps the checkpoints of its last
//! `[checkpoints.retention] turns` turns that are younger than `days`; older rows are
//! marked `expired` (their turn stays in the history, only its files can no longer be
//! restored). [`Checkpoints::collect`] then removes every blob no kept row of any session
//! still reaches — content of expired checkpoints and of deleted sessions.
//!
//! The newest checkpoint of a session is never expired: the next snapshot is incremental
//! from it and reuses its blobs.

use std::collections::HashSet;
use std::path::Path;
use std::str::FromStr;

use amber_store::{Hash, Snapshot, SweepStats};

use super::Checkpoints;
use super::rows::{self, Record};
use super::session::SessionCheckpoints;

impl SessionCheckpoints {
    /// Marks the rows retention no longer keeps. Blocking (appends to the rows file).
    pub(super) fn expire(&self) {
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
        for turn_id in doomed {
            self.append(Record::Expired { turn_id }, false);
        }
    }
}

impl Checkpoints {
    /// Removes the blobs that no kept checkpoint of any session under `sessions_dir`
    /// refers to. Blocking; holds the store's write lock while it decides and sweeps.
    pub(crate) fn collect(&self, sessions_dir: &Path) -> Result<SweepStats, String> {
        if !self.dir.join("objects").is_dir() {
            return Ok(SweepStats::default());
        }
        let store = self.store()?;
        let _sweeping = self.sweeping();
        let mut keep = HashSet::new();
        let entries = std::fs::read_dir(sessions_dir)
            .map_err(|e| format!("{}: {e}", sessions_dir.display()))?;
        for entry in entries.flatten() {
            let path = entry.path().join(rows::ROWS_FILE);
            let rows = rows::load(&path).map_err(|e| format!("{}: {e}", path.display()))?;
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
        store.sweep(&keep).map_err(|e| e.to_string())
    }
}
