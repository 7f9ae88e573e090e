//! Tests of the checkpoint store: snapshot → changes → snapshot → diff → restore, dedup,
//! sweep, exclusions, incremental reads and the paths that cannot be recorded.

// `mkfifo` makes a file the store cannot record.
#![allow(clippy::disallowed_methods)]

use std::collections::HashSet;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime};

use super::take::{Candidate, Outcome, read_one};
use super::*;

const MAX: u64 = 1024;

fn write(root: &Path, rel: &str, body: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, body).unwrap();
}

/// Sets every file's and directory's mtime an hour back, as in a workspace edited long
/// before the first snapshot (so the racy-clean rule does not make a snapshot re-read them,
/// and a change made right after a snapshot cannot share its mtime).
fn age(root: &Path) {
    let past = SystemTime::now() - Duration::from_secs(3600);
    for dent in ignore::WalkBuilder::new(root)
        .hidden(false)
        .ignore(false)
        .git_ignore(false)
        .build()
    {
        let dent = dent.unwrap();
        let file = match dent.file_type() {
            Some(t) if t.is_file() => fs::File::options().write(true).open(dent.path()),
            Some(t) if t.is_dir() => fs::File::open(dent.path()),
            _ => continue,
        };
        file.unwrap().set_modified(past).unwrap();
    }
}

/// A hash of the whole tree under `root` (paths, kinds, modes, contents, link targets,
/// directories), leaving out the top-level names in `except`.
fn tree_hash(root: &Path, except: &[&str]) -> Hash {
    fn visit(root: &Path, dir: &Path, except: &[&str], out: &mut Vec<u8>) {
        let mut names: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        names.sort();
        for path in names {
            let rel = path.strip_prefix(root).unwrap();
            if except.iter().any(|e| rel == Path::new(e)) {
                continue;
            }
            let meta = fs::symlink_metadata(&path).unwrap();
            out.extend_from_slice(rel.as_os_str().as_bytes());
            out.extend_from_slice(format!("\0{:o}\0", meta.mode()).as_bytes());
            if meta.is_symlink() {
                out.extend_from_slice(fs::read_link(&path).unwrap().as_os_str().as_bytes());
            } else if meta.is_dir() {
                visit(root, &path, except, out);
            } else {
                out.extend_from_slice(&fs::read(&path).unwrap());
            }
            out.push(0);
        }
    }
    let mut out = Vec::new();
    visit(root, root, except, &mut out);
    Hash::of(&out)
}

fn mtime_of(path: &Path) -> i64 {
    let meta = fs::symlink_metadata(path).unwrap();
    meta.mtime() * 1_000_000_000 + meta.mtime_nsec()
}

fn setup() -> (tempfile::TempDir, tempfile::TempDir, BlobStore) {
    let ws = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let store = BlobStore::open(data.path().join("objects")).unwrap();
    let root = ws.path();
    write(root, ".gitignore", "target/\n*.log\n");
    write(root, "src/main.rs", "fn main() {}\n");
    write(root, "src/lib.rs", "pub fn lib() {}\n");
    write(root, "README.md", "# readme\n");
    write(root, "old_name.txt", "to be renamed\n");
    write(root, "doomed.txt", "to be deleted\n");
    write(root, "script.sh", "#!/bin/sh\n");
    write(root, "target/debug/out", "ignored build output\n");
    age(root);
    (ws, data, store)
}

fn changes(list: &[(&str, ChangeStatus)]) -> Vec<Change> {
    let mut v: Vec<Change> = list
        .iter()
        .map(|(p, s)| Change {
            path: RelPath::from(*p),
            status: *s,
        })
        .collect();
    v.sort_by(|a, b| a.path.cmp(&b.path));
    v
}

