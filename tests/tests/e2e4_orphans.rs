//! The reaper, the second line of defence: kill -9 the real daemon while a `bash` call or a
//! `process` background command runs, after killing the group's lifeline watcher (which
//! would otherwise take the group down with the daemon: `tool_lifeline.rs`), see the
//! process survive the crash (so the check means something), restart the daemon on the same
//! dirs and see it gone.

// Test code: a panic with a clear message is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::TestDaemon;
use amber_tests::e2e::{
    Events, connect, done, eventually, new_session, prompt_turn, spawn, within,
};
use amber_tests::e2e3::{bash, call, calls, is_alive, live_processes_with_arg, result_of};
use serde_json::json;

const WITHIN: Duration = Duration::from_secs(10);

/// A `sleep` argument unique to this daemon and `n`, long enough to outlive the test.
fn marker(daemon: &TestDaemon, n: u32) -> String {
    format!("29{n}.{}", daemon.pid())
}

/// The daemon's orphan registry: `$XDG_RUNTIME_DIR/amber/children` of its isolated env.
fn records_dir(daemon: &TestDaemon) -> PathBuf {
    daemon.socket.parent().unwrap().join("run/amber/children")
}

fn records(daemon: &TestDaemon) -> usize {
    std::fs::read_dir(records_dir(daemon)).map_or(0, Iterator::count)
}

/// SIGKILLs whatever is left with `marker`, so a failing test leaves no sleeper behind.
struct Sweep(String);

impl Drop for Sweep {
    fn drop(&mut self) {
        for pid in live_processes_with_arg(&self.0) {
            // SAFETY: kill(2) has no memory-safety preconditions; the pid runs our marker.
            unsafe {
                libc::kill(libc::pid_t::try_from(pid).unwrap(), libc::SIGKILL);
            }
        }
    }
}

/// The process group of `pid` (`/proc/PID/stat` field 5).
fn pgrp_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(2)?
        .parse()
        .ok()
}

/// SIGKILLs the lifeline watcher (`amber-watch`) of the group running `marker`.
async fn kill_watcher(marker: &str) {
    let pids = live_processes_with_arg(marker);
    let group = pids
        .first()
        .and_then(|pid| pgrp_of(*pid))
        .expect("the group of the sleeper");
    let watchers: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|pid| pgrp_of(*pid) == Some(group))
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| comm.trim() == "amber-watch")
        })
        .collect();
    assert_eq!(watchers.len(), 1, "one watcher per tool group");
    // SAFETY: kill(2) has no memory-safety preconditions; the pid is the watcher just found.
    unsafe {
        libc::kill(libc::pid_t::try_from(watchers[0]).unwrap(), libc::SIGKILL);
    }
    eventually("the watcher to die", WITHIN, || !is_alive(watchers[0])).await;
}

/// Kill the group's watcher, then kill -9 the daemon; the process with `marker` must survive
/// that, and die once the daemon is back.
async fn crash_and_restart(daemon: &mut TestDaemon, marker: &str) {
    kill_watcher(marker).await;
    daemon.kill(libc::SIGKILL);
    daemon.wait_exit(WITHIN).expect("the daemon died");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        live_processes_with_arg(marker).len(),
        1,
        "the tool process should outlive a SIGKILLed daemon until the next start"
    );
    assert!(records(daemon) >= 1, "no orphan record was left behind");

    daemon.restart();
    eventually("the orphaned tool process to be killed", WITHIN, || {
        live_processes_with_arg(marker).is_empty()
    })
    .await;
    assert_eq!(records(daemon), 0, "records must be deleted at start");
    let log = daemon.log();
    assert!(
        log.contains("killed a tool process group left by a previous daemon"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bash_call_running_when_the_daemon_is_killed_dies_at_the_next_start() {
    let mock = MockLlm::start(Vec::new()).await;
    let mut daemon = spawn(&mock);
    let marker = marker(&daemon, 1);
    let _sweep = Sweep(marker.clone());
    // `; echo`: bash stays the group leader and the sleep is its child.
    mock.push([
        bash("b_sleep", &format!("sleep {marker}; echo woke")),
        MockTurn::text("never reached"),
        done(),
    ]);
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &session).await;
    within("session/prompt", client.session_prompt(&session, "sleep"))
        .await
        .unwrap();
    events.until("tool_call_started").await;
    eventually("the bash sleep to run", WITHIN, || {
        live_processes_with_arg(&marker).len() == 1
    })
    .await;
    assert_eq!(records(&daemon), 1, "the running call's group is recorded");

    crash_and_restart(&mut daemon, &marker).await;
    let log = daemon.log();
    let reaped = log
        .lines()
        .find(|l| l.contains("killed a tool process group"))
        .unwrap_or_default();
    assert!(
        reaped.contains(&session),
        "the log names the session: {reaped}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_background_process_running_when_the_daemon_is_killed_dies_at_the_next_start() {
    let mock = MockLlm::start(Vec::new()).await;
    let mut daemon = spawn(&mock);
    let marker = marker(&daemon, 2);
    let _sweep = Sweep(marker.clone());
    mock.push([
        calls(vec![
            call(
                "p_start",
                "process",
                &json!({"action": "start", "command": format!("sleep {marker}")}),
            ),
            call("b_quick", "bash", &json!({"command": "echo quick"})),
        ]),
        MockTurn::text("Started."),
        done(),
    ]);
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &session).await;
    let turn = prompt_turn(&client, &mut events, &session, "start it").await;
    assert_eq!(result_of(&turn, "p_start").0, "ok", "{turn:#?}");
    assert_eq!(result_of(&turn, "b_quick").0, "ok", "{turn:#?}");
    eventually("the background sleep to run", WITHIN, || {
        live_processes_with_arg(&marker).len() == 1
    })
    .await;
    // The finished bash call took its record with it; the running process keeps its own.
    assert_eq!(records(&daemon), 1);

    crash_and_restart(&mut daemon, &marker).await;
}
