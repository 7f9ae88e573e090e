//! The orphan registry against real processes: records come and go with their groups, and
//! at start only a group that is provably the recorded one is killed.

// The registry is tried against processes the test starts itself.
#![allow(clippy::disallowed_methods)]

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::*;

/// `sleep 30` leading its own process group.
fn group_leader() -> (Child, libc::pid_t) {
    let child = Command::new("sleep")
        .arg("30")
        .process_group(0)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    (child, pid)
}

/// A pid that is gone (spawned and reaped).
fn dead_pid() -> libc::pid_t {
    let mut child = Command::new("true").spawn().unwrap();
    child.wait().unwrap();
    libc::pid_t::try_from(child.id()).unwrap()
}

/// The registry as a daemon that has since died would have written it.
fn dead_daemon(dir: &Path) -> ChildRegistry {
    let live = ChildRegistry::open(dir).unwrap();
    ChildRegistry {
        owner_pid: dead_pid(),
        owner_start_time: 1,
        ..live
    }
}

fn records(dir: &Path) -> Vec<Record> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| serde_json::from_slice(&fs::read(e.unwrap().path()).unwrap()).unwrap())
        .collect()
}

fn write_record(dir: &Path, record: &Record) {
    let path = dir.join(format!("{}-{}.json", record.pgid, record.start_time));
    fs::write(path, serde_json::to_vec(record).unwrap()).unwrap();
}

/// Waits (bounded) for the child to end; its exit status.
fn ended(child: &mut Child) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

fn still_running(child: &mut Child) -> bool {
    std::thread::sleep(Duration::from_millis(50));
    child.try_wait().unwrap().is_none()
}

#[test]
fn a_record_holds_the_leader_identity_and_goes_with_its_registration() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("children");
    let registry = ChildRegistry::open(&dir).unwrap();
    let (mut child, pid) = group_leader();
    let registration = registry.record(pid, "s-1").unwrap();
    let written = records(&dir);
    assert_eq!(written.len(), 1);
    let stat = stat_of(&pid.to_string()).unwrap();
    assert_eq!(written[0].pgid, pid);
    assert_eq!(written[0].start_time, stat.start_time);
    assert_eq!(written[0].sid, stat.sid);
    assert_eq!(written[0].session, "s-1");
    assert_eq!(
        written[0].owner_pid,
        i32::try_from(std::process::id()).unwrap()
    );
    drop(registration);
    assert!(records(&dir).is_empty());
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn the_registry_dir_is_private() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("amber/children");
    ChildRegistry::open(&dir).unwrap();
    assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
    let open = tmp.path().join("open");
    fs::create_dir(&open).unwrap();
    fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    assert!(ChildRegistry::open(&open).is_err());
}

#[test]
fn a_group_left_by_a_dead_daemon_is_killed_and_its_record_deleted() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("children");
    let (mut child, pid) = group_leader();
    // The dead daemon never dropped it: the record stays on disk.
    std::mem::forget(dead_daemon(&dir).record(pid, "s-orphan").unwrap());
    let reaped = ChildRegistry::open(&dir).unwrap().reap_orphans();
    assert_eq!(
        reaped,
        vec![Reaped {
            pgid: pid,
            session: "s-orphan".to_owned()
        }]
    );
    let status = ended(&mut child).expect("the orphan was not killed");
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    assert!(records(&dir).is_empty());
}

#[test]
fn a_stale_record_whose_leader_is_gone_kills_nothing_and_is_deleted() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("children");
    let registry = ChildRegistry::open(&dir).unwrap();
    let gone = dead_pid();
    write_record(
        &dir,
        &Record {
            pgid: gone,
            start_time: 1,
            sid: 1,
            session: "s-gone".to_owned(),
            owner_pid: dead_pid(),
            owner_start_time: 1,
            boot_id: registry.boot_id.clone(),
        },
    );
    fs::write(dir.join("garbage.json"), b"{not json").unwrap();
    assert!(registry.reap_orphans().is_empty());
    assert!(fs::read_dir(&dir).unwrap().next().is_none());
}

#[test]
fn a_leader_with_another_start_time_is_a_reused_pid_and_survives() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("children");
    let registry = ChildRegistry::open(&dir).unwrap();
    let (mut child, pid) = group_leader();
    let stat = stat_of(&pid.to_string()).unwrap();
    write_record(
        &dir,
        &Record {
            pgid: pid,
            start_time: stat.start_time + 1,
            sid: stat.sid,
            session: "s-reused".to_owned(),
            owner_pid: dead_pid(),
            owner_start_time: 1,
            boot_id: registry.boot_id.clone(),
        },
    );
    assert!(registry.reap_orphans().is_empty());
    assert!(still_running(&mut child), "an unrelated process was killed");
    assert!(records(&dir).is_empty());
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn records_of_another_boot_kill_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("children");
    let registry = ChildRegistry::open(&dir).unwrap();
    let (mut child, pid) = group_leader();
    let stale = ChildRegistry {
        boot_id: "another-boot".to_owned(),
        ..dead_daemon(&dir)
    };
    std::mem::forget(stale.record(pid, "s-old").unwrap());
    assert!(registry.reap_orphans().is_empty());
    assert!(still_running(&mut child));
    assert!(records(&dir).is_empty());
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn records_of_a_live_daemon_are_left_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("children");
    // This test process plays the other daemon, still running.
    let other = ChildRegistry::open(&dir).unwrap();
    let (mut child, pid) = group_leader();
    let registration = other.record(pid, "s-live").unwrap();
    assert!(ChildRegistry::open(&dir).unwrap().reap_orphans().is_empty());
    assert!(still_running(&mut child));
    assert_eq!(records(&dir).len(), 1);
    drop(registration);
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn what_a_dead_leader_left_in_its_group_is_killed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("children");
    let mut shell = Command::new("/bin/bash")
        .args(["-c", "sleep 30 & echo $!; read -r _"])
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pgid = libc::pid_t::try_from(shell.id()).unwrap();
    let mut line = String::new();
    io::BufRead::read_line(
        &mut io::BufReader::new(shell.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let sleeper = line.trim().to_owned();
    std::mem::forget(dead_daemon(&dir).record(pgid, "s-leaderless").unwrap());
    // The leader ends (and is reaped); its background sleep stays in the group.
    drop(shell.stdin.take());
    shell.wait().unwrap();
    assert!(stat_of(&sleeper).is_some_and(|s| s.pgrp == pgid && s.state != 'Z'));

    let reaped = ChildRegistry::open(&dir).unwrap().reap_orphans();
    assert_eq!(reaped.len(), 1);
    let deadline = Instant::now() + Duration::from_secs(5);
    // Reparented away from us, it may linger as a zombie: that counts as dead.
    while stat_of(&sleeper).is_some_and(|s| s.state != 'Z') {
        assert!(Instant::now() < deadline, "the leftover sleep survived");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn the_dir_is_under_the_runtime_dir_else_tmp() {
    let runtime = |key: &str| (key == "XDG_RUNTIME_DIR").then(|| OsString::from("/run/user/7"));
    assert_eq!(
        registry_dir(runtime, 7),
        PathBuf::from("/run/user/7/amber/children")
    );
    assert_eq!(
        registry_dir(|_| None, 7),
        PathBuf::from("/tmp/amber-7/children")
    );
}
