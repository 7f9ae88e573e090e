//! Step 4: rebuild the context from the classification and the memories.
//!
//! Order of the result: the system prompt, the memories message (when there are
//! memories), then the kept units in their original order. A unit (a tool step or one
//! message, see `collapse::units`) takes the strongest class of its messages and is kept
//! or dropped whole, so tool-call pairs stay consistent. Kept: every `core` unit and the
//! tail — the most recent user message and everything after it — then `context` units,
//! newest first, while the estimate stays within the budget ((1 − headroom) × window,
//! tool schemas included). `prune` units are dropped. When the tail alone does not fit,
//! the tail's middle (between that user message and the last unit) is treated like
//! older history, so a long single turn can still be compacted.
//!
//! A memories message left by an earlier compaction is not a unit: its memories are carried
//! into the new message (before the new ones, duplicates dropped), so the context always has
//! at most one memories message, right after the system prompt.

use std::ops::Range;

use amber_llm::ToolSpec;
use amber_proto::{Message, Role};

use super::collapse::units;
use super::estimate::{message_tokens, tools_tokens};
use super::parse::Class;

/// Heading of the memories message.
pub(super) const MEMORIES_HEADING: &str = "Memories from earlier in this session:";

/// The message holding the memories, or None when there are none.
pub(crate) fn memories_message(memories: &[String]) -> Option<Message> {
    if memories.is_empty() {
        return None;
    }
    let mut text = MEMORIES_HEADING.to_owned();
    for memory in memories {
        text.push_str("\n- ");
        text.push_str(&memory.replace('\n', "\n  "));
    }
    Some(Message::user(text))
}

/// The memories of a memories message written by `memories_message`, or None when
/// `message` is not one.
fn previous_memories(message: &Message) -> Option<Vec<String>> {
    if message.role != Role::User {
        return None;
    }
    let body = message.content.strip_prefix(MEMORIES_HEADING)?;
    let mut memories: Vec<String> = Vec::new();
    for line in body.lines().skip_while(|l| l.is_empty()) {
        if let Some(item) = line.strip_prefix("- ") {
            memories.push(item.to_owned());
        } else if let (Some(continued), Some(last)) = (line.strip_prefix("  "), memories.last_mut())
        {
            last.push('\n');
            last.push_str(continued);
        } else {
            return None; // not the shape this module writes: an ordinary message
        }
    }
    Some(memories)
}

/// Where the tail starts (the unit of the most recent user message; the last unit when
/// there is no user message).
fn tail_start(messages: &[Message], units: &[Range<usize>]) -> usize {
    units
        .iter()
        .rposition(|u| messages[u.start].role == Role::User)
        .unwrap_or(units.len().saturating_sub(1))
}

/// Whether anything besides the system prompt, the most recent user message and the last
/// unit could be removed; if not, compaction has nothing to do.
pub(crate) fn has_compactable(messages: &[Message]) -> bool {
    let units = units(messages);
    let tail = tail_start(messages, &units);
    (0..units.len()).any(|i| i != tail && i + 1 != units.len())
}

