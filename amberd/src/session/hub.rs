//! Event fan-out of one session: durable events get the next `seq` and are kept for
//! replay; live events (deltas) are only broadcast.
//!
//! **Invariant:** append-and-fan-out and subscribe both happen under the same lock, so a
//! subscriber's replay (`seq > afterSeq`) followed by its live queue has no gap and no
//! duplicate at the seam. Publishing never waits for a subscriber: each has its own
//! coalescing queue (`queue.rs`), cut off as `lagged` only when it overflows.

use std::sync::{Arc, Mutex, MutexGuard};

use amber_proto::{Event, EventKind};
use serde_json::value::RawValue;

pub use super::queue::End;
use super::queue::{QueueReceiver, QueueSender, queue};

/// An event serialised once, shared by every subscriber.
#[derive(Debug, Clone)]
pub struct WireEvent {
    pub seq: Option<u64>,
    pub json: Arc<RawValue>,
}

/// What a new subscriber starts from.
pub struct Subscription {
    /// Durable events with `seq > afterSeq`, oldest first.
    pub replay: Vec<WireEvent>,
    /// Seq of the newest durable event when the subscription was taken.
    pub last_seq: u64,
    pub live: Live,
}

/// A subscriber's live events; `Err(End)` says why they stopped.
pub type Live = QueueReceiver;

impl WireEvent {
    /// Serialises an event for the wire.
    pub fn encode(event: &Event) -> WireEvent {
        let json = match serde_json::value::to_raw_value(event) {
            Ok(raw) => Arc::from(raw),
            Err(err) => {
                // Our own types always serialise; never take the session down over it.
                tracing::error!(%err, "failed to serialise event");
                Arc::from(RawValue::NULL.to_owned())
            }
        };
        WireEvent {
            seq: event.seq,
            json,
        }
    }
}

struct Log {
    events: Vec<WireEvent>,
    last_seq: u64,
    subscribers: Vec<QueueSender>,
    closed: bool,
}

/// Durable log plus live fan-out for one session.
pub struct EventHub {
    session_id: String,
    buffer: usize,
    log: Mutex<Log>,
}

impl EventHub {
    pub fn new(session_id: String, buffer: usize) -> Self {
        Self {
            session_id,
            buffer: buffer.max(16),
            log: Mutex::new(Log {
                events: Vec::new(),
                last_seq: 0,
                subscribers: Vec::new(),
                closed: false,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Log> {
        // A panic while holding this lock cannot leave the log half-written (push is the
        // last step), so a poisoned lock is still consistent.
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stamps, serialises, records (if durable) and broadcasts one event.
    pub fn publish(&self, turn_id: Option<&str>, kind: EventKind) -> Event {
        self.publish_as(turn_id, None, kind)
    }

    /// Like `publish`, for an event raised by a sub-agent.
    pub fn publish_as(
        &self,
        turn_id: Option<&str>,
        agent_id: Option<&str>,
        kind: EventKind,
    ) -> Event {
        let durable = kind.is_durable();
        let mut log = self.lock();
        let seq = durable.then(|| log.last_seq + 1);
        let event = Event {
            seq,
            session_id: self.session_id.clone(),
            turn_id: turn_id.map(str::to_owned),
            agent_id: agent_id.map(str::to_owned),
            time: now_rfc3339(),
            kind,
        };
        let wire = WireEvent::encode(&event);
        log.subscribers.retain(|sub| sub.push(&event, &wire));
        if let Some(seq) = seq {
            log.last_seq = seq;
            log.events.push(wire);
        }
        event
    }

    /// Replay after `after_seq` (none without it) plus a live queue, atomically.
    pub fn subscribe(&self, after_seq: Option<u64>) -> Subscription {
        let mut log = self.lock();
        let replay = match after_seq {
            Some(after) => {
                // seq n lives at index n-1.
                let start = usize::try_from(after)
                    .unwrap_or(usize::MAX)
                    .min(log.events.len());
                log.events[start..].to_vec()
            }
            None => Vec::new(),
        };
        let (tx, rx) = queue(self.buffer);
        if log.closed {
            tx.close();
        } else {
            log.subscribers.push(tx);
        }
        Subscription {
            replay,
            last_seq: log.last_seq,
            live: rx,
        }
    }

    /// Ends every live queue once what was published has been read; later subscribers get
    /// their replay and an already-ended queue.
    pub fn close(&self) {
        let mut log = self.lock();
        log.closed = true;
        for sub in log.subscribers.drain(..) {
            sub.close();
        }
    }

    pub fn last_seq(&self) -> u64 {
        self.lock().last_seq
    }

    pub fn subscriber_count(&self) -> usize {
        self.lock().subscribers.len()
    }

    pub fn session_id(&self) -> &str {
        &self.session_id
    }
}

/// Current time as RFC 3339 with millisecond precision, UTC.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn text(delta: &str) -> EventKind {
        EventKind::MessageDelta {
            item_id: "i".into(),
            delta: delta.into(),
        }
    }

    fn started(prompt: &str) -> EventKind {
        EventKind::TurnStarted {
            prompt: prompt.into(),
        }
    }

    #[test]
    fn durable_events_get_consecutive_seqs_and_live_ones_none() {
        let hub = EventHub::new("s".into(), 16);
        assert_eq!(hub.publish(Some("t"), started("a")).seq, Some(1));
        assert_eq!(hub.publish(Some("t"), text("x")).seq, None);
        assert_eq!(hub.publish(Some("t"), started("b")).seq, Some(2));
        assert_eq!(hub.last_seq(), 2);
    }

    #[test]
    fn replay_starts_after_the_given_seq_and_live_continues_without_gap() {
        let hub = EventHub::new("s".into(), 16);
        for p in ["a", "b", "c"] {
            hub.publish(None, started(p));
        }
        let mut sub = hub.subscribe(Some(1));
        let seqs: Vec<_> = sub.replay.iter().map(|e| e.seq.unwrap()).collect();
        assert_eq!(seqs, vec![2, 3]);
        assert_eq!(sub.last_seq, 3);
        hub.publish(None, started("d"));
        assert_eq!(sub.live.try_recv().unwrap().unwrap().seq, Some(4));
        hub.close();
        assert_eq!(sub.live.try_recv().unwrap().unwrap_err(), End::Closed);
        assert!(hub.subscribe(None).replay.is_empty());
        assert_eq!(hub.subscribe(Some(99)).replay.len(), 0);
    }

    #[test]
    fn a_slow_subscriber_gets_merged_deltas_and_lags_only_on_durable_overflow() {
        let hub = EventHub::new("s".into(), 16);
        let mut slow = hub.subscribe(None);
        let mut keeping_up = hub.subscribe(None);
        for i in 0..100 {
            hub.publish(None, text(&i.to_string()));
            keeping_up.live.try_recv().unwrap().unwrap();
        }
        // 100 deltas of one item wait as a single merged delta.
        let merged = slow.live.try_recv().unwrap().unwrap();
        let v: serde_json::Value = serde_json::from_str(merged.json.get()).unwrap();
        let expected: String = (0..100).map(|i| i.to_string()).collect();
        assert_eq!(v["delta"], expected.as_str());
        assert!(slow.live.try_recv().is_none());

        for i in 0..17 {
            hub.publish(None, started(&i.to_string()));
            keeping_up.live.try_recv().unwrap().unwrap();
        }
        assert_eq!(slow.live.try_recv().unwrap().unwrap_err(), End::Lagged);
        assert_eq!(hub.subscriber_count(), 1);
    }
}
