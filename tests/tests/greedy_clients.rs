//! End-to-end: greedy clients, through the real amberd.
//!
//! - No client can lock the others out. WebSockets that never `initialize`, or leave a frame
//!   half sent, are closed (1008) once their deadline passes, or sooner when a newer client
//!   needs their slot; connect-only sockets give their slots to newer clients; a request body that never
//!   finishes is answered 408; while WebSockets hold every slot they may take, plain HTTP
//!   (`daemon/status`) still answers; request bytes in flight are capped (-32003). Deadlines
//!   are set short in `[server]`, and the tests wait for "eventually closed", not for a time.
//! - What a greedy client costs the daemon, read from `/proc/<pid>/status` (VmRSS now, VmHWM
//!   the peak) and asserted with the goals: a WebSocket that sends 20,000 requests and never
//!   reads the replies costs < 32 MB at its peak, and RSS returns to within 10 MB of the
//!   baseline after it closes (the daemon stops reading it while its unanswered calls are at
//!   the cap); 24 concurrent 15 MB bodies stay within the bytes-in-flight budget (the rest
//!   are -32003). Each of these tests prints its figures (docs/benchmarks.md records them).

use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::Duration;

use amber_tests::{DaemonOptions, TestDaemon};
use frame_ws::{TEXT, Upgrade, frame};
use serde_json::{Value, json};

use crate::support::frame_ws;

fn daemon_with(config_toml: &str) -> TestDaemon {
    TestDaemon::spawn_with(DaemonOptions {
        config_toml: config_toml.into(),
        ..DaemonOptions::default()
    })
}

fn status_answers(d: &TestDaemon) {
    let (status, body) = d.raw_http(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "daemon/status", "params": {}}).to_string(),
    );
    assert_eq!(status, 200, "daemon/status over HTTP: {body}");
    let response: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(response["result"]["pid"], d.pid(), "{response}");
}

#[test]
fn websockets_that_never_initialize_are_closed_and_http_answers_meanwhile() {
    let d = daemon_with("[server]\ninitialize_timeout_ms = 1500\n");
    let mut open = Vec::new();
    let mut refused = Vec::new();
    for _ in 0..128 {
        match frame_ws::upgrade(&d.socket) {
            Upgrade::Open(ws) => open.push(ws),
            Upgrade::Refused(status, body) => refused.push((status, body)),
        }
    }
    // None is refused: once the WebSockets' share is held, each newer upgrade takes the
    // slot of the oldest that has not sent `initialize`. Plain HTTP still answers.
    assert!(refused.is_empty(), "refused: {refused:?}");
    status_answers(&d);
    for ws in &mut open {
        let (code, reason) = ws.close_frame();
        assert_eq!(code, 1008, "{reason}");
        assert!(reason.contains("initialize"), "{reason}");
        assert!(ws.closed());
    }
    // The slots are free again.
    let mut ws = frame_ws::connect(&d.socket);
    ws.initialize();
}

#[test]
fn a_half_sent_frame_is_closed_after_the_frame_timeout() {
    let d = daemon_with("[server]\nframe_timeout_ms = 1500\n");
    let mut sockets = Vec::new();
    for _ in 0..8 {
        let mut ws = frame_ws::connect(&d.socket);
        ws.initialize();
        let whole = frame(
            true,
            TEXT,
            true,
            br#"{"jsonrpc":"2.0","id":1,"method":"daemon/status"}"#,
        );
        ws.send_raw(&whole[..whole.len() / 2]);
        sockets.push(ws);
    }
    // An initialized WebSocket that is merely idle is left alone.
    let mut idle = frame_ws::connect(&d.socket);
    idle.initialize();
    status_answers(&d);
    for ws in &mut sockets {
        let (code, reason) = ws.close_frame();
        assert_eq!(code, 1008, "{reason}");
        assert!(reason.contains("not finished"), "{reason}");
        assert!(ws.closed());
    }
    let status = idle.call(2, "daemon/status", json!({}));
    assert_eq!(status["result"]["pid"], d.pid(), "{status}");
}

