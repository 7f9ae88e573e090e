//! The executor protocol as docs/executors.md states it, against the real `amber-exec`, by a
//! client that knows only that document (plain JSON lines over the relay's stdio):
//!
//! - `initialize` first, once, in this protocol version; anything else before it is refused;
//! - a line that is not JSON gets -32700 and the connection goes on;
//! - `process/spawn` streams the whole output numbered from 1, takes stdin through
//!   `process/write`, and ends with `job/done.exit`; `job/cancel` kills it;
//! - another connection attaches only with the token: a wrong one is refused and closed, the
//!   right one reads back (`job/read {afterSeq}`) what it missed;
//! - a closed session's work is refused (-32010).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use amber_tests::bin_path;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(10);

/// One relay process and the lines it printed.
struct Relay {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<Value>,
    next_id: u64,
}

impl Relay {
    fn start(state: &std::path::Path, attach: Option<&str>) -> Relay {
        let mut cmd = Command::new(bin_path("amber-exec"));
        cmd.args(["--stdio", "--linger", "20", "--state-dir"])
            .arg(state)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if let Some(id) = attach {
            cmd.args(["--attach", id]);
        }
        let mut child = cmd.spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(value) = serde_json::from_str(&line)
                    && tx.send(value).is_err()
                {
                    break;
                }
            }
        });
        Relay {
            child,
            stdin,
            lines,
            next_id: 1,
        }
    }

    fn send_line(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends a request and returns its answer (notifications meanwhile are kept in `seen`).
    fn call(&mut self, method: &str, params: Value, seen: &mut Vec<Value>) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_line(&line.to_string());
        self.answer(id, seen)
    }

    fn answer(&mut self, id: u64, seen: &mut Vec<Value>) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let value = self.lines.recv_timeout(left).expect("an answer");
            if value["id"] == id {
                return value;
            }
            seen.push(value);
        }
    }

    /// Notifications until `job/done` of `job`.
    fn until_done(&mut self, job: &str, seen: &mut Vec<Value>) -> Value {
        if let Some(done) = seen
            .iter()
            .find(|v| v["method"] == "job/done" && v["params"]["job"] == job)
        {
            return done.clone();
        }
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let value = self.lines.recv_timeout(left).expect("job/done");
            let done = value["method"] == "job/done" && value["params"]["job"] == job;
            seen.push(value.clone());
            if done {
                return value;
            }
        }
    }

    /// Whether the relay's output ended (the executor closed the connection).
    fn closed(&self) -> bool {
        matches!(
            self.lines.recv_timeout(WAIT),
            Err(RecvTimeoutError::Disconnected)
        )
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn initialize(relay: &mut Relay, token: Option<&str>) -> Value {
    let mut seen = Vec::new();
    let mut params = json!({"protocolVersion": 1, "client": "protocol test"});
    if let Some(token) = token {
        params["token"] = json!(token);
    }
    relay.call("initialize", params, &mut seen)
}

fn open(relay: &mut Relay, session: &str, workspace: &std::path::Path) {
    let mut seen = Vec::new();
    let answer = relay.call(
        "session/open",
        json!({"session": session, "workspace": workspace,
               "sandbox": {"mode": "workspace-write", "network": false}}),
        &mut seen,
    );
    assert!(answer["result"]["workspace"].is_string(), "{answer}");
}

fn outputs(seen: &[Value], job: &str) -> Vec<(u64, String)> {
    seen.iter()
        .filter(|v| v["method"] == "job/output" && v["params"]["job"] == job)
        .map(|v| {
            (
                v["params"]["seq"].as_u64().unwrap(),
                v["params"]["text"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn the_handshake_comes_first_and_bad_lines_do_not_end_the_connection() {
    let state = tempfile::tempdir().unwrap();
    let mut relay = Relay::start(state.path(), None);
    let mut seen = Vec::new();
    let early = relay.call("ping", json!({}), &mut seen);
    assert_eq!(early["error"]["code"], -32002, "{early}");
    let wrong = relay.call("initialize", json!({"protocolVersion": 99}), &mut seen);
    assert_eq!(wrong["error"]["code"], -32602, "{wrong}");
    let hello = initialize(&mut relay, None);
    let result = &hello["result"];
    assert_eq!(result["protocolVersion"], 1, "{hello}");
    assert!(result["executorId"].is_string() && result["token"].is_string());
    assert_eq!(result["machine"]["os"], std::env::consts::OS);
    relay.send_line("this is not json");
    let garbage = relay.lines.recv_timeout(WAIT).unwrap();
    assert_eq!(garbage["error"]["code"], -32700, "{garbage}");
    let again = relay.call("initialize", json!({"protocolVersion": 1}), &mut seen);
    assert_eq!(again["error"]["code"], -32600, "initialize once: {again}");
    let ping = relay.call("ping", json!({}), &mut seen);
    assert_eq!(ping["result"], json!({}), "the connection goes on: {ping}");
    let unknown = relay.call("no/such", json!({}), &mut seen);
    assert_eq!(unknown["error"]["code"], -32601);
}

#[test]
fn a_process_streams_its_output_in_order_takes_stdin_and_reports_its_exit() {
    let state = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let mut relay = Relay::start(state.path(), None);
    initialize(&mut relay, None);
    open(&mut relay, "s1", ws.path());
    let mut seen = Vec::new();
    let spawned = relay.call(
        "process/spawn",
        json!({"session": "s1", "job": "cat", "command": "cat; echo eof; exit 3", "stdin": true}),
        &mut seen,
    );
    assert!(spawned["result"]["pid"].as_u64().unwrap() > 0, "{spawned}");
    for (data, close) in [("one\n", false), ("two\n", true)] {
        let wrote = relay.call(
            "process/write",
            json!({"job": "cat", "data": data, "close": close}),
            &mut seen,
        );
        assert_eq!(wrote["result"], json!({}), "{wrote}");
    }
    let done = relay.until_done("cat", &mut seen);
    let chunks = outputs(&seen, "cat");
    let seqs: Vec<u64> = chunks.iter().map(|(seq, _)| *seq).collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as u64).collect::<Vec<_>>(),
        "numbered from 1"
    );
    let text: String = chunks.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(text, "one\ntwo\neof\n");
    assert_eq!(done["params"]["exit"]["code"], 3, "{done}");
    assert_eq!(
        done["params"]["seq"],
        seqs.len() as u64,
        "the last chunk's number"
    );

    // job/cancel kills a process that would run on.
    let mut seen = Vec::new();
    relay.call(
        "process/spawn",
        json!({"session": "s1", "job": "sleeper", "command": "echo up; sleep 60"}),
        &mut seen,
    );
    relay.call("job/cancel", json!({"job": "sleeper"}), &mut seen);
    let done = relay.until_done("sleeper", &mut seen);
    assert_eq!(done["params"]["exit"]["signal"], libc::SIGKILL, "{done}");
}

#[test]
fn an_attaching_client_needs_the_token_and_reads_back_what_it_missed() {
    let state = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let mut first = Relay::start(state.path(), None);
    let hello = initialize(&mut first, None);
    let id = hello["result"]["executorId"].as_str().unwrap().to_owned();
    let token = hello["result"]["token"].as_str().unwrap().to_owned();
    open(&mut first, "s1", ws.path());
    let mut seen = Vec::new();
    first.call(
        "process/spawn",
        json!({"session": "s1", "job": "count",
               "command": "for i in $(seq 1 30); do echo n$i; sleep 0.02; done"}),
        &mut seen,
    );
    // The first client goes away mid-stream.
    drop(first);

    let mut thief = Relay::start(state.path(), Some(&id));
    let refused = initialize(&mut thief, Some("not-the-token"));
    assert_eq!(refused["error"]["code"], -32002, "{refused}");
    assert!(thief.closed(), "one try per connection");

    let mut second = Relay::start(state.path(), Some(&id));
    let hello = initialize(&mut second, Some(&token));
    assert_eq!(hello["result"]["resumed"], true, "{hello}");
    assert_eq!(hello["result"]["executorId"], id.as_str());
    std::thread::sleep(Duration::from_secs(1));
    let mut seen = Vec::new();
    let read = second.call(
        "job/read",
        json!({"job": "count", "afterSeq": 0}),
        &mut seen,
    );
    let text: String = read["result"]["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["text"].as_str().unwrap())
        .collect();
    let expected: String = (1..=30).map(|i| format!("n{i}\n")).collect();
    assert_eq!(text, expected, "nothing lost while nobody was attached");
    assert_eq!(read["result"]["done"]["exit"]["code"], 0, "{read}");

    // A closed session's work is refused from then on.
    second.call("session/close", json!({"session": "s1"}), &mut seen);
    let refused = second.call(
        "process/spawn",
        json!({"session": "s1", "job": "late", "command": "true"}),
        &mut seen,
    );
    assert_eq!(refused["error"]["code"], -32010, "{refused}");
}

#[test]
fn a_hidden_directory_that_holds_the_executors_own_is_hidden_whole() {
    // amberd's socket directly in the runtime dir that also holds the executor's state dir:
    // both hidden, the outer one whole, and the command still runs.
    let root = tempfile::tempdir().unwrap();
    let run = root.path().join("run");
    let ws = root.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&run).unwrap();
    let mut relay = Relay::start(&run.join("amber-exec"), None);
    initialize(&mut relay, None);
    let mut seen = Vec::new();
    let opened = relay.call(
        "session/open",
        json!({"session": "s1", "workspace": ws, "hidden": [run],
               "sandbox": {"mode": "workspace-write", "network": false}}),
        &mut seen,
    );
    assert!(opened["result"].is_object(), "{opened}");
    relay.call(
        "process/spawn",
        json!({"session": "s1", "job": "look",
               "command": format!("echo ran; ls {} 2>&1 || true", run.display())}),
        &mut seen,
    );
    relay.until_done("look", &mut seen);
    let text: String = outputs(&seen, "look").into_iter().map(|(_, t)| t).collect();
    assert!(text.starts_with("ran\n"), "the sandbox was set up: {text}");
    assert!(
        text.contains("Permission denied"),
        "and the directory hidden: {text}"
    );
}
