//! The bytes of one allowed connection, both ways, counted, until either side closes or the
//! command's proxy stops serving. The counts hold what was read from each side, whether the
//! copy ended cleanly, failed or was stopped.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_util::sync::CancellationToken;

/// How many bytes went each way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Bytes {
    /// From the command to the destination.
    pub sent: u64,
    /// From the destination to the command.
    pub received: u64,
}

/// Copies both ways until both directions ended, one failed, or `stop` is cancelled.
pub(crate) async fn relay<A, B>(client: &mut A, upstream: &mut B, stop: &CancellationToken) -> Bytes
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let mut client = Counted::new(client);
    let mut upstream = Counted::new(upstream);
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {}
        () = stop.cancelled() => {}
    }
    Bytes {
        sent: client.read,
        received: upstream.read,
    }
}

/// A stream that counts what is read from it.
struct Counted<'a, S> {
    inner: &'a mut S,
    read: u64,
}

impl<'a, S> Counted<'a, S> {
    fn new(inner: &'a mut S) -> Self {
        Self { inner, read: 0 }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<'_, S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut *self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            self.read += (buf.filled().len() - before) as u64;
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<'_, S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut *self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn both_directions_are_counted() {
        let (mut client, mut client_far) = tokio::io::duplex(1024);
        let (mut upstream, mut upstream_far) = tokio::io::duplex(1024);
        let stop = CancellationToken::new();
        let relaying =
            tokio::spawn(async move { relay(&mut client_far, &mut upstream_far, &stop).await });
        client.write_all(b"hello").await.unwrap();
        let mut got = [0u8; 5];
        upstream.read_exact(&mut got).await.unwrap();
        upstream.write_all(b"a longer answer").await.unwrap();
        let mut answer = [0u8; 15];
        client.read_exact(&mut answer).await.unwrap();
        drop(client);
        drop(upstream);
        let bytes = relaying.await.unwrap();
        assert_eq!(
            bytes,
            Bytes {
                sent: 5,
                received: 15
            }
        );
    }

    #[tokio::test]
    async fn a_stopped_relay_keeps_its_counts() {
        let (mut client, mut client_far) = tokio::io::duplex(1024);
        let (mut upstream, mut upstream_far) = tokio::io::duplex(1024);
        let stop = CancellationToken::new();
        let stopper = stop.clone();
        let relaying =
            tokio::spawn(async move { relay(&mut client_far, &mut upstream_far, &stop).await });
        client.write_all(b"abc").await.unwrap();
        let mut got = [0u8; 3];
        upstream.read_exact(&mut got).await.unwrap();
        stopper.cancel();
        assert_eq!(relaying.await.unwrap().sent, 3);
    }
}
