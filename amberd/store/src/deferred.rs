//! The fsyncs a new session's files still owe: its `meta.json`, and the directory entries
//! of its files and of its directory.
//!
//! Creating a session writes its files at once but leaves these fsyncs (about a millisecond
//! here) to a background job, so `session/new` answers without waiting on the disk. They
//! are owed before the log's first sync: whoever comes first — the job or that sync — does
//! them under the lock, and the other finds them done (or waits while they run). So
//! nothing fsync'd in the log can outlive, after a power loss, the entries that make the
//! session findable. A daemon crash loses nothing either way (the writes are in the kernel).

use amber_proto::sync::Locked;
use std::io::ErrorKind;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::StoreError;
use super::log::sync_path;

/// Shared handle on a session's owed fsyncs; cloning shares them.
#[derive(Debug, Clone, Default)]
pub struct CreationSync(Arc<Mutex<Vec<PathBuf>>>);

impl CreationSync {
    /// Owes an fsync of each path (files or directories), in order.
    pub(crate) fn owing(paths: Vec<PathBuf>) -> Self {
        Self(Arc::new(Mutex::new(paths)))
    }

    /// Does what is still owed. A path that is gone (the session was deleted meanwhile)
    /// owes nothing; on an error the rest stays owed for the next caller.
    pub fn settle(&self) -> Result<(), StoreError> {
        // A panic mid-settle leaves the remaining paths owed, which is still right.
        let mut owed = self.0.locked();
        while let Some(path) = owed.first() {
            match sync_path(path) {
                Ok(()) => {}
                Err(StoreError::Io { source, .. }) if source.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            owed.remove(0);
        }
        Ok(())
    }

    /// Nothing left to do.
    pub fn is_settled(&self) -> bool {
        self.0.locked().is_empty()
    }
}
