//! The daemon-wide fan-out behind `session/watch`: every session's changes, one
//! `session/changed` item each, to every watcher; and the daemon-wide approver count of the
//! watches that asked to approve (`session/watch {approvals: true}` on an approver
//! connection).
//!
//! **Invariants:**
//! - **Publishing never waits for a watcher.** Items go into one `tokio::sync::broadcast`
//!   ring of `[server] subscriber_buffer` serialised items shared by all watchers; a watcher
//!   that falls a whole ring behind is told `Lagged` and its watch is closed `lagged` (it
//!   watches again, then lists). Memory is the ring, whatever the watchers do.
//! - **Nothing is built while nobody watches**: with no receiver a change costs one atomic
//!   load. Deltas never reach here at all (the hub returns before its tap).
//! - **A session's items leave under its hub's lock** (`EventHub::notify_watchers` and the
//!   hub's tap in `publish_inner`), and each reads the session's info under that lock, so a
//!   session's items arrive in the order of its changes, each with info at least as new as
//!   the one before: applying them in arrival order leaves a client with the latest info.
//!   The item of an event is sent after the event went to the session's subscribers, so
//!   `event.seq` rises by session like `session/subscribe`'s.
//! - After a session's `deleted` no further item of it is sent (`Log::unwatched`).
//! - Lock order: a session's hub lock, then its `live` lock (the tap reads the info), then
//!   the ring's. Nothing takes the hub's lock while holding `live`.

use std::sync::{Arc, Weak};

use amber_proto::{SessionChangeKind, SessionInfo};
use serde::Serialize;
use serde_json::value::RawValue;
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

use super::SessionShared;
use super::approvals::ApproverGuard;
use crate::elide::{self, WireLimits};

/// One `session/changed` item, serialised once for every watcher.
pub(crate) type WireChange = Arc<RawValue>;

/// Why a watcher's stream of changes stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchEnd {
    /// The watcher fell a whole ring behind; the items it missed are gone.
    Lagged,
    /// The daemon is stopping (after the sessions' last changes).
    Closed,
}

/// The watchers of every session, shared through `Services`.
pub struct Watchers {
    changes: broadcast::Sender<WireChange>,
    /// Cancelled once the sessions have stopped at shutdown: watchers send what is left,
    /// then end.
    closed: CancellationToken,
    /// Watches that approve for every session (`session/watch {approvals: true}` on an
    /// approver connection). Every session's `Approvals` reads it beside its own count.
    approvers: watch::Sender<usize>,
    limits: WireLimits,
}

impl Watchers {
    /// `buffer`: items a watcher may fall behind before it is cut off (at least 16).
    pub fn new(buffer: usize, limits: WireLimits) -> Self {
        let (changes, _) = broadcast::channel(buffer.max(16));
        Self {
            changes,
            closed: CancellationToken::new(),
            approvers: watch::Sender::new(0),
            limits,
        }
    }

    /// A new watcher: it receives every change sent after this call.
    pub fn subscribe(&self) -> WatchReceiver {
        WatchReceiver {
            changes: self.changes.subscribe(),
            closed: self.closed.clone(),
        }
    }

    /// Counts an approver of every session while the guard lives.
    pub fn approver(&self) -> ApproverGuard {
        ApproverGuard::count(&self.approvers)
    }

    /// The daemon-wide approver count, for each session's `Approvals`.
    pub(crate) fn approvers(&self) -> watch::Sender<usize> {
        self.approvers.clone()
    }

    /// Ends every watcher once it has read what was sent (at shutdown, after the sessions).
    pub fn close(&self) {
        self.closed.cancel();
    }

    /// Whether anyone watches (a change is built only then).
    pub fn watched(&self) -> bool {
        self.changes.receiver_count() > 0
    }

    /// Sends one change to every watcher. `event`: the wire form of the event that caused
    /// it (as `session/subscribe` sends it). Never waits.
    pub fn send(&self, change: SessionChangeKind, session: &SessionInfo, event: Option<&RawValue>) {
        if !self.watched() {
            return;
        }
        #[derive(Serialize)]
        struct Change<'a> {
            change: SessionChangeKind,
            session: &'a SessionInfo,
            #[serde(skip_serializing_if = "Option::is_none")]
            event: Option<&'a RawValue>,
        }
        let raw = match serde_json::value::to_raw_value(&Change {
            change,
            session,
            event,
        }) {
            Ok(raw) => raw,
            Err(err) => {
                // Our own types always serialise; never take a session down over it.
                tracing::error!(%err, "failed to serialise a session change");
                return;
            }
        };
        // The event is already elided; the info beside it could tip a large one over.
        let raw = elide::fit_json(&raw, self.limits).unwrap_or(raw);
        // Err only when the last watcher left since `watched`: nobody to tell.
        let _ = self.changes.send(Arc::from(raw));
    }
}

/// One watcher's side of the fan-out.
pub struct WatchReceiver {
    changes: broadcast::Receiver<WireChange>,
    closed: CancellationToken,
}

impl WatchReceiver {
    /// The next change, or why there are no more.
    pub async fn recv(&mut self) -> Result<WireChange, WatchEnd> {
        use broadcast::error::{RecvError, TryRecvError};
        tokio::select! {
            // What was sent before the close is still delivered.
            biased;
            received = self.changes.recv() => match received {
                Ok(change) => Ok(change),
                Err(RecvError::Lagged(_)) => Err(WatchEnd::Lagged),
                Err(RecvError::Closed) => Err(WatchEnd::Closed),
            },
            () = self.closed.cancelled() => match self.changes.try_recv() {
                Ok(change) => Ok(change),
                Err(TryRecvError::Lagged(_)) => Err(WatchEnd::Lagged),
                Err(TryRecvError::Empty | TryRecvError::Closed) => Err(WatchEnd::Closed),
            },
        }
    }
}

/// A loaded session's link to the watchers, installed in its hub (`EventHub::watch_with`).
pub struct WatchTap {
    watchers: Arc<Watchers>,
    /// The session whose info each item carries; weak, as the session owns its hub.
    session: Weak<SessionShared>,
}

impl WatchTap {
    pub fn new(watchers: Arc<Watchers>, session: Weak<SessionShared>) -> Self {
        Self { watchers, session }
    }

    /// Whether a change would reach anyone (checked before anything is built).
    pub fn watched(&self) -> bool {
        self.watchers.watched()
    }

    /// Sends the session's info as it is now. Called under the session's hub lock.
    pub fn send(&self, change: SessionChangeKind, event: Option<&RawValue>) {
        if !self.watchers.watched() {
            return;
        }
        if let Some(session) = self.session.upgrade() {
            self.watchers.send(change, &session.info(), event);
        }
    }
}

#[cfg(test)]
#[path = "watch_tests.rs"]
mod tests;
