//! Checkpoints at monorepo scale (run by hand, never in CI): a tree of 100,000 files, taken
//! where the files are with a persistent stat cache. Goals: the first checkpoint of a session
//! < 1 s once the cache is warm (another session, or an earlier run of the executor, took the
//! workspace before), an incremental one < 50 ms with 10 files changed; the cold cost is
//! reported.
//!
//! ```sh
//! cargo bench -p amber-store --bench checkpoint_monorepo
//! AMBER_BENCH_DIR=/some/disk/dir cargo bench -p amber-store --bench checkpoint_monorepo
//! ```
//!
//! Two paths, both measured:
//! - **local**: amberd's own (`Snapshot::take_excluding` into the daemon's `BlobStore`);
//! - **executor**: `amber-exec`'s (`Snapshot::take_hashes`, the stat cache saved as a delta in
//!   its cache store), then what amberd does with the answer: the snapshot sent as a delta
//!   from the last one it holds, through JSON both ways, rebuilt, the store asked for the
//!   changed content (already there in this bench: the 10 changed files' bytes are the only
//!   content a real link carries, measured separately by the tool round trip KPIs) and
//!   saved as a delta. Only the pipe between the two is left out.
//!
//! Before criterion's runs it prints the cold costs once: a first checkpoint with no cache.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use amber_store::{BlobStore, DEFAULT_MAX_FILE_BYTES, Snapshot, SnapshotDelta, StatCache};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};

#[path = "support/monorepo_tree.rs"]
mod tree;

use tree::{bench_dir, change, generate};

/// amberd's side of an executor's answer: `delta` (from `base`) through JSON, rebuilt,
/// the content it lacks looked up, and the snapshot saved as a delta.
fn keep(delta: &SnapshotDelta, base: Option<&Snapshot>, store: &BlobStore) -> Snapshot {
    let wire = serde_json::to_vec(delta).unwrap();
    let delta: SnapshotDelta = serde_json::from_slice(&wire).unwrap();
    let full = delta.full;
    let mut snap = delta.apply(base).unwrap();
    let lacking = snap
        .entries
        .iter()
        .filter(|e| {
            full || base
                .and_then(|b| b.get(&e.path))
                .is_none_or(|o| o.hash != e.hash)
        })
        .filter(|e| !store.contains(&e.hash))
        .count();
    black_box(lacking);
    snap.save_after(base, store).unwrap();
    snap
}

fn report(ws: &Path, data: &Path) {
    let store = BlobStore::open(data.join("objects-cold")).unwrap();
    let start = Instant::now();
    let snap = Snapshot::take(ws, None, &store, DEFAULT_MAX_FILE_BYTES).unwrap();
    let bytes: u64 = snap.entries.iter().map(|e| e.size).sum();
    eprintln!(
        "monorepo cold, local (every file read, hashed and stored): {} files, {} bytes, {:?}",
        snap.entries.len(),
        bytes,
        start.elapsed()
    );
    let cache = BlobStore::open(data.join("cache-cold")).unwrap();
    let start = Instant::now();
    let mut snap = Snapshot::take_hashes(ws, None, &cache, DEFAULT_MAX_FILE_BYTES, &[]).unwrap();
    snap.save(&cache).unwrap();
    eprintln!(
        "monorepo cold, executor (every file read and hashed, the stat cache saved): {:?}",
        start.elapsed()
    );
}

fn monorepo(c: &mut Criterion) {
    let ws = bench_dir();
    let data = bench_dir();
    generate(ws.path());
    report(ws.path(), data.path());
    let root = ws.path();
    let mut group = c.benchmark_group("checkpoint_100k");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(30));

    // Local: another session took the workspace before; this session's first snapshot
    // starts from the stat cache's pointer.
    let store = BlobStore::open(data.path().join("objects")).unwrap();
    let stat_cache = StatCache::new(data.path().join("workspaces"));
    let mut seed = Snapshot::take(root, None, &store, DEFAULT_MAX_FILE_BYTES).unwrap();
    stat_cache.set(root, &seed.save(&store).unwrap()).unwrap();
    group.bench_function("local_first_warm", |b| {
        b.iter(|| {
            let previous = Snapshot::load(&store, &stat_cache.get(root).unwrap()).unwrap();
            let mut snap = Snapshot::take_excluding(
                root,
                Some(&previous),
                &store,
                DEFAULT_MAX_FILE_BYTES,
                &[],
            )
            .unwrap();
            assert_eq!(snap.stats.files_read, 0);
            black_box(snap.save_after(Some(&previous), &store).unwrap())
        });
    });
    let mut salt = 0u64;
    let base = seed;
    group.bench_function("local_incremental_10_changed", |b| {
        b.iter_batched(
            || {
                salt += 1;
                change(root, salt);
            },
            |()| {
                let mut snap =
                    Snapshot::take(root, Some(&base), &store, DEFAULT_MAX_FILE_BYTES).unwrap();
                black_box(snap.save_after(Some(&base), &store).unwrap())
            },
            BatchSize::PerIteration,
        );
    });

    // Executor: its cache store holds the stat cache; amberd's store holds the content.
    let cache = BlobStore::open(data.path().join("cache")).unwrap();
    let mut cached =
        Snapshot::take_hashes(root, None, &cache, DEFAULT_MAX_FILE_BYTES, &[]).unwrap();
    stat_cache
        .set(Path::new("/executor"), &cached.save(&cache).unwrap())
        .unwrap();
    let kept = keep(&cached.delta_from(None), None, &store);
    group.bench_function("executor_first_warm", |b| {
        b.iter(|| {
            let previous =
                Snapshot::load(&cache, &stat_cache.get(Path::new("/executor")).unwrap()).unwrap();
            let mut snap =
                Snapshot::take_hashes(root, Some(&previous), &cache, DEFAULT_MAX_FILE_BYTES, &[])
                    .unwrap();
            snap.save_after(Some(&previous), &cache).unwrap();
            // A new session: amberd holds no base, the snapshot travels whole.
            black_box(keep(&snap.delta_from(None), None, &store))
        });
    });
    // amberd's side alone of a new session's first checkpoint: a whole snapshot received.
    let whole = cached.delta_from(None);
    group.bench_function("amberd_keeps_a_whole_snapshot", |b| {
        b.iter(|| black_box(keep(&whole, None, &store)));
    });
    let (mut sent, mut held) = (cached.clone(), kept);
    group.bench_function("executor_incremental_10_changed", |b| {
        b.iter_batched(
            || {
                salt += 1;
                change(root, salt);
            },
            |()| {
                let mut snap =
                    Snapshot::take_hashes(root, Some(&sent), &cache, DEFAULT_MAX_FILE_BYTES, &[])
                        .unwrap();
                snap.save_after(Some(&sent), &cache).unwrap();
                let delta = snap.delta_from(Some(&sent));
                held = keep(&delta, Some(&held), &store);
                sent = snap;
            },
            BatchSize::PerIteration,
        );
    });
    cached = sent;
    black_box(cached);
    group.finish();
}

criterion_group!(benches, monorepo);
criterion_main!(benches);
