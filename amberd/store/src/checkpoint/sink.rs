//! Where a snapshot's content goes and where a restore's comes from. The daemon's
//! [`BlobStore`] is both. A snapshot taken where the files live but kept elsewhere (an
//! executor's) goes to [`HashesOnly`]: its entries name their content by hash and the
//! content stays in the workspace until the keeper reads it; a restore there reads from
//! blobs the keeper staged.

use std::collections::HashMap;

use super::blob::BlobStore;
use super::error::CheckpointError;
use super::hash::Hash;

/// Takes the content a snapshot reads.
pub trait BlobSink: Sync {
    /// Keeps `bytes`, whose hash the caller computed as `hash`; returns the bytes written
    /// (0: already kept, or not kept at all).
    fn put_hashed(&self, hash: Hash, bytes: &[u8]) -> Result<u64, CheckpointError>;
    /// Makes what was kept durable.
    fn sync(&self) -> Result<(), CheckpointError>;
    /// The filesystem clock of the workspace's machine (`BlobStore::clock_ns`).
    fn clock_ns(&self) -> i64;
}

/// Gives the content a restore writes, verified against its hash.
pub trait BlobSource {
    fn get(&self, hash: &Hash) -> Result<Vec<u8>, CheckpointError>;
}

impl BlobSink for BlobStore {
    fn put_hashed(&self, hash: Hash, bytes: &[u8]) -> Result<u64, CheckpointError> {
        BlobStore::put_hashed(self, hash, bytes)
    }

    fn sync(&self) -> Result<(), CheckpointError> {
        BlobStore::sync(self)
    }

    fn clock_ns(&self) -> i64 {
        BlobStore::clock_ns(self)
    }
}

impl BlobSource for BlobStore {
    fn get(&self, hash: &Hash) -> Result<Vec<u8>, CheckpointError> {
        BlobStore::get(self, hash)
    }
}

/// Blobs held in memory (each checked against its hash when put in).
impl BlobSource for HashMap<Hash, Vec<u8>> {
    fn get(&self, hash: &Hash) -> Result<Vec<u8>, CheckpointError> {
        HashMap::get(self, hash)
            .cloned()
            .ok_or(CheckpointError::BlobNotFound(*hash))
    }
}

/// A sink that keeps nothing: the snapshot records each file's hash and metadata, and its
/// clock is read from `clock` (a store on the workspace's machine). Used where the snapshot
/// is sent to its keeper, which asks for the content it lacks.
pub struct HashesOnly<'a> {
    pub clock: &'a BlobStore,
}

impl BlobSink for HashesOnly<'_> {
    fn put_hashed(&self, _hash: Hash, _bytes: &[u8]) -> Result<u64, CheckpointError> {
        Ok(0)
    }

    fn sync(&self) -> Result<(), CheckpointError> {
        Ok(())
    }

    fn clock_ns(&self) -> i64 {
        self.clock.clock_ns()
    }
}
