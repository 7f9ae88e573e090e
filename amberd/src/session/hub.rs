//! Event fan-out of one session: durable events get the next `seq` and are kept for
//! replay; live events (deltas) are only broadcast.
//!
//! **Invariant:** append-and-fan-out and subscribe both happen under the same lock, so a
//! subscriber's replay (`seq > afterSeq`) followed by its live queue has no gap and no
//! duplicate at the seam. Publishing never waits for a subscriber: each has its own
//! coalescing queue (`queue.rs`), cut off as `lagged` only when it overflows.
//!
//! The hub is also where a session's changes reach `session/watch` (`watch.rs`): its tap
//! sees the durable events a console cares about ([`is_watched`]), under the same lock,
//! after the subscribers; deltas return before it.
//!
//! The log keeps events already elided (`elide.rs`): the context journal beside them keeps
//! every message whole, which is what the model and a restore need, so a full copy in each
//! event would only double the log. Events of an older log are elided as they are replayed.

use amber_proto::sync::Locked;
use amber_store::StoreError;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use amber_proto::{Event, EventKind, InProgressItem, SessionChangeKind, StreamKind};
use serde_json::value::RawValue;

use crate::elide::{self, WireLimits};

pub use super::queue::End;
use super::queue::{QueueReceiver, QueueSender, SharedDelta, queue};
use super::watch::WatchTap;

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
    /// Replies streaming when the subscription was taken, with their text so far: the
    /// live queue continues each exactly where its text ends.
    pub in_progress: Vec<InProgressItem>,
    pub live: Live,
}

/// A subscriber's live events; `Err(End)` says why they stopped.
pub type Live = QueueReceiver;