#[test]
fn diff_of_two_snapshots_is_exactly_the_changes_made_and_restore_undoes_them() {
    let (ws, _data, store) = setup();
    let root = ws.path();
    let first = Snapshot::take(root, None, &store, MAX).unwrap();
    let before = tree_hash(root, &[]);
    assert!(first.is_complete(), "{:?}", first.missing);

    write(root, "new/dir/added.rs", "// added\n");
    write(root, "src/main.rs", "fn main() { println!(\"hi\"); }\n");
    fs::remove_file(root.join("doomed.txt")).unwrap();
    fs::rename(root.join("old_name.txt"), root.join("new_name.txt")).unwrap();
    symlink("src/lib.rs", root.join("link")).unwrap();
    symlink("nowhere", root.join("dangling")).unwrap();
    fs::set_permissions(root.join("script.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    write(root, "debug.log", "ignored\n");
    write(root, "big.bin", &"x".repeat(MAX as usize + 1));
    let fifo = root.join("fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );

    let second = Snapshot::take(root, Some(&first), &store, MAX).unwrap();
    assert_eq!(
        first.diff(&second),
        changes(&[
            ("new/dir/added.rs", ChangeStatus::Added),
            ("src/main.rs", ChangeStatus::Modified),
            ("doomed.txt", ChangeStatus::Deleted),
            ("old_name.txt", ChangeStatus::Deleted),
            ("new_name.txt", ChangeStatus::Added),
            ("link", ChangeStatus::Added),
            ("dangling", ChangeStatus::Added),
            ("script.sh", ChangeStatus::Modified),
        ])
    );
    let big_mtime = mtime_of(&root.join("big.bin"));
    assert_eq!(
        second.skipped,
        vec![
            Skipped {
                path: "big.bin".into(),
                reason: SkipReason::Oversized {
                    size: MAX + 1,
                    mtime_ns: big_mtime
                }
            },
            Skipped {
                path: "fifo".into(),
                reason: SkipReason::Special
            },
        ]
    );
    assert!(second.get(&"debug.log".into()).is_none());
    assert!(
        second
            .entries
            .iter()
            .all(|e| !e.path.as_bytes().starts_with(b"target/"))
    );

    let plan = RestorePlan::new(&second, &first).unwrap();
    plan.apply(root, &store).unwrap();
    let untracked = ["debug.log", "big.bin", "fifo"];
    assert_eq!(
        tree_hash(root, &untracked),
        before,
        "the restored tree differs"
    );
    for name in untracked {
        assert!(
            fs::symlink_metadata(root.join(name)).is_ok(),
            "{name} was touched"
        );
    }
    assert!(
        !root.join("new").exists(),
        "the emptied new directory is left behind"
    );
    let third = Snapshot::take(root, Some(&second), &store, MAX).unwrap();
    assert!(first.diff(&third).is_empty());
}

#[test]
fn restore_keeps_a_directory_that_still_holds_an_ignored_file() {
    let (ws, _data, store) = setup();
    let root = ws.path();
    let first = Snapshot::take(root, None, &store, MAX).unwrap();
    write(root, "extra/kept.rs", "x\n");
    write(root, "extra/notes.log", "ignored\n");
    let second = Snapshot::take(root, Some(&first), &store, MAX).unwrap();
    let plan = RestorePlan::new(&second, &first).unwrap();
    assert_eq!(plan.delete, vec![RelPath::from("extra/kept.rs")]);
    plan.apply(root, &store).unwrap();
    assert!(!root.join("extra/kept.rs").exists());
    assert!(root.join("extra/notes.log").exists());
}

#[test]
fn same_content_twice_is_stored_once() {
    let data = tempfile::tempdir().unwrap();
    let store = BlobStore::open(data.path()).unwrap();
    let a = store.put(b"same bytes").unwrap();
    let b = store.put(b"same bytes").unwrap();
    assert_eq!(a, b);
    assert_eq!(store.written().0, 1);
    let ws = tempfile::tempdir().unwrap();
    write(ws.path(), "one.txt", "dup\n");
    write(ws.path(), "two/three.txt", "dup\n");
    let snap = Snapshot::take(ws.path(), None, &store, MAX).unwrap();
    assert_eq!(snap.entries.len(), 2);
    assert_eq!(snap.stats.blobs_written, 1);
    assert_eq!(store.get(&snap.entries[0].hash).unwrap(), b"dup\n");
}

#[test]
fn compressible_blobs_are_stored_smaller_and_read_back_whole() {
    let data = tempfile::tempdir().unwrap();
    let store = BlobStore::open(data.path()).unwrap();
    let body = "fn main() { println!(\"hello\"); }\n".repeat(200);
    let hash = store.put(body.as_bytes()).unwrap();
    assert!(
        store.written().1 < body.len() as u64 / 4,
        "{:?}",
        store.written()
    );
    assert_eq!(store.get(&hash).unwrap(), body.as_bytes());
    let tiny = store.put(b"a").unwrap();
    assert_eq!(store.get(&tiny).unwrap(), b"a");
}

#[test]
fn blobs_and_their_directories_are_the_owners_alone() {
    use std::os::unix::fs::PermissionsExt;
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().join("objects");
    let store = BlobStore::open(&dir).unwrap();
    store.put(b"PASSWORD=hunter2\n").unwrap();
    let mut seen = 0;
    let mut pending = vec![dir];
    while let Some(path) = pending.pop() {
        let meta = std::fs::metadata(&path).unwrap();
        let mode = meta.permissions().mode() & 0o777;
        if meta.is_dir() {
            assert_eq!(mode, 0o700, "{}", path.display());
            pending.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else {
            assert_eq!(mode, 0o600, "{}", path.display());
            seen += 1;
        }
    }
    assert!(seen >= 1, "no blob was written");
}

#[test]
fn a_corrupt_or_absent_blob_is_an_error_naming_it() {
    let data = tempfile::tempdir().unwrap();
    let store = BlobStore::open(data.path()).unwrap();
    let hash = store.put(b"original").unwrap();
    let hex = hash.to_hex();
    fs::write(data.path().join(&hex[..2]).join(&hex[2..]), b"\0tampered").unwrap();
    assert!(
        matches!(store.get(&hash), Err(CheckpointError::BlobCorrupt { hash: h, .. }) if h == hash)
    );
    let absent = Hash::of(b"never stored");
    assert!(matches!(store.get(&absent), Err(CheckpointError::BlobNotFound(h)) if h == absent));
    assert!(!store.contains(&absent));
}

/// Writes `bytes` as the blob file of `hash` in the store at `dir`, replacing what is there.
fn plant_blob(dir: &Path, hash: &Hash, bytes: &[u8]) {
    let hex = hash.to_hex();
    fs::create_dir_all(dir.join(&hex[..2])).unwrap();
    fs::write(dir.join(&hex[..2]).join(&hex[2..]), bytes).unwrap();
}

#[test]
fn a_blob_declaring_a_huge_lz4_size_is_corrupt_without_being_allocated() {
    let data = tempfile::tempdir().unwrap();
    let store = BlobStore::open(data.path()).unwrap();
    let hash = Hash::of(b"whatever");
    // Tag 1 (LZ4), then a size prefix of almost 4 GiB ahead of a few bytes of block.
    let mut crafted = vec![1u8];
    crafted.extend_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
    crafted.extend_from_slice(b"\x10abc");
    plant_blob(data.path(), &hash, &crafted);
    match store.get(&hash) {
        Err(CheckpointError::BlobCorrupt { hash: h, reason }) => {
            assert_eq!(h, hash);
            assert!(reason.contains("declared size"), "{reason}");
        }
        other => panic!("expected a corrupt blob, got {other:?}"),
    }
    // Within the 1 GiB cap but beyond what 4 bytes of LZ4 can expand to.
    let mut crafted = vec![1u8];
    crafted.extend_from_slice(&(64u32 << 20).to_le_bytes());
    crafted.extend_from_slice(b"\x10abc");
    plant_blob(data.path(), &hash, &crafted);
    assert!(matches!(
        store.get(&hash),
        Err(CheckpointError::BlobCorrupt { .. })
    ));
    // Too short to hold the prefix at all.
    plant_blob(data.path(), &hash, b"\x01\x00\x01");
    assert!(matches!(
        store.get(&hash),
        Err(CheckpointError::BlobCorrupt { .. })
    ));
}

#[test]
fn a_blob_at_lz4s_best_ratio_still_reads_back() {
    let data = tempfile::tempdir().unwrap();
    let store = BlobStore::open(data.path()).unwrap();
    let zeros = vec![0u8; 16 << 20];
    let hash = store.put(&zeros).unwrap();
    assert!(
        store.written().1 < (16 << 20) / 200,
        "{:?}",
        store.written()
    );
    assert_eq!(store.get(&hash).unwrap(), zeros);
}

#[test]
fn sweep_removes_exactly_the_unreferenced_blobs() {
    let data = tempfile::tempdir().unwrap();
    let store = BlobStore::open(data.path()).unwrap();
    let keep: Vec<Hash> = (0..5)
        .map(|i| store.put(format!("keep {i}").as_bytes()).unwrap())
        .collect();
    let drop: Vec<Hash> = (0..7)
        .map(|i| store.put(format!("drop {i}").as_bytes()).unwrap())
        .collect();
    fs::write(data.path().join("tmp").join("left-by-a-crash"), b"x").unwrap();
    let stats = store
        .sweep(&keep.iter().copied().collect::<HashSet<_>>())
        .unwrap();
    assert_eq!((stats.kept, stats.removed), (5, 8));
    assert!(keep.iter().all(|h| store.contains(h)));
    assert!(drop.iter().all(|h| !store.contains(h)));
    assert_eq!(fs::read_dir(data.path().join("tmp")).unwrap().count(), 0);
}

#[test]
fn git_dir_is_never_recorded_and_amber_dir_is() {
    let (ws, _data, store) = setup();
    let root = ws.path();
    write(root, ".git/HEAD", "ref: refs/heads/main\n");
    write(root, ".git/objects/ab/cdef", "blob\n");
    write(root, "sub/.git", "gitdir: ../.git/worktrees/sub\n");
    write(root, ".amber/notes.md", "amber's own\n");
    let snap = Snapshot::take(root, None, &store, MAX).unwrap();
    let paths: Vec<String> = snap.entries.iter().map(|e| e.path.to_string()).collect();
    assert!(
        paths.iter().all(|p| !p.split('/').any(|c| c == ".git")),
        "{paths:?}"
    );
    assert!(paths.contains(&".amber/notes.md".to_owned()), "{paths:?}");
}

#[test]
fn an_incremental_snapshot_reads_only_the_changed_files() {
    let (ws, _data, store) = setup();
    let root = ws.path();
    let first = Snapshot::take(root, None, &store, MAX).unwrap();
    assert_eq!(first.stats.files_read, first.entries.len() as u64);
    let unchanged = Snapshot::take(root, Some(&first), &store, MAX).unwrap();
    assert_eq!(
        (unchanged.stats.files_read, unchanged.stats.blobs_written),
        (0, 0)
    );
    write(root, "README.md", "# changed\n");
    write(root, "src/new.rs", "// new\n");
    let second = Snapshot::take(root, Some(&unchanged), &store, MAX).unwrap();
    assert_eq!(second.stats.files_read, 2);
    assert_eq!(second.stats.reused, first.entries.len() as u64 - 1);
}

#[test]
fn a_file_rewritten_within_the_same_clock_tick_is_read_again() {
    let ws = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let store = BlobStore::open(data.path()).unwrap();
    write(ws.path(), "a.txt", "aaaa");
    let path = ws.path().join("a.txt");
    // The write and the snapshot in one clock tick, whatever the machine's load: an mtime
    // not older than the snapshot's start.
    let mtime = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
    fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let first = Snapshot::take(ws.path(), None, &store, MAX).unwrap();
    fs::write(&path, "bbbb").unwrap();
    // Same size, inode and mode; force the same mtime, as a coarse clock would give.
    fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let second = Snapshot::take(ws.path(), Some(&first), &store, MAX).unwrap();
    assert_eq!(
        first.diff(&second),
        changes(&[("a.txt", ChangeStatus::Modified)])
    );
}

#[test]
fn an_unreadable_file_is_listed_missing_and_does_not_fail_the_snapshot() {
    let (ws, _data, store) = setup();
    let root = ws.path();
    write(root, "secret.txt", "no access\n");
    fs::set_permissions(root.join("secret.txt"), fs::Permissions::from_mode(0o000)).unwrap();
    let snap = Snapshot::take(root, None, &store, MAX).unwrap();
    assert!(snap.get(&"src/main.rs".into()).is_some());
    // As root (euid 0, as in CI) mode 000 does not stop a read, so only the snapshot's
    // success is checked there; the vanished-file test below covers the failing read.
    let euid = fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(0);
    if euid != 0 {
        assert_eq!(snap.missing.len(), 1, "{:?}", snap.missing);
        assert_eq!(snap.missing[0].path, RelPath::from("secret.txt"));
        assert!(RestorePlan::new(&snap, &snap).is_err());
    }
}

#[test]
fn a_file_that_vanishes_between_walk_and_read_is_listed_missing_with_the_reason() {
    let ws = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let store = BlobStore::open(data.path()).unwrap();
    let candidate = Candidate {
        path: "gone.txt".into(),
        abs: ws.path().join("gone.txt"),
        kind: EntryKind::File,
    };
    match read_one(&candidate, &store, MAX) {
        Outcome::Missing(m) => {
            assert_eq!(m.path, RelPath::from("gone.txt"));
            assert!(m.reason.contains("No such file"), "{}", m.reason);
        }
        other => panic!("expected missing, got {other:?}"),
    }
}

#[test]
fn a_restore_to_an_incomplete_snapshot_is_refused_with_the_reason() {
    let mut target = Snapshot::new(MAX, 0);
    target.missing.push(Missing {
        path: "x".into(),
        reason: "Permission denied".into(),
    });
    let err = RestorePlan::new(&Snapshot::new(MAX, 0), &target).unwrap_err();
    assert!(err.to_string().contains("x: Permission denied"), "{err}");
}

#[test]
fn a_snapshot_round_trips_through_the_store_with_a_non_utf8_path() {
    let (ws, _data, store) = setup();
    let root = ws.path();
    let odd = std::ffi::OsStr::from_bytes(b"caf\xe9.txt");
    fs::write(root.join(odd), b"latin-1 name").unwrap();
    let mut snap = Snapshot::take(root, None, &store, MAX).unwrap();
    assert!(
        snap.entries
            .iter()
            .any(|e| e.path.as_bytes() == b"caf\xe9.txt")
    );
    let hash = snap.save(&store).unwrap();
    assert_eq!(Snapshot::load(&store, &hash).unwrap(), snap);
    let mut keep = HashSet::new();
    Snapshot::reach(&store, &hash, &mut keep).unwrap();
    assert!(snap.blobs().all(|b| keep.contains(&b)));
    assert_eq!(store.sweep(&keep).unwrap().removed, 0);
    assert_eq!(
        Snapshot::load(&store, &hash).unwrap(),
        snap,
        "all still there"
    );
}

#[test]
fn a_hash_parses_from_its_own_display_only() {
    let hash = Hash::of(b"x");
    assert_eq!(hash.to_hex().parse::<Hash>().unwrap(), hash);
    assert!("zz".parse::<Hash>().is_err());
    assert!(hash.to_hex().to_uppercase().parse::<Hash>().is_err());
}

#[test]
fn restore_swaps_a_file_and_a_directory_of_the_same_name_both_ways() {
    let ws = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let store = BlobStore::open(data.path()).unwrap();
    let root = ws.path();
    write(root, "a", "a file\n");
    let file = Snapshot::take(root, None, &store, MAX).unwrap();
    let file_tree = tree_hash(root, &[]);
    fs::remove_file(root.join("a")).unwrap();
    write(root, "a/b", "now a directory\n");
    let dir = Snapshot::take(root, Some(&file), &store, MAX).unwrap();
    let dir_tree = tree_hash(root, &[]);
    RestorePlan::new(&dir, &file)
        .unwrap()
        .apply(root, &store)
        .unwrap();
    assert_eq!(tree_hash(root, &[]), file_tree);
    RestorePlan::new(&file, &dir)
        .unwrap()
        .apply(root, &store)
        .unwrap();
    assert_eq!(tree_hash(root, &[]), dir_tree);
}

#[test]
fn a_plan_cut_short_by_a_crash_is_finished_by_applying_it_again() {
    let (ws, _data, store) = setup();
    let root = ws.path();
    write(root, "swap/file_becomes_dir", "a file\n");
    write(root, "swap/dir_becomes_file/inner", "in a dir\n");
    for i in 0..8 {
        write(root, &format!("many/f{i}.txt"), &format!("before {i}\n"));
    }
    age(root);
    let target = Snapshot::take(root, None, &store, MAX).unwrap();
    let target_tree = tree_hash(root, &[]);

    fs::remove_file(root.join("swap/file_becomes_dir")).unwrap();
    write(root, "swap/file_becomes_dir/inner", "now a dir\n");
    fs::remove_dir_all(root.join("swap/dir_becomes_file")).unwrap();
    write(root, "swap/dir_becomes_file", "now a file\n");
    for i in 0..8 {
        write(root, &format!("many/f{i}.txt"), &format!("after {i}\n"));
    }
    fs::remove_file(root.join("README.md")).unwrap();
    symlink("src/main.rs", root.join("src/link")).unwrap();
    let current = Snapshot::take(root, Some(&target), &store, MAX).unwrap();

    let plan = RestorePlan::new(&current, &target).unwrap();
    assert!(plan.write.len() >= 10, "{plan:?}");
    // The journal's copy of the plan, and a crash halfway through its writes that left a
    // temp file beside one of its targets.
    let journaled: RestorePlan =
        serde_json::from_str(&serde_json::to_string(&plan).unwrap()).unwrap();
    assert_eq!(journaled, plan);
    let mut half = plan.clone();
    half.write.truncate(plan.write.len() / 2);
    half.apply(root, &store).unwrap();
    let stale = root.join("many/.f7.txt.amber-restore-4242");
    fs::write(&stale, "left by the crash").unwrap();
    assert_ne!(tree_hash(root, &[]), target_tree);

    journaled.apply(root, &store).unwrap();
    assert!(!stale.exists(), "the stale temp file is left behind");
    assert_eq!(tree_hash(root, &[]), target_tree);
    // Applying a finished plan again changes nothing.
    journaled.apply(root, &store).unwrap();
    assert_eq!(tree_hash(root, &[]), target_tree);
}

#[test]
fn a_restore_temp_name_gives_its_target_only_when_it_has_the_exact_shape() {
    use super::restore::temp_target;
    assert_eq!(
        temp_target(b".a.txt.amber-restore-123"),
        Some(&b"a.txt"[..])
    );
    assert_eq!(temp_target(b"a.txt.amber-restore-123"), None);
    assert_eq!(temp_target(b".a.txt.amber-restore-"), None);
    assert_eq!(temp_target(b".a.txt.amber-restore-12x"), None);
    assert_eq!(temp_target(b"..amber-restore-1"), None);
}

#[test]
fn ignored_children_are_listed_by_metadata_without_entering_ignored_dirs() {
    let (ws, _data, store) = setup();
    let root = ws.path();
    write(root, "src/scratch.log", "ignored, in a walked directory\n");
    write(root, ".git/HEAD", "ref: refs/heads/main\n");
    symlink("nowhere", root.join("link.log")).unwrap();
    let snap = Snapshot::take(root, None, &store, MAX).unwrap();
    let listed: Vec<(String, bool)> = snap
        .ignored
        .iter()
        .map(|i| (i.path.to_string(), i.dir))
        .collect();
    assert_eq!(
        listed,
        [
            ("link.log".to_owned(), false),
            ("src/scratch.log".to_owned(), false),
            ("target".to_owned(), true),
        ]
    );
    let log = &snap.ignored[1];
    assert_eq!(log.size, 31);
    assert_eq!(log.mtime_ns, mtime_of(&root.join("src/scratch.log")));
    assert_eq!(
        snap.ignored[0].size,
        "nowhere".len() as u64,
        "lstat, not stat"
    );
    assert_eq!(snap.ignored[2].mtime_ns, mtime_of(&root.join("target")));
    assert!(snap.get(&"src/scratch.log".into()).is_none());
}

#[test]
fn a_snapshot_written_before_ignored_paths_and_skip_mtimes_still_loads() {
    let json = r#"{"version":1,"maxFileBytes":1024,"clockNs":5,"entries":[],
        "skipped":[{"path":"big.bin","reason":"oversized","size":2048}]}"#;
    let snap: Snapshot = serde_json::from_str(json).unwrap();
    assert!(snap.ignored.is_empty());
    assert_eq!(
        snap.skipped[0].reason,
        SkipReason::Oversized {
            size: 2048,
            mtime_ns: 0
        }
    );
    let round: serde_json::Value = serde_json::to_value(&snap).unwrap();
    assert!(round.get("ignored").is_none(), "{round}");
    assert_eq!(round["skipped"][0]["mtimeNs"], 0);
}

fn paths(list: &[&str]) -> Vec<RelPath> {
    list.iter().map(|p| RelPath::from(*p)).collect()
}

#[test]
fn a_gitignored_file_created_modified_or_deleted_is_a_skipped_change_not_a_diff() {
    let (ws, _data, store) = setup();
    let root = ws.path();
    write(root, "kept.log", "unchanged\n");
    write(root, "src/edited.log", "before\n");
    write(root, "doomed.log", "to be deleted\n");
    age(root);
    let before = Snapshot::take(root, None, &store, MAX).unwrap();
    write(root, "src/edited.log", "after!\n");
    fs::remove_file(root.join("doomed.log")).unwrap();
    write(root, "created.log", "new\n");
    let after = Snapshot::take(root, Some(&before), &store, MAX).unwrap();
    assert_eq!(before.diff(&after), []);
    assert_eq!(
        before.skipped_changes(&after),
        paths(&["created.log", "doomed.log", "src/edited.log"]),
        "an edit that kept the size is told by its mtime"
    );
    assert_eq!(after.skipped_changes(&before).len(), 3, "either way round");
}

#[test]
fn an_unchanged_ignored_or_oversized_path_is_not_a_skipped_change() {
    let (ws, _data, store) = setup();
    let root = ws.path();
    write(root, "notes.log", "ignored\n");
    write(root, "big.bin", &"x".repeat(MAX as usize + 1));
    age(root);
    let before = Snapshot::take(root, None, &store, MAX).unwrap();
    assert_eq!(before.ignored.len(), 2, "{:?}", before.ignored);
    assert_eq!(before.skipped.len(), 1, "{:?}", before.skipped);
    write(root, "src/main.rs", "fn main() { changed(); }\n");
    let after = Snapshot::take(root, Some(&before), &store, MAX).unwrap();
    assert_eq!(before.skipped_changes(&after), []);
    assert_eq!(
        before.diff(&after),
        changes(&[("src/main.rs", ChangeStatus::Modified)])
    );
}

#[test]
fn a_file_created_inside_an_ignored_directory_reports_the_directory() {
    let (ws, _data, store) = setup();
    let root = ws.path();
    let before = Snapshot::take(root, None, &store, MAX).unwrap();
    write(root, "target/fresh.o", "built\n");
    let after = Snapshot::take(root, Some(&before), &store, MAX).unwrap();
    assert_eq!(before.skipped_changes(&after), paths(&["target"]));
    assert_eq!(before.diff(&after), []);
    // Deeper down only the directory holding it changes, and that one is never listed.
    let again = Snapshot::take(root, Some(&after), &store, MAX).unwrap();
    write(root, "target/debug/deeper.o", "built\n");
    let deeper = Snapshot::take(root, Some(&again), &store, MAX).unwrap();
    assert_eq!(again.skipped_changes(&deeper), []);
}

#[test]
fn an_oversized_file_rewritten_at_the_same_size_is_a_skipped_change() {
    let (ws, _data, store) = setup();
    let root = ws.path();
    write(root, "big.bin", &"x".repeat(MAX as usize + 1));
    age(root);
    let before = Snapshot::take(root, None, &store, MAX).unwrap();
    write(root, "big.bin", &"y".repeat(MAX as usize + 1));
    let after = Snapshot::take(root, Some(&before), &store, MAX).unwrap();
    assert!(matches!(
        after.skipped[0].reason,
        SkipReason::Oversized { size, .. } if size == MAX + 1
    ));
    assert_eq!(before.skipped_changes(&after), paths(&["big.bin"]));
    assert_eq!(before.diff(&after), []);
}

#[test]
fn a_file_grown_over_the_limit_is_a_skipped_change_neither_deleted_nor_written_back() {
    let (ws, _data, store) = setup();
    let root = ws.path();
    let before = Snapshot::take(root, None, &store, MAX).unwrap();
    let grown = "y".repeat(MAX as usize + 1);
    write(root, "README.md", &grown);
    write(root, "src/main.rs", "fn main() { changed(); }\n");
    let after = Snapshot::take(root, Some(&before), &store, MAX).unwrap();
    assert_eq!(
        before.diff(&after),
        changes(&[("src/main.rs", ChangeStatus::Modified)]),
        "README.md was not deleted"
    );
    assert_eq!(before.skipped_changes(&after), paths(&["README.md"]));

    let rewind = RestorePlan::new(&after, &before).unwrap();
    assert_eq!(rewind.write.len(), 1, "{rewind:?}");
    assert_eq!(rewind.write[0].path, RelPath::from("src/main.rs"));
    assert_eq!(rewind.delete, []);
    let redo = RestorePlan::new(&before, &after).unwrap();
    assert_eq!(redo.delete, [], "{redo:?}");
    rewind.apply(root, &store).unwrap();
    assert_eq!(fs::read_to_string(root.join("README.md")).unwrap(), grown);
    assert_eq!(
        fs::read_to_string(root.join("src/main.rs")).unwrap(),
        "fn main() {}\n"
    );
}

#[test]
fn restore_never_touches_a_path_either_snapshot_did_not_record() {
    let (ws, _data, store) = setup();
    let root = ws.path();
    write(root, "gen/out.rs", "// generated\n");
    write(root, "becomes_ignored.txt", "recorded at first\n");
    write(root, "holder", "a file at first\n");
    age(root);
    let before = Snapshot::take(root, None, &store, MAX).unwrap();
    assert!(before.get(&"gen/out.rs".into()).is_some());

    // The turn ignores a directory and a file that were recorded, and puts a directory
    // holding an ignored file where a recorded file was.
    write(
        root,
        ".gitignore",
        "target/\n*.log\ngen/\nbecomes_ignored.txt\n",
    );
    write(root, "gen/out.rs", "// regenerated\n");
    write(root, "becomes_ignored.txt", "changed while ignored\n");
    fs::remove_file(root.join("holder")).unwrap();
    write(root, "holder/inside.log", "ignored\n");
    let after = Snapshot::take(root, Some(&before), &store, MAX).unwrap();
    assert_eq!(
        before.diff(&after),
        changes(&[(".gitignore", ChangeStatus::Modified)])
    );
    assert_eq!(
        before.skipped_changes(&after),
        paths(&[
            "becomes_ignored.txt",
            "gen",
            "gen/out.rs",
            "holder",
            "holder/inside.log"
        ])
    );

    let rewind = RestorePlan::new(&after, &before).unwrap();
    let written: Vec<&RelPath> = rewind.write.iter().map(|e| &e.path).collect();
    assert_eq!(written, [&RelPath::from(".gitignore")], "{rewind:?}");
    assert_eq!(rewind.delete, []);
    let redo = RestorePlan::new(&before, &after).unwrap();
    assert_eq!(redo.delete, [], "{redo:?}");
    rewind.apply(root, &store).unwrap();
    assert_eq!(
        fs::read_to_string(root.join("gen/out.rs")).unwrap(),
        "// regenerated\n"
    );
    assert_eq!(
        fs::read_to_string(root.join("becomes_ignored.txt")).unwrap(),
        "changed while ignored\n"
    );
    assert!(root.join("holder/inside.log").exists());
}

#[test]
fn ignored_paths_are_listed_at_every_depth_the_walk_enters_and_returns_to() {
    let ws = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let store = BlobStore::open(data.path()).unwrap();
    let root = ws.path();
    write(root, ".gitignore", "*.log\nbuild/\n");
    for rel in [
        "a/b/c/d.txt",
        "a/b/c/deep.log",
        "a/b/mid.log",
        "a/b/build/x.txt",
        "a/e/f.txt",
        "a/e/g.log",
        "a/z.log",
        "top.log",
        "zz/w.log",
        "zz/v.txt",
    ] {
        write(root, rel, "x\n");
    }
    let snap = Snapshot::take(root, None, &store, MAX).unwrap();
    let listed: Vec<String> = snap.ignored.iter().map(|i| i.path.to_string()).collect();
    assert_eq!(
        listed,
        [
            "a/b/build",
            "a/b/c/deep.log",
            "a/b/mid.log",
            "a/e/g.log",
            "a/z.log",
            "top.log",
            "zz/w.log"
        ]
    );
    let recorded: Vec<String> = snap.entries.iter().map(|e| e.path.to_string()).collect();
    assert_eq!(
        recorded,
        [".gitignore", "a/b/c/d.txt", "a/e/f.txt", "zz/v.txt"]
    );
}

#[test]
fn a_snapshot_stores_only_the_directories_that_changed() {
    let ws = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let store = BlobStore::open(data.path().join("objects")).unwrap();
    let root = ws.path();
    for d in 0..40 {
        for f in 0..25 {
            write(
                root,
                &format!("dir{d}/file{f}.txt"),
                &format!("content {d} {f}\n"),
            );
        }
    }
    let mut first = Snapshot::take(root, None, &store, MAX).unwrap();
    first.save(&store).unwrap();
    let (_, after_first) = store.written();
    write(root, "dir7/file3.txt", "changed\n");
    let mut second = Snapshot::take(root, Some(&first), &store, MAX).unwrap();
    let hash = second.save(&store).unwrap();
    let (blobs, bytes) = store.written();
    let grown = bytes - after_first;
    // The changed file, dir7's tree, the top tree and the root record: a few kilobytes,
    // against a whole-tree manifest of over a hundred.
    let flat = serde_json::to_vec(&second).unwrap().len() as u64;
    assert!(
        grown * 10 < flat,
        "{grown} bytes for one changed file ({flat} flat)"
    );
    assert!(blobs <= 1000 + 41 + 1 + 4, "{blobs}");
    assert_eq!(Snapshot::load(&store, &hash).unwrap(), second);
    assert_eq!(
        first.diff(&second),
        vec![Change {
            path: RelPath::from("dir7/file3.txt"),
            status: ChangeStatus::Modified
        }]
    );
}

#[test]
fn a_version_1_snapshot_still_loads_and_is_reached() {
    let (ws, _data, store) = setup();
    let snap = Snapshot::take(ws.path(), None, &store, MAX).unwrap();
    let mut flat = snap.clone();
    flat.version = 1;
    let hash = store.put(&serde_json::to_vec(&flat).unwrap()).unwrap();
    assert_eq!(Snapshot::load(&store, &hash).unwrap().entries, snap.entries);
    let mut reached = HashSet::new();
    Snapshot::reach(&store, &hash, &mut reached).unwrap();
    assert!(reached.contains(&hash) && snap.blobs().all(|b| reached.contains(&b)));
}

#[test]
fn a_chain_of_deltas_loads_back_every_snapshot_and_collection_keeps_its_links() {
    let (ws, _data, store) = setup();
    let root = ws.path();
    for f in 0..40 {
        write(root, &format!("src/file{f}.rs"), &format!("// {f}\n"));
    }
    let mut last = Snapshot::take(root, None, &store, MAX).unwrap();
    let first_hash = last.save(&store).unwrap();
    let mut saved = vec![(first_hash, last.clone())];
    for step in 0..(super::manifest::MAX_DEPTH as usize + 5) {
        write(
            root,
            &format!("src/file{}.rs", step % 40),
            &format!("// step {step}\n"),
        );
        if step % 7 == 3 {
            fs::remove_file(root.join(format!("src/file{}.rs", (step + 1) % 40))).ok();
        }
        let mut next = Snapshot::take(root, Some(&last), &store, MAX).unwrap();
        let (_, before) = store.written();
        let hash = next.save_after(Some(&last), &store).unwrap();
        let grown = store.written().1 - before;
        let depth = next.stored.0.map(|(_, d)| d);
        if step == super::manifest::MAX_DEPTH as usize {
            assert_eq!(depth, Some(0), "past the longest chain, a full tree again");
        } else {
            assert_eq!(depth, Some((step as u32 % 33) + 1), "step {step}");
            assert!(
                grown < 2048,
                "step {step}: a delta of a file or two took {grown} bytes"
            );
        }
        saved.push((hash, next.clone()));
        last = next;
    }
    for (hash, snap) in &saved {
        let loaded = Snapshot::load(&store, hash).unwrap();
        assert_eq!(loaded.entries, snap.entries);
        assert_eq!(loaded.clock_ns, snap.clock_ns);
    }
    // Keep only the newest: its whole chain (and the full tree under it) survives a sweep.
    let (newest, snap) = saved.last().unwrap();
    let mut keep = HashSet::new();
    Snapshot::reach(&store, newest, &mut keep).unwrap();
    store.sweep(&keep).unwrap();
    assert_eq!(
        Snapshot::load(&store, newest).unwrap().entries,
        snap.entries
    );
    let plan = RestorePlan::new(&Snapshot::new(MAX, 0), snap).unwrap();
    assert!(
        plan.write.iter().all(|e| store.get(&e.hash).is_ok()),
        "contents kept"
    );
}
