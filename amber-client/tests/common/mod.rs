//! A fake daemon for amber-client's tests: a jsonrpsee server on a Unix socket serving a
//! handful of methods and a `session/subscribe` that sends a few events and then closes
//! the subscription with an error, as a lagging subscriber would see it.

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::path::Path;

use jsonrpsee::server::{
    RpcModule, Server, SubscriptionCloseResponse, SubscriptionMessage,
    serve_with_graceful_shutdown, stop_channel,
};
use jsonrpsee::types::ErrorObjectOwned;
use serde_json::{Value, json};
use tokio::net::UnixListener;

/// A temp dir fit to hold a socket: clients trust only a private (0700) socket directory,
/// and tempfile leaves the umask's 0755.
pub(crate) fn private_dir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

pub(crate) const CLOSE_REASON: &str = "subscriber lagged: resubscribe with afterSeq";

pub(crate) fn events(session: &str) -> Vec<Value> {
    vec![
        json!({"seq": 1, "sessionId": session, "turnId": "t1", "time": "2026-01-01T00:00:00Z", "type": "turn_started", "prompt": "hi"}),
        json!({"sessionId": session, "turnId": "t1", "time": "2026-01-01T00:00:00Z", "type": "from_the_future", "x": 1}),
        json!({"sessionId": session, "turnId": "t1", "time": "2026-01-01T00:00:00Z", "type": "message_delta", "itemId": "i1", "delta": "Hel"}),
    ]
}

fn module(protocol_version: u32) -> RpcModule<()> {
    let mut module = RpcModule::new(());
    module
        .register_method("initialize", move |params, _, _| {
            let p: Value = params.parse().unwrap_or(Value::Null);
            json!({
                "protocolVersion": protocol_version,
                "serverInfo": {"name": "fake-amberd", "version": "0"},
                "capabilities": {"methods": []},
                "echo": p,
            })
        })
        .unwrap();
    module
        .register_method("daemon/status", |_, _, _| {
            json!({"version": "0", "pid": std::process::id(), "uptimeMs": 1, "sessions": 0, "connections": 1})
        })
        .unwrap();
    module
        .register_method("session/get", |params, _, _| {
            let p: Value = params.parse().unwrap_or(Value::Null);
            let id = p["sessionId"].as_str().unwrap_or_default().to_owned();
            Err::<Value, _>(ErrorObjectOwned::owned(
                -32001,
                format!("session not found: {id}"),
                None::<()>,
            ))
        })
        .unwrap();
    module
        .register_subscription(
            "session/subscribe",
            "session/event",
            "session/unsubscribe",
            |params, pending, _, _| async move {
                let p: Value = params.parse().unwrap_or(Value::Null);
                let session = p["sessionId"].as_str().unwrap_or_default().to_owned();
                let Ok(sink) = pending.accept().await else {
                    return SubscriptionCloseResponse::None;
                };
                for event in events(&session) {
                    let raw = serde_json::value::to_raw_value(&event).unwrap();
                    if sink.send(SubscriptionMessage::from(raw)).await.is_err() {
                        return SubscriptionCloseResponse::None;
                    }
                }
                SubscriptionCloseResponse::NotifErr(CLOSE_REASON.into())
            },
        )
        .unwrap();
    module
}

/// Serves the fake daemon on `socket` until the returned handle is dropped.
pub(crate) fn serve(socket: &Path, protocol_version: u32) -> jsonrpsee::server::ServerHandle {
    let listener = UnixListener::bind(socket).unwrap();
    let methods = module(protocol_version);
    let (stop, handle) = stop_channel();
    tokio::spawn(async move {
        let builder = Server::builder().to_service_builder();
        loop {
            let stream = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(_) => return,
                },
                _ = stop.clone().shutdown() => return,
            };
            let svc = builder.clone().build(methods.clone(), stop.clone());
            tokio::spawn(serve_with_graceful_shutdown(
                stream,
                svc,
                stop.clone().shutdown(),
            ));
        }
    });
    handle
}
