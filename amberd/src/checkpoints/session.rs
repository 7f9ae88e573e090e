//! [`SessionCheckpoints`]: one session's checkpoints — its rows, the snapshot a turn takes
//! before its first file-changing call and after it ends, and the list and diff read from
//! them. Snapshots run on the blocking pool (they read the workspace); the turn waits for
//! the first one, since it is the state a rewind restores.

use amber_proto::sync::Locked;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use amber_proto::{ChangedPath, CheckpointInfo, NoCheckpoint};
use amber_store::{Applied, Hash, RestorePlan, Snapshot};

use amber_executor::watched::WatchedTree;

use super::remote::{self, RemoteWorkspace};
use super::rows::{self, After, Record, RowsFile, TurnRow};
use super::windows::{self, Window};
use super::{CheckpointFailure, Checkpoints};
use crate::clock::now_rfc3339;

/// What a new executor's workspace may hold for the newest checkpoint to be restored into
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ContinueOver {
    /// Nothing: a workspace that holds files is the user's, and left alone.
    Empty,
    /// The fresh clone a fleet runner made for the session: the checkpoint is restored
    /// over it (what differs is written, what the checkpoint lacks is removed).
    Clone,
}

/// One session's checkpoints.
pub(crate) struct SessionCheckpoints {
    pub(super) daemon: Arc<Checkpoints>,
    pub(super) workspace: PathBuf,
    /// The session's directory in the store; `None` for a daemon without a store (then
    /// nothing is recorded).
    pub(super) dir: Option<PathBuf>,
    /// Whether turns take snapshots (`[checkpoints] enabled`). Without, the rows still
    /// record each turn, so the conversation can be rewound and forked.
    snapshots: bool,
    /// Where the workspace is when not on amberd's machine (the session's environment).
    elsewhere: Option<Elsewhere>,
    rows_file: Option<RowsFile>,
    state: Mutex<State>,
    /// A local workspace under watch, made at the first recorded snapshot: the next ones
    /// list again only what changed. Its newest snapshot is always a recorded one (so the
    /// content its hashes name stays referenced); a rewind drops it.
    tree: Mutex<Option<WatchedTree>>,
}

/// A workspace on an executor: its spec, and the link to it once the session started.
struct Elsewhere {
    spec: String,
    remote: OnceLock<Arc<dyn RemoteWorkspace>>,
}

#[derive(Default)]
pub(super) struct State {
    pub(super) rows: Vec<TurnRow>,
    /// The newest snapshot taken (or loaded): the next one is incremental from it.
    latest: Option<Arc<Snapshot>>,
    /// The executor's name for `latest`, when it took it: the next take is sent as the
    /// changes since it.
    latest_take: Option<u64>,
    /// The running turn.
    turn: Option<RunningTurn>,
}

struct RunningTurn {
    turn_id: String,
    /// A checkpoint was attempted (taken or failed): the turn takes at most one.
    tried: bool,
    before: Option<Arc<Snapshot>>,
    /// When its file-changing batches ran (`windows.rs`), and the start of the one running.
    windows: Vec<Window>,
    open: Option<i64>,
}

impl SessionCheckpoints {
    /// The checkpoints of the session stored in `session_dir` (rows read from there), for
    /// its workspace; nothing is recorded when `session_dir` is `None`, and no snapshot is
    /// taken when the config disables them.
    pub(crate) fn new(
        daemon: Arc<Checkpoints>,
        workspace: PathBuf,
        session_dir: Option<PathBuf>,
    ) -> Self {
        let snapshots = daemon.enabled() && session_dir.is_some();
        let dir = session_dir;
        let rows_file = dir.as_ref().map(|d| RowsFile::new(d.join(rows::ROWS_FILE)));
        let rows = rows_file
            .as_ref()
            .map(|f| {
                rows::load(f.path()).unwrap_or_else(|err| {
                    tracing::warn!(path = %f.path().display(), %err, "cannot read checkpoint rows");
                    Vec::new()
                })
            })
            .unwrap_or_default();
        Self {
            daemon,
            workspace,
            dir,
            snapshots,
            elsewhere: None,
            rows_file,
            state: Mutex::new(State {
                rows,
                ..State::default()
            }),
            tree: Mutex::new(None),
        }
    }

