//! Tests of the BM25 index: ranking, incremental refresh, compaction, stop.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, SystemTime};

use super::super::tokenize::query_terms;
use super::*;

fn tree() -> (tempfile::TempDir, WalkSpec) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let spec = WalkSpec {
        workspace: root.clone(),
        root,
        glob: None,
    };
    (dir, spec)
}

fn write(spec: &WalkSpec, name: &str, text: &str) {
    let path = spec.root.join(name);
    std::fs::write(&path, text).unwrap();
    // A distinct mtime old enough to be trusted (not racy).
    let past = SystemTime::now() - Duration::from_secs(fastrand::u64(10..100_000));
    set_mtime(&path, past);
}

fn set_mtime(path: &Path, mtime: SystemTime) {
    std::fs::File::open(path)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
}

/// Backdate every directory of the tree (so their mtimes are trusted).
fn settle_dirs(dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            settle_dirs(&path);
        }
    }
    set_mtime(dir, SystemTime::now() - Duration::from_secs(3600));
}

fn names(index: &Bm25Index, query: &str) -> Vec<String> {
    index
        .search(&query_terms(query, 1.5), 10, 3)
        .iter()
        .map(|h| h.path.file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}

fn refresh(index: &mut Bm25Index, spec: &WalkSpec) -> RefreshStats {
    index.refresh(spec, 2, &AtomicBool::new(false))
}

#[test]
fn ranks_rare_terms_and_whole_identifiers_first() {
    let (_dir, spec) = tree();
    write(
        &spec,
        "a.rs",
        "fn parse_config(path: &str) -> Config { todo!() }\n",
    );
    write(
        &spec,
        "b.rs",
        "fn parse() {}\nfn config() {}\nlet value = 1;\n",
    );
    write(&spec, "c.rs", "let value = 2; let other = value;\n");
    let mut index = Bm25Index::new();
    let stats = refresh(&mut index, &spec);
    assert_eq!((stats.files, stats.indexed, stats.removed), (3, 3, 0));
    assert_eq!(names(&index, "parseConfig"), ["a.rs", "b.rs"]);
    assert_eq!(names(&index, "value"), ["c.rs", "b.rs"]);
    assert!(names(&index, "nothing").is_empty());
}

/// Run a test body with an inotify-driven index and a stat-only one.
macro_rules! both_modes {
    ($name:ident, $body:ident) => {
        mod $name {
            #[test]
            fn watching() {
                let index = super::Bm25Index::new();
                super::$body(index, cfg!(target_os = "linux"));
            }
            #[test]
            fn stat_only() {
                super::$body(super::Bm25Index::stat_only(), false);
            }
        }
    };
}

both_modes!(
    refresh_reindexes_changed_files_and_forgets_deleted_ones,
    reindex_and_forget
);
fn reindex_and_forget(mut index: Bm25Index, watching: bool) {
    let (_dir, spec) = tree();
    write(&spec, "keep.rs", "struct Keeper;\n");
    write(&spec, "edit.rs", "fn alpha_beta() {}\n");
    write(&spec, "gone.rs", "fn vanishing_act() {}\n");
    refresh(&mut index, &spec);
    assert_eq!(index.watching(), watching);
    assert_eq!(names(&index, "alphaBeta"), ["edit.rs"]);
    let stats = refresh(&mut index, &spec);
    assert_eq!((stats.indexed, stats.removed), (0, 0), "nothing changed");

    write(&spec, "edit.rs", "fn gamma_delta() {}\n");
    std::fs::remove_file(spec.root.join("gone.rs")).unwrap();
    let stats = refresh(&mut index, &spec);
    assert_eq!((stats.files, stats.indexed, stats.removed), (2, 1, 1));
    assert!(names(&index, "alphaBeta").is_empty());
    assert_eq!(names(&index, "gammaDelta"), ["edit.rs"]);
    assert!(names(&index, "vanishing").is_empty());
    assert_eq!(index.file_count(), 2);
    assert_eq!(index.doc_count(), 2);
}

#[test]
fn compaction_keeps_results_and_drops_dead_postings() {
    let (_dir, spec) = tree();
    let body: String = (0..2000)
        .map(|i| format!("fn item{i}() {{ shared_thing }}\n"))
        .collect();
    write(&spec, "big.rs", &body);
    write(&spec, "small.rs", "fn shared_thing() {}\n");
    let mut index = Bm25Index::new();
    refresh(&mut index, &spec);
    let docs_before = index.docs.len();
    for round in 0..3 {
        write(&spec, "big.rs", &format!("{body}// round {round}\n"));
        refresh(&mut index, &spec);
    }
    assert!(
        index.docs.len() < docs_before * 3,
        "compacted: {}",
        index.docs.len()
    );
    assert_eq!(
        index.doc_count() as usize,
        index.docs.iter().filter(|d| d.len > 0).count()
    );
    let term = index.terms[&super::super::tokenize::hash_token(b"sharedthing")];
    assert!(index.postings[term as usize].len() <= 2 * (docs_before + 1));
    let found = names(&index, "shared_thing item7");
    assert_eq!(found[0], "big.rs");
    assert!(found.contains(&"small.rs".to_owned()), "{found:?}");
    let hits = index.search(&query_terms("item1999", 1.5), 5, 3);
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].line, 1961);
}

