//! Event fan-out of one session: durable events get the next `seq` and are kept for
//! replay; live events (deltas) are only broadcast.
//!
//! **Invariant:** append-and-fan-out and subscribe both happen under the same lock, so a
//! subscriber's replay (`seq > afterSeq`) followed by its live queue has no gap and no
//! duplicate at the seam. Publishing never waits for a subscriber: each has a bounded queue
//! (memory grows only with its actual backlog), and one whose queue is full is cut off and
//! told so (`Live::lagged`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use amber_proto::{Event, EventKind};
use serde_json::value::RawValue;
use tokio::sync::mpsc;

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

/// A subscriber's live queue. It ends (`recv` → `None`) when the hub closes or when the
/// subscriber fell a whole buffer behind; `lagged()` tells which.
pub struct Live {
    rx: mpsc::Receiver<WireEvent>,
    lagged: Arc<AtomicBool>,
}

impl Live {
    pub async fn recv(&mut self) -> Option<WireEvent> {
        self.rx.recv().await
    }

    pub fn try_recv(&mut self) -> Option<WireEvent> {
        self.rx.try_recv().ok()
    }

    pub fn lagged(&self) -> bool {
        self.lagged.load(Ordering::SeqCst)
    }
}

struct Subscriber {
    tx: mpsc::Sender<WireEvent>,
    lagged: Arc<AtomicBool>,
}

struct Log {
    events: Vec<WireEvent>,
    last_seq: u64,
    subscribers: Vec<Subscriber>,
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
        let durable = kind.is_durable();
        let mut log = self.lock();
        let seq = durable.then(|| log.last_seq + 1);
        let event = Event {
            seq,
            session_id: self.session_id.clone(),
            turn_id: turn_id.map(str::to_owned),
            time: now_rfc3339(),
            kind,
        };
        let json: Arc<RawValue> = match serde_json::value::to_raw_value(&event) {
            Ok(raw) => Arc::from(raw),
            Err(err) => {
                // Our own types always serialise; log rather than take the session down.
                tracing::error!(%err, "failed to serialise event");
                return event;
            }
        };
        let wire = WireEvent { seq, json };
        log.subscribers
            .retain(|sub| match sub.tx.try_send(wire.clone()) {
                Ok(()) => true,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    sub.lagged.store(true, Ordering::SeqCst);
                    false
                }
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            });
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
        let (tx, rx) = mpsc::channel(self.buffer);
        let lagged = Arc::new(AtomicBool::new(false));
        if !log.closed {
            log.subscribers.push(Subscriber {
                tx,
                lagged: lagged.clone(),
            });
        }
        Subscription {
            replay,
            last_seq: log.last_seq,
            live: Live { rx, lagged },
        }
    }

    /// Ends every live queue once what was published has been read; later subscribers get
    /// their replay and an already-ended queue.
    pub fn close(&self) {
        let mut log = self.lock();
        log.closed = true;
        log.subscribers.clear();
    }

    pub fn last_seq(&self) -> u64 {
        self.lock().last_seq
    }

    pub fn subscriber_count(&self) -> usize {
        let mut log = self.lock();
        log.subscribers.retain(|s| !s.tx.is_closed());
        log.subscribers.len()
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
        assert_eq!(sub.live.try_recv().unwrap().seq, Some(4));
        hub.close();
        assert!(sub.live.try_recv().is_none());
        assert!(!sub.live.lagged());
        assert!(hub.subscribe(None).replay.is_empty());
        assert_eq!(hub.subscribe(Some(99)).replay.len(), 0);
    }

    #[test]
    fn a_slow_subscriber_lags_without_blocking_the_publisher() {
        let hub = EventHub::new("s".into(), 16);
        let mut sub = hub.subscribe(None);
        let mut keeping_up = hub.subscribe(None);
        for i in 0..100 {
            hub.publish(None, text(&i.to_string()));
            keeping_up.live.try_recv().unwrap();
        }
        // The first 16 are queued, then the queue is cut off and flagged.
        let mut queued = 0;
        while sub.live.try_recv().is_some() {
            queued += 1;
        }
        assert_eq!(queued, 16);
        assert!(sub.live.lagged());
        assert!(!keeping_up.live.lagged());
        assert_eq!(hub.subscriber_count(), 1);
    }
}
