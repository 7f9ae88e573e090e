//! Tests of the store: round trip, torn tails, corruption, verify, metadata, recovery.

use std::fs;
use std::io::Write;
use std::path::PathBuf;

use amber_proto::{
    Event, EventKind, Message, Mode, SessionInfo, SessionState, StopReason, ToolCall, Usage,
};
use serde_json::value::RawValue;

use super::*;
use crate::context::Context;

pub(super) fn meta(id: &str, created_at: &str) -> SessionMeta {
    SessionMeta {
        info: SessionInfo {
            parent: None,
            goal: None,
            routine: None,
            session_id: id.into(),
            cwd: "/w".into(),
            mode: Mode::default(),
            model: "m".into(),
            title: "t".into(),
            name: None,
            state: SessionState::Idle,
            created_at: created_at.into(),
            updated_at: created_at.into(),
            usage: Usage::default(),
            provider: None,
            agent: None,
            sandbox: None,
            worktree: None,
            max_budget_usd: None,
            max_tokens_total: None,
            environment: None,
        },
        system_prompt: "sys".into(),
        agent: None,
        sandbox: None,
        mcp_servers: Vec::new(),
        executor: None,
        model_follows_config: false,
    }
}

fn event(seq: u64, turn: Option<&str>, kind: EventKind) -> Box<RawValue> {
    serde_json::value::to_raw_value(&Event {
        seq: Some(seq),
        session_id: "s".into(),
        turn_id: turn.map(str::to_owned),
        agent_id: None,
        time: "2026-01-01T00:00:00.000Z".into(),
        kind,
    })
    .unwrap()
}

pub(super) fn started(seq: u64, turn: &str) -> Box<RawValue> {
    event(
        seq,
        Some(turn),
        EventKind::TurnStarted {
            prompt: "p\nq".into(),
        },
    )
}

fn completed(seq: u64, turn: &str) -> Box<RawValue> {
    event(
        seq,
        Some(turn),
        EventKind::TurnCompleted {
            stop_reason: StopReason::EndTurn,
            error: None,
            usage: Usage::default(),
            output: None,
            cost_usd: None,
            session_cost_usd: None,
            confirm_usage: None,
        },
    )
}

fn call(id: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: "read".into(),
        arguments: "{}".into(),
    }
}

pub(super) struct Fixture {
    _dir: tempfile::TempDir,
    pub(super) store: Store,
}

impl Fixture {
    pub(super) fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        Fixture { _dir: dir, store }
    }

    pub(super) fn log_path(&self, id: &str) -> PathBuf {
        self.store.sessions_dir().join(id).join("log")
    }
}

/// Writes 3 events and a context with a pop in it; returns what load must give back.
pub(super) fn populate(store: &Store, id: &str) -> (Vec<String>, Context) {
    let mut log = store.create(&meta(id, "2026-01-01")).unwrap();
    let mut ctx = Context::new();
    let mut events = Vec::new();
    let push = |log: &mut SessionLog, ctx: &mut Context, m: Message| {
        let h = ctx.push(m.clone());
        log.append_push(&m, h, false, false).unwrap();
    };
    push(&mut log, &mut ctx, Message::system("sys"));
    for (seq, json) in [(1, started(1, "t1")), (2, completed(2, "t1"))] {
        log.append_event(seq, &json, seq == 2).unwrap();
        events.push(json.get().to_owned());
    }
    push(&mut log, &mut ctx, Message::user("hi"));
    push(&mut log, &mut ctx, Message::user("scratch"));
    ctx.pop();
    log.append_pop(false).unwrap();
    push(&mut log, &mut ctx, Message::assistant("", vec![call("c1")]));
    push(&mut log, &mut ctx, Message::tool("c1", "out\n\"quoted\""));
    let json = started(3, "t2");
    log.append_event(3, &json, true).unwrap();
    events.push(json.get().to_owned());
    (events, ctx)
}

fn links(ctx: &Context) -> Vec<(Message, u64)> {
    ctx.links().map(|(m, h)| (m.clone(), h)).collect()
}

