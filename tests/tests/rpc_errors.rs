//! End-to-end: the wire's errors, through the real amberd — each gets the code PROTOCOL.md or
//! the RFCs name, and the daemon survives all of it.
//!
//! - Malformed HTTP bodies and WebSocket frames, unknown methods, bad params, unknown
//!   sessions and workspaces, the `initialize` gate.
//! - The wire's limits: the subscription cap is -32003 (overloaded, retry; never -32006,
//!   which means an MCP server error), an oversized message is jsonrpsee's -32007,
//!   subscriptions over plain HTTP are -32600 saying a WebSocket is needed,
//!   `session/unsubscribe` takes named params too, and `initialize` with a protocol version
//!   the daemon does not speak is -32602.
//! - JSON-RPC 2.0: an id that is no string, non-negative integer or null gets -32600 with
//!   `id: null` (not silence), and a valid JSON object that is no request is -32600 (not
//!   -32700), over HTTP and over WebSocket. HTTP: a bad chunk size is 400. RFC 6455: an
//!   unmasked client frame fails the connection with 1002, a text frame that is not UTF-8
//!   with 1007.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use amber_tests::{DaemonOptions, TestDaemon};
use frame_ws::{TEXT, frame};
use raw_ws::{initialize_params, raw_ws};
use serde_json::{Value, json};

use crate::support::frame_ws;
use crate::support::raw_ws;

fn daemon() -> TestDaemon {
    // No endpoint needed: nothing here reaches the model.
    TestDaemon::spawn_with(amber_tests::DaemonOptions::default())
}

/// POSTs `body`; returns the JSON-RPC error (code, message), panicking if there is none.
fn http_error(daemon: &TestDaemon, body: &str) -> (i64, String) {
    let (status, text) = daemon.raw_http(body);
    let response: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("HTTP {status}: not JSON ({e}): {text:?}"));
    assert!(response.get("result").is_none(), "{response}");
    let error = &response["error"];
    (
        error["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("no error code: {response}")),
        error["message"].as_str().unwrap().to_owned(),
    )
}

fn request(method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).to_string()
}

fn assert_alive(daemon: &TestDaemon) {
    let status = daemon.rpc_ok("daemon/status", json!({}));
    assert_eq!(status["pid"], daemon.pid());
}

