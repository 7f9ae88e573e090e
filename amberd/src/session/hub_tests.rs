//! Tests of `hub.rs`: seqs, replay without gap or duplicate (from memory and the store),
//! slow subscribers, what is synced, and late subscribers of a streaming reply.

use super::*;
use crate::clock::now_rfc3339;
use crate::elide::WireLimits;
use amber_store::StoreError;

/// Durable events the tests' hubs keep in memory beside their store.
const MEMORY: usize = 64;

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
    assert_eq!(hub.publish(Some("t"), started("a")), Some(1));
    assert_eq!(hub.publish(Some("t"), text("x")), None);
    assert_eq!(hub.publish(Some("t"), started("b")), Some(2));
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

struct MemoryStore(Mutex<Vec<(u64, String, bool)>>);

impl EventStore for MemoryStore {
    fn append(&self, seq: u64, json: &RawValue, sync: bool) -> Result<(), StoreError> {
        self.0
            .lock()
            .unwrap()
            .push((seq, json.get().to_owned(), sync));
        Ok(())
    }

    fn read(&self, after: u64, before: u64) -> Result<Vec<WireEvent>, StoreError> {
        let stored = self.0.lock().unwrap();
        Ok(stored
            .iter()
            .filter(|(seq, _, _)| *seq > after && *seq < before)
            .map(|(seq, json, _)| WireEvent {
                seq: Some(*seq),
                json: Arc::from(RawValue::from_string(json.clone()).unwrap()),
            })
            .collect())
    }
}

#[test]
fn replay_reaches_past_memory_into_the_store_without_gap_or_duplicate() {
    let store = Arc::new(MemoryStore(Mutex::new(Vec::new())));
    let hub = EventHub::restored("s".into(), 16, MEMORY, 0, Vec::new(), Some(store.clone()));
    let total = MEMORY as u64 + 100;
    for i in 0..total {
        hub.publish(None, started(&i.to_string()));
        hub.publish(None, text("live deltas are never stored"));
    }
    let stored = store.0.lock().unwrap().len() as u64;
    assert_eq!(stored, total);
    let sub = hub.subscribe(Some(5));
    let seqs: Vec<u64> = sub.replay.iter().map(|e| e.seq.unwrap()).collect();
    assert_eq!(seqs, (6..=total).collect::<Vec<_>>());
    assert_eq!(sub.last_seq, total);
}

#[test]
fn a_restored_hub_keeps_as_many_events_in_memory_as_it_is_told() {
    // A store that lost everything: what a replay still serves came from memory.
    let tail = |n: u64| -> Vec<WireEvent> {
        (1..=n)
            .map(|seq| WireEvent {
                seq: Some(seq),
                json: Arc::from(RawValue::from_string(format!("{{\"seq\":{seq}}}")).unwrap()),
            })
            .collect()
    };
    // (memory, the oldest seq still served) for a restored tail of 4500 events.
    for (memory, oldest) in [(5000, 1), (10, 4491)] {
        let hub = EventHub::restored(
            "s".into(),
            16,
            memory,
            4500,
            tail(4500),
            Some(Arc::new(FullStore)),
        );
        let seqs: Vec<u64> = hub
            .subscribe(Some(0))
            .replay
            .iter()
            .map(|e| e.seq.unwrap())
            .collect();
        assert!(
            seqs.iter().copied().eq(oldest..=4500),
            "memory {memory}: served {} events, from seq {:?}",
            seqs.len(),
            seqs.first()
        );
    }
}

#[test]
fn only_events_that_matter_are_synced() {
    let store = Arc::new(MemoryStore(Mutex::new(Vec::new())));
    let hub = EventHub::restored("s".into(), 16, MEMORY, 41, Vec::new(), Some(store.clone()));
    hub.publish(None, started("x"));
    hub.publish(
        None,
        EventKind::TurnCompleted {
            stop_reason: amber_proto::StopReason::EndTurn,
            error: None,
            usage: amber_proto::Usage::default(),
            output: None,
            cost_usd: None,
            session_cost_usd: None,
            confirm_usage: None,
        },
    );
    let stored = store.0.lock().unwrap().clone();
    let flags: Vec<(u64, bool)> = stored.iter().map(|(s, _, sync)| (*s, *sync)).collect();
    assert_eq!(flags, vec![(42, false), (43, true)]);
}

#[test]
fn a_late_subscriber_gets_the_streaming_text_it_missed_and_live_continues_there() {
    let hub = EventHub::new("s".into(), 16);
    hub.publish(Some("t"), started("a"));
    hub.publish(Some("t"), text("Hel"));
    hub.publish(
        Some("t"),
        EventKind::ReasoningDelta {
            item_id: "i".into(),
            delta: "hmm".into(),
        },
    );
    hub.publish_as(
        Some("t"),
        Some("agent-1"),
        text("sub-agent text is not tracked"),
    );
    hub.publish(Some("t"), text("lo"));
    let mut sub = hub.subscribe(Some(1));
    assert_eq!(
        sub.in_progress,
        vec![
            InProgressItem {
                item_id: "i".into(),
                kind: StreamKind::Message,
                text: "Hello".into()
            },
            InProgressItem {
                item_id: "i".into(),
                kind: StreamKind::Reasoning,
                text: "hmm".into()
            },
        ]
    );
    hub.publish(Some("t"), text(", world"));
    let next = sub.live.try_recv().unwrap().unwrap();
    assert!(next.json.get().contains(", world"), "{}", next.json.get());
    hub.publish(
        Some("t"),
        EventKind::MessageCompleted {
            item_id: "i".into(),
            role: amber_proto::Role::Assistant,
            text: "Hello, world".into(),
        },
    );
    assert!(hub.subscribe(None).in_progress.is_empty());
    hub.publish(Some("t"), text("next"));
    hub.publish(
        Some("t"),
        EventKind::TurnCompleted {
            stop_reason: amber_proto::StopReason::Cancelled,
            error: None,
            usage: Default::default(),
            output: None,
            cost_usd: None,
            session_cost_usd: None,
            confirm_usage: None,
        },
    );
    assert!(hub.subscribe(None).in_progress.is_empty());
}

