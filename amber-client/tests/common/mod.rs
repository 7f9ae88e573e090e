//! A fake daemon for amber-client's tests: a jsonrpsee server on a Unix socket serving a
//! handful of methods and a `session/subscribe` that sends a few events and then closes
//! the subscription with an error, as a lagging subscriber would see it, and a `test/flood`
//! subscription that pushes as many large notifications as asked and reads nothing while it
//! does (as amberd stops reading while too many of a connection's replies are unread).

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::UnixStream;

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

fn module(protocol_version: u32, pause: Arc<ReadPause>) -> RpcModule<Arc<ReadPause>> {
    let mut module = RpcModule::new(pause);
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
        .register_subscription(
            "test/flood",
            "test/floodItem",
            "test/unflood",
            |params, pending, pause, _| async move {
                let p: Value = params.parse().unwrap_or(Value::Null);
                let count = p["count"].as_u64().unwrap_or(0);
                let padding = "x".repeat(p["bytes"].as_u64().unwrap_or(0) as usize);
                let Ok(sink) = pending.accept().await else {
                    return SubscriptionCloseResponse::None;
                };
                pause.set(true);
                let _resume = Resume(&pause);
                for n in 0..count {
                    let item = json!({"n": n, "padding": padding});
                    let raw = serde_json::value::to_raw_value(&item).unwrap();
                    if sink.send(SubscriptionMessage::from(raw)).await.is_err() {
                        return SubscriptionCloseResponse::None;
                    }
                }
                SubscriptionCloseResponse::None
            },
        )
        .unwrap();
    module
}

/// Serves the fake daemon on `socket` until the returned handle is dropped.
pub(crate) fn serve(socket: &Path, protocol_version: u32) -> jsonrpsee::server::ServerHandle {
    let listener = UnixListener::bind(socket).unwrap();
    let pause = Arc::new(ReadPause::default());
    let methods = module(protocol_version, pause.clone());
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
                Pausable {
                    inner: stream,
                    pause: pause.clone(),
                },
                svc,
                stop.clone().shutdown(),
            ));
        }
    });
    handle
}

/// Whether the server reads its connections now, and who waits for it to read again.
#[derive(Default)]
pub(crate) struct ReadPause(Mutex<(bool, Option<Waker>)>);

impl ReadPause {
    fn set(&self, paused: bool) {
        let mut state = self.0.lock().unwrap();
        state.0 = paused;
        if !paused && let Some(waker) = state.1.take() {
            waker.wake();
        }
    }
}

/// Ends a pause when the flood ends, however it ends.
struct Resume<'a>(&'a ReadPause);

impl Drop for Resume<'_> {
    fn drop(&mut self) {
        self.0.set(false);
    }
}

/// A connection whose reads wait while the [`ReadPause`] is on; writes go through.
struct Pausable {
    inner: UnixStream,
    pause: Arc<ReadPause>,
}

impl AsyncRead for Pausable {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        {
            let mut state = self.pause.0.lock().unwrap();
            if state.0 {
                state.1 = Some(cx.waker().clone());
                return Poll::Pending;
            }
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Pausable {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
