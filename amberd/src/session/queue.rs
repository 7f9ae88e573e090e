//! A subscriber's live queue: bounded, never blocks the publisher, and coalesces deltas.
//!
//! When a subscriber reads slower than the session produces, consecutive deltas of the same
//! stream (`message_delta` / `reasoning_delta` of one item, `tool_output_delta` of one call)
//! merge into the last queued one, so text is never lost or reordered and a burst of tiny
//! deltas costs one queue slot. Only non-mergeable items count against the bound; a
//! subscriber that exceeds it is cut off and flagged `lagged` (it can replay the durable
//! events it missed with `afterSeq`).
//!
//! A delta is published once for all subscribers as a `SharedDelta` and serialised at most
//! once, when the first subscriber takes it unmerged; a subscriber merging later deltas into
//! it switches to its own copy. Most deltas of a fast stream are merged, so most are never
//! serialised at all. A merge that would make the text longer than `[server]
//! max_field_bytes` is not made (the delta queues on its own), so merging never builds an
//! event that would have to be elided.

use amber_proto::sync::Locked;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use amber_proto::{Event, EventKind};
use tokio::sync::Notify;

use super::hub::WireEvent;
use crate::elide::WireLimits;

/// Why a queue stopped delivering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The subscriber fell a whole buffer behind.
    Lagged,
    /// The session's stream ended (deleted, daemon stopping).
    Closed,
}

/// A live delta as published to every subscriber.
#[derive(Debug)]
pub(crate) struct SharedDelta {
    event: Event,
    limits: WireLimits,
    wire: OnceLock<WireEvent>,
}

impl SharedDelta {
    pub(crate) fn new(event: Event, limits: WireLimits) -> Arc<Self> {
        Arc::new(Self {
            event,
            limits,
            wire: OnceLock::new(),
        })
    }

    fn wire(&self) -> WireEvent {
        self.wire
            .get_or_init(|| WireEvent::encode(&self.event, self.limits))
            .clone()
    }
}

enum Item {
    Ready(WireEvent),
    /// A delta as published; it may still absorb later ones.
    Shared(Arc<SharedDelta>),
    /// A delta that absorbed later ones: this subscriber's own copy, serialised when taken.
    Merged(Box<Event>),
}

impl Item {
    /// Appends `next` when it continues this queued delta's stream (same turn and item) and
    /// the merged text stays within `max_text` bytes.
    fn absorb(&mut self, next: &Event, max_text: usize) -> bool {
        let continues = |queued: &Event| {
            queued.turn_id == next.turn_id
                && mergeable(&queued.kind, &next.kind)
                && text_len(&queued.kind) + text_len(&next.kind) <= max_text
        };
        match self {
            Item::Ready(_) => false,
            Item::Merged(queued) => {
                let ok = continues(queued);
                if ok {
                    append(&mut queued.kind, &next.kind);
                }
                ok
            }
            Item::Shared(queued) => {
                if !continues(&queued.event) {
                    return false;
                }
                let mut own = Box::new(queued.event.clone());
                append(&mut own.kind, &next.kind);
                *self = Item::Merged(own);
                true
            }
        }
    }
}

struct State {
    items: VecDeque<Item>,
    end: Option<End>,
    receiver_gone: bool,
}

struct Shared {
    state: Mutex<State>,
    notify: Notify,
    capacity: usize,
    limits: WireLimits,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Every critical section leaves `State` consistent: poison carries no meaning here.
        self.state.locked()
    }
}

/// The publishing side, held by the hub.
pub(crate) struct QueueSender {
    shared: Arc<Shared>,
}

/// The subscriber's side.
pub struct QueueReceiver {
    shared: Arc<Shared>,
}

pub(crate) fn queue(capacity: usize, limits: WireLimits) -> (QueueSender, QueueReceiver) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            items: VecDeque::new(),
            end: None,
            receiver_gone: false,
        }),
        notify: Notify::new(),
        capacity: capacity.max(1),
        limits,
    });
    (
        QueueSender {
            shared: shared.clone(),
        },
        QueueReceiver { shared },
    )
}

/// Same stream: a later delta may be appended to an earlier one.
fn mergeable(queued: &EventKind, next: &EventKind) -> bool {
    match (queued, next) {
        (
            EventKind::MessageDelta { item_id: a, .. },
            EventKind::MessageDelta { item_id: b, .. },
        )
        | (
            EventKind::ReasoningDelta { item_id: a, .. },
            EventKind::ReasoningDelta { item_id: b, .. },
        )
        | (
            EventKind::ToolOutputDelta { call_id: a, .. },
            EventKind::ToolOutputDelta { call_id: b, .. },
        ) => a == b,
        _ => false,
    }
}

