//! The NDJSON bridge against the fake daemon: lines in, frames out, drains before exit.

use amber_client::bridge::{RawConnection, run_bridge};
use serde_json::Value;

#[tokio::test]
async fn bridge_forwards_lines_and_waits_for_answers() {
    let dir = crate::common::private_dir();
    let socket = dir.path().join("amberd.sock");
    let _server = crate::common::serve(&socket, 1);

    let input = concat!(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientInfo":{"name":"sh","version":"0"},"capabilities":{"approvals":false}}}"#,
        "\n\n",
        r#"{"jsonrpc":"2.0","id":2,"method":"session/subscribe","params":{"sessionId":"s9"}}"#,
        "\n",
        "this is not json\n",
        r#"{"jsonrpc":"2.0","id":3,"method":"daemon/status","params":{}}"#,
        "\n",
    );
    let conn = RawConnection::connect(Some(socket.clone()), false)
        .await
        .unwrap();
    let mut out = Vec::new();
    run_bridge(conn, input.as_bytes(), &mut out).await.unwrap();

    let lines: Vec<Value> = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ids: Vec<&Value> = lines.iter().filter_map(|l| l.get("id")).collect();
    for want in [Value::from(1), Value::from(2), Value::from(3), Value::Null] {
        assert!(ids.contains(&&want), "no answer with id {want}: {lines:?}");
    }
    let parse_error = lines.iter().find(|l| l["id"].is_null()).unwrap();
    assert_eq!(parse_error["error"]["code"], -32700);
}

/// The daemon pushing more than the bridge buffers while the script floods requests: the
/// daemon stops reading until its notifications are read, so a bridge that waited on a send
/// before reading frames again would wait forever.
#[tokio::test(flavor = "multi_thread")]
async fn a_flood_both_ways_does_not_deadlock() {
    const REQUESTS: usize = 200;
    let dir = crate::common::private_dir();
    let socket = dir.path().join("amberd.sock");
    let _server = crate::common::serve(&socket, 1);

    let mut input = String::new();
    input.push_str(r#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":1,"clientInfo":{"name":"sh","version":"0"}}}"#);
    input.push('\n');
    input.push_str(r#"{"jsonrpc":"2.0","id":"flood","method":"test/flood","params":{"count":3000,"bytes":4096}}"#);
    input.push('\n');
    let padding = "y".repeat(16 * 1024);
    for n in 0..REQUESTS {
        input.push_str(
            &serde_json::json!({"jsonrpc": "2.0", "id": n, "method": "daemon/status", "params": {"padding": padding}})
                .to_string(),
        );
        input.push('\n');
    }
    let conn = RawConnection::connect(Some(socket.clone()), false)
        .await
        .unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(60),
        run_bridge(conn, input.as_bytes(), &mut out),
    )
    .await
    .expect("the bridge deadlocked")
    .unwrap();

    let lines: Vec<Value> = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let answered = lines
        .iter()
        .filter(|l| l["id"].is_u64() && l.get("result").is_some())
        .count();
    assert_eq!(answered, REQUESTS);
    let pushed = lines
        .iter()
        .filter(|l| l["method"] == "test/floodItem")
        .count();
    // The bridge ends once every request has its answer; the flood may go on past that.
    assert!(pushed > 0, "no notification came through");
}
