//! The bytes of one allowed connection, both ways, counted, until both sides closed their
//! writing, either failed, or the command's proxy stops serving. On Linux the bytes never
//! enter the daemon: each direction moves them socket → pipe → socket with `splice(2)`, so a
//! download through the proxy costs two page moves, not two copies through a buffer; the
//! counts hold what was moved whether the relay ended cleanly, failed or was stopped.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::Interest;
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

/// How many bytes went each way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bytes {
    /// From the command to the destination.
    pub sent: u64,
    /// From the destination to the command.
    pub received: u64,
}

/// The pipe's capacity, asked of the kernel, and so the most one `splice` moves into it: a
/// download moves in few, large steps (the default, 64 KiB, costs a wakeup per 64 KiB).
const CHUNK: usize = 1024 * 1024;

/// Relays both ways until both directions ended, one failed, or `stop` is cancelled. The
/// command's bytes wait for `gate` (the destination's go on meanwhile, so a protocol whose
/// server speaks first is not held up): `Some(refusal)` ends the connection before any of
/// them passes, and is returned.
pub(crate) async fn relay<G, R>(
    client: &TcpStream,
    upstream: &TcpStream,
    stop: &CancellationToken,
    gate: G,
) -> (Bytes, Option<R>)
where
    G: std::future::Future<Output = Option<R>>,
{
    let sent = AtomicU64::new(0);
    let received = AtomicU64::new(0);
    let mut refused = None;
    let both = async {
        let up = async {
            if let Some(refusal) = gate.await {
                refused = Some(refusal);
                return Err(io::Error::other("refused"));
            }
            one_way(client, upstream, &sent).await
        };
        let down = one_way(upstream, client, &received);
        // Either failing ends the connection: the other side learns it from the close.
        tokio::try_join!(up, down)
    };
    tokio::select! {
        _ = both => {}
        () = stop.cancelled() => {}
    }
    let bytes = Bytes {
        sent: sent.load(Ordering::Relaxed),
        received: received.load(Ordering::Relaxed),
    };
    (bytes, refused)
}

/// `from` → `to` until `from` ends its writing (then `to`'s writing is shut too).
async fn one_way(from: &TcpStream, to: &TcpStream, moved: &AtomicU64) -> io::Result<()> {
    let (pipe_out, pipe_in) = pipe()?;
    loop {
        let filled = loop {
            from.readable().await?;
            match from.try_io(Interest::READABLE, || {
                splice(from.as_raw_fd(), pipe_in.as_raw_fd(), CHUNK)
            }) {
                Ok(n) => break n,
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
                Err(err) => return Err(err),
            }
        };
        if filled == 0 {
            shutdown_write(to);
            return Ok(());
        }
        let mut left = filled;
        while left > 0 {
            to.writable().await?;
            match to.try_io(Interest::WRITABLE, || {
                splice(pipe_out.as_raw_fd(), to.as_raw_fd(), left)
            }) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    left -= n;
                    moved.fetch_add(n as u64, Ordering::Relaxed);
                }
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
                Err(err) => return Err(err),
            }
        }
    }
}

/// A non-blocking pipe: `(read end, write end)`.
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 writes two descriptors into the array it is given.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just made and are owned by nothing else.
    let (out, into) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // Best effort: above /proc/sys/fs/pipe-max-size (or the user's pipe quota) the pipe keeps
    // its default size and `splice` simply moves less at a time.
    // SAFETY: F_SETPIPE_SZ takes an integer size.
    unsafe {
        libc::fcntl(into.as_raw_fd(), libc::F_SETPIPE_SZ, CHUNK as libc::c_int);
    }
    Ok((out, into))
}

