//! Benchmarks of the checkpoint content store (run by hand, never in CI), against issue
//! 18's goals: the first snapshot of a 10,000-file workspace < 2 s, a snapshot with 10
//! files changed since the last < 50 ms p50, and store growth = the changed bytes
//! (compressed), not the tree.
//!
//! ```sh
//! cargo bench -p amber-store --bench checkpoint
//! AMBER_BENCH_DIR=/some/disk/dir cargo bench -p amber-store --bench checkpoint   # default: $TMPDIR
//! ```
//!
//! Before criterion's runs it prints the incremental p50/p90 over its own 50 runs and the
//! store growth of one incremental snapshot. The tree: 100 directories of 100 source-like
//! files (0.6–6 KiB, 35 MB in all), mtimes an hour old, as in a workspace not edited just now;
//! plus what the ignore rules leave out, which a snapshot lists by metadata only: an ignored
//! `target/` of 2,000 files (never entered) and one ignored `.log` in each source directory.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use amber_store::{BlobStore, DEFAULT_MAX_FILE_BYTES, Snapshot};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};

const DIRS: usize = 100;
const FILES_PER_DIR: usize = 100;
const CHANGED: usize = 10;
const TARGET_DIRS: usize = 20;

fn bench_dir() -> tempfile::TempDir {
    match std::env::var_os("AMBER_BENCH_DIR") {
        Some(dir) => tempfile::tempdir_in(PathBuf::from(dir)).unwrap(),
        None => tempfile::tempdir().unwrap(),
    }
}

fn source(d: usize, f: usize, salt: u64) -> String {
    let lines = 10 + (d * 31 + f * 17) % 90;
    let mut out = format!("//! module {d}/{f} ({salt})\n\nuse std::collections::HashMap;\n\n");
    for i in 0..lines {
        out.push_str(&format!(
            "pub fn item_{d}_{f}_{i}(x: u64) -> u64 {{ x.wrapping_mul({}) ^ {salt} }}\n",
            i * 7 + f
        ));
    }
    out
}

fn generate(root: &Path) {
    let past = SystemTime::now() - Duration::from_secs(3600);
    fs::write(root.join(".gitignore"), "target/\n*.log\n").unwrap();
    for t in 0..TARGET_DIRS {
        let dir = root.join(format!("target/debug/deps{t:02}"));
        fs::create_dir_all(&dir).unwrap();
        for f in 0..FILES_PER_DIR {
            fs::write(dir.join(format!("artifact{f:03}.o")), source(t, f, 0)).unwrap();
        }
    }
    for d in 0..DIRS {
        let dir = root.join(format!("src/mod{d:03}"));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("build.log"), "ignored\n").unwrap();
        for f in 0..FILES_PER_DIR {
            let path = dir.join(format!("file{f:03}.rs"));
            fs::write(&path, source(d, f, 0)).unwrap();
            fs::File::options()
                .write(true)
                .open(&path)
                .unwrap()
                .set_modified(past)
                .unwrap();
        }
    }
}

/// Rewrites `CHANGED` files spread over the tree with content never seen before; returns
/// the bytes written.
fn change(root: &Path, salt: u64) -> u64 {
    (0..CHANGED)
        .map(|i| {
            let (d, f) = (i * (DIRS / CHANGED), i * 3);
            let body = source(d, f, salt);
            fs::write(root.join(format!("src/mod{d:03}/file{f:03}.rs")), &body).unwrap();
            body.len() as u64
        })
        .sum()
}

fn report(ws: &Path, data: &Path) {
    let store = BlobStore::open(data.join("objects-report")).unwrap();
    let start = Instant::now();
    let mut base = Snapshot::take(ws, None, &store, DEFAULT_MAX_FILE_BYTES).unwrap();
    let first = start.elapsed();
    let tree_bytes: u64 = base.entries.iter().map(|e| e.size).sum();
    eprintln!(
        "checkpoint first: {} files ({} ignored paths listed), {} bytes, {:?}, store {} bytes in {} blobs",
        base.entries.len(),
        base.ignored.len(),
        tree_bytes,
        first,
        base.stats.blob_bytes_written,
        base.stats.blobs_written,
    );
    base.save(&store).unwrap();
    let mut times = Vec::new();
    let mut saved = Vec::new();
    let mut last = base;
    for salt in 1..=50u64 {
        let changed = change(ws, salt);
        let start = Instant::now();
        let mut snap = Snapshot::take(ws, Some(&last), &store, DEFAULT_MAX_FILE_BYTES).unwrap();
        times.push(start.elapsed());
        // What the daemon does next: store the snapshot itself (a delta from the last one).
        let (_, bytes_before) = store.written();
        let start = Instant::now();
        snap.save_after(Some(&last), &store).unwrap();
        saved.push((start.elapsed(), store.written().1 - bytes_before));
        if salt == 1 {
            eprintln!(
                "checkpoint incremental: read {} files ({} bytes changed), reused {}, store growth {} bytes in {} blobs",
                snap.stats.files_read,
                changed,
                snap.stats.reused,
                snap.stats.blob_bytes_written,
                snap.stats.blobs_written,
            );
        }
        last = snap;
    }
    times.sort();
    eprintln!(
        "checkpoint incremental ({CHANGED} changed): p50 {:?}, p90 {:?}, max {:?} over {} runs",
        times[times.len() / 2],
        times[times.len() * 9 / 10],
        times[times.len() - 1],
        times.len()
    );
    saved.sort();
    let mean_bytes = saved.iter().map(|(_, b)| b).sum::<u64>() / saved.len() as u64;
    eprintln!(
        "checkpoint save (delta from the previous snapshot): p50 {:?}, max {:?}, {mean_bytes} bytes stored per snapshot on average",
        saved[saved.len() / 2].0,
        saved[saved.len() - 1].0,
    );
}

fn checkpoint(c: &mut Criterion) {
    let ws = bench_dir();
    let data = bench_dir();
    generate(ws.path());
    report(ws.path(), data.path());

    let mut group = c.benchmark_group("checkpoint");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    let mut round = 0u32;
    group.bench_function("first_10k_files", |b| {
        b.iter_batched(
            || {
                round += 1;
                BlobStore::open(data.path().join(format!("objects-first-{round}"))).unwrap()
            },
            |store| {
                black_box(Snapshot::take(ws.path(), None, &store, DEFAULT_MAX_FILE_BYTES).unwrap())
            },
            BatchSize::PerIteration,
        );
    });

    let store = BlobStore::open(data.path().join("objects-incremental")).unwrap();
    let base = Snapshot::take(ws.path(), None, &store, DEFAULT_MAX_FILE_BYTES).unwrap();
    let mut salt = 1_000u64;
    group
        .sample_size(50)
        .measurement_time(Duration::from_secs(10));
    group.bench_function("incremental_10_changed", |b| {
        b.iter_batched(
            || {
                salt += 1;
                change(ws.path(), salt);
            },
            |()| {
                black_box(
                    Snapshot::take(ws.path(), Some(&base), &store, DEFAULT_MAX_FILE_BYTES).unwrap(),
                )
            },
            BatchSize::PerIteration,
        );
    });
    group.finish();
}

criterion_group!(benches, checkpoint);
criterion_main!(benches);
