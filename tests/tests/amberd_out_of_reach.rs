//! End-to-end: amberd itself is out of a sandboxed command's reach, and so is the store it
//! serves. Through the real daemon in yolo (nothing asks), commands try what signals and
//! ptrace do not cover: resource limits (`prlimit --pid`, whose SIGXCPU would kill the
//! daemon and dump its memory, keys included), priorities and CPU or I/O placement of
//! amberd or of every process of the user; and leaving a setuid or setgid file in the
//! workspace. Each is refused while the same calls on the command itself still work. A
//! second `amberd` on the same data dir refuses to start and names the first.

use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;
use std::time::Duration;

use amber_mock_llm::{MockLlm, MockTurn};
use amber_proto::{Mode, SessionNewParams};
use amber_tests::TestDaemon;
use amber_tests::steps::{Events, FAST_RETRIES, connect, done, prompt_turn, spawn_config, within};
use amber_tests::tool_calls::{call, calls, result_of};
use serde_json::json;

/// Attempts on amberd (`{PID}`, `{PGID}`) or on every process of the user.
const ON_AMBERD: &[(&str, &str)] = &[
    ("prlimit_cpu", "prlimit --pid {PID} --cpu=1:2"),
    ("prlimit_core", "prlimit --pid {PID} --core=unlimited"),
    ("prlimit_nofile", "prlimit --pid {PID} --nofile=3:3"),
    (
        "python_prlimit",
        "python3 -c \"import resource; resource.prlimit({PID}, resource.RLIMIT_CPU, (1, 2))\"",
    ),
    ("renice_pid", "renice -n 19 -p {PID}"),
    ("renice_group", "renice -n 19 -g {PGID}"),
    ("renice_user", "renice -n 19 -u $(id -u)"),
    ("taskset", "taskset -p 1 {PID}"),
    ("ionice_pid", "ionice -c 3 -p {PID}"),
    ("ionice_user", "ionice -c 3 -u $(id -u)"),
    ("chrt", "chrt -i -p 0 {PID}"),
];

/// Setting the setuid or setgid bit, by every route a program has.
const SET_ID_BITS: &[(&str, &str)] = &[
    ("chmod_u_s", "cp /bin/true suid1 && chmod u+s suid1"),
    ("chmod_4755", "cp /bin/true suid2 && chmod 4755 suid2"),
    ("chmod_g_s", "cp /bin/true sgid1 && chmod g+s sgid1"),
    ("install_m", "install -m 4755 /bin/true suid3"),
    (
        "python_chmod",
        "cp /bin/true suid4 && python3 -c \"import os; os.chmod('suid4', 0o4755)\"",
    ),
    (
        "python_open_mode",
        "python3 -c \"import os; os.umask(0); os.close(os.open('suid5', os.O_CREAT | os.O_WRONLY, 0o4755))\"",
    ),
    (
        "perl_chmod",
        "cp /bin/true suid6 && perl -e 'chmod(04755, \"suid6\") or die \"chmod: $!\\n\"'",
    ),
];

fn fill(template: &str, daemon: &TestDaemon) -> String {
    let pid = daemon.pid();
    // SAFETY: getpgid only reads.
    let pgid = unsafe { libc::getpgid(pid as libc::pid_t) };
    template
        .replace("{PID}", &pid.to_string())
        .replace("{PGID}", &pgid.to_string())
}

/// `/proc/PID/limits`, `nice` (field 19 of `stat`) and `Cpus_allowed_list` of amberd.
fn amberd_state(pid: u32) -> (String, String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_comm = &stat[stat.rfind(')').unwrap() + 2..];
    let nice = after_comm.split(' ').nth(16).unwrap().to_owned();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let cpus = status
        .lines()
        .find(|l| l.starts_with("Cpus_allowed_list"))
        .unwrap()
        .to_owned();
    (limits, nice, cpus)
}

