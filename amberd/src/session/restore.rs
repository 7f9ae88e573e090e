//! Bringing a session back from the store (at start when it is marked busy, on first use
//! after a restart, or after it was unloaded while idle), including crash recovery.
//!
//! **Invariants:** a restored session is `idle` unless prompts were waiting; a turn that
//! was running when the daemon died ends with a durable
//! `turn_completed{stopReason: "error", error.code: "interrupted"}`, and then the prompts
//! acknowledged behind it (`prompt_queued`, no `turn_started`) run in order with their own
//! turn ids, or each ends `cancelled` with `[sessions] resume_queued = false`;
//! the context is cut back to its longest consistent prefix (never half a tool-call pair,
//! never the interrupted turn's unanswered confirm question), and the cut is written to
//! the log as pops so the log keeps matching memory. A log damaged in the middle is
//! salvaged first (`Store::salvage`: the records before the damage are kept, the damaged
//! file is put aside and `session/verify` keeps reporting it). Usage and
//! an empty title are taken from the log when it knows them (the metadata is saved after
//! a turn's events, so a crash can leave it one turn behind).

use std::sync::Arc;

use amber_proto::{ErrorInfo, EventKind, Message, Role, SessionState, StopReason, Usage};
use amber_store::context::Context;
use amber_store::{
    Loaded, QueuedPrompt, Store, StoreError, StoredEvent, closing_events, consistent_context,
    interrupted_turn, queued_prompts,
};

use super::build::{self, Parts};
use super::deps::Deps;
use super::hub::{EventHub, EventStore, MEMORY_TAIL, WireEvent};
use super::persist::Persistence;
use super::{SessionError, SessionHandle};
use crate::agent::prompt::CONFIRM_PROMPT;

