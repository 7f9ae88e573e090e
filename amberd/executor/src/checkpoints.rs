//! Checkpoints taken next to the files. amberd keeps a session's checkpoints; the executor
//! walks the workspace, hashes what changed and sends the snapshot as the changes since the
//! last one amberd holds (`checkpoint/take`); amberd then reads the content it lacks
//! (`checkpoint/read`). A rewind sends the blobs it writes (`checkpoint/stage`) and then its
//! plan (`checkpoint/restore`), carried out here by the same code as a local restore.
//!
//! ```text
//! <cache>/checkpoints/objects/     snapshot manifests only (the stat cache's content)
//! <cache>/checkpoints/workspaces/  the newest snapshot of each workspace (`StatCache`)
//! <cache>/checkpoints/staging/<session>/  blobs of a restore until it runs
//! ```
//!
//! `<cache>` is `$XDG_CACHE_HOME/amber-exec`, else `~/.cache/amber-exec`. It is a cache: lost,
//! the next snapshot reads every file once.
//!
//! **Invariants:** content leaves this machine only as read from a path the snapshot named
//! and only when it still hashes to what the snapshot recorded; a restore writes only
//! through `amber_store::RestorePlan::apply` (beneath the workspace, never through a
//! symlink, never in `.git`/`.amber`) and only blobs that hash to their names.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use amber_proto::sync::Locked;
use amber_store::{BlobStore, Hash, HashesOnly, Snapshot, StatCache};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

use crate::watched::WatchedTree;
use crate::wire::{
    Blob, CheckpointReadResult, CheckpointRestResult, CheckpointRestoreResult,
    CheckpointTakeResult, RefusedPath, RpcError, UnreadBlob, WantedBlob, code,
};

/// Snapshots a session keeps to answer a `base`: the last few it sent.
const SENT_KEPT: usize = 4;
/// Content bytes in one `checkpoint/read` answer at most (before base64), and so the largest
/// file a snapshot here records (larger ones are listed as skipped, as over the limit).
pub(crate) const READ_ANSWER_BYTES: u64 = 16 * 1024 * 1024;

/// The executor's checkpoint state.
pub(crate) struct Checkpointer {
    dir: Option<PathBuf>,
    store: OnceLock<Result<BlobStore, String>>,
    /// Each workspace's watch and newest snapshot taken by this process (the stat cache in
    /// memory; on disk through the store and `StatCache`).
    trees: Mutex<HashMap<PathBuf, Arc<Mutex<WatchedTree>>>>,
    takes: AtomicU64,
    /// Entries in one answer at most ([`PAGE_ENTRIES`]; tests make it small).
    page: usize,
}

/// Entries in one `checkpoint/take` or `checkpoint/rest` answer at most (about 7 MB of
/// JSON): a larger snapshot comes in parts, so no answer nears the client's line limit.
pub(crate) const PAGE_ENTRIES: usize = 40_000;

/// Test switch: entries in one answer at most, instead of [`PAGE_ENTRIES`].
const PAGE_SWITCH: &str = "AMBER_TEST_CHECKPOINT_PAGE";

/// One session's snapshots sent, by `take`, and the entries of the last answer still to
/// send.
#[derive(Default)]
pub(crate) struct Sent {
    kept: Mutex<VecDeque<(u64, Arc<Snapshot>)>>,
    rest: Mutex<Option<(u64, std::vec::IntoIter<amber_store::Entry>)>>,
}

impl Checkpointer {
    /// The checkpoints kept under `cache` (`None`: no cache directory; every snapshot then
    /// reads every file).
    pub(crate) fn new(cache: Option<PathBuf>) -> Self {
        Self {
            dir: cache.map(|c| c.join("checkpoints")),
            store: OnceLock::new(),
            trees: Mutex::new(HashMap::new()),
            takes: AtomicU64::new(0),
            // The end-to-end tests make answers small to see the parts put together.
            page: amber_exec::test_switches::var(PAGE_SWITCH)
                .and_then(|v| v.parse().ok())
                .filter(|p| *p > 0)
                .unwrap_or(PAGE_ENTRIES),
        }
    }

