//! End-to-end: a model writes a 17 MiB file. The session stays openable: `session/get` answers
//! within `max_message_bytes` with the write's arguments elided (a marker naming the full
//! length), pages with `messagesLimit`/`beforeIndex` walk every message, `session/subscribe
//! {afterSeq: 0}` replays the history elided (from memory, and after a restart from the
//! log), `amber-cli show` and `attach` and the TUI open it — while the file on disk and the context the
//! model sees keep every byte.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use amber_client::Client;
use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::TestDaemon;
use amber_tests::steps::{
    FAST_RETRIES, connect, done, messages, new_session, run_bounded, spawn_config, stop_reason,
    within,
};
use amber_tests::tool_calls::{call, calls, one_chunk_write};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::support::tmux;

/// The size of the file the model writes.
const FILE_BYTES: usize = 17 * 1024 * 1024;
/// The default `[server] max_message_bytes`.
const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// The provider settings of every daemon here: fast retries, a context window the history
/// fits in (no compaction eats the script), and a reply bound the 17 MiB write fits under.
fn provider() -> String {
    format!("{FAST_RETRIES}context_window = 1000000000\nmax_reply_bytes = 67108864\n")
}

/// `FILE_BYTES` of numbered lines.
fn big_content() -> String {
    let mut text = String::with_capacity(FILE_BYTES + 64);
    let mut line = 0;
    while text.len() < FILE_BYTES {
        text.push_str(&format!("line {line} of a file the model wrote\n"));
        line += 1;
    }
    text.truncate(FILE_BYTES);
    text
}

/// The original length named by a trailing `…[amber: N bytes elided to K]` marker, checked
/// against the documented format: K is the length of the head before the marker.
fn elided_length(text: &str) -> Option<usize> {
    let body = text.strip_suffix(']')?;
    let at = body.rfind("…[amber: ")?;
    let (full, kept) = body[at + "…[amber: ".len()..].split_once(" bytes elided to ")?;
    let kept: usize = kept.parse().ok()?;
    assert_eq!(
        kept,
        at,
        "the marker names the head's length: {}",
        &body[at..]
    );
    full.parse().ok()
}

struct Written {
    mock: MockLlm,
    daemon: TestDaemon,
    sid: String,
    /// The raw JSON text of the write call's arguments, as the model produced it.
    arguments: String,
    /// The first turn's events, live.
    turn: Vec<Value>,
}

/// A session whose model wrote `big.txt` (17 MiB) and then answered "Wrote big.txt.".
async fn session_with_a_17_mib_write(config_toml: &str) -> Written {
    let args = json!({"path": "big.txt", "content": big_content()});
    let mock = MockLlm::start(vec![
        one_chunk_write(&args.to_string()),
        MockTurn::text("Wrote big.txt."),
        done(),
    ])
    .await;
    let daemon = spawn_config(&mock, &format!("{}{config_toml}", provider()));
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let turn = slow_turn(&client, &sid, "write a big file").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{}", types_of(&turn));
    Written {
        mock,
        daemon,
        sid,
        arguments: args.to_string(),
        turn,
    }
}

/// Prompts and collects the turn's events (through `turn_completed`). Each event may take
/// a while: a debug-built daemon on a loaded machine moves 17 MiB of JSON several times.
async fn slow_turn(client: &Client, sid: &str, prompt: &str) -> Vec<Value> {
    const BOUND: Duration = Duration::from_secs(300);
    let mut stream = within("subscribe", client.subscribe_raw(sid, None))
        .await
        .expect("session/subscribe");
    within("session/prompt", client.session_prompt(sid, prompt))
        .await
        .expect("session/prompt");
    let mut events = Vec::new();
    loop {
        let raw = tokio::time::timeout(BOUND, stream.next())
            .await
            .unwrap_or_else(|_| panic!("no event within {BOUND:?}: {}", types_of(&events)))
            .expect("the subscription stays open")
            .expect("no subscription error");
        let event: Value = serde_json::from_str(raw.json()).unwrap();
        let last = event["type"] == "turn_completed";
        events.push(event);
        if last {
            return events;
        }
    }
}

fn types_of(events: &[Value]) -> String {
    let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    types.join(", ")
}

/// `session/get` over HTTP: the whole response object and its size on the wire.
fn session_get(daemon: &TestDaemon, params: Value) -> (Value, usize) {
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "session/get", "params": params});
    let (status, body) = daemon.raw_http(&request.to_string());
    assert_eq!(status, 200, "{}", &body[..body.len().min(500)]);
    (serde_json::from_str(&body).unwrap(), body.len())
}