impl WireEvent {
    /// Serialises an event for the wire, its long strings elided to fit `limits`.
    pub fn encode(event: &Event, limits: WireLimits) -> WireEvent {
        let json = match serde_json::value::to_raw_value(event) {
            Ok(raw) => Arc::from(elide::fit_json(&raw, limits).unwrap_or(raw)),
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

    /// This event made to fit `limits`: events read back from logs written before elision
    /// (or under a larger cap) can hold longer strings.
    pub fn fitted(self, limits: WireLimits) -> WireEvent {
        match elide::fit_json(&self.json, limits) {
            Some(json) => WireEvent {
                seq: self.seq,
                json: Arc::from(json),
            },
            None => self,
        }
    }
}

/// Where durable events live beyond memory: the session's log in the store.
pub trait EventStore: Send + Sync {
    /// Appends one durable event. Called under the hub's lock, so in `seq` order; `sync`
    /// asks for it to be on disk before returning.
    fn append(&self, seq: u64, json: &RawValue, sync: bool) -> Result<(), StoreError>;
    /// Durable events with `after < seq < before`, oldest first, for replays that reach
    /// further back than memory.
    fn read(&self, after: u64, before: u64) -> Result<Vec<WireEvent>, StoreError>;
}

/// Live deltas that a slow subscriber may receive merged.
fn is_delta(kind: &EventKind) -> bool {
    !kind.is_durable()
        && matches!(
            kind,
            EventKind::MessageDelta { .. }
                | EventKind::ReasoningDelta { .. }
                | EventKind::ToolOutputDelta { .. }
        )
}

/// The durable events that tell `session/watch` something about the session: it queued or
/// ran a turn, asks for or got an approval, spent tokens, was rewound, or finished a
/// routine's run.
pub fn is_watched(kind: &EventKind) -> bool {
    matches!(
        kind,
        EventKind::PromptQueued { .. }
            | EventKind::TurnStarted { .. }
            | EventKind::ApprovalRequested(_)
            | EventKind::ApprovalResolved { .. }
            | EventKind::TurnCompleted { .. }
            | EventKind::Usage { .. }
            | EventKind::Rewound { .. }
            | EventKind::RoutineFinished { .. }
    )
}

/// The durable events worth an fsync: a crash must never lose them.
fn must_sync(kind: &EventKind) -> bool {
    matches!(
        kind,
        EventKind::PromptQueued { .. }
            | EventKind::ToolCallCompleted { .. }
            | EventKind::ApprovalRequested(_)
            | EventKind::ApprovalResolved { .. }
            | EventKind::TurnCompleted { .. }
            | EventKind::CompactionCompleted { .. }
    )
}

struct Log {
    /// The newest durable events (all of them without a store).
    events: VecDeque<WireEvent>,
    last_seq: u64,
    subscribers: Vec<QueueSender>,
    closed: bool,
    /// The main agent's replies streaming now (sub-agent text is not streamed).
    streaming: Vec<InProgressItem>,
    /// Set with the session's `deleted` item: the watchers hear nothing of it after that.
    unwatched: bool,
}

impl Log {
    /// Keeps `streaming` in step with the deltas and the events that end them.
    fn track(&mut self, agent_id: Option<&str>, kind: &EventKind) {
        let (item_id, stream, delta) = match kind {
            EventKind::MessageDelta { item_id, delta } => (item_id, StreamKind::Message, delta),
            EventKind::ReasoningDelta { item_id, delta } => (item_id, StreamKind::Reasoning, delta),
            EventKind::MessageCompleted { item_id, .. } => {
                self.streaming.retain(|i| i.item_id != *item_id);
                return;
            }
            EventKind::TurnCompleted { .. } => {
                self.streaming.clear();
                return;
            }
            _ => return,
        };
        if agent_id.is_some() {
            return;
        }
        match self
            .streaming
            .iter_mut()
            .find(|i| i.item_id == *item_id && i.kind == stream)
        {
            Some(item) => item.text.push_str(delta),
            None => self.streaming.push(InProgressItem {
                item_id: item_id.clone(),
                kind: stream,
                text: delta.clone(),
            }),
        }
    }
}

/// Durable log plus live fan-out for one session.
pub struct EventHub {
    session_id: String,
    buffer: usize,
    /// How many durable events stay in memory when there is a store.
    memory: usize,
    log: Mutex<Log>,
    store: Option<Arc<dyn EventStore>>,
    /// What every event a client receives fits in.
    limits: WireLimits,
    /// The way to `session/watch`, once the session is built (`watch_with`).
    watch: OnceLock<WatchTap>,
}

impl EventHub {
    /// A hub that keeps every durable event in memory (no store).
    pub fn new(session_id: String, buffer: usize) -> Self {
        Self::restored(session_id, buffer, usize::MAX, 0, Vec::new(), None)
    }

    /// A hub continuing after `last_seq`. With a store, only the newest `memory` durable
    /// events (at least one; `[sessions] memory_events`) stay in memory, starting with the
    /// newest of `tail`, and the store serves replays of the rest.
    pub fn restored(
        session_id: String,
        buffer: usize,
        memory: usize,
        last_seq: u64,
        tail: Vec<WireEvent>,
        store: Option<Arc<dyn EventStore>>,
    ) -> Self {
        let memory = memory.max(1);
        let skip = if store.is_some() {
            tail.len().saturating_sub(memory)
        } else {
            0
        };
        Self {
            session_id,
            buffer: buffer.max(16),
            memory,
            log: Mutex::new(Log {
                events: tail.into_iter().skip(skip).collect(),
                last_seq,
                subscribers: Vec::new(),
                closed: false,
                streaming: Vec::new(),
                unwatched: false,
            }),
            store,
            limits: WireLimits::default(),
            watch: OnceLock::new(),
        }
    }

    /// Events (published from now on, and those already in memory) fit `limits`.
    pub fn with_limits(mut self, limits: WireLimits) -> Self {
        self.limits = limits;
        let log = self.log.get_mut().unwrap_or_else(|e| e.into_inner());
        for event in &mut log.events {
            *event = event.clone().fitted(limits);
        }
        self
    }

    pub fn limits(&self) -> WireLimits {
        self.limits
    }

    /// Connects the hub to `session/watch`: from now on its watched events, and the
    /// changes `notify_watchers` reports, reach every watcher. Once; a second tap is
    /// ignored.
    pub fn watch_with(&self, tap: WatchTap) {
        let _ = self.watch.set(tap);
    }

    /// Tells the watchers the session changed (`updated`: created, or its info changed
    /// without an event; `deleted`: its last info, and nothing after it). Under the log's
    /// lock, so it is ordered with the session's event items and reads the info after
    /// every change before it.
    pub fn notify_watchers(&self, change: SessionChangeKind) {
        let Some(tap) = self.watch.get() else {
            return;
        };
        let mut log = self.lock();
        if log.unwatched {
            return;
        }
        tap.send(change, None);
        if change == SessionChangeKind::Deleted {
            log.unwatched = true;
        }
    }

    fn lock(&self) -> MutexGuard<'_, Log> {
        // A panic while holding this lock cannot leave the log half-written (push is the
        // last step), so a poisoned lock is still consistent.
        self.log.locked()
    }

    /// Stamps, serialises, records (if durable) and broadcasts one event; its `seq` if
    /// durable.
    pub fn publish(&self, turn_id: Option<&str>, kind: EventKind) -> Option<u64> {
        self.publish_as(turn_id, None, kind)
    }

    /// Like `publish`, for an event raised by a sub-agent.
    pub fn publish_as(
        &self,
        turn_id: Option<&str>,
        agent_id: Option<&str>,
        kind: EventKind,
    ) -> Option<u64> {
        // Lenient: a store error is logged inside, never returned.
        self.publish_inner(turn_id, agent_id, kind, false, None)
            .unwrap_or_default()
    }

    /// Appends a copy of another session's durable event, keeping its turn, agent and time
    /// (a fork's history). Watchers are not told: the copy is history, not a change.
    pub fn publish_copy(&self, event: Event) -> Option<u64> {
        let Event {
            turn_id,
            agent_id,
            time,
            kind,
            ..
        } = event;
        self.publish_inner(
            turn_id.as_deref(),
            agent_id.as_deref(),
            kind,
            false,
            Some(time),
        )
        .unwrap_or_default()
    }

    /// Publishes a durable event only once the store holds it (synced if the kind asks):
    /// on a store error nothing is broadcast or kept, and the error is returned. For what a
    /// caller acknowledges to a client (`prompt_queued`).
    /// Only durable events are stored: `kind` must be one.
    pub fn publish_stored(
        &self,
        turn_id: Option<&str>,
        kind: EventKind,
    ) -> Result<u64, StoreError> {
        debug_assert!(kind.is_durable(), "only durable events are stored");
        Ok(self
            .publish_inner(turn_id, None, kind, true, None)?
            .unwrap_or_default())
    }

    /// `strict`: a failed append publishes nothing and is returned; otherwise it is logged
    /// and the event still reaches the clients.
    fn publish_inner(
        &self,
        turn_id: Option<&str>,
        agent_id: Option<&str>,
        kind: EventKind,
        strict: bool,
        time: Option<String>,
    ) -> Result<Option<u64>, StoreError> {
        let durable = kind.is_durable();
        // A fork's copied history (`time` given) is not news to a watcher.
        let copy = time.is_some();
        let mut log = self.lock();
        let seq = durable.then(|| log.last_seq + 1);
        log.track(agent_id, &kind);
        let event = Event {
            seq,
            session_id: self.session_id.clone(),
            turn_id: turn_id.map(str::to_owned),
            agent_id: agent_id.map(str::to_owned),
            time: time.unwrap_or_else(crate::clock::now_rfc3339),
            kind,
        };
        if is_delta(&event.kind) {
            // Serialised later, once, and only if some subscriber takes it unmerged.
            let delta = SharedDelta::new(event, self.limits);
            log.subscribers.retain(|sub| sub.push_delta(&delta));
            return Ok(None);
        }
        // Elided once, here: the log, the memory tail and every subscriber share these bytes.
        let wire = WireEvent::encode(&event, self.limits);
        if let (Some(seq), Some(store)) = (seq, &self.store)
            && let Err(err) = store.append(seq, &wire.json, must_sync(&event.kind))
        {
            if strict {
                // The log refused the record (a failed write is cut back off it), so the
                // seq stays free and no client hears of an event the store does not hold.
                return Err(err);
            }
            // The event still reaches the clients; the store's trouble is the operator's.
            tracing::error!(session = %self.session_id, seq, %err, "cannot persist event");
        }
        log.subscribers.retain(|sub| sub.push(&wire));
        if !copy
            && is_watched(&event.kind)
            && !log.unwatched
            && let Some(tap) = self.watch.get().filter(|tap| tap.watched())
        {
            tap.send(SessionChangeKind::Updated, Some(&wire.json));
        }
        if let Some(seq) = seq {
            log.last_seq = seq;
            log.events.push_back(wire);
            if self.store.is_some() && log.events.len() > self.memory {
                log.events.pop_front();
            }
        }
        Ok(seq)
    }

    /// Replay after `after_seq` (none without it) plus a live queue, atomically.
    pub fn subscribe(&self, after_seq: Option<u64>) -> Subscription {
        let mut log = self.lock();
        let replay = match after_seq {
            Some(after) => self.replay(&log, after),
            None => Vec::new(),
        };
        let (tx, rx) = queue(self.buffer, self.limits);
        if log.closed {
            tx.close();
        } else {
            log.subscribers.push(tx);
        }
        Subscription {
            replay,
            last_seq: log.last_seq,
            in_progress: log.streaming.clone(),
            live: rx,
        }
    }

    /// Whether a durable event after `after` is of `kind` (its wire `type`).
    pub fn published_since(&self, after: u64, kind: &str) -> bool {
        #[derive(serde::Deserialize)]
        struct Kind<'a> {
            #[serde(rename = "type", borrow)]
            kind: std::borrow::Cow<'a, str>,
        }
        let log = self.lock();
        self.replay(&log, after)
            .iter()
            .any(|e| serde_json::from_str::<Kind<'_>>(e.json.get()).is_ok_and(|k| k.kind == kind))
    }

    /// Durable events after `after`: from the store for what memory no longer holds, then
    /// memory. Runs under the lock so the live queue continues exactly where this ends.
    fn replay(&self, log: &Log, after: u64) -> Vec<WireEvent> {
        let first_in_memory = log
            .events
            .front()
            .and_then(|e| e.seq)
            .unwrap_or(log.last_seq + 1);
        let mut replay = Vec::new();
        if after + 1 < first_in_memory
            && let Some(store) = &self.store
        {
            match store.read(after, first_in_memory) {
                Ok(older) => {
                    replay = older.into_iter().map(|e| e.fitted(self.limits)).collect();
                }
                Err(err) => {
                    tracing::error!(session = %self.session_id, %err, "cannot replay from the store");
                }
            }
        }
        replay.extend(
            log.events
                .iter()
                .filter(|e| e.seq.is_some_and(|s| s > after))
                .cloned(),
        );
        replay
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

    /// Subscribers still listening (ones that went away are forgotten here).
    pub fn subscriber_count(&self) -> usize {
        let mut log = self.lock();
        log.subscribers.retain(QueueSender::is_alive);
        log.subscribers.len()
    }

    pub fn session_id(&self) -> &str {
        &self.session_id
    }
}

#[cfg(test)]
#[path = "hub_tests.rs"]
mod tests;
