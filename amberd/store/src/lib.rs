//! amber-store: the daemon's durable session store and the hash-chained [`context::Context`]
//! it persists, and the checkpoint content store (`checkpoint/`: blobs, workspace snapshots,
//! diff, restore plan). One directory per session under `<data_dir>/sessions/`, holding
//! `meta.json` (replaced atomically) and `log` (append-only records).
//!
//! ```text
//! <data_dir>/sessions/<session_id>/meta.json   {"version":1,"info":SessionInfo,"systemPrompt":…}
//! <data_dir>/sessions/<session_id>/log         <crc32 hex> <payload JSON>\n  (record.rs)
//! ```
//!
//! **Invariants:** the log holds a session's durable events in seq order (rising by one
//! from 1) interleaved with the context's push/pop/clear operations, so replaying it
//! rebuilds both exactly; listing reads only `meta.json` files; a torn last record is
//! dropped on load, corruption anywhere else is an error naming the record. Session ids
//! are path components, so only `[A-Za-z0-9_-]` (plus inner dots) are accepted. Crash
//! recovery reads events as `amber_proto::Event`s, and an event it cannot decode is
//! skipped, never an error (`decode.rs`). The crate knows no session, tool or config: it
//! depends on `amber-proto` only.
//!
//! Why a log and not SQLite: the data is appended and read back whole or as a tail, the shape
//! of a log, which needs no C build; each event is stored byte for byte as it was sent, so a
//! replay is exact by construction; one file per session keeps sessions independent (a
//! damaged session never blocks another, delete is a directory removal); and an append costs
//! a buffered write, plus an fdatasync only where durability is promised.

mod busy;
mod checkpoint;
pub mod context;
mod dangling;
mod decode;
mod deferred;
mod load;
mod log;
mod meta;
mod queued;
mod record;
mod recovery;
mod summary;
#[cfg(test)]
mod tests;
mod verify;
#[cfg(test)]
mod verify_tests;

use std::fs::{self, DirBuilder};
use std::io::ErrorKind;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use amber_proto::Message;
use serde_json::value::RawValue;

pub use self::checkpoint::{
    Applied, BlobSink, BlobSource, BlobStore, Change, ChangeStatus, CheckpointError,
    DEFAULT_MAX_FILE_BYTES, Entry, EntryKind, Hash, HashesOnly, Ignored, Missing, ParseHashError,
    Refusal, Refused, RelPath, Rescanned, RestorePlan, SkipReason, Skipped, Snapshot,
    SnapshotDelta, StatCache, SweepStats, TakeStats, protected,
};
pub use self::dangling::{Closing, INTERRUPTED_CALL, INTERRUPTED_SUBAGENT, closing_events};
pub use self::deferred::CreationSync;
use self::load::Replay;
pub use self::log::SessionLog;
use self::log::sync_path;
use self::meta::{Durability, META_FILE};
pub use self::meta::{ExecutorAttach, SessionAgent, SessionMeta};
pub use self::queued::{QueuedPrompt, queued_prompts};
pub use self::recovery::{
    consistent_context, interrupted_turn, turn_prompt, turn_usage, turn_went_past_waiting,
};
pub use self::summary::{completed_calls_with_prefix, first_prompt, last_todos, last_usage_total};

const SESSIONS_DIR: &str = "sessions";
const LOG_FILE: &str = "log";
/// Prefix of a session directory being deleted (renamed away first).
const DELETED_PREFIX: &str = ".deleted-";

/// Errors of the store. Paths name the file involved.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: corrupt record {record}: {reason}", path.display())]
    Corrupt {
        path: PathBuf,
        /// 1-based number of the offending record (line) in the log.
        record: usize,
        /// Byte offset where the record starts (the good records end there).
        offset: u64,
        reason: String,
    },
    #[error("{}: unreadable session metadata: {reason}", path.display())]
    BadMeta { path: PathBuf, reason: String },
    #[error("session not found in the store: {0}")]
    NotFound(String),
    #[error("session already exists in the store: {0}")]
    AlreadyExists(String),
    #[error("invalid session id {0:?}")]
    InvalidId(String),
    #[error("the log of session {0} is already open for writing")]
    Locked(String),
    #[error("the log of session {0} is closed (the session was unloaded)")]
    Closed(String),
    #[error("session {session_id}: event seq {got} appended where {expected} was expected")]
    OutOfOrder {
        session_id: String,
        expected: u64,
        got: u64,
    },
    #[error("{}: a failed append could not be undone; the log refuses writes", .0.display())]
    Broken(PathBuf),
    #[error("cannot encode a record: {0}")]
    Encode(serde_json::Error),
}

fn io_err(path: &Path, source: std::io::Error) -> StoreError {
    StoreError::Io {
        path: path.to_owned(),
        source,
    }
}

