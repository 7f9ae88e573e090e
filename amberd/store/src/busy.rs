//! The busy marker: `<sessions>/<id>/busy` exists while a session has work (a turn running
//! or prompts acknowledged and waiting). A restart loads exactly the marked sessions, so
//! their interrupted turn is closed and their queued prompts run (or end cancelled)
//! without anyone attaching, and without reading every stored log at start.
//!
//! The marker costs one create when a session goes from idle to having work and one
//! unlink when it is idle again, never a write per prompt. It is created before the
//! `prompt_queued` that makes the session busy is fdatasynced, and needs no fsync of its
//! own: on ext4 (data=ordered) the journal commit of that fdatasync carries the new
//! directory entry. Where it does not, a lost marker only means the session is settled
//! lazily, when it is next loaded (subscribe, get or prompt), as before.

use std::fs::{self, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::OpenOptionsExt;

use super::{Store, StoreError, io_err};

const BUSY_FILE: &str = "busy";

impl Store {
    /// Marks the session busy (idempotent).
    pub fn mark_busy(&self, session_id: &str) -> Result<(), StoreError> {
        let path = self.existing_dir(session_id)?.join(BUSY_FILE);
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map(drop)
            .map_err(|e| io_err(&path, e))
    }

    /// Removes the session's busy marker (a missing one is fine).
    pub fn mark_idle(&self, session_id: &str) -> Result<(), StoreError> {
        let Some(dir) = self.dir(session_id) else {
            return Err(StoreError::NotFound(session_id.into()));
        };
        let path = dir.join(BUSY_FILE);
        match fs::remove_file(&path) {
            Err(e) if e.kind() != ErrorKind::NotFound => Err(io_err(&path, e)),
            _ => Ok(()),
        }
    }

    /// Of `ids`, those marked busy: one `stat` each, no log read.
    pub fn busy_sessions<'a>(&self, ids: impl IntoIterator<Item = &'a str>) -> Vec<String> {
        ids.into_iter()
            .filter(|id| self.dir(id).is_some_and(|d| d.join(BUSY_FILE).exists()))
            .map(str::to_owned)
            .collect()
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::tests::meta;

    #[test]
    fn a_marked_session_is_listed_until_it_is_marked_idle() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(tmp.path()).unwrap();
        let (a, b) = ("sess_a".to_owned(), "sess_b".to_owned());
        store.create(&meta(&a, "2026-01-01T00:00:00Z")).unwrap();
        store.create(&meta(&b, "2026-01-02T00:00:00Z")).unwrap();
        assert!(store.busy_sessions([a.as_str(), b.as_str()]).is_empty());
        store.mark_busy(&a).unwrap();
        store.mark_busy(&a).unwrap();
        assert_eq!(
            store.busy_sessions([a.as_str(), b.as_str()]),
            vec![a.clone()]
        );
        store.mark_idle(&a).unwrap();
        store.mark_idle(&a).unwrap();
        assert!(store.busy_sessions([a.as_str(), b.as_str()]).is_empty());
        assert!(store.busy_sessions(["../escape"]).is_empty());
    }
}
