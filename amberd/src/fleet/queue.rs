//! The fleet's queue: sessions waiting for a runner, taken by priority (higher first) and
//! then in the order they were queued, by the first runner whose labels include theirs.
//! A few thousand entries at most: a runner's poll walks them in order.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};

/// The labels a session asks for or a runner has.
pub(crate) type Labels = BTreeMap<String, String>;

/// The queue.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    order: BTreeMap<(Reverse<i32>, u64), String>,
    entries: HashMap<String, Entry>,
    next_seq: u64,
}

#[derive(Debug)]
struct Entry {
    key: (Reverse<i32>, u64),
    labels: Labels,
}

impl Queue {
    /// Queues `session` (again: it keeps no earlier place).
    pub(crate) fn push(&mut self, session: &str, priority: i32, labels: Labels) {
        self.remove(session);
        let key = (Reverse(priority), self.next_seq);
        self.next_seq += 1;
        self.order.insert(key, session.to_owned());
        self.entries
            .insert(session.to_owned(), Entry { key, labels });
    }

    /// Takes `session` out; whether it was queued.
    pub(crate) fn remove(&mut self, session: &str) -> bool {
        match self.entries.remove(session) {
            Some(entry) => {
                self.order.remove(&entry.key);
                true
            }
            None => false,
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Takes at most `max` sessions a runner with `labels` may run, first first.
    pub(crate) fn take(&mut self, labels: &Labels, max: usize) -> Vec<String> {
        if max == 0 {
            return Vec::new();
        }
        let fits: Vec<(Reverse<i32>, u64)> = self
            .order
            .iter()
            .filter(|(_, session)| {
                self.entries
                    .get(*session)
                    .is_some_and(|e| matches(&e.labels, labels))
            })
            .map(|(key, _)| *key)
            .take(max)
            .collect();
        fits.into_iter()
            .filter_map(|key| {
                let session = self.order.remove(&key)?;
                self.entries.remove(&session);
                Some(session)
            })
            .collect()
    }

    /// How many wait, by the pool they ask for (`""`: any pool).
    pub(crate) fn depth_by_pool(&self) -> BTreeMap<String, usize> {
        let mut depth = BTreeMap::new();
        for entry in self.entries.values() {
            let pool = entry.labels.get("pool").cloned().unwrap_or_default();
            *depth.entry(pool).or_insert(0) += 1;
        }
        depth
    }
}

/// Whether a runner with `has` may run a session that asks for `wants`: every label it
/// asks for, with the same value.
pub(crate) fn matches(wants: &Labels, has: &Labels) -> bool {
    wants.iter().all(|(k, v)| has.get(k) == Some(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn a_runner_takes_what_its_labels_fit_by_priority_then_in_order() {
        let mut queue = Queue::default();
        queue.push("a", 0, labels(&[]));
        queue.push("gpu", 5, labels(&[("gpu", "a100")]));
        queue.push("b", 0, labels(&[("pool", "ci")]));
        queue.push("urgent", 9, labels(&[]));
        queue.push("c", 0, labels(&[]));
        let plain = labels(&[("os", "linux"), ("pool", "default")]);
        assert_eq!(queue.take(&plain, 2), ["urgent", "a"]);
        assert_eq!(queue.take(&plain, 5), ["c"]);
        let ci_gpu = labels(&[("pool", "ci"), ("gpu", "a100")]);
        assert_eq!(queue.take(&ci_gpu, 5), ["gpu", "b"]);
        assert_eq!(queue.len(), 0);
    }

    #[test]
    fn queued_again_a_session_goes_to_the_back_of_its_priority() {
        let mut queue = Queue::default();
        queue.push("a", 0, labels(&[]));
        queue.push("b", 0, labels(&[]));
        queue.push("a", 0, labels(&[]));
        assert_eq!(queue.len(), 2);
        assert_eq!(queue.take(&labels(&[]), 5), ["b", "a"]);
    }

    #[test]
    fn depth_counts_by_the_pool_asked_for() {
        let mut queue = Queue::default();
        queue.push("a", 0, labels(&[("pool", "gpu")]));
        queue.push("b", 0, labels(&[("pool", "gpu")]));
        queue.push("c", 0, labels(&[]));
        assert!(queue.remove("c"));
        assert!(!queue.remove("c"));
        queue.push("d", 0, labels(&[]));
        assert_eq!(
            queue.depth_by_pool(),
            BTreeMap::from([(String::new(), 1), ("gpu".to_owned(), 2)])
        );
    }

    #[test]
    fn labels_match_when_every_asked_one_is_there_with_its_value() {
        let has = labels(&[("os", "linux"), ("arch", "x86_64")]);
        for (wants, fits) in [
            (labels(&[]), true),
            (labels(&[("os", "linux")]), true),
            (labels(&[("os", "linux"), ("arch", "x86_64")]), true),
            (labels(&[("os", "macos")]), false),
            (labels(&[("gpu", "a100")]), false),
        ] {
            assert_eq!(matches(&wants, &has), fits, "{wants:?}");
        }
    }
}
