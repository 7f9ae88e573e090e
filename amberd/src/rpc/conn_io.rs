//! The IO a connection is served on: first the bytes amber already read to classify the
//! connection (its first request head, see `conn`), then the socket — straight for plain
//! HTTP, through the WebSocket guard for a connection that asked to upgrade.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::UnixStream;

use super::ws_guard::WsGuard;

pub(super) struct ConnIo {
    inner: UnixStream,
    replay: Vec<u8>,
    replay_pos: usize,
    guard: Option<Box<WsGuard>>,
}

impl ConnIo {
    /// Plain HTTP: `read` (head and whatever followed it) is replayed, then the socket.
    pub(super) fn http(inner: UnixStream, read: Vec<u8>) -> Self {
        Self {
            inner,
            replay: read,
            replay_pos: 0,
            guard: None,
        }
    }

    /// A WebSocket upgrade: `head` is replayed for hyper; what follows goes through `guard`.
    pub(super) fn websocket(inner: UnixStream, head: Vec<u8>, guard: WsGuard) -> Self {
        Self {
            inner,
            replay: head,
            replay_pos: 0,
            guard: Some(Box::new(guard)),
        }
    }
}

impl AsyncRead for ConnIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.replay_pos < this.replay.len() {
            let n = (this.replay.len() - this.replay_pos).min(buf.remaining());
            buf.put_slice(&this.replay[this.replay_pos..this.replay_pos + n]);
            this.replay_pos += n;
            if this.replay_pos == this.replay.len() {
                this.replay = Vec::new();
                this.replay_pos = 0;
            }
            return Poll::Ready(Ok(()));
        }
        match &mut this.guard {
            Some(guard) => guard.poll_read(&mut this.inner, cx, buf),
            None => Pin::new(&mut this.inner).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for ConnIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match &mut this.guard {
            Some(guard) => guard.poll_write(&mut this.inner, cx, buf),
            None => Pin::new(&mut this.inner).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match &mut this.guard {
            Some(guard) => guard.poll_flush(&mut this.inner, cx),
            None => Pin::new(&mut this.inner).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