/// Bytes of a delta's text.
fn text_len(kind: &EventKind) -> usize {
    match kind {
        EventKind::MessageDelta { delta, .. } | EventKind::ReasoningDelta { delta, .. } => {
            delta.len()
        }
        EventKind::ToolOutputDelta { chunk, .. } => chunk.len(),
        _ => 0,
    }
}

fn append(queued: &mut EventKind, next: &EventKind) {
    match (queued, next) {
        (EventKind::MessageDelta { delta, .. }, EventKind::MessageDelta { delta: more, .. })
        | (
            EventKind::ReasoningDelta { delta, .. },
            EventKind::ReasoningDelta { delta: more, .. },
        )
        | (
            EventKind::ToolOutputDelta { chunk: delta, .. },
            EventKind::ToolOutputDelta { chunk: more, .. },
        ) => delta.push_str(more),
        _ => {}
    }
}

impl QueueSender {
    /// Queues a serialised event that never merges. Returns false when this subscriber is
    /// gone or was cut off just now; the hub then forgets it.
    pub(crate) fn push(&self, wire: &WireEvent) -> bool {
        self.enqueue(self.shared.lock(), Item::Ready(wire.clone()))
    }

    /// Queues a delta, merged into the last queued one of the same stream when there is
    /// one. Returns like `push`.
    pub(crate) fn push_delta(&self, delta: &Arc<SharedDelta>) -> bool {
        let mut state = self.shared.lock();
        if !state.receiver_gone
            && state.end.is_none()
            && let Some(back) = state.items.back_mut()
            && back.absorb(&delta.event, self.shared.limits.field_bytes())
        {
            return true;
        }
        self.enqueue(state, Item::Shared(delta.clone()))
    }

    fn enqueue(&self, mut state: MutexGuard<'_, State>, item: Item) -> bool {
        if state.receiver_gone || state.end.is_some() {
            return false;
        }
        if state.items.len() >= self.shared.capacity {
            state.end = Some(End::Lagged);
            state.items.clear();
            drop(state);
            self.shared.notify.notify_one();
            return false;
        }
        state.items.push_back(item);
        drop(state);
        self.shared.notify.notify_one();
        true
    }

    /// The subscriber still holds its end and has not been cut off.
    pub(crate) fn is_alive(&self) -> bool {
        let state = self.shared.lock();
        !state.receiver_gone && state.end.is_none()
    }

    /// Ends the queue after what is already in it.
    pub(crate) fn close(&self) {
        let mut state = self.shared.lock();
        if state.end.is_none() {
            state.end = Some(End::Closed);
        }
        drop(state);
        self.shared.notify.notify_one();
    }
}

impl QueueReceiver {
    /// The next event, or why there are no more. A lagged queue ends at once; a closed one
    /// after its items.
    pub async fn recv(&mut self) -> Result<WireEvent, End> {
        loop {
            if let Some(next) = self.try_recv() {
                return next;
            }
            // A notify_one with no waiter leaves a permit, so a push between the check
            // above and this await is not lost.
            self.shared.notify.notified().await;
        }
    }

    /// Like `recv` without waiting: `None` when nothing is queued yet.
    pub fn try_recv(&mut self) -> Option<Result<WireEvent, End>> {
        let mut state = self.shared.lock();
        if state.end == Some(End::Lagged) {
            return Some(Err(End::Lagged));
        }
        match state.items.pop_front() {
            Some(Item::Ready(wire)) => Some(Ok(wire)),
            Some(Item::Shared(delta)) => Some(Ok(delta.wire())),
            Some(Item::Merged(event)) => Some(Ok(WireEvent::encode(&event, self.shared.limits))),
            None => state.end.map(Err),
        }
    }
}

impl Drop for QueueReceiver {
    fn drop(&mut self) {
        self.shared.lock().receiver_gone = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: EventKind) -> Event {
        Event {
            seq: None,
            session_id: "s".into(),
            turn_id: Some("t".into()),
            agent_id: None,
            time: "now".into(),
            kind,
        }
    }

    fn delta(item: &str, text: &str) -> Arc<SharedDelta> {
        SharedDelta::new(
            event(EventKind::MessageDelta {
                item_id: item.into(),
                delta: text.into(),
            }),
            WireLimits::default(),
        )
    }