/// Moves at most `len` bytes from `from` to `to` (one of them a pipe) without blocking.
fn splice(from: RawFd, to: RawFd, len: usize) -> io::Result<usize> {
    // SAFETY: splice between two descriptors this process owns; null offsets (streams).
    let n = unsafe {
        libc::splice(
            from,
            std::ptr::null_mut(),
            to,
            std::ptr::null_mut(),
            len,
            libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
        )
    };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

/// Tells `stream`'s peer nothing more comes (a half-close: the other direction goes on).
fn shutdown_write(stream: &TcpStream) {
    // SAFETY: shutdown of a socket this process owns; a failure (already closed) is moot.
    unsafe {
        libc::shutdown(stream.as_raw_fd(), libc::SHUT_WR);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// Two connected pairs: (the command's end, the proxy's client side) and (the proxy's
    /// upstream side, the destination's end).
    async fn pairs() -> ((TcpStream, TcpStream), (TcpStream, TcpStream)) {
        async fn pair() -> (TcpStream, TcpStream) {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let (near, far) = tokio::join!(TcpStream::connect(addr), listener.accept());
            (near.unwrap(), far.unwrap().0)
        }
        (pair().await, pair().await)
    }

    #[tokio::test]
    async fn both_directions_are_relayed_and_counted_through_half_closes() {
        let ((mut command, client), (upstream, mut destination)) = pairs().await;
        let stop = CancellationToken::new();
        let relaying = tokio::spawn(async move {
            relay(&client, &upstream, &stop, std::future::ready(None::<()>))
                .await
                .0
        });
        command.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        command.shutdown().await.unwrap();
        let mut asked = Vec::new();
        destination.read_to_end(&mut asked).await.unwrap();
        assert_eq!(asked, b"GET / HTTP/1.1\r\n\r\n");
        // A large answer after the command stopped writing: the other way goes on.
        let answer = vec![7u8; 3 * 1024 * 1024 + 17];
        destination.write_all(&answer).await.unwrap();
        destination.shutdown().await.unwrap();
        let mut got = Vec::new();
        command.read_to_end(&mut got).await.unwrap();
        assert_eq!(got.len(), answer.len());
        assert!(got.iter().all(|b| *b == 7));
        let bytes = relaying.await.unwrap();
        assert_eq!(
            bytes,
            Bytes {
                sent: 18,
                received: answer.len() as u64
            }
        );
    }

    #[tokio::test]
    async fn a_stopped_relay_keeps_its_counts() {
        let ((mut command, client), (upstream, mut destination)) = pairs().await;
        let stop = CancellationToken::new();
        let stopper = stop.clone();
        let relaying = tokio::spawn(async move {
            relay(&client, &upstream, &stop, std::future::ready(None::<()>))
                .await
                .0
        });
        command.write_all(b"abc").await.unwrap();
        let mut got = [0u8; 3];
        destination.read_exact(&mut got).await.unwrap();
        stopper.cancel();
        assert_eq!(relaying.await.unwrap().sent, 3);
    }

    #[tokio::test]
    async fn the_destination_speaks_first_while_the_gate_waits_and_a_refusal_ends_it() {
        let ((mut command, client), (upstream, mut destination)) = pairs().await;
        let stop = CancellationToken::new();
        let (open, opened) = tokio::sync::oneshot::channel::<Option<&'static str>>();
        let relaying = tokio::spawn(async move {
            let gate = async { opened.await.ok().flatten() };
            relay(&client, &upstream, &stop, gate).await
        });
        // A greeting (SMTP, FTP, SSH) reaches the command before the gate opens.
        destination.write_all(b"220 ready\r\n").await.unwrap();
        let mut greeting = [0u8; 11];
        command.read_exact(&mut greeting).await.unwrap();
        assert_eq!(&greeting, b"220 ready\r\n");
        command.write_all(b"EHLO x\r\n").await.unwrap();
        open.send(Some("no")).unwrap();
        let (bytes, refused) = tokio::time::timeout(std::time::Duration::from_secs(5), relaying)
            .await
            .expect("a refusal ends the relay")
            .unwrap();
        assert_eq!(refused, Some("no"));
        assert_eq!(bytes.sent, 0, "nothing of the command's passed");
        assert_eq!(bytes.received, 11);
    }

    #[tokio::test]
    async fn a_reset_ends_the_relay() {
        let ((command, client), (upstream, destination)) = pairs().await;
        let stop = CancellationToken::new();
        let relaying = tokio::spawn(async move {
            relay(&client, &upstream, &stop, std::future::ready(None::<()>))
                .await
                .0
        });
        // The destination goes away abruptly, the command is idle: the relay still ends.
        // SO_LINGER 0: the close is a reset, not a FIN.
        let reset = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        // SAFETY: setsockopt with a linger struct of its size on a socket of this test.
        let rc = unsafe {
            libc::setsockopt(
                destination.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&reset as *const libc::linger).cast(),
                std::mem::size_of::<libc::linger>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0);
        drop(destination);
        drop(command);
        tokio::time::timeout(std::time::Duration::from_secs(5), relaying)
            .await
            .expect("the relay ended")
            .unwrap();
    }
}
