//! Checkpoints of one session without the daemon around it: retention and collection, an
//! untakeable checkpoint that never stops the turn and refuses a rewind, a files rewind
//! across an expired checkpoint or a turn run without checkpoints refused, expired content
//! collected in the background while turns go on, rows across a reload.

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use amber_proto::NoCheckpoint;
use amber_store::context::Context;

use super::rewind::{Journal, RewindError};
use super::{Checkpoints, SessionCheckpoints};
use crate::config::{CheckpointsConfig, RetentionConfig};

struct Setup {
    _dir: tempfile::TempDir,
    data: std::path::PathBuf,
    workspace: std::path::PathBuf,
    daemon: Arc<Checkpoints>,
}

fn setup(retention_turns: u32) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let workspace = dir.path().join("ws");
    fs::create_dir_all(data.join("sessions/s1")).unwrap();
    fs::create_dir_all(&workspace).unwrap();
    let config = CheckpointsConfig {
        retention: RetentionConfig {
            turns: retention_turns,
            days: 14,
        },
        ..CheckpointsConfig::default()
    };
    let daemon = Checkpoints::new(config, &data);
    Setup {
        _dir: dir,
        data,
        workspace,
        daemon,
    }
}

fn session(s: &Setup) -> Arc<SessionCheckpoints> {
    Arc::new(SessionCheckpoints::new(
        s.daemon.clone(),
        s.workspace.clone(),
        Some(s.data.join("sessions/s1")),
    ))
}

/// One turn that writes `content` to `path` after its checkpoint.
async fn turn(cps: &Arc<SessionCheckpoints>, id: &str, ws: &Path, path: &str, content: &str) {
    cps.begin_turn(id, 1, id, (0, Context::new().head()));
    cps.before_changes().await;
    fs::write(ws.join(path), content).unwrap();
    cps.end_turn().await;
}

fn blob_files(data: &Path) -> usize {
    let objects = data.join("checkpoints/objects");
    fs::read_dir(objects)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name() != "tmp")
        .map(|shard| fs::read_dir(shard.path()).unwrap().count())
        .sum()
}

