//! End-to-end: the wire's edges as PROTOCOL.md names them — the subscription cap is
//! -32003 (overloaded, retry; never -32006, which means an MCP server error), an oversized
//! message is jsonrpsee's -32007, subscriptions over plain HTTP are -32600 saying a
//! WebSocket is needed, `session/unsubscribe` takes named params too, and `initialize`
//! with a protocol version the daemon does not speak is -32602.

// Test code: a panic with a clear message is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use amber_tests::{DaemonOptions, TestDaemon};
use serde_json::{Value, json};

#[path = "support/raw_ws.rs"]
mod raw_ws;
use raw_ws::{initialize_params, raw_ws};

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
