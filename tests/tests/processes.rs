//! End-to-end: tool processes and how long they live, through the real daemon.
//!
//! - The `process` tool: start, list, output, kill across turns, the same confinement and
//!   classification as bash; a session's background processes die with `session/delete` and
//!   with the daemon's shutdown (checked in /proc; zombies count as dead).
//! - No tool process outlives the daemon: kill -9 the real daemon while a `bash` call and a
//!   `process` background command each run `sleep & sleep` in their group, and every process
//!   of both groups is gone within two seconds, without any daemon start to reap them.
//! - The reaper, the second line of defence: kill -9 the real daemon while a `bash` call or a
//!   `process` background command runs, after killing the group's lifeline watcher (which
//!   would otherwise take the group down with the daemon, as above), see the process survive
//!   the crash (so the check means something), restart the daemon on the same dirs and see it
//!   gone.

use std::path::{Path, PathBuf};
use std::time::Duration;

use amber_mock_llm::{MockLlm, MockTurn};
use amber_proto::Mode;
use amber_tests::TestDaemon;
use amber_tests::steps::{
    Events, connect, done, eventually, new_session, of_type, prompt_turn, spawn, stop_reason,
    within,
};
use amber_tests::tool_calls::{
    Sweep, bash, call, calls, is_alive, live_processes_with_arg, result_of, sleep_marker,
};
use serde_json::{Value, json};

/// How long a process may take to start, or to be gone.
const WITHIN: Duration = Duration::from_secs(10);

fn start(id: &str, command: &str) -> amber_tests::MockToolCall {
    call(
        id,
        "process",
        &json!({"action": "start", "command": command}),
    )
}

fn action(id: &str, action: &str, process: Option<&str>) -> amber_tests::MockToolCall {
    let mut args = json!({ "action": action });
    if let Some(p) = process {
        args["id"] = Value::from(p);
    }
    call(id, "process", &args)
}