    /// `$XDG_CACHE_HOME/amber-exec`, else `$HOME/.cache/amber-exec`.
    pub(crate) fn default_cache(
        env: impl Fn(&str) -> Option<std::ffi::OsString>,
    ) -> Option<PathBuf> {
        let absolute = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
        env("XDG_CACHE_HOME")
            .and_then(absolute)
            .or_else(|| env("HOME").and_then(absolute).map(|h| h.join(".cache")))
            .map(|c| c.join("amber-exec"))
    }

    /// The directory to leave out of a snapshot, should it lie in a workspace.
    pub(crate) fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    fn store(&self) -> Result<&BlobStore, RpcError> {
        let opened = self.store.get_or_init(|| {
            let dir = self
                .dir
                .as_ref()
                .ok_or_else(|| "no cache directory (neither XDG_CACHE_HOME nor HOME)".to_owned())?;
            BlobStore::open(dir.join("objects")).map_err(|e| e.to_string())
        });
        opened
            .as_ref()
            .map_err(|e| failed(format!("the checkpoint cache: {e}")))
    }

    fn stat_cache(&self) -> Option<StatCache> {
        self.dir
            .as_ref()
            .map(|d| StatCache::new(d.join("workspaces")))
    }

    /// The newest snapshot of `root` known here: in memory, else the stat cache's.
    fn previous(
        &self,
        tree: &WatchedTree,
        root: &Path,
        store: &BlobStore,
    ) -> Option<Arc<Snapshot>> {
        if let Some(snap) = tree.latest() {
            return Some(snap);
        }
        let hash = self.stat_cache()?.get(root)?;
        Snapshot::load(store, &hash).ok().map(Arc::new)
    }

    /// The watched tree of `root` (made at its first take).
    fn tree(&self, root: &Path) -> Arc<Mutex<WatchedTree>> {
        Arc::clone(
            self.trees
                .locked()
                .entry(root.to_owned())
                .or_insert_with(|| Arc::new(Mutex::new(WatchedTree::new()))),
        )
    }

    /// Takes a snapshot of `root` and answers it as the changes since the snapshot `base`
    /// names in `sent` (whole when it names none kept). Blocking.
    pub(crate) fn take(
        &self,
        root: &Path,
        sent: &Sent,
        base: Option<u64>,
        max_file_bytes: u64,
        exclude: &[PathBuf],
    ) -> Result<CheckpointTakeResult, RpcError> {
        let store = self.store()?;
        let max_file_bytes = max_file_bytes.min(READ_ANSWER_BYTES);
        let tree = self.tree(root);
        // One take of a tree at a time: its watch and newest snapshot go together.
        let mut tree = tree.locked();
        let previous = self.previous(&tree, root, store);
        let mut snap = tree
            .take(
                root,
                previous.as_deref(),
                &HashesOnly { clock: store },
                max_file_bytes,
                exclude,
            )
            .map_err(|e| failed(e.to_string()))?;
        // Kept as the stat cache of the next take, in this process or a later one.
        match snap.save_after(previous.as_deref(), store) {
            Ok(hash) => {
                if let Some(cache) = self.stat_cache()
                    && let Err(err) = cache.set(root, &hash)
                {
                    tracing::warn!(%err, "cannot record the workspace's newest snapshot");
                }
            }
            Err(err) => tracing::warn!(%err, "cannot keep the snapshot's stat cache"),
        }
        let snap = Arc::new(snap);
        tree.set_latest(Arc::clone(&snap));
        drop(tree);
        let mut kept = sent.kept.locked();
        let base = base.and_then(|b| {
            kept.iter()
                .find(|(t, _)| *t == b)
                .map(|(_, s)| Arc::clone(s))
        });
        let mut delta = snap.delta_from(base.as_deref());
        let take = self.takes.fetch_add(1, Ordering::Relaxed) + 1;
        kept.push_back((take, snap));
        while kept.len() > SENT_KEPT {
            kept.pop_front();
        }
        drop(kept);
        let rest = if delta.changed.len() > self.page {
            let later = delta.changed.split_off(self.page);
            let count = later.len() as u64;
            *sent.rest.locked() = Some((take, later.into_iter()));
            count
        } else {
            *sent.rest.locked() = None;
            0
        };
        Ok(CheckpointTakeResult {
            take,
            snapshot: delta,
            rest,
        })
    }