#[test]
fn malformed_http_requests_get_standard_codes() {
    let d = daemon();
    assert_eq!(http_error(&d, "{this is not json").0, -32700);
    assert_eq!(http_error(&d, "").0, -32700);
    assert_eq!(http_error(&d, r#"{"jsonrpc":"2.0","id":1}"#).0, -32600);
    assert_eq!(
        http_error(&d, r#"{"jsonrpc":"2.0","id":1,"method":7}"#).0,
        -32600
    );
    let (code, _) = http_error(&d, &request("no/such/method", json!({})));
    assert_eq!(code, -32601);
    assert_alive(&d);
}

#[test]
fn bad_params_are_invalid_params_naming_the_field() {
    let d = daemon();
    let cases = [
        ("session/get", json!({"sessionId": 5}), "sessionId"),
        ("session/get", json!({}), "sessionId"),
        ("session/prompt", json!({"sessionId": "s"}), "text"),
        (
            "session/prompt",
            json!({"sessionId": "s", "text": 1}),
            "text",
        ),
        (
            "session/setMode",
            json!({"sessionId": "s", "mode": "admin"}),
            "mode",
        ),
        ("session/new", json!({"cwd": 3}), "cwd"),
        ("session/new", json!({}), "cwd"),
    ];
    for (method, params, field) in cases {
        let (code, message) = http_error(&d, &request(method, params.clone()));
        assert_eq!(code, -32602, "{method} {params}: {message}");
        assert!(
            message.contains(field),
            "{method} {params}: {message:?} names no {field}"
        );
    }
    assert_alive(&d);
}

#[test]
fn unknown_sessions_and_bad_workspaces_get_their_codes() {
    let d = daemon();
    let id = json!({"sessionId": "no-such-session"});
    for method in ["session/get", "session/cancel", "session/delete"] {
        let (code, message) = http_error(&d, &request(method, id.clone()));
        assert_eq!(code, -32001, "{method}: {message}");
        assert!(message.contains("no-such-session"), "{message}");
    }
    let prompt = json!({"sessionId": "no-such-session", "text": "hi"});
    assert_eq!(http_error(&d, &request("session/prompt", prompt)).0, -32001);
    let mode = json!({"sessionId": "no-such-session", "mode": "read"});
    assert_eq!(http_error(&d, &request("session/setMode", mode)).0, -32001);

    let file = d.workspace.join("file.txt");
    std::fs::write(&file, "x").unwrap();
    let missing = d.workspace.join("missing");
    for cwd in [
        "relative/dir".to_owned(),
        String::new(),
        missing.display().to_string(),
        file.display().to_string(),
    ] {
        let (code, message) = http_error(&d, &request("session/new", json!({"cwd": cwd})));
        assert_eq!(code, -32004, "cwd {cwd:?}: {message}");
    }
    // Nothing was created by any of it.
    let list = d.rpc_ok("session/list", json!({}));
    assert_eq!(list["sessions"], json!([]));
    assert_alive(&d);
}

#[test]
fn plain_http_needs_no_initialize() {
    let d = daemon();
    let cwd = d.workspace.display().to_string();
    let info = d.rpc_ok("session/new", json!({"cwd": cwd, "mode": "read"}));
    assert_eq!(info["mode"], "read");
    assert_eq!(info["cwd"], cwd.as_str());
    let got = d.rpc_ok("session/get", json!({"sessionId": info["sessionId"]}));
    assert_eq!(got["session"]["sessionId"], info["sessionId"]);
    assert_eq!(got["messages"][0]["role"], "system");
}

/// `curl --unix-socket $SOCK http://localhost/ -d '{...}'` (PROTOCOL.md) sends
/// `application/x-www-form-urlencoded`; it must work all the same.
#[test]
fn curl_style_post_without_a_json_content_type_works() {
    let d = daemon();
    let body = request("daemon/status", json!({}));
    let head = format!(
        "POST / HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        body.len()
    );
    let mut stream = std::os::unix::net::UnixStream::connect(&d.socket).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let (status, text) = amber_tests::unix_http::parse_response(&raw).unwrap();
    assert_eq!(status, 200, "{text}");
    let response: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("not a JSON-RPC response ({e}): {text:?}"));
    assert_eq!(response["result"]["pid"], d.pid(), "{response}");
}

#[tokio::test(flavor = "multi_thread")]
async fn websocket_requires_initialize_and_survives_garbage_frames() {
    let d = daemon();
    let mut ws = raw_ws(&d.socket).await;

    // Before initialize: every other method is gated, unknown ones included (PROTOCOL.md:
    // "every other method before `initialize` gets error -32002").
    for (id, method) in [
        (1, "daemon/status"),
        (2, "session/list"),
        (3, "no/such/method"),
    ] {
        let response = ws.call(id, method, json!({})).await;
        assert_eq!(response["error"]["code"], -32002, "{response}");
        let message = response["error"]["message"].as_str().unwrap();
        assert!(message.contains("initialize"), "{message}");
    }

    // A garbage frame gets a parse error and the connection stays up.
    ws.send("{definitely not json").await;
    let parse = ws.recv().await;
    assert_eq!(parse["error"]["code"], -32700, "{parse}");
    assert!(parse["id"].is_null());

    let init = ws.call(4, "initialize", initialize_params()).await;
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    assert_eq!(init["result"]["serverInfo"]["name"], "amberd");
    let status = ws.call(5, "daemon/status", json!({})).await;
    assert_eq!(status["result"]["pid"], d.pid(), "{status}");
    assert!(
        status["result"]["connections"].as_u64().unwrap() >= 1,
        "{status}"
    );

    // After initialize the same errors as over HTTP, and still alive after garbage.
    ws.send("[1, 2").await;
    assert_eq!(ws.recv().await["error"]["code"], -32700);
    let bad = ws.call(6, "session/get", json!({"sessionId": 5})).await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap()
            .contains("sessionId")
    );
    let unknown = ws.call(11, "no/such/method", json!({})).await;
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    let missing = ws
        .call(7, "session/get", json!({"sessionId": "nope"}))
        .await;
    assert_eq!(missing["error"]["code"], -32001, "{missing}");
    ws.send(r#"{"jsonrpc":"2.0","id":8}"#).await;
    assert_eq!(ws.recv().await["error"]["code"], -32600);
    let sub = json!({"sessionId": "s", "afterSeq": "x"});
    let bad_sub = ws.call(10, "session/subscribe", sub).await;
    assert_eq!(bad_sub["error"]["code"], -32602, "{bad_sub}");
    assert!(
        bad_sub["error"]["message"]
            .as_str()
            .unwrap()
            .contains("afterSeq")
    );
    let cwd = d.workspace.display().to_string();
    let created = ws.call(9, "session/new", json!({"cwd": cwd})).await;
    assert!(created["result"]["sessionId"].is_string(), "{created}");

    // A second connection is gated on its own.
    let mut other = raw_ws(&d.socket).await;
    let gated = other.call(1, "session/list", json!({})).await;
    assert_eq!(gated["error"]["code"], -32002, "{gated}");
    // Both WebSockets count as connections (plus the HTTP POST asking), until they close.
    let status = d.rpc_ok("daemon/status", json!({}));
    assert_eq!(status["connections"], 3, "{status}");
    drop((ws, other));
    amber_tests::steps::eventually(
        "closed websockets to be released",
        Duration::from_secs(10),
        || d.rpc_ok("daemon/status", json!({}))["connections"] == 1,
    )
    .await;
    assert_alive(&d);
}

#[tokio::test(flavor = "multi_thread")]
async fn open_websockets_count_against_max_connections() {
    let d = TestDaemon::spawn_with(amber_tests::DaemonOptions {
        // No slots reserved for plain HTTP: both may be WebSockets.
        config_toml: "[server]\nmax_connections = 2\nreserved_http_connections = 0\n".into(),
        ..amber_tests::DaemonOptions::default()
    });
    // The harness's readiness probe may still hold its slot for a moment: wait until the
    // only connection is the one asking.
    amber_tests::steps::eventually(
        "the readiness probe to close",
        Duration::from_secs(10),
        || {
            let (_, body) = d.raw_http(&request("daemon/status", json!({})));
            serde_json::from_str::<Value>(&body).is_ok_and(|v| v["result"]["connections"] == 1)
        },
    )
    .await;
    // Each initialized before the next opens: a newcomer may take the slot of a connection
    // that has not initialized (or of the probe, idle until the daemon sees it close), never
    // that of one that has.
    let mut first = raw_ws(&d.socket).await;
    let init = first.call(1, "initialize", initialize_params()).await;
    assert!(init["result"].is_object(), "{init}");
    let mut second = raw_ws(&d.socket).await;
    let init = second.call(1, "initialize", initialize_params()).await;
    assert!(init["result"].is_object(), "{init}");
    let (status, body) = d.raw_http(&request("daemon/status", json!({})));
    assert_eq!(status, 503, "a third connection is over the limit: {body}");
    let refused: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(refused["error"]["code"], -32003, "{refused}");
    // Closing one frees its slot.
    drop(second);
    amber_tests::steps::eventually("a freed slot", Duration::from_secs(10), || {
        d.raw_http(&request("daemon/status", json!({}))).0 == 200
    })
    .await;
    let still = first.call(2, "daemon/status", json!({})).await;
    assert_eq!(still["result"]["pid"], d.pid());
}

// The wire's limits as PROTOCOL.md names them.

fn daemon_with(config_toml: &str) -> TestDaemon {
    TestDaemon::spawn_with(DaemonOptions {
        config_toml: config_toml.into(),
        ..DaemonOptions::default()
    })
}

fn new_session(d: &TestDaemon) -> String {
    let cwd = d.workspace.display().to_string();
    let info = d.rpc_ok("session/new", json!({"cwd": cwd}));
    info["sessionId"].as_str().unwrap().to_owned()
}

fn message(response: &Value) -> &str {
    response["error"]["message"].as_str().unwrap_or("")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_subscription_cap_is_overloaded_not_an_mcp_error() {
    let d = daemon_with("[server]\nmax_subscriptions_per_connection = 1\n");
    let sid = new_session(&d);
    let mut ws = raw_ws(&d.socket).await;
    let init = ws.call(1, "initialize", initialize_params()).await;
    assert!(init["result"].is_object(), "{init}");

    let first = call(&mut ws, 2, "session/subscribe", json!({"sessionId": sid})).await;
    assert!(first["error"].is_null(), "{first}");
    let second = call(&mut ws, 3, "session/subscribe", json!({"sessionId": sid})).await;
    assert_eq!(second["error"]["code"], -32003, "{second}");
    assert!(
        message(&second).contains("too many subscriptions"),
        "{second}"
    );
    assert!(d.rpc_ok("daemon/status", json!({}))["pid"] == d.pid());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_oversized_message_is_request_too_big_and_the_connection_lives() {
    let d = daemon_with("[server]\nmax_message_bytes = 4096\n");
    let mut ws = raw_ws(&d.socket).await;
    ws.call(1, "initialize", initialize_params()).await;
    let big = json!({"jsonrpc": "2.0", "id": 2, "method": "daemon/status",
                     "params": {"padding": "x".repeat(8192)}});
    ws.send(&big.to_string()).await;
    let refused = ws.recv().await;
    assert_eq!(refused["error"]["code"], -32007, "{refused}");
    let status = ws.call(3, "daemon/status", json!({})).await;
    assert_eq!(status["result"]["pid"], d.pid(), "{status}");
}

#[test]
fn subscriptions_over_plain_http_say_a_websocket_is_needed() {
    let d = daemon_with("");
    let sid = new_session(&d);
    for (method, params) in [
        ("session/subscribe", json!({"sessionId": sid})),
        ("session/unsubscribe", json!(["sub_1"])),
    ] {
        let response = d.rpc(method, params);
        assert_eq!(response["error"]["code"], -32600, "{method}: {response}");
        assert!(message(&response).contains("WebSocket"), "{response}");
        assert!(message(&response).contains(method), "{response}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn unsubscribe_accepts_named_and_positional_params() {
    let d = daemon_with("");
    let sid = new_session(&d);
    let mut ws = raw_ws(&d.socket).await;
    ws.call(1, "initialize", initialize_params()).await;

    let mut next_id = 2;
    for named in [true, false] {
        let sub = call(
            &mut ws,
            next_id,
            "session/subscribe",
            json!({"sessionId": sid}),
        )
        .await;
        let subscription = sub["result"].clone();
        assert!(!subscription.is_null(), "{sub}");
        // jsonrpsee sends the subscribe response a moment before it registers the
        // subscription (an unsubscribe racing it finds nothing); `synced` comes after.
        loop {
            let frame = ws.recv().await;
            if frame["params"]["result"]["type"] == "synced" {
                break;
            }
        }
        let params = if named {
            json!({"subscription": subscription})
        } else {
            json!([subscription])
        };
        let done = call(&mut ws, next_id + 1, "session/unsubscribe", params).await;
        assert_eq!(done["result"], true, "named={named}: {done}");
        // It is gone: unsubscribing again finds nothing.
        let again = call(
            &mut ws,
            next_id + 2,
            "session/unsubscribe",
            json!([subscription]),
        )
        .await;
        assert_eq!(again["result"], false, "named={named}: {again}");
        next_id += 3;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unsubscribe_sent_the_moment_the_subscription_exists_removes_it() {
    let d = daemon_with("");
    let sid = new_session(&d);
    let mut ws = raw_ws(&d.socket).await;
    ws.call(1, "initialize", initialize_params()).await;
    for round in 0..10u64 {
        let id = 10 + round * 2;
        let sub = call(&mut ws, id, "session/subscribe", json!({"sessionId": sid})).await;
        let subscription = sub["result"].clone();
        assert!(!subscription.is_null(), "{sub}");
        // No wait for `synced`: straight back, racing jsonrpsee's registration.
        let done = call(
            &mut ws,
            id + 1,
            "session/unsubscribe",
            json!([subscription]),
        )
        .await;
        assert_eq!(done["result"], true, "round {round}: {done}");
    }
}

/// One call on `ws`; `session/event` notifications (`synced`) arriving before the response
/// are skipped.
async fn call<S, R>(ws: &mut raw_ws::RawWs<S, R>, id: u64, method: &str, params: Value) -> Value
where
    S: jsonrpsee::core::client::TransportSenderT<Error: std::fmt::Debug>,
    R: jsonrpsee::core::client::TransportReceiverT<Error: std::fmt::Debug>,
{
    let frame = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    ws.send(&frame.to_string()).await;
    loop {
        let frame = ws.recv().await;
        if frame["id"] == id {
            return frame;
        }
        assert!(
            frame["method"] == "session/event",
            "unexpected frame {frame}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn initialize_with_an_unsupported_protocol_version_is_invalid_params() {
    let d = daemon_with("");
    let mut ws = raw_ws(&d.socket).await;
    let mut params = initialize_params();
    params["protocolVersion"] = json!(2);
    let refused = ws.call(1, "initialize", params).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let text = message(&refused);
    assert!(
        text.contains("protocolVersion") && text.contains('1'),
        "{text}"
    );
    // The connection is still uninitialized, and a supported version then works.
    let gated = ws.call(2, "daemon/status", json!({})).await;
    assert_eq!(gated["error"]["code"], -32002, "{gated}");
    let init = ws.call(3, "initialize", initialize_params()).await;
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
}

// Edge cases answered as the RFCs say.

/// The ids JSON-RPC allows but jsonrpsee cannot hold, or JSON-RPC does not allow.
const BAD_IDS: [&str; 7] = [
    "1.5",
    "true",
    "[1]",
    "18446744073709551616",
    "-0",
    // Strings that do not decode to text: lone surrogates.
    r#""\ud800""#,
    r#""a\udc00""#,
];

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

/// A raw HTTP POST of `body` bytes; the response's status and body.
fn post_bytes(d: &TestDaemon, body: &[u8]) -> (u16, String) {
    let mut stream = UnixStream::connect(&d.socket).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let head = format!(
        "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    (status, body)
}

#[test]
fn a_body_that_is_not_utf8_is_a_parse_error_with_a_null_id() {
    let d = daemon();
    let mut body = br#"{"jsonrpc":"2.0","id":"a"#.to_vec();
    body.extend_from_slice(&[0xff, 0xc0, 0x80]);
    body.extend_from_slice(br#"","method":"daemon/status","params":{}}"#);
    let (status, text) = post_bytes(&d, &body);
    assert_eq!(status, 200, "{text}");
    let response: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(response["error"]["code"], -32700, "{response}");
    assert!(response["id"].is_null(), "{response}");
    // Over a WebSocket the same bytes in a binary frame get the same answer.
    let mut ws = frame_ws::connect(&d.socket);
    ws.initialize();
    ws.send_raw(&frame(true, 0x2, true, &body));
    let response = ws.recv_json();
    assert_eq!(response["error"]["code"], -32700, "{response}");
    assert_eq!(
        ws.call(3, "daemon/status", json!({}))["result"]["pid"],
        d.pid()
    );
}

#[test]
fn close_frames_are_checked_as_rfc_6455_says() {
    let d = daemon();
    let mut not_utf8 = 1000u16.to_be_bytes().to_vec();
    not_utf8.extend_from_slice(&[0xce, 0xba, 0xff]);
    for (name, payload, code) in [
        ("one-byte body", vec![0x03], 1002),
        ("reserved code 1005", 1005u16.to_be_bytes().to_vec(), 1002),
        ("code 999", 999u16.to_be_bytes().to_vec(), 1002),
        ("reason not UTF-8", not_utf8, 1007),
        ("a normal close", 1000u16.to_be_bytes().to_vec(), 1000),
    ] {
        let mut ws = frame_ws::connect(&d.socket);
        ws.initialize();
        ws.send_raw(&frame(true, frame_ws::CLOSE, true, &payload));
        let (got, reason) = ws.close_frame();
        assert_eq!(got, code, "{name}: {reason}");
        assert!(ws.closed(), "{name}");
    }
    assert_eq!(d.rpc_ok("daemon/status", json!({}))["pid"], d.pid());
}
