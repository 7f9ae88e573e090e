//! The executor protocol as docs/executors.md states it, against the real `amber-exec`, by a
//! client that knows only that document (plain JSON lines over the relay's stdio):
//!
//! - `initialize` first, once, in this protocol version; anything else before it is refused;
//! - a line that is not JSON gets -32700 and the connection goes on;
//! - `process/spawn` streams the whole output numbered from 1, takes stdin through
//!   `process/write`, and ends with `job/done.exit`; `job/cancel` kills it;
//! - another connection attaches only with the token: a wrong one is refused and closed, the
//!   right one reads back (`job/read {afterSeq}`) what it missed;
//! - a closed session's work is refused (-32010);
//! - `checkpoint/take` answers a snapshot whole, then as the changes since a `base`;
//!   `checkpoint/read` gives content only while it still hashes to the snapshot's record,
//!   and never from outside the workspace or through a FIFO; `checkpoint/stage` takes only
//!   blobs that hash to their names; `checkpoint/restore` carries out a plan from them.

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
            // Its checkpoint cache goes there too, never in the real home.
            .env("XDG_CACHE_HOME", state.join("cache"))
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

fn blake3_hex(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[test]
fn checkpoints_are_taken_read_and_restored_next_to_the_files() {
    let state = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    std::fs::create_dir(ws.path().join("src")).unwrap();
    std::fs::write(ws.path().join("src/b.rs"), "fn b() {}\n").unwrap();
    let mut relay = Relay::start(state.path(), None);
    initialize(&mut relay, None);
    open(&mut relay, "s1", ws.path());
    let mut seen = Vec::new();
    let take = |relay: &mut Relay, base: Option<u64>, seen: &mut Vec<Value>| {
        let mut params = json!({"session": "s1", "maxFileBytes": 1_048_576});
        if let Some(base) = base {
            params["base"] = json!(base);
        }
        let answer = relay.call("checkpoint/take", params, seen);
        assert!(answer["result"]["take"].is_u64(), "{answer}");
        answer["result"].clone()
    };
    let first = take(&mut relay, None, &mut seen);
    assert_eq!(first["snapshot"]["full"], true, "{first}");
    let paths: Vec<&str> = first["snapshot"]["changed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["a.txt", "src/b.rs"]);
    assert_eq!(
        first["snapshot"]["changed"][0]["hash"],
        blake3_hex(b"alpha\n")
    );

    // Since a base it knows: only what changed.
    std::fs::write(ws.path().join("a.txt"), "ALPHA, longer\n").unwrap();
    let second = take(&mut relay, first["take"].as_u64(), &mut seen);
    assert_eq!(second["snapshot"]["full"], false, "{second}");
    let changed = second["snapshot"]["changed"].as_array().unwrap();
    assert_eq!(changed.len(), 1, "{second}");
    assert_eq!(changed[0]["path"], "a.txt");
    // A base it never sent: whole again.
    let unknown = take(&mut relay, Some(999_999), &mut seen);
    assert_eq!(unknown["snapshot"]["full"], true, "{unknown}");

    // Content goes out only while it hashes to the record, from inside the workspace.
    let fifo = ws.path().join("pipe");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let outside = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(outside.path(), "secret\n").unwrap();
    let read = relay.call(
        "checkpoint/read",
        json!({"session": "s1", "blobs": [
            {"path": "a.txt", "hash": blake3_hex(b"ALPHA, longer\n")},
            {"path": "src/b.rs", "hash": blake3_hex(b"not what it holds")},
            {"path": "pipe", "hash": blake3_hex(b"")},
            {"path": format!("../{}", outside.path().file_name().unwrap().to_str().unwrap()),
             "hash": blake3_hex(b"secret\n")},
        ]}),
        &mut seen,
    );
    let blobs = read["result"]["blobs"].as_array().unwrap();
    assert_eq!(blobs.len(), 1, "{read}");
    assert_eq!(blobs[0]["data"], b64(b"ALPHA, longer\n"));
    let unread: Vec<&str> = read["result"]["unread"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["path"].as_str().unwrap())
        .collect();
    assert_eq!(unread.len(), 3, "{read}");
    assert!(
        unread.contains(&"src/b.rs") && unread.contains(&"pipe"),
        "{read}"
    );

    // A blob staged under another content's name is refused.
    let liar = relay.call(
        "checkpoint/stage",
        json!({"session": "s1", "blobs": [{"hash": blake3_hex(b"x"), "data": b64(b"y")}]}),
        &mut seen,
    );
    assert_eq!(liar["error"]["code"], -32602, "{liar}");

    // A restore writes what was staged, and refuses the protected and the escaping.
    let staged = relay.call(
        "checkpoint/stage",
        json!({"session": "s1", "blobs": [{"hash": blake3_hex(b"alpha\n"), "data": b64(b"alpha\n")}]}),
        &mut seen,
    );
    assert!(staged["result"].is_object(), "{staged}");
    let entry = |path: &str| {
        json!({"path": path, "kind": "file", "mode": 0o644, "size": 6, "mtimeNs": 0, "ino": 0,
               "hash": blake3_hex(b"alpha\n")})
    };
    let restored = relay.call(
        "checkpoint/restore",
        json!({"session": "s1", "plan": {"delete": ["src/b.rs"], "removeDirs": [], "createDirs": [],
               "write": [entry("a.txt"), entry(".git/hooks/pre-commit")]}}),
        &mut seen,
    );
    assert_eq!(
        restored["result"]["written"],
        json!(["a.txt"]),
        "{restored}"
    );
    assert_eq!(
        restored["result"]["deleted"],
        json!(["src/b.rs"]),
        "{restored}"
    );
    assert_eq!(
        restored["result"]["refused"][0]["path"], ".git/hooks/pre-commit",
        "{restored}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("a.txt")).unwrap(),
        "alpha\n"
    );
    assert!(!ws.path().join("src/b.rs").exists());
    assert!(!ws.path().join(".git").exists());

    // A closed session's checkpoints are refused like the rest of its work.
    relay.call("session/close", json!({"session": "s1"}), &mut seen);
    let gone = relay.call(
        "checkpoint/take",
        json!({"session": "s1", "maxFileBytes": 1024}),
        &mut seen,
    );
    assert_eq!(gone["error"]["code"], -32010, "{gone}");
}
