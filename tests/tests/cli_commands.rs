//! End-to-end: the real `amber-cli` subcommands besides `run`, against the real `amberd` —
//! `sessions` (list, and `--tree` with background sub-agents under their parent), `show`,
//! `rm`, `attach` (streams, then Ctrl-C detaches and the turn goes on), `cancel`, `daemon
//! start|status|stop` on a socket of their own (autostart, with the start-up log emptied each
//! time), `completions` (also into a closed pipe), and the `rpc` NDJSON bridge: a line that is
//! not UTF-8 or not JSON gets a -32700 line and the bridge goes on; at end of input it waits
//! only for the answers the daemon owes (valid ids), so invalid ids never keep it from exiting.

use std::io::{BufRead, BufReader};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::steps::{done, run_bounded, run_bounded_with_stdin, spawn};
use amber_tests::{DaemonOptions, TestDaemon};
use serde_json::{Value, json};

fn cli_ok(daemon: &TestDaemon, args: &[&str]) -> String {
    let mut cmd = daemon.cli();
    cmd.arg("--no-autostart").args(args);
    let (code, stdout, stderr) = run_bounded(cmd);
    assert_eq!(code, Some(0), "amber-cli {args:?}: {stderr}\n{stdout}");
    stdout
}

fn new_session(daemon: &TestDaemon) -> String {
    let cwd = daemon.workspace.display().to_string();
    let got = daemon.rpc_ok("session/new", json!({"cwd": cwd}));
    got["sessionId"].as_str().unwrap().to_owned()
}

fn state(daemon: &TestDaemon, sid: &str) -> Value {
    daemon.rpc_ok("session/get", json!({"sessionId": sid}))["session"]["state"].clone()
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn sigint(child: &Child) {
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: kill(2) on our own child's pid; no memory-safety preconditions.
    unsafe {
        libc::kill(pid, libc::SIGINT);
    }
}

/// Waits for `child` to exit; SIGKILL and a panic after 20 s.
fn wait_exit(mut child: Child) -> Option<i32> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            panic!("amber-cli did not exit");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn sessions_show_and_rm_manage_sessions() {
    let mock = MockLlm::start_blocking(vec![MockTurn::text("Hello from the session."), done()]);
    let daemon = spawn(&mock);
    assert_eq!(
        cli_ok(&daemon, &["sessions"]).trim(),
        "ID  STATE  MODE  UPDATED  CWD  TITLE"
    );
    let sid = new_session(&daemon);
    daemon.rpc_ok(
        "session/prompt",
        json!({"sessionId": sid, "text": "say hello"}),
    );
    wait_for("the turn to end", || {
        mock.request_count() >= 1 && state(&daemon, &sid) == "idle"
    });

    // The table shows an id by its first eight characters, and every command takes them.
    let short = &sid[..8];
    let table = cli_ok(&daemon, &["sessions"]);
    let row = table
        .lines()
        .find(|l| l.starts_with(&format!("{short}  ")))
        .unwrap_or_else(|| panic!("no row for {short}:\n{table}"));
    assert!(
        row.contains("idle") && row.contains(&daemon.workspace.display().to_string()),
        "{row}"
    );
    let listed: Value = serde_json::from_str(&cli_ok(&daemon, &["sessions", "--json"])).unwrap();
    assert_eq!(listed[0]["sessionId"], sid.as_str());

    let shown = cli_ok(&daemon, &["show", short]);
    assert!(shown.contains(&format!("session   {sid}\n")), "{shown}");
    let got = daemon.rpc_ok("session/get", json!({"sessionId": &sid[..4]}));
    assert_eq!(got["session"]["sessionId"], sid.as_str());
    assert!(
        shown.contains("say hello") && shown.contains("Hello from the session."),
        "{shown}"
    );
    let shown: Value = serde_json::from_str(&cli_ok(&daemon, &["show", &sid, "--json"])).unwrap();
    assert_eq!(shown["session"]["sessionId"], sid.as_str());

    cli_ok(&daemon, &["rm", short]);
    let list = daemon.rpc_ok("session/list", json!({}));
    assert_eq!(list["sessions"], json!([]), "rm left the session");
    let mut cmd = daemon.cli();
    cmd.args(["--no-autostart", "show", &sid]);
    let (code, _, stderr) = run_bounded(cmd);
    assert_eq!(code, Some(1), "{stderr}");
    // In words, with the way on, and no protocol number.
    assert!(stderr.contains("session not found"), "{stderr}");
    assert!(stderr.contains("amber-cli sessions"), "{stderr}");
    assert!(!stderr.contains("-32001"), "{stderr}");
}

#[test]
fn attach_streams_events_and_ctrl_c_detaches_leaving_the_turn_running() {
    let chunks: Vec<String> = (0..20).map(|i| format!("piece{i} ")).collect();
    let mock = MockLlm::start_blocking(vec![
        MockTurn::Slow {
            chunks: chunks.clone(),
            interval_ms: 100,
        },
        done(),
    ]);
    let daemon = spawn(&mock);
    let sid = new_session(&daemon);
    let mut cmd = daemon.cli();
    cmd.args(["--no-autostart", "attach", &sid, "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let (tx, rx) = mpsc::channel::<Value>();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(serde_json::from_str(&line).unwrap());
        }
    });
    // Attached (synced) before the turn starts, so its deltas are all live.
    let first = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    assert_eq!(first["type"], "synced", "{first}");
    daemon.rpc_ok(
        "session/prompt",
        json!({"sessionId": sid, "text": "stream"}),
    );
    let mut deltas = 0;
    while deltas < 3 {
        let event = rx.recv_timeout(Duration::from_secs(20)).unwrap();
        assert_eq!(event["sessionId"], sid.as_str(), "{event}");
        if event["type"] == "message_delta" {
            deltas += 1;
        }
    }
    sigint(&child);
    assert_eq!(wait_exit(child), Some(0));
    // Detaching left the turn running; it completes on its own.
    assert_eq!(state(&daemon, &sid), "running");
    wait_for("the turn to complete", || state(&daemon, &sid) == "idle");
    let got = daemon.rpc_ok("session/get", json!({"sessionId": sid}));
    let replied = got["messages"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["role"] == "assistant" && m["content"] == chunks.concat().as_str());
    assert!(replied, "{got}");
}