async fn yolo_turn(
    daemon: &TestDaemon,
    mock: &MockLlm,
    attempts: &[(&str, String)],
) -> Vec<serde_json::Value> {
    let client = connect(daemon).await;
    let params = SessionNewParams {
        cwd: daemon.workspace.display().to_string(),
        mode: Some(Mode::Yolo),
        ..SessionNewParams::default()
    };
    let sid = within("session/new", client.session_new(&params))
        .await
        .unwrap()
        .session_id;
    let mut events = Events::live(&client, &sid).await;
    let mut script: Vec<MockTurn> = attempts
        .chunks(6)
        .map(|chunk| {
            calls(
                chunk
                    .iter()
                    .map(|(id, cmd)| {
                        let command = format!("( {cmd} ); echo \"[attempt exited $?]\"");
                        call(id, "bash", &json!({ "command": command }))
                    })
                    .collect(),
            )
        })
        .collect();
    script.push(MockTurn::text("Tried."));
    script.push(done());
    mock.push(script);
    prompt_turn(&client, &mut events, &sid, "reach amberd").await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sandboxed_command_cannot_change_amberds_limits_priority_or_placement() {
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn_config(&mock, FAST_RETRIES);
    let pid = daemon.pid();
    let before = amberd_state(pid);
    assert!(
        before
            .0
            .lines()
            .any(|l| l.starts_with("Max core file size") && l.contains(" 0 ")),
        "amberd runs with a soft core limit of 0:\n{}",
        before.0
    );
    let mut attempts: Vec<(&str, String)> = ON_AMBERD
        .iter()
        .map(|(id, cmd)| (*id, fill(cmd, &daemon)))
        .collect();
    // The same calls on the command itself still work.
    attempts.push((
        "own_limits",
        "ulimit -c 0 && ulimit -n 256 && nice -n 5 true && prlimit --pid $$ --nofile=200:256 2>/dev/null; ulimit -n && echo own-ok"
            .to_owned(),
    ));
    let turn = yolo_turn(&daemon, &mock, &attempts).await;
    // A SIGXCPU would need a second of CPU time to arrive: give it that.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for (id, _) in ON_AMBERD {
        let (status, output) = result_of(&turn, id);
        assert_ne!(status, "denied", "{id} was not tried: {output}");
        assert!(
            !output.contains("[attempt exited 0]"),
            "{id} succeeded against amberd: {output}"
        );
    }
    let (_, own) = result_of(&turn, "own_limits");
    assert!(own.contains("own-ok"), "{own}");
    assert_eq!(
        amberd_state(pid),
        before,
        "amberd's limits, nice or CPUs changed"
    );
    let client = connect(&daemon).await;
    within("daemon/status", client.daemon_status())
        .await
        .expect("amberd is alive");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sandboxed_command_cannot_set_the_setuid_or_setgid_bit() {
    let mock = MockLlm::start(Vec::new()).await;
    let daemon = spawn_config(&mock, FAST_RETRIES);
    let mut attempts: Vec<(&str, String)> = SET_ID_BITS
        .iter()
        .map(|(id, cmd)| (*id, (*cmd).to_owned()))
        .collect();
    attempts.push((
        "plain_modes",
        "cp /bin/true plain && chmod 755 plain && chmod +x plain && ./plain && echo modes-ok"
            .to_owned(),
    ));
    let turn = yolo_turn(&daemon, &mock, &attempts).await;
    let mut with_bits = Vec::new();
    for entry in std::fs::read_dir(&daemon.workspace).unwrap().flatten() {
        let mode = entry.metadata().unwrap().permissions().mode();
        if mode & 0o6000 != 0 {
            with_bits.push(format!("{} {mode:o}", entry.path().display()));
        }
    }
    assert!(
        with_bits.is_empty(),
        "files with set-id bits: {with_bits:?}"
    );
    for (id, _) in SET_ID_BITS {
        let (status, output) = result_of(&turn, id);
        assert_ne!(status, "denied", "{id} was not tried: {output}");
    }
    let (_, plain) = result_of(&turn, "plain_modes");
    assert!(plain.contains("modes-ok"), "{plain}");
}

#[test]
fn a_second_amberd_on_the_same_data_dir_refuses_to_start_and_names_the_first() {
    let daemon = TestDaemon::spawn("http://127.0.0.1:9/v1");
    let other_run = daemon.dir.path().join("run2");
    std::fs::create_dir_all(&other_run).unwrap();
    std::fs::set_permissions(&other_run, std::fs::Permissions::from_mode(0o700)).unwrap();
    let other_socket = other_run.join("amberd.sock");
    let output = daemon
        .second_amberd(&other_socket)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "the second amberd started: {stderr}"
    );
    assert!(
        stderr.contains(&format!("another amberd (pid {})", daemon.pid())),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("on {}", daemon.socket.display())),
        "the refusal says where the first one listens: {stderr}"
    );
    assert!(!other_socket.exists(), "the second amberd bound a socket");
    // The first one serves on.
    assert!(
        daemon
            .rpc("daemon/status", json!({}))
            .get("result")
            .is_some()
    );
}

#[test]
fn the_data_dir_is_private() {
    let daemon = TestDaemon::spawn("http://127.0.0.1:9/v1");
    let mode = std::fs::metadata(daemon.dir.path().join("data"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
}
