//! The executor protocol over a WebSocket, for both ends of a dial-in connection: each text
//! message is one protocol line. A pipe pair turns the socket into the byte streams the
//! line-based code reads and writes, so amberd and the executor speak it exactly as over
//! stdio.

use futures::{SinkExt, StreamExt};
use tokio::io::{
    AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream, ReadHalf,
    WriteHalf,
};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;

/// The size of the pipe between the socket and the line reader.
const PIPE_BYTES: usize = 1 << 20;

/// The connection's lines: what to read and where to write. The pumps behind them end on
/// their own: when the socket closes (the reader then ends), or when both halves are dropped
/// (the socket is then closed).
pub type Lines = (ReadHalf<DuplexStream>, WriteHalf<DuplexStream>);

/// Bridges `ws`: messages in become lines to read, lines written become messages out.
pub fn bridge<S>(ws: WebSocketStream<S>) -> Lines
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sink, mut stream) = ws.split();
    // What is written to `ours` the other side reads, and the other way.
    let (ours, theirs) = tokio::io::duplex(PIPE_BYTES);
    let (ours_read, mut ours_write) = tokio::io::split(ours);
    tokio::spawn(async move {
        while let Some(Ok(message)) = stream.next().await {
            let line = match message {
                Message::Text(text) => text.as_bytes().to_vec(),
                Message::Binary(bytes) => bytes.to_vec(),
                Message::Close(_) => break,
                _ => continue,
            };
            if ours_write.write_all(&line).await.is_err()
                || ours_write.write_all(b"\n").await.is_err()
            {
                break;
            }
        }
        // The reader sees the end of its input.
        let _ = ours_write.shutdown().await;
    });
    tokio::spawn(async move {
        let mut lines = BufReader::new(ours_read).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if sink.send(Message::text(line)).await.is_err() {
                break;
            }
        }
        let _ = sink.close().await;
    });
    tokio::io::split(theirs)
}
