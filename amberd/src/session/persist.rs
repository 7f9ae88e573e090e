//! The glue between a live session and the durable store: one append handle per session,
//! written by the hub (durable events, under its lock, in seq order) and by the context's
//! journal (push / pop / clear), plus the metadata file.
//!
//! **Invariant:** both writers go through the same `SessionLog`, so the log interleaves
//! events and context operations in the order they happened. A failed write is logged and
//! never takes the session down. An unloaded session's log is closed (its lock released)
//! once its actor has stopped, so the next load can open it.

use amber_proto::sync::Locked;
use std::sync::{Arc, Mutex, MutexGuard};

use amber_proto::Message;
use amber_store::context::{Journal, PushKind};
use amber_store::{SessionLog, SessionMeta, Store, StoreError};
use serde_json::value::RawValue;

use super::hub::{EventStore, WireEvent};

/// A session's handle on the store.
pub(crate) struct Persistence {
    store: Store,
    session_id: String,
    /// `None` once closed: the session was unloaded and its log lock released.
    log: Mutex<Option<SessionLog>>,
}

impl Persistence {
    pub(crate) fn new(store: Store, session_id: String, log: SessionLog) -> Arc<Persistence> {
        Arc::new(Persistence {
            store,
            session_id,
            log: Mutex::new(Some(log)),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Option<SessionLog>> {
        // A panic mid-append leaves at worst a torn record, which loading repairs.
        self.log.locked()
    }

    /// Runs `write` on the open log; a closed one refuses.
    fn with_log(
        &self,
        write: impl FnOnce(&mut SessionLog) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        match self.lock().as_mut() {
            Some(log) => write(log),
            None => Err(StoreError::Closed(self.session_id.clone())),
        }
    }

    /// Syncs and closes the log, releasing its lock, so the session can be loaded again
    /// (after an idle unload). Later writes through this handle fail (and are logged).
    pub(crate) fn close(&self) {
        if let Some(mut log) = self.lock().take()
            && let Err(err) = log.sync()
        {
            tracing::error!(session = %self.session_id, %err, "cannot sync the log on close");
        }
    }

    pub(crate) fn save_meta(&self, meta: &SessionMeta) {
        if let Err(err) = self.store.save_meta(meta) {
            tracing::error!(session = %self.session_id, %err, "cannot save session metadata");
        }
    }

    /// Creates or removes the session's busy marker (`amber-store`'s `busy.rs`); a failure is
    /// logged: without the marker a restart settles the session lazily.
    pub(crate) fn set_busy(&self, busy: bool) {
        let result = if busy {
            self.store.mark_busy(&self.session_id)
        } else {
            self.store.mark_idle(&self.session_id)
        };
        if let Err(err) = result {
            tracing::warn!(session = %self.session_id, %err, busy, "cannot update the busy marker");
        }
    }

    /// A journal for the session's context, writing through this handle.
    pub(crate) fn journal(self: &Arc<Self>) -> Box<dyn Journal> {
        Box::new(ContextJournal(self.clone()))
    }

    fn report(&self, what: &str, result: Result<(), StoreError>) {
        if let Err(err) = result {
            tracing::error!(session = %self.session_id, %err, "cannot persist {what}");
        }
    }
}

/// Runs blocking file work (an fdatasync, a log replay) so it does not stall the other
/// tasks of a runtime worker: on the multi-threaded runtime tokio moves them elsewhere first.
pub(crate) fn blocking<T>(work: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}

impl EventStore for Persistence {
    fn append(&self, seq: u64, json: &RawValue, sync: bool) -> Result<(), StoreError> {
        let append = || self.with_log(|log| log.append_event(seq, json, sync));
        if sync { blocking(append) } else { append() }
    }

    fn read(&self, after: u64, before: u64) -> Result<Vec<WireEvent>, StoreError> {
        let events = blocking(|| self.store.events_after(&self.session_id, after))?;
        Ok(events
            .into_iter()
            .take_while(|e| e.seq < before)
            .map(|e| WireEvent {
                seq: Some(e.seq),
                json: Arc::from(e.json),
            })
            .collect())
    }
}

struct ContextJournal(Arc<Persistence>);

impl Journal for ContextJournal {
    fn pushed(&mut self, message: &Message, hash: u64, kind: PushKind) {
        let confirm = kind == PushKind::Confirm;
        let result = self
            .0
            .with_log(|log| log.append_push(message, hash, confirm, false));
        self.0.report("a context push", result);
    }

    fn popped(&mut self) {
        let result = self.0.with_log(|log| log.append_pop(false));
        self.0.report("a context pop", result);
    }

    fn cleared(&mut self) {
        // The compaction rebuild: worth a sync, the pushes that follow rebuild everything.
        let result = self.0.with_log(|log| log.append_clear(true));
        self.0.report("a context clear", result);
    }
}
