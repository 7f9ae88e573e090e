//! Pacing of fast streams: how often the SSE reader forwards what it decoded.
//!
//! At a human pace (every model streams at a few hundred tokens per second at most) each
//! chunk is forwarded the moment it is decoded. A stream of more than `FAST_EVENTS` chunks
//! per `WINDOW` (a cached reply replayed, a local model on a fast GPU, a benchmark) is
//! *fast*: its deltas are forwarded at most once per `WINDOW`, one event for many chunks
//! instead of one per chunk. Text is held back at most one window; nothing is dropped or
//! reordered (the reader only changes *when* it forwards).
//!
//! Pausing the reads of a fast stream as well (to take many chunks per wake-up) was tried
//! and measured slower: the socket's receive buffer fills within the pause and the endpoint
//! stalls (docs/benchmarks.md).

use std::time::Duration;

use tokio::time::Instant;

/// Span over which the stream's rate is judged; also the longest a fast stream's text is
/// held before it is forwarded.
pub(crate) const WINDOW: Duration = Duration::from_millis(1);
/// Chunks per window that make a stream fast (32,000 per second).
const FAST_EVENTS: u32 = 32;

/// What the reader does when nothing decoded is left in hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Forward what is pending, then wait for the body.
    FlushAndWait,
    /// Wait for the body, forwarding what is pending at this instant if it is still waiting.
    WaitUntil(Instant),
}

/// Rate tracking of one stream; see the module docs.
#[derive(Debug)]
pub(crate) struct Pacer {
    window_start: Instant,
    window_events: u32,
    fast: bool,
    last_flush: Instant,
}

impl Pacer {
    pub(crate) fn new(now: Instant) -> Self {
        Self {
            window_start: now,
            window_events: 0,
            fast: false,
            last_flush: now,
        }
    }

    /// Whether the stream is currently judged fast.
    pub(crate) fn is_fast(&self) -> bool {
        self.fast
    }

    /// One chunk was decoded.
    pub(crate) fn on_event(&mut self) {
        self.window_events = self.window_events.saturating_add(1);
    }

    /// Nothing decoded is left in hand: what to do before the next read.
    pub(crate) fn next(&mut self, now: Instant) -> Next {
        if now.duration_since(self.window_start) >= WINDOW {
            self.fast = self.window_events >= FAST_EVENTS;
            self.window_start = now;
            self.window_events = 0;
        }
        if !self.fast {
            return Next::FlushAndWait;
        }
        let due = self.last_flush + WINDOW;
        if due <= now {
            Next::FlushAndWait
        } else {
            Next::WaitUntil(due)
        }
    }

    /// What was pending was forwarded at `now`.
    pub(crate) fn flushed(&mut self, now: Instant) {
        self.last_flush = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(p: &mut Pacer, n: u32) {
        for _ in 0..n {
            p.on_event();
        }
    }

    #[test]
    fn a_human_paced_stream_is_forwarded_chunk_by_chunk() {
        let t0 = Instant::now();
        let mut p = Pacer::new(t0);
        for ms in 1..50 {
            events(&mut p, 1);
            assert_eq!(p.next(t0 + Duration::from_millis(ms)), Next::FlushAndWait);
        }
        assert!(!p.is_fast());
    }

    #[test]
    fn a_fast_stream_is_forwarded_once_per_window() {
        let t0 = Instant::now();
        let mut p = Pacer::new(t0);
        events(&mut p, 100);
        let t1 = t0 + WINDOW;
        assert_eq!(p.next(t1), Next::FlushAndWait, "due since t0");
        assert!(p.is_fast());
        p.flushed(t1);
        events(&mut p, 5);
        let t2 = t1 + Duration::from_micros(100);
        assert_eq!(p.next(t2), Next::WaitUntil(t1 + WINDOW));
        // Held text is due one window after the last flush.
        p.flushed(t2);
        assert_eq!(p.next(t2), Next::WaitUntil(t2 + WINDOW));
    }

    #[test]
    fn a_stream_that_slows_down_is_no_longer_fast() {
        let t0 = Instant::now();
        let mut p = Pacer::new(t0);
        events(&mut p, 100);
        let _ = p.next(t0 + WINDOW);
        assert!(p.is_fast());
        events(&mut p, 2);
        assert_eq!(p.next(t0 + WINDOW * 2), Next::FlushAndWait);
        assert!(!p.is_fast());
    }
}
