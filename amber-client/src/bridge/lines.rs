//! Reading NDJSON input one line at a time with a bound: a line longer than the limit is
//! never held whole. Its first bytes are kept (enough to read a request's id from) and the
//! rest is read and thrown away up to the next newline, so a 1 GB line costs at most the
//! limit in memory, and the line after it is read as usual.
//!
//! [`BoundedLines::next_line`] is cancel-safe: its progress lives in the reader, so a
//! `select!` that drops the future loses nothing.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// The longest line a bridge takes: amberd's default `[server] max_message_bytes`, so
/// whatever a bridge forwards fits in what the daemon accepts.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// How much of an oversized line is kept to answer it: its head, where a request's `id`
/// usually is.
pub const OVERSIZED_HEAD_BYTES: usize = 64 * 1024;

/// One input line, without its newline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// A line within the limit.
    Complete(Vec<u8>),
    /// A line over the limit: its first [`OVERSIZED_HEAD_BYTES`] bytes and its whole length.
    Oversized { head: Vec<u8>, len: u64 },
}

/// Lines of `reader`, each at most `limit` bytes held.
#[derive(Debug)]
pub struct BoundedLines<R> {
    reader: R,
    limit: usize,
    /// The line read so far (only its head once it is over the limit).
    line: Vec<u8>,
    /// The length of the current line when it is over the limit (`None` while within).
    over: Option<u64>,
    /// Lines returned so far: the 1-based number of the last one.
    number: u64,
}

impl<R: AsyncBufRead + Unpin> BoundedLines<R> {
    pub fn new(reader: R, limit: usize) -> Self {
        Self {
            reader,
            limit,
            line: Vec::new(),
            over: None,
            number: 0,
        }
    }

    /// The limit lines are held to.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The 1-based number of the line last returned.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// The next line; `None` at end of input. A last line without a newline still counts.
    pub async fn next_line(&mut self) -> std::io::Result<Option<Line>> {
        loop {
            let chunk = self.reader.fill_buf().await?;
            if chunk.is_empty() {
                if self.line.is_empty() && self.over.is_none() {
                    return Ok(None);
                }
                return Ok(Some(self.finish()));
            }
            let (used, ended) = match memchr::memchr(b'\n', chunk) {
                Some(at) => (at + 1, true),
                None => (chunk.len(), false),
            };
            let content = &chunk[..if ended { used - 1 } else { used }];
            match &mut self.over {
                Some(len) => *len += content.len() as u64,
                None if self.line.len() + content.len() <= self.limit => {
                    self.line.extend_from_slice(content);
                }
                None => {
                    // Over the limit: keep the head only and give the rest of the buffer back.
                    let len = (self.line.len() + content.len()) as u64;
                    let keep = OVERSIZED_HEAD_BYTES.min(self.limit);
                    if self.line.len() < keep {
                        let more = keep - self.line.len();
                        self.line
                            .extend_from_slice(&content[..more.min(content.len())]);
                    }
                    self.line.truncate(keep);
                    self.line.shrink_to_fit();
                    self.over = Some(len);
                }
            }
            self.reader.consume(used);
            if ended {
                return Ok(Some(self.finish()));
            }
        }
    }

    fn finish(&mut self) -> Line {
        self.number += 1;
        let line = std::mem::take(&mut self.line);
        match self.over.take() {
            None => Line::Complete(line),
            Some(len) => Line::Oversized { head: line, len },
        }
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    async fn read_all(input: &[u8], limit: usize, buffer: usize) -> Vec<Line> {
        let reader = tokio::io::BufReader::with_capacity(buffer, input);
        let mut lines = BoundedLines::new(reader, limit);
        let mut out = Vec::new();
        while let Some(line) = lines.next_line().await.unwrap() {
            out.push(line);
        }
        assert_eq!(lines.number(), out.len() as u64);
        out
    }

    fn complete(s: &str) -> Line {
        Line::Complete(s.as_bytes().to_vec())
    }

    #[tokio::test]
    async fn lines_within_the_limit_come_whole_whatever_the_buffer_size() {
        for buffer in [1, 3, 8, 4096] {
            let lines = read_all(b"ab\n\ncdefgh\nlast", 6, buffer).await;
            assert_eq!(
                lines,
                vec![
                    complete("ab"),
                    complete(""),
                    complete("cdefgh"),
                    complete("last")
                ],
                "buffer {buffer}"
            );
        }
        assert!(read_all(b"", 6, 8).await.is_empty());
    }

    #[tokio::test]
    async fn a_line_over_the_limit_keeps_its_head_and_the_next_line_is_read() {
        let long = "x".repeat(100);
        for buffer in [1, 7, 64, 4096] {
            let input = format!("{long}\nok\n{long}");
            let lines = read_all(input.as_bytes(), 10, buffer).await;
            let over = Line::Oversized {
                head: b"xxxxxxxxxx".to_vec(),
                len: 100,
            };
            assert_eq!(
                lines,
                vec![over.clone(), complete("ok"), over],
                "buffer {buffer}"
            );
        }
        // Exactly at the limit is within it.
        assert_eq!(
            read_all(b"0123456789\n", 10, 4).await,
            vec![complete("0123456789")]
        );
    }

    #[tokio::test]
    async fn the_head_of_an_oversized_line_is_bounded() {
        let input = vec![b'y'; 3 * OVERSIZED_HEAD_BYTES];
        let lines = read_all(&input, 2 * OVERSIZED_HEAD_BYTES, 8192).await;
        let [Line::Oversized { head, len }] = &lines[..] else {
            panic!("{lines:?}")
        };
        assert_eq!(head.len(), OVERSIZED_HEAD_BYTES);
        assert_eq!(*len, input.len() as u64);
    }
}
