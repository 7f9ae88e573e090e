//! A bounded byte ring for a background process's output: the newest
//! `capacity` bytes are kept, older ones dropped. Positions are absolute
//! stream offsets, so a reader can tell what it missed.

use std::collections::VecDeque;

/// The newest `capacity` bytes of a stream.
#[derive(Debug)]
pub(crate) struct Ring {
    capacity: usize,
    bytes: VecDeque<u8>,
    /// Bytes written since the start (the offset of the end of `bytes`).
    total: u64,
}

/// What a reader gets from [`Ring::since`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Slice {
    /// Bytes the reader never saw because they were dropped.
    pub dropped: u64,
    /// The offset of `bytes[0]` in the stream.
    pub start: u64,
    pub bytes: Vec<u8>,
}

impl Ring {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            bytes: VecDeque::new(),
            total: 0,
        }
    }

    pub(crate) fn push(&mut self, data: &[u8]) {
        self.total += data.len() as u64;
        let data = if data.len() > self.capacity {
            &data[data.len() - self.capacity..]
        } else {
            data
        };
        let overflow = (self.bytes.len() + data.len()).saturating_sub(self.capacity);
        self.bytes.drain(..overflow);
        self.bytes.extend(data);
    }

    /// Offset of the oldest byte still kept.
    pub(crate) fn start(&self) -> u64 {
        self.total - self.bytes.len() as u64
    }

    /// Everything from offset `from` on that is still kept.
    pub(crate) fn since(&self, from: u64) -> Slice {
        let start = self.start();
        let first = from.clamp(start, self.total);
        let skip = usize::try_from(first - start).unwrap_or(usize::MAX);
        Slice {
            dropped: start.saturating_sub(from),
            start: first,
            bytes: self.bytes.iter().skip(skip).copied().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_everything_under_capacity() {
        let mut ring = Ring::new(8);
        ring.push(b"abc");
        ring.push(b"de");
        let slice = ring.since(0);
        assert_eq!(slice.bytes, b"abcde");
        assert_eq!(slice.dropped, 0);
        assert_eq!(ring.since(3).bytes, b"de");
        assert_eq!(ring.start(), 0);
    }

    #[test]
    fn drops_the_oldest_bytes() {
        let mut ring = Ring::new(4);
        ring.push(b"abc");
        ring.push(b"def");
        assert_eq!(ring.start(), 2);
        let slice = ring.since(0);
        assert_eq!(slice.bytes, b"cdef");
        assert_eq!(slice.dropped, 2);
        assert_eq!(slice.start, 2);
        ring.push(b"0123456789");
        let slice = ring.since(6);
        assert_eq!(slice.bytes, b"6789");
        assert_eq!(slice.dropped, 6);
        assert_eq!(ring.since(16).bytes, b"");
        assert_eq!(ring.since(16).dropped, 0);
    }
}
