//! End-to-end: the three stdio bridges (`amber-cli rpc`, `amber-cli acp`, `amber-cli
//! mcp-server`) spoken to raw, the way a hostile or broken client would, against the real
//! amberd. For each bridge, a table of bad lines (not UTF-8, not JSON, a JSON array and a
//! number, an id that is a lone surrogate, a 17 MiB line, and for MCP a notification before
//! `initialize`), each followed by a valid request that must be answered, the bridge still
//! running; the bridge's RSS bounded while a 256 MiB line streams in; a request the daemon
//! refuses as too big (`[server] max_message_bytes` set low) answered as an error while the
//! bridge's connection to amberd lives on; and for MCP, `notifications/cancelled` of a
//! running `amber_run` ending the turn and killing its command, destructive commands denied
//! without `--yes`, and a huge `prompt` refused at once.

use std::process::Stdio;
use std::time::{Duration, Instant};

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::TestDaemon;
use amber_tests::steps::{Events, connect, done, eventually, spawn, spawn_config};
use amber_tests::tool_calls::{Sweep, bash, call, calls, live_processes_with_arg, sleep_marker};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc;

/// How long an answer may take on a loaded machine.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// The bridges' line limit (amberd's default `max_message_bytes`).
const LIMIT: usize = 16 * 1024 * 1024;

/// A bridge process spoken to over raw stdio.
struct Bridge {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::UnboundedReceiver<String>,
}

impl Bridge {
    /// `amber-cli --no-autostart ARGS` for `daemon`.
    fn spawn(daemon: &TestDaemon, args: &[&str]) -> Bridge {
        let mut cmd = daemon.cli();
        cmd.arg("--no-autostart").args(args);
        let mut cmd = tokio::process::Command::from(cmd);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("spawn the bridge");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Bridge {
            child,
            stdin,
            lines,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id().expect("the bridge is running")
    }

    async fn write(&mut self, bytes: &[u8]) {
        self.stdin
            .write_all(bytes)
            .await
            .expect("write to the bridge");
        self.stdin.flush().await.expect("flush the bridge's stdin");
    }

    async fn send(&mut self, message: &Value) {
        let mut line = message.to_string().into_bytes();
        line.push(b'\n');
        self.write(&line).await;
    }

    /// Every output line up to and including the answer to `id` (other lines, such as
    /// errors for earlier bad lines and notifications, before it).
    async fn until_answer(&mut self, id: &Value) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + ANSWER_TIMEOUT;
        let mut seen = Vec::new();
        loop {
            let line = tokio::time::timeout_at(deadline, self.lines.recv())
                .await
                .unwrap_or_else(|_| {
                    panic!("no answer to {id} in {ANSWER_TIMEOUT:?}; saw {seen:#?}")
                })
                .unwrap_or_else(|| {
                    panic!("the bridge's stdout ended before the answer to {id}; saw {seen:#?}")
                });
            let value: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
                panic!("the bridge wrote a line that is not JSON ({e}): {line}")
            });
            let done = value["id"] == *id && value.get("method").is_none();
            seen.push(value);
            if done {
                return seen;
            }
        }
    }

    /// The answer to the request `message` (whose id must be unique).
    async fn call(&mut self, message: Value) -> Value {
        self.send(&message).await;
        self.until_answer(&message["id"]).await.pop().unwrap()
    }

    /// The bridge has not exited.
    fn assert_running(&mut self, after: &str) {
        let status = self.child.try_wait().expect("try_wait");
        assert!(
            status.is_none(),
            "the bridge exited ({status:?}) after {after}"
        );
    }
}

/// The bridges, with how each one opens its conversation.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Rpc,
    Acp,
    Mcp,
}

impl Kind {
    const ALL: [Kind; 3] = [Kind::Rpc, Kind::Acp, Kind::Mcp];

    fn args(self) -> &'static [&'static str] {
        match self {
            Kind::Rpc => &["rpc"],
            Kind::Acp => &["acp"],
            Kind::Mcp => &["mcp-server"],
        }
    }

    /// A request it answers whatever the state (after the handshake).
    fn probe(self, id: &str) -> Value {
        match self {
            Kind::Rpc => json!({"jsonrpc": "2.0", "id": id, "method": "daemon/status"}),
            Kind::Acp => {
                json!({"jsonrpc": "2.0", "id": id, "method": "session/list", "params": {}})
            }
            Kind::Mcp => json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}),
        }
    }

    fn initialize(self) -> Value {
        match self {
            Kind::Rpc => json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
                "protocolVersion": 1, "clientInfo": {"name": "hostile", "version": "0"}}}),
            Kind::Acp => json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
                "protocolVersion": 1, "clientCapabilities": {}}}),
            Kind::Mcp => json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "hostile", "version": "0"}}}),
        }
    }

    /// The bridge's code for a line over its limit.
    fn oversized_code(self) -> i64 {
        match self {
            Kind::Rpc => -32007,
            Kind::Acp | Kind::Mcp => -32600,
        }
    }

    /// Spawns the bridge and completes its handshake.
    async fn open(self, daemon: &TestDaemon) -> Bridge {
        let mut bridge = Bridge::spawn(daemon, self.args());
        let init = bridge.call(self.initialize()).await;
        assert!(init.get("result").is_some(), "{self:?} initialize: {init}");
        if self == Kind::Mcp {
            bridge
                .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
                .await;
        }
        bridge
    }
}

