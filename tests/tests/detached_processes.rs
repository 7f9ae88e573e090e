//! End-to-end: every process a session starts dies with what started it, detached or not.
//! Through the real daemon in yolo, commands leave their process group the ways a shell
//! offers — `setsid -f`, a double fork, `nohup … &` under `setsid`, a Python daemon that
//! forks, calls `setsid` and forks again — and each such process is gone once its `bash`
//! call has ended, once its background `process` is killed, and once the daemon is killed
//! (by the lifeline watcher; and, when the watcher was killed first, at the next start).
//! Each tool's process tree lives in a cgroup of its own (`tools::cgroup`).

use std::time::Duration;

use amber_mock_llm::{MockLlm, MockTurn};
use amber_proto::Mode;
use amber_tests::TestDaemon;
use amber_tests::steps::{
    Events, connect, done, eventually, new_session, prompt_turn, spawn, within,
};
use amber_tests::tool_calls::{Sweep, call, calls, is_alive, live_processes_with_arg, result_of};
use serde_json::json;

const GONE_WITHIN: Duration = Duration::from_secs(5);

/// The ways to leave the process group: `{M}` is the sleeper's unique argument.
const DETACH: &[(&str, &str)] = &[
    ("setsid_f", "setsid -f sleep {M}"),
    ("double_fork", "( sh -c 'setsid sleep {M} &' & )"),
    ("nohup_setsid", "nohup setsid sleep {M} > /dev/null 2>&1 &"),
    (
        "python_daemon",
        "python3 -c \"import os\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        os.execvp('sleep', ['sleep', '{M}'])\n    os._exit(0)\nos.wait()\"",
    ),
];

fn marker(daemon: &TestDaemon, n: usize) -> String {
    format!("4{n}.{}", daemon.pid())
}

fn cgroup_base_exists(daemon: &TestDaemon) -> bool {
    daemon.log().contains("tool process trees get cgroups")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_detached_process_dies_when_its_bash_call_ends() {
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn(&mock);
    let markers: Vec<String> = (0..DETACH.len()).map(|n| marker(&daemon, n)).collect();
    let _sweep = Sweep(markers.clone());
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, Some(Mode::Yolo)).await;
    let mut events = Events::live(&client, &session).await;
    let detach = DETACH
        .iter()
        .zip(&markers)
        .map(|((id, cmd), m)| {
            let wait = format!(
                "sleep 0.3; for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done \
                 | grep -q '^sleep {m} ' && echo detached-ok"
            );
            call(
                id,
                "bash",
                &json!({ "command": format!("{}; {wait}", cmd.replace("{M}", m)) }),
            )
        })
        .collect();
    mock.push(vec![calls(detach), MockTurn::text("done"), done()]);
    let turn = prompt_turn(&client, &mut events, &session, "detach").await;
    assert!(cgroup_base_exists(&daemon), "{}", daemon.log());
    for (id, _) in DETACH {
        let (status, output) = result_of(&turn, id);
        assert!(
            output.contains("detached-ok"),
            "{id} ({status}) did not start: {output}"
        );
    }
    for (m, (id, _)) in markers.iter().zip(DETACH) {
        eventually(
            &format!("{id}'s detached sleeper to die"),
            GONE_WITHIN,
            || live_processes_with_arg(m).is_empty(),
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_detached_process_dies_with_its_background_process_and_with_the_daemon() {
    let mock = MockLlm::start(Vec::new()).await;
    let mut daemon = spawn(&mock);
    let (killed, crashed) = (marker(&daemon, 7), marker(&daemon, 8));
    let _sweep = Sweep(vec![killed.clone(), crashed.clone()]);
    let start = |id: &str, m: &str| {
        call(
            id,
            "process",
            &json!({"action": "start", "command": format!("setsid -f sleep {m}; sleep {m}")}),
        )
    };
    let client = connect(&daemon).await;
    let session = new_session(&client, &daemon, Some(Mode::Yolo)).await;
    let mut events = Events::live(&client, &session).await;
    mock.push(vec![
        calls(vec![
            start("p_killed", &killed),
            start("p_crashed", &crashed),
        ]),
        MockTurn::text("started"),
        done(),
    ]);
    let turn = prompt_turn(&client, &mut events, &session, "start").await;
    eventually("both sleepers of both processes", GONE_WITHIN, || {
        live_processes_with_arg(&killed).len() == 2 && live_processes_with_arg(&crashed).len() == 2
    })
    .await;
    // `process kill` of the first: its detached sleeper goes too.
    let (_, output) = result_of(&turn, "p_killed");
    // "started p1 (pid N): …"
    let id = output
        .strip_prefix("started ")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no process id in {output}"))
        .to_owned();
    mock.push(vec![
        calls(vec![call(
            "kill",
            "process",
            &json!({"action": "kill", "id": id}),
        )]),
        MockTurn::text("killed"),
        done(),
    ]);
    let turn = prompt_turn(&client, &mut events, &session, "kill it").await;
    let (status, output) = result_of(&turn, "kill");
    assert_eq!(status, "ok", "{output}");
    eventually(
        "the killed process's detached sleeper to die",
        GONE_WITHIN,
        || live_processes_with_arg(&killed).is_empty(),
    )
    .await;
    assert_eq!(live_processes_with_arg(&crashed).len(), 2);

    // kill -9 of the daemon: the watcher kills the cgroup, detached sleeper included.
    let survivors: Vec<u32> = live_processes_with_arg(&crashed);
    daemon.kill(libc::SIGKILL);
    daemon.wait_exit(GONE_WITHIN).expect("the daemon died");
    eventually(
        "the detached sleeper to die with the daemon",
        GONE_WITHIN,
        || survivors.iter().all(|pid| !is_alive(*pid)),
    )
    .await;
    within("restart", async { daemon.restart() }).await;
}
