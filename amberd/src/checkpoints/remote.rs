//! Checkpoints of a workspace on another machine (a session whose tools run on an
//! executor). The snapshot is taken there, next to the files ([`RemoteWorkspace::take`]):
//! amberd receives it as the changes since the last one it holds, reads the content it
//! lacks, checks every blob against its name and keeps the snapshot in its own store, as a
//! local one — so its rows, diffs, rewinds and collection are the same. A restore sends
//! its blobs, then its plan, and the executor carries it out with the same code as a local
//! restore.
//!
//! **Invariants:** a blob enters the store only under the hash of its bytes as read here
//! (an executor cannot plant content under another name); an entry whose content could
//! not be read is recorded missing, so the snapshot is never a restore target with a hole.

use std::collections::HashSet;
use std::sync::Arc;

use amber_store::{
    Applied, BlobStore, Hash, Missing, RelPath, RestorePlan, Snapshot, SnapshotDelta,
};

use super::CheckpointFailure;

/// The blocking calls a session's checkpoints make to the machine its workspace is on.
pub(crate) trait RemoteWorkspace: Send + Sync {
    /// Takes a snapshot there; answered as the changes since the snapshot `base` named
    /// (whole when it names none the executor keeps), with its own name for the next base.
    fn take(&self, base: Option<u64>, max_file_bytes: u64) -> Result<(u64, SnapshotDelta), String>;

    /// Reads content the snapshot named: the blobs given, and the entries not given with
    /// why. Entries in neither were left for another call.
    fn read(&self, wanted: &[(RelPath, Hash)]) -> Result<Read, String>;

    /// Carries out `plan` there, with its blobs read from `store`.
    fn restore(&self, plan: &RestorePlan, store: &BlobStore) -> Result<Applied, String>;
}

/// What [`RemoteWorkspace::read`] gave.
#[derive(Debug, Default)]
pub(crate) struct Read {
    pub(crate) blobs: Vec<Vec<u8>>,
    pub(crate) unread: Vec<(RelPath, Hash, String)>,
}

/// A snapshot taken by `remote`, kept in `store`: rebuilt from `base` (the snapshot the
/// take `base_take` sent), its missing content read and verified. Returns it (unsaved) and
/// the take that names it. Blocking.
pub(super) fn take(
    remote: &Arc<dyn RemoteWorkspace>,
    store: &BlobStore,
    base: Option<(&Snapshot, u64)>,
    max_file_bytes: u64,
) -> Result<(Snapshot, u64), CheckpointFailure> {
    let (take, delta) = remote
        .take(base.map(|(_, t)| t), max_file_bytes)
        .map_err(CheckpointFailure::Remote)?;
    let full = delta.full;
    let mut snap = delta.apply(base.map(|(s, _)| s))?;
    // Only what the delta brought can be new to the store; a whole one brings everything.
    let fresh: Vec<(RelPath, Hash)> = {
        let old = base.filter(|_| !full).map(|(s, _)| s);
        let mut seen = HashSet::new();
        snap.entries
            .iter()
            .filter(|e| {
                old.and_then(|o| o.get(&e.path))
                    .is_none_or(|o| o.hash != e.hash)
            })
            .filter(|e| seen.insert(e.hash) && !store.contains(&e.hash))
            .map(|e| (e.path.clone(), e.hash))
            .collect()
    };
    let mut unread = fetch(remote, store, fresh)?;
    store.sync()?;
    if !unread.is_empty() {
        // Every entry with that content is a hole, whichever path asked for it.
        let lost: HashSet<Hash> = unread.iter().map(|(_, h, _)| *h).collect();
        snap.entries.retain(|e| {
            if !lost.contains(&e.hash) {
                return true;
            }
            if !unread.iter().any(|(p, _, _)| *p == e.path) {
                unread.push((
                    e.path.clone(),
                    e.hash,
                    "its content could not be read".into(),
                ));
            }
            false
        });
        snap.missing.extend(
            unread
                .into_iter()
                .map(|(path, _, reason)| Missing { path, reason }),
        );
        snap.missing.sort_by(|a, b| a.path.cmp(&b.path));
    }
    Ok((snap, take))
}

/// Reads `wanted` into `store` until every blob is stored or known unreadable; returns the
/// unreadable ones.
fn fetch(
    remote: &Arc<dyn RemoteWorkspace>,
    store: &BlobStore,
    mut wanted: Vec<(RelPath, Hash)>,
) -> Result<Vec<(RelPath, Hash, String)>, CheckpointFailure> {
    let mut unreadable = Vec::new();
    while !wanted.is_empty() {
        let read = remote.read(&wanted).map_err(CheckpointFailure::Remote)?;
        if read.blobs.is_empty() && read.unread.is_empty() {
            return Err(CheckpointFailure::Remote(
                "the executor answered a read with nothing".to_owned(),
            ));
        }
        let mut done: HashSet<Hash> = HashSet::new();
        for bytes in read.blobs {
            // Named by what it hashes to here, whatever the executor called it.
            done.insert(store.put(&bytes)?);
        }
        for (path, hash, reason) in read.unread {
            done.insert(hash);
            unreadable.push((path, hash, reason));
        }
        let before = wanted.len();
        wanted.retain(|(_, h)| !done.contains(h));
        if wanted.len() == before {
            return Err(CheckpointFailure::Remote(
                "the executor answered a read with blobs nobody asked for".to_owned(),
            ));
        }
    }
    Ok(unreadable)
}
