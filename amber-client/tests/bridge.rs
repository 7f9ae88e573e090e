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
