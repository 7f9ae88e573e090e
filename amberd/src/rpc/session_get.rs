//! `session/get`: a session's snapshot and one page of its messages, never longer than
//! `[server] max_message_bytes`.
//!
//! A page is the newest messages before `beforeIndex` (default: the end), at most
//! `messagesLimit` of them, and only as many as fit the budget once their long strings are
//! elided (`elide.rs`). The result says where the page starts (`firstIndex`), how long the
//! history is (`totalMessages`) and whether older messages exist (`hasMore`); the previous
//! page is `beforeIndex` = `firstIndex`. Indices are positions in the session's context as
//! it is now: a compaction renumbers them.

use amber_proto::{Message, SessionGetParams, SessionGetResult, errors};
use jsonrpsee::types::ErrorObjectOwned;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::daemon::Daemon;
use crate::elide::{self, WireLimits};
use crate::rpc::params::error;

/// Room kept for `firstIndex`/`hasMore` changing once the page is chosen.
const SLACK: usize = 32;

pub(crate) fn handle(
    d: &Daemon,
    p: SessionGetParams,
) -> Result<SessionGetResult, ErrorObjectOwned> {
    if p.messages_limit == Some(0) {
        return Err(error(
            errors::INVALID_PARAMS,
            "invalid params: messagesLimit: must be at least 1",
        ));
    }
    let shared = d.sessions.get(&p.session_id)?.shared.clone();
    // lastSeq first: a client subscribing with it may see an event twice in the
    // messages and the replay, but never miss one.
    let last_seq = shared.hub.last_seq();
    let messages = shared.messages();
    let total = messages.len();
    let before = match p.before_index {
        None => total,
        Some(index) => match usize::try_from(index) {
            Ok(index) if index <= total => index,
            _ => {
                return Err(error(
                    errors::INVALID_PARAMS,
                    format!(
                        "invalid params: beforeIndex: {index} is beyond the end (the session \
                         has {total} messages)"
                    ),
                ));
            }
        },
    };
    let limits = WireLimits::from_config(&d.sessions.services().live().config.server);
    let mut result = SessionGetResult {
        session: fit_typed(&shared.info(), limits),
        messages: Vec::new(),
        pending_approvals: shared
            .approvals
            .pending()
            .iter()
            .map(|a| fit_typed(a, limits))
            .collect(),
        todos: shared
            .tools
            .todos()
            .iter()
            .map(|t| fit_typed(t, limits))
            .collect(),
        last_seq,
        first_index: before as u64,
        total_messages: total as u64,
        has_more: before > 0,
    };
    let room = limits
        .budget()
        .saturating_sub(elide::json_len(&result) + SLACK);
    let limit = p.messages_limit.map_or(usize::MAX, |n| n as usize);
    result.messages = newest_that_fit(&messages[..before], limit, room, limits);
    let first = before - result.messages.len();
    result.first_index = first as u64;
    result.has_more = first > 0;
    Ok(result)
}

/// The newest of `messages`, at most `limit`, elided, whose JSON array takes at most `room`
/// bytes; oldest first.
pub(crate) fn newest_that_fit(
    messages: &[Message],
    limit: usize,
    room: usize,
    limits: WireLimits,
) -> Vec<Message> {
    let mut page = Vec::new();
    let mut used = 0usize;
    for message in messages.iter().rev().take(limit) {
        let fitted = elide::fit_message(message, limits);
        // Its JSON and a comma.
        let cost = elide::json_len(&fitted) + 1;
        if used + cost > room {
            break;
        }
        used += cost;
        page.push(fitted);
    }
    page.reverse();
    page
}

/// `value` with its long strings elided (and its large members collapsed if it is still
/// over the budget); only elided when collapsing would change its type.
fn fit_typed<T: Serialize + DeserializeOwned + Clone>(value: &T, limits: WireLimits) -> T {
    if limits.fits_untouched(elide::json_len(value)) {
        return value.clone();
    }
    let Ok(original) = serde_json::to_value(value) else {
        return value.clone();
    };
    let mut fitted = original.clone();
    elide::fit_value(&mut fitted, limits);
    if let Ok(typed) = serde_json::from_value(fitted) {
        return typed;
    }
    let mut elided = original;
    elide::elide_value(&mut elided, elide::MIN_FIELD_BYTES);
    serde_json::from_value(elided).unwrap_or_else(|_| value.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use amber_proto::{self as proto, Role};

    fn history(n: usize, content_bytes: usize) -> Vec<Message> {
        (0..n)
            .map(|i| Message::user(format!("{i}:{}", "m".repeat(content_bytes))))
            .collect()
    }

    fn index_of(message: &Message) -> usize {
        message.content.split(':').next().unwrap().parse().unwrap()
    }

    #[test]
    fn pages_hold_the_newest_messages_that_fit() {
        let limits = WireLimits::new(1024, 1024 * 1024);
        let all = history(10, 100);
        let one = elide::json_len(&all[0]) + 1;
        // (before, limit, room) → indices returned.
        let table: Vec<(usize, usize, usize, Vec<usize>)> = vec![
            (10, usize::MAX, usize::MAX, (0..10).collect()),
            (10, 3, usize::MAX, vec![7, 8, 9]),
            (7, 3, usize::MAX, vec![4, 5, 6]),
            (2, 3, usize::MAX, vec![0, 1]),
            (0, 3, usize::MAX, vec![]),
            (10, usize::MAX, 4 * one, vec![6, 7, 8, 9]),
            (10, usize::MAX, 4 * one - 1, vec![7, 8, 9]),
            (10, 2, 4 * one, vec![8, 9]),
            (10, usize::MAX, 0, vec![]),
        ];
        for (before, limit, room, expected) in table {
            let page = newest_that_fit(&all[..before], limit, room, limits);
            let got: Vec<usize> = page.iter().map(index_of).collect();
            assert_eq!(got, expected, "before {before}, limit {limit}, room {room}");
        }
    }

    #[test]
    fn a_page_carries_messages_elided() {
        let limits = WireLimits::new(1024, 1024 * 1024);
        let all = vec![
            Message::user("u"),
            Message::assistant("a".repeat(5000), vec![]),
        ];
        let page = newest_that_fit(&all, usize::MAX, usize::MAX, limits);
        assert_eq!(page[0], all[0]);
        assert_eq!(page[1].role, Role::Assistant);
        assert!(page[1].content.len() <= 1024);
        assert_eq!(elide::parse_marker(&page[1].content).unwrap().1, 5000);
    }

    #[test]
    fn typed_values_keep_their_type() {
        let limits = WireLimits::new(256, 8 * 1024);
        let todo = proto::Todo {
            id: "1".into(),
            text: "t".repeat(1000),
            status: proto::TodoStatus::Pending,
        };
        let fitted = fit_typed(&todo, limits);
        assert_eq!(fitted.id, "1");
        assert_eq!(elide::parse_marker(&fitted.text).unwrap().1, 1000);
        let approval = proto::Approval {
            request_id: "r".into(),
            call_id: "c".into(),
            tool: "write".into(),
            arguments: serde_json::json!({"n": vec![7; 10_000]}),
            reason: "why".into(),
            scope: "write".into(),
            unsandboxed: false,
            person_only: false,
            mcp: None,
        };
        let fitted = fit_typed(&approval, limits);
        assert!(elide::json_len(&fitted) <= limits.budget());
        assert!(fitted.arguments.is_string(), "{}", fitted.arguments);
    }
}
