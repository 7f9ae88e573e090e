//! Tool-call delta accumulator: folds streamed fragments (`index`, `id`, `name`, argument
//! pieces) into complete calls, tolerating missing indexes, missing ids, whole calls in one
//! chunk and interleaved parallel calls.

use amber_proto::ToolCall;

/// One streamed fragment of a tool call, already lifted out of the wire format.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolCallDelta {
    pub index: Option<usize>,
    pub id: Option<String>,
    pub name: Option<String>,
    /// A piece of the raw JSON arguments text.
    pub arguments: Option<String>,
}

#[derive(Debug, Default)]
struct Slot {
    index: Option<usize>,
    id: Option<String>,
    name: String,
    arguments: String,
}

/// Collects [`ToolCallDelta`]s in arrival order.
#[derive(Debug, Default)]
pub struct ToolCallAccumulator {
    slots: Vec<Slot>,
}

fn non_empty(s: Option<String>) -> Option<String> {
    s.filter(|v| !v.is_empty())
}

impl ToolCallAccumulator {
    pub fn new() -> Self {
        Self::default()
    }

    /// True when no fragment has been seen.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// How many calls the fragments so far started.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Fold one fragment in.
    ///
    /// Matching rules: with an `index`, the slot with that index (unless it already has a
    /// different id — some providers number every call 0); without one, the slot with the
    /// same id, else a new slot when the fragment starts a call (new id or a name while the
    /// last slot is already named), else the last slot (a continuation).
    pub fn push(&mut self, delta: ToolCallDelta) {
        let id = non_empty(delta.id);
        let name = non_empty(delta.name);
        let pos = self.find_slot(delta.index, id.as_deref(), name.is_some());
        let slot = match pos {
            Some(pos) => &mut self.slots[pos],
            None => {
                self.slots.push(Slot {
                    index: delta.index,
                    ..Slot::default()
                });
                let last = self.slots.len() - 1;
                &mut self.slots[last]
            }
        };
        if slot.id.is_none() {
            slot.id = id;
        }
        if let Some(name) = name
            && slot.name.is_empty()
        {
            slot.name = name;
        }
        if let Some(args) = delta.arguments {
            slot.arguments.push_str(&args);
        }
    }

    fn find_slot(&self, index: Option<usize>, id: Option<&str>, named: bool) -> Option<usize> {
        let id_conflicts =
            |slot: &Slot| matches!((slot.id.as_deref(), id), (Some(a), Some(b)) if a != b);
        if let Some(index) = index {
            // Latest slot with this index, so repeated index 0 with fresh ids works.
            return self
                .slots
                .iter()
                .rposition(|s| s.index == Some(index))
                .filter(|&p| !id_conflicts(&self.slots[p]));
        }
        if let Some(id) = id
            && let Some(p) = self.slots.iter().position(|s| s.id.as_deref() == Some(id))
        {
            return Some(p);
        }
        let last = self.slots.len().checked_sub(1)?;
        let slot = &self.slots[last];
        let starts_new = id_conflicts(slot) || (named && !slot.name.is_empty());
        (!starts_new).then_some(last)
    }

