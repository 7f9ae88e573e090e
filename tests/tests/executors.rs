//! End-to-end: sessions whose tools run on an executor (`amber-exec`) while amberd keeps the
//! conversation.
//!
//! - A session on `executor:NAME` runs `bash` and the file tools in the executor's
//!   processes: the command's parent is `amber-exec`, not `amberd`; `session/get` and the
//!   `environment_connected` event name the executor.
//! - The executor applies the OS sandbox itself: a write outside the workspace is refused.
//! - Its relay killed mid-command (the link dropped): amberd attaches again to the same
//!   executor, the output is complete and in order, `environment_lost` and
//!   `environment_resumed` are published.
//! - The executor killed mid-command: the call fails with `[executor lost]`, the turn ends
//!   `interrupted`, and the next turn runs on a new executor.
//! - amberd killed (-9) while a background process runs on the executor: started again, the
//!   session attaches to the same executor (`environment_resumed`) and the process is still
//!   there, its output whole.
//! - The executor's host in a network namespace of the test's own: its link cut mid-stream
//!   (and the SSH connection given up meanwhile), then restored: amberd attaches again once
//!   the network is back, the output is complete and in order.
//! - `amber-cli exec install HOST` copies `amber-exec` to the host's `~/.local/bin` over ssh and
//!   checks its version there; a second run leaves it alone; a bad host is refused.
//! - An executor that dials in (`amber-exec --connect`, TLS with a self-signed CA, a bearer
//!   token) runs the session's tools; its connection cut by a proxy mid-command, it dials
//!   again and amberd attaches again with nothing lost; a wrong token is refused at the
//!   upgrade; with the listener off a dial-in environment is refused.
//! - `amber-cli run --env executor:NAME --cwd DIR` runs its turn's tools there and says so
//!   in `--json`'s `session_started`.
//! - An executor that answers garbage and then a line of 80 MB does not take amberd down:
//!   the line is refused at its bound, the session is refused, amberd goes on.
//! - A session on an executor takes its checkpoints there: each turn's changes are listed
//!   and diffed, its files rewind on the executor, its conversation rewinds and forks.
//! - A new executor after a gone one whose workspace is empty gets the newest checkpoint
//!   restored before any call reaches it (`environment_connected.restoredFiles`); one whose
//!   workspace holds files is left as it is.
//! - An executor that names itself with shell words (they would reach the ssh command line
//!   that attaches again) is refused.
//! - A bad environment (unknown name, unreachable program) refuses `session/new` and makes
//!   nothing.
//! - Over SSH (a real sshd on loopback, the real ssh client with the user's config, key and
//!   known_hosts): `ssh://HOST/PATH` runs the tools on the host, and a dropped SSH connection
//!   is attached again through a new one with nothing lost.

use std::time::Duration;

use amber_mock_llm::{MockLlm, MockTurn};
use amber_proto::SessionNewParams;
use amber_tests::daemon::{DaemonOptions, TestDaemon, bin_path};
use amber_tests::dial::{self, DialSetup};
use amber_tests::netns::NetNs;
use amber_tests::sshd::{self, Sshd};
use amber_tests::steps::{Events, FAST_RETRIES, connect, done, of_type, prompt_turn, stop_reason};
use amber_tests::tool_calls::{bash, call, calls, get_raw, result_of};
use serde_json::json;

/// A daemon whose config names `executor:here`, a local `amber-exec`.
fn daemon_with_executor(mock: &MockLlm, reconnect_secs: u64) -> TestDaemon {
    daemon_with_executor_env(mock, reconnect_secs, Vec::new())
}

/// [`daemon_with_executor`] with `env` in the daemon's environment (its executors inherit it).
fn daemon_with_executor_env(
    mock: &MockLlm,
    reconnect_secs: u64,
    env: Vec<(String, String)>,
) -> TestDaemon {
    TestDaemon::spawn_with(DaemonOptions {
        base_url: Some(mock.base_url()),
        config_toml: format!(
            "{FAST_RETRIES}\n[environments.here]\nprogram = \"{}\"\nlinger_secs = 30\nreconnect_secs = {reconnect_secs}\n",
            bin_path("amber-exec").display()
        ),
        env,
    })
}

/// A yolo session (nothing asks: the executor's sandbox is the wall) on `environment`.
async fn session_on(
    client: &amber_client::Client,
    daemon: &TestDaemon,
    environment: &str,
) -> Result<String, String> {
    let params = SessionNewParams {
        cwd: daemon.workspace.display().to_string(),
        mode: Some(amber_proto::Mode::Yolo),
        environment: Some(environment.to_owned()),
        ..SessionNewParams::default()
    };
    client
        .session_new(&params)
        .await
        .map(|info| info.session_id)
        .map_err(|e| e.to_string())
}

