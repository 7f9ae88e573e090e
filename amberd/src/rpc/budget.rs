//! The daemon-wide budget of request bytes in flight: HTTP bodies being read and parsed,
//! WebSocket messages being gathered and handed to jsonrpsee. A request that would take
//! it past `[server] max_bytes_in_flight` is answered -32003 (overloaded) instead of being
//! held in memory, so many concurrent large bodies cannot add up without bound.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Shared by every connection.
#[derive(Clone, Debug)]
pub(super) struct ByteBudget {
    bytes: Arc<Semaphore>,
}

/// Bytes taken from the budget; they return when this is dropped.
#[derive(Debug, Default)]
pub(super) struct Reserved(Option<OwnedSemaphorePermit>);

impl ByteBudget {
    pub(super) fn new(total: u64) -> Self {
        let total = usize::try_from(total)
            .unwrap_or(usize::MAX)
            .min(Semaphore::MAX_PERMITS);
        Self {
            bytes: Arc::new(Semaphore::new(total)),
        }
    }

    /// `n` bytes, if that many are free now.
    pub(super) fn try_take(&self, n: u64) -> Option<Reserved> {
        if n == 0 {
            return Some(Reserved(None));
        }
        let n = u32::try_from(n).ok()?;
        self.bytes
            .clone()
            .try_acquire_many_owned(n)
            .ok()
            .map(|permit| Reserved(Some(permit)))
    }
}

impl Reserved {
    /// Adds `more` to what this holds.
    pub(super) fn merge(&mut self, more: Reserved) {
        match (&mut self.0, more.0) {
            (Some(held), Some(more)) => held.merge(more),
            (held @ None, more) => *held = more,
            (Some(_), None) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_return_when_released() {
        let budget = ByteBudget::new(100);
        let mut a = budget.try_take(60).unwrap();
        assert!(budget.try_take(50).is_none());
        a.merge(budget.try_take(40).unwrap());
        assert!(budget.try_take(1).is_none());
        drop(a);
        assert!(budget.try_take(100).is_some());
        assert!(budget.try_take(0).is_some());
    }
}
