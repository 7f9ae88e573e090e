//! End-to-end: the wire's edge cases answered as the RFCs say, through the real amberd.
//! JSON-RPC 2.0: an id that is no string, non-negative integer or null gets -32600 with
//! `id: null` (not silence), and a valid JSON object that is no request is -32600 (not
//! -32700), over HTTP and over WebSocket. HTTP: a bad chunk size is 400. RFC 6455: an
//! unmasked client frame fails the connection with 1002, a text frame that is not UTF-8
//! with 1007.

// Test code: a panic with a clear message is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use amber_tests::TestDaemon;
use serde_json::{Value, json};

#[path = "support/frame_ws.rs"]
mod frame_ws;
use frame_ws::{TEXT, frame};

/// The ids JSON-RPC allows but jsonrpsee cannot hold, or JSON-RPC does not allow.
const BAD_IDS: [&str; 5] = ["1.5", "true", "[1]", "18446744073709551616", "-0"];

fn daemon() -> TestDaemon {
    TestDaemon::spawn_with(amber_tests::DaemonOptions::default())
}

fn assert_invalid_request_with_null_id(response: &Value, what: &str) {
    assert_eq!(response["jsonrpc"], "2.0", "{what}: {response}");
    assert_eq!(response["error"]["code"], -32600, "{what}: {response}");
    assert!(response["id"].is_null(), "{what}: {response}");
    assert!(response.get("result").is_none(), "{what}: {response}");
}

fn with_id(id: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"daemon/status","params":{{}}}}"#)
}

#[test]
fn invalid_ids_and_non_requests_are_invalid_requests_with_a_null_id_over_http() {
    let d = daemon();
    for id in BAD_IDS {
        let (status, body) = d.raw_http(&with_id(id));
        assert_eq!(status, 200, "id {id}: {body}");
        let response: Value = serde_json::from_str(&body).unwrap();
        assert_invalid_request_with_null_id(&response, &format!("id {id}"));
    }
    let (_, body) = d.raw_http("{}");
    assert_invalid_request_with_null_id(&serde_json::from_str(&body).unwrap(), "{}");
    // In a batch, the entry with the bad id is answered in its place; the others run.
    let batch = format!("[{},{}]", with_id("1.5"), with_id("7"));
    let (_, body) = d.raw_http(&batch);
    let answers: Vec<Value> = serde_json::from_str(&body).unwrap();
    assert_eq!(answers.len(), 2, "{body}");
    assert!(
        answers
            .iter()
            .any(|a| a["id"] == 7 && a["result"]["pid"] == d.pid())
    );
    let bad = answers.iter().find(|a| a["id"].is_null()).expect("{body}");
    assert_invalid_request_with_null_id(bad, "batch entry");
}

#[test]
fn invalid_ids_and_non_requests_are_invalid_requests_with_a_null_id_over_websocket() {
    let d = daemon();
    let mut ws = frame_ws::connect(&d.socket);
    ws.initialize();
    for id in BAD_IDS {
        ws.send_text(&with_id(id));
        assert_invalid_request_with_null_id(&ws.recv_json(), &format!("id {id}"));
    }
    ws.send_text("{}");
    assert_invalid_request_with_null_id(&ws.recv_json(), "{}");
    // The connection is as good as before.
    let status = ws.call(9, "daemon/status", json!({}));
    assert_eq!(status["result"]["pid"], d.pid(), "{status}");
}

#[test]
fn a_bad_chunk_size_is_bad_request() {
    let d = daemon();
    let mut stream = UnixStream::connect(&d.socket).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream
        .write_all(
            b"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
              Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
        )
        .unwrap();
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw);
    assert!(text.starts_with("HTTP/1.1 400"), "{text}");
    // The daemon is fine.
    assert_eq!(d.rpc_ok("daemon/status", json!({}))["pid"], d.pid());
}

#[test]
fn an_unmasked_client_frame_fails_the_connection_with_1002() {
    let d = daemon();
    let mut ws = frame_ws::connect(&d.socket);
    ws.initialize();
    ws.send_raw(&frame(true, TEXT, false, with_id("1").as_bytes()));
    let (code, reason) = ws.close_frame();
    assert_eq!(code, 1002, "{reason}");
    assert!(reason.contains("masked"), "{reason}");
    assert!(ws.closed());
    assert_eq!(d.rpc_ok("daemon/status", json!({}))["pid"], d.pid());
}

#[test]
fn a_text_frame_that_is_not_utf8_closes_with_1007() {
    let d = daemon();
    let mut ws = frame_ws::connect(&d.socket);
    ws.initialize();
    let mut payload =
        br#"{"jsonrpc":"2.0","id":1,"method":"daemon/status","params":{"x":""#.to_vec();
    payload.extend_from_slice(&[0xff, 0xfe]);
    payload.extend_from_slice(br#""}}"#);
    ws.send_raw(&frame(true, TEXT, true, &payload));
    let (code, reason) = ws.close_frame();
    assert_eq!(code, 1007, "{reason}");
    assert!(ws.closed());
    assert_eq!(d.rpc_ok("daemon/status", json!({}))["pid"], d.pid());
}
