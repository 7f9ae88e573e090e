//! Server-sent events framing (the WHATWG `text/event-stream` rules) over raw body bytes.
//!
//! Bytes are fed as they arrive, in any split; `next_event` hands out each complete event
//! as borrowed `&str`s, so a stream of tiny chunks costs no allocation per event. Lines end
//! at CRLF, LF or CR (a CR at the end of one piece and its LF at the start of the next are
//! one line end); a leading BOM is dropped; `:` lines are comments; `data` lines join with
//! `\n`; `id` and `retry` are read and ignored (amber never reconnects a chat stream).
//! Text is decoded per line, so a code point split between pieces is whole again by the
//! time its line ends; invalid UTF-8 becomes U+FFFD instead of failing the stream.
//!
//! Bounded: a line, finished or not, and the data of one event may not pass the decoder's
//! `max` bytes (`limits.rs`), so a peer that never sends a line end, or one event of 50 MB,
//! ends the stream with `TooLong` instead of filling memory. A long line is scanned for its
//! end once, however many pieces it comes in.
//!
//! Hand-written rather than eventsource-stream: that crate re-parses its buffer with nom
//! and allocates per line, which was half of amberd's cost per streamed chunk (see
//! docs/benchmarks.md).

use std::borrow::Cow;

use super::limits::ReplyLimits;

/// One dispatched event: its type (`message` unless an `event:` line named another) and
/// its data.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct SseEvent<'a> {
    pub event: &'a str,
    pub data: &'a str,
}

/// A line, or the data of one event, is longer than the decoder's bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TooLong;

/// Incremental decoder; see the module docs.
#[derive(Debug)]
pub(crate) struct SseDecoder {
    buf: Vec<u8>,
    /// Start of the bytes not yet read as lines.
    pos: usize,
    /// `buf[pos..scanned]` holds no line end: a search goes on from `scanned`, so a long
    /// line fed in many pieces is scanned once, not once per piece.
    scanned: usize,
    /// The last line ended with CR: an LF right after it belongs to that line end.
    skip_lf: bool,
    /// The first line was seen (its BOM, if any, is dropped).
    started: bool,
    event: String,
    /// Data lines, each followed by `\n`.
    data: String,
    /// The previous call returned an event: clear its buffers before reading on.
    dispatched: bool,
    /// Most bytes of one line, and of one event's data: what is buffered stays near it.
    max: usize,
}

impl Default for SseDecoder {
    fn default() -> Self {
        SseDecoder::new(ReplyLimits::default().event)
    }
}

impl SseDecoder {
    /// A decoder whose lines and events may not pass `max` bytes.
    pub(crate) fn new(max: usize) -> Self {
        SseDecoder {
            buf: Vec::new(),
            pos: 0,
            scanned: 0,
            skip_lf: false,
            started: false,
            event: String::new(),
            data: String::new(),
            dispatched: false,
            max,
        }
    }

    /// Appends body bytes.
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.scanned -= self.pos;
            self.pos = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// End of body: a last line without its line end, and a last event without its blank
    /// line, still count (providers that close the connection right after the data).
    pub(crate) fn finish(&mut self) {
        self.feed(b"\n\n");
    }

    /// The next complete event, or `None` until more bytes are fed; `TooLong` once a line
    /// (complete or not) or an event's data passes the bound — the stream is then over.
    pub(crate) fn next_event(&mut self) -> Result<Option<SseEvent<'_>>, TooLong> {
        if self.dispatched {
            self.dispatched = false;
            self.event.clear();
            self.data.clear();
        }
        loop {
            if self.skip_lf && self.pos < self.buf.len() {
                if self.buf[self.pos] == b'\n' {
                    self.pos += 1;
                }
                self.skip_lf = false;
            }
            let from = self.scanned.max(self.pos);
            let Some(end) = memchr::memchr2(b'\n', b'\r', &self.buf[from..]) else {
                self.scanned = self.buf.len();
                if self.buf.len() - self.pos > self.max {
                    return Err(TooLong);
                }
                return Ok(None);
            };
            let (start, stop) = (self.pos, from + end);
            if stop - start > self.max {
                return Err(TooLong);
            }
            self.skip_lf = self.buf[stop] == b'\r';
            self.pos = stop + 1;
            self.scanned = self.pos;
            let mut line = &self.buf[start..stop];
            if !self.started {
                self.started = true;
                line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
            }
            if line.is_empty() {
                if self.data.is_empty() {
                    self.event.clear();
                    continue;
                }
                self.dispatched = true;
                let data = &self.data[..self.data.len() - 1];
                let event = if self.event.is_empty() {
                    "message"
                } else {
                    self.event.as_str()
                };
                return Ok(Some(SseEvent { event, data }));
            }
            let (field, value) = match memchr::memchr(b':', line) {
                Some(0) => continue, // a comment
                Some(colon) => {
                    let value = &line[colon + 1..];
                    (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
                }
                None => (line, &b""[..]),
            };
            match field {
                b"data" => {
                    self.data.push_str(&text(value));
                    if self.data.len() > self.max {
                        return Err(TooLong);
                    }
                    self.data.push('\n');
                }
                b"event" => {
                    self.event.clear();
                    self.event.push_str(&text(value));
                }
                _ => {}
            }
        }
    }
}

