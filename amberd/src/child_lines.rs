//! Splits a child process's stdout (an external plugin's, an ACP agent's) into lines while
//! enforcing the flood limits: no line over [`MAX_LINE`], and no more than [`RATE`] bytes
//! per second sustained (a burst of [`BURST`] is allowed, so a few large answers in a row
//! are fine).

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::time::Instant;

/// Longest line (one JSON-RPC message) a child may print.
pub(crate) const MAX_LINE: usize = 1024 * 1024;
/// Sustained output rate above which a child is said to flood.
pub(crate) const RATE: u64 = 8 * 1024 * 1024;
/// Bytes a child may print in a burst above the rate.
pub(crate) const BURST: u64 = 16 * 1024 * 1024;

/// Why the reader gave up on the stream.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    #[error("floods its output (a line over {} KiB)", MAX_LINE / 1024)]
    LongLine,
    #[error("floods its output (more than {} MiB/s)", RATE / (1024 * 1024))]
    TooFast,
    #[error("stdout read failed: {0}")]
    Io(#[from] std::io::Error),
}

/// A token bucket: `BURST` tokens, refilled at `RATE` per second.
#[derive(Debug)]
struct Budget {
    tokens: f64,
    at: Instant,
}

impl Budget {
    fn new() -> Self {
        Self {
            tokens: BURST as f64,
            at: Instant::now(),
        }
    }

    /// Spends `n` bytes; `false` when the child printed faster than allowed.
    fn spend(&mut self, n: usize) -> bool {
        let now = Instant::now();
        let refill = now.duration_since(self.at).as_secs_f64() * RATE as f64;
        self.tokens = (self.tokens + refill).min(BURST as f64) - n as f64;
        self.at = now;
        self.tokens >= 0.0
    }
}

/// Reads lines (without the newline, a trailing `\r` removed) from `inner`.
pub(crate) struct LineReader<R> {
    inner: R,
    buf: BytesMut,
    /// How much of `buf` is known to hold no newline.
    scanned: usize,
    budget: Budget,
    eof: bool,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    pub(crate) fn new(inner: R) -> Self {
        Self {
            inner,
            buf: BytesMut::with_capacity(64 * 1024),
            scanned: 0,
            budget: Budget::new(),
            eof: false,
        }
    }

    /// The next line; `None` at end of stream (a last line without a newline is still
    /// returned). Cancel safe: what was read stays buffered for the next call.
    pub(crate) async fn next_line(&mut self) -> Result<Option<Bytes>, ReadError> {
        loop {
            if let Some(at) = memchr::memchr(b'\n', &self.buf[self.scanned..]) {
                let mut line = self.buf.split_to(self.scanned + at + 1);
                self.scanned = 0;
                line.truncate(line.len() - 1);
                if line.last() == Some(&b'\r') {
                    line.truncate(line.len() - 1);
                }
                return Ok(Some(line.freeze()));
            }
            self.scanned = self.buf.len();
            if self.buf.len() > MAX_LINE {
                return Err(ReadError::LongLine);
            }
            if self.eof {
                if self.buf.is_empty() {
                    return Ok(None);
                }
                self.scanned = 0;
                return Ok(Some(self.buf.split().freeze()));
            }
            self.buf.reserve(64 * 1024);
            let n = self.inner.read_buf(&mut self.buf).await?;
            if n == 0 {
                self.eof = true;
            } else if !self.budget.spend(n) {
                return Err(ReadError::TooFast);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::AsyncWriteExt;

    use super::*;

    #[tokio::test]
    async fn splits_lines_across_reads() {
        let (mut tx, rx) = tokio::io::duplex(16);
        let writer = tokio::spawn(async move {
            tx.write_all(b"first\r\nsec").await.unwrap();
            tx.write_all(b"ond\n\nlast without newline").await.unwrap();
        });
        let mut reader = LineReader::new(rx);
        let mut lines = Vec::new();
        while let Some(line) = reader.next_line().await.unwrap() {
            lines.push(String::from_utf8(line.to_vec()).unwrap());
        }
        writer.await.unwrap();
        assert_eq!(lines, ["first", "second", "", "last without newline"]);
    }

    #[tokio::test]
    async fn rejects_a_line_over_the_limit() {
        let (mut tx, rx) = tokio::io::duplex(64 * 1024);
        tokio::spawn(async move {
            let chunk = vec![b'x'; 64 * 1024];
            while tx.write_all(&chunk).await.is_ok() {}
        });
        let mut reader = LineReader::new(rx);
        assert!(matches!(reader.next_line().await, Err(ReadError::LongLine)));
    }

    #[test]
    fn budget_allows_bursts_not_floods() {
        let mut budget = Budget::new();
        assert!(budget.spend(BURST as usize), "a full burst is fine");
        assert!(
            !budget.spend(RATE as usize / 10),
            "nothing left right after it"
        );
        // A second later (moving the last spend back instead of waiting).
        budget.at -= Duration::from_secs(1);
        assert!(
            budget.spend(RATE as usize / 2),
            "refilled at RATE per second"
        );
    }
}
