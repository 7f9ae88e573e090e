//! End-to-end: replies a client does not read are bounded in bytes, not only in number,
//! through the real amberd and raw WebSockets (`support/frame_ws.rs`).
//!
//! - One WebSocket asks for a 3 MB `session/get` 300 times and reads nothing: the daemon
//!   queues at most `[server] max_unread_bytes_per_connection` of replies for it (one always
//!   goes), answers the rest -32003, every request exactly once, and its RSS stays bounded
//!   during and comes back after the client closes.
//! - Twenty WebSockets each leave 1,100 `tool/list` replies unread: the daemon-wide
//!   `max_unread_bytes` bounds their sum, and memory returns once they close.
//!
//! RSS is read from `/proc/<pid>/status` (VmRSS now, VmHWM the peak) and printed; the
//! bounds are generous for a loaded machine and far below what the floods cost unbounded.

use std::collections::BTreeMap;
use std::io::{ErrorKind, Write};
use std::os::fd::AsRawFd;
use std::time::Duration;

use amber_mock_llm::{MockLlm, MockTurn};
use amber_tests::TestDaemon;
use amber_tests::steps::{FAST_RETRIES, connect, done, new_session, prompt_turn, spawn_config};
use amber_tests::tool_calls::one_chunk_write;
use frame_ws::{FrameWs, TEXT, frame};
use serde_json::{Value, json};

use crate::support::frame_ws;

const MIB: u64 = 1024 * 1024;

/// A `/proc/<pid>/status` field in bytes.
fn vm(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap();
    kib * 1024
}

/// Sends `frames` without reading anything back; how many went out whole. It stops early
/// only if the daemon stopped reading for good (its cap on unanswered calls), which is fine.
fn send_unread(ws: &mut FrameWs, frames: &[Vec<u8>]) -> u64 {
    ws.stream.set_nonblocking(true).unwrap();
    let mut sent = 0;
    'frames: for bytes in frames {
        let mut offset = 0;
        while offset < bytes.len() {
            match ws.stream.write(&bytes[offset..]) {
                Ok(n) => offset += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    // A busy daemon on a loaded machine reads late, not never.
                    if !writable_within(&ws.stream, Duration::from_secs(30)) {
                        break 'frames;
                    }
                }
                Err(e) => panic!("send: {e}"),
            }
        }
        sent += 1;
    }
    ws.stream.set_nonblocking(false).unwrap();
    sent
}

fn writable_within(stream: &std::os::unix::net::UnixStream, wait: Duration) -> bool {
    let mut fd = libc::pollfd {
        fd: stream.as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid pollfd for a socket this test owns.
    unsafe { libc::poll(&mut fd, 1, wait.as_millis() as libc::c_int) > 0 }
}

/// Waits until the daemon's RSS has not grown for two seconds (it is done producing what
/// it will produce for the flood), at most `limit`.
fn settle(pid: u32, limit: Duration) {
    let start = std::time::Instant::now();
    let mut last = vm(pid, "VmRSS");
    let mut still_since = std::time::Instant::now();
    while start.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(200));
        let now = vm(pid, "VmRSS");
        if now > last + MIB / 2 {
            still_since = std::time::Instant::now();
        }
        last = now;
        if still_since.elapsed() >= Duration::from_secs(2) {
            return;
        }
    }
}