/// The `write` call's arguments in a `session/get` message list.
fn write_arguments(messages: &[Value]) -> &str {
    messages
        .iter()
        .flat_map(|m| m["toolCalls"].as_array().into_iter().flatten())
        .find(|c| c["name"] == "write")
        .and_then(|c| c["arguments"].as_str())
        .expect("the write call in the messages")
}

/// The `content` argument of the `tool_call_started` event of the write.
fn started_content(events: &[Value]) -> &str {
    events
        .iter()
        .find(|e| e["type"] == "tool_call_started" && e["name"] == "write")
        .and_then(|e| e["arguments"]["content"].as_str())
        .unwrap_or_else(|| panic!("no tool_call_started of the write: {}", types_of(events)))
}

#[tokio::test(flavor = "multi_thread")]
async fn session_get_answers_within_the_cap_and_the_file_and_the_model_keep_every_byte() {
    let w = session_with_a_17_mib_write("").await;
    let on_disk = std::fs::read_to_string(w.daemon.workspace.join("big.txt")).unwrap();
    assert_eq!(on_disk.len(), FILE_BYTES);
    assert!(
        on_disk == big_content(),
        "the file holds every byte written"
    );

    let (response, size) = session_get(&w.daemon, json!({"sessionId": w.sid}));
    assert!(size < MAX_MESSAGE_BYTES, "{size} bytes");
    let got = &response["result"];
    assert!(got.is_object(), "{}", response["error"]);
    let all = got["messages"].as_array().unwrap();
    assert_eq!(
        got["totalMessages"],
        all.len(),
        "everything fits once elided"
    );
    assert_eq!(
        (got["firstIndex"].as_u64(), got["hasMore"].as_bool()),
        (Some(0), Some(false))
    );
    let arguments = write_arguments(all);
    assert!(arguments.len() <= 256 * 1024, "{}", arguments.len());
    assert_eq!(elided_length(arguments), Some(w.arguments.len()));
    assert!(
        w.arguments
            .starts_with(&arguments[..arguments.rfind('…').unwrap()])
    );
    let answered = all.iter().any(|m| m["content"] == "Wrote big.txt.");
    assert!(answered, "the reply after the write is there");

    // The next request to the model carried the call exactly as the model made it.
    let requests = w.mock.requests();
    let sent = messages(&requests[1])
        .iter()
        .flat_map(|m| m["tool_calls"].as_array().into_iter().flatten())
        .find(|c| c["function"]["name"] == "write")
        .and_then(|c| c["function"]["arguments"].as_str())
        .expect("the write call in the second request");
    assert!(
        sent == w.arguments,
        "the model's context keeps the whole call"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn pages_walk_every_message_and_bad_paging_params_name_the_field() {
    let w = session_with_a_17_mib_write("").await;
    let (whole, _) = session_get(&w.daemon, json!({"sessionId": w.sid}));
    let whole = &whole["result"];
    let total = whole["totalMessages"].as_u64().unwrap();
    assert!(total >= 4, "{total}");

    let mut walked: Vec<Value> = Vec::new();
    let mut before: Option<u64> = None;
    loop {
        let mut params = json!({"sessionId": w.sid, "messagesLimit": 2});
        if let Some(before) = before {
            params["beforeIndex"] = json!(before);
        }
        let (page, size) = session_get(&w.daemon, params);
        assert!(size < MAX_MESSAGE_BYTES);
        let page = &page["result"];
        let first = page["firstIndex"].as_u64().unwrap();
        let got = page["messages"].as_array().unwrap();
        assert_eq!(first + got.len() as u64, before.unwrap_or(total), "{page}");
        assert!(got.len() <= 2 && !got.is_empty());
        assert_eq!(page["totalMessages"], total);
        assert_eq!(page["hasMore"], first > 0);
        walked.splice(0..0, got.iter().cloned());
        if first == 0 {
            break;
        }
        before = Some(first);
    }
    assert_eq!(
        &Value::Array(walked),
        &whole["messages"],
        "pages join into the history"
    );

    let beyond = total + 1;
    for (params, field) in [
        (
            json!({"sessionId": w.sid, "messagesLimit": 0}),
            "messagesLimit",
        ),
        (
            json!({"sessionId": w.sid, "messagesLimit": -1}),
            "messagesLimit",
        ),
        (
            json!({"sessionId": w.sid, "beforeIndex": -3}),
            "beforeIndex",
        ),
        (
            json!({"sessionId": w.sid, "beforeIndex": beyond}),
            "beforeIndex",
        ),
    ] {
        let (response, _) = session_get(&w.daemon, params.clone());
        assert_eq!(response["error"]["code"], -32602, "{params}: {response}");
        let message = response["error"]["message"].as_str().unwrap();
        assert!(message.contains(field), "{params}: {message}");
    }
    // The end itself is a valid (empty) page: nothing before index 0.
    let (empty, _) = session_get(&w.daemon, json!({"sessionId": w.sid, "beforeIndex": 0}));
    assert_eq!(empty["result"]["messages"], json!([]), "{empty}");
    assert_eq!(empty["result"]["hasMore"], false);
}

/// Every durable event replayed from seq 0 up to `synced`, as raw JSON text.
async fn replay_from_start(daemon: &TestDaemon, sid: &str) -> Vec<String> {
    let client = connect(daemon).await;
    let mut stream = within("subscribe", client.subscribe_raw(sid, Some(0)))
        .await
        .expect("session/subscribe");
    let mut frames = Vec::new();
    loop {
        let raw = tokio::time::timeout(Duration::from_secs(300), stream.next())
            .await
            .expect("a replayed event")
            .expect("the replay ends with synced")
            .expect("the replay has no error");
        let json = raw.json().to_owned();
        if raw.event.as_ref().is_some_and(|e| e.seq.is_none()) {
            assert!(json.contains("\"synced\""), "{json}");
            return frames;
        }
        frames.push(json);
    }
}

fn check_replay(frames: &[String], live: &[Value]) {
    let events: Vec<Value> = frames
        .iter()
        .map(|f| serde_json::from_str(f).unwrap())
        .collect();
    for frame in frames {
        assert!(
            frame.len() < MAX_MESSAGE_BYTES,
            "an event of {} bytes",
            frame.len()
        );
    }
    let content = started_content(&events);
    assert!(content.len() <= 256 * 1024, "{}", content.len());
    assert_eq!(elided_length(content), Some(FILE_BYTES));
    let live_durable = live.iter().filter(|e| e["seq"].is_u64()).count();
    assert!(events.len() >= live_durable, "{}", types_of(&events));
}

#[tokio::test(flavor = "multi_thread")]
async fn live_and_replayed_events_are_elided_also_after_a_restart_from_the_log() {
    // One event in memory: a replay from seq 0 reads the rest back from the log.
    let mut w = session_with_a_17_mib_write("[sessions]\nmemory_events = 1\n").await;
    let live = started_content(&w.turn);
    assert_eq!(
        elided_length(live),
        Some(FILE_BYTES),
        "the live event is elided"
    );
    let completed = w
        .turn
        .iter()
        .find(|e| e["type"] == "tool_call_completed")
        .unwrap();
    assert_eq!(completed["status"], "ok", "{completed}");

    check_replay(&replay_from_start(&w.daemon, &w.sid).await, &w.turn);
    w.daemon.restart();
    check_replay(&replay_from_start(&w.daemon, &w.sid).await, &w.turn);
    let (response, size) = session_get(&w.daemon, json!({"sessionId": w.sid}));
    assert!(
        size < MAX_MESSAGE_BYTES && response["result"].is_object(),
        "{size}"
    );
    assert_eq!(
        elided_length(write_arguments(
            response["result"]["messages"].as_array().unwrap()
        )),
        Some(w.arguments.len())
    );
    let on_disk = std::fs::metadata(w.daemon.workspace.join("big.txt")).unwrap();
    assert_eq!(on_disk.len() as usize, FILE_BYTES);
}

fn sigint(child: &Child) {
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: kill(2) on our own child's pid; no memory-safety preconditions.
    unsafe {
        libc::kill(pid, libc::SIGINT);
    }
}

/// `amber-cli attach SID --replay --json` until `synced`, then Ctrl-C: the lines it printed
/// and its exit code.
fn attach_replay(daemon: &TestDaemon, sid: &str) -> (Vec<Value>, Option<i32>) {
    let mut cmd = daemon.cli();
    cmd.args(["--no-autostart", "attach", sid, "--replay", "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(serde_json::from_str(&line).unwrap());
        }
    });
    let mut lines = Vec::new();
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("amber-cli attach prints the replay and synced");
        let synced = line["type"] == "synced";
        lines.push(line);
        if synced {
            break;
        }
    }
    sigint(&child);
    let deadline = Instant::now() + Duration::from_secs(20);
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        assert!(Instant::now() < deadline, "amber-cli attach did not exit");
        std::thread::sleep(Duration::from_millis(10));
    };
    (lines, code)
}

