//! The raw NDJSON bridge behind `amber-cli rpc`: a WebSocket connection with no
//! `initialize` of its own (the script sends it), one JSON-RPC message per line each way.
//!
//! Each input line of JSON becomes one text frame; each received frame becomes one output
//! line, responses and notifications alike. A line that is not UTF-8 or not JSON is answered
//! here with a `-32700` line, one over [`lines::MAX_LINE_BYTES`] with a `-32007` line (it
//! is never held whole: `lines.rs`), and the bridge goes on. At end of input the bridge
//! keeps reading until every request the daemon owes an answer (`input.rs`) has one, then
//! closes.

pub mod envelope;
mod input;
pub mod lines;

use std::path::{Path, PathBuf};
use std::time::Duration;

use jsonrpsee::core::client::{ReceivedMessage, TransportReceiverT, TransportSenderT};
use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncWrite, AsyncWriteExt};

pub use input::Pending;
use input::{InputLine, classify_line, frame_answer_id};
use lines::{BoundedLines, MAX_LINE_BYTES};
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

/// Writes one output line and flushes it (a script reads answers as they come).
async fn write_line<O: AsyncWrite + Unpin>(
    output: &mut O,
    mut line: String,
) -> Result<(), ClientError> {
    line.push('\n');
    let out_err = |e| ClientError::io("cannot write output", e);
    output.write_all(line.as_bytes()).await.map_err(out_err)?;
    output.flush().await.map_err(out_err)
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
        sender,
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
    // Sending has a task of its own, so the loop below never waits on a send: a daemon that
    // stops reading until its answers are read (its backpressure) would otherwise wait on a
    // bridge that waits on the daemon. The loop reads a line only with a queue slot in hand.
    let (outgoing_tx, outgoing_rx) = mpsc::channel::<String>(OUTGOING_QUEUE);
    let mut writer = tokio::spawn(forward_frames(sender, outgoing_rx));

    // Cancel-safe: a line half read when the other branch wins the select goes on from
    // where it was on the next call.
    let mut input = BoundedLines::new(input, MAX_LINE_BYTES);
    let mut pending = Pending::default();
    let mut input_open = true;
    // The daemon handles a connection's requests concurrently, so a line sent right behind
    // `initialize` could overtake it and be refused (-32002): nothing more is forwarded
    // until the handshake's answer is back.
    let mut handshake: Option<String> = None;
    let mut slot = None;

    let result = loop {
        if !input_open && pending.is_empty() {
            break Ok(());
        }
        let wants_input = input_open && handshake.is_none();
        let drain = tokio::time::sleep(DRAIN_TIMEOUT);
        tokio::select! {
            reserved = outgoing_tx.reserve(), if wants_input && slot.is_none() => match reserved {
                Ok(permit) => slot = Some(permit),
                // The sender task ended: its error says why.
                Err(_) => break Err(sender_failure(&mut writer).await),
            },
            read = input.next_line(), if wants_input && slot.is_some() => {
                let line = match read {
                    Ok(Some(line)) => line,
                    Ok(None) => {
                        input_open = false;
                        continue;
                    }
                    Err(e) => break Err(ClientError::io("cannot read input", e)),
                };
                let classified = classify_line(&line, input.number(), input.limit());
                drop(line);
                match classified {
                    None => {}
                    Some(InputLine::Unparsable(answer)) => {
                        if let Err(e) = write_line(&mut output, answer).await {
                            break Err(e);
                        }
                    }
                    Some(InputLine::Forward(outgoing)) => {
                        pending.sent(&outgoing);
                        handshake = outgoing.initialize;
                        if let Some(permit) = slot.take() {
                            permit.send(outgoing.text);
                        }
                    }
                }
            },
            frame = frames.recv() => match frame {
                Some(Ok(frame)) => {
                    pending.received(&frame);
                    if handshake.is_some() && frame_answer_id(&frame) == handshake {
                        handshake = None;
                    }
                    if let Err(e) = write_line(&mut output, frame_line(frame)).await {
                        break Err(e);
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
    drop(slot);
    drop(outgoing_tx);
    if result.is_ok() {
        // Every answer is in, so the queue is empty: this only closes the connection.
        let _ = tokio::time::timeout(CLOSE_TIMEOUT, writer).await;
    } else {
        writer.abort();
    }
    let _ = output.flush().await;
    result
}

/// How many lines may wait for the sender task; reading input pauses while it is full.
const OUTGOING_QUEUE: usize = 16;

/// How long a clean end waits for the close frame to go out.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// The sender task: each queued line as one text frame, then a close when the queue ends.
async fn forward_frames(
    mut sender: WsSender,
    mut outgoing: mpsc::Receiver<String>,
) -> Result<(), String> {
    while let Some(text) = outgoing.recv().await {
        sender
            .send(text)
            .await
            .map_err(|e| format!("send failed: {e}"))?;
    }
    let _ = sender.close().await;
    Ok(())
}

/// Why the sender task ended early, as the bridge's error.
async fn sender_failure(writer: &mut tokio::task::JoinHandle<Result<(), String>>) -> ClientError {
    let reason = match writer.await {
        Ok(Err(reason)) => reason,
        Ok(Ok(())) => "the sender stopped".to_owned(),
        Err(e) => format!("the sender failed: {e}"),
    };
    ClientError::Transport(reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_become_single_lines() {
        assert_eq!(frame_line("{\"a\":1}".into()), "{\"a\":1}");
        assert_eq!(frame_line("{\n\"a\": 1\n}".into()), "{\"a\":1}");
    }
}