/// A durable event as persisted: its seq and its JSON exactly as sent to clients.
#[derive(Debug, Clone)]
pub struct StoredEvent {
    pub seq: u64,
    pub json: Box<RawValue>,
}

/// Everything a session needs to come back.
#[derive(Debug)]
pub struct Loaded {
    pub meta: SessionMeta,
    /// Every durable event, oldest first; seqs are `1..=events.len()`.
    pub events: Vec<StoredEvent>,
    /// The context as messages with their stored chain hashes (not re-verified: see
    /// [`Store::verify`]).
    pub context: Vec<(Message, u64)>,
    /// A torn last record was found and dropped.
    pub repaired_tail: bool,
    /// Index in `context` of the agent's confirm question, when the newest one pushed is
    /// still there (recorded with the push; older logs have none).
    pub confirm_at: Option<usize>,
}

/// The first link of the persisted chain that does not match its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokenLink {
    /// Index of the message in the (replayed) context.
    pub index: usize,
    pub stored: u64,
    pub computed: u64,
}

/// Result of re-walking a session's persisted hash chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    /// Messages and events up to the first damaged record, if any.
    pub messages: usize,
    pub events: usize,
    pub first_broken: Option<BrokenLink>,
    /// A damaged record: in the log, or in the copy put aside when the session was
    /// salvaged (`log.corrupt*`, see [`Store::salvage`]).
    pub corrupt: Option<CorruptRecord>,
    /// The log ends in a torn record (verify reports it but never repairs).
    pub torn_tail: bool,
}

/// A damaged record as verify reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorruptRecord {
    /// 1-based record (line) number in the file named by `file`.
    pub record: usize,
    pub reason: String,
    /// `log`, or the name of the damaged log put aside by a salvage.
    pub file: String,
}

/// Handle on the store under one data directory; cheap to clone.
#[derive(Debug, Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    sessions: PathBuf,
    /// Tells temp files of concurrent writers apart.
    unique: AtomicU64,
}

