//! The errors of the checkpoint store, each naming the path or blob it is about.

use std::path::PathBuf;

use super::hash::Hash;
use super::path::RelPath;

#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("checkpoint blob {0} is not in the store")]
    BlobNotFound(Hash),
    #[error("checkpoint blob {hash} is corrupt: {reason}")]
    BlobCorrupt { hash: Hash, reason: String },
    #[error("checkpoint snapshot {hash} is unreadable: {reason}")]
    SnapshotCorrupt { hash: Hash, reason: String },
    #[error(
        "the snapshot is incomplete, {} file(s) could not be recorded (first: {first}: {reason})",
        count
    )]
    Incomplete {
        count: usize,
        first: RelPath,
        reason: String,
    },
}

impl CheckpointError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
}