/// `from_utf8_lossy` walks its input in chunks even when it is valid; the strict check is
/// several times faster on the valid text every provider sends.
fn text(bytes: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every event of `input` fed in pieces of `size` bytes, then finished.
    fn events(input: &[u8], size: usize) -> Vec<(String, String)> {
        let mut d = SseDecoder::default();
        let mut out = Vec::new();
        let mut drain = |d: &mut SseDecoder| {
            while let Some(e) = d.next_event().unwrap() {
                out.push((e.event.to_owned(), e.data.to_owned()));
            }
        };
        for piece in input.chunks(size.max(1)) {
            d.feed(piece);
            drain(&mut d);
        }
        d.finish();
        drain(&mut d);
        out
    }

    fn ev(event: &str, data: &str) -> (String, String) {
        (event.to_owned(), data.to_owned())
    }

    #[test]
    fn every_line_ending_every_split() {
        let input = "\u{feff}: comment\r\ndata: a\r\n\r\nevent: error\rdata:b\rdata\r\rdata: wörld 🌍\n\nid: 7\nretry: 10\n\n"
            .as_bytes();
        let expected = vec![
            ev("message", "a"),
            ev("error", "b\n"),
            ev("message", "wörld 🌍"),
        ];
        for size in 1..=input.len() {
            assert_eq!(events(input, size), expected, "pieces of {size}");
        }
    }

    #[test]
    fn a_last_event_without_its_blank_line_counts() {
        assert_eq!(events(b"data: x", 3), vec![ev("message", "x")]);
        assert_eq!(events(b"data: x\r", 64), vec![ev("message", "x")]);
        assert_eq!(events(b"data: x\n\n", 64), vec![ev("message", "x")]);
    }

    #[test]
    fn events_without_data_are_not_dispatched_and_reset_the_type() {
        assert_eq!(
            events(b"event: ping\n\ndata: after\n\n", 5),
            vec![ev("message", "after")]
        );
        // `data:` with nothing after it is an event with empty data.
        assert_eq!(events(b"data:\n\n", 64), vec![ev("message", "")]);
    }

    #[test]
    fn invalid_utf8_is_replaced_not_fatal() {
        assert_eq!(
            events(b"data: a\xffb\n\n", 2),
            vec![ev("message", "a\u{FFFD}b")]
        );
    }

    /// Events of `input` fed in pieces of `size` to a decoder bounded at `max`, up to the
    /// first error.
    fn bounded(input: &[u8], size: usize, max: usize) -> Result<Vec<String>, TooLong> {
        let mut d = SseDecoder::new(max);
        let mut out = Vec::new();
        for piece in input.chunks(size).chain([&b""[..]]) {
            if piece.is_empty() {
                d.finish();
            } else {
                d.feed(piece);
            }
            while let Some(e) = d.next_event()? {
                out.push(e.data.to_owned());
            }
        }
        Ok(out)
    }

    #[test]
    fn lines_and_events_are_bounded_however_they_are_split() {
        let at_bound = format!("data:{}\n\n", "x".repeat(11));
        let over = format!("data:{}\n\n", "x".repeat(12));
        let many_lines = "data: xxx\n".repeat(4) + "\n";
        let no_line_end = "data: ".to_owned() + &"x".repeat(100);
        for size in [1, 2, 7, 64, 1024] {
            // A 16-byte line (`data:` and 11 bytes) is at the bound; one more is over.
            assert_eq!(
                bounded(at_bound.as_bytes(), size, 16),
                Ok(vec!["x".repeat(11)])
            );
            assert_eq!(bounded(over.as_bytes(), size, 16), Err(TooLong), "{size}");
            // Short lines, one event: its data (15 bytes joined) passes 12.
            assert_eq!(bounded(many_lines.as_bytes(), size, 12), Err(TooLong));
            assert!(bounded(many_lines.as_bytes(), size, 16).is_ok());
            // A line that never ends fails before the body does.
            let mut d = SseDecoder::new(16);
            let mut failed = false;
            for piece in no_line_end.as_bytes().chunks(size) {
                d.feed(piece);
                if d.next_event() == Err(TooLong) {
                    failed = true;
                    break;
                }
            }
            assert!(failed, "pieces of {size}");
        }
    }

    #[test]
    fn comments_count_against_the_bound_too() {
        let long_comment = format!(":{}\ndata: ok\n\n", " ".repeat(64));
        assert_eq!(bounded(long_comment.as_bytes(), 8, 32), Err(TooLong));
        let short_comments = ": ping\n".repeat(100) + "data: ok\n\n";
        assert_eq!(
            bounded(short_comments.as_bytes(), 8, 32),
            Ok(vec!["ok".into()])
        );
    }

    #[test]
    fn only_one_space_after_the_colon_is_dropped() {
        assert_eq!(events(b"data:  two\n\n", 64), vec![ev("message", " two")]);
    }
}