/// RSS back within `slack` of `baseline` (generously waited for); the last reading.
fn returns_to(pid: u32, baseline: u64, slack: u64) -> u64 {
    let mut now = vm(pid, "VmRSS");
    for _ in 0..300 {
        if now <= baseline + slack {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        now = vm(pid, "VmRSS");
    }
    now
}

fn request(id: u64, method: &str, params: Value) -> Vec<u8> {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    frame(true, TEXT, true, body.to_string().as_bytes())
}

/// A session whose history holds one 3 MB `write` (sent whole: `max_field_bytes` is raised).
async fn daemon_with_a_3_mb_session() -> (MockLlm, TestDaemon, String) {
    let content = "x".repeat(3 * 1024 * 1024);
    let args = json!({"path": "big.txt", "content": content});
    let mock = MockLlm::start(vec![
        one_chunk_write(&args.to_string()),
        MockTurn::text("Wrote it."),
        done(),
    ])
    .await;
    let config =
        format!("{FAST_RETRIES}context_window = 1000000000\n[server]\nmax_field_bytes = 8388608\n");
    let daemon = spawn_config(&mock, &config);
    let client = connect(&daemon).await;
    let sid = new_session(&client, &daemon, None).await;
    let mut events = amber_tests::steps::Events::live(&client, &sid).await;
    prompt_turn(&client, &mut events, &sid, "write a big file").await;
    (mock, daemon, sid)
}

#[tokio::test(flavor = "multi_thread")]
async fn unread_session_get_replies_are_bounded_in_bytes_and_each_request_answered_once() {
    let (_mock, d, sid) = daemon_with_a_3_mb_session().await;
    let pid = d.pid();
    let socket = d.socket.clone();
    let sid2 = sid.clone();
    // Warm the path once (one reply read), so the baseline holds its one-time costs.
    let size = tokio::task::spawn_blocking(move || {
        let mut ws = frame_ws::connect(&socket);
        ws.initialize();
        let reply = ws.call(1, "session/get", json!({"sessionId": sid2}));
        assert!(reply["result"].is_object(), "{reply}");
        reply.to_string().len() as u64
    })
    .await
    .unwrap();
    assert!(size > 3 * MIB, "the session/get reply is only {size} bytes");
    let baseline = vm(pid, "VmRSS");

    const CALLS: u64 = 300;
    let socket = d.socket.clone();
    let (answers, during) = tokio::task::spawn_blocking(move || {
        let mut ws = frame_ws::connect(&socket);
        ws.initialize();
        let frames: Vec<Vec<u8>> = (1..=CALLS)
            .map(|id| request(id, "session/get", json!({"sessionId": sid})))
            .collect();
        let sent = send_unread(&mut ws, &frames);
        assert_eq!(sent, CALLS, "the daemon stopped reading 300 requests");
        settle(pid, Duration::from_secs(60));
        let during = vm(pid, "VmRSS");
        let mut answers: BTreeMap<u64, Value> = BTreeMap::new();
        while (answers.len() as u64) < CALLS {
            let reply = ws.recv_json();
            let id = reply["id"]
                .as_u64()
                .expect("every answer names its request");
            assert!(
                answers.insert(id, reply).is_none(),
                "request {id} answered twice"
            );
        }
        (answers, during)
    })
    .await
    .unwrap();
    let peak = vm(pid, "VmHWM").saturating_sub(baseline);
    let after = returns_to(pid, baseline, 24 * MIB);
    let full = answers.values().filter(|a| a["result"].is_object()).count();
    let refused: Vec<&Value> = answers
        .values()
        .filter(|a| a["error"]["code"] == -32003)
        .collect();
    eprintln!(
        "{CALLS} unread session/get of {:.1} MB: {full} sent whole, {} refused; RSS baseline \
         {:.1} MB, during {:.1} MB, peak +{:.1} MB, after close {:.1} MB",
        size as f64 / MIB as f64,
        refused.len(),
        baseline as f64 / MIB as f64,
        during as f64 / MIB as f64,
        peak as f64 / MIB as f64,
        after as f64 / MIB as f64,
    );
    assert_eq!(
        full + refused.len(),
        CALLS as usize,
        "every answer is one or the other"
    );
    assert!(
        !refused.is_empty(),
        "nothing was refused: the flood was not bounded"
    );
    let message = refused[0]["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("max_unread_bytes_per_connection"),
        "{message}"
    );
    // Unbounded, 300 × 3 MB is 900 MB queued.
    assert!(peak < 160 * MIB, "the flood cost {peak} bytes at its peak");
    assert!(
        after < baseline + 24 * MIB,
        "RSS {after} after close, baseline {baseline}"
    );
    assert_eq!(d.rpc_ok("daemon/status", json!({}))["pid"], pid);
}

#[test]
fn many_websockets_with_unread_replies_stay_within_the_daemon_wide_bound() {
    let d = TestDaemon::spawn_with(amber_tests::DaemonOptions {
        config_toml: "[server]\nmax_unread_bytes = 33554432\n".into(),
        ..amber_tests::DaemonOptions::default()
    });
    let pid = d.pid();
    let mut warm = frame_ws::connect(&d.socket);
    warm.initialize();
    let size = warm.call(1, "tool/list", json!({})).to_string().len() as u64;
    drop(warm);
    let baseline = vm(pid, "VmRSS");
    let frames: Vec<Vec<u8>> = (1..=1100)
        .map(|id| request(id, "tool/list", json!({})))
        .collect();
    let mut sockets = Vec::new();
    for _ in 0..20 {
        let mut ws = frame_ws::connect(&d.socket);
        ws.initialize();
        send_unread(&mut ws, &frames);
        sockets.push(ws);
    }
    settle(pid, Duration::from_secs(60));
    let during = vm(pid, "VmRSS");
    drop(sockets);
    let peak = vm(pid, "VmHWM").saturating_sub(baseline);
    let after = returns_to(pid, baseline, 24 * MIB);
    eprintln!(
        "20 WebSockets × 1,100 unread tool/list of {size} bytes ({:.0} MB unbounded): RSS \
         baseline {:.1} MB, during {:.1} MB, peak +{:.1} MB, after close {:.1} MB",
        (20 * 1100 * size) as f64 / MIB as f64,
        baseline as f64 / MIB as f64,
        during as f64 / MIB as f64,
        peak as f64 / MIB as f64,
        after as f64 / MIB as f64,
    );
    assert!(peak < 160 * MIB, "the flood cost {peak} bytes at its peak");
    assert!(
        after < baseline + 24 * MIB,
        "RSS {after} after close, baseline {baseline}"
    );
    assert_eq!(d.rpc_ok("daemon/status", json!({}))["pid"], pid);
}
