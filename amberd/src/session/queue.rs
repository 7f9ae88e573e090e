//! A subscriber's live queue: bounded, never blocks the publisher, and coalesces deltas.
//!
//! When a subscriber reads slower than the session produces, consecutive deltas of the same
//! stream (`message_delta` / `reasoning_delta` of one item, `tool_output_delta` of one call)
//! merge into the last queued one, so text is never lost or reordered and a burst of tiny
//! deltas costs one queue slot. Only non-mergeable items count against the bound; a
//! subscriber that exceeds it is cut off and flagged `lagged` (it can replay the durable
//! events it missed with `afterSeq`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use amber_proto::{Event, EventKind};
use tokio::sync::Notify;

use super::hub::WireEvent;

/// Why a queue stopped delivering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The subscriber fell a whole buffer behind.
    Lagged,
    /// The session's stream ended (deleted, daemon stopping).
    Closed,
}

enum Item {
    Ready(WireEvent),
    /// A delta that may still absorb later ones; serialised when taken.
    Delta {
        event: Box<Event>,
        wire: Option<WireEvent>,
    },
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
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Every critical section leaves `State` consistent: poison carries no meaning here.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The publishing side, held by the hub.
pub struct QueueSender {
    shared: Arc<Shared>,
}

/// The subscriber's side.
pub struct QueueReceiver {
    shared: Arc<Shared>,
}

pub fn queue(capacity: usize) -> (QueueSender, QueueReceiver) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            items: VecDeque::new(),
            end: None,
            receiver_gone: false,
        }),
        notify: Notify::new(),
        capacity: capacity.max(1),
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

fn is_delta(kind: &EventKind) -> bool {
    matches!(
        kind,
        EventKind::MessageDelta { .. }
            | EventKind::ReasoningDelta { .. }
            | EventKind::ToolOutputDelta { .. }
    )
}

impl QueueSender {
    /// Queues `wire` (the serialised `event`). Returns false when this subscriber is gone
    /// or was cut off just now; the hub then forgets it.
    pub fn push(&self, event: &Event, wire: &WireEvent) -> bool {
        let mut state = self.shared.lock();
        if state.receiver_gone || state.end.is_some() {
            return false;
        }
        if let Some(Item::Delta {
            event: queued,
            wire: queued_wire,
        }) = state.items.back_mut()
            && queued.turn_id == event.turn_id
            && mergeable(&queued.kind, &event.kind)
        {
            append(&mut queued.kind, &event.kind);
            *queued_wire = None;
            return true;
        }
        if state.items.len() >= self.shared.capacity {
            state.end = Some(End::Lagged);
            state.items.clear();
            drop(state);
            self.shared.notify.notify_one();
            return false;
        }
        let item = if is_delta(&event.kind) {
            Item::Delta {
                event: Box::new(event.clone()),
                wire: Some(wire.clone()),
            }
        } else {
            Item::Ready(wire.clone())
        };
        state.items.push_back(item);
        drop(state);
        self.shared.notify.notify_one();
        true
    }

    /// The subscriber still holds its end and has not been cut off.
    pub fn is_alive(&self) -> bool {
        let state = self.shared.lock();
        !state.receiver_gone && state.end.is_none()
    }

    /// Ends the queue after what is already in it.
    pub fn close(&self) {
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
            Some(Item::Delta { event, wire }) => Some(Ok(match wire {
                Some(wire) => wire,
                None => WireEvent::encode(&event),
            })),
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
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn event(kind: EventKind) -> (Event, WireEvent) {
        let event = Event {
            seq: None,
            session_id: "s".into(),
            turn_id: Some("t".into()),
            agent_id: None,
            time: "now".into(),
            kind,
        };
        let wire = WireEvent::encode(&event);
        (event, wire)
    }

    fn delta(item: &str, text: &str) -> (Event, WireEvent) {
        event(EventKind::MessageDelta {
            item_id: item.into(),
            delta: text.into(),
        })
    }

    fn text_of(wire: &WireEvent) -> String {
        let v: serde_json::Value = serde_json::from_str(wire.json.get()).unwrap();
        v["delta"].as_str().unwrap().to_owned()
    }

    #[test]
    fn deltas_of_one_item_merge_while_waiting_and_keep_order() {
        let (tx, mut rx) = queue(4);
        for piece in ["a", "b", "c"] {
            let (e, w) = delta("i1", piece);
            assert!(tx.push(&e, &w));
        }
        let (e, w) = delta("i2", "x");
        assert!(tx.push(&e, &w));
        assert_eq!(text_of(&rx.try_recv().unwrap().unwrap()), "abc");
        assert_eq!(text_of(&rx.try_recv().unwrap().unwrap()), "x");
        assert!(rx.try_recv().is_none());
    }

    #[test]
    fn a_full_queue_of_unmergeable_items_lags() {
        let (tx, mut rx) = queue(2);
        let started = |p: &str| event(EventKind::TurnStarted { prompt: p.into() });
        for p in ["1", "2"] {
            let (e, w) = started(p);
            assert!(tx.push(&e, &w));
        }
        let (e, w) = started("3");
        assert!(!tx.push(&e, &w));
        assert_eq!(rx.try_recv().unwrap().unwrap_err(), End::Lagged);
    }

    #[test]
    fn a_closed_queue_drains_first() {
        let (tx, mut rx) = queue(4);
        let (e, w) = delta("i", "last words");
        tx.push(&e, &w);
        tx.close();
        assert_eq!(text_of(&rx.try_recv().unwrap().unwrap()), "last words");
        assert_eq!(rx.try_recv().unwrap().unwrap_err(), End::Closed);
    }

    #[test]
    fn a_dropped_receiver_is_forgotten() {
        let (tx, rx) = queue(4);
        drop(rx);
        let (e, w) = delta("i", "x");
        assert!(!tx.push(&e, &w));
    }
}