#[test]
fn round_trip() {
    let f = Fixture::new();
    let (events, ctx) = populate(&f.store, "s1");
    let loaded = f.store.load("s1").unwrap();
    assert_eq!(loaded.meta, meta("s1", "2026-01-01"));
    let got: Vec<(u64, String)> = loaded
        .events
        .iter()
        .map(|e| (e.seq, e.json.get().to_owned()))
        .collect();
    let want: Vec<(u64, String)> = (1..).zip(events).collect();
    assert_eq!(got, want);
    assert_eq!(loaded.context, links(&ctx));
    assert!(!loaded.repaired_tail);

    // Appending after load continues the same log; clear empties the context.
    let mut log = f.store.open_log("s1").unwrap();
    log.append_clear(false).unwrap();
    log.append_event(4, &started(4, "t3"), false).unwrap();
    drop(log);
    let loaded = f.store.load("s1").unwrap();
    assert!(loaded.context.is_empty());
    assert_eq!(loaded.events.len(), 4);
}

#[test]
fn the_log_has_one_writer_and_seqs_rise_by_one() {
    let f = Fixture::new();
    let mut log = f.store.create(&meta("s", "1")).unwrap();
    assert!(matches!(f.store.open_log("s"), Err(StoreError::Locked(_))));
    let err = log.append_event(2, &started(2, "t"), false).unwrap_err();
    assert!(matches!(
        err,
        StoreError::OutOfOrder {
            expected: 1,
            got: 2,
            ..
        }
    ));
    log.append_event(1, &started(1, "t"), false).unwrap();
    drop(log);
    assert!(f.store.open_log("s").is_ok());
    assert!(matches!(
        f.store.create(&meta("s", "1")),
        Err(StoreError::AlreadyExists(_))
    ));
}

#[test]
fn a_torn_last_record_is_dropped_at_every_cut() {
    let f = Fixture::new();
    populate(&f.store, "s");
    let path = f.log_path("s");
    let full = fs::read(&path).unwrap();
    let last_start = full[..full.len() - 1]
        .iter()
        .rposition(|&b| b == b'\n')
        .unwrap()
        + 1;
    let expected = f.store.load("s").unwrap();
    for cut in last_start..full.len() {
        fs::write(&path, &full[..cut]).unwrap();
        let loaded = f.store.load("s").unwrap();
        assert_eq!(loaded.events.len(), 2, "cut at {cut}");
        assert_eq!(loaded.context, expected.context, "cut at {cut}");
        assert_eq!(loaded.repaired_tail, cut > last_start, "cut at {cut}");
        assert_eq!(
            fs::read(&path).unwrap(),
            &full[..last_start],
            "cut at {cut}"
        );
        // Appending after the repair continues cleanly.
        let mut log = f.store.open_log("s").unwrap();
        log.append_event(3, &started(3, "t"), false).unwrap();
        drop(log);
        assert_eq!(f.store.load("s").unwrap().events.len(), 3);
    }
}

#[test]
fn garbage_tails_are_dropped() {
    let f = Fixture::new();
    populate(&f.store, "s");
    let path = f.log_path("s");
    let full = fs::read(&path).unwrap();
    let tails: [&[u8]; 5] = [
        b"deadbeef {\"k\":\"pop\"}\n",
        b"not a record\n",
        b"\0\0\0\0\0\0\0\0\0\0\0\0",
        b"\n",
        b"0000",
    ];
    for tail in tails {
        fs::write(&path, [&full[..], tail].concat()).unwrap();
        let loaded = f.store.load("s").unwrap();
        assert!(loaded.repaired_tail);
        assert_eq!(loaded.events.len(), 3);
        assert_eq!(fs::read(&path).unwrap(), full);
    }
    // A record whose CRC holds but whose JSON does not parse: dropped at the tail only.
    let payload = b"{\"k\":\"event\",\"seq\":4,\"event\":{oops}}";
    let crc = format!("{:08x} ", crc32fast::hash(payload));
    let unreadable = [crc.as_bytes(), payload, b"\n"].concat();
    fs::write(&path, [&full[..], &unreadable[..]].concat()).unwrap();
    assert!(f.store.load("s").unwrap().repaired_tail);
    assert_eq!(fs::read(&path).unwrap(), full);
    fs::write(
        &path,
        [&full[..], &unreadable[..], &unreadable[..]].concat(),
    )
    .unwrap();
    assert!(matches!(
        f.store.load("s"),
        Err(StoreError::Corrupt { record: 10, .. })
    ));
    fs::write(&path, &full).unwrap();
    // A garbage tail with a newline that nobody loaded is cut by open_log too.
    fs::write(&path, [&full[..], b"deadbeef {}\n"].concat()).unwrap();
    let mut log = f.store.open_log("s").unwrap();
    log.append_event(4, &started(4, "t"), true).unwrap();
    drop(log);
    assert_eq!(f.store.load("s").unwrap().events.len(), 4);
}

