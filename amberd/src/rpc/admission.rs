//! Connection slots: who is served while `max_connections` are open.
//!
//! A slot is held from accept to close ([`Slot`] releases it when dropped, whatever the
//! close path), and each slot says what its connection is doing ([`SlotState`]). A
//! connection that has proven nothing yet — no whole request head, or a WebSocket that has
//! not sent `initialize` — and a plain HTTP connection idle between requests hold a slot
//! no other client should wait for: when every slot is taken, a new connection evicts the
//! oldest of them (pending ones first) instead of being refused, so connect-only sockets
//! cannot lock the user out of their own daemon. Busy HTTP connections and initialized
//! WebSockets are never evicted; only when every slot is one of those is a newcomer told
//! 503. WebSockets may hold at most `max_connections - reserved_http_connections` slots,
//! with the same eviction among themselves.

use amber_proto::sync::Locked;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

/// What a connection is doing, as eviction sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub(crate) enum Activity {
    /// Accepted; no whole request head yet, or a WebSocket before `initialize`.
    Pending = 0,
    /// Plain HTTP between two requests.
    Idle = 1,
    /// Plain HTTP serving a request.
    Busy = 2,
    /// A WebSocket that sent `initialize`.
    Established = 3,
}

impl Activity {
    fn from_u8(value: u8) -> Self {
        match value {
            0 => Self::Pending,
            1 => Self::Idle,
            2 => Self::Busy,
            _ => Self::Established,
        }
    }

    fn evictable(self) -> bool {
        matches!(self, Self::Pending | Self::Idle)
    }
}

/// One slot's state, shared by its connection and the table.
#[derive(Debug)]
pub(crate) struct SlotState {
    activity: AtomicU8,
    websocket: AtomicBool,
    evicted: CancellationToken,
}

impl SlotState {
    pub(crate) fn set(&self, activity: Activity) {
        self.activity.store(activity as u8, Ordering::SeqCst);
    }

    pub(crate) fn activity(&self) -> Activity {
        Activity::from_u8(self.activity.load(Ordering::SeqCst))
    }

    /// Fires when the slot was given to another connection: the connection must close.
    pub(crate) fn evicted(&self) -> &CancellationToken {
        &self.evicted
    }
}

/// The slot table every connection shares.
#[derive(Debug)]
pub(super) struct Slots {
    max: usize,
    max_websockets: usize,
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    next: u64,
    /// By arrival: the first entry is the oldest.
    held: BTreeMap<u64, Arc<SlotState>>,
}

/// A held slot; released when dropped.
#[derive(Debug)]
pub(super) struct Slot {
    id: u64,
    slots: Arc<Slots>,
    state: Arc<SlotState>,
}

impl Slot {
    pub(super) fn state(&self) -> &Arc<SlotState> {
        &self.state
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.lock().held.remove(&self.id);
    }
}

impl Slots {
    pub(super) fn new(max: usize, reserved_http: usize) -> Arc<Self> {
        let max = max.max(1);
        Arc::new(Self {
            max,
            max_websockets: max.saturating_sub(reserved_http).max(1),
            table: Mutex::new(Table::default()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        // The table holds no invariant a panic could break half-way.
        self.table.locked()
    }

    /// A slot for a new connection, evicting the oldest evictable one when all are held;
    /// `None` when every slot is busy or established.
    pub(super) fn take(self: &Arc<Self>) -> Option<Slot> {
        let mut table = self.lock();
        if table.held.len() >= self.max {
            evict_oldest(&mut table.held, |_| true)?;
        }
        let id = table.next;
        table.next += 1;
        let state = Arc::new(SlotState {
            activity: AtomicU8::new(Activity::Pending as u8),
            websocket: AtomicBool::new(false),
            evicted: CancellationToken::new(),
        });
        table.held.insert(id, state.clone());
        Some(Slot {
            id,
            slots: self.clone(),
            state,
        })
    }

    /// Makes `slot` a WebSocket's, evicting the oldest pending WebSocket when as many as
    /// may be are held; false (refused) when all of them are established.
    pub(super) fn upgrade(&self, slot: &SlotState) -> bool {
        let mut table = self.lock();
        let websockets = table
            .held
            .values()
            .filter(|s| s.websocket.load(Ordering::SeqCst))
            .count();
        if websockets >= self.max_websockets
            && evict_oldest(&mut table.held, |s| s.websocket.load(Ordering::SeqCst)).is_none()
        {
            return false;
        }
        slot.websocket.store(true, Ordering::SeqCst);
        true
    }

    /// Slots held now.
    #[cfg(test)]
    fn held(&self) -> usize {
        self.lock().held.len()
    }
}

/// Evicts the oldest evictable slot among those `among` accepts (pending before idle);
/// `None` when there is none.
fn evict_oldest(
    held: &mut BTreeMap<u64, Arc<SlotState>>,
    among: impl Fn(&SlotState) -> bool,
) -> Option<()> {
    let (&id, _) = held
        .iter()
        .filter(|(_, s)| among(s) && s.activity().evictable())
        .min_by_key(|(id, s)| (s.activity(), **id))?;
    let state = held.remove(&id)?;
    state.evicted.cancel();
    Some(())
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn a_full_table_evicts_the_oldest_pending_then_idle_never_busy_or_established() {
        let slots = Slots::new(4, 1);
        let a = slots.take().unwrap();
        let b = slots.take().unwrap();
        let c = slots.take().unwrap();
        let d = slots.take().unwrap();
        a.state().set(Activity::Busy);
        b.state().set(Activity::Idle);
        d.state().set(Activity::Established);
        // c is the only pending one: it goes first, though b is older.
        let e = slots.take().unwrap();
        assert!(c.state().evicted().is_cancelled());
        assert!(!b.state().evicted().is_cancelled());
        // Then the idle one.
        e.state().set(Activity::Busy);
        let f = slots.take().unwrap();
        assert!(b.state().evicted().is_cancelled());
        f.state().set(Activity::Established);
        // Now every slot is busy or established: refused.
        assert!(slots.take().is_none());
        assert_eq!(slots.held(), 4);
        for kept in [&a, &d, &e, &f] {
            assert!(!kept.state().evicted().is_cancelled());
        }
        // Dropping a slot (any close path) frees it; an evicted one was freed already.
        drop(c);
        drop(b);
        assert_eq!(slots.held(), 4);
        drop(a);
        assert_eq!(slots.held(), 3);
        assert!(slots.take().is_some());
    }

    #[test]
    fn websockets_evict_only_pending_websockets_within_their_share() {
        let slots = Slots::new(4, 2);
        let http = slots.take().unwrap();
        let w1 = slots.take().unwrap();
        let w2 = slots.take().unwrap();
        assert!(slots.upgrade(w1.state()) && slots.upgrade(w2.state()));
        w1.state().set(Activity::Established);
        let w3 = slots.take().unwrap();
        // Two WebSockets may be held: the pending one (w2) makes room, not `http`.
        assert!(slots.upgrade(w3.state()));
        assert!(w2.state().evicted().is_cancelled());
        assert!(!http.state().evicted().is_cancelled());
        w3.state().set(Activity::Established);
        let w4 = slots.take().unwrap();
        assert!(
            !slots.upgrade(w4.state()),
            "both WebSockets are established"
        );
    }
}