/// The rebuilt context. `classes[i]` is the class of `messages[i]`; `budget` is in
/// estimated tokens (u64::MAX: no limit).
pub(crate) fn apply(
    messages: &[Message],
    classes: &[Class],
    memories: &[String],
    tools: &[ToolSpec],
    budget: u64,
) -> Vec<Message> {
    let Some(system) = messages.first() else {
        return Vec::new();
    };
    let previous = messages.get(1).and_then(previous_memories);
    let (messages, classes) = match previous {
        // Drop the old memories message from the units; classes shift with the messages.
        Some(_) => {
            let mut rest = vec![system.clone()];
            rest.extend_from_slice(&messages[2..]);
            let mut shifted = classes.get(..1).unwrap_or_default().to_vec();
            shifted.extend_from_slice(classes.get(2..).unwrap_or_default());
            (rest, shifted)
        }
        None => (messages.to_vec(), classes.to_vec()),
    };
    let (messages, classes) = (messages.as_slice(), classes.as_slice());
    let mut all_memories = previous.unwrap_or_default();
    for memory in memories {
        if !all_memories.contains(memory) {
            all_memories.push(memory.clone());
        }
    }
    let memories = memories_message(&all_memories);
    let units = units(messages);
    let class_of = |u: &Range<usize>| {
        u.clone()
            .map(|i| classes.get(i).copied().unwrap_or(Class::Context))
            .max()
            .unwrap_or(Class::Context)
    };
    let cost = |u: &Range<usize>| messages[u.clone()].iter().map(message_tokens).sum::<u64>();
    let unit_classes: Vec<Class> = units.iter().map(class_of).collect();
    let tail = tail_start(messages, &units);
    let last = units.len().saturating_sub(1);

    let mut kept = vec![false; units.len()];
    let fixed =
        message_tokens(system) + memories.as_ref().map_or(0, message_tokens) + tools_tokens(tools);
    let tail_cost: u64 = units.iter().skip(tail).map(cost).sum();
    let mut total = fixed;
    for (i, unit) in units.iter().enumerate() {
        if i >= tail || unit_classes[i] == Class::Core {
            kept[i] = true;
            total += cost(unit);
        }
    }
    if fixed + tail_cost > budget {
        // The tail alone does not fit: only its user message and last unit stay pinned.
        for i in tail + 1..last {
            if unit_classes[i] != Class::Core {
                kept[i] = false;
                total -= cost(&units[i]);
            }
        }
    }
    let pinned = |i: usize| i == tail || i == last || unit_classes[i] == Class::Core;
    for i in (0..units.len()).rev() {
        if kept[i] || pinned(i) || unit_classes[i] != Class::Context {
            continue;
        }
        let c = cost(&units[i]);
        if total.saturating_add(c) > budget {
            break;
        }
        kept[i] = true;
        total += c;
    }

    let mut out = vec![system.clone()];
    out.extend(memories);
    for (unit, keep) in units.iter().zip(kept) {
        if keep {
            out.extend_from_slice(&messages[unit.clone()]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compaction::estimate::estimate_tokens;
    use amber_proto::ToolCall;

    /// system, then 10 exchanges of (user i, assistant step i, tool i), then a final user.
    fn history() -> Vec<Message> {
        let mut m = vec![Message::system("sys")];
        for i in 0..10 {
            m.push(Message::user(format!("request {i}")));
            m.push(Message::assistant(
                format!("step {i}"),
                vec![ToolCall {
                    id: format!("c{i}"),
                    name: "read".into(),
                    arguments: "{}".into(),
                }],
            ));
            m.push(Message::tool(format!("c{i}"), "x".repeat(400)));
        }
        m.push(Message::user("latest request"));
        m
    }

    fn contents(messages: &[Message]) -> Vec<&str> {
        messages.iter().map(|m| m.content.as_str()).collect()
    }

    #[test]
    fn headroom_keeps_context_newest_first() {
        let messages = history();
        let classes = vec![Class::Context; messages.len()];
        let unlimited = apply(&messages, &classes, &[], &[], u64::MAX);
        assert_eq!(unlimited, messages);
        // Room for the system prompt, the tail and about three tool steps.
        let budget = estimate_tokens(&messages[..1], &[])
            + estimate_tokens(&messages[messages.len() - 1..], &[])
            + 3 * estimate_tokens(&messages[1..4], &[])
            + 10;
        let out = apply(&messages, &classes, &[], &[], budget);
        assert!(estimate_tokens(&out, &[]) <= budget);
        let text = contents(&out);
        assert_eq!(text[0], "sys");
        assert_eq!(*text.last().unwrap_or(&""), "latest request");
        assert!(text.contains(&"step 9") && text.contains(&"request 7"));
        assert!(!text.contains(&"step 6") && !text.contains(&"request 0"));
    }

    #[test]
    fn core_kept_prune_dropped_pairs_together() {
        let messages = history();
        let mut classes = vec![Class::Context; messages.len()];
        classes[1] = Class::Core; // request 0
        classes[3] = Class::Core; // tool result of step 0: its call comes along
        classes[28] = Class::Prune; // request 9
        classes[29] = Class::Prune; // step 9 and its result
        classes[30] = Class::Prune;
        // A budget so small that no context unit fits.
        let out = apply(&messages, &classes, &[], &[], 0);
        let text = contents(&out);
        assert_eq!(text[..3], ["sys", "request 0", "step 0"]);
        assert_eq!(out[3].tool_call_id.as_deref(), Some("c0"));
        assert_eq!(text[4], "latest request");
        assert_eq!(out.len(), 5);
        // With room, context comes back but prune never does.
        let out = apply(&messages, &classes, &[], &[], u64::MAX);
        let text = contents(&out);
        assert!(text.contains(&"step 8") && !text.contains(&"step 9"));
        assert!(!text.contains(&"request 9"));
        assert_eq!(out.len(), messages.len() - 3);
    }

    #[test]
    fn memories_go_right_after_the_system_prompt() {
        let messages = history();
        let classes = vec![Class::Prune; messages.len()];
        let memories = vec!["uses nextest".to_owned(), "two\nlines".to_owned()];
        let out = apply(&messages, &classes, &memories, &[], u64::MAX);
        assert_eq!(out.len(), 3);
        assert_eq!(out[1].role, Role::User);
        assert_eq!(
            out[1].content,
            format!("{MEMORIES_HEADING}\n- uses nextest\n- two\n  lines")
        );
        assert_eq!(out[2].content, "latest request");
        assert_eq!(memories_message(&[]), None);
    }

    #[test]
    fn a_second_compaction_carries_the_earlier_memories_into_one_message() {
        let first = vec!["uses nextest".to_owned(), "two\nlines".to_owned()];
        let classes = vec![Class::Context; history().len()];
        let once = apply(&history(), &classes, &first, &[], u64::MAX);
        let mut again = once.clone();
        again.push(Message::assistant("done", Vec::new()));
        again.push(Message::user("next"));
        // The classifier may mark the old memories message anything; it is not a unit.
        let mut classes = vec![Class::Context; again.len()];
        classes[1] = Class::Prune;
        let second = vec!["uses nextest".to_owned(), "prefers tabs".to_owned()];
        let out = apply(&again, &classes, &second, &[], u64::MAX);
        let memory_messages = out
            .iter()
            .filter(|m| m.content.starts_with(MEMORIES_HEADING))
            .count();
        assert_eq!(memory_messages, 1);
        assert_eq!(
            out[1].content,
            format!("{MEMORIES_HEADING}\n- uses nextest\n- two\n  lines\n- prefers tabs")
        );
        assert_eq!(out.len(), again.len());
        assert_eq!(out[2..], again[2..]);
        // Without new memories the old ones stay; a user message that merely starts with
        // the heading but is not the shape written here is an ordinary message.
        let kept = apply(
            &again,
            &vec![Class::Context; again.len()],
            &[],
            &[],
            u64::MAX,
        );
        assert_eq!(kept, again);
        assert_eq!(
            previous_memories(&Message::user(format!("{MEMORIES_HEADING} and more prose"))),
            None
        );
    }

    #[test]
    fn a_long_single_turn_is_compacted_when_the_tail_does_not_fit() {
        let mut messages = vec![Message::system("sys"), Message::user("do it all")];
        messages.extend(
            history()
                .into_iter()
                .skip(1)
                .filter(|m| m.role != Role::User),
        );
        let classes = vec![Class::Context; messages.len()];
        // The tail is the whole history and fits: everything is kept.
        assert_eq!(apply(&messages, &classes, &[], &[], u64::MAX), messages);
        // It does not fit: the prompt and the last step stay, older steps go.
        let out = apply(&messages, &classes, &[], &[], 200);
        let text = contents(&out);
        assert_eq!(text[..2], ["sys", "do it all"]);
        assert_eq!(text[text.len() - 2], "step 9");
        assert!(!text.contains(&"step 0"));
        assert!(has_compactable(&messages));
        assert!(!has_compactable(&messages[..4]));
        assert!(!has_compactable(&messages[..1]));
    }

    #[test]
    fn a_fitting_tail_stays_whole_even_when_core_overflows() {
        let mut messages = vec![Message::system("sys"), Message::user("x".repeat(4000))];
        messages.push(Message::user("do it"));
        messages.extend(
            history()
                .into_iter()
                .skip(1)
                .take(9)
                .filter(|m| m.role != Role::User),
        );
        let mut classes = vec![Class::Context; messages.len()];
        classes[1] = Class::Core;
        let tail_budget =
            estimate_tokens(&messages[..1], &[]) + estimate_tokens(&messages[2..], &[]);
        let out = apply(&messages, &classes, &[], &[], tail_budget);
        assert_eq!(out, messages);
    }
}
