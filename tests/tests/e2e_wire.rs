//! End-to-end: the wire itself — malformed HTTP bodies and WebSocket frames, unknown methods,
//! bad params, unknown sessions and workspaces, the `initialize` gate — get the protocol's
//! error codes, and the daemon survives all of it.

// Test code: a panic with a clear message is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::time::Duration;

use amber_tests::TestDaemon;
use jsonrpsee::core::client::TransportSenderT;
use serde_json::{Value, json};

#[path = "support/raw_ws.rs"]
mod raw_ws;
use raw_ws::{initialize_params, raw_ws};

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
    let mut first = raw_ws(&d.socket).await;
    let mut second = raw_ws(&d.socket).await;
    for ws in [&mut first.tx, &mut second.tx] {
        ws.send_ping().await.unwrap();
    }
    let init = first.call(1, "initialize", initialize_params()).await;
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