#[tokio::test(flavor = "multi_thread")]
async fn start_list_output_kill_across_turns() {
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn(&mock);
    let marker = sleep_marker(&daemon, 1);
    std::fs::create_dir_all(daemon.workspace.join("build")).unwrap();
    let command = format!("echo bg-started-marker; sleep {marker}");
    mock.push([
        calls(vec![
            start("p_start", &command),
            call(
                "p_outside",
                "process",
                &json!({"action": "start", "command": "sleep 1", "cwd": ".."}),
            ),
            start("p_rm", "rm -rf build"),
        ]),
        MockTurn::text("Started it."),
        done(),
    ]);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "start a server").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    let (status, started) = result_of(&turn, "p_start");
    assert_eq!(status, "ok", "{started}");
    assert!(started.contains("started p1"), "{started}");
    // Confined like bash's cwd, and classified like bash (no approver: denied).
    let (status, outside) = result_of(&turn, "p_outside");
    assert_eq!(status, "error", "{outside}");
    assert!(outside.contains("outside the workspace"), "{outside}");
    assert_eq!(result_of(&turn, "p_rm").0, "denied");
    assert_eq!(of_type(&turn, "approval_requested").len(), 1);
    assert!(daemon.workspace.join("build").exists());

    // It outlives the turn.
    eventually("the background sleep to run", WITHIN, || {
        live_processes_with_arg(&marker).len() == 1
    })
    .await;

    mock.push([
        calls(vec![
            action("p_list", "list", None),
            action("p_out", "output", Some("p1")),
        ]),
        calls(vec![action("p_kill", "kill", Some("p1"))]),
        calls(vec![
            action("p_list2", "list", None),
            action("p_out2", "output", Some("p1")),
            action("p_unknown", "output", Some("p9")),
        ]),
        MockTurn::text("Stopped it."),
        done(),
    ]);
    let turn = prompt_turn(&client, &mut events, &sid, "check and stop it").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    let (status, list) = result_of(&turn, "p_list");
    assert_eq!(status, "ok", "{list}");
    let row = list
        .lines()
        .find(|l| l.starts_with("p1"))
        .unwrap_or_default();
    assert!(row.contains("running"), "{list}");
    assert!(row.contains(&format!("sleep {marker}")), "{list}");
    let (status, output) = result_of(&turn, "p_out");
    assert_eq!(status, "ok", "{output}");
    assert!(output.contains("bg-started-marker"), "{output}");
    let (status, killed) = result_of(&turn, "p_kill");
    assert_eq!(status, "ok", "{killed}");
    assert!(killed.starts_with("p1 killed"), "{killed}");
    let (_, list) = result_of(&turn, "p_list2");
    let row = list
        .lines()
        .find(|l| l.starts_with("p1"))
        .unwrap_or_default();
    assert!(!row.contains("running"), "still running after kill: {list}");
    let (_, output) = result_of(&turn, "p_out2");
    assert!(
        !output.contains("bg-started-marker"),
        "output is read once: {output}"
    );
    let (status, unknown) = result_of(&turn, "p_unknown");
    assert_eq!(status, "error", "{unknown}");
    assert!(unknown.contains("p9"), "{unknown}");
    eventually("the killed sleep to be gone", WITHIN, || {
        live_processes_with_arg(&marker).is_empty()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn session_delete_kills_the_sessions_processes_only() {
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn(&mock);
    let (doomed_a, doomed_b, survivor) = (
        sleep_marker(&daemon, 2),
        sleep_marker(&daemon, 3),
        sleep_marker(&daemon, 4),
    );
    let client = connect(&daemon).await;
    let doomed = new_session(&client, &daemon, None).await;
    let kept = new_session(&client, &daemon, None).await;
    for (sid, markers) in [
        (&doomed, vec![doomed_a.clone(), doomed_b.clone()]),
        (&kept, vec![survivor.clone()]),
    ] {
        let starts = markers
            .iter()
            .enumerate()
            .map(|(i, m)| start(&format!("s{i}"), &format!("sleep {m}")))
            .collect();
        mock.push([calls(starts), MockTurn::text("Started."), done()]);
        let mut events = Events::live(&client, sid).await;
        let turn = prompt_turn(&client, &mut events, sid, "start").await;
        for i in 0..markers.len() {
            assert_eq!(result_of(&turn, &format!("s{i}")).0, "ok", "{turn:#?}");
        }
    }
    eventually("all three sleeps to run", WITHIN, || {
        [&doomed_a, &doomed_b, &survivor]
            .iter()
            .all(|m| live_processes_with_arg(m).len() == 1)
    })
    .await;

    within("session/delete", client.session_delete(&doomed))
        .await
        .unwrap();
    eventually("the deleted session's processes to die", WITHIN, || {
        live_processes_with_arg(&doomed_a).is_empty()
            && live_processes_with_arg(&doomed_b).is_empty()
    })
    .await;
    assert_eq!(
        live_processes_with_arg(&survivor).len(),
        1,
        "another session's process was killed"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn daemon_shutdown_kills_every_background_process() {
    let mock = MockLlm::start(Vec::new()).await;
    let mut daemon = spawn(&mock);
    let (first, second) = (sleep_marker(&daemon, 5), sleep_marker(&daemon, 6));
    let client = connect(&daemon).await;
    for marker in [&first, &second] {
        let sid = new_session(&client, &daemon, None).await;
        mock.push([
            calls(vec![start("s", &format!("sleep {marker}"))]),
            MockTurn::text("Started."),
            done(),
        ]);
        let mut events = Events::live(&client, &sid).await;
        let turn = prompt_turn(&client, &mut events, &sid, "start").await;
        assert_eq!(result_of(&turn, "s").0, "ok", "{turn:#?}");
    }
    eventually("both sleeps to run", WITHIN, || {
        live_processes_with_arg(&first).len() == 1 && live_processes_with_arg(&second).len() == 1
    })
    .await;

    within("daemon/shutdown", client.daemon_shutdown())
        .await
        .unwrap();
    let code = tokio::task::block_in_place(|| daemon.wait_exit(WITHIN));
    assert_eq!(code, Some(0), "amberd did not exit cleanly");
    eventually(
        "the background processes to die with the daemon",
        WITHIN,
        || {
            live_processes_with_arg(&first).is_empty()
                && live_processes_with_arg(&second).is_empty()
        },
    )
    .await;
}

// The lifeline: a killed daemon takes its tool process groups along.

/// How long the groups may outlive the daemon (the promise is one second; polled).
const GONE_WITHIN: Duration = Duration::from_secs(2);

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

/// The process group of the shell that wrote its pid (`$$`) to `file`, once it is there.
async fn group_of(file: &Path) -> u32 {
    let mut pgid = None;
    eventually("the shell to write its pid", WITHIN, || {
        pgid = std::fs::read_to_string(file)
            .ok()
            .and_then(|text| text.trim().parse().ok())
            .and_then(pgrp_of);
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
        // The shell and its two sleeps (and, with the lifeline, the group's watcher and the
        // helper that waits for the shell in its cgroup).
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

// The reaper: a group whose watcher was killed dies at the next start.

/// A `sleep` argument unique to this daemon and `n`, long enough to outlive the test.
fn marker(daemon: &TestDaemon, n: u32) -> String {
    format!("29{n}.{}", daemon.pid())
}

/// The daemon's orphan registry: `$XDG_RUNTIME_DIR/amber/children` of its isolated env.
fn records_dir(daemon: &TestDaemon) -> PathBuf {
    daemon.dir.path().join("run/amber/children")
}

fn records(daemon: &TestDaemon) -> usize {
    std::fs::read_dir(records_dir(daemon)).map_or(0, Iterator::count)
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
    // The orphans' records go at start; the start-up sandbox probe's own group has one while
    // it runs (a few milliseconds).
    eventually("the records to be deleted at start", WITHIN, || {
        records(daemon) == 0
    })
    .await;
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
    let _sweep = Sweep(vec![marker.clone()]);
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
    let _sweep = Sweep(vec![marker.clone()]);
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