fn exe_of(pid: u64) -> String {
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_on_an_executor_runs_its_tools_in_the_executors_processes() {
    let mock = MockLlm::start(vec![
        // Calls of one batch run side by side: the read comes in the next batch.
        calls(vec![call(
            "w1",
            "write",
            &json!({"path": "made.txt", "content": "hello\n"}),
        )]),
        calls(vec![
            call("b1", "bash", &json!({"command": "cat made.txt"})),
            call(
                "p1",
                "process",
                &json!({"action": "start", "command": "sleep 30"}),
            ),
        ]),
        MockTurn::text("Done."),
        done(),
    ])
    .await;
    let daemon = daemon_with_executor(&mock, 10);
    let client = connect(&daemon).await;
    let sid = session_on(&client, &daemon, "executor:here").await.unwrap();
    let got = get_raw(&client, &sid).await;
    let environment = &got["session"]["environment"];
    assert_eq!(environment["spec"], "executor:here", "{got:#}");
    assert_eq!(environment["state"], "connected", "{got:#}");
    let executor_pid = environment["executor"]["pid"].as_u64().unwrap();
    assert!(
        exe_of(executor_pid).ends_with("amber-exec"),
        "the executor is amber-exec: {}",
        exe_of(executor_pid)
    );
    let status = daemon.rpc_ok("daemon/status", json!({}));
    assert_eq!(
        status["environments"],
        json!([{"environment": environment, "sessions": 1}]),
        "daemon/status shows the executor: {status:#}"
    );
    assert!(status.get("executorListener").is_none(), "off by default");
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "write and read").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    let (status, output) = result_of(&turn, "b1");
    assert_eq!(status, "ok", "{output}");
    assert!(output.starts_with("hello\n"), "{output}");
    assert_eq!(
        std::fs::read_to_string(daemon.workspace.join("made.txt")).unwrap(),
        "hello\n"
    );
    // The background process is the executor's, and keeps the session busy (unloading it
    // would kill the process there).
    let status = daemon.rpc_ok("daemon/status", json!({}));
    assert_eq!(status["busy"], 1, "{status:#}");
    let (_, started) = result_of(&turn, "p1");
    let pid: u64 = started
        .split("pid ")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|digits| digits.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {started}"));
    let ancestors = ancestors_of(pid);
    let executor_at = ancestors.iter().position(|p| *p == executor_pid);
    let amberd_at = ancestors.iter().position(|p| *p == u64::from(daemon.pid()));
    assert!(
        executor_at.is_some() && executor_at < amberd_at.or(Some(usize::MAX)),
        "{pid} was started by the executor {executor_pid} (amberd only started the \
         executor's relay): {ancestors:?}"
    );
}

/// The parent chain of `pid`, nearest first.
fn ancestors_of(mut pid: u64) -> Vec<u64> {
    let mut chain = Vec::new();
    while pid > 1 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let Some(parent) = status
            .lines()
            .find_map(|l| l.strip_prefix("PPid:"))
            .and_then(|p| p.trim().parse().ok())
        else {
            break;
        };
        chain.push(parent);
        pid = parent;
    }
    chain
}