#[test]
fn an_unfinished_request_body_or_head_is_answered_or_closed_after_the_timeout() {
    let d = daemon_with("[server]\nframe_timeout_ms = 1500\n");
    let mut body = UnixStream::connect(&d.socket).unwrap();
    body.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    body.write_all(
        b"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
          Content-Length: 100\r\n\r\n{\"jsonrpc\":",
    )
    .unwrap();
    let mut head = UnixStream::connect(&d.socket).unwrap();
    head.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    head.write_all(b"POST / HTTP/1.1\r\nHost: loc").unwrap();
    status_answers(&d);

    let mut raw = Vec::new();
    body.read_to_end(&mut raw)
        .expect("the daemon closes the connection");
    let text = String::from_utf8_lossy(&raw);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    let mut raw = Vec::new();
    head.read_to_end(&mut raw)
        .expect("the daemon closes the connection");
}

#[test]
fn request_bytes_in_flight_are_capped_with_overloaded() {
    // A's unfinished body must outlive however long a loaded machine takes to refuse B:
    // past `frame_timeout_ms` the daemon drops A (408) and B would be answered 200 for ever.
    let d = daemon_with("[server]\nmax_bytes_in_flight = 65536\nframe_timeout_ms = 600000\n");
    let request = |pad: usize| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "daemon/status",
               "params": {"padding": "x".repeat(pad)}})
        .to_string()
    };
    // A holds 48 KiB of the 64: its head is in, its body is not finished.
    let held = request(48 * 1024 - 100);
    let mut a = UnixStream::connect(&d.socket).unwrap();
    a.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let head = format!(
        "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        held.len()
    );
    a.write_all(head.as_bytes()).unwrap();
    a.write_all(&held.as_bytes()[..100]).unwrap();

    // B's 32 KiB does not fit beside it, once the daemon has read A's head (a loaded
    // machine may take a while: B is answered 200 until then).
    let b = request(32 * 1024);
    let mut refused = None;
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    while std::time::Instant::now() < deadline {
        let (status, body) = d.raw_http(&b);
        if status == 503 {
            refused = Some(body);
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    let refused: Value = serde_json::from_str(&refused.expect("B refused while A holds")).unwrap();
    assert_eq!(refused["error"]["code"], -32003, "{refused}");
    assert!(refused["id"].is_null(), "{refused}");

    // A finishes and is answered; then B fits.
    a.write_all(&held.as_bytes()[100..]).unwrap();
    let mut raw = Vec::new();
    a.read_to_end(&mut raw).unwrap();
    let (status, body) = amber_tests::unix_http::parse_response(&raw).unwrap();
    assert_eq!(status, 200, "{body}");
    let (status, body) = d.raw_http(&b);
    assert_eq!(status, 200, "{body}");
}

#[test]
fn a_websocket_that_floods_then_reads_gets_every_reply() {
    // A small cap, so the daemon stops and resumes reading this client many times.
    let d = daemon_with("[server]\nmax_unanswered_calls = 8\n");
    let mut ws = frame_ws::connect(&d.socket);
    ws.initialize();
    const CALLS: u64 = 3000;
    let mut writer = ws.stream.try_clone().unwrap();
    let flood = std::thread::spawn(move || {
        for id in 1..=CALLS {
            let request =
                json!({"jsonrpc": "2.0", "id": id, "method": "daemon/status", "params": {}});
            writer
                .write_all(&frame(true, TEXT, true, request.to_string().as_bytes()))
                .unwrap();
        }
    });
    let mut seen = std::collections::BTreeSet::new();
    while (seen.len() as u64) < CALLS {
        let reply = ws.recv_json();
        assert_eq!(reply["result"]["pid"], d.pid(), "{reply}");
        assert!(seen.insert(reply["id"].as_u64().unwrap()), "{reply}");
    }
    flood.join().unwrap();
    assert_eq!(seen.first(), Some(&1));
    assert_eq!(seen.last(), Some(&CALLS));
}

// What a greedy client costs in memory.

const MIB: u64 = 1024 * 1024;

/// A `/proc/<pid>/status` field in bytes (`VmRSS`, `VmHWM`).
fn vm(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap();
    kib * 1024
}

/// Whether `stream` becomes writable within `wait` (the daemon reads from it again).
fn writable_within(stream: &std::os::unix::net::UnixStream, wait: Duration) -> bool {
    let mut fd = libc::pollfd {
        fd: stream.as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid pollfd for a socket this test owns.
    let ready = unsafe { libc::poll(&mut fd, 1, wait.as_millis() as libc::c_int) };
    ready > 0
}

#[test]
fn a_websocket_that_never_reads_its_replies_costs_under_32_mb_and_gives_it_back() {
    let d = TestDaemon::spawn_with(amber_tests::DaemonOptions::default());
    let pid = d.pid();
    // Warm up the paths the flood takes, so the baseline holds their one-time costs.
    let mut warm = frame_ws::connect(&d.socket);
    warm.initialize();
    warm.call(1, "daemon/status", json!({}));
    drop(warm);
    let baseline = vm(pid, "VmRSS");

    let mut ws = frame_ws::connect(&d.socket);
    ws.initialize();
    ws.stream.set_nonblocking(true).unwrap();
    let request = frame(
        true,
        TEXT,
        true,
        br#"{"jsonrpc":"2.0","id":7,"method":"daemon/status","params":{}}"#,
    );
    let mut sent = 0;
    let mut offset = 0;
    let mut stopped_reading = false;
    while sent < 20_000 {
        match ws.stream.write(&request[offset..]) {
            Ok(n) => {
                offset += n;
                if offset == request.len() {
                    offset = 0;
                    sent += 1;
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if !writable_within(&ws.stream, Duration::from_secs(3)) {
                    stopped_reading = true;
                    break;
                }
            }
            Err(e) => panic!("send: {e}"),
        }
    }
    let during = vm(pid, "VmRSS");
    drop(ws);
    let mut after = vm(pid, "VmRSS");
    for _ in 0..200 {
        if after < baseline + 10 * MIB {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
        after = vm(pid, "VmRSS");
    }
    // The high-water mark once it is all over: whatever the daemon still did with the
    // requests after the last one was sent counts too.
    let peak = vm(pid, "VmHWM").saturating_sub(baseline);
    eprintln!(
        "unread replies: sent {sent} requests (daemon stopped reading: {stopped_reading}); \
         RSS baseline {:.1} MB, during {:.1} MB, peak +{:.1} MB, after close {:.1} MB",
        baseline as f64 / MIB as f64,
        during as f64 / MIB as f64,
        peak as f64 / MIB as f64,
        after as f64 / MIB as f64,
    );
    assert!(peak < 32 * MIB, "the client cost {peak} bytes at its peak");
    assert!(
        after < baseline + 10 * MIB,
        "RSS {after} after close, baseline {baseline}"
    );
    assert_eq!(d.rpc_ok("daemon/status", json!({}))["pid"], pid);
}

#[test]
fn concurrent_large_bodies_are_held_within_the_bytes_in_flight_budget() {
    let d = Arc::new(TestDaemon::spawn_with(amber_tests::DaemonOptions::default()));
    let pid = d.pid();
    let baseline = vm(pid, "VmRSS");
    let body = Arc::new(
        json!({"jsonrpc": "2.0", "id": 1, "method": "daemon/status",
               "params": {"padding": "x".repeat(15 * 1024 * 1024)}})
        .to_string(),
    );
    let threads: Vec<_> = (0..24)
        .map(|_| {
            let (d, body) = (d.clone(), body.clone());
            std::thread::spawn(move || d.raw_http(&body))
        })
        .collect();
    let answers: Vec<(u16, String)> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let peak = vm(pid, "VmHWM").saturating_sub(baseline);
    let served = answers.iter().filter(|(status, _)| *status == 200).count();
    for (status, text) in answers.iter().filter(|(status, _)| *status != 200) {
        assert_eq!(*status, 503, "{text}");
        let error: Value = serde_json::from_str(text).unwrap();
        assert_eq!(error["error"]["code"], -32003, "{error}");
    }
    eprintln!(
        "24 concurrent 15 MB bodies: {served} served, {} refused -32003; RSS baseline {:.1} MB, \
         peak +{:.1} MB",
        answers.len() - served,
        baseline as f64 / MIB as f64,
        peak as f64 / MIB as f64,
    );
    assert!(served >= 1, "none served");
    // The default budget is 64 MiB in flight; the rest is copies and allocator slack.
    assert!(peak < 192 * MIB, "peak +{peak} bytes");
}

/// The daemon's count of open connections (`daemon/status`, asked over HTTP: that one
/// connection included).
fn open_connections(d: &TestDaemon) -> u64 {
    d.rpc_ok("daemon/status", json!({}))["connections"]
        .as_u64()
        .unwrap()
}

/// Waits (generously) until the daemon counts at most `n` connections; the last count.
fn connections_fall_to(d: &TestDaemon, n: u64) -> u64 {
    let mut count = open_connections(d);
    for _ in 0..600 {
        if count <= n {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
        count = open_connections(d);
    }
    count
}

#[test]
fn websockets_that_flood_past_the_cap_and_close_give_their_slots_back() {
    let d = daemon_with("[server]\nmax_connections = 12\nmax_unanswered_calls = 64\n");
    let request = frame(
        true,
        TEXT,
        true,
        br#"{"jsonrpc":"2.0","id":7,"method":"daemon/status","params":{}}"#,
    );
    for round in 0..3 {
        let mut sockets = Vec::new();
        for _ in 0..8 {
            let mut ws = frame_ws::connect(&d.socket);
            ws.initialize();
            ws.stream.set_nonblocking(true).unwrap();
            // Far more calls than the cap, and far more replies than the socket buffers
            // hold; none of them read.
            let mut sent = 0;
            let mut offset = 0;
            while sent < 2000 {
                match ws.stream.write(&request[offset..]) {
                    Ok(n) => {
                        offset += n;
                        if offset == request.len() {
                            offset = 0;
                            sent += 1;
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        if !writable_within(&ws.stream, Duration::from_millis(250)) {
                            break;
                        }
                    }
                    Err(e) => panic!("send: {e}"),
                }
            }
            sockets.push(ws);
        }
        drop(sockets);
        let left = connections_fall_to(&d, 1);
        assert_eq!(left, 1, "round {round}: closed WebSockets still hold slots");
    }
    // Every slot is free: as many WebSockets as allowed open and answer.
    let mut all = Vec::new();
    for _ in 0..8 {
        let mut ws = frame_ws::connect(&d.socket);
        ws.initialize();
        assert_eq!(
            ws.call(1, "daemon/status", json!({}))["result"]["pid"],
            d.pid()
        );
        all.push(ws);
    }
}

#[test]
fn connect_only_sockets_give_their_slots_to_clients_that_talk() {
    let d = daemon_with("[server]\nmax_connections = 16\n");
    // More silent sockets than there are slots: none sends a byte.
    let silent: Vec<UnixStream> = (0..40)
        .map(|_| UnixStream::connect(&d.socket).unwrap())
        .collect();
    // Every kind of client still gets in at once, and an initialized WebSocket keeps its
    // slot while more silent sockets keep arriving.
    status_answers(&d);
    let mut ws = frame_ws::connect(&d.socket);
    ws.initialize();
    let more: Vec<UnixStream> = (0..40)
        .map(|_| UnixStream::connect(&d.socket).unwrap())
        .collect();
    assert_eq!(
        ws.call(2, "daemon/status", json!({}))["result"]["pid"],
        d.pid()
    );
    status_answers(&d);
    // The silent ones that gave their slots up were closed, not left hanging.
    let closed = silent
        .iter()
        .filter(|s| {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            matches!((&**s).read(&mut [0u8; 1]), Ok(0))
        })
        .count();
    assert!(
        closed >= 24,
        "only {closed} of the first 40 silent sockets were closed"
    );
    drop(more);
}
