//! Reply bytes the daemon produced for clients and has not yet written to them: replies and
//! notifications queued for a WebSocket, HTTP response bodies being written. jsonrpsee
//! queues a WebSocket's replies by count (`max_unanswered_calls`), not by size, so a client
//! that asks for large results and never reads them would hold them all in memory.
//!
//! Two bounds, both in bytes:
//! - per WebSocket ([`ConnUnread`], `max_unread_bytes_per_connection`): a reply that would
//!   take a connection past it is replaced by -32003 (a connection with nothing queued
//!   always gets its reply, so one large result still goes out); a notification waits for
//!   room instead, and a subscriber that cannot keep up falls behind its session and is
//!   dropped with the lag close (as before);
//! - daemon-wide ([`UnreadBudget`], `max_unread_bytes`): the sum over every connection,
//!   HTTP bodies included, refused (-32003, HTTP 503) or waited for the same way.
//!
//! The WebSocket guard counts what it writes ([`ConnUnread::written`]); what a closed
//! connection still had queued is returned to the budget when its state is dropped.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Notify;

/// A reply this small goes to a connection with nothing queued whatever the daemon-wide
/// count (an `initialize`, a `daemon/status`).
pub(super) const ALWAYS_SMALL: u64 = 64 * 1024;

/// The daemon-wide count and its bound.
#[derive(Debug)]
pub(crate) struct UnreadBudget {
    total: AtomicU64,
    limit: u64,
    /// Woken whenever bytes are written anywhere: waiters for daemon-wide room.
    room: Notify,
}

impl UnreadBudget {
    pub(crate) fn new(limit: u64) -> Arc<Self> {
        Arc::new(Self {
            total: AtomicU64::new(0),
            limit: limit.max(1),
            room: Notify::new(),
        })
    }

    /// Takes `len` bytes if they fit under the bound.
    fn try_take(&self, len: u64) -> bool {
        self.total
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |total| {
                let after = total.checked_add(len)?;
                (after <= self.limit).then_some(after)
            })
            .is_ok()
    }

    fn add(&self, len: u64) {
        self.total.fetch_add(len, Ordering::SeqCst);
    }

    fn give_back(&self, len: u64) {
        if len == 0 {
            return;
        }
        let _ = self
            .total
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |total| {
                Some(total.saturating_sub(len))
            });
        self.room.notify_waiters();
    }

    /// `len` bytes of an HTTP response body, held until the returned reservation is
    /// dropped (the body written or abandoned); `None` when they do not fit.
    pub(crate) fn reserve_body(self: &Arc<Self>, len: u64) -> Option<BodyReservation> {
        self.try_take(len).then(|| BodyReservation {
            budget: self.clone(),
            len,
        })
    }

    /// Bytes held now, over every connection.
    #[cfg(test)]
    pub(crate) fn total(&self) -> u64 {
        self.total.load(Ordering::SeqCst)
    }
}

/// Bytes of one HTTP response body in the daemon-wide count.
#[derive(Debug)]
pub(crate) struct BodyReservation {
    budget: Arc<UnreadBudget>,
    len: u64,
}

impl Drop for BodyReservation {
    fn drop(&mut self) {
        self.budget.give_back(self.len);
    }
}

/// One WebSocket's queued bytes.
#[derive(Debug)]
pub(crate) struct ConnUnread {
    budget: Arc<UnreadBudget>,
    queued: AtomicU64,
    limit: u64,
    /// Woken when this connection's bytes are written.
    room: Notify,
}

/// Why a reply or notification does not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Full {
    /// This connection's own bound.
    Connection,
    /// The daemon-wide one.
    Daemon,
}

impl ConnUnread {
    pub(crate) fn new(budget: Arc<UnreadBudget>, limit: u64) -> Self {
        Self {
            budget,
            queued: AtomicU64::new(0),
            limit: limit.max(1),
            room: Notify::new(),
        }
    }

