//! Checkpoints, diff, rewind and fork: what each turn did to the workspace,
//! whatever did it, and the way back.
//!
//! ```text
//! <data_dir>/checkpoints/objects/      the daemon's blob store (amber-store `BlobStore`):
//!                                      file contents and snapshots, shared by every session
//! <data_dir>/checkpoints/workspaces/   each workspace's newest snapshot (`StatCache`): a
//!                                      session's first one reads only what changed since
//! <data_dir>/sessions/<id>/checkpoints the session's rows (`rows.rs`): turn, before, after, …
//! <data_dir>/sessions/<id>/rewind.json a rewind in progress (`rewind.rs`), until it is done
//! ```
//!
//! Before the first tool call of a turn that may change files (`Tool::may_change_files`),
//! the session takes a snapshot of its workspace (`session.rs`, incremental from the
//! previous one) and records it; when the turn ends it takes another and records what
//! changed between the two. A turn that calls no such tool takes none and costs nothing.
//! A session whose workspace is on an executor takes the same snapshots there (`remote.rs`)
//! and keeps them here, in the same store and rows. A local workspace is watched (inotify,
//! `amber_executor::watched`) from its first recorded snapshot on, so later ones list again
//! only the directories that changed.
//!
//! **Invariants:** nothing here touches the user's `.git` (snapshots exclude it and never
//! run git); the workspace is changed only by a rewind, which journals its plan before it
//! writes anything and is finished on restart if a crash cut it short; a snapshot with
//! files it could not read is never a restore target; blobs are swept (`gc.rs`, in the
//! background: at start, after a session is deleted, after a turn expired checkpoints)
//! only under the store's write lock, which every snapshot and restore holds for reading
//! until the row naming its snapshot is written, so a sweep never removes what a snapshot
//! being taken has just written.

mod diff;
mod gc;
mod remote;
pub(crate) mod rewind;
mod rows;
mod session;
#[cfg(test)]
mod tests;
mod windows;

use amber_proto::sync::RwLocked;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};

use amber_store::{BlobStore, CheckpointError};

use crate::config::CheckpointsConfig;

pub(crate) use self::diff::DiffError;
pub(crate) use self::remote::{Read as RemoteRead, RemoteWorkspace};
pub(crate) use self::session::{ContinueOver, SessionCheckpoints};

/// What failed on the checkpoint side; the store's error stays the source.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CheckpointFailure {
    #[error("the checkpoint store cannot be opened: {0}")]
    Unavailable(#[source] Arc<CheckpointError>),
    #[error(transparent)]
    Store(#[from] CheckpointError),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("a checkpoint names no snapshot: {0}")]
    BadName(#[from] amber_store::ParseHashError),
    /// The executor of a session whose workspace is elsewhere failed or cannot be reached.
    #[error("the session's executor: {0}")]
    Remote(String),
}

/// The daemon-wide part: configuration and the blob store every session shares.
pub struct Checkpoints {
    config: CheckpointsConfig,
    dir: PathBuf,
    /// amber's data directory (resolved): never part of a snapshot, should it lie inside a
    /// workspace — the store would record itself.
    data_dir: PathBuf,
    /// Opened on first use, so a daemon that never checkpoints creates nothing.
    store: OnceLock<Result<BlobStore, Arc<CheckpointError>>>,
    /// Read: taking a snapshot, restoring, diffing. Write: sweeping unreferenced blobs.
    sweep: RwLock<()>,
    /// The background collections (`gc.rs`).
    collector: Mutex<gc::Collector>,
}

impl Checkpoints {
    /// Checkpoints stored under `<data_dir>/checkpoints`.
    pub fn new(config: CheckpointsConfig, data_dir: &Path) -> Arc<Self> {
        Arc::new(Self {
            config,
            dir: data_dir.join("checkpoints"),
            data_dir: std::fs::canonicalize(data_dir).unwrap_or_else(|_| data_dir.to_owned()),
            store: OnceLock::new(),
            sweep: RwLock::new(()),
            collector: Mutex::new(gc::Collector::default()),
        })
    }

    pub fn enabled(&self) -> bool {
        self.config.enabled
    }

    pub(crate) fn config(&self) -> &CheckpointsConfig {
        &self.config
    }

    /// The newest snapshot of each workspace, so that a session's first checkpoint reads
    /// only what changed since another session's last one.
    pub(crate) fn stat_cache(&self) -> amber_store::StatCache {
        amber_store::StatCache::new(self.dir.join("workspaces"))
    }

    /// The blob store, or why it cannot be opened.
    pub(crate) fn store(&self) -> Result<&BlobStore, CheckpointFailure> {
        self.store
            .get_or_init(|| BlobStore::open(self.dir.join("objects")).map_err(Arc::new))
            .as_ref()
            .map_err(|e| CheckpointFailure::Unavailable(e.clone()))
    }

    fn reading(&self) -> RwLockReadGuard<'_, ()> {
        self.sweep.read_locked()
    }

    fn sweeping(&self) -> RwLockWriteGuard<'_, ()> {
        self.sweep.write_locked()
    }
}
