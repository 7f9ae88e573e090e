//! No tool process outlives the daemon: kill -9 the real daemon while a `bash` call and a
//! `process` background command each run `sleep & sleep` in their group, and every process
//! of both groups is gone within two seconds, without any daemon start to reap them.

// Test code: a panic with a clear message is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use amber_mock_llm::{MockLlm, MockTurn};
use amber_proto::Mode;
use amber_tests::e2e::{Events, connect, eventually, new_session, spawn, within};
use amber_tests::e2e3::{call, calls, is_alive, live_processes_with_arg};
use serde_json::json;

/// How long the groups may outlive the daemon (the promise is one second; polled).
const GONE_WITHIN: Duration = Duration::from_secs(2);
const WITHIN: Duration = Duration::from_secs(10);

/// SIGKILLs whatever is left with `marker`, so a failing test leaves no sleeper behind.
struct Sweep(Vec<String>);

impl Drop for Sweep {
    fn drop(&mut self) {
        for marker in &self.0 {
            for pid in live_processes_with_arg(marker) {
                // SAFETY: kill(2) has no memory-safety preconditions; the pid runs our marker.
                unsafe {
                    libc::kill(libc::pid_t::try_from(pid).unwrap(), libc::SIGKILL);
                }
            }
        }
    }
}

/// Live (non-zombie) processes whose process group is `pgid`.
fn group_members(pgid: u32) -> Vec<u32> {
    let mut members = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) S ppid pgrp …`: fields after the last ')'.
        let pgrp = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(2))
            .and_then(|field| field.parse::<u32>().ok());
        if pgrp == Some(pgid) && is_alive(pid) {
            members.push(pid);
        }
    }
    members
}

/// The pid the shell wrote to `file` (its `$$`: the group id), once it is there.
async fn group_of(file: &Path) -> u32 {
    let mut pgid = None;
    eventually("the shell to write its pid", WITHIN, || {
        pgid = std::fs::read_to_string(file)
            .ok()
            .and_then(|text| text.trim().parse().ok());
        pgid.is_some()
    })
    .await;
    pgid.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn no_tool_process_outlives_a_killed_daemon() {
    let mock = MockLlm::start(Vec::new()).await;
    let mut daemon = spawn(&mock);
    let bash_marker = format!("300.1{}", daemon.pid());
    let bg_marker = format!("300.2{}", daemon.pid());
    let _sweep = Sweep(vec![bash_marker.clone(), bg_marker.clone()]);
    let command = |file: &str, marker: &str| {
        format!("echo $$ > {file}.tmp && mv {file}.tmp {file}; sleep {marker} & sleep {marker}")
    };
    mock.push([
        calls(vec![
            call(
                "p_sleep",
                "process",
                &json!({"action": "start", "command": command("bg.pid", &bg_marker)}),
            ),
            call(
                "b_sleep",
                "bash",
                &json!({"command": command("bash.pid", &bash_marker)}),
            ),
        ]),
        MockTurn::text("never reached"),
    ]);
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, Some(Mode::Yolo)).await;
    let mut events = Events::live(&client, &session).await;
    within("session/prompt", client.session_prompt(&session, "sleep"))
        .await
        .unwrap();
    events.until("tool_call_started").await;
    let bash_group = group_of(&daemon.workspace.join("bash.pid")).await;
    let bg_group = group_of(&daemon.workspace.join("bg.pid")).await;
    eventually("both sleeps of both groups to run", WITHIN, || {
        live_processes_with_arg(&bash_marker).len() == 2
            && live_processes_with_arg(&bg_marker).len() == 2
    })
    .await;
    for group in [bash_group, bg_group] {
        // The shell and its two sleeps (and, with the lifeline, the group's watcher).
        assert!(
            group_members(group).len() >= 3,
            "{:?}",
            group_members(group)
        );
    }

    daemon.kill(libc::SIGKILL);
    daemon.wait_exit(WITHIN).expect("the daemon died");
    eventually(
        "every tool process to die with the daemon",
        GONE_WITHIN,
        || group_members(bash_group).is_empty() && group_members(bg_group).is_empty(),
    )
    .await;
    assert!(live_processes_with_arg(&bash_marker).is_empty());
    assert!(live_processes_with_arg(&bg_marker).is_empty());
}