impl Store {
    /// Opens the store, creating `<data_dir>/sessions` (0700) if needed, and finishes
    /// deletions a crash interrupted.
    pub fn open(data_dir: &Path) -> Result<Store, StoreError> {
        let sessions = data_dir.join(SESSIONS_DIR);
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&sessions)
            .map_err(|e| io_err(&sessions, e))?;
        let store = Store {
            inner: Arc::new(Inner {
                sessions,
                unique: AtomicU64::new(0),
            }),
        };
        store.sweep_deleted();
        Ok(store)
    }

    /// The directory holding the session directories.
    pub fn sessions_dir(&self) -> &Path {
        &self.inner.sessions
    }

    /// Every session's metadata, newest first (`createdAt`, then id). Reads only the
    /// `meta.json` files; unreadable ones are logged and skipped.
    pub fn list(&self) -> Result<Vec<SessionMeta>, StoreError> {
        let root = &self.inner.sessions;
        let entries = fs::read_dir(root).map_err(|e| io_err(root, e))?;
        let mut metas = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| io_err(root, e))?;
            let name = entry.file_name();
            let Some(id) = name.to_str().filter(|id| valid_id(id)) else {
                continue;
            };
            match meta::read(&entry.path()) {
                Ok(Some(meta)) if meta.info.session_id == id => metas.push(meta),
                Ok(Some(meta)) => tracing::warn!(
                    dir = %entry.path().display(),
                    id = %meta.info.session_id,
                    "skipping a session whose metadata names another id"
                ),
                Ok(None) => {
                    tracing::warn!(dir = %entry.path().display(), "skipping a session without metadata");
                }
                Err(err) => tracing::warn!(%err, "skipping an unreadable session"),
            }
        }
        metas.sort_by(|a, b| {
            b.info
                .created_at
                .cmp(&a.info.created_at)
                .then_with(|| b.info.session_id.cmp(&a.info.session_id))
        });
        Ok(metas)
    }

    /// Creates a session's directory, empty log and metadata; returns its open log. The
    /// fsyncs that make them survive a power loss are owed by the log (`creation_sync`:
    /// run them in the background; the log's first sync does them if nothing did).
    pub fn create(&self, meta: &SessionMeta) -> Result<SessionLog, StoreError> {
        let id = meta.info.session_id.as_str();
        let dir = self
            .dir(id)
            .ok_or_else(|| StoreError::InvalidId(id.into()))?;
        match DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                return Err(StoreError::AlreadyExists(id.into()));
            }
            Err(e) => return Err(io_err(&dir, e)),
        }
        let created = SessionLog::open(id, dir.join(LOG_FILE), true, Some(1)).and_then(|log| {
            meta::write(&dir, meta, &self.inner.unique, Durability::Deferred)?;
            let owed = vec![
                dir.join(META_FILE),
                dir.clone(),
                self.inner.sessions.clone(),
            ];
            Ok(log.owing(CreationSync::owing(owed)))
        });
        if created.is_err() {
            let _ = fs::remove_dir_all(&dir);
        }
        created
    }

    /// Loads a session: metadata, every event, the replayed context. A torn last record
    /// is dropped and cut off the file (unless a writer holds the log).
    pub fn load(&self, session_id: &str) -> Result<Loaded, StoreError> {
        let dir = self.existing_dir(session_id)?;
        let meta = meta::read(&dir)?.ok_or_else(|| StoreError::NotFound(session_id.into()))?;
        let log = dir.join(LOG_FILE);
        let state = Replay {
            want_context: true,
            ..Replay::default()
        };
        let (state, scan) = load::replay(&log, state)?;
        if let Some(torn) = &scan.torn {
            tracing::warn!(path = %log.display(), %torn, "dropping a torn last record");
            if !load::repair(&log, scan.good_len)? {
                tracing::warn!(path = %log.display(), "log is open for writing; not cutting it");
            }
        }
        Ok(Loaded {
            meta,
            events: state.events,
            context: state.context,
            repaired_tail: scan.torn.is_some(),
            confirm_at: state.confirm_at,
        })
    }

    /// Durable events with `seq > after_seq`, read from the log (for replay of events no
    /// longer in memory). Safe while the session's log is being appended to.
    pub fn events_after(
        &self,
        session_id: &str,
        after_seq: u64,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let dir = self.existing_dir(session_id)?;
        let state = Replay {
            after: after_seq,
            ..Replay::default()
        };
        let (state, _) = load::replay(&dir.join(LOG_FILE), state)?;
        Ok(state.events)
    }

    /// Atomically replaces a session's metadata.
    pub fn save_meta(&self, meta: &SessionMeta) -> Result<(), StoreError> {
        let id = meta.info.session_id.as_str();
        let dir = self.existing_dir(id)?;
        meta::write(&dir, meta, &self.inner.unique, Durability::Synced).map_err(|err| match err {
            StoreError::Io { source, .. } if source.kind() == ErrorKind::NotFound => {
                StoreError::NotFound(id.into())
            }
            other => other,
        })
    }

    /// Removes a session. Its directory is renamed away first, so a crash mid-way never
    /// leaves a half-deleted session visible (the next `open` finishes the job).
    pub fn delete(&self, session_id: &str) -> Result<(), StoreError> {
        let dir = self.existing_dir(session_id)?;
        let n = self
            .inner
            .unique
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let doomed = self.inner.sessions.join(format!(
            "{DELETED_PREFIX}{session_id}.{}.{n}",
            std::process::id()
        ));
        match fs::rename(&dir, &doomed) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Err(StoreError::NotFound(session_id.into()));
            }
            Err(e) => return Err(io_err(&dir, e)),
        }
        sync_path(&self.inner.sessions)?;
        if let Err(err) = fs::remove_dir_all(&doomed) {
            tracing::warn!(path = %doomed.display(), %err, "cannot remove a deleted session");
        }
        Ok(())
    }

    /// Opens an existing session's log for appending (after [`Store::load`]). Fails with
    /// `Locked` while another handle has it open.
    pub fn open_log(&self, session_id: &str) -> Result<SessionLog, StoreError> {
        let dir = self.existing_dir(session_id)?;
        if !dir.join(META_FILE).exists() {
            return Err(StoreError::NotFound(session_id.into()));
        }
        let path = dir.join(LOG_FILE);
        match SessionLog::open(session_id, path.clone(), false, None) {
            // A session created by a crashed `create` between its log and its metadata
            // cannot exist (metadata last); a missing log is an empty one.
            Err(StoreError::Io { source, .. }) if source.kind() == ErrorKind::NotFound => {
                SessionLog::open(session_id, path, true, None)
            }
            other => other,
        }
    }

    fn dir(&self, session_id: &str) -> Option<PathBuf> {
        valid_id(session_id).then(|| self.inner.sessions.join(session_id))
    }

    /// The directory of a session that exists; `NotFound` otherwise (invalid ids too).
    fn existing_dir(&self, session_id: &str) -> Result<PathBuf, StoreError> {
        self.dir(session_id)
            .filter(|dir| dir.is_dir())
            .ok_or_else(|| StoreError::NotFound(session_id.into()))
    }

    fn sweep_deleted(&self) {
        let Ok(entries) = fs::read_dir(&self.inner.sessions) else {
            return;
        };
        for entry in entries.flatten() {
            if entry
                .file_name()
                .to_string_lossy()
                .starts_with(DELETED_PREFIX)
                && let Err(err) = fs::remove_dir_all(entry.path())
            {
                tracing::warn!(path = %entry.path().display(), %err, "cannot finish a deletion");
            }
        }
    }
}

/// A session id usable as one path component: 1–128 of `[A-Za-z0-9_.-]`, not starting
/// with a dot.
fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}