#[test]
fn cancel_stops_a_running_turn() {
    let chunks: Vec<String> = (0..50).map(|i| format!("slow{i} ")).collect();
    let mock = MockLlm::start_blocking(vec![MockTurn::Slow {
        chunks,
        interval_ms: 500,
    }]);
    let daemon = spawn(&mock);
    let sid = new_session(&daemon);
    assert_eq!(
        cli_ok(&daemon, &["cancel", &sid]).trim(),
        "nothing to cancel"
    );
    daemon.rpc_ok(
        "session/prompt",
        json!({"sessionId": sid, "text": "talk slowly"}),
    );
    wait_for("the turn to stream", || {
        mock.request_count() == 1 && state(&daemon, &sid) == "running"
    });
    assert_eq!(cli_ok(&daemon, &["cancel", &sid]).trim(), "cancelled");
    wait_for("the session to be idle", || state(&daemon, &sid) == "idle");
}

/// Kills an autostarted daemon left behind by a failed test.
struct KillOnDrop(Option<u32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            // SAFETY: kill(2); the pid is the daemon this test started.
            unsafe {
                libc::kill(libc::pid_t::try_from(pid).unwrap(), libc::SIGKILL);
            }
        }
    }
}

#[test]
fn daemon_start_status_stop_on_a_socket_of_their_own() {
    let mock = MockLlm::start_blocking(Vec::new());
    let daemon = spawn(&mock);
    let dir = daemon.dir.path().join("own");
    std::fs::create_dir_all(&dir).unwrap();
    // amberd binds, and clients connect, only in a private socket directory.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let socket = dir.join("amberd.sock");
    // The start-up log of an earlier autostart: emptied by the next one.
    std::fs::write(dir.join("amberd.log"), "stale line of an older start\n").unwrap();
    let run = |args: &[&str]| {
        let mut cmd = daemon.cli();
        cmd.env("AMBER_SOCKET", &socket).args(args);
        run_bounded(cmd)
    };

    let (code, _, stderr) = run(&["daemon", "status"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("not running"), "{stderr}");

    let (code, stdout, stderr) = run(&["daemon", "start"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.starts_with("amberd started: pid "), "{stdout}");
    assert!(stdout.contains(&socket.display().to_string()), "{stdout}");
    let pid: u32 = stdout["amberd started: pid ".len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let mut guard = KillOnDrop(Some(pid));
    let log = std::fs::read_to_string(dir.join("amberd.log")).unwrap();
    assert!(
        !log.contains("stale line"),
        "the start-up log was not emptied: {log}"
    );

    let (code, stdout, _) = run(&["daemon", "start"]);
    assert_eq!(code, Some(0));
    assert!(
        stdout.starts_with(&format!("amberd already running: pid {pid} ")),
        "{stdout}"
    );
    let (code, stdout, stderr) = run(&["daemon", "status", "--json"]);
    assert_eq!(code, Some(0), "{stderr}");
    let status: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(status["pid"], pid);
    let (code, stdout, _) = run(&["daemon", "status"]);
    assert_eq!(code, Some(0));
    assert!(stdout.contains(&pid.to_string()), "{stdout}");

    let (code, stdout, stderr) = run(&["daemon", "stop"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout.trim(), "amberd stopped");
    guard.0 = None;
    let (code, _, _) = run(&["daemon", "status"]);
    assert_eq!(code, Some(1));
    let (code, stdout, _) = run(&["daemon", "stop"]);
    assert_eq!(code, Some(0));
    assert!(stdout.starts_with("amberd is not running"), "{stdout}");
}

#[test]
fn completions_print_a_script_and_a_closed_pipe_ends_quietly() {
    let mock = MockLlm::start_blocking(Vec::new());
    let daemon = spawn(&mock);
    let stdout = cli_ok(&daemon, &["completions", "bash"]);
    assert!(
        stdout.starts_with("_amber__cli() {"),
        "{}",
        &stdout[..200.min(stdout.len())]
    );
    assert!(
        stdout.contains("complete -F _amber__cli "),
        "no `complete` line"
    );

    // stdout is a pipe whose reader is gone before anything is written (`| head -0`).
    let mut fds = [0; 2];
    // SAFETY: pipe(2) fills the two-element array with fresh descriptors.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: both descriptors were just created and are owned here only.
    let (reader, writer) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(reader);
    let mut cmd = daemon.cli();
    cmd.args(["completions", "zsh"])
        .stdin(Stdio::null())
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped());
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

// `amber-cli rpc`: the NDJSON bridge.

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientInfo":{"name":"sh","version":"0"},"capabilities":{"approvals":false}}}"#;

fn status(id: &str) -> Vec<u8> {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"daemon/status","params":{{}}}}"#).into_bytes()
}

/// Pipes `lines` (raw bytes, one per line) into `amber-cli rpc --no-autostart`; returns the
/// exit code, the parsed output lines and stderr.
fn bridge(daemon: &TestDaemon, lines: &[Vec<u8>]) -> (Option<i32>, Vec<Value>, String) {
    let mut input = Vec::new();
    for line in lines {
        input.extend_from_slice(line);
        input.push(b'\n');
    }
    let path = daemon.dir.path().join("rpc-input.ndjson");
    std::fs::write(&path, input).unwrap();
    let mut cmd = daemon.cli();
    cmd.args(["rpc", "--no-autostart"]);
    let stdin = Stdio::from(std::fs::File::open(&path).unwrap());
    let (code, stdout, stderr) = run_bounded_with_stdin(cmd, stdin);
    let answers = stdout
        .lines()
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("output is not JSON ({e}): {l:?}"))
        })
        .collect();
    (code, answers, stderr)
}