    /// `checkpoint/rest`: the next part of the entries take `take` answered, in order.
    pub(crate) fn rest(&self, sent: &Sent, take: u64) -> Result<CheckpointRestResult, RpcError> {
        let mut rest = sent.rest.locked();
        let Some((_, entries)) = rest.as_mut().filter(|(t, _)| *t == take) else {
            return Err(RpcError::new(
                code::INVALID_PARAMS,
                format!("take {take} has nothing more to send (a later take replaced it)"),
            ));
        };
        let changed: Vec<amber_store::Entry> = entries.by_ref().take(self.page).collect();
        let left = entries.len() as u64;
        if left == 0 {
            *rest = None;
        }
        Ok(CheckpointRestResult {
            changed,
            rest: left,
        })
    }

    /// Drops what the stat cache no longer names: run with no snapshot being taken.
    pub(crate) fn sweep(&self) {
        let (Ok(store), Some(cache)) = (self.store(), self.stat_cache()) else {
            return;
        };
        let mut keep = std::collections::HashSet::new();
        for hash in cache.snapshots() {
            if Snapshot::reach(store, &hash, &mut keep).is_err() {
                cache.retain(|h| *h != hash);
            }
        }
        if let Err(err) = store.sweep(&keep) {
            tracing::warn!(%err, "cannot sweep the checkpoint cache");
        }
    }

    fn staging(&self, session: &str) -> Result<BlobStore, RpcError> {
        let dir = self
            .dir
            .as_ref()
            .ok_or_else(|| failed("no cache directory to stage a restore in".to_owned()))?;
        BlobStore::open(dir.join("staging").join(session)).map_err(|e| failed(e.to_string()))
    }

    /// Keeps blobs for the session's next restore, each checked against its hash. Blocking.
    pub(crate) fn stage(&self, session: &str, blobs: &[Blob]) -> Result<(), RpcError> {
        let staging = self.staging(session)?;
        for blob in blobs {
            let bytes = BASE64.decode(&blob.data).map_err(|e| {
                RpcError::new(code::INVALID_PARAMS, format!("blob {}: {e}", blob.hash))
            })?;
            if Hash::of(&bytes) != blob.hash {
                return Err(RpcError::new(
                    code::INVALID_PARAMS,
                    format!("blob {}: its content hashes to another name", blob.hash),
                ));
            }
            staging.put(&bytes).map_err(|e| failed(e.to_string()))?;
        }
        staging.sync().map_err(|e| failed(e.to_string()))
    }

    /// Carries out `plan` on `root` from the staged blobs, then drops them. Blocking.
    pub(crate) fn restore(
        &self,
        session: &str,
        root: &Path,
        plan: &amber_store::RestorePlan,
    ) -> Result<CheckpointRestoreResult, RpcError> {
        let staging = self.staging(session)?;
        let applied = plan.apply(root, &staging);
        let _ = std::fs::remove_dir_all(staging.dir());
        let applied = applied.map_err(|e| failed(e.to_string()))?;
        // The workspace changed: the next snapshot starts from what the cache says, and the
        // restored files' new metadata makes them read again.
        Ok(CheckpointRestoreResult {
            written: applied.written,
            deleted: applied.deleted,
            refused: applied
                .refused
                .into_iter()
                .map(|r| RefusedPath {
                    path: r.path,
                    reason: r.refusal.to_string(),
                })
                .collect(),
        })
    }

    /// The session's staged blobs go (it closed).
    pub(crate) fn forget(&self, session: &str) {
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir.join("staging").join(session));
        }
    }
}

