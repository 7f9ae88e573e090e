//! amber-client against a fake daemon: handshake, typed calls, errors, event streams.

use amber_client::{Client, ClientError, ConnectOptions};
use amber_proto::{Empty, EventKind, SessionGetParams, methods};
use futures::StreamExt;

fn opts(socket: &std::path::Path) -> ConnectOptions {
    ConnectOptions {
        socket: Some(socket.to_owned()),
        autostart: false,
        ..ConnectOptions::new("test", "0")
    }
}

#[tokio::test]
async fn connect_initializes_and_calls() {
    let dir = crate::common::private_dir();
    let socket = dir.path().join("amberd.sock");
    let _server = crate::common::serve(&socket, 1);

    let client = Client::connect(opts(&socket)).await.unwrap();
    assert_eq!(client.server_info().server_info.name, "fake-amberd");
    assert_eq!(client.socket(), socket);
    let status = client.daemon_status().await.unwrap();
    assert_eq!(status.pid, std::process::id());

    let err = client.session_get("nope").await.unwrap_err();
    assert_eq!(err.code(), Some(-32001));
    assert_eq!(
        err.to_string(),
        "session not found: nope (`amber-cli sessions` lists the sessions there are)"
    );

    let err = client
        .call::<_, serde_json::Value>("no/such", serde_json::json!({}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(-32601));
}

#[tokio::test]
async fn typed_requests_send_their_methods_params_and_decode_its_result() {
    let dir = crate::common::private_dir();
    let socket = dir.path().join("amberd.sock");
    let _server = crate::common::serve(&socket, 1);
    let client = Client::connect(opts(&socket)).await.unwrap();

    let status = client
        .request::<methods::DaemonStatus>(&Empty {})
        .await
        .unwrap();
    assert_eq!((status.pid, status.uptime_ms), (std::process::id(), 1));
    let raw = client
        .request_json::<methods::DaemonStatus>(&Empty {})
        .await
        .unwrap();
    assert_eq!(raw["uptimeMs"], 1);
    assert_eq!(raw.get("sessionsLoaded"), None, "the result as sent: {raw}");

    // The fake names the session of the params it got.
    let params = SessionGetParams {
        session_id: "s9".into(),
        messages_limit: Some(3),
        before_index: None,
    };
    let err = client
        .request::<methods::SessionGet>(&params)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "session not found: s9 (`amber-cli sessions` lists the sessions there are)"
    );
}

#[tokio::test]
async fn version_mismatch_fails_clearly() {
    let dir = crate::common::private_dir();
    let socket = dir.path().join("amberd.sock");
    let _server = crate::common::serve(&socket, 2);
    let err = Client::connect(opts(&socket)).await.unwrap_err();
    assert!(
        matches!(
            err,
            ClientError::VersionMismatch {
                server: 2,
                client: 1
            }
        ),
        "{err}"
    );
}

#[tokio::test]
async fn nothing_listening_without_autostart() {
    let dir = crate::common::private_dir();
    let socket = dir.path().join("amberd.sock");
    let err = Client::connect(opts(&socket)).await.unwrap_err();
    assert!(matches!(err, ClientError::DaemonNotRunning { .. }), "{err}");
    // A stale socket file counts as "not running" too.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    let err = Client::connect(opts(&socket)).await.unwrap_err();
    assert!(matches!(err, ClientError::DaemonNotRunning { .. }), "{err}");
}

#[tokio::test]
async fn typed_stream_skips_unknown_types_and_reports_the_close_reason() {
    let dir = crate::common::private_dir();
    let socket = dir.path().join("amberd.sock");
    let _server = crate::common::serve(&socket, 1);
    let client = Client::connect(opts(&socket)).await.unwrap();

    let mut events = client.subscribe("s1", Some(0)).await.unwrap();
    let first = events.next().await.unwrap().unwrap();
    assert_eq!(first.seq, Some(1));
    assert!(matches!(first.kind, EventKind::TurnStarted { .. }));
    let second = events.next().await.unwrap().unwrap();
    assert!(matches!(second.kind, EventKind::MessageDelta { .. }));
    match events.next().await.unwrap() {
        Err(ClientError::SubscriptionClosed { reason }) => {
            assert_eq!(reason, crate::common::CLOSE_REASON)
        }
        other => panic!("expected the close reason, got {other:?}"),
    }
    assert!(events.next().await.is_none());
    // The connection is still usable.
    client.daemon_status().await.unwrap();
}

#[tokio::test]
async fn raw_stream_keeps_json_as_received() {
    let dir = crate::common::private_dir();
    let socket = dir.path().join("amberd.sock");
    let _server = crate::common::serve(&socket, 1);
    let client = Client::connect(opts(&socket)).await.unwrap();

    let mut events = client.subscribe_raw("s2", None).await.unwrap();
    let expected = crate::common::events("s2");
    for want in &expected {
        let got = events.next().await.unwrap().unwrap();
        assert_eq!(got.json(), serde_json::to_string(want).unwrap());
        let known = want["type"] != "from_the_future";
        assert_eq!(got.event.is_some(), known);
    }
    assert!(matches!(
        events.next().await.unwrap(),
        Err(ClientError::SubscriptionClosed { .. })
    ));
}