#[tokio::test(flavor = "multi_thread")]
async fn the_executor_sandboxes_its_commands_itself() {
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("escaped");
    let mock = MockLlm::start(vec![
        bash("b1", &format!("echo x > {} ; echo tried", target.display())),
        MockTurn::text("Done."),
        done(),
    ])
    .await;
    let daemon = daemon_with_executor(&mock, 10);
    let client = connect(&daemon).await;
    let sid = session_on(&client, &daemon, "executor:here").await.unwrap();
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "escape").await;
    let (_, output) = result_of(&turn, "b1");
    assert!(output.contains("tried"), "{output}");
    assert!(
        output.contains("[sandbox:"),
        "the refusal is explained: {output}"
    );
    assert!(
        !target.exists(),
        "nothing was written outside the workspace"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dropped_link_is_attached_again_and_no_output_is_lost() {
    // Prints 1..60 over ~3 s; the relay is killed after the first lines.
    let script = "for i in $(seq 1 60); do echo line-$i; sleep 0.05; done";
    let mock = MockLlm::start(vec![bash("b1", script), MockTurn::text("Done."), done()]).await;
    let daemon = daemon_with_executor(&mock, 10);
    let client = connect(&daemon).await;
    let sid = session_on(&client, &daemon, "executor:here").await.unwrap();
    let mut events = Events::live(&client, &sid).await;
    client.session_prompt(&sid, "count").await.unwrap();
    let mut turn = events.until("tool_output_delta").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    // SAFETY: kill(2) on a pid of this test's own daemon's child.
    unsafe { libc::kill(relay_of(&daemon), libc::SIGKILL) };
    turn.extend(events.turn().await);
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    let (status, output) = result_of(&turn, "b1");
    assert_eq!(status, "ok", "{output}");
    let expected: String = (1..=60).map(|i| format!("line-{i}\n")).collect();
    assert!(
        output.starts_with(&expected),
        "complete and in order: {output}"
    );
    let lost = of_type(&turn, "environment_lost");
    assert_eq!(lost.len(), 1, "{turn:#?}");
    assert_eq!(lost[0]["environment"]["state"], "lost");
    let resumed = of_type(&turn, "environment_resumed");
    assert_eq!(resumed.len(), 1, "{turn:#?}");
    assert_eq!(resumed[0]["environment"]["state"], "connected");
    // The live deltas the client saw are in order too.
    let streamed: String = of_type(&turn, "tool_output_delta")
        .iter()
        .filter_map(|d| d["chunk"].as_str())
        .collect();
    assert_eq!(streamed, expected, "the live stream has every line once");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_executor_that_dies_interrupts_the_turn_and_the_next_runs_on_a_new_one() {
    let (daemon, sid, turns, first_pid) =
        executor_lost_after_one_turn("true", "echo again", |_| {}).await;
    let completed = of_type(&turns, "turn_completed");
    assert_eq!(completed[0]["stopReason"], "error", "{turns:#?}");
    let (status, output) = result_of(&turns, "b2");
    assert_eq!(status, "error");
    assert!(output.starts_with("[executor lost]"), "{output}");
    let lost = of_type(&turns, "environment_lost");
    assert_eq!(
        lost.last().unwrap()["environment"]["state"],
        "gone",
        "{lost:#?}"
    );
    // The interrupted turn's closing checkpoint already starts the new executor (it
    // snapshots the workspace there); else the next turn's first call does.
    assert_eq!(result_of(&turns, "b3").1.lines().next(), Some("again"));
    let connected = of_type(&turns, "environment_connected");
    assert_eq!(connected.len(), 1, "a new executor: {turns:#?}");
    let second_pid = connected[0]["environment"]["executor"]["pid"]
        .as_u64()
        .unwrap();
    assert_ne!(second_pid, first_pid);
    let client = connect(&daemon).await;
    let got = get_raw(&client, &sid).await;
    assert_eq!(got["session"]["environment"]["executor"]["pid"], second_pid);
}

/// A session on `executor:here` whose first turn runs `make`, and whose second turn's
/// executor is killed mid-call; `meanwhile` changes the workspace before a new executor
/// comes. Its third turn's call is `b3`. Returns the daemon, the session, the events of the
/// interrupted turn and the next one, and the killed executor's pid.
async fn executor_lost_after_one_turn(
    make: &str,
    next: &str,
    meanwhile: impl FnOnce(&std::path::Path),
) -> (TestDaemon, String, Vec<serde_json::Value>, u64) {
    let mock = MockLlm::start(vec![
        bash("b1", make),
        MockTurn::text("Made."),
        done(),
        bash("b2", "echo started; sleep 30"),
        bash("b3", next),
        MockTurn::text("Next."),
        done(),
    ])
    .await;
    let daemon = daemon_with_executor(&mock, 2);
    let client = connect(&daemon).await;
    let sid = session_on(&client, &daemon, "executor:here").await.unwrap();
    let first_pid = get_raw(&client, &sid).await["session"]["environment"]["executor"]["pid"]
        .as_u64()
        .unwrap();
    let mut events = Events::live(&client, &sid).await;
    prompt_turn(&client, &mut events, &sid, "make").await;
    client.session_prompt(&sid, "wait").await.unwrap();
    let mut turns = events.until("tool_output_delta").await;
    // SAFETY: kill(2) on the executor this test's daemon started.
    unsafe { libc::kill(i32::try_from(first_pid).unwrap(), libc::SIGKILL) };
    meanwhile(&daemon.workspace);
    turns.extend(events.turn().await);
    let completed = of_type(&turns, "turn_completed");
    assert_eq!(completed[0]["error"]["code"], "interrupted", "{turns:#?}");
    let next_turn = prompt_turn(&client, &mut events, &sid, "next").await;
    assert_eq!(stop_reason(&next_turn), "end_turn", "{next_turn:#?}");
    turns.extend(next_turn);
    (daemon, sid, turns, first_pid)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_executor_with_an_empty_workspace_continues_from_the_newest_checkpoint() {
    // The machine goes, and with it the workspace: the next executor finds it empty.
    let (daemon, sid, turns, first_pid) = executor_lost_after_one_turn(
        "mkdir -p src && echo alpha > a.txt && echo beta > src/b.txt",
        "cat a.txt src/b.txt",
        |ws| {
            for entry in std::fs::read_dir(ws).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    std::fs::remove_dir_all(&path).unwrap();
                } else {
                    std::fs::remove_file(&path).unwrap();
                }
            }
        },
    )
    .await;
    let (_, output) = result_of(&turns, "b3");
    assert_eq!(
        output.lines().take(2).collect::<Vec<_>>(),
        ["alpha", "beta"],
        "{output}"
    );
    let connected = of_type(&turns, "environment_connected");
    assert_eq!(connected.len(), 1, "one new executor: {turns:#?}");
    assert_eq!(connected[0]["restoredFiles"], 2, "{connected:#?}");
    assert_ne!(
        connected[0]["environment"]["executor"]["pid"].as_u64(),
        Some(first_pid)
    );
    // The loss is no change of the turn's: what it found was put back first.
    let listed = daemon.rpc_ok("checkpoint/list", json!({"sessionId": sid}));
    let rows = listed["checkpoints"].as_array().unwrap();
    assert!(
        rows.iter()
            .skip(1)
            .all(|r| r["changed"].as_array().is_none_or(Vec::is_empty)),
        "{listed:#}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_executor_whose_workspace_holds_files_is_left_as_it_is() {
    // Someone's files, not the checkpoint's: a restore must not touch them.
    let (daemon, _, turns, _) = executor_lost_after_one_turn("echo alpha > a.txt", "ls", |ws| {
        std::fs::remove_file(ws.join("a.txt")).unwrap();
        std::fs::write(ws.join("theirs.txt"), "theirs\n").unwrap();
    })
    .await;
    let connected = of_type(&turns, "environment_connected");
    assert_eq!(connected.len(), 1, "{turns:#?}");
    assert!(
        connected[0].get("restoredFiles").is_none(),
        "{connected:#?}"
    );
    assert!(!daemon.workspace.join("a.txt").exists());
    assert_eq!(
        std::fs::read_to_string(daemon.workspace.join("theirs.txt")).unwrap(),
        "theirs\n"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_environment_refuses_the_session_and_makes_nothing() {
    let mock = MockLlm::start(vec![done()]).await;
    let daemon = TestDaemon::spawn_with(DaemonOptions {
        base_url: Some(mock.base_url()),
        config_toml: format!(
            "{FAST_RETRIES}\n[environments.broken]\nprogram = \"/nonexistent/amber-exec\"\n"
        ),
        env: Vec::new(),
    });
    let client = connect(&daemon).await;
    let cases = [
        ("executor:nope", "no [environments.nope]"),
        ("executor:broken", "/nonexistent/amber-exec"),
        ("docker://x", "not an environment"),
        ("ssh://-oProxyCommand=x/p", "not a host"),
    ];
    for (environment, says) in cases {
        let err = session_on(&client, &daemon, environment).await.unwrap_err();
        assert!(err.contains(says), "{environment}: {err}");
    }
    let listed = client.session_list_all().await.unwrap();
    assert!(listed.is_empty(), "{listed:?}");
}

/// The pid of the daemon's relay process (`amber-exec --stdio`, its child).
fn relay_of(daemon: &TestDaemon) -> i32 {
    children_of(daemon.pid())
        .into_iter()
        .find(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.contains("amber-exec") && c.contains("--stdio"))
        })
        .expect("amberd runs a relay")
}

/// A daemon whose `ssh` reaches `sshd` as [`sshd::HOST`].
fn daemon_over_ssh(mock: &MockLlm, sshd: &Sshd) -> TestDaemon {
    TestDaemon::spawn_with(DaemonOptions {
        base_url: Some(mock.base_url()),
        config_toml: FAST_RETRIES.to_owned(),
        env: vec![("PATH".to_owned(), sshd.path_env())],
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn an_ssh_environment_runs_the_tools_on_the_host_through_the_users_ssh() {
    let sshd = Sshd::start();
    let mock = MockLlm::start(vec![
        calls(vec![call(
            "w1",
            "write",
            &json!({"path": "remote.txt", "content": "over ssh\n"}),
        )]),
        calls(vec![call(
            "b1",
            "bash",
            &json!({"command": "cat remote.txt; echo \"via $SSH_CONNECTION\""}),
        )]),
        MockTurn::text("Done."),
        done(),
    ])
    .await;
    let daemon = daemon_over_ssh(&mock, &sshd);
    let client = connect(&daemon).await;
    let spec = format!("ssh://{}{}", sshd::HOST, daemon.workspace.display());
    let params = SessionNewParams {
        cwd: String::new(),
        mode: Some(amber_proto::Mode::Yolo),
        environment: Some(spec.clone()),
        ..SessionNewParams::default()
    };
    let info = client
        .session_new(&params)
        .await
        .unwrap_or_else(|e| panic!("{e}\nsshd: {}", sshd.log()));
    assert_eq!(
        info.cwd,
        daemon.workspace.display().to_string(),
        "the URL's path"
    );
    let environment = info.environment.clone().unwrap();
    assert_eq!(environment.spec, spec);
    assert_eq!(environment.state, amber_proto::EnvironmentState::Connected);
    let mut events = Events::live(&client, &info.session_id).await;
    let turn = prompt_turn(&client, &mut events, &info.session_id, "go").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    let (status, output) = result_of(&turn, "b1");
    assert_eq!(status, "ok", "{output}");
    assert!(output.starts_with("over ssh\n"), "{output}");
    assert!(
        output.contains(&format!("127.0.0.1 {}", sshd.port)),
        "the command ran in an SSH session: {output}"
    );
    assert_eq!(
        std::fs::read_to_string(daemon.workspace.join("remote.txt")).unwrap(),
        "over ssh\n"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dropped_ssh_connection_is_attached_again_through_a_new_one() {
    let sshd = Sshd::start();
    let script = "for i in $(seq 1 60); do echo line-$i; sleep 0.05; done";
    let mock = MockLlm::start(vec![bash("b1", script), MockTurn::text("Done."), done()]).await;
    let daemon = daemon_over_ssh(&mock, &sshd);
    let client = connect(&daemon).await;
    let params = SessionNewParams {
        cwd: daemon.workspace.display().to_string(),
        mode: Some(amber_proto::Mode::Yolo),
        environment: Some(format!("ssh://{}", sshd::HOST)),
        ..SessionNewParams::default()
    };
    let sid = client.session_new(&params).await.unwrap().session_id;
    let mut events = Events::live(&client, &sid).await;
    client.session_prompt(&sid, "count").await.unwrap();
    let mut turn = events.until("tool_output_delta").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let ssh = child_running(&daemon, "/usr/bin/ssh");
    // SAFETY: kill(2) on the ssh client this test's daemon started.
    unsafe { libc::kill(ssh, libc::SIGKILL) };
    turn.extend(events.turn().await);
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    let expected: String = (1..=60).map(|i| format!("line-{i}\n")).collect();
    let (status, output) = result_of(&turn, "b1");
    assert_eq!(status, "ok", "{output}");
    assert!(
        output.starts_with(&expected),
        "complete and in order: {output}"
    );
    assert_eq!(of_type(&turn, "environment_lost").len(), 1, "{turn:#?}");
    assert_eq!(of_type(&turn, "environment_resumed").len(), 1, "{turn:#?}");
    assert_ne!(
        child_running(&daemon, "/usr/bin/ssh"),
        ssh,
        "a new ssh connection"
    );
}

/// The pid of amberd's child whose command line starts with `program`.
fn child_running(daemon: &TestDaemon, program: &str) -> i32 {
    children_of(daemon.pid())
        .into_iter()
        .find(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.starts_with(program))
        })
        .unwrap_or_else(|| panic!("amberd runs no {program}"))
}

fn children_of(pid: u32) -> Vec<i32> {
    let mut all = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let text = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        all.extend(
            text.split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok()),
        );
    }
    all
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_daemon_attaches_again_to_the_executor_that_still_runs() {
    let ticks = "for i in $(seq 1 40); do echo tick-$i; sleep 0.05; done; echo finished";
    let mock = MockLlm::start(vec![
        calls(vec![call(
            "p1",
            "process",
            &json!({"action": "start", "command": ticks}),
        )]),
        MockTurn::text("Started."),
        done(),
    ])
    .await;
    let mut daemon = daemon_with_executor(&mock, 10);
    let client = connect(&daemon).await;
    let sid = session_on(&client, &daemon, "executor:here").await.unwrap();
    let executor_pid = get_raw(&client, &sid).await["session"]["environment"]["executor"]["pid"]
        .as_u64()
        .unwrap();
    let mut events = Events::live(&client, &sid).await;
    let turn = prompt_turn(&client, &mut events, &sid, "start it").await;
    assert_eq!(result_of(&turn, "p1").0, "ok", "{turn:#?}");
    drop(events);
    drop(client);

    daemon.kill(libc::SIGKILL);
    daemon
        .wait_exit(Duration::from_secs(5))
        .expect("the daemon died");
    assert!(
        exe_of(executor_pid).ends_with("amber-exec"),
        "the executor outlives a killed amberd"
    );
    daemon.restart();
    let client = connect(&daemon).await;
    // Loading the session attaches it again.
    let got = get_raw(&client, &sid).await;
    // From the start: the daemon may have attached before this subscription.
    let mut events = Events::subscribe(&client, &sid, Some(0)).await;
    let resumed = events.until("environment_resumed").await;
    let resumed = resumed.last().unwrap();
    assert_eq!(
        resumed["environment"]["executor"]["pid"], executor_pid,
        "the same executor: {resumed}\n{got:#}"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    mock.push([
        calls(vec![call(
            "out",
            "process",
            &json!({"action": "output", "id": "p1"}),
        )]),
        MockTurn::text("Read."),
        done(),
    ]);
    let turn = prompt_turn(&client, &mut events, &sid, "read it").await;
    let (status, output) = result_of(&turn, "out");
    assert_eq!(status, "ok", "{output}");
    let expected: String = (1..=40).map(|i| format!("tick-{i}\n")).collect();
    assert!(
        output.contains(&format!("{expected}finished")),
        "the process ran on, its output whole: {output}"
    );
}

#[test]
fn exec_install_puts_the_executor_on_the_host_and_checks_its_version() {
    let sshd = Sshd::start();
    let install = |extra: &[&str]| {
        let mut cmd = std::process::Command::new(bin_path("amber-cli"));
        cmd.args(["exec", "install"])
            .args(extra)
            .env("PATH", sshd.path_env());
        let out = cmd.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, stdout, stderr) = install(&[sshd::HOST]);
    assert_eq!(code, Some(0), "{stdout}{stderr}\nsshd: {}", sshd.log());
    assert!(stdout.starts_with("installed amber-exec "), "{stdout}");
    let placed = sshd.dir.path().join("home/.local/bin/amber-exec");
    let version = std::process::Command::new(&placed)
        .arg("--version")
        .output()
        .unwrap();
    let local = std::process::Command::new(bin_path("amber-exec"))
        .arg("--version")
        .output()
        .unwrap();
    assert_eq!(version.stdout, local.stdout, "the same executor runs there");
    let (code, stdout, _) = install(&[sshd::HOST]);
    assert_eq!(code, Some(0));
    assert!(stdout.contains("is already on"), "{stdout}");
    let (code, stdout, _) = install(&["--force", sshd::HOST]);
    assert_eq!(code, Some(0));
    assert!(stdout.starts_with("installed"), "{stdout}");
    let (code, _, stderr) = install(&["--", "-oProxyCommand=touch"]);
    assert_ne!(code, Some(0));
    assert!(stderr.contains("not a host"), "{stderr}");
}

/// A TCP forwarder on loopback whose connections the test can cut.
struct Proxy {
    port: u16,
    open: std::sync::Arc<std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl Proxy {
    async fn start(target: u16) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let open = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let tracked = std::sync::Arc::clone(&open);
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let task = tokio::spawn(async move {
                    if let Ok(mut outbound) =
                        tokio::net::TcpStream::connect(("127.0.0.1", target)).await
                    {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                tracked.lock().unwrap().push(task);
            }
        });
        Proxy { port, open }
    }

    /// Drops every connection through it (both ends see them close).
    fn cut(&self) {
        for task in self.open.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}

fn daemon_listening(mock: &MockLlm, setup: &DialSetup) -> TestDaemon {
    TestDaemon::spawn_with(DaemonOptions {
        base_url: Some(mock.base_url()),
        config_toml: format!("{FAST_RETRIES}\n{}", setup.config()),
        env: Vec::new(),
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn an_executor_that_dials_in_runs_the_tools_and_is_attached_again_after_a_cut() {
    let setup = DialSetup::new();
    let script = "for i in $(seq 1 60); do echo line-$i; sleep 0.05; done";
    let mock = MockLlm::start(vec![
        calls(vec![call(
            "p1",
            "process",
            &json!({"action": "start", "command": "sleep 30"}),
        )]),
        bash("b1", script),
        MockTurn::text("Done."),
        done(),
    ])
    .await;
    let daemon = daemon_listening(&mock, &setup);
    let proxy = Proxy::start(setup.port).await;
    let dialler = setup.dial(proxy.port, &setup.token_file);
    let client = connect(&daemon).await;
    let sid = session_on(&client, &daemon, &format!("executor:{}", dial::NAME))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", setup.logs()));
    let got = get_raw(&client, &sid).await;
    assert_eq!(
        got["session"]["environment"]["state"], "connected",
        "{got:#}"
    );
    let executor_pid = got["session"]["environment"]["executor"]["pid"]
        .as_u64()
        .unwrap();
    assert_eq!(
        executor_pid,
        u64::from(dialler.child.id()),
        "the dialled-in executor"
    );
    let status = daemon.rpc_ok("daemon/status", json!({}));
    assert_eq!(
        status["executorListener"],
        format!("127.0.0.1:{}", setup.port),
        "{status:#}"
    );
    let mut events = Events::live(&client, &sid).await;
    client.session_prompt(&sid, "go").await.unwrap();
    let mut turn = events.until("tool_output_delta").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    proxy.cut();
    turn.extend(events.turn().await);
    assert_eq!(
        stop_reason(&turn),
        "end_turn",
        "{turn:#?}\n{}",
        setup.logs()
    );
    let (_, started) = result_of(&turn, "p1");
    let pid: u64 = started
        .split("pid ")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|digits| digits.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {started}"));
    assert!(
        ancestors_of(pid).contains(&executor_pid),
        "the process runs under the dialled-in executor"
    );
    let expected: String = (1..=60).map(|i| format!("line-{i}\n")).collect();
    let (status, output) = result_of(&turn, "b1");
    assert_eq!(status, "ok", "{output}");
    assert!(
        output.starts_with(&expected),
        "complete and in order: {output}"
    );
    assert_eq!(of_type(&turn, "environment_lost").len(), 1, "{turn:#?}");
    assert_eq!(of_type(&turn, "environment_resumed").len(), 1, "{turn:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dialling_executor_with_a_wrong_token_is_refused_and_the_listener_is_off_by_default() {
    let setup = DialSetup::new();
    let mock = MockLlm::start(vec![done()]).await;
    let daemon = daemon_listening(&mock, &setup);
    let wrong = setup.dir.path().join("wrong-token");
    std::fs::write(&wrong, "not-the-token\n").unwrap();
    let _dialler = setup.dial(setup.port, &wrong);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !daemon.log().contains("refused a dialling executor") {
        assert!(std::time::Instant::now() < deadline, "{}", daemon.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(setup.logs().contains("401"), "{}", setup.logs());
    assert!(!daemon.log().contains("an executor dialled in"));

    // Without [executors] listen a dial-in environment has nothing to wait for.
    let quiet = TestDaemon::spawn_with(DaemonOptions {
        base_url: Some(mock.base_url()),
        config_toml: format!(
            "{FAST_RETRIES}\n[environments.far]\ndial_in = true\ntoken_file = \"{}\"\n",
            setup.token_file.display()
        ),
        env: Vec::new(),
    });
    let client = connect(&quiet).await;
    let err = session_on(&client, &quiet, "executor:far")
        .await
        .unwrap_err();
    assert!(err.contains("listener is off"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_network_cut_mid_stream_and_restored_loses_nothing() {
    let netns = NetNs::new();
    let sshd = Sshd::start_at(Some(&netns.name), &netns.addr);
    let script = "for i in $(seq 1 80); do echo line-$i; sleep 0.05; done";
    let mock = MockLlm::start(vec![bash("b1", script), MockTurn::text("Done."), done()]).await;
    let daemon = daemon_over_ssh(&mock, &sshd);
    let client = connect(&daemon).await;
    let params = SessionNewParams {
        cwd: daemon.workspace.display().to_string(),
        mode: Some(amber_proto::Mode::Yolo),
        environment: Some(format!("ssh://{}", sshd::HOST)),
        ..SessionNewParams::default()
    };
    let sid = client
        .session_new(&params)
        .await
        .unwrap_or_else(|e| panic!("{e}\nsshd: {}", sshd.log()))
        .session_id;
    let mut events = Events::live(&client, &sid).await;
    client.session_prompt(&sid, "count").await.unwrap();
    let mut turn = events.until("tool_output_delta").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    netns.cut();
    // ssh would notice only after its keepalives; give the connection up now, while the
    // network is down: attaching again fails until it is back.
    let ssh = child_running(&daemon, "/usr/bin/ssh");
    // SAFETY: kill(2) on the ssh client this test's daemon started.
    unsafe { libc::kill(ssh, libc::SIGKILL) };
    tokio::time::sleep(Duration::from_secs(2)).await;
    netns.restore();
    turn.extend(events.turn().await);
    assert_eq!(stop_reason(&turn), "end_turn", "{turn:#?}");
    let expected: String = (1..=80).map(|i| format!("line-{i}\n")).collect();
    let (status, output) = result_of(&turn, "b1");
    assert_eq!(status, "ok", "{output}");
    assert!(
        output.starts_with(&expected),
        "complete and in order: {output}"
    );
    let streamed: String = of_type(&turn, "tool_output_delta")
        .iter()
        .filter_map(|d| d["chunk"].as_str())
        .collect();
    assert_eq!(
        streamed, expected,
        "the live stream has every line once, in order"
    );
    assert_eq!(of_type(&turn, "environment_lost").len(), 1, "{turn:#?}");
    assert_eq!(of_type(&turn, "environment_resumed").len(), 1, "{turn:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn amber_cli_run_env_runs_the_turn_on_the_executor() {
    let mock = MockLlm::start(vec![
        bash("b1", "echo from-the-executor"),
        MockTurn::text("Done."),
        done(),
    ])
    .await;
    let daemon = daemon_with_executor(&mock, 10);
    let mut cmd = daemon.cli();
    cmd.args([
        "run",
        "--json",
        "--no-autostart",
        "--yes",
        "--env",
        "executor:here",
        "--cwd",
    ])
    .arg(&daemon.workspace)
    .arg("run it");
    let (code, stdout, stderr) = amber_tests::steps::run_bounded(cmd);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let started = &lines[0];
    assert_eq!(started["type"], "session_started", "{started}");
    let completed = lines
        .iter()
        .find(|l| l["type"] == "tool_call_completed")
        .unwrap_or_else(|| panic!("{stdout}"));
    let output = completed["output"].as_str().unwrap();
    assert!(output.starts_with("from-the-executor\n"), "{output}");
    let sid = started["sessionId"].as_str().unwrap();
    let got = daemon.rpc_ok("session/get", json!({"sessionId": sid}));
    assert_eq!(
        got["session"]["environment"]["spec"], "executor:here",
        "{got:#}"
    );
    assert_eq!(
        got["session"]["cwd"],
        daemon.workspace.display().to_string(),
        "the --cwd given, on the executor's machine"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_executor_that_sends_an_endless_line_is_cut_off_and_amberd_goes_on() {
    let mock = MockLlm::start(vec![done()]).await;
    let liar = tempfile::tempdir().unwrap();
    let daemon = daemon_with_liar(
        &mock,
        liar.path(),
        "echo 'not json at all'\nhead -c 80000000 /dev/zero | tr '\\0' a",
    );
    let client = connect(&daemon).await;
    let err = session_on(&client, &daemon, "executor:liar")
        .await
        .unwrap_err();
    assert!(err.contains("link dropped"), "{err}");
    assert!(
        daemon.log().contains("longer than"),
        "the line was refused at its bound: {}",
        daemon.log()
    );
    let status = daemon.rpc_ok("daemon/status", json!({}));
    assert_eq!(status["sessions"], 0, "nothing was made: {status:#}");
    let peak_kib: u64 = std::fs::read_to_string(format!("/proc/{}/status", daemon.pid()))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    // The bound is 32 MiB: the 80 MB line held whole would pass 100 MB.
    assert!(
        peak_kib < 80 * 1024,
        "amberd held the line whole? peak {peak_kib} KiB"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_remote_sessions_checkpoints_are_taken_on_the_executor_and_rewind_there() {
    let mock = MockLlm::start(vec![
        bash("b1", "echo one > one.txt && echo kept > kept.txt"),
        MockTurn::text("First."),
        done(),
        bash(
            "b2",
            "echo two > two.txt && echo changed > kept.txt && rm one.txt",
        ),
        MockTurn::text("Second."),
        done(),
    ])
    .await;
    let daemon = daemon_with_executor(&mock, 10);
    let client = connect(&daemon).await;
    let sid = session_on(&client, &daemon, "executor:here").await.unwrap();
    let mut events = Events::live(&client, &sid).await;
    let first = prompt_turn(&client, &mut events, &sid, "one").await;
    let second = prompt_turn(&client, &mut events, &sid, "two").await;
    let turn_of = |turn: &[serde_json::Value]| {
        of_type(turn, "turn_started")[0]["turnId"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (first_id, second_id) = (turn_of(&first), turn_of(&second));
    let listed = daemon.rpc_ok("checkpoint/list", json!({"sessionId": sid}));
    let rows = listed["checkpoints"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "both turns took a checkpoint: {listed:#}");
    let changed = |row: &serde_json::Value| {
        let mut paths: Vec<String> = row["changed"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                format!(
                    "{} {}",
                    c["status"].as_str().unwrap(),
                    c["path"].as_str().unwrap()
                )
            })
            .collect();
        paths.sort();
        paths
    };
    assert_eq!(
        changed(&rows[0]),
        ["added kept.txt", "added one.txt"],
        "{listed:#}"
    );
    assert_eq!(
        changed(&rows[1]),
        ["added two.txt", "deleted one.txt", "modified kept.txt"],
        "{listed:#}"
    );
    // The diff's content came from the executor into amberd's store.
    let diff = daemon.rpc_ok(
        "checkpoint/diff",
        json!({"sessionId": sid, "turnId": second_id, "path": "kept.txt"}),
    );
    let text = diff.to_string();
    assert!(
        text.contains("-kept") && text.contains("+changed"),
        "{diff:#}"
    );
    // Files rewind on the executor's machine: the second turn is undone there.
    let rewound = daemon.rpc_ok(
        "session/rewind",
        json!({"sessionId": sid, "turnId": second_id}),
    );
    assert!(
        rewound["conflicts"].as_array().is_none_or(Vec::is_empty),
        "{rewound:#}"
    );
    let ws = &daemon.workspace;
    assert_eq!(
        std::fs::read_to_string(ws.join("one.txt")).unwrap(),
        "one\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("kept.txt")).unwrap(),
        "kept\n"
    );
    assert!(!ws.join("two.txt").exists(), "{rewound:#}");
    let got = get_raw(&client, &sid).await;
    let texts = got["messages"].to_string();
    assert!(
        texts.contains("one") && !texts.contains("\"two\""),
        "{texts}"
    );
    let fork = daemon.rpc_ok(
        "session/fork",
        json!({"sessionId": sid, "turnId": first_id}),
    );
    assert_eq!(
        fork["environment"]["spec"], "executor:here",
        "the fork works where the original does: {fork:#}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_snapshot_too_large_for_one_answer_arrives_whole_in_parts() {
    let mock = MockLlm::start(vec![
        bash("b1", "echo changed > f23.txt"),
        MockTurn::text("Changed."),
        done(),
    ])
    .await;
    // Answers of 10 entries: the 25 files come in three parts.
    let daemon = daemon_with_executor_env(
        &mock,
        10,
        vec![("AMBER_TEST_CHECKPOINT_PAGE".into(), "10".into())],
    );
    for i in 0..25 {
        std::fs::write(daemon.workspace.join(format!("f{i:02}.txt")), "x\n").unwrap();
    }
    let client = connect(&daemon).await;
    let sid = session_on(&client, &daemon, "executor:here").await.unwrap();
    let mut events = Events::live(&client, &sid).await;
    prompt_turn(&client, &mut events, &sid, "change").await;
    // Had a part been lost, the turn would seem to have added the files it missed.
    let listed = daemon.rpc_ok("checkpoint/list", json!({"sessionId": sid}));
    let changed = &listed["checkpoints"][0]["changed"];
    assert_eq!(
        changed,
        &json!([{"path": "f23.txt", "status": "modified"}]),
        "{listed:#}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_executor_that_names_itself_with_shell_words_is_refused() {
    let mock = MockLlm::start(vec![done()]).await;
    let dir = tempfile::tempdir().unwrap();
    let sentinel = dir.path().join("planted");
    let answer = json!({"jsonrpc": "2.0", "id": 1, "result": {
        "protocolVersion": 1, "executorId": format!("x; touch {}", sentinel.display()),
        "token": "t0k3n", "version": "0", "pid": 1,
        "machine": {"hostname": "h", "os": "linux", "arch": "x86_64"}}});
    let daemon = daemon_with_liar(&mock, dir.path(), &format!("echo '{answer}'"));
    let client = connect(&daemon).await;
    let err = session_on(&client, &daemon, "executor:liar")
        .await
        .unwrap_err();
    assert!(err.contains("could not have made"), "{err}");
    assert!(!sentinel.exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_executor_that_can_make_no_namespace_refuses_commands_unless_told_to_sandbox_in_place() {
    let dir = tempfile::tempdir().unwrap();
    // As in an unprivileged container: no CAP_SYS_ADMIN, so no namespace can be made.
    let wrapper = amber_tests::daemon::unprivileged_executor(dir.path());
    for in_place in [false, true] {
        let mock = MockLlm::start(vec![
            bash("b1", "mkdir -p sub && echo ran > sub/made.txt && echo done"),
            MockTurn::text("Tried."),
            done(),
        ])
        .await;
        let daemon = TestDaemon::spawn_with(DaemonOptions {
            base_url: Some(mock.base_url()),
            config_toml: format!(
                "{FAST_RETRIES}\n[environments.box]\nprogram = \"{}\"\nsandbox_in_place = {in_place}\n",
                wrapper.display()
            ),
            env: Vec::new(),
        });
        let client = connect(&daemon).await;
        let sid = session_on(&client, &daemon, "executor:box").await.unwrap();
        let mut events = Events::live(&client, &sid).await;
        let turn = prompt_turn(&client, &mut events, &sid, "go").await;
        let (_, output) = result_of(&turn, "b1");
        let made = daemon.workspace.join("sub/made.txt");
        if in_place {
            assert!(output.starts_with("done"), "{output}");
            assert!(made.exists());
        } else {
            // Fail closed, saying why and what would make it run.
            assert!(
                output.contains("no namespace can be made here")
                    && output.contains("--sandbox-in-place"),
                "{output}"
            );
            assert!(!made.exists(), "it ran: {output}");
        }
    }
}

/// A daemon whose `executor:liar` is a shell script in `dir` that reads the `initialize`
/// request, runs `body` and then waits: an executor that answers what the test makes it.
fn daemon_with_liar(mock: &MockLlm, dir: &std::path::Path, body: &str) -> TestDaemon {
    use std::os::unix::fs::PermissionsExt;
    let script = dir.join("liar");
    std::fs::write(
        &script,
        format!("#!/bin/sh\nread request\n{body}\nsleep 30\n"),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    TestDaemon::spawn_with(DaemonOptions {
        base_url: Some(mock.base_url()),
        config_toml: format!(
            "{FAST_RETRIES}\n[environments.liar]\nprogram = \"{}\"\n",
            script.display()
        ),
        env: Vec::new(),
    })
}