fn write_call(content_bytes: usize) -> EventKind {
    EventKind::ToolCallStarted {
        item_id: "i".into(),
        call_id: "c".into(),
        name: "write".into(),
        arguments: serde_json::json!({"path": "big.txt", "content": "x".repeat(content_bytes)}),
    }
}

/// The elided `content` of a `write` call's JSON, with the full length its marker names.
fn elided_content(json: &str) -> (usize, usize) {
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    let content = v["arguments"]["content"].as_str().unwrap();
    let (_, full) = crate::elide::parse_marker(content).unwrap_or_else(|| panic!("no marker"));
    (content.len(), full)
}

#[test]
fn an_oversized_event_is_elided_once_for_the_log_memory_and_every_subscriber() {
    let limits = WireLimits::new(1024, 1024 * 1024);
    let store = Arc::new(MemoryStore(Mutex::new(Vec::new())));
    let hub = EventHub::restored("s".into(), 16, MEMORY, 0, Vec::new(), Some(store.clone()))
        .with_limits(limits);
    let mut live = hub.subscribe(None);
    hub.publish(Some("t"), write_call(100_000));
    let sent = live.live.try_recv().unwrap().unwrap();
    let (len, full) = elided_content(sent.json.get());
    assert!(len <= 1024, "{len}");
    assert_eq!(full, 100_000);
    assert_eq!(
        store.0.lock().unwrap()[0].1,
        sent.json.get(),
        "the log holds what clients see"
    );
    let replayed = hub.subscribe(Some(0)).replay;
    assert_eq!(replayed[0].json.get(), sent.json.get());
}

#[test]
fn events_of_a_log_written_before_elision_are_elided_on_replay() {
    let limits = WireLimits::new(1024, 1024 * 1024);
    let full = |seq: u64| {
        let wire = WireEvent::encode(
            &Event {
                seq: Some(seq),
                session_id: "s".into(),
                turn_id: None,
                agent_id: None,
                time: now_rfc3339(),
                kind: write_call(50_000),
            },
            WireLimits::new(1024 * 1024, 16 * 1024 * 1024),
        );
        assert!(
            wire.json.get().len() > 50_000,
            "stored whole, as older daemons did"
        );
        wire
    };
    let store = Arc::new(MemoryStore(Mutex::new(vec![(
        1,
        full(1).json.get().to_owned(),
        false,
    )])));
    // Seq 1 only in the store, seq 2 in the restored memory tail.
    let hub = EventHub::restored("s".into(), 16, MEMORY, 2, vec![full(2)], Some(store))
        .with_limits(limits);
    let replay = hub.subscribe(Some(0)).replay;
    let seqs: Vec<u64> = replay.iter().map(|e| e.seq.unwrap()).collect();
    assert_eq!(seqs, vec![1, 2]);
    for event in &replay {
        let (len, full) = elided_content(event.json.get());
        assert!(
            len <= 1024 && full == 50_000,
            "seq {:?}: {len}, {full}",
            event.seq
        );
    }
}

/// Refuses every append, as a full disk does.
struct FullStore;

impl EventStore for FullStore {
    fn append(&self, _seq: u64, _json: &RawValue, _sync: bool) -> Result<(), StoreError> {
        Err(StoreError::Io {
            path: "log".into(),
            source: std::io::Error::from(std::io::ErrorKind::StorageFull),
        })
    }

    fn read(&self, _after: u64, _before: u64) -> Result<Vec<WireEvent>, StoreError> {
        Ok(Vec::new())
    }
}

fn queued(prompt: &str) -> EventKind {
    EventKind::PromptQueued {
        prompt: prompt.into(),
    }
}

#[test]
fn a_queued_prompt_is_synced_and_published_only_once_stored() {
    let store = Arc::new(MemoryStore(Mutex::new(Vec::new())));
    let hub = EventHub::restored("s".into(), 16, MEMORY, 7, Vec::new(), Some(store.clone()));
    let mut sub = hub.subscribe(None);
    assert_eq!(hub.publish_stored(Some("t"), queued("go")).ok(), Some(8));
    assert_eq!(store.0.lock().unwrap()[0].0, 8);
    assert!(store.0.lock().unwrap()[0].2, "prompt_queued is synced");
    assert_eq!(sub.live.try_recv().unwrap().unwrap().seq, Some(8));

    // A store that refuses it: no client hears of it and its seq stays free.
    let hub = EventHub::restored(
        "s".into(),
        16,
        MEMORY,
        7,
        Vec::new(),
        Some(Arc::new(FullStore)),
    );
    let mut sub = hub.subscribe(None);
    assert!(hub.publish_stored(Some("t"), queued("go")).is_err());
    assert!(sub.live.try_recv().is_none());
    assert_eq!(hub.last_seq(), 7);
    assert!(hub.subscribe(Some(0)).replay.is_empty());
    // Ordinary events stay lenient: they still reach the clients.
    assert_eq!(hub.publish(Some("t"), started("a")), Some(8));
    assert_eq!(sub.live.try_recv().unwrap().unwrap().seq, Some(8));
}