/// A line of `len` bytes (newline included): a request with id `id` padded with `x`.
fn huge_request(id: &str, method: &str, len: usize) -> Vec<u8> {
    let head = format!(r#"{{"jsonrpc":"2.0","id":"{id}","method":"{method}","params":{{"pad":""#);
    let tail = "\"}}\n";
    let mut line = head.into_bytes();
    line.resize(len - tail.len(), b'x');
    line.extend_from_slice(tail.as_bytes());
    line
}

/// A bad line and what the bridge itself answers to it: `Some((code, id))`, or `None` when
/// the line is the daemon's to judge (the rpc bridge forwards any JSON).
struct Hostile {
    name: &'static str,
    line: Vec<u8>,
    answer: fn(Kind) -> Option<(i64, Value)>,
}

fn hostile_lines() -> Vec<Hostile> {
    vec![
        Hostile {
            name: "invalid UTF-8",
            line: b"\xff\xfe{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\"}\n".to_vec(),
            answer: |_| Some((-32700, Value::Null)),
        },
        Hostile {
            name: "invalid UTF-8 after the id",
            line: b"{\"jsonrpc\":\"2.0\",\"id\":\"utf8\",\"method\":\"\xff\xfe\"}\n".to_vec(),
            answer: |_| Some((-32700, json!("utf8"))),
        },
        Hostile {
            name: "not JSON",
            line: b"{\"jsonrpc\": \"2.0\", \"id\": \n".to_vec(),
            answer: |_| Some((-32700, Value::Null)),
        },
        Hostile {
            name: "a JSON array",
            line: b"[1, 2, 3]\n".to_vec(),
            answer: |kind| (kind != Kind::Rpc).then_some((-32600, Value::Null)),
        },
        Hostile {
            name: "a JSON number",
            line: b"42\n".to_vec(),
            answer: |kind| (kind != Kind::Rpc).then_some((-32600, Value::Null)),
        },
        Hostile {
            name: "a lone surrogate in the params",
            line: b"{\"jsonrpc\":\"2.0\",\"id\":\"sur\",\"method\":\"x\",\"params\":{\"a\":\"\\udc00\"}}\n"
                .to_vec(),
            answer: |_| Some((-32700, json!("sur"))),
        },
        Hostile {
            name: "a lone-surrogate id",
            line: b"{\"jsonrpc\":\"2.0\",\"id\":\"\\ud800\",\"method\":\"initialize\"}\n".to_vec(),
            answer: |_| Some((-32700, Value::Null)),
        },
        Hostile {
            name: "a 17 MiB line",
            line: huge_request("big", "session/prompt", 17 * 1024 * 1024),
            answer: |kind| Some((kind.oversized_code(), json!("big"))),
        },
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn every_bad_line_is_answered_and_the_next_request_served() {
    let mock = MockLlm::start(vec![]).await;
    let daemon = spawn(&mock);
    for kind in Kind::ALL {
        let mut bridge = kind.open(&daemon).await;
        for (n, hostile) in hostile_lines().into_iter().enumerate() {
            bridge.write(&hostile.line).await;
            let probe = kind.probe(&format!("after-{n}"));
            bridge.send(&probe).await;
            let seen = bridge.until_answer(&probe["id"]).await;
            let (answer, before) = seen.split_last().unwrap();
            assert!(
                answer.get("result").is_some(),
                "{kind:?}, after {}: {answer}",
                hostile.name
            );
            if let Some((code, id)) = (hostile.answer)(kind) {
                let error = before
                    .iter()
                    .find(|l| l["error"]["code"] == code)
                    .unwrap_or_else(|| {
                        panic!("{kind:?}: no {code} for {}; saw {before:#?}", hostile.name)
                    });
                assert_eq!(error["id"], id, "{kind:?}, {}: {error}", hostile.name);
                if hostile.line.len() > LIMIT {
                    let message = error["error"]["message"].as_str().unwrap();
                    assert!(message.contains(&LIMIT.to_string()), "{kind:?}: {message}");
                }
            }
            bridge.assert_running(hostile.name);
        }
        // End of input is the only way out, and a clean one.
        drop(bridge.stdin);
        let status = tokio::time::timeout(ANSWER_TIMEOUT, bridge.child.wait())
            .await
            .expect("the bridge exits at end of input")
            .unwrap();
        assert!(status.success(), "{kind:?}: {status:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn mcp_tolerates_a_bad_line_and_a_notification_before_initialize() {
    let mock = MockLlm::start(vec![]).await;
    let daemon = spawn(&mock);
    let mut bridge = Bridge::spawn(&daemon, Kind::Mcp.args());
    bridge.write(b"{not json\n").await;
    bridge
        .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    bridge.write(b"\xff\n").await;
    // Each bad line is answered (the notification is dropped, unanswered, as JSON-RPC says).
    for _ in 0..2 {
        let line = tokio::time::timeout(ANSWER_TIMEOUT, bridge.lines.recv())
            .await
            .expect("an answer to each bad line")
            .unwrap();
        let error: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(error["error"]["code"], -32700, "{error}");
    }
    // A request before the handshake, and a handshake that does not fit: each answered.
    let early = bridge.call(Kind::Mcp.probe("early")).await;
    assert!(early.get("error").is_some(), "{early}");
    let malformed = bridge
        .call(json!({"jsonrpc": "2.0", "id": "bad-init", "method": "initialize", "params": 5}))
        .await;
    assert_eq!(malformed["error"]["code"], -32600, "{malformed}");
    bridge.send(&Kind::Mcp.initialize()).await;
    let seen = bridge.until_answer(&json!("init")).await;
    let answer = seen.last().unwrap();
    assert!(answer["result"]["serverInfo"].is_object(), "{answer}");
    bridge.assert_running("a failed handshake");
    // A second handshake attempt on the same server is refused, not fatal.
    let again = bridge.call(Kind::Mcp.initialize().tap_id("init2")).await;
    assert!(
        again.get("result").is_some() || again.get("error").is_some(),
        "{again}"
    );
    bridge
        .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    let tools = bridge.call(Kind::Mcp.probe("tools")).await;
    assert_eq!(
        tools["result"]["tools"].as_array().unwrap().len(),
        2,
        "{tools}"
    );
    bridge.assert_running("a notification before initialize");
}

/// A flood of requests written at once: every one answered exactly once (a result, or an
/// error such as ACP's `-32003` past its requests in flight), the bridge still up.
#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_requests_gets_one_answer_each() {
    const FLOOD: usize = 3000;
    let mock = MockLlm::start(vec![]).await;
    let daemon = spawn(&mock);
    for kind in Kind::ALL {
        let mut bridge = kind.open(&daemon).await;
        let mut burst = Vec::new();
        for n in 0..FLOOD {
            burst.extend_from_slice(kind.probe(&format!("f{n}")).to_string().as_bytes());
            burst.push(b'\n');
        }
        bridge.write(&burst).await;
        let mut answered = std::collections::HashMap::<String, usize>::new();
        let deadline = tokio::time::Instant::now() + ANSWER_TIMEOUT;
        while answered.len() < FLOOD {
            let line = tokio::time::timeout_at(deadline, bridge.lines.recv())
                .await
                .unwrap_or_else(|_| panic!("{kind:?}: {} of {FLOOD} answered", answered.len()))
                .expect("the bridge's stdout ended");
            let value: Value = serde_json::from_str(&line).unwrap();
            if let Some(id) = value["id"].as_str() {
                assert!(
                    value.get("result").is_some() || value.get("error").is_some(),
                    "{value}"
                );
                *answered.entry(id.to_owned()).or_default() += 1;
            }
        }
        let twice: Vec<_> = answered.iter().filter(|(_, n)| **n > 1).collect();
        assert!(
            twice.is_empty(),
            "{kind:?}: answered more than once: {twice:?}"
        );
        // And it still serves.
        let after = bridge.call(kind.probe("after-flood")).await;
        assert!(after.get("result").is_some(), "{kind:?}: {after}");
        bridge.assert_running("a flood");
    }
}

trait TapId {
    fn tap_id(self, id: &str) -> Value;
}

impl TapId for Value {
    fn tap_id(mut self, id: &str) -> Value {
        self["id"] = json!(id);
        self
    }
}

/// VmRSS of `pid` in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/PID/status")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_huge_line_costs_each_bridge_at_most_its_limit_in_memory() {
    const STREAMED: usize = 256 * 1024 * 1024;
    const CHUNK: usize = 1024 * 1024;
    // The limit, its head and the allocator's slack; holding the line would cost 256 MiB.
    const BOUND_KIB: u64 = 64 * 1024;
    let mock = MockLlm::start(vec![]).await;
    let daemon = spawn(&mock);
    for kind in Kind::ALL {
        let mut bridge = kind.open(&daemon).await;
        let pid = bridge.pid();
        let before = rss_kib(pid);
        let mut peak = before;
        bridge
            .write(br#"{"jsonrpc":"2.0","id":"huge","method":"x","params":{"pad":""#)
            .await;
        let chunk = vec![b'x'; CHUNK];
        for _ in 0..STREAMED / CHUNK {
            bridge.write(&chunk).await;
            peak = peak.max(rss_kib(pid));
        }
        bridge.write(b"\"}}\n").await;
        let probe = kind.probe("after-huge");
        bridge.send(&probe).await;
        let seen = bridge.until_answer(&probe["id"]).await;
        peak = peak.max(rss_kib(pid));
        let refused = seen
            .iter()
            .find(|l| l["id"] == "huge")
            .expect("the huge line answered");
        assert_eq!(refused["error"]["code"], kind.oversized_code(), "{refused}");
        eprintln!("{kind:?}: RSS {before} KiB before, {peak} KiB at most while the line streamed");
        assert!(
            peak.saturating_sub(before) < BOUND_KIB,
            "{kind:?}: RSS rose from {before} KiB to {peak} KiB while a {STREAMED}-byte line streamed in"
        );
        bridge.assert_running("a 256 MiB line");
    }
}

/// With amberd's limit set below the bridges', a message within the bridge's limit reaches
/// amberd and is refused there (`-32007`, `id: null`): the request gets that error with its
/// own id, and the bridge's connection to amberd serves the next request.
#[tokio::test(flavor = "multi_thread")]
async fn a_request_amberd_refuses_as_too_big_fails_alone() {
    let mock = MockLlm::start(vec![MockTurn::text("small answer"), done()]).await;
    let daemon = spawn_config(
        &mock,
        "[server]\nmax_message_bytes = 1048576\n[provider]\nmax_retries = 1\n",
    );
    let workspace = daemon.workspace.display().to_string();
    let big = "y".repeat(2 * 1024 * 1024);

    // ACP: the prompt goes through amber-client, which places the null-id answer.
    let mut acp = Kind::Acp.open(&daemon).await;
    let new = acp
        .call(
            json!({"jsonrpc": "2.0", "id": "new", "method": "session/new",
            "params": {"cwd": workspace, "mcpServers": []}}),
        )
        .await;
    let session_id = new["result"]["sessionId"].as_str().unwrap().to_owned();
    let refused = acp
        .call(
            json!({"jsonrpc": "2.0", "id": "big", "method": "session/prompt",
            "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": big}]}}),
        )
        .await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("-32007") && message.contains("1048576"),
        "{refused}"
    );
    let answered = acp
        .call(
            json!({"jsonrpc": "2.0", "id": "small", "method": "session/prompt",
            "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]}}),
        )
        .await;
    assert_eq!(answered["result"]["stopReason"], "end_turn", "{answered}");
    acp.assert_running("a prompt amberd refused");

    // rpc: the daemon's own answer passes through, and end of input does not wait for an
    // answer that will never come with the request's id.
    let mut rpc = Kind::Rpc.open(&daemon).await;
    rpc.write(&huge_request("big", "daemon/status", 2 * 1024 * 1024))
        .await;
    let status = rpc.call(Kind::Rpc.probe("status")).await;
    assert!(status.get("result").is_some(), "{status}");
    drop(rpc.stdin);
    let started = Instant::now();
    let exit = tokio::time::timeout(ANSWER_TIMEOUT, rpc.child.wait())
        .await
        .expect("rpc exits at end of input")
        .unwrap();
    assert!(exit.success(), "{exit:?}");
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "rpc waited for the refused request's answer"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn mcp_cancelled_ends_the_turn_and_kills_its_command() {
    let mock = MockLlm::start(vec![]).await;
    let daemon = spawn(&mock);
    let marker = sleep_marker(&daemon, 1);
    let _sweep = Sweep(vec![marker.clone()]);
    mock.push([
        bash("call_sleep", &format!("sleep {marker}")),
        MockTurn::text("after"),
        done(),
    ]);
    let mut mcp = Kind::Mcp.open(&daemon).await;
    mcp.send(&json!({"jsonrpc": "2.0", "id": "run", "method": "tools/call", "params": {
        "name": "amber_run",
        "arguments": {"prompt": "sleep a while", "cwd": daemon.workspace.display().to_string(), "mode": "yolo"}}}))
        .await;
    eventually("the sentinel sleep to run", Duration::from_secs(60), || {
        !live_processes_with_arg(&marker).is_empty()
    })
    .await;
    let list = daemon.rpc_ok("session/list", json!({}));
    let session_id = list["sessions"][0]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let watcher = connect(&daemon).await;
    let mut events = Events::subscribe(&watcher, &session_id, Some(0)).await;
    mcp.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": "run", "reason": "changed my mind"}}),
    )
    .await;
    let turn = events.until("turn_completed").await;
    assert_eq!(turn.last().unwrap()["stopReason"], "cancelled", "{turn:#?}");
    eventually("the sentinel sleep to die", Duration::from_secs(60), || {
        live_processes_with_arg(&marker).is_empty()
    })
    .await;
    // The server is still up (an answer to the cancelled call is optional).
    let tools = mcp.call(Kind::Mcp.probe("tools")).await;
    assert!(tools.get("result").is_some(), "{tools}");
    let state = daemon.rpc_ok("session/get", json!({"sessionId": session_id}));
    assert_ne!(state["session"]["state"], "running", "{}", state["session"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn mcp_refuses_a_huge_prompt_at_once() {
    let mock = MockLlm::start(vec![]).await;
    let daemon = spawn(&mock);
    let mut mcp = Kind::Mcp.open(&daemon).await;
    let head = format!(
        r#"{{"jsonrpc":"2.0","id":"huge","method":"tools/call","params":{{"name":"amber_run","arguments":{{"cwd":"{}","prompt":""#,
        daemon.workspace.display()
    );
    let mut line = head.into_bytes();
    line.resize(LIMIT + 1024, b'p');
    line.extend_from_slice(b"\"}}}\n");
    mcp.write(&line).await;
    let seen = mcp.until_answer(&json!("huge")).await;
    let refused = seen.last().unwrap();
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&LIMIT.to_string()),
        "{refused}"
    );
    let sessions = daemon.rpc_ok("session/list", json!({}));
    assert_eq!(sessions["sessions"], json!([]), "no session was started");
    mcp.assert_running("a huge prompt");
}

/// Without `--yes`, commands amber's policy sends to approval in `write` mode are denied
/// (no approver is connected) and change nothing; a file outside the workspace is not
/// written.
#[tokio::test(flavor = "multi_thread")]
async fn mcp_without_yes_denies_what_asks() {
    let outside = tempfile::tempdir().unwrap();
    let outside_file = outside.path().join("escaped.txt");
    // (what, the call, what its result says)
    let cases: Vec<(&str, MockTurn, &str)> = vec![
        (
            "rm -rf",
            bash("call_rm", "rm -rf build"),
            "no approver is connected",
        ),
        (
            "find -delete",
            bash("call_find", "find build -delete"),
            "no approver is connected",
        ),
        (
            "a write outside the workspace",
            calls(vec![call(
                "call_write",
                "write",
                &json!({"path": outside_file.display().to_string(), "content": "x"}),
            )]),
            "is outside the workspace",
        ),
    ];
    let mut turns = Vec::new();
    for (_, turn, _) in &cases {
        turns.extend([turn.clone(), MockTurn::text("denied, moving on"), done()]);
    }
    let mock = MockLlm::start(turns).await;
    let daemon = spawn(&mock);
    std::fs::create_dir_all(daemon.workspace.join("build/deep")).unwrap();
    let mut mcp = Kind::Mcp.open(&daemon).await;
    for (n, (name, _, says)) in cases.iter().enumerate() {
        let answer = mcp
            .call(json!({"jsonrpc": "2.0", "id": format!("run{n}"), "method": "tools/call", "params": {
                "name": "amber_run",
                "arguments": {"prompt": name, "cwd": daemon.workspace.display().to_string()}}}))
            .await;
        assert_eq!(answer["result"]["isError"], false, "{name}: {answer}");
        let sid = answer["result"]["structuredContent"]["sessionId"].clone();
        let got = daemon.rpc_ok("session/get", json!({"sessionId": sid}));
        let tool = got["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["role"] == "tool")
            .unwrap_or_else(|| panic!("{name}: no tool result"));
        let content = tool["content"].as_str().unwrap();
        assert!(content.contains(says), "{name}: {content}");
    }
    assert!(
        daemon.workspace.join("build/deep").is_dir(),
        "a destructive command ran"
    );
    assert!(
        !outside_file.exists(),
        "a file outside the workspace was written"
    );
}
