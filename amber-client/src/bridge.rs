//! The raw NDJSON bridge behind `amber-cli rpc`: a WebSocket connection with no
//! `initialize` of its own (the script sends it), one JSON-RPC message per line each way.
//!
//! Each input line becomes one text frame; each received frame becomes one output line,
//! responses and notifications alike. At end of input the bridge keeps reading until every
//! request it forwarded has been answered, then closes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use jsonrpsee::core::client::{ReceivedMessage, TransportReceiverT, TransportSenderT};
use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::ClientError;
use crate::client::open_stream;
use crate::transport::{self, WsReceiver, WsSender};

/// How long the bridge waits, after end of input, for outstanding answers.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// A WebSocket connection to the daemon on which nothing has been said yet.
pub struct RawConnection {
    socket: PathBuf,
    sender: WsSender,
    receiver: WsReceiver,
}

impl RawConnection {
    /// Connects (autostarting if allowed) and upgrades to WebSocket, without `initialize`.
    pub async fn connect(socket: Option<PathBuf>, autostart: bool) -> Result<Self, ClientError> {
        let socket = transport::resolve_socket(socket);
        let stream = open_stream(&socket, autostart).await?;
        let (sender, receiver) = transport::handshake(stream).await?;
        Ok(Self {
            socket,
            sender,
            receiver,
        })
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The halves, for callers that pump frames themselves.
    pub fn into_parts(self) -> (WsSender, WsReceiver) {
        (self.sender, self.receiver)
    }
}

/// Ids of forwarded requests that have not been answered yet.
#[derive(Debug, Default)]
pub struct Pending {
    by_id: HashMap<String, usize>,
}

/// Key of an id; `null` also stands for requests the daemon cannot read an id from.
fn id_key(id: &Value) -> String {
    id.to_string()
}

const NULL_ID: &str = "null";

/// The id key of `line` when it is an `initialize` request.
fn initialize_id(line: &str) -> Option<String> {
    let msg: Value = serde_json::from_str(line).ok()?;
    if msg.get("method")?.as_str()? != "initialize" {
        return None;
    }
    msg.get("id").map(id_key)
}

/// The id key of a response frame (`None` for notifications and batches).
fn answer_id(frame: &str) -> Option<String> {
    let msg: Value = serde_json::from_str(frame).ok()?;
    if msg.get("method").is_some() {
        return None;
    }
    msg.get("id").map(id_key)
}

impl Pending {
    /// Counts the answers one outgoing line will get.
    pub fn sent(&mut self, line: &str) {
        match serde_json::from_str::<Value>(line) {
            Ok(Value::Array(items)) if items.is_empty() => self.add(NULL_ID.into()),
            Ok(Value::Array(items)) => items.iter().for_each(|item| self.sent_one(item)),
            Ok(other) => self.sent_one(&other),
            Err(_) => self.add(NULL_ID.into()),
        }
    }

    fn sent_one(&mut self, msg: &Value) {
        match msg {
            Value::Object(map) => match map.get("id") {
                Some(id) => self.add(id_key(id)),
                // A notification: no answer comes.
                None if map.contains_key("method") => {}
                None => self.add(NULL_ID.into()),
            },
            _ => self.add(NULL_ID.into()),
        }
    }

    /// Ticks off the answers one incoming frame carries.
    pub fn received(&mut self, frame: &str) {
        match serde_json::from_str::<Value>(frame) {
            Ok(Value::Array(items)) => items.iter().for_each(|item| self.received_one(item)),
            Ok(other) => self.received_one(&other),
            Err(_) => {}
        }
    }

    fn received_one(&mut self, msg: &Value) {
        let Value::Object(map) = msg else { return };
        if map.contains_key("method") {
            return; // a notification from the daemon
        }
        if let Some(id) = map.get("id") {
            let key = id_key(id);
            if let Some(n) = self.by_id.get_mut(&key) {
                *n -= 1;
                if *n == 0 {
                    self.by_id.remove(&key);
                }
            }
        }
    }

