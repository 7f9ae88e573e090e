//! Benchmarks of the durable session store (run by hand, never in CI):
//! the cost of appending one record with and without fdatasync, how long loading,
//! replaying the tail of, verifying and listing sessions takes, and what restore's readers
//! of the events (decoded as `amber_proto::Event`) add to a load.
//!
//! ```sh
//! cargo bench -p amber-store --bench store
//! AMBER_BENCH_DIR=/some/disk/dir cargo bench -p amber-store --bench store   # default: $TMPDIR
//! ```
//!
//! The 10k-event session is shaped like real traffic: turns of `turn_started`,
//! `tool_call_started`, `tool_call_completed` (2 KiB output), `message_completed`
//! (500 chars), `usage`, `turn_completed`, with the matching context pushes (user,
//! assistant with a tool call, tool result, assistant reply).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use amber_proto::{
    Event, EventKind, Message, Mode, Role, SessionInfo, SessionState, StopReason, ToolCall,
    ToolStatus, Usage,
};
use amber_store::context::Context;
use amber_store::{SessionLog, SessionMeta, Store};
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use serde_json::value::RawValue;

fn meta(id: &str) -> SessionMeta {
    SessionMeta {
        info: SessionInfo {
            parent: None,
            goal: None,
            routine: None,
            session_id: id.into(),
            cwd: "/home/user/project".into(),
            mode: Mode::default(),
            model: "some-model".into(),
            title: "a benchmark session".into(),
            name: None,
            state: SessionState::Idle,
            created_at: format!("2026-12-02T10:00:00.{id}Z"),
            updated_at: "2026-12-02T10:00:00.000Z".into(),
            usage: Usage::default(),
            provider: None,
            agent: None,
            sandbox: None,
            worktree: None,
            max_budget_usd: None,
            max_tokens_total: None,
            environment: None,
        },
        system_prompt: "You are amber, a coding agent. ".repeat(40),
        agent: None,
        sandbox: None,
        mcp_servers: Vec::new(),
        executor: None,
        model_follows_config: false,
    }
}

fn encode(seq: u64, turn: u64, kind: EventKind) -> Box<RawValue> {
    serde_json::value::to_raw_value(&Event {
        seq: Some(seq),
        session_id: "0b7c3e5e-3f7a-4a57-9a55-2f1c6c1a9d10".into(),
        turn_id: Some(format!("turn_{turn:032x}")),
        agent_id: None,
        time: "2026-12-02T10:00:00.123Z".into(),
        kind,
    })
    .unwrap()
}

/// The six durable events of turn `turn`, starting at `seq`.
fn turn_events(seq: u64, turn: u64) -> Vec<Box<RawValue>> {
    let usage = Usage {
        cache_write_tokens: 0,
        cost_usd: None,
        prompt_tokens: 12_000,
        completion_tokens: 300,
        cached_tokens: 11_000,
        total_tokens: 12_300,
    };
    let kinds = vec![
        EventKind::TurnStarted {
            prompt: "Fix the failing test in src/lib.rs and explain the cause.".into(),
        },
        EventKind::ToolCallStarted {
            item_id: format!("item_{turn}_1"),
            call_id: format!("call_{turn}"),
            name: "read".into(),
            arguments: json!({"path": "src/lib.rs", "offset": 1, "limit": 200}),
        },
        EventKind::ToolCallCompleted {
            call_id: format!("call_{turn}"),
            status: ToolStatus::Ok,
            output: "     1\tfn main() { println!(\"hello\"); }\n".repeat(48),
            duration_ms: 3,
            diff: None,
        },
        EventKind::MessageCompleted {
            item_id: format!("item_{turn}_2"),
            role: Role::Assistant,
            text: "The test fails because ".repeat(22),
        },
        EventKind::usage(usage, usage),
        EventKind::TurnCompleted {
            stop_reason: StopReason::EndTurn,
            error: None,
            usage,
            output: None,
            cost_usd: None,
            session_cost_usd: None,
            confirm_usage: None,
        },
    ];
    kinds
        .into_iter()
        .zip(seq..)
        .map(|(kind, seq)| encode(seq, turn, kind))
        .collect()
}

fn turn_messages(turn: u64) -> Vec<Message> {
    vec![
        Message::user("Fix the failing test in src/lib.rs and explain the cause."),
        Message::assistant(
            "",
            vec![ToolCall {
                id: format!("call_{turn}"),
                name: "read".into(),
                arguments: r#"{"path":"src/lib.rs","offset":1,"limit":200}"#.into(),
            }],
        ),
        Message::tool(
            format!("call_{turn}"),
            format!(
                "{{\"status\":\"ok\",\"output\":{}}}",
                serde_json::to_string(&"     1\tfn main() { println!(\"hello\"); }\n".repeat(48))
                    .unwrap()
            ),
        ),
        Message::assistant("The test fails because ".repeat(22), vec![]),
    ]
}