    /// Whether turns are recorded at all (the session is in a store).
    pub(crate) fn enabled(&self) -> bool {
        self.rows_file.is_some()
    }

    /// The checkpoints of a session whose workspace is on the executor `environment`
    /// names: its snapshots are taken there ([`SessionCheckpoints::set_remote`]).
    pub(crate) fn in_environment(mut self, environment: String) -> Self {
        self.elsewhere = Some(Elsewhere {
            spec: environment,
            remote: OnceLock::new(),
        });
        self
    }

    /// The link to the workspace's executor (set once, when the session starts).
    pub(crate) fn set_remote(&self, remote: Arc<dyn RemoteWorkspace>) {
        if let Some(elsewhere) = &self.elsewhere {
            let _ = elsewhere.remote.set(remote);
        }
    }

    /// The executor the workspace is on; `Ok(None)` for a local one.
    fn remote(&self) -> Result<Option<&Arc<dyn RemoteWorkspace>>, CheckpointFailure> {
        match &self.elsewhere {
            None => Ok(None),
            Some(e) => e.remote.get().map(Some).ok_or_else(|| {
                CheckpointFailure::Remote(format!("{} is not connected yet", e.spec))
            }),
        }
    }

    /// Whether turns take snapshots of the workspace (`[checkpoints] enabled`).
    pub(crate) fn snapshots(&self) -> bool {
        self.snapshots
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        // Every writer leaves the state consistent between statements.
        self.state.locked()
    }

    pub(super) fn append(&self, record: Record, sync: bool) {
        let Some(file) = &self.rows_file else { return };
        if let Err(err) = file.append(&record, sync) {
            tracing::warn!(path = %file.path().display(), %err, "cannot record a checkpoint row");
        }
        rows::apply(&mut self.lock().rows, record);
    }

    /// A turn begins: its row (the context it starts from, for a rewind of the conversation).
    /// `seq` is its `turn_started` event's; `context`: the conversation's length and head
    /// before the prompt.
    pub(crate) fn begin_turn(
        &self,
        turn_id: &str,
        seq: u64,
        prompt: &str,
        (context_len, context_head): (usize, u64),
    ) {
        if !self.enabled() {
            return;
        }
        self.lock().turn = Some(RunningTurn {
            turn_id: turn_id.to_owned(),
            tried: false,
            before: None,
            windows: Vec::new(),
            open: None,
        });
        let record = Record::Turn {
            turn_id: turn_id.to_owned(),
            seq,
            time: now_rfc3339(),
            prompt: prompt.to_owned(),
            context_len,
            context_head: format!("{context_head:016x}"),
            no_snapshots: !self.snapshots,
        };
        // Not synced: the turn's events are; a row lost to a crash only makes that turn
        // unknown to rewind.
        self.append(record, false);
    }

    /// Before a batch with a tool call that may change files: the turn's checkpoint, once
    /// per turn, then the start of the batch's window. Never fails the turn: a snapshot
    /// that cannot be taken is recorded as incomplete.
    pub(crate) async fn before_changes(self: &Arc<Self>) {
        let first = {
            let mut state = self.lock();
            let Some(turn) = state.turn.as_mut().filter(|_| self.snapshots) else {
                return;
            };
            let first = !turn.tried;
            turn.tried = true;
            first.then(|| turn.turn_id.clone())
        };
        if let Some(turn_id) = first {
            self.checkpoint(turn_id).await;
        }
        let start = self.clock().await;
        if let Some(turn) = self.lock().turn.as_mut() {
            turn.open = Some(start);
        }
    }