/// Reads the content `wanted` names from `root`: each file as it is now, sent only when it
/// still hashes to the snapshot's record. Stops before the answer passes `budget` bytes of
/// content (at least one blob is answered). Blocking.
pub(crate) fn read(
    root: &Path,
    wanted: &[WantedBlob],
    max_file_bytes: u64,
    budget: u64,
) -> CheckpointReadResult {
    let mut out = CheckpointReadResult::default();
    let mut used = 0u64;
    for want in wanted {
        let unread = |reason: String| UnreadBlob {
            path: want.path.clone(),
            hash: want.hash,
            reason,
        };
        if !want.path.is_normal() {
            out.unread
                .push(unread("not a path inside the workspace".to_owned()));
            continue;
        }
        let bytes = match read_entry(&want.path.join_to(root), max_file_bytes) {
            Ok(bytes) => bytes,
            Err(err) => {
                out.unread.push(unread(err.to_string()));
                continue;
            }
        };
        if Hash::of(&bytes) != want.hash {
            out.unread
                .push(unread("it changed since the snapshot was taken".to_owned()));
            continue;
        }
        let size = bytes.len() as u64;
        if used > 0 && used + size > budget {
            break;
        }
        used += size;
        out.blobs.push(Blob {
            hash: want.hash,
            data: BASE64.encode(&bytes),
        });
    }
    out
}

/// A file's bytes, or a symlink's target: never through a FIFO or device (opened
/// non-blocking, then checked to be a regular file), never more than `max` bytes.
fn read_entry(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let meta = std::fs::symlink_metadata(path)?;
    if meta.file_type().is_symlink() {
        return Ok(std::fs::read_link(path)?.as_os_str().as_bytes().to_vec());
    }
    read_regular(path, max)
}

/// A regular file's bytes: opened without following a link and non-blocking (a FIFO or
/// device swapped in cannot hold the reader), checked to be a regular file once open,
/// never more than `max` bytes.
pub(crate) fn read_regular(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let file = File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if meta.len() > max {
        return Err(std::io::Error::other(format!(
            "{} bytes, more than the {max} allowed",
            meta.len()
        )));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(max + 1).read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn failed(message: String) -> RpcError {
    RpcError::new(code::CHECKPOINT_FAILED, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_larger_than_an_answer_comes_in_parts_in_order() {
        let ws = tempfile::tempdir().unwrap();
        let cache = tempfile::tempdir().unwrap();
        for i in 0..25 {
            std::fs::write(ws.path().join(format!("f{i:02}")), format!("{i}")).unwrap();
        }
        let checkpointer = Checkpointer {
            page: 10,
            ..Checkpointer::new(Some(cache.path().to_path_buf()))
        };
        let sent = Sent::default();
        let first = checkpointer
            .take(ws.path(), &sent, None, 1024, &[])
            .unwrap();
        assert_eq!((first.snapshot.changed.len(), first.rest), (10, 15));
        let mut all = first.snapshot.changed.clone();
        let second = checkpointer.rest(&sent, first.take).unwrap();
        assert_eq!((second.changed.len(), second.rest), (10, 5));
        all.extend(second.changed);
        let third = checkpointer.rest(&sent, first.take).unwrap();
        assert_eq!((third.changed.len(), third.rest), (5, 0));
        all.extend(third.changed);
        let names: Vec<String> = all.iter().map(|e| e.path.to_string()).collect();
        let want: Vec<String> = (0..25).map(|i| format!("f{i:02}")).collect();
        assert_eq!(names, want);
        // Nothing more, and a later take replaces what an earlier one left.
        assert!(checkpointer.rest(&sent, first.take).is_err());
        let again = checkpointer
            .take(ws.path(), &sent, None, 1024, &[])
            .unwrap();
        assert_eq!(again.rest, 15);
        checkpointer
            .take(ws.path(), &sent, Some(again.take), 1024, &[])
            .unwrap();
        assert!(checkpointer.rest(&sent, again.take).is_err());
    }
}