#[test]
fn per_file_cap_and_limit_apply() {
    let (_dir, spec) = tree();
    let body: String = (0..400).map(|i| format!("needle {i}\n")).collect();
    write(&spec, "many.txt", &body);
    write(&spec, "one.txt", "needle\n");
    let mut index = Bm25Index::new();
    refresh(&mut index, &spec);
    let hits = index.search(&query_terms("needle", 1.5), 10, 3);
    assert_eq!(hits.len(), 4);
    assert_eq!(
        hits.iter().filter(|h| h.path.ends_with("many.txt")).count(),
        3
    );
    assert_eq!(index.search(&query_terms("needle", 1.5), 2, 3).len(), 2);
}

#[test]
fn a_stopped_refresh_changes_nothing_and_binaries_and_big_files_are_skipped() {
    let (_dir, spec) = tree();
    write(&spec, "a.rs", "fn alpha() {}\n");
    std::fs::write(spec.root.join("b.bin"), b"alpha\0beta").unwrap();
    let big = "alpha ".repeat((MAX_FILE_BYTES as usize) / 6 + 1);
    std::fs::write(spec.root.join("big.txt"), big).unwrap();
    let mut index = Bm25Index::new();
    let stats = index.refresh(&spec, 2, &AtomicBool::new(true));
    assert!(stats.cancelled);
    assert_eq!(index.file_count(), 0);
    let stats = refresh(&mut index, &spec);
    assert_eq!(
        (stats.files, stats.indexed),
        (3, 3),
        "big.txt is recorded, never read"
    );
    assert_eq!(names(&index, "alpha"), ["a.rs"]);
    assert!(index.heap_bytes() > 0);
    assert!(Path::new(&*index.paths[0]).is_absolute());
}

#[test]
fn parallel_build_matches_a_serial_one() {
    let (_dir, spec) = tree();
    for i in 0..150 {
        write(
            &spec,
            &format!("f{i:03}.rs"),
            &format!("fn handler_{i}() {{ common_call(); }}\n"),
        );
    }
    let mut parallel = Bm25Index::new();
    let stats = parallel.refresh(&spec, 2, &AtomicBool::new(false));
    assert_eq!(stats.indexed, 150);
    let mut serial = Bm25Index::new();
    serial.refresh(&spec, 1, &AtomicBool::new(false));
    assert_eq!(parallel.doc_count(), serial.doc_count());
    assert_eq!(parallel.term_count(), serial.term_count());
    assert_eq!(names(&parallel, "handler77"), ["f077.rs"]);
    assert_eq!(names(&serial, "handler_77")[0], "f077.rs");
}

