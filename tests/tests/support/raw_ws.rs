//! A raw WebSocket client on the daemon's socket for the wire suites: text frames in and
//! out, no client library in between, so exact error codes and ids are visible.

use std::path::Path;

use amber_tests::steps::within;
use jsonrpsee::client_transport::ws::{Url, WsTransportClientBuilder};
use jsonrpsee::core::client::{ReceivedMessage, TransportReceiverT, TransportSenderT};
use serde_json::{Value, json};

/// A WebSocket connection on the socket, speaking raw text frames.
pub(crate) struct RawWs<S, R> {
    pub tx: S,
    pub rx: R,
}

pub(crate) async fn raw_ws(
    socket: &Path,
) -> RawWs<
    impl TransportSenderT<Error: std::fmt::Debug>,
    impl TransportReceiverT<Error: std::fmt::Debug>,
> {
    let stream = tokio::net::UnixStream::connect(socket).await.unwrap();
    let url = Url::parse("ws://localhost/").unwrap();
    let (tx, rx) = WsTransportClientBuilder::default()
        .build_with_stream(url, stream)
        .await
        .expect("websocket handshake");
    RawWs { tx, rx }
}

impl<S, R> RawWs<S, R>
where
    S: TransportSenderT<Error: std::fmt::Debug>,
    R: TransportReceiverT<Error: std::fmt::Debug>,
{
    pub(crate) async fn send(&mut self, frame: &str) {
        self.tx.send(frame.to_owned()).await.expect("send frame");
    }

    pub(crate) async fn recv(&mut self) -> Value {
        loop {
            let msg = within("a websocket frame", self.rx.receive())
                .await
                .expect("receive frame");
            match msg {
                ReceivedMessage::Text(text) => return serde_json::from_str(&text).unwrap(),
                ReceivedMessage::Bytes(bytes) => return serde_json::from_slice(&bytes).unwrap(),
                ReceivedMessage::Pong => continue,
            }
        }
    }

    pub(crate) async fn call(&mut self, id: u64, method: &str, params: Value) -> Value {
        let frame = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send(&frame.to_string()).await;
        let response = self.recv().await;
        assert_eq!(response["id"], id, "{response}");
        response
    }
}

pub(crate) fn initialize_params() -> Value {
    json!({
        "protocolVersion": 1,
        "clientInfo": {"name": "raw-ws", "version": "0"},
        "capabilities": {"approvals": false},
    })
}
