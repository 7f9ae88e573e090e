//! Tests of a snapshot kept away from its workspace: taken as hashes only, sent as a delta,
//! rebuilt by the keeper, restored from blobs held in memory; and the stat cache that lets
//! a new session's first snapshot reuse an older one's hashes.

use std::collections::HashMap;
use std::fs;
use std::path::Path;

use super::*;

const MAX: u64 = 1024;

fn write(root: &Path, rel: &str, body: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, body).unwrap();
}

fn workspace() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    write(ws.path(), "a.txt", "a\n");
    write(ws.path(), "src/b.rs", "b\n");
    write(ws.path(), "src/c.rs", "c\n");
    write(ws.path(), "z/deep/d.md", "d\n");
    ws
}

fn entry(path: &str, body: &str) -> Entry {
    Entry {
        path: RelPath::from(path),
        kind: EntryKind::File,
        mode: 0o644,
        size: body.len() as u64,
        mtime_ns: 1,
        ino: 1,
        hash: Hash::of(body.as_bytes()),
    }
}

fn snapshot_of(entries: Vec<Entry>) -> Snapshot {
    let mut snap = Snapshot::new(MAX, 0);
    snap.entries = entries;
    snap
}

#[test]
fn a_hashes_only_snapshot_names_the_content_and_keeps_none() {
    let ws = workspace();
    let here = tempfile::tempdir().unwrap();
    let clock = BlobStore::open(here.path().join("clock")).unwrap();
    let snap = Snapshot::take_hashes(ws.path(), None, &clock, MAX, &[]).unwrap();
    assert_eq!(snap.entries.len(), 4);
    let b = snap.get(&RelPath::from("src/b.rs")).unwrap();
    assert_eq!(b.hash, Hash::of(b"b\n"));
    assert_eq!(snap.stats.blobs_written, 0);
    assert!(!clock.contains(&b.hash), "no content is kept");
}

#[test]
fn a_delta_rebuilds_the_snapshot_it_was_made_from() {
    let base = snapshot_of(vec![
        entry("a", "1"),
        entry("b", "2"),
        entry("c", "3"),
        entry("d", "4"),
    ]);
    let cases: Vec<(&str, Vec<Entry>)> = vec![
        ("unchanged", base.entries.clone()),
        (
            "one changed",
            vec![
                entry("a", "1"),
                entry("b", "X"),
                entry("c", "3"),
                entry("d", "4"),
            ],
        ),
        (
            "first and last removed",
            vec![entry("b", "2"), entry("c", "3")],
        ),
        (
            "added around",
            vec![
                entry("0", "0"),
                entry("a", "1"),
                entry("b", "2"),
                entry("bb", "n"),
                entry("c", "3"),
                entry("d", "4"),
                entry("e", "5"),
            ],
        ),
        (
            "everything replaced",
            vec![entry("x", "x"), entry("y", "y")],
        ),
        ("emptied", vec![]),
    ];
    for (name, entries) in cases {
        let after = snapshot_of(entries);
        let delta = after.delta_from(Some(&base));
        assert!(!delta.full, "{name}");
        let wire = serde_json::to_string(&delta).unwrap();
        let back: SnapshotDelta = serde_json::from_str(&wire).unwrap();
        assert_eq!(back.apply(Some(&base)).unwrap(), after, "{name}");
        let whole = after.delta_from(None);
        assert!(whole.full, "{name}");
        assert_eq!(
            whole.apply(Some(&base)).unwrap(),
            after,
            "{name}: a whole one ignores the base"
        );
    }
}

#[test]
fn a_delta_out_of_order_or_without_its_base_is_refused() {
    let base = snapshot_of(vec![entry("a", "1")]);
    let mut unsorted = snapshot_of(vec![entry("a", "1")]).delta_from(None);
    unsorted.changed = vec![entry("b", "2"), entry("a", "1")];
    assert!(unsorted.apply(Some(&base)).is_err());
    let mut twice = snapshot_of(vec![]).delta_from(None);
    twice.changed = vec![entry("a", "1"), entry("a", "2")];
    assert!(twice.apply(None).is_err());
    let delta = snapshot_of(vec![entry("b", "2")]).delta_from(Some(&base));
    assert!(delta.apply(None).is_err());
}

#[test]
fn a_restore_reads_its_blobs_from_any_source() {
    let ws = workspace();
    let here = tempfile::tempdir().unwrap();
    let clock = BlobStore::open(here.path().join("clock")).unwrap();
    let before = Snapshot::take_hashes(ws.path(), None, &clock, MAX, &[]).unwrap();
    let blobs: HashMap<Hash, Vec<u8>> = [b"a\n".as_slice(), b"b\n", b"c\n", b"d\n"]
        .into_iter()
        .map(|b| (Hash::of(b), b.to_vec()))
        .collect();
    write(ws.path(), "src/b.rs", "changed\n");
    fs::remove_file(ws.path().join("a.txt")).unwrap();
    write(ws.path(), "new.txt", "new\n");
    let now = Snapshot::take_hashes(ws.path(), Some(&before), &clock, MAX, &[]).unwrap();
    let plan = RestorePlan::new(&now, &before).unwrap();
    let applied = plan.apply(ws.path(), &blobs).unwrap();
    assert!(applied.refused.is_empty());
    assert_eq!(
        fs::read_to_string(ws.path().join("src/b.rs")).unwrap(),
        "b\n"
    );
    assert_eq!(fs::read_to_string(ws.path().join("a.txt")).unwrap(), "a\n");
    assert!(!ws.path().join("new.txt").exists());
    // A blob the source lacks refuses the restore before anything is touched.
    write(ws.path(), "src/c.rs", "other\n");
    let now = Snapshot::take_hashes(ws.path(), None, &clock, MAX, &[]).unwrap();
    let plan = RestorePlan::new(&now, &before).unwrap();
    let empty: HashMap<Hash, Vec<u8>> = HashMap::new();
    assert!(plan.apply(ws.path(), &empty).is_err());
    assert_eq!(
        fs::read_to_string(ws.path().join("src/c.rs")).unwrap(),
        "other\n"
    );
}

#[test]
fn the_stat_cache_names_each_workspaces_newest_snapshot_and_forgets_dropped_ones() {
    let dir = tempfile::tempdir().unwrap();
    let cache = StatCache::new(dir.path().join("workspaces"));
    let (one, two) = (Path::new("/w/one"), Path::new("/w/two"));
    assert_eq!(cache.get(one), None);
    let (h1, h2, h3) = (Hash::of(b"1"), Hash::of(b"2"), Hash::of(b"3"));
    cache.set(one, &h1).unwrap();
    cache.set(two, &h2).unwrap();
    cache.set(one, &h3).unwrap();
    assert_eq!((cache.get(one), cache.get(two)), (Some(h3), Some(h2)));
    let mut all = cache.snapshots();
    all.sort_by_key(Hash::to_hex);
    let mut want = vec![h2, h3];
    want.sort_by_key(Hash::to_hex);
    assert_eq!(all, want);
    cache.retain(|h| *h != h2);
    assert_eq!((cache.get(one), cache.get(two)), (Some(h3), None));
    // Garbage in the directory is no pointer.
    fs::write(cache.dir().join("junk"), "x").unwrap();
    fs::write(cache.dir().join("a".repeat(64)), "not a hash").unwrap();
    assert_eq!(cache.snapshots(), vec![h3]);
}