/// Writes a session with `events` durable events (and the context that goes with them).
fn write_session(store: &Store, id: &str, events: u64) {
    let mut log = store.create(&meta(id)).unwrap();
    let mut ctx = Context::new();
    let system = Message::system(meta(id).system_prompt);
    let hash = ctx.push(system.clone());
    log.append_push(&system, hash, false, false).unwrap();
    let mut seq = 1;
    let mut turn = 0;
    while seq <= events {
        let evs = turn_events(seq, turn);
        let msgs = turn_messages(turn);
        for (i, ev) in evs.iter().enumerate() {
            if seq > events {
                break;
            }
            log.append_event(seq, ev, false).unwrap();
            seq += 1;
            if let Some(m) = msgs.get(i) {
                let hash = ctx.push(m.clone());
                log.append_push(m, hash, false, false).unwrap();
            }
        }
        turn += 1;
    }
    log.sync().unwrap();
}

fn bench_dir() -> tempfile::TempDir {
    match std::env::var_os("AMBER_BENCH_DIR") {
        Some(dir) => tempfile::tempdir_in(PathBuf::from(dir)).unwrap(),
        None => tempfile::tempdir().unwrap(),
    }
}

fn append(c: &mut Criterion) {
    let dir = bench_dir();
    let store = Store::open(dir.path()).unwrap();
    let events = turn_events(1, 0);
    let messages = turn_messages(0);
    let mut group = c.benchmark_group("store/append");
    let mut n = 0u64;
    let mut fresh = |store: &Store| -> SessionLog {
        n += 1;
        store.create(&meta(&format!("a{n}"))).unwrap()
    };

    // Appends `iters` records to a new session, rotating through one turn's events.
    let mut run = |c: &mut criterion::BenchmarkGroup<'_, _>, name: &str, sync: bool| {
        c.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut log = fresh(&store);
                let start = Instant::now();
                for seq in 1..=iters {
                    let ev = &events[(seq % 6) as usize];
                    log.append_event(seq, black_box(ev), sync).unwrap();
                }
                start.elapsed()
            });
        });
    };
    group.throughput(Throughput::Elements(1));
    run(&mut group, "event (no sync)", false);
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(10));
    run(&mut group, "event + fdatasync", true);
    group
        .sample_size(100)
        .measurement_time(Duration::from_secs(5));
    group.bench_function("push 2 KiB tool message (no sync)", |b| {
        b.iter_custom(|iters| {
            let mut log = fresh(&store);
            let start = Instant::now();
            for _ in 0..iters {
                log.append_push(black_box(&messages[2]), 42, false, false)
                    .unwrap();
            }
            start.elapsed()
        });
    });
    group.bench_function("create session", |b| {
        b.iter_batched(|| (), |()| fresh(&store), BatchSize::SmallInput);
    });
    group.finish();
    println!(
        "event record sizes (bytes of JSON): {:?}",
        events.iter().map(|e| e.get().len()).collect::<Vec<_>>()
    );
}

fn load(c: &mut Criterion) {
    let dir = bench_dir();
    let store = Store::open(dir.path()).unwrap();
    write_session(&store, "big", 10_000);
    let log_len = std::fs::metadata(store.sessions_dir().join("big").join("log"))
        .unwrap()
        .len();
    let loaded = store.load("big").unwrap();
    println!(
        "10k-event session: log {:.1} MiB, {} events, {} context messages",
        log_len as f64 / (1024.0 * 1024.0),
        loaded.events.len(),
        loaded.context.len()
    );
    drop(loaded);
    for i in 0..1000 {
        std::mem::drop(store.create(&meta(&format!("m{i:04}"))).unwrap());
    }

    let mut group = c.benchmark_group("store/read");
    group.sample_size(30);
    group.bench_function("load 10k-event session", |b| {
        b.iter(|| black_box(store.load("big").unwrap()));
    });
    group.bench_function("load + Context::restore (chain check)", |b| {
        b.iter(|| {
            let loaded = store.load("big").unwrap();
            black_box(Context::restore(loaded.context).unwrap())
        });
    });
    let loaded = store.load("big").unwrap();
    group.bench_function("recovery readers of every load", |b| {
        b.iter(|| {
            black_box((
                amber_store::interrupted_turn(&loaded),
                amber_store::queued_prompts(&loaded.events),
                amber_store::last_todos(&loaded.events),
                amber_store::last_usage_total(&loaded.events),
                amber_store::first_prompt(&loaded.events),
            ))
        });
    });
    let newest = format!("turn_{:032x}", (loaded.events.len() as u64 - 1) / 6);
    group.bench_function("crash readers (closing_events, turn_usage)", |b| {
        b.iter(|| {
            black_box((
                amber_store::closing_events(&loaded.events, &newest),
                amber_store::turn_usage(&loaded.events, &newest),
            ))
        });
    });
    drop(loaded);
    group.bench_function("events_after (last 100 of 10k)", |b| {
        b.iter(|| black_box(store.events_after("big", 9_900).unwrap()));
    });
    group.bench_function("verify 10k-event session", |b| {
        b.iter(|| black_box(store.verify("big").unwrap()));
    });
    group.bench_function("open_log of the 10k-event session", |b| {
        b.iter(|| black_box(store.open_log("big").unwrap()));
    });
    group.bench_function("list 1001 sessions", |b| {
        b.iter(|| black_box(store.list().unwrap()));
    });
    group.finish();
}

criterion_group!(benches, append, load);
criterion_main!(benches);
