//! The streamed text around a lost connection (`reconnect.rs`): live deltas sent while the
//! client was away are never replayed, so a message that was streaming then would print
//! with a hole in it. After a reconnection, such messages stop streaming and print the
//! rest of their text from their durable `message_completed` instead — nothing twice,
//! nothing missing.
//!
//! Which messages: those partly printed before the drop, and those whose first delta
//! arrives after the reconnection but before anything durable happened live (they may have
//! begun during the gap). Once a durable event arrives after `synced`, every later message
//! began while the client was back, and streams as usual.

use std::collections::HashSet;

/// The state of one reconnection's gap.
#[derive(Debug, Default)]
pub(crate) struct DeltaGap {
    /// Messages whose deltas are no longer printed.
    held: HashSet<String>,
    /// A reconnection happened and no durable event has arrived live since.
    open: bool,
    /// The new subscription's replay is over.
    synced: bool,
}

impl DeltaGap {
    /// A reconnection: `partial` are the messages printed in part so far.
    pub(crate) fn resume<'a>(&mut self, partial: impl IntoIterator<Item = &'a String>) {
        self.held.extend(partial.into_iter().cloned());
        self.open = true;
        self.synced = false;
    }

    /// The replay marker of the new subscription.
    pub(crate) fn synced(&mut self) {
        self.synced = true;
    }

    /// A durable event: after `synced`, the gap is closed for messages to come.
    pub(crate) fn durable(&mut self) {
        if self.synced {
            self.open = false;
        }
    }

    /// Whether a delta of `item` must not be printed (`known`: some of it was printed).
    pub(crate) fn holds(&mut self, item: &str, known: bool) -> bool {
        if self.held.contains(item) {
            return true;
        }
        if self.open && !known {
            self.held.insert(item.to_owned());
            return true;
        }
        false
    }

    /// `item` completed: it is no longer held.
    pub(crate) fn completed(&mut self, item: &str) {
        self.held.remove(item);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_that_spanned_the_gap_are_held_and_later_ones_stream() {
        let mut gap = DeltaGap::default();
        assert!(!gap.holds("m1", false));
        gap.resume([&"m1".to_owned()]);
        // The message printed in part before the drop.
        assert!(gap.holds("m1", true));
        // One first seen after the reconnection, before anything durable: it may have
        // begun during the gap.
        gap.synced();
        assert!(gap.holds("m2", false));
        gap.completed("m1");
        gap.completed("m2");
        // A durable event live after the replay: later messages began while connected.
        gap.durable();
        assert!(!gap.holds("m3", false));
    }

    #[test]
    fn replayed_durable_events_do_not_close_the_gap() {
        let mut gap = DeltaGap::default();
        gap.resume([]);
        gap.durable();
        assert!(gap.holds("m", false));
    }
}
