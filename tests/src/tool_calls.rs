//! Steps of the suites that script tool calls (policy, approvals, processes): approver
//! connections, scripted tool calls with fixed ids, the raw `session/get` answer, approval
//! answers, the result of one call (event and the envelope the model saw), and finding
//! processes in /proc.

use std::path::Path;

use amber_client::{Client, ClientError, ConnectOptions};
use amber_mock_llm::{MockLlm, MockToolCall, MockTurn};
use amber_proto::Decision;
use serde_json::{Value, json};

use crate::TestDaemon;
use crate::steps::{Events, envelope, tool_messages, within};

/// An initialized connection that declared `capabilities.approvals: true` (no autostart).
pub async fn connect_approver(daemon: &TestDaemon) -> Client {
    let mut opts = ConnectOptions::new("amber-tests-approver", "0");
    opts.socket = Some(daemon.socket.clone());
    opts.autostart = false;
    opts.approvals = true;
    within("connect an approver", Client::connect(opts))
        .await
        .expect("connect to amberd as an approver")
}

/// One tool call with a fixed call id.
pub fn call(id: &str, name: &str, arguments: &Value) -> MockToolCall {
    MockToolCall {
        id: Some(id.to_owned()),
        name: name.to_owned(),
        arguments: arguments.to_string(),
    }
}

/// A streamed completion that makes `arguments` one `write` call in a single chunk (the
/// mock's usual 8-char pieces would be millions of events for megabytes).
pub fn one_chunk_write(arguments: &str) -> MockTurn {
    let frame = |delta: Value, finish: Value| {
        let chunk = json!({"id": "chatcmpl-big", "object": "chat.completion.chunk",
            "created": 1_700_000_000, "model": "mock-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {chunk}\n\n")
    };
    let call = json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_write",
        "type": "function", "function": {"name": "write", "arguments": arguments}}]});
    MockTurn::Raw(format!(
        "{}{}data: [DONE]\n\n",
        frame(call, Value::Null),
        frame(json!({}), json!("tool_calls"))
    ))
}

/// A turn of these tool calls (run in parallel by the daemon, results in order).
pub fn calls(list: Vec<MockToolCall>) -> MockTurn {
    MockTurn::ToolCalls(list)
}

/// A turn with one `bash` call of `command`, with call id `id`.
pub fn bash(id: &str, command: &str) -> MockTurn {
    calls(vec![call(id, "bash", &json!({ "command": command }))])
}

/// `session/get` as the JSON the daemon sent.
pub async fn get_raw(client: &Client, session_id: &str) -> Value {
    within(
        "session/get",
        client.call::<_, Value>("session/get", json!({ "sessionId": session_id })),
    )
    .await
    .expect("session/get")
}

/// `approval/respond` on `client`.
pub async fn respond(
    client: &Client,
    session_id: &str,
    request_id: &str,
    decision: Decision,
) -> Result<bool, ClientError> {
    within(
        "approval/respond",
        client.approval_respond(session_id, request_id, decision),
    )
    .await
    .map(|r| r.accepted)
}

/// Events up to the next `approval_requested`, and that event. Panics if the turn ends
/// first.
pub async fn next_approval(events: &mut Events) -> (Vec<Value>, Value) {
    let mut seen = Vec::new();
    loop {
        let event = events.next().await;
        match event["type"].as_str() {
            Some("approval_requested") => return (seen, event),
            Some("turn_completed") => {
                seen.push(event);
                panic!("the turn ended without asking for approval: {seen:#?}");
            }
            _ => seen.push(event),
        }
    }
}

/// The `requestId` of an `approval_requested` event.
pub fn request_id(approval: &Value) -> String {
    approval["requestId"]
        .as_str()
        .unwrap_or_else(|| panic!("no requestId: {approval}"))
        .to_owned()
}

/// The `tool_call_completed` event of `call_id`.
pub fn completed<'a>(events: &'a [Value], call_id: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["type"] == "tool_call_completed" && e["callId"] == call_id)
        .unwrap_or_else(|| panic!("no tool_call_completed for {call_id} in {events:#?}"))
}

/// `(status, output)` of the call `call_id`.
pub fn result_of(events: &[Value], call_id: &str) -> (String, String) {
    let done = completed(events, call_id);
    (
        done["status"].as_str().unwrap_or("?").to_owned(),
        done["output"].as_str().unwrap_or_default().to_owned(),
    )
}

/// The envelope the model got for `call_id` (from the first request that carries it).
pub fn envelope_for(mock: &MockLlm, call_id: &str) -> Value {
    let requests = mock.requests();
    for request in &requests {
        if let Some(message) = tool_messages(request)
            .into_iter()
            .find(|m| m["tool_call_id"] == call_id)
        {
            return envelope(message);
        }
    }
    panic!("the model never got a result for {call_id}")
}

/// Writes `content` to `path`, creating its parents.
pub fn put(path: &Path, content: &str) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("create parent dirs");
    }
    std::fs::write(path, content).expect("write file");
}

/// Pids of live (non-zombie) processes with `arg` as one whole argument.
pub fn live_processes_with_arg(arg: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("read /proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if cmdline.split(|b| *b == 0).any(|a| a == arg.as_bytes()) && is_alive(pid) {
            found.push(pid);
        }
    }
    found
}

/// A process exists and is not a zombie (without a reaping init a dead child may linger
/// as a zombie; it holds nothing any more).
pub fn is_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // `pid (comm) S ...`: the state follows the last ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|state| state != 'Z' && state != 'X'),
        Err(_) => false,
    }
}

/// SIGKILLs whatever is left with one of its markers when dropped, so a failing test
/// leaves no sleeper behind.
pub struct Sweep(pub Vec<String>);

impl Drop for Sweep {
    fn drop(&mut self) {
        for marker in &self.0 {
            for pid in live_processes_with_arg(marker) {
                if let Ok(pid) = libc::pid_t::try_from(pid) {
                    // SAFETY: kill(2) has no memory-safety preconditions; the pid runs our
                    // marker.
                    unsafe {
                        libc::kill(pid, libc::SIGKILL);
                    }
                }
            }
        }
    }
}

/// A `sleep` argument unique to this daemon and `n`, to find the process in /proc.
pub fn sleep_marker(daemon: &TestDaemon, n: u32) -> String {
    format!("3{n}.{}", daemon.pid())
}

/// Whether the call `id` was sent to approval in `turn`.
pub fn asked(turn: &[Value], id: &str) -> bool {
    crate::steps::of_type(turn, "approval_requested")
        .iter()
        .any(|e| e["callId"] == id)
}

/// A `bash` call of `command` with id `id`.
pub fn sh(id: &str, command: &str) -> MockToolCall {
    call(id, "bash", &json!({ "command": command }))
}
