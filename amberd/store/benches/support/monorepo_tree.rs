//! The 100,000-file tree the monorepo checkpoint benches share (the store's and the
//! executor's): 1,000 directories of 100 small source files, mtimes an hour old, and the
//! change of 10 of them a measured incremental checkpoint records.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

pub(crate) const DIRS: usize = 1_000;
pub(crate) const FILES_PER_DIR: usize = 100;
pub(crate) const CHANGED: usize = 10;

/// A scratch directory: under `AMBER_BENCH_DIR` when set, else the system's temp dir.
pub(crate) fn bench_dir() -> tempfile::TempDir {
    match std::env::var_os("AMBER_BENCH_DIR") {
        Some(dir) => tempfile::tempdir_in(PathBuf::from(dir)).unwrap(),
        None => tempfile::tempdir().unwrap(),
    }
}

/// A small source-like file (0.2–1.5 KiB).
fn source(d: usize, f: usize, salt: u64) -> String {
    let lines = 3 + (d * 31 + f * 17) % 20;
    let mut out = format!("//! module {d}/{f} ({salt})\n");
    for i in 0..lines {
        out.push_str(&format!(
            "pub fn item_{i}(x: u64) -> u64 {{ x ^ {salt} }}\n"
        ));
    }
    out
}

fn file(root: &Path, d: usize, f: usize) -> PathBuf {
    root.join(format!("pkg{:02}/mod{d:03}/file{f:03}.rs", d / 50))
}

/// Writes the tree under `root`, with a `.gitignore` for `target/`.
pub(crate) fn generate(root: &Path) {
    let past = SystemTime::now() - Duration::from_secs(3600);
    fs::write(root.join(".gitignore"), "target/\n").unwrap();
    for d in 0..DIRS {
        for f in 0..FILES_PER_DIR {
            let path = file(root, d, f);
            if f == 0 {
                fs::create_dir_all(path.parent().unwrap()).unwrap();
            }
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

/// Rewrites [`CHANGED`] files spread over the tree with content never seen before.
pub(crate) fn change(root: &Path, salt: u64) {
    for i in 0..CHANGED {
        let (d, f) = (i * (DIRS / CHANGED), i * 3);
        fs::write(file(root, d, f), source(d, f, salt)).unwrap();
    }
}