/// Loads session `id` from the store and starts it.
pub(super) fn load(
    deps: &Arc<Deps>,
    store: &Store,
    id: &str,
) -> Result<Arc<SessionHandle>, SessionError> {
    let store_err = |e: StoreError| SessionError::Store(e.to_string());
    let loaded = match store.load(id) {
        // Damage in the middle: keep what comes before it rather than lose the session.
        Err(StoreError::Corrupt { .. }) => {
            store.salvage(id).map_err(store_err)?;
            store.load(id).map_err(store_err)?
        }
        other => other.map_err(store_err)?,
    };
    if loaded.repaired_tail {
        tracing::warn!(
            session = id,
            "dropped a torn record at the end of the session log"
        );
    }
    let interrupted = interrupted_turn(&loaded);
    let mut log = store.open_log(id).map_err(store_err)?;
    let keep = consistent_context(&loaded.context);
    let keep = without_confirm(&loaded, keep, interrupted.as_deref());
    for _ in keep..loaded.context.len() {
        // Half a tool-call pair or the confirm exchange from a crash: drop it for good.
        log.append_pop(false).map_err(store_err)?;
    }
    let persistence = Persistence::new(store.clone(), id.to_owned(), log);
    let links: Vec<(Message, u64)> = loaded.context.into_iter().take(keep).collect();
    let mut context = match Context::restore(links.clone()) {
        Ok(context) => context,
        Err(err) => {
            // Tampered history: keep the session usable on freshly sealed links;
            // `session/verify` still reports the broken link in the log.
            tracing::error!(session = id, %err, "persisted context chain is broken");
            let mut context = Context::new();
            for (message, _) in links {
                context.push(message);
            }
            context
        }
    };
    context.set_journal(persistence.journal());
    let system_prompt = loaded.meta.system_prompt.clone();
    if context.is_empty() {
        context.push(Message::system(system_prompt.clone()));
    }

    let waiting = queued_prompts(&loaded.events);
    let todos = last_todos(&loaded.events);
    let usage = last_usage_total(&loaded.events);
    let first_prompt = first_prompt(&loaded.events);
    let last_seq = loaded.events.last().map_or(0, |e| e.seq);
    let skip = loaded.events.len().saturating_sub(MEMORY_TAIL);
    // Calls and sub-agents the crash left open end before the turn does.
    let closing = interrupted
        .as_deref()
        .map(|turn| closing_events(&loaded.events, turn))
        .unwrap_or_default();
    let interrupted_usage = interrupted
        .as_deref()
        .map(|turn| turn_usage(&loaded.events, turn))
        .unwrap_or_default();
    let tail: Vec<WireEvent> = loaded
        .events
        .into_iter()
        .skip(skip)
        .map(|e| WireEvent {
            seq: Some(e.seq),
            json: Arc::from(e.json),
        })
        .collect();
    let hub = EventHub::restored(
        id.to_owned(),
        deps.config.server.subscriber_buffer,
        last_seq,
        tail,
        Some(persistence.clone() as Arc<dyn EventStore>),
    )
    .with_memory(deps.config.sessions.memory_events)
    .with_limits(crate::elide::WireLimits::from_config(&deps.config.server));
    let mut info = loaded.meta.info;
    info.state = SessionState::Idle;
    // The metadata is saved after a turn's events: after a crash the log may know more.
    if let Some(total) = usage {
        info.usage = total;
    }
    if info.title.is_empty()
        && let Some(prompt) = first_prompt
    {
        info.title = super::title_of(&prompt);
    }
    let workspace = std::path::PathBuf::from(&info.cwd);
    let handle = build::spawn(
        deps,
        Parts {
            info,
            workspace,
            system_prompt,
            context,
            hub,
            persistence: Some(persistence),
        },
    );
    if let Some(todos) = todos {
        handle.shared.tools.restore_todos(todos);
    }
    if let Some(turn_id) = interrupted {
        tracing::warn!(session = id, turn = %turn_id, "ending a turn the daemon was running when it stopped");
        for item in closing {
            handle
                .shared
                .hub
                .publish_as(Some(&turn_id), item.agent.as_deref(), item.kind);
        }
        handle.shared.hub.publish(
            Some(&turn_id),
            EventKind::TurnCompleted {
                stop_reason: StopReason::Error,
                error: Some(ErrorInfo {
                    code: "interrupted".into(),
                    message: "the daemon stopped while this turn was running".into(),
                }),
                usage: interrupted_usage,
            },
        );
    }
    // After the interrupted turn's end: prompts acknowledged behind it come next.
    settle_queued(deps, &handle, waiting);
    // A crash's marker with nothing left to run (or the prompts ended as cancelled) goes.
    handle.shared.settle_marker();
    handle.shared.save_meta();
    Ok(handle)
}

/// Prompts acknowledged before the restart whose turn never began: run again in order with
/// their own turn ids, or (`[sessions] resume_queued = false`) each ended as cancelled.
/// Either way every acknowledged `turnId` gets its `turn_completed`.
fn settle_queued(deps: &Deps, handle: &SessionHandle, waiting: Vec<QueuedPrompt>) {
    if waiting.is_empty() {
        return;
    }
    let resume = deps.config.sessions.resume_queued;
    tracing::info!(
        session = %handle.shared.id,
        prompts = waiting.len(),
        resume,
        "prompts were waiting when the daemon stopped"
    );
    for QueuedPrompt { turn_id, prompt } in waiting {
        if resume {
            handle.requeue_prompt(turn_id, prompt);
        } else {
            handle.shared.hub.publish(
                Some(&turn_id),
                EventKind::TurnCompleted {
                    stop_reason: StopReason::Cancelled,
                    error: Some(ErrorInfo {
                        code: "not_resumed".into(),
                        message: "the daemon restarted before this prompt's turn began \
                                  ([sessions] resume_queued = false)"
                            .into(),
                    }),
                    usage: Usage::default(),
                },
            );
        }
    }
}