    fn add(&mut self, key: String) {
        *self.by_id.entry(key).or_default() += 1;
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    pub fn len(&self) -> usize {
        self.by_id.values().sum()
    }
}

/// One frame as one line: frames with raw newlines are re-encoded compactly.
fn frame_line(frame: String) -> String {
    if !frame.contains('\n') {
        return frame;
    }
    match serde_json::from_str::<Value>(&frame) {
        Ok(v) => v.to_string(),
        Err(_) => frame.replace('\n', " "),
    }
}

/// Pumps `input` lines to the daemon and frames back to `output` until input ends and
/// every request has its answer, or the daemon closes the connection.
pub async fn run_bridge<I, O>(
    conn: RawConnection,
    input: I,
    mut output: O,
) -> Result<(), ClientError>
where
    I: AsyncBufRead + Unpin,
    O: AsyncWrite + Unpin,
{
    let RawConnection {
        mut sender,
        mut receiver,
        ..
    } = conn;
    let (frames_tx, mut frames) = mpsc::channel::<Result<String, String>>(256);
    let reader = tokio::spawn(async move {
        loop {
            let item = match receiver.receive().await {
                Ok(ReceivedMessage::Text(text)) => Ok(text),
                Ok(ReceivedMessage::Bytes(bytes)) => {
                    Ok(String::from_utf8_lossy(&bytes).into_owned())
                }
                Ok(ReceivedMessage::Pong) => continue,
                Err(e) => Err(e.to_string()),
            };
            let last = item.is_err();
            if frames_tx.send(item).await.is_err() || last {
                return;
            }
        }
    });

    let mut lines = input.lines();
    let mut pending = Pending::default();
    let mut input_open = true;
    // The daemon handles a connection's requests concurrently, so a line sent right behind
    // `initialize` could overtake it and be refused (-32002): nothing more is forwarded
    // until the handshake's answer is back.
    let mut handshake: Option<String> = None;
    let out_err = |e| ClientError::io("cannot write output", e);

    let result = loop {
        if !input_open && pending.is_empty() {
            break Ok(());
        }
        let drain = tokio::time::sleep(DRAIN_TIMEOUT);
        tokio::select! {
            line = lines.next_line(), if input_open && handshake.is_none() => match line {
                Ok(Some(line)) => {
                    let line = line.trim_end_matches('\r');
                    if line.trim().is_empty() {
                        continue;
                    }
                    pending.sent(line);
                    handshake = initialize_id(line);
                    if let Err(e) = sender.send(line.to_owned()).await {
                        break Err(ClientError::Transport(format!("send failed: {e}")));
                    }
                }
                Ok(None) => input_open = false,
                Err(e) => break Err(ClientError::io("cannot read input", e)),
            },
            frame = frames.recv() => match frame {
                Some(Ok(frame)) => {
                    pending.received(&frame);
                    if handshake.is_some() && answer_id(&frame) == handshake {
                        handshake = None;
                    }
                    let mut line = frame_line(frame);
                    line.push('\n');
                    if let Err(e) = output.write_all(line.as_bytes()).await {
                        break Err(out_err(e));
                    }
                    if let Err(e) = output.flush().await {
                        break Err(out_err(e));
                    }
                }
                Some(Err(_)) | None if !input_open && pending.is_empty() => break Ok(()),
                Some(Err(reason)) => break Err(ClientError::Transport(format!("closed: {reason}"))),
                None => break Err(ClientError::Transport("closed".into())),
            },
            _ = drain, if !input_open => {
                break Err(ClientError::Timeout {
                    method: format!("{} outstanding request(s)", pending.len()),
                });
            }
        }
    };
    reader.abort();
    let _ = sender.close().await;
    let _ = output.flush().await;
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_handshake_is_recognised_and_its_answer_matched() {
        let init = r#"{"jsonrpc":"2.0","id":7,"method":"initialize","params":{}}"#;
        assert_eq!(initialize_id(init).as_deref(), Some("7"));
        assert_eq!(
            initialize_id(r#"{"jsonrpc":"2.0","id":7,"method":"session/list"}"#),
            None
        );
        assert_eq!(
            initialize_id(r#"{"jsonrpc":"2.0","method":"initialize"}"#),
            None
        );
        assert_eq!(initialize_id("not json"), None);
        assert_eq!(
            answer_id(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#).as_deref(),
            Some("7")
        );
        assert_eq!(
            answer_id(r#"{"jsonrpc":"2.0","method":"session/event","params":{}}"#),
            None
        );
    }

    #[test]
    fn pending_counts_requests_not_notifications() {
        let mut p = Pending::default();
        p.sent(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#);
        p.sent(r#"{"jsonrpc":"2.0","id":"a","method":"daemon/status"}"#);
        p.sent(r#"{"jsonrpc":"2.0","method":"note"}"#);
        assert_eq!(p.len(), 2);
        p.received(
            r#"{"jsonrpc":"2.0","method":"session/event","params":{"subscription":1,"result":{}}}"#,
        );
        assert_eq!(p.len(), 2);
        p.received(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
        p.received(r#"{"jsonrpc":"2.0","id":"a","result":{}}"#);
        assert!(p.is_empty());
    }

    #[test]
    fn garbage_and_batches_are_counted() {
        let mut p = Pending::default();
        p.sent("{not json");
        p.sent(r#"[{"jsonrpc":"2.0","id":2,"method":"x"},{"jsonrpc":"2.0","method":"y"}]"#);
        assert_eq!(p.len(), 2);
        p.received(
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#,
        );
        p.received(
            r#"[{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"Method not found"}}]"#,
        );
        assert!(p.is_empty());
    }

    #[test]
    fn frames_become_single_lines() {
        assert_eq!(frame_line("{\"a\":1}".into()), "{\"a\":1}");
        assert_eq!(frame_line("{\n\"a\": 1\n}".into()), "{\"a\":1}");
    }
}