#[test]
fn corruption_in_the_middle_names_the_record() {
    let f = Fixture::new();
    populate(&f.store, "s");
    let path = f.log_path("s");
    let full = fs::read(&path).unwrap();
    // Record 3 is the second event; flip a byte of its payload.
    let starts: Vec<usize> = std::iter::once(0)
        .chain(
            full.iter()
                .enumerate()
                .filter(|(_, b)| **b == b'\n')
                .map(|(i, _)| i + 1),
        )
        .collect();
    let mut bad = full.clone();
    bad[starts[2] + 20] ^= 0x20;
    fs::write(&path, &bad).unwrap();
    match f.store.load("s") {
        Err(StoreError::Corrupt { record, reason, .. }) => {
            assert_eq!(record, 3);
            assert!(reason.contains("CRC mismatch"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    // Nothing was cut.
    assert_eq!(fs::read(&path).unwrap(), bad);
    assert!(matches!(
        f.store.events_after("s", 0),
        Err(StoreError::Corrupt { record: 3, .. })
    ));
}

#[test]
fn seq_gaps_duplicates_and_bad_pops_are_corruption() {
    let f = Fixture::new();
    let mut log = f.store.create(&meta("s", "1")).unwrap();
    log.append_event(1, &started(1, "t"), false).unwrap();
    drop(log);
    let path = f.log_path("s");
    let base = fs::read(&path).unwrap();
    let mut line = Vec::new();
    for (seq, record) in [(3, 2), (1, 2)] {
        line.clear();
        record::encode_event(&mut line, seq, &started(seq, "t"));
        fs::write(&path, [&base[..], &line[..]].concat()).unwrap();
        match f.store.load("s") {
            Err(StoreError::Corrupt {
                record: r, reason, ..
            }) => {
                assert_eq!(r, record);
                assert!(reason.contains(&format!("seq {seq}")), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }
    line.clear();
    record::encode_pop(&mut line);
    fs::write(&path, [&base[..], &line[..]].concat()).unwrap();
    assert!(matches!(
        f.store.load("s"),
        Err(StoreError::Corrupt { record: 2, .. })
    ));
}

#[test]
fn verify_finds_a_tampered_message_at_its_index() {
    let f = Fixture::new();
    populate(&f.store, "s");
    let report = f.store.verify("s").unwrap();
    assert_eq!(
        report,
        VerifyReport {
            messages: 4,
            events: 3,
            first_broken: None,
            corrupt: None,
            torn_tail: false,
        }
    );
    // Rewrite the "hi" push (context index 1) with other content and a valid CRC.
    let path = f.log_path("s");
    let text = fs::read_to_string(&path).unwrap();
    let mut out = Vec::new();
    for l in text.lines() {
        if l.contains("\"content\":\"hi\"") {
            let hash = l.split("\"hash\":\"").nth(1).unwrap()[..16].to_owned();
            let hash = u64::from_str_radix(&hash, 16).unwrap();
            record::encode_push(&mut out, &Message::user("HI"), hash, None).unwrap();
        } else {
            out.extend_from_slice(l.as_bytes());
            out.push(b'\n');
        }
    }
    fs::write(&path, &out).unwrap();
    let broken = f.store.verify("s").unwrap().first_broken.unwrap();
    assert_eq!(broken.index, 1);
    assert_ne!(broken.stored, broken.computed);
    // The torn tail is reported but left alone.
    fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(b"0000")
        .unwrap();
    assert!(f.store.verify("s").unwrap().torn_tail);
    assert!(fs::read(&path).unwrap().ends_with(b"0000"));
}

#[test]
fn a_sessions_agent_round_trips_and_older_meta_has_none() {
    let f = Fixture::new();
    let mut m = meta("s", "1");
    m.info.agent = Some("scout".into());
    m.agent = Some(SessionAgent {
        name: "scout".into(),
        tools: Some(vec!["read".into(), "mcp__*".into()]),
        max_iterations: Some(3),
    });
    drop(f.store.create(&m).unwrap());
    assert_eq!(f.store.load("s").unwrap().meta, m);
    let path = f.store.sessions_dir().join("s").join("meta.json");
    let mut raw: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    assert_eq!(raw["agent"]["maxIterations"], 3, "{raw}");
    // A file written before agents existed reads as a session without one.
    raw.as_object_mut().unwrap().remove("agent");
    raw["info"].as_object_mut().unwrap().remove("agent");
    fs::write(&path, serde_json::to_vec(&raw).unwrap()).unwrap();
    let old = f.store.load("s").unwrap().meta;
    assert_eq!((old.agent, old.info.agent), (None, None));
}

#[test]
fn a_sessions_name_round_trips_and_older_meta_has_none() {
    let f = Fixture::new();
    let mut m = meta("s", "1");
    m.info.name = Some("fix-auth".into());
    drop(f.store.create(&m).unwrap());
    assert_eq!(f.store.load("s").unwrap().meta, m);
    let path = f.store.sessions_dir().join("s").join("meta.json");
    let mut raw: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    assert_eq!(raw["info"]["name"], "fix-auth", "{raw}");
    // A file written before names existed reads as an unnamed session.
    raw["info"].as_object_mut().unwrap().remove("name");
    fs::write(&path, serde_json::to_vec(&raw).unwrap()).unwrap();
    assert_eq!(f.store.load("s").unwrap().meta.info.name, None);
    assert_eq!(f.store.list().unwrap()[0].info.name, None);
}

#[test]
fn meta_is_replaced_atomically() {
    let f = Fixture::new();
    drop(f.store.create(&meta("s", "1")).unwrap());
    let mut m = meta("s", "1");
    m.info.title = "new title".into();
    m.info.usage.total_tokens = 42;
    f.store.save_meta(&m).unwrap();
    assert_eq!(f.store.load("s").unwrap().meta, m);
    let dir = f.store.sessions_dir().join("s");
    let names: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "no temp file left: {names:?}");
    let raw: serde_json::Value =
        serde_json::from_slice(&fs::read(dir.join("meta.json")).unwrap()).unwrap();
    assert_eq!(raw["version"], 1);
    assert_eq!(raw["systemPrompt"], "sys");
    assert!(matches!(
        f.store.save_meta(&meta("nope", "1")),
        Err(StoreError::NotFound(_))
    ));
}

#[test]
fn a_new_session_owes_its_fsyncs_until_a_job_or_its_first_sync_settles_them() {
    let f = Fixture::new();
    // Readable at once, before anything was fsync'd.
    let mut log = f.store.create(&meta("s", "1")).unwrap();
    assert_eq!(f.store.list().unwrap().len(), 1);
    assert_eq!(f.store.load("s").unwrap().meta, meta("s", "1"));
    let owed = log.creation_sync();
    assert!(!owed.is_settled());
    // The first sync does them (the background job found nothing to do, or never ran).
    log.append_event(1, &started(1, "t"), true).unwrap();
    assert!(owed.is_settled());
    owed.settle().unwrap();

    // The job first: the log's sync then has nothing owed; the handle is shared.
    let mut log = f.store.create(&meta("j", "1")).unwrap();
    log.creation_sync().settle().unwrap();
    assert!(log.creation_sync().is_settled());
    log.sync().unwrap();

    // A session deleted before its job ran owes nothing.
    let log = f.store.create(&meta("d", "1")).unwrap();
    let owed = log.creation_sync();
    drop(log);
    f.store.delete("d").unwrap();
    owed.settle().unwrap();
    assert!(owed.is_settled());
}

#[test]
fn list_reads_metadata_newest_first_and_skips_broken_ones() {
    let f = Fixture::new();
    for (id, at) in [
        ("a", "2026-01-01"),
        ("b", "2026-03-01"),
        ("c", "2026-02-01"),
    ] {
        drop(f.store.create(&meta(id, at)).unwrap());
    }
    fs::write(f.store.sessions_dir().join("c").join("meta.json"), b"{oops").unwrap();
    fs::create_dir(f.store.sessions_dir().join("empty")).unwrap();
    let ids: Vec<String> = f
        .store
        .list()
        .unwrap()
        .into_iter()
        .map(|m| m.info.session_id)
        .collect();
    assert_eq!(ids, ["b", "a"]);
    assert!(matches!(f.store.load("c"), Err(StoreError::BadMeta { .. })));
}

#[test]
fn delete_removes_the_session() {
    let f = Fixture::new();
    populate(&f.store, "s");
    f.store.delete("s").unwrap();
    assert!(matches!(f.store.load("s"), Err(StoreError::NotFound(_))));
    assert!(matches!(f.store.delete("s"), Err(StoreError::NotFound(_))));
    assert!(f.store.list().unwrap().is_empty());
    assert_eq!(fs::read_dir(f.store.sessions_dir()).unwrap().count(), 0);
    // Leftovers of an interrupted delete are swept on open.
    fs::create_dir(f.store.sessions_dir().join(".deleted-x.1.0")).unwrap();
    let again = Store::open(f.store.sessions_dir().parent().unwrap()).unwrap();
    assert_eq!(fs::read_dir(again.sessions_dir()).unwrap().count(), 0);
}

#[test]
fn ids_cannot_escape_the_store() {
    let f = Fixture::new();
    for id in ["", "..", "../x", "a/b", ".hidden"] {
        assert!(matches!(
            f.store.create(&meta(id, "1")),
            Err(StoreError::InvalidId(_))
        ));
        assert!(matches!(f.store.load(id), Err(StoreError::NotFound(_))));
    }
}

#[test]
fn events_after_reads_the_tail_from_the_log() {
    let f = Fixture::new();
    let (events, _) = populate(&f.store, "s");
    let tail = f.store.events_after("s", 1).unwrap();
    let got: Vec<(u64, &str)> = tail.iter().map(|e| (e.seq, e.json.get())).collect();
    assert_eq!(got, [(2, events[1].as_str()), (3, events[2].as_str())]);
    assert!(f.store.events_after("s", 3).unwrap().is_empty());
    // While a writer has an append in flight (looks torn), readers neither fail nor cut.
    let log = f.store.open_log("s").unwrap();
    let path = f.log_path("s");
    let before = fs::read(&path).unwrap();
    fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(b"12345678 {\"k\"")
        .unwrap();
    assert_eq!(f.store.events_after("s", 0).unwrap().len(), 3);
    assert!(f.store.load("s").unwrap().repaired_tail);
    assert!(fs::read(&path).unwrap().len() > before.len());
    drop(log);
}

#[test]
fn interrupted_turn_is_the_open_one() {
    let f = Fixture::new();
    populate(&f.store, "s");
    let loaded = f.store.load("s").unwrap();
    assert_eq!(interrupted_turn(&loaded).as_deref(), Some("t2"));
    let mut log = f.store.open_log("s").unwrap();
    log.append_event(4, &completed(4, "t2"), false).unwrap();
    drop(log);
    assert_eq!(interrupted_turn(&f.store.load("s").unwrap()), None);
    // A sub-agent's events (tagged `agent`) do not open or close the session's turn.
    let mut log = f.store.open_log("s").unwrap();
    let mut sub = serde_json::from_str::<serde_json::Value>(started(5, "t3").get()).unwrap();
    sub["agent"] = "a1".into();
    let sub = serde_json::value::to_raw_value(&sub).unwrap();
    log.append_event(5, &sub, false).unwrap();
    drop(log);
    assert_eq!(interrupted_turn(&f.store.load("s").unwrap()), None);
    drop(f.store.create(&meta("e", "1")).unwrap());
    assert_eq!(interrupted_turn(&f.store.load("e").unwrap()), None);
}

#[test]
fn consistent_context_cuts_half_tool_call_pairs() {
    let l = |ms: Vec<Message>| -> Vec<(Message, u64)> { ms.into_iter().map(|m| (m, 0)).collect() };
    let two = || Message::assistant("", vec![call("a"), call("b")]);
    let base = vec![Message::system("s"), Message::user("u")];
    let with = |extra: Vec<Message>| l([base.clone(), extra].concat());

    assert_eq!(consistent_context(&with(vec![])), 2);
    // Complete pair, answers in any order, then more.
    let ok = with(vec![
        two(),
        Message::tool("b", "x"),
        Message::tool("a", "y"),
        Message::assistant("done", vec![]),
    ]);
    assert_eq!(consistent_context(&ok), 6);
    // Trailing incomplete pairs are cut at the assistant message.
    assert_eq!(consistent_context(&with(vec![two()])), 2);
    assert_eq!(
        consistent_context(&with(vec![two(), Message::tool("a", "y")])),
        2
    );
    // An answer to the wrong call, a duplicate answer, something between.
    assert_eq!(
        consistent_context(&with(vec![
            two(),
            Message::tool("a", "y"),
            Message::tool("c", "z")
        ])),
        2
    );
    assert_eq!(
        consistent_context(&with(vec![
            two(),
            Message::tool("a", "y"),
            Message::tool("a", "z")
        ])),
        2
    );
    assert_eq!(
        consistent_context(&with(vec![
            two(),
            Message::user("u"),
            Message::tool("a", "y")
        ])),
        2
    );
    // An orphan tool message.
    assert_eq!(consistent_context(&with(vec![Message::tool("a", "y")])), 2);
}

/// An event of turn `turn`, raised by sub-agent `agent` when set (for the recovery
/// scanners' tests).
pub(super) fn turn_event(turn: &str, agent: Option<&str>, kind: EventKind) -> Event {
    Event {
        seq: None,
        session_id: "s".into(),
        turn_id: Some(turn.into()),
        agent_id: agent.map(str::to_owned),
        time: "2026-01-01T00:00:00.000Z".into(),
        kind,
    }
}

/// A log of `events`, numbered from seq 1 and encoded as the hub encodes them.
pub(super) fn log(events: Vec<Event>) -> Vec<StoredEvent> {
    (1..)
        .zip(events)
        .map(|(seq, event)| StoredEvent {
            seq,
            json: serde_json::value::to_raw_value(&Event {
                seq: Some(seq),
                ..event
            })
            .unwrap(),
        })
        .collect()
}

#[test]
fn a_sessions_sandbox_request_round_trips_and_older_meta_has_none() {
    let f = Fixture::new();
    let mut m = meta("s", "1");
    m.sandbox = Some(amber_proto::SandboxRequest {
        mode: Some(amber_proto::SandboxMode::Off),
        network: Some(amber_proto::NetworkMode::Allowlist),
        allow_domains: vec!["preset:npm".into()],
        deny_domains: vec!["evil.example".into()],
    });
    drop(f.store.create(&m).unwrap());
    assert_eq!(f.store.load("s").unwrap().meta, m);
    let path = f.store.sessions_dir().join("s").join("meta.json");
    let mut raw: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    assert_eq!(
        raw["sandbox"],
        serde_json::json!({"mode": "off", "network": "allowlist",
                           "allowDomains": ["preset:npm"], "denyDomains": ["evil.example"]}),
        "{raw}"
    );
    // A request from before the allowlist, `network` a boolean, reads as off or on.
    let older: amber_proto::SandboxRequest =
        serde_json::from_value(serde_json::json!({"network": true})).unwrap();
    assert_eq!(older.network, Some(amber_proto::NetworkMode::On));
    // A file written before the sandbox reads as a session that asked for nothing.
    raw.as_object_mut().unwrap().remove("sandbox");
    fs::write(&path, serde_json::to_vec(&raw).unwrap()).unwrap();
    assert_eq!(f.store.load("s").unwrap().meta.sandbox, None);
}