/// `keep` (a consistent prefix length) without a trailing confirm exchange the crash left
/// unfinished: the confirm question, and a text answer after it if one was recorded. The
/// agent pops them itself when a turn ends any other way; an answer that called tools (and
/// got its results) continued the turn and stays.
fn without_confirm(loaded: &Loaded, keep: usize, interrupted: Option<&str>) -> usize {
    let Some(turn) = interrupted else {
        return keep;
    };
    let is_confirm = |i: usize| {
        let Some((message, _)) = loaded.context.get(i) else {
            return false;
        };
        if message.role != Role::User {
            return false;
        }
        if loaded.confirm_at == Some(i) {
            return true;
        }
        // Logs written before pushes were tagged: by text, unless the user typed that text
        // as the interrupted turn's prompt.
        message.content == CONFIRM_PROMPT
            && turn_prompt(&loaded.events, turn).is_some_and(|p| p != CONFIRM_PROMPT)
    };
    let text_answer = |i: usize| {
        loaded
            .context
            .get(i)
            .is_some_and(|(m, _)| m.role == Role::Assistant && m.tool_calls.is_empty())
    };
    match keep {
        0 => 0,
        k if is_confirm(k - 1) => k - 1,
        k if k >= 2 && text_answer(k - 1) && is_confirm(k - 2) => k - 2,
        k => k,
    }
}

/// The prompt of session-level turn `turn_id`.
fn turn_prompt(events: &[StoredEvent], turn_id: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Started {
        #[serde(default)]
        turn_id: Option<String>,
        #[serde(default)]
        prompt: String,
    }
    events
        .iter()
        .rev()
        .filter_map(|e| event_as::<Started>(e, "turn_started"))
        .find(|t| t.turn_id.as_deref() == Some(turn_id))
        .map(|t| t.prompt)
}

/// The todo list as the last `todo_updated` left it.
fn last_todos(events: &[StoredEvent]) -> Option<Vec<amber_proto::Todo>> {
    #[derive(serde::Deserialize)]
    struct TodoEvent {
        #[serde(default)]
        todos: Vec<amber_proto::Todo>,
    }
    events
        .iter()
        .rev()
        .find_map(|e| event_as::<TodoEvent>(e, "todo_updated"))
        .map(|t| t.todos)
}

/// The session's running usage total, as the last `usage` event reported it.
fn last_usage_total(events: &[StoredEvent]) -> Option<Usage> {
    #[derive(serde::Deserialize)]
    struct UsageEvent {
        total: Usage,
    }
    events
        .iter()
        .rev()
        .find_map(|e| event_as::<UsageEvent>(e, "usage"))
        .map(|u| u.total)
}

/// What the calls of turn `turn_id` (its sub-agents' included) used, from its `usage`
/// events: the interrupted turn's `turn_completed.usage`, as a finished turn would report.
fn turn_usage(events: &[StoredEvent], turn_id: &str) -> Usage {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct UsageEvent {
        #[serde(default)]
        turn_id: Option<String>,
        usage: Usage,
    }
    let mut spent = Usage::default();
    for call in events
        .iter()
        .filter_map(|e| event_as::<UsageEvent>(e, "usage"))
    {
        if call.turn_id.as_deref() == Some(turn_id) {
            spent.add(&call.usage);
        }
    }
    spent
}

/// The prompt of the session's first turn (sub-agents' turns are tagged and skipped).
fn first_prompt(events: &[StoredEvent]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Started {
        /// The envelope's sub-agent tag.
        #[serde(default)]
        agent: Option<String>,
        #[serde(default)]
        prompt: String,
    }
    events
        .iter()
        .filter_map(|e| event_as::<Started>(e, "turn_started"))
        .find(|t| t.agent.is_none())
        .map(|t| t.prompt)
}