    /// The complete calls, in index order when every fragment had an index, else arrival
    /// order. Missing ids become `call_<n>` (n = position); blank arguments become `{}`.
    pub fn finish(self) -> Vec<ToolCall> {
        let mut slots: Vec<Slot> = self
            .slots
            .into_iter()
            .filter(|s| !(s.name.is_empty() && s.arguments.trim().is_empty()))
            .collect();
        if slots.iter().all(|s| s.index.is_some()) {
            slots.sort_by_key(|s| s.index);
        }
        slots
            .into_iter()
            .enumerate()
            .map(|(n, s)| ToolCall {
                id: s.id.unwrap_or_else(|| format!("call_{n}")),
                name: s.name,
                arguments: if s.arguments.trim().is_empty() {
                    "{}".to_owned()
                } else {
                    s.arguments
                },
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(
        index: Option<usize>,
        id: Option<&str>,
        name: Option<&str>,
        args: Option<&str>,
    ) -> ToolCallDelta {
        ToolCallDelta {
            index,
            id: id.map(str::to_owned),
            name: name.map(str::to_owned),
            arguments: args.map(str::to_owned),
        }
    }

    fn call(id: &str, name: &str, args: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: args.into(),
        }
    }

    #[test]
    fn openai_style_fragments() {
        let mut acc = ToolCallAccumulator::new();
        acc.push(d(Some(0), Some("call_a"), Some("read"), Some("")));
        acc.push(d(Some(0), None, None, Some("{\"pa")));
        acc.push(d(Some(0), None, None, Some("th\":\"x\"}")));
        assert_eq!(
            acc.finish(),
            vec![call("call_a", "read", r#"{"path":"x"}"#)]
        );
    }

    #[test]
    fn interleaved_parallel_calls_sorted_by_index() {
        let mut acc = ToolCallAccumulator::new();
        acc.push(d(Some(1), Some("b"), Some("two"), None));
        acc.push(d(Some(0), Some("a"), Some("one"), None));
        acc.push(d(Some(1), None, None, Some("{\"n\":")));
        acc.push(d(Some(0), None, None, Some("{}")));
        acc.push(d(Some(1), None, None, Some("2}")));
        assert_eq!(
            acc.finish(),
            vec![call("a", "one", "{}"), call("b", "two", r#"{"n":2}"#)]
        );
    }

    #[test]
    fn missing_index_uses_ids_and_continuations() {
        let mut acc = ToolCallAccumulator::new();
        acc.push(d(None, Some("a"), Some("one"), Some("{\"x\"")));
        acc.push(d(None, None, None, Some(":1}")));
        acc.push(d(None, Some("b"), Some("two"), None));
        acc.push(d(None, Some("b"), None, Some("{}")));
        assert_eq!(
            acc.finish(),
            vec![call("a", "one", r#"{"x":1}"#), call("b", "two", "{}")]
        );
    }

    #[test]
    fn missing_index_and_id_splits_on_new_name() {
        let mut acc = ToolCallAccumulator::new();
        acc.push(d(None, None, Some("one"), Some("{}")));
        acc.push(d(None, None, Some("two"), Some("{\"a\"")));
        acc.push(d(None, None, None, Some(":1}")));
        assert_eq!(
            acc.finish(),
            vec![
                call("call_0", "one", "{}"),
                call("call_1", "two", r#"{"a":1}"#)
            ]
        );
    }

    #[test]
    fn same_index_with_fresh_ids_are_distinct_calls() {
        let mut acc = ToolCallAccumulator::new();
        acc.push(d(Some(0), Some("a"), Some("one"), Some("{}")));
        acc.push(d(Some(0), Some("b"), Some("two"), Some("{}")));
        acc.push(d(Some(0), Some("b"), None, None));
        assert_eq!(
            acc.finish(),
            vec![call("a", "one", "{}"), call("b", "two", "{}")]
        );
    }

    #[test]
    fn blank_arguments_become_empty_object_and_empty_slots_drop() {
        let mut acc = ToolCallAccumulator::new();
        acc.push(d(Some(0), Some(""), Some("list"), Some("")));
        acc.push(d(Some(1), None, None, Some("  ")));
        assert_eq!(acc.finish(), vec![call("call_0", "list", "{}")]);
    }

    #[test]
    fn name_is_not_overwritten_by_repeats() {
        let mut acc = ToolCallAccumulator::new();
        acc.push(d(Some(0), Some("a"), Some("read"), Some("{")));
        acc.push(d(Some(0), Some("a"), Some("read"), Some("}")));
        assert_eq!(acc.finish(), vec![call("a", "read", "{}")]);
    }
}