    /// Takes `len` bytes for a reply or notification if they fit: under this connection's
    /// bound (or nothing is queued on it) and under the daemon's — except that a small one
    /// on a connection with nothing queued always goes, so clients that do not read cannot
    /// starve one that does (at most [`ALWAYS_SMALL`] per connection beyond the bound).
    pub(crate) fn try_take(&self, len: u64) -> Result<(), Full> {
        let fits_here = |queued: u64| queued == 0 || queued.saturating_add(len) <= self.limit;
        let queued = self.queued.load(Ordering::SeqCst);
        if !fits_here(queued) {
            return Err(Full::Connection);
        }
        if queued == 0 && len <= ALWAYS_SMALL {
            self.budget.add(len);
        } else if !self.budget.try_take(len) {
            return Err(Full::Daemon);
        }
        let taken = self
            .queued
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |queued| {
                fits_here(queued).then(|| queued.saturating_add(len))
            });
        if taken.is_err() {
            self.budget.give_back(len);
            return Err(Full::Connection);
        }
        Ok(())
    }

    /// Whether a call may run at all, its reply expected to be `expected` bytes (what the
    /// same method answered last on this connection): it would fit under this connection's
    /// bound, and the daemon's queue is not full — so a client that keeps asking for large
    /// results without reading them does not have each one built only to be dropped.
    pub(crate) fn has_room(&self, expected: u64) -> Result<(), Full> {
        let queued = self.queued();
        if queued > 0 && queued.saturating_add(expected) > self.limit {
            return Err(Full::Connection);
        }
        if self.queued() > 0 && self.budget.total.load(Ordering::SeqCst) >= self.budget.limit {
            return Err(Full::Daemon);
        }
        Ok(())
    }

    /// Counts `len` bytes that go out whatever the bounds say (a short error reply).
    pub(crate) fn add(&self, len: u64) {
        self.queued.fetch_add(len, Ordering::SeqCst);
        self.budget.add(len);
    }

    /// Waits until `len` bytes fit, then takes them (notifications: the subscriber waits,
    /// and falls behind its session if it never reads).
    pub(crate) async fn take(&self, len: u64) {
        loop {
            let here = self.room.notified();
            let anywhere = self.budget.room.notified();
            tokio::pin!(here, anywhere);
            here.as_mut().enable();
            anywhere.as_mut().enable();
            if self.try_take(len).is_ok() {
                return;
            }
            tokio::select! {
                () = here => {}
                () = anywhere => {}
            }
        }
    }

    /// The guard wrote `len` bytes of this connection's data frames.
    pub(crate) fn written(&self, len: u64) {
        if len == 0 {
            return;
        }
        let mut freed = 0;
        let _ = self
            .queued
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |queued| {
                // Frames the daemon did not count (a subscription's closing notification)
                // cannot free more than was counted.
                freed = queued.min(len);
                Some(queued - freed)
            });
        self.budget.give_back(freed);
        self.room.notify_waiters();
    }

    /// Bytes queued on this connection now.
    pub(crate) fn queued(&self) -> u64 {
        self.queued.load(Ordering::SeqCst)
    }
}

impl Drop for ConnUnread {
    fn drop(&mut self) {
        self.budget.give_back(*self.queued.get_mut());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_is_bounded_but_always_gets_one_reply_and_gives_all_back_when_closed() {
        let budget = UnreadBudget::new(100);
        let conn = ConnUnread::new(budget.clone(), 30);
        // Nothing queued: even a reply larger than the connection's bound goes.
        assert_eq!(conn.try_take(40), Ok(()));
        assert_eq!(conn.try_take(1), Err(Full::Connection));
        conn.written(40);
        assert_eq!(conn.try_take(20), Ok(()));
        assert_eq!(conn.try_take(10), Ok(()));
        assert_eq!(conn.try_take(1), Err(Full::Connection));
        assert_eq!(budget.total(), 30);
        // A call expected to answer more than fits is not run while replies are queued.
        assert_eq!(conn.has_room(1), Err(Full::Connection));
        // Frames it did not count free nothing beyond what was counted.
        conn.written(1000);
        assert_eq!((conn.queued(), budget.total()), (0, 0));
        conn.add(5);
        assert!(conn.try_take(20).is_ok());
        drop(conn);
        assert_eq!(
            budget.total(),
            0,
            "a closed connection gives its bytes back"
        );
    }

    #[test]
    fn the_daemon_wide_bound_holds_over_connections_and_bodies() {
        let budget = UnreadBudget::new(100 * ALWAYS_SMALL);
        let a = ConnUnread::new(budget.clone(), 80 * ALWAYS_SMALL);
        let b = ConnUnread::new(budget.clone(), 80 * ALWAYS_SMALL);
        assert_eq!(a.try_take(60 * ALWAYS_SMALL), Ok(()));
        assert_eq!(b.try_take(60 * ALWAYS_SMALL), Err(Full::Daemon));
        let body = budget.reserve_body(40 * ALWAYS_SMALL).unwrap();
        assert!(budget.reserve_body(1).is_none());
        // A small reply to a connection with nothing queued still goes; a second does not.
        assert_eq!(b.try_take(100), Ok(()));
        assert_eq!(b.try_take(100), Err(Full::Daemon));
        b.written(100);
        drop(body);
        assert_eq!(b.try_take(40 * ALWAYS_SMALL), Ok(()));
        assert_eq!(budget.total(), 100 * ALWAYS_SMALL);
    }

    #[tokio::test]
    async fn a_notification_waits_for_room_and_goes_when_replies_are_written() {
        let budget = UnreadBudget::new(1000);
        let conn = Arc::new(ConnUnread::new(budget, 50));
        conn.try_take(50).unwrap();
        let waiting = {
            let conn = conn.clone();
            tokio::spawn(async move { conn.take(30).await })
        };
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        conn.written(40);
        tokio::time::timeout(std::time::Duration::from_secs(10), waiting)
            .await
            .expect("the notification got room")
            .expect("task");
        assert_eq!(conn.queued(), 40);
    }
}