    /// The batch `before_changes` opened is done: its window closes.
    pub(crate) async fn after_changes(self: &Arc<Self>) {
        let start = match self.lock().turn.as_mut() {
            Some(turn) => turn.open.take(),
            None => None,
        };
        let Some(start) = start else { return };
        let end = self.clock().await;
        if let Some(turn) = self.lock().turn.as_mut() {
            turn.windows.push(Window::new(start, end));
        }
    }

    /// How many times the watched local workspace was walked whole (tests).
    #[cfg(test)]
    pub(crate) fn walks(&self) -> Option<u64> {
        self.tree.locked().as_ref().map(WatchedTree::walks)
    }

    /// The filesystem clock (`BlobStore::clock_ns`); `i64::MIN` when it cannot be read.
    async fn clock(self: &Arc<Self>) -> i64 {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.daemon.store().map_or(i64::MIN, |s| s.clock_ns()))
            .await
            .unwrap_or(i64::MIN)
    }

    /// Takes the turn's checkpoint and records it.
    async fn checkpoint(self: &Arc<Self>, turn_id: String) {
        let this = self.clone();
        let recorded = tokio::task::spawn_blocking(move || {
            let previous = this.latest_blocking();
            // Held until the row names the snapshot: a sweep never sees its blobs unnamed.
            let _reading = this.daemon.reading();
            let (snapshot, incomplete) = match this.take_with(previous, true) {
                Ok(taken) => {
                    let incomplete = incomplete_reason(&taken.snap);
                    this.remember(&taken.hash);
                    let snap = taken.snap;
                    let mut state = this.lock();
                    if let Some(turn) = state.turn.as_mut() {
                        turn.before = Some(snap.clone());
                    }
                    state.latest = Some(snap);
                    state.latest_take = taken.take;
                    (Some(taken.hash.to_hex()), incomplete)
                }
                Err(reason) => {
                    tracing::warn!(workspace = %this.workspace.display(), %reason, "no checkpoint");
                    (None, Some(reason.to_string()))
                }
            };
            let record = Record::Before {
                turn_id,
                time: now_rfc3339(),
                snapshot,
                incomplete,
            };
            this.append(record, true);
        })
        .await;
        if let Err(err) = recorded {
            tracing::error!(%err, "the checkpoint task failed");
        }
    }

    /// Takes the workspace as it is now as the session's newest snapshot, mid-turn (its
    /// executor is about to go: the next one gets this restored). Not a checkpoint row: the
    /// turn's own diff still runs from its start.
    pub(crate) async fn keep_now(self: &Arc<Self>) {
        if !self.snapshots {
            return;
        }
        let this = self.clone();
        let kept = tokio::task::spawn_blocking(move || {
            let previous = this.latest_blocking();
            let _reading = this.daemon.reading();
            match this.take_with(previous, true) {
                Ok(taken) => {
                    let mut state = this.lock();
                    state.latest = Some(taken.snap);
                    state.latest_take = taken.take;
                }
                Err(reason) => {
                    tracing::warn!(workspace = %this.workspace.display(), %reason, "no snapshot before moving");
                }
            }
        })
        .await;
        if let Err(err) = kept {
            tracing::error!(%err, "the snapshot task failed");
        }
    }

    /// The turn ended: if it took a checkpoint, what it changed is recorded.
    pub(crate) async fn end_turn(self: &Arc<Self>) {
        let Some(mut turn) = self.lock().turn.take() else {
            return;
        };
        if !turn.tried {
            return;
        }
        // A batch cut short (cancelled) without closing its window: it ran until now.
        if let Some(start) = turn.open.take() {
            let end = self.clock().await;
            turn.windows.push(Window::new(start, end));
        }
        let this = self.clone();
        let recorded = tokio::task::spawn_blocking(move || {
            let previous = this.latest_blocking();
            let _reading = this.daemon.reading();
            let after = match this.take_with(previous, true) {
                Ok(Taken { snap: after, hash, take }) => {
                    let (changed, skipped, outside) = match &turn.before {
                        Some(before) => {
                            let (changed, skipped) = changes(before, &after);
                            // The windows are timed by this machine's clock: they say
                            // nothing of another machine's files.
                            let outside = match this.elsewhere {
                                None => {
                                    let root = &this.workspace;
                                    let ctime =
                                        |e: &amber_store::Entry| windows::ctime_now(root, e);
                                    windows::outside(before, &after, &turn.windows, ctime)
                                }
                                Some(_) => Vec::new(),
                            };
                            (changed, skipped, outside)
                        }
                        None => (Vec::new(), Vec::new(), Vec::new()),
                    };
                    this.remember(&hash);
                    let mut state = this.lock();
                    state.latest = Some(after);
                    state.latest_take = take;
                    drop(state);
                    After {
                        snapshot: Some(hash.to_hex()),
                        changed,
                        skipped,
                        outside,
                    }
                }
                Err(reason) => {
                    tracing::warn!(workspace = %this.workspace.display(), %reason, "no snapshot after the turn");
                    After {
                        snapshot: None,
                        changed: Vec::new(),
                        skipped: Vec::new(),
                        outside: Vec::new(),
                    }
                }
            };
            let record = Record::After {
                turn_id: turn.turn_id,
                snapshot: after.snapshot,
                changed: after.changed,
                skipped: after.skipped,
                outside: after.outside,
            };
            this.append(record, true);
            this.expire()
        })
        .await;
        match recorded {
            // Their content goes in the background; the turn does not wait for it. Every
            // session's directory is in the store's sessions directory.
            Ok(expired) if expired > 0 => {
                if let Some(sessions) = self.dir.as_deref().and_then(|d| d.parent()) {
                    self.daemon.collect_soon(sessions.to_owned(), true);
                }
            }
            Ok(_) => {}
            Err(err) => tracing::error!(%err, "the checkpoint task failed"),
        }
    }

    /// Takes and saves a snapshot of the workspace now, incremental from the newest one,
    /// for a reader (not recorded in a row, so not the base of later ones). Blocking.
    pub(super) fn snapshot_now(&self) -> Result<(Snapshot, Hash), CheckpointFailure> {
        let previous = self.latest_blocking();
        let _reading = self.daemon.reading();
        self.take_with(previous, false)
            .map(|t| (Arc::unwrap_or_clone(t.snap), t.hash))
    }

    /// Takes and saves a snapshot — here, or on the executor the workspace is on — from the
    /// newest one (and the executor's name for it); the caller holds the store's read lock.
    /// Blocking.
    /// `recorded`: a row will name it (the watched tree may then start from it).
    fn take_with(
        &self,
        previous: (Option<Arc<Snapshot>>, Option<u64>),
        recorded: bool,
    ) -> Result<Taken, CheckpointFailure> {
        let store = self.daemon.store()?;
        let max_file_bytes = self.daemon.config().max_file_bytes;
        let (previous, previous_take) = previous;
        let exclude = std::slice::from_ref(&self.daemon.data_dir);
        let (mut snap, take) = match self.remote()? {
            None if recorded => {
                let mut tree = self.tree.locked();
                let tree = tree.get_or_insert_with(WatchedTree::new);
                let mut snap = tree.take(
                    &self.workspace,
                    previous.as_deref(),
                    store,
                    max_file_bytes,
                    exclude,
                )?;
                let hash = snap.save_after(previous.as_deref(), store)?;
                let snap = Arc::new(snap);
                tree.set_latest(Arc::clone(&snap));
                return Ok(Taken {
                    snap,
                    hash,
                    take: None,
                });
            }
            None => {
                let snap = Snapshot::take_excluding(
                    &self.workspace,
                    previous.as_deref(),
                    store,
                    max_file_bytes,
                    exclude,
                )?;
                (snap, None)
            }
            Some(remote) => {
                let base = previous.as_deref().zip(previous_take);
                let (snap, take) = remote::take(remote, store, base, max_file_bytes)?;
                (snap, Some(take))
            }
        };
        // Stored as what changed since the previous one (recorded in a row, or loaded).
        let hash = snap.save_after(previous.as_deref(), store)?;
        Ok(Taken {
            snap: Arc::new(snap),
            hash,
            take,
        })
    }

    /// A recorded snapshot is the workspace's newest: a later session's first one starts
    /// from it (the stat cache). Only a local workspace's: an executor keeps its own.
    fn remember(&self, hash: &Hash) {
        if self.elsewhere.is_some() {
            return;
        }
        if let Err(err) = self.daemon.stat_cache().set(&self.workspace, hash) {
            tracing::debug!(%err, "cannot record the workspace's newest snapshot");
        }
    }

    /// The newest snapshot and the executor's name for it: cached, else the newest one
    /// the rows name (after a restart), else — for a local workspace — the newest any
    /// session took of it.
    fn latest_blocking(&self) -> (Option<Arc<Snapshot>>, Option<u64>) {
        let newest = {
            let state = self.lock();
            if let Some(latest) = &state.latest {
                return (Some(latest.clone()), state.latest_take);
            }
            state.rows.iter().rev().find_map(|r| {
                r.after
                    .as_ref()
                    .and_then(|a| a.snapshot.clone())
                    .or_else(|| r.before.as_ref().and_then(|b| b.snapshot.clone()))
            })
        };
        let newest = newest.or_else(|| {
            self.elsewhere
                .is_none()
                .then(|| self.daemon.stat_cache().get(&self.workspace))
                .flatten()
                .map(|h| h.to_hex())
        });
        let Some(snap) = newest.and_then(|hex| self.load(&hex).ok()) else {
            return (None, None);
        };
        let snap = Arc::new(snap);
        let mut state = self.lock();
        state.latest = Some(snap.clone());
        state.latest_take = None;
        (Some(snap), None)
    }

    /// A new executor replaced a gone one: when its workspace is what `over` allows and
    /// the session has a complete newest snapshot, that snapshot is restored into it, so
    /// the session goes on where its last checkpoint left it. Returns how many files were
    /// written. Blocking; `remote` reaches the new executor directly (calls through the
    /// link wait for this to finish).
    pub(crate) fn continue_in(
        &self,
        remote: &Arc<dyn RemoteWorkspace>,
        over: ContinueOver,
    ) -> Option<u64> {
        if !self.snapshots || self.elsewhere.is_none() {
            return None;
        }
        let (newest, _) = self.latest_blocking();
        let newest = newest.filter(|s| !s.entries.is_empty())?;
        // No read lock on the store: the rows name `newest`, so no sweep removes its blobs.
        let store = self.daemon.store().ok()?;
        let (_, now) = remote
            .take(None, self.daemon.config().max_file_bytes)
            .map_err(|err| tracing::warn!(%err, "cannot look at the new executor's workspace"))
            .ok()?;
        let empty = now.changed.is_empty() && now.skipped.is_empty() && now.missing.is_empty();
        if !empty && over == ContinueOver::Empty {
            return None;
        }
        // What is there: nothing, or the fresh clone the restore plan starts from.
        let there = amber_store::SnapshotDelta { full: true, ..now }
            .apply(None)
            .ok()?;
        let restored = RestorePlan::new(&there, &newest)
            .map_err(CheckpointFailure::from)
            .and_then(|plan| {
                remote
                    .restore(&plan, store)
                    .map_err(CheckpointFailure::Remote)
            });
        match restored {
            Ok(applied) => {
                tracing::info!(
                    workspace = %self.workspace.display(),
                    files = applied.written.len(),
                    refused = applied.refused.len(),
                    "restored the newest checkpoint into a new executor's workspace"
                );
                // The new executor knows none of the old one's snapshots.
                self.set_latest(None);
                Some(applied.written.len() as u64)
            }
            Err(err) => {
                tracing::warn!(%err, "cannot restore the newest checkpoint on the new executor");
                None
            }
        }
    }

    /// Carries out `plan` on the workspace, here or on its executor; the caller holds the
    /// store's read lock. Blocking.
    pub(super) fn apply_plan(&self, plan: &RestorePlan) -> Result<Applied, CheckpointFailure> {
        let store = self.daemon.store()?;
        match self.remote()? {
            None => Ok(plan.apply(&self.workspace, store)?),
            Some(remote) => remote
                .restore(plan, store)
                .map_err(CheckpointFailure::Remote),
        }
    }

    /// The snapshot stored as `hex`. Blocking.
    pub(super) fn load(&self, hex: &str) -> Result<Snapshot, CheckpointFailure> {
        let hash = Hash::from_str(hex)?;
        let store = self.daemon.store()?;
        let _reading = self.daemon.reading();
        Ok(Snapshot::load(store, &hash)?)
    }

    /// `checkpoint/list`: one row per turn that had a checkpoint, oldest first; with `all`
    /// one per turn of the history, those without a checkpoint saying why.
    pub(crate) fn list(&self, all: bool) -> Vec<CheckpointInfo> {
        let state = self.lock();
        state
            .rows
            .iter()
            .enumerate()
            .filter(|(_, r)| all || r.has_checkpoint())
            .map(|(i, r)| {
                let before = r.before.as_ref().filter(|_| !r.expired);
                let after = r.after.as_ref().filter(|_| before.is_some());
                let missing = match before {
                    Some(_) => None,
                    None if r.expired => Some(NoCheckpoint::Expired),
                    None if r.no_snapshots => Some(NoCheckpoint::Disabled),
                    None => Some(NoCheckpoint::None),
                };
                CheckpointInfo {
                    turn_id: r.turn_id.clone(),
                    seq: r.seq,
                    time: before.map_or_else(|| r.time.clone(), |b| b.time.clone()),
                    prompt: r.prompt.clone(),
                    changed: after.map(|a| a.changed.clone()).unwrap_or_default(),
                    skipped: after.map(|a| a.skipped.clone()).unwrap_or_default(),
                    turn: u32::try_from(i + 1).unwrap_or(u32::MAX),
                    incomplete: before.and_then(|b| b.incomplete.clone()),
                    checkpoint: missing,
                }
            })
            .collect()
    }

    /// The rows of the live history (every turn, with or without a checkpoint).
    pub(crate) fn rows(&self) -> Vec<TurnRow> {
        self.lock().rows.clone()
    }

    /// The turn `turn_id` and every later one were rewound away (synced).
    pub(crate) fn forget_from(&self, turn_id: &str) {
        let known = self.lock().rows.iter().any(|r| r.turn_id == turn_id);
        if known {
            self.append(
                Record::Rewound {
                    turn_id: turn_id.to_owned(),
                },
                true,
            );
        }
        // The cached one may be a dropped row's: the next snapshot starts from a kept one.
        self.set_latest(None);
    }

    /// Replaces the cached newest snapshot (`None`: reload it from the rows). The watched
    /// tree goes too: its newest snapshot may be one no row keeps any more.
    fn set_latest(&self, snap: Option<Arc<Snapshot>>) {
        let mut state = self.lock();
        state.latest = snap;
        state.latest_take = None;
        drop(state);
        self.tree.locked().take();
    }
}

/// A snapshot taken and saved: its hash, and the executor's name for it when one took it.
struct Taken {
    snap: Arc<Snapshot>,
    hash: Hash,
    take: Option<u64>,
}

/// Why a rewind to `snap` would be refused, if it would.
fn incomplete_reason(snap: &Snapshot) -> Option<String> {
    let first = snap.missing.first()?;
    Some(format!(
        "{} file(s) could not be recorded (first: {}: {})",
        snap.missing.len(),
        first.path,
        first.reason
    ))
}

/// What a turn changed between its two snapshots: the recorded paths, and the ones it
/// changed that are not recorded.
pub(super) fn changes(before: &Snapshot, after: &Snapshot) -> (Vec<ChangedPath>, Vec<String>) {
    let changed = super::diff::changed_paths(&before.diff(after));
    let skipped = before
        .skipped_changes(after)
        .into_iter()
        .map(|p| p.to_string())
        .collect();
    (changed, skipped)
}
