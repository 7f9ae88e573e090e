//! The checkpoint content store: a content-addressed, compressed
//! [`BlobStore`] and the [`Snapshot`] of a workspace recorded in it, with the diff of two
//! snapshots and the [`RestorePlan`] that brings a workspace back to one.
//!
//! ```text
//! <dir>/<2 hex>/<62 hex>   one blob, named by the BLAKE3 hash of its uncompressed bytes
//! <dir>/tmp/               blobs being written (temp file + fsync + rename into place)
//! ```
//!
//! **Invariants:** a blob's name is the hash of its content, so writing one that exists is
//! a no-op and `get` verifies what it read; a snapshot's entries are sorted by path bytes
//! and never include `.git/` or ignored files; what it leaves out is listed, never silently
//! dropped: too large or not a file in [`Snapshot::skipped`], ignored (by metadata only) in
//! [`Snapshot::ignored`], unreadable in [`Snapshot::missing`], and a snapshot with any
//! missing path is refused as a restore target. A restore never deletes or writes a path
//! either snapshot left out; [`Snapshot::skipped_changes`] names those a turn changed.
//! Nothing here touches the workspace except [`RestorePlan::apply`], and that only through
//! `beneath.rs`: every change resolved from the root's fd without following a symlink, and
//! never inside `.git` or `.amber`. The crate knows no
//! session or turn: when to take a snapshot, where the store lives and what to keep is the
//! daemon's.

mod beneath;
#[cfg(test)]
mod beneath_tests;
mod blob;
mod delta;
mod diff;
mod error;
mod hash;
mod manifest;
mod path;
#[cfg(test)]
mod remote_tests;
mod rescan;
mod restore;
mod sink;
mod snapshot;
mod stat_cache;
mod take;
#[cfg(test)]
mod tests;

pub use self::beneath::{Refusal, protected};
pub use self::blob::{BlobStore, SweepStats};
pub use self::delta::SnapshotDelta;
pub use self::diff::{Change, ChangeStatus};
pub use self::error::CheckpointError;
pub use self::hash::{Hash, ParseHashError};
pub use self::path::RelPath;
pub use self::rescan::Rescanned;
pub use self::restore::{Applied, Refused, RestorePlan};
pub use self::sink::{BlobSink, BlobSource, HashesOnly};
pub use self::snapshot::{
    Entry, EntryKind, Ignored, Missing, SkipReason, Skipped, Snapshot, TakeStats,
};
pub use self::stat_cache::StatCache;
pub use self::take::DEFAULT_MAX_FILE_BYTES;