#[tokio::test(flavor = "multi_thread")]
async fn amber_cli_show_and_attach_open_the_session() {
    let w = session_with_a_17_mib_write("").await;
    let (daemon, sid) = (&w.daemon, w.sid.clone());
    let show = |args: Vec<String>| {
        let mut cmd = daemon.cli();
        cmd.arg("--no-autostart").arg("show").args(args);
        let (code, stdout, stderr) = run_bounded(cmd);
        assert_eq!(code, Some(0), "amber-cli show: {stderr}");
        stdout
    };
    let text = show(vec![sid.clone()]);
    assert!(
        text.contains(&format!("session   {sid}\n")),
        "{}",
        &text[..text.len().min(2000)]
    );
    assert!(
        text.contains("▸ write") && text.contains("Wrote big.txt."),
        "{}",
        &text[..text.len().min(2000)]
    );
    assert!(text.len() < MAX_MESSAGE_BYTES);

    let shown: Value = serde_json::from_str(&show(vec![sid.clone(), "--json".into()])).unwrap();
    let all = shown["messages"].as_array().unwrap();
    assert_eq!(shown["totalMessages"], all.len());
    assert_eq!(elided_length(write_arguments(all)), Some(w.arguments.len()));

    let (lines, code) = attach_replay(daemon, &sid);
    assert_eq!(code, Some(0));
    assert_eq!(elided_length(started_content(&lines)), Some(FILE_BYTES));
    assert!(
        lines.iter().any(|l| l["type"] == "turn_completed"),
        "{}",
        types_of(&lines)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_tui_attaches_to_the_session() {
    let w = session_with_a_17_mib_write("").await;
    let tmux = tmux::Tmux::new("oversized");
    tmux.start("big", &w.daemon, &["--session", &w.sid]);
    let screen = tmux.wait_within(
        "big",
        "the reply after the write",
        Duration::from_secs(120),
        |screen| screen.contains("Wrote big.txt.") || screen.contains("[amber exited"),
    );
    assert!(screen.contains("Wrote big.txt."), "{screen}");
    assert!(!screen.contains("[amber exited"), "{screen}");
}

/// With a small message cap, the default page is the newest messages that fit; `amber-cli
/// show` walks back through every page.
#[tokio::test(flavor = "multi_thread")]
async fn a_history_longer_than_one_message_comes_in_pages_and_show_prints_it_all() {
    let writes: Vec<MockTurn> = (0..6)
        .map(|i| {
            let args = json!({"path": format!("part{i}.txt"), "content": "p".repeat(300 * 1024)});
            calls(vec![call(&format!("call_{i}"), "write", &args)])
        })
        .collect();
    let mut script = writes;
    script.extend([MockTurn::text("Six parts written."), done()]);
    let mock = MockLlm::start(script).await;
    let config = format!("{}[server]\nmax_message_bytes = 1048576\n", provider());
    let daemon = spawn_config(&mock, &config);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let turn = slow_turn(&client, &sid, "write six parts").await;
    assert_eq!(stop_reason(&turn), "end_turn", "{}", types_of(&turn));

    let (response, size) = session_get(&daemon, json!({"sessionId": sid}));
    assert!(size < 1_048_576, "{size}");
    let page = &response["result"];
    assert_eq!(
        page["hasMore"], true,
        "six elided writes do not fit in 1 MiB"
    );
    let total = page["totalMessages"].as_u64().unwrap();
    let got = page["messages"].as_array().unwrap().len() as u64;
    assert_eq!(page["firstIndex"].as_u64().unwrap() + got, total);
    assert_eq!(
        page["messages"].as_array().unwrap().last().unwrap()["content"],
        "Six parts written."
    );

    let mut cmd = daemon.cli();
    cmd.args(["--no-autostart", "show", &sid, "--json"]);
    let (code, stdout, stderr) = run_bounded(cmd);
    assert_eq!(code, Some(0), "{stderr}");
    let shown: Value = serde_json::from_str(&stdout).unwrap();
    let all = shown["messages"].as_array().unwrap();
    assert_eq!(all.len() as u64, total, "show walked every page");
    for i in 0..6 {
        let call = all
            .iter()
            .flat_map(|m| m["toolCalls"].as_array().into_iter().flatten())
            .find(|c| c["id"] == format!("call_{i}").as_str())
            .unwrap_or_else(|| panic!("call_{i} missing"));
        let arguments = call["arguments"].as_str().unwrap();
        assert!(
            elided_length(arguments).is_some_and(|n| n > 300 * 1024),
            "call_{i}"
        );
    }
}