/// Waits (bounded) until no background collection is queued or running; how many ran.
async fn collections_done(daemon: &Checkpoints) -> u64 {
    for _ in 0..1000 {
        match daemon.collections() {
            (true, runs) => return runs,
            _ => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
    panic!("a checkpoint collection is still queued or running");
}

#[tokio::test]
async fn retention_forgets_old_checkpoints_and_collection_removes_only_their_content() {
    let s = setup(2);
    // Only the first expiry collects in the background here; the rest is this test's.
    s.daemon.set_collect_interval(Duration::from_secs(3600));
    let cps = session(&s);
    // Each turn rewrites one file: its old content is only in older checkpoints. Forty
    // turns are 80 snapshots, so the delta chains start from a full tree again twice.
    let turns = 40;
    for n in 1..=turns {
        let content = format!("turn {n}\n").repeat(200);
        turn(&cps, &format!("t{n}"), &s.workspace, "f.txt", &content).await;
    }
    let listed: Vec<String> = cps.list(false).into_iter().map(|c| c.turn_id).collect();
    assert_eq!(listed, ["t39", "t40"], "the last two are kept");
    let numbers: Vec<u32> = cps.list(false).into_iter().map(|c| c.turn).collect();
    assert_eq!(numbers, [39, 40], "numbers count every turn of the history");

    for _ in 0..1000 {
        if s.daemon.collections().1 == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(s.daemon.collections().1, 1, "the first expiry collected");
    let before = blob_files(&s.data);
    let swept = s.daemon.collect(&s.data.join("sessions")).unwrap();
    // The early turns' contents and snapshots are reached by no kept chain any more.
    assert!(swept.removed >= 20, "{swept:?}");
    assert_eq!(blob_files(&s.data), before - swept.removed);
    // What is kept still works: the kept turns' diffs read their blobs.
    for kept in ["t39", "t40"] {
        let diff = cps.diff_blocking(kept, None).unwrap();
        assert!(diff.diff.contains("+++ b/f.txt"), "{}", diff.diff);
    }
    assert!(cps.diff_blocking("t1", None).is_err(), "forgotten");
    let plan = cps
        .plan_files(&cps.rows(), cps.rows().len() - 2, false)
        .unwrap();
    assert_eq!(
        plan.restored,
        ["f.txt"],
        "the kept checkpoint can be restored"
    );

    // A deleted session's content goes at the next collection.
    fs::remove_dir_all(s.data.join("sessions/s1")).unwrap();
    s.daemon.collect(&s.data.join("sessions")).unwrap();
    assert_eq!(blob_files(&s.data), 0);
}

#[tokio::test]
async fn an_untakeable_checkpoint_never_stops_the_turn_and_says_why() {
    let s = setup(200);
    // The store cannot be opened: its directory is a file.
    fs::create_dir_all(s.data.join("checkpoints")).unwrap();
    fs::write(s.data.join("checkpoints/objects"), "not a directory").unwrap();
    let cps = session(&s);
    turn(&cps, "t1", &s.workspace, "a.txt", "a\n").await;
    let rows = cps.list(false);
    assert_eq!(rows.len(), 1);
    let why = rows[0].incomplete.clone().expect("incomplete");
    assert!(why.contains("checkpoint store"), "{why}");
    let refused = cps.plan_files(&cps.rows(), 0, false).unwrap_err();
    assert!(refused.to_string().contains("incomplete"), "{refused}");
    assert_eq!(
        fs::read_to_string(s.workspace.join("a.txt")).unwrap(),
        "a\n"
    );
}

#[tokio::test]
async fn rows_survive_a_reload_and_the_next_snapshot_is_incremental() {
    let s = setup(200);
    fs::write(s.workspace.join("big.txt"), "x".repeat(10_000)).unwrap();
    {
        let cps = session(&s);
        turn(&cps, "t1", &s.workspace, "a.txt", "a\n").await;
    }
    let cps = session(&s);
    assert_eq!(cps.list(false).len(), 1);
    assert_eq!(cps.list(false)[0].changed.len(), 1);
    let written_before = s.daemon.store().unwrap().written();
    turn(&cps, "t2", &s.workspace, "a.txt", "b\n").await;
    let (blobs, _) = s.daemon.store().unwrap().written();
    // The changed file, the top directory's new tree, and the two snapshots' root records:
    // big.txt is not stored again, nor is a whole-tree manifest.
    assert!(
        blobs - written_before.0 <= 4,
        "{blobs} vs {written_before:?}"
    );
    let changed = &cps.list(false)[1].changed;
    assert_eq!(changed.len(), 1);
    assert_eq!(changed[0].path, "a.txt");
}

#[tokio::test]
async fn without_a_store_nothing_is_recorded_and_disabled_checkpoints_still_record_turns() {
    let s = setup(200);
    assert!(!SessionCheckpoints::new(s.daemon.clone(), s.workspace.clone(), None).enabled());
    let off = Checkpoints::new(
        CheckpointsConfig {
            enabled: false,
            ..CheckpointsConfig::default()
        },
        &s.data,
    );
    let cps = Arc::new(SessionCheckpoints::new(
        off,
        s.workspace.clone(),
        Some(s.data.join("sessions/s1")),
    ));
    assert!(
        cps.enabled() && !cps.snapshots(),
        "turns recorded, no snapshots"
    );
    turn(&cps, "t1", &s.workspace, "a.txt", "a\n").await;
    assert!(cps.list(false).is_empty(), "no checkpoint");
    assert_eq!(
        cps.rows().len(),
        1,
        "the turn is known (conversation rewind, fork)"
    );
    assert!(!s.data.join("checkpoints").exists(), "nothing is stored");
}

#[tokio::test]
async fn amber_s_own_data_directory_inside_the_workspace_is_never_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().canonicalize().unwrap().join("ws");
    let data = workspace.join(".amber-data");
    fs::create_dir_all(data.join("sessions/s1")).unwrap();
    let daemon = Checkpoints::new(CheckpointsConfig::default(), &data);
    let cps = Arc::new(SessionCheckpoints::new(
        daemon,
        workspace.clone(),
        Some(data.join("sessions/s1")),
    ));
    turn(&cps, "t1", &workspace, "a.txt", "a\n").await;
    turn(&cps, "t2", &workspace, "a.txt", "b\n").await;
    for row in cps.list(false) {
        let paths: Vec<&str> = row.changed.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(paths, ["a.txt"], "{row:?}");
        assert!(row.skipped.is_empty(), "{row:?}");
    }
    let plan = cps.plan_files(&cps.rows(), 0, false).unwrap();
    assert_eq!(plan.restored, ["a.txt"]);
}

/// A turn that calls no file-changing tool: its row, no checkpoint.
async fn talk(cps: &Arc<SessionCheckpoints>, id: &str) {
    cps.begin_turn(id, 1, id, (0, Context::new().head()));
    cps.end_turn().await;
}

#[tokio::test]
async fn a_files_rewind_across_an_expired_checkpoint_is_refused_naming_the_turn() {
    let s = setup(2);
    let cps = session(&s);
    turn(&cps, "t1", &s.workspace, "f1.txt", "1\n").await;
    turn(&cps, "t2", &s.workspace, "f2.txt", "2\n").await;
    talk(&cps, "t3").await;
    turn(&cps, "t4", &s.workspace, "f4.txt", "4\n").await;
    turn(&cps, "t5", &s.workspace, "f5.txt", "5\n").await;
    let rows = cps.rows();
    let expired: Vec<&str> = rows
        .iter()
        .filter(|r| r.expired)
        .map(|r| r.turn_id.as_str())
        .collect();
    assert_eq!(expired, ["t1", "t2"], "retention keeps the last two");
    let listed: Vec<(u32, Option<NoCheckpoint>)> = cps
        .list(true)
        .iter()
        .map(|r| (r.turn, r.checkpoint))
        .collect();
    assert_eq!(
        listed,
        [
            (1, Some(NoCheckpoint::Expired)),
            (2, Some(NoCheckpoint::Expired)),
            (3, Some(NoCheckpoint::None)),
            (4, None),
            (5, None),
        ],
        "every turn, with why it has no checkpoint"
    );
    let shown: Vec<u32> = cps.list(false).iter().map(|r| r.turn).collect();
    assert_eq!(shown, [4, 5], "without `all`: the checkpoints only");
    assert!(
        cps.list(true)[0].changed.is_empty(),
        "an expired row names no changes"
    );

    for (from, named) in [(0, "turn 1 (t1)"), (1, "turn 2 (t2)")] {
        let refused = cps.plan_files(&rows, from, false).unwrap_err();
        let why = refused.to_string();
        assert!(matches!(refused, RewindError::Refused(_)), "{why}");
        assert!(why.contains(named) && why.contains("expired"), "{why}");
        assert!(why.contains("files: false"), "says what still works: {why}");
    }
    for n in [1, 2, 4, 5] {
        assert!(s.workspace.join(format!("f{n}.txt")).exists(), "untouched");
    }
    // From the turn without a checkpoint on, every change is still recorded.
    let plan = cps.plan_files(&rows, 2, false).unwrap();
    assert_eq!(plan.restored, ["f4.txt", "f5.txt"]);
    assert!(plan.conflicts.is_empty());
}

#[tokio::test]
async fn a_files_rewind_across_a_turn_run_without_checkpoints_is_refused() {
    let s = setup(200);
    let off = Checkpoints::new(
        CheckpointsConfig {
            enabled: false,
            ..CheckpointsConfig::default()
        },
        &s.data,
    );
    {
        let cps = Arc::new(SessionCheckpoints::new(
            off,
            s.workspace.clone(),
            Some(s.data.join("sessions/s1")),
        ));
        turn(&cps, "t1", &s.workspace, "a.txt", "a\n").await;
    }
    // Enabled again (a restart with another config): the same session goes on.
    let cps = session(&s);
    turn(&cps, "t2", &s.workspace, "b.txt", "b\n").await;
    let rows = cps.rows();
    assert_eq!(rows.len(), 2);
    assert!(rows[0].no_snapshots && !rows[1].no_snapshots, "{rows:?}");
    assert_eq!(
        cps.list(true)[0].checkpoint,
        Some(NoCheckpoint::Disabled),
        "{:?}",
        cps.list(true)
    );
    let why = cps.plan_files(&rows, 0, false).unwrap_err().to_string();
    assert!(
        why.contains("turn 1 (t1)") && why.contains("checkpoints disabled"),
        "{why}"
    );
    assert!(s.workspace.join("a.txt").exists() && s.workspace.join("b.txt").exists());
    let plan = cps.plan_files(&rows, 1, false).unwrap();
    assert_eq!(plan.restored, ["b.txt"]);
}

#[tokio::test]
async fn expired_content_is_collected_in_the_background_while_turns_go_on() {
    let s = setup(2);
    // Every expiry collects: each collection runs beside the next turn's snapshots.
    s.daemon.set_collect_interval(Duration::ZERO);
    let cps = session(&s);
    let content = |n: u32| format!("turn {n}\n").repeat(200);
    for n in 1..=40 {
        turn(&cps, &format!("t{n}"), &s.workspace, "f.txt", &content(n)).await;
    }
    let runs = collections_done(&s.daemon).await;
    assert!(runs >= 1, "expiry collected");
    let left = s.daemon.collect(&s.data.join("sessions")).unwrap();
    assert_eq!(left.removed, 0, "nothing was left to collect: {left:?}");

    // Nothing a kept checkpoint or the next snapshot needs went: the kept turn rewinds.
    let rows = cps.rows();
    let last = rows.len() - 1;
    let plan = cps.plan_files(&rows, last, false).unwrap();
    assert_eq!(plan.restored, ["f.txt"]);
    let journal = Journal::new("t40", Some(&plan), None, 0, 0);
    cps.apply_journal(&journal, false).unwrap();
    assert_eq!(
        fs::read_to_string(s.workspace.join("f.txt")).unwrap(),
        content(39)
    );
    turn(&cps, "t41", &s.workspace, "g.txt", "g\n").await;
    let diff = cps.diff_blocking("t41", None).unwrap();
    assert!(diff.diff.contains("+++ b/g.txt"), "{}", diff.diff);
}

#[tokio::test]
async fn expiry_collects_at_most_once_an_interval_and_a_deletion_does_not_wait() {
    let s = setup(1);
    let cps = session(&s);
    turn(&cps, "t1", &s.workspace, "a.txt", "1\n").await;
    assert_eq!(collections_done(&s.daemon).await, 0, "nothing expired yet");
    turn(&cps, "t2", &s.workspace, "a.txt", "2\n").await;
    assert_eq!(
        collections_done(&s.daemon).await,
        1,
        "the first expiry collects"
    );
    turn(&cps, "t3", &s.workspace, "a.txt", "3\n").await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        s.daemon.collections(),
        (false, 1),
        "the next one waits for the interval"
    );
    // A deletion's collection (or the start's) runs now, and covers the queued one.
    s.daemon.collect_soon(s.data.join("sessions"), false);
    assert_eq!(collections_done(&s.daemon).await, 2);
}

#[tokio::test]
async fn a_new_sessions_first_checkpoint_reuses_the_workspaces_newest_snapshot() {
    let s = setup(200);
    for i in 0..50 {
        fs::write(s.workspace.join(format!("f{i}.txt")), format!("{i}\n")).unwrap();
    }
    turn(&session(&s), "t1", &s.workspace, "a.txt", "a\n").await;
    // Edited long ago, as a workspace mostly is: no file shares its snapshot's clock tick.
    let past = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    for entry in fs::read_dir(&s.workspace).unwrap().flatten() {
        let file = fs::File::options().write(true).open(entry.path()).unwrap();
        file.set_modified(past).unwrap();
    }
    turn(&session(&s), "t2", &s.workspace, "b.txt", "b\n").await;
    // Another session of the same workspace: its own rows, none of the first one's.
    fs::create_dir_all(s.data.join("sessions/s2")).unwrap();
    let other = Arc::new(SessionCheckpoints::new(
        s.daemon.clone(),
        s.workspace.clone(),
        Some(s.data.join("sessions/s2")),
    ));
    let (_, hash) = other.snapshot_now().unwrap();
    let snap = amber_store::Snapshot::load(s.daemon.store().unwrap(), &hash).unwrap();
    // Only b.txt may be read again: written in t2, it can share that snapshot's clock tick.
    assert!(
        snap.stats.files_read <= 1 && snap.stats.reused >= 51,
        "nothing changed since the other session's last checkpoint: {:?}",
        snap.stats
    );
}

#[tokio::test]
async fn a_sweep_drops_the_stat_cache_pointer_to_what_it_removes() {
    let s = setup(200);
    turn(&session(&s), "t1", &s.workspace, "a.txt", "a\n").await;
    let cache = s.daemon.stat_cache();
    let newest = cache
        .get(&s.workspace)
        .expect("the workspace's newest snapshot");
    s.daemon.collect(&s.data.join("sessions")).unwrap();
    assert_eq!(
        cache.get(&s.workspace),
        Some(newest),
        "kept: a row names it"
    );
    fs::remove_dir_all(s.data.join("sessions/s1")).unwrap();
    s.daemon.collect(&s.data.join("sessions")).unwrap();
    assert_eq!(
        cache.get(&s.workspace),
        None,
        "its session is gone, so is its content"
    );
    assert_eq!(blob_files(&s.data), 0);
}

#[tokio::test]
async fn a_local_workspace_is_walked_once_and_then_listed_again_only_where_it_changed() {
    let s = setup(200);
    for d in 0..20 {
        fs::create_dir_all(s.workspace.join(format!("d{d}"))).unwrap();
        for f in 0..10 {
            fs::write(s.workspace.join(format!("d{d}/f{f}")), "x\n").unwrap();
        }
    }
    let cps = session(&s);
    turn(&cps, "t1", &s.workspace, "d1/f1", "one\n").await;
    turn(&cps, "t2", &s.workspace, "d2/new", "two\n").await;
    turn(&cps, "t3", &s.workspace, "d3/f3", "three\n").await;
    assert_eq!(
        cps.walks(),
        Some(1),
        "the first snapshot walked; the rest listed"
    );
    let rows = cps.list(false);
    let changed: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.changed.iter().map(|c| c.path.clone()).collect())
        .collect();
    assert_eq!(changed, [["d1/f1"], ["d2/new"], ["d3/f3"]]);
    // A rewind drops the watch: the next snapshot walks again, and is right.
    cps.forget_from("t3");
    turn(&cps, "t4", &s.workspace, "d4/f4", "four\n").await;
    assert_eq!(cps.walks(), Some(1), "a new watch, walked once");
    let last = cps.list(false).pop().unwrap();
    let paths: Vec<&str> = last.changed.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(paths, ["d4/f4"]);
}