/// `event` read as `T` when its type is `kind` (a text search first: most events are not).
fn event_as<T: serde::de::DeserializeOwned>(event: &StoredEvent, kind: &str) -> Option<T> {
    #[derive(serde::Deserialize)]
    struct Typed<T> {
        #[serde(rename = "type")]
        kind: String,
        #[serde(flatten)]
        body: T,
    }
    let json = event.json.get();
    if !json.contains(kind) {
        return None;
    }
    serde_json::from_str::<Typed<T>>(json)
        .ok()
        .filter(|t| t.kind == kind)
        .map(|t| t.body)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_interrupted_turn_reports_what_its_calls_used() {
        let usage = |p: u64| serde_json::json!({"promptTokens": p, "completionTokens": 1, "cachedTokens": 0, "totalTokens": p + 1});
        let events: Vec<StoredEvent> = [
            serde_json::json!({"type": "usage", "turnId": "t0", "usage": usage(1000), "total": usage(1000)}),
            serde_json::json!({"type": "turn_started", "turnId": "t1", "prompt": "p"}),
            serde_json::json!({"type": "usage", "turnId": "t1", "usage": usage(100), "total": usage(1100)}),
            serde_json::json!({"type": "usage", "turnId": "t1", "agent": "a1", "agentId": "a1", "usage": usage(10), "total": usage(1110)}),
        ]
        .iter()
        .enumerate()
        .map(|(i, e)| StoredEvent {
            seq: i as u64 + 1,
            json: serde_json::value::to_raw_value(e).unwrap(),
        })
        .collect();
        let got = turn_usage(&events, "t1");
        assert_eq!(
            (got.prompt_tokens, got.completion_tokens, got.total_tokens),
            (110, 2, 112)
        );
        assert_eq!(turn_usage(&events, "t2"), Usage::default());
    }

    fn loaded(context: Vec<Message>, confirm_at: Option<usize>, prompt: &str) -> Loaded {
        let info: amber_proto::SessionInfo = serde_json::from_value(serde_json::json!({
            "sessionId": "s", "cwd": "/", "mode": "write", "model": "m", "title": "",
            "state": "idle", "createdAt": "1", "updatedAt": "1",
            "usage": Usage::default(),
        }))
        .unwrap();
        let started = serde_json::json!({"type": "turn_started", "turnId": "t", "prompt": prompt});
        Loaded {
            meta: amber_store::SessionMeta {
                info,
                system_prompt: "sys".into(),
            },
            events: vec![StoredEvent {
                seq: 1,
                json: serde_json::value::to_raw_value(&started).unwrap(),
            }],
            context: context.into_iter().map(|m| (m, 0)).collect(),
            repaired_tail: false,
            confirm_at,
        }
    }

    #[test]
    fn only_an_unanswered_confirm_exchange_of_the_interrupted_turn_is_dropped() {
        let sys = Message::system("sys");
        let asked = || Message::user(CONFIRM_PROMPT);
        let reply = Message::assistant("done it", Vec::new());
        // Tagged: dropped whatever the text.
        let tagged = vec![
            sys.clone(),
            Message::user("go"),
            reply.clone(),
            Message::user("q"),
        ];
        assert_eq!(
            without_confirm(&loaded(tagged.clone(), Some(3), "go"), 4, Some("t")),
            3
        );
        assert_eq!(
            without_confirm(&loaded(tagged, None, "go"), 4, Some("t")),
            4
        );
        // Untagged (an older log): by text, with a text answer after it.
        let legacy = vec![
            sys.clone(),
            Message::user("go"),
            reply.clone(),
            asked(),
            reply.clone(),
        ];
        assert_eq!(
            without_confirm(&loaded(legacy.clone(), None, "go"), 5, Some("t")),
            3
        );
        // Not when no turn was interrupted, nor when the user typed that text as the prompt.
        assert_eq!(without_confirm(&loaded(legacy, None, "go"), 5, None), 5);
        let typed = vec![sys, asked()];
        assert_eq!(
            without_confirm(&loaded(typed, None, CONFIRM_PROMPT), 2, Some("t")),
            2
        );
    }
}