fn answer<'a>(answers: &'a [Value], id: &Value) -> &'a Value {
    answers
        .iter()
        .find(|a| &a["id"] == id)
        .unwrap_or_else(|| panic!("no answer with id {id}: {answers:?}"))
}

#[test]
fn rpc_bridge_answers_invalid_utf8_and_garbage_with_parse_errors_and_goes_on() {
    let daemon = TestDaemon::spawn_with(DaemonOptions::default());
    let (code, answers, stderr) = bridge(
        &daemon,
        &[
            INITIALIZE.into(),
            status("2"),
            b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"daemon/st\xffatus\"}".to_vec(),
            status(r#""after-bad-utf8""#),
            b"{this is not json".to_vec(),
            status("4"),
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    for id in [json!(1), json!(2), json!("after-bad-utf8"), json!(4)] {
        assert!(answer(&answers, &id)["result"].is_object(), "{answers:?}");
    }
    let parse_errors: Vec<&Value> = answers
        .iter()
        .filter(|a| a["error"]["code"] == -32700)
        .collect();
    assert_eq!(
        parse_errors.len(),
        2,
        "one -32700 per unparsable line: {answers:?}"
    );
    // The id when it was read before the fault (line 3's `3`), else null.
    let ids: Vec<&Value> = parse_errors.iter().map(|e| &e["id"]).collect();
    assert_eq!(ids, [&json!(3), &Value::Null], "{parse_errors:?}");
    let messages: Vec<&str> = parse_errors
        .iter()
        .map(|e| e["error"]["message"].as_str().unwrap())
        .collect();
    assert!(
        messages
            .iter()
            .any(|m| m.contains("line 3") && m.contains("UTF-8")),
        "{messages:?}"
    );
    assert!(
        messages
            .iter()
            .any(|m| m.contains("line 5") && m.contains("JSON")),
        "{messages:?}"
    );
    assert!(
        answers
            .iter()
            .filter(|a| a["id"] == 3)
            .all(|a| a["error"]["code"] == -32700),
        "the bad line was not forwarded: {answers:?}"
    );
}

#[test]
fn rpc_bridge_exits_at_eof_after_requests_with_invalid_ids() {
    let daemon = TestDaemon::spawn_with(DaemonOptions::default());
    let invalid = ["1.5", "true", "[1]", "18446744073709551616", "-0", "null"];
    let mut lines: Vec<Vec<u8>> = vec![INITIALIZE.into()];
    lines.extend(invalid.iter().map(|id| status(id)));
    lines.push(status(r#""valid""#));
    // The last line has an invalid id too: nothing the daemon owes is left after it.
    lines.push(status("1.5"));
    // The generous bound of run_bounded (30 s) is the drain timeout of a bridge that waits
    // for these answers; a bridge that waits only for valid ids ends at end of input.
    let (code, answers, stderr) = bridge(&daemon, &lines);
    assert_eq!(
        code,
        Some(0),
        "the bridge ends cleanly at end of input: {stderr}"
    );
    assert!(answer(&answers, &json!(1))["result"].is_object());
    assert!(answer(&answers, &json!("valid"))["result"].is_object());
}

/// A script (or a person) whose first line comes later than the daemon's `initialize`
/// deadline: the bridge opens its WebSocket only once there is input, so the deadline runs
/// from then and the requests are answered.
#[test]
fn rpc_bridge_connects_when_its_first_line_arrives() {
    use std::io::Write;
    let daemon = TestDaemon::spawn_with(DaemonOptions {
        config_toml: "[server]\ninitialize_timeout_ms = 300\n".into(),
        ..DaemonOptions::default()
    });
    let mut cmd = daemon.cli();
    cmd.args(["rpc", "--no-autostart"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // Well past the deadline before anything is typed.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    stdin.write_all(INITIALIZE.as_bytes()).unwrap();
    stdin.write_all(b"\n").unwrap();
    stdin.write_all(&status("2")).unwrap();
    stdin.write_all(b"\n").unwrap();
    drop(stdin);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let output = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the bridge exits at end of input")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
    let answers: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for id in [json!(1), json!(2)] {
        assert!(answer(&answers, &id)["result"].is_object(), "{answers:?}");
    }
}

/// The parent's answer to a scripted request: fan out two background children, wait for
/// their results, then say so; each child reports on its task at once.
fn fan_out_twice(request: &Value) -> MockTurn {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let system = messages
        .first()
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default();
    if system.starts_with("You are a sub-agent of amber") {
        return MockTurn::text("report done");
    }
    let delivered = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["tool_call_id"].as_str())
        .filter(|id| id.starts_with("amber_delivery_"))
        .count();
    if delivered >= 2 {
        return MockTurn::text("both reports are in");
    }
    let fanned_out = messages.iter().any(|m| {
        m["tool_calls"]
            .as_array()
            .is_some_and(|calls| calls.iter().any(|c| c["function"]["name"] == "task"))
    });
    if fanned_out {
        return MockTurn::tool_call("task_wait", &json!({"timeout_secs": 60}));
    }
    let tasks: Vec<Value> = ["alpha", "beta"]
        .iter()
        .map(|name| json!({"prompt": format!("look at {name}"), "description": name}))
        .collect();
    MockTurn::tool_call("task", &json!({"background": true, "tasks": tasks}))
}

#[test]
fn sessions_tree_shows_children_and_spend() {
    let mock = MockLlm::start_blocking(Vec::new());
    mock.set_responder(fan_out_twice);
    // Priced, so that the spend has dollars as well as tokens.
    let daemon = amber_tests::steps::spawn_config(
        &mock,
        "[[provider.prices]]\nmodel = \"mock-model\"\ninput = 1.0\noutput = 2.0\n\n\
         [agent]\nconfirm_finish = false\n",
    );
    let parent = new_session(&daemon);
    daemon.rpc_ok(
        "session/prompt",
        json!({"sessionId": parent, "text": "fan out"}),
    );
    let list = || daemon.rpc_ok("session/list", json!({}))["sessions"].clone();
    wait_for("two delivered children and an idle parent", || {
        let sessions = list();
        let all = sessions.as_array().cloned().unwrap_or_default();
        let delivered = all
            .iter()
            .filter(|s| s["parent"]["sessionId"] == parent.as_str())
            .filter(|s| s["parent"]["state"] == "delivered" && s["state"] == "idle")
            .count();
        delivered == 2 && state(&daemon, &parent) == "idle"
    });
    let sessions = list().as_array().cloned().unwrap();
    let tokens = |s: &Value| s["usage"]["totalTokens"].as_u64().unwrap();
    let mut children: Vec<&Value> = sessions
        .iter()
        .filter(|s| s["parent"]["sessionId"] == parent.as_str())
        .collect();
    children.sort_by_key(|c| c["parent"]["order"].as_u64());
    let parent_info = sessions
        .iter()
        .find(|s| s["sessionId"] == parent.as_str())
        .unwrap();
    let sum: u64 = tokens(parent_info) + children.iter().map(|c| tokens(c)).sum::<u64>();
    assert!(children.iter().all(|c| tokens(c) > 0), "{children:#?}");

    // The children right under their parent, in the order they were made, each with its
    // task's state and its own spend; the parent with its own and with theirs.
    let table = cli_ok(&daemon, &["sessions", "--tree"]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 4, "{table}");
    assert!(
        lines[0].starts_with("ID ") && lines[0].contains("WITH CHILDREN"),
        "{table}"
    );
    let row = |line: &str, lead: &str, id: &str| {
        assert!(
            line.starts_with(&format!("{lead}{}", &id[..8])),
            "no row for {id} led by {lead:?}:\n{table}"
        );
        line.split("  ")
            .filter(|c| !c.is_empty())
            .map(|c| c.trim().to_owned())
            .collect::<Vec<String>>()
    };
    let top = row(lines[1], "", &parent);
    assert_eq!(top[1..3], ["idle", "-"], "{table}");
    assert!(
        top[3].starts_with(&format!("{} tok $", tokens(parent_info))),
        "{table}"
    );
    assert!(top[4].starts_with(&format!("{sum} tok $")), "{table}");
    for (line, lead, child) in
        [("├─ ", 0), ("└─ ", 1)].map(|(lead, i)| (lines[2 + i], lead, children[i]))
    {
        let cells = row(line, lead, child["sessionId"].as_str().unwrap());
        assert_eq!(cells[1..3], ["idle", "delivered (end_turn)"], "{table}");
        assert!(
            cells[3].starts_with(&format!("{} tok $", tokens(child))),
            "{table}"
        );
        assert_eq!(cells[4], "-", "{table}");
        assert_eq!(
            cells[5],
            child["parent"]["task"].as_str().unwrap(),
            "{table}"
        );
    }

    // `--json` nests them the same way, with the sum.
    let tree: Value =
        serde_json::from_str(&cli_ok(&daemon, &["sessions", "--tree", "--json"])).unwrap();
    let top = tree.as_array().unwrap();
    assert_eq!(top.len(), 1, "{tree:#}");
    assert_eq!(top[0]["sessionId"], parent.as_str());
    assert_eq!(top[0]["spendWithChildren"]["totalTokens"], sum);
    let nested: Vec<&Value> = top[0]["children"].as_array().unwrap().iter().collect();
    assert_eq!(nested.len(), 2, "{tree:#}");
    for (got, want) in nested.iter().zip(&children) {
        assert_eq!(got["sessionId"], want["sessionId"]);
        assert_eq!(got["parent"]["state"], "delivered");
        assert_eq!(got["children"], json!([]));
    }
}