both_modes!(
    warm_refreshes_find_new_moved_and_deleted_files,
    warm_refreshes
);
fn warm_refreshes(mut index: Bm25Index, watching: bool) {
    let (_dir, spec) = tree();
    std::fs::create_dir_all(spec.root.join("a/b")).unwrap();
    std::fs::create_dir_all(spec.root.join("old")).unwrap();
    write(&spec, "a/b/one.rs", "fn first_one() {}\n");
    write(&spec, "old/two.rs", "fn second_two() {}\n");
    std::fs::create_dir_all(spec.root.join("mv/in")).unwrap();
    write(&spec, "mv/in/five.rs", "fn fifth_five() {}\n");
    settle_dirs(&spec.root);
    refresh(&mut index, &spec);
    assert_eq!(index.watching(), watching);
    assert_eq!(index.tree.full_walks, 1);
    assert_eq!(refresh(&mut index, &spec).indexed, 0);

    // A new file in a known dir, a new nested dir, a removed dir, a rename.
    write(&spec, "a/b/three.rs", "fn third_three() {}\n");
    std::fs::create_dir_all(spec.root.join("a/new/deeper")).unwrap();
    write(&spec, "a/new/deeper/four.rs", "fn fourth_four() {}\n");
    std::fs::remove_dir_all(spec.root.join("old")).unwrap();
    std::fs::rename(spec.root.join("a/b/one.rs"), spec.root.join("a/uno.rs")).unwrap();
    std::fs::rename(spec.root.join("mv/in"), spec.root.join("a/moved")).unwrap();
    let stats = refresh(&mut index, &spec);
    assert_eq!(index.tree.full_walks, 1, "no full walk");
    assert_eq!((stats.files, stats.indexed, stats.removed), (4, 4, 3));
    assert_eq!(names(&index, "fifthFive"), ["five.rs"]);
    let hits = index.search(&query_terms("fifthFive", 1.5), 5, 3);
    assert!(hits[0].path.ends_with("a/moved/five.rs"), "{hits:?}");
    // Edits inside the moved directory are still seen.
    write(&spec, "a/moved/five.rs", "fn sixth_six() {}\n");
    assert_eq!(refresh(&mut index, &spec).indexed, 1);
    assert_eq!(names(&index, "sixthSix"), ["five.rs"]);
    assert_eq!(names(&index, "thirdThree"), ["three.rs"]);
    assert_eq!(names(&index, "fourthFour"), ["four.rs"]);
    assert_eq!(names(&index, "firstOne"), ["uno.rs"]);
    assert!(names(&index, "secondTwo").is_empty());
}

both_modes!(ignore_file_changes_force_a_full_walk, ignore_changes);
fn ignore_changes(mut index: Bm25Index, _watching: bool) {
    let (_dir, spec) = tree();
    std::fs::create_dir_all(spec.root.join("sub")).unwrap();
    write(&spec, "sub/keep.rs", "struct AlphaWolf;\n");
    write(&spec, "sub/drop.rs", "struct BetaBear;\n");
    settle_dirs(&spec.root);
    refresh(&mut index, &spec);
    write(&spec, "sub/.gitignore", "drop.rs\n");
    let stats = refresh(&mut index, &spec);
    assert_eq!(index.tree.full_walks, 2);
    assert_eq!((stats.files, stats.removed), (1, 1));
    assert!(names(&index, "betaBear").is_empty());
    write(&spec, "sub/.gitignore", "keep.rs\n");
    refresh(&mut index, &spec);
    assert_eq!(index.tree.full_walks, 3);
    assert_eq!(names(&index, "betaBear"), ["drop.rs"]);
    assert!(names(&index, "alphaWolf").is_empty());
}

both_modes!(racy_mtimes_are_rechecked_until_they_settle, racy_mtimes);
fn racy_mtimes(mut index: Bm25Index, _watching: bool) {
    let (_dir, spec) = tree();
    let path = spec.root.join("a.rs");
    std::fs::write(&path, "fn aaa_one() {}\n").unwrap();
    let stamp = SystemTime::now();
    set_mtime(&path, stamp);
    assert_eq!(refresh(&mut index, &spec).indexed, 1);
    // Same size, same mtime: only a racy check can notice.
    std::fs::write(&path, "fn bbb_two() {}\n").unwrap();
    set_mtime(&path, stamp);
    assert_eq!(refresh(&mut index, &spec).indexed, 1);
    assert!(names(&index, "aaaOne").is_empty());
    assert_eq!(names(&index, "bbbTwo"), ["a.rs"]);
    set_mtime(&path, stamp - Duration::from_secs(60));
    assert_eq!(refresh(&mut index, &spec).indexed, 1);
    assert_eq!(refresh(&mut index, &spec).indexed, 0, "settled");
}