    fn ready(kind: EventKind) -> WireEvent {
        WireEvent::encode(&event(kind), WireLimits::default())
    }

    fn text_of(wire: &WireEvent) -> String {
        let v: serde_json::Value = serde_json::from_str(wire.json.get()).unwrap();
        v["delta"].as_str().unwrap().to_owned()
    }

    #[test]
    fn deltas_of_one_item_merge_while_waiting_and_keep_order() {
        let (tx, mut rx) = queue(4, WireLimits::default());
        for piece in ["a", "b", "c"] {
            assert!(tx.push_delta(&delta("i1", piece)));
        }
        assert!(tx.push_delta(&delta("i2", "x")));
        assert_eq!(text_of(&rx.try_recv().unwrap().unwrap()), "abc");
        assert_eq!(text_of(&rx.try_recv().unwrap().unwrap()), "x");
        assert!(rx.try_recv().is_none());
    }

    #[test]
    fn a_shared_delta_is_serialised_once_and_merging_never_touches_other_subscribers() {
        let (a, mut rx_a) = queue(4, WireLimits::default());
        let (b, mut rx_b) = queue(4, WireLimits::default());
        let first = delta("i", "Hel");
        assert!(a.push_delta(&first) && b.push_delta(&first));
        // Only `a` merges the next piece into its copy.
        assert!(a.push_delta(&delta("i", "lo")));
        let from_b = rx_b.try_recv().unwrap().unwrap();
        assert_eq!(text_of(&from_b), "Hel");
        assert!(first.wire.get().is_some(), "b serialised the shared delta");
        assert_eq!(text_of(&rx_a.try_recv().unwrap().unwrap()), "Hello");
        assert_eq!(first.event.kind, delta("i", "Hel").event.kind);
    }

    #[test]
    fn a_delta_after_another_event_does_not_jump_it() {
        let (tx, mut rx) = queue(4, WireLimits::default());
        assert!(tx.push_delta(&delta("i", "a")));
        assert!(tx.push(&ready(EventKind::TurnStarted { prompt: "p".into() })));
        assert!(tx.push_delta(&delta("i", "b")));
        assert_eq!(text_of(&rx.try_recv().unwrap().unwrap()), "a");
        rx.try_recv().unwrap().unwrap();
        assert_eq!(text_of(&rx.try_recv().unwrap().unwrap()), "b");
    }

    #[test]
    fn a_full_queue_of_unmergeable_items_lags() {
        let (tx, mut rx) = queue(2, WireLimits::default());
        let started = |p: &str| ready(EventKind::TurnStarted { prompt: p.into() });
        for p in ["1", "2"] {
            assert!(tx.push(&started(p)));
        }
        assert!(!tx.push(&started("3")));
        assert_eq!(rx.try_recv().unwrap().unwrap_err(), End::Lagged);
    }

    #[test]
    fn merging_stops_before_the_text_outgrows_the_field_cap() {
        let limits = WireLimits::new(1024, 1024 * 1024);
        let (tx, mut rx) = queue(16, limits);
        let piece = "p".repeat(300);
        let shared = |text: &str| {
            SharedDelta::new(
                event(EventKind::MessageDelta {
                    item_id: "i".into(),
                    delta: text.into(),
                }),
                limits,
            )
        };
        for _ in 0..7 {
            assert!(tx.push_delta(&shared(&piece)));
        }
        // 300 bytes each: three merge into 900, the fourth starts a new item.
        let lengths: Vec<usize> = std::iter::from_fn(|| rx.try_recv())
            .map(|wire| text_of(&wire.unwrap()).len())
            .collect();
        assert_eq!(lengths, vec![900, 900, 300]);
    }

    #[test]
    fn a_closed_queue_drains_first() {
        let (tx, mut rx) = queue(4, WireLimits::default());
        tx.push_delta(&delta("i", "last words"));
        tx.close();
        assert_eq!(text_of(&rx.try_recv().unwrap().unwrap()), "last words");
        assert_eq!(rx.try_recv().unwrap().unwrap_err(), End::Closed);
    }

    #[test]
    fn a_dropped_receiver_is_forgotten() {
        let (tx, rx) = queue(4, WireLimits::default());
        drop(rx);
        assert!(!tx.push_delta(&delta("i", "x")));
        assert!(!tx.push(&ready(EventKind::TurnStarted { prompt: "p".into() })));
    }
}
