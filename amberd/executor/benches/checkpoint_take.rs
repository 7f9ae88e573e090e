//! Checkpoints through the real executor (run by hand, never in CI): `amber-exec --stdio`
//! over its pipes, a workspace of 100,000 files. Each measured take is what amberd does for a
//! remote session's checkpoint: `checkpoint/take` (as the changes since the last one it
//! holds), then `checkpoint/read` of the content it lacks (the changed files).
//!
//! ```sh
//! cargo bench -p amber-executor --bench checkpoint_take
//! AMBER_BENCH_DIR=/some/disk/dir cargo bench -p amber-executor --bench checkpoint_take
//! ```
//!
//! Printed before criterion's runs: the cold first take (no cache: every file read and
//! hashed) and the first take of a new executor process once the cache is warm (the
//! persistent stat cache: a new session, or an executor started again). Criterion measures
//! the incremental take with 10 files changed since the last (the watched tree), and the same
//! on a local session's path (amberd's watched tree, content stored, no pipe).

#![allow(clippy::unwrap_used, clippy::expect_used)]
// A bench starts the real executor binary, as a client would.
#![allow(clippy::disallowed_methods)]

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};

#[path = "../../store/benches/support/monorepo_tree.rs"]
mod tree;

use tree::{CHANGED, bench_dir, change, generate};

/// One executor, driven over its pipes.
struct Executor {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next: u64,
    base: Option<u64>,
}

impl Executor {
    fn start(state: &Path, cache: &Path, workspace: &Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_amber-exec"))
            .args(["--stdio", "--linger", "5", "--state-dir"])
            .arg(state)
            .arg("--cache-dir")
            .arg(cache)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut executor = Self {
            child,
            stdin,
            stdout,
            next: 1,
            base: None,
        };
        executor.call(
            "initialize",
            json!({"protocolVersion": 1, "client": "bench"}),
        );
        executor.call(
            "session/open",
            json!({"session": "bench", "workspace": workspace,
                   "sandbox": {"mode": "read-only", "network": false}}),
        );
        executor
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
        let mut text = String::new();
        loop {
            text.clear();
            assert!(
                self.stdout.read_line(&mut text).unwrap() > 0,
                "the executor hung up"
            );
            let answer: Value = serde_json::from_str(&text).unwrap();
            if answer["id"] == json!(id) {
                assert!(answer["error"].is_null(), "{method}: {answer}");
                return answer["result"].clone();
            }
        }
    }

    /// A checkpoint as amberd takes one: the snapshot, then the changed files' content.
    /// Returns how many entries the answer carried.
    fn checkpoint(&mut self) -> usize {
        let mut params = json!({"session": "bench", "maxFileBytes": 8_388_608});
        if let Some(base) = self.base {
            params["base"] = json!(base);
        }
        let taken = self.call("checkpoint/take", params);
        self.base = taken["take"].as_u64();
        let mut changed = taken["snapshot"]["changed"].as_array().unwrap().clone();
        // A large snapshot comes in parts.
        let mut rest = taken["rest"].as_u64().unwrap_or(0);
        while rest > 0 {
            let part = self.call(
                "checkpoint/rest",
                json!({"session": "bench", "take": self.base}),
            );
            changed.extend(part["changed"].as_array().unwrap().iter().cloned());
            rest = part["rest"].as_u64().unwrap();
        }
        // A whole snapshot's content is mostly in amberd's store already; a delta's is new.
        if taken["snapshot"]["full"] == json!(false) {
            let wanted: Vec<Value> = changed
                .iter()
                .map(|e| json!({"path": e["path"], "hash": e["hash"]}))
                .collect();
            let read = self.call(
                "checkpoint/read",
                json!({"session": "bench", "blobs": wanted}),
            );
            assert_eq!(read["blobs"].as_array().unwrap().len(), changed.len());
        }
        changed.len()
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        let _ = self.call_quiet();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Executor {
    fn call_quiet(&mut self) -> std::io::Result<()> {
        let line = json!({"jsonrpc": "2.0", "id": 0, "method": "session/close",
                          "params": {"session": "bench"}});
        writeln!(self.stdin, "{line}")
    }
}

fn checkpoint_take(c: &mut Criterion) {
    let ws = bench_dir();
    let dir = bench_dir();
    generate(ws.path());
    let cache = dir.path().join("cache");
    let state = |n: u32| {
        let s = dir.path().join(format!("state{n}"));
        fs::create_dir_all(&s).unwrap();
        fs::set_permissions(&s, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        s
    };
    {
        let mut cold = Executor::start(&state(0), &cache, ws.path());
        let start = Instant::now();
        let entries = cold.checkpoint();
        eprintln!(
            "executor first take, cold (no cache): {entries} entries, {:?}",
            start.elapsed()
        );
    }
    // Executors exit when their session closes; each new one finds the cache warm.
    for n in 1..=3 {
        std::thread::sleep(Duration::from_millis(200));
        let mut warm = Executor::start(&state(n), &cache, ws.path());
        let start = Instant::now();
        let entries = warm.checkpoint();
        eprintln!(
            "executor first take of a new executor, cache warm: {entries} entries, {:?}",
            start.elapsed()
        );
    }
    let mut executor = Executor::start(&state(9), &cache, ws.path());
    executor.checkpoint();
    let mut group = c.benchmark_group("executor_checkpoint_100k");
    group
        .sample_size(50)
        .measurement_time(Duration::from_secs(10));
    let mut salt = 0u64;
    group.bench_function("incremental_10_changed", |b| {
        b.iter_batched(
            || {
                salt += 1;
                change(ws.path(), salt);
            },
            |()| assert_eq!(executor.checkpoint(), CHANGED),
            BatchSize::PerIteration,
        );
    });
    drop(executor);

    // A local session's path: amberd's own watched tree, content into its blob store.
    let store = amber_store::BlobStore::open(dir.path().join("objects")).unwrap();
    let mut tree = amber_executor::watched::WatchedTree::new();
    let max = amber_store::DEFAULT_MAX_FILE_BYTES;
    let mut first = tree.take(ws.path(), None, &store, max, &[]).unwrap();
    first.save(&store).unwrap();
    let mut latest = std::sync::Arc::new(first);
    tree.set_latest(std::sync::Arc::clone(&latest));
    group.bench_function("local_incremental_10_changed_watched", |b| {
        b.iter_batched(
            || {
                salt += 1;
                change(ws.path(), salt);
            },
            |()| {
                let mut snap = tree
                    .take(ws.path(), Some(&latest), &store, max, &[])
                    .unwrap();
                snap.save_after(Some(&latest), &store).unwrap();
                latest = std::sync::Arc::new(snap);
                tree.set_latest(std::sync::Arc::clone(&latest));
            },
            BatchSize::PerIteration,
        );
    });
    group.finish();
}

criterion_group!(benches, checkpoint_take);
criterion_main!(benches);
