//! Criterion KPI of the per-turn cost of the project instructions when nothing changed
//! (run by hand, never in CI): `Instructions::refresh` on a workspace three directories
//! below its git root, with an `AGENTS.md` in each and two configured file names, so
//! every turn `stat`s eight candidates (the global file included) and reads nothing.
//!
//! ```sh
//! cargo bench -p amberd --bench prompt
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use amberd::instructions::Instructions;
use criterion::{Criterion, criterion_group, criterion_main};

fn unchanged_refresh(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let workspace = root.join("crates/app/src");
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::create_dir_all(&workspace).unwrap();
    for dir in ["", "crates", "crates/app", "crates/app/src"] {
        let rules = format!("# Rules of {dir}\n\n{}", "- keep it tidy\n".repeat(200));
        std::fs::write(root.join(dir).join("AGENTS.md"), rules).unwrap();
    }
    let names = ["AGENTS.md".to_owned(), "CLAUDE.md".to_owned()];
    let mut instructions = Instructions::new(&workspace, &names, 32 * 1024);
    assert!(instructions.refresh(), "the first refresh reads the files");
    assert!(instructions.text().contains("Rules of crates/app/src"));

    c.bench_function("instructions/refresh_unchanged", |b| {
        b.iter(|| black_box(instructions.refresh()));
    });
    assert!(!instructions.refresh(), "nothing changed, nothing re-read");
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(50);
    targets = unchanged_refresh
}
criterion_main!(benches);
