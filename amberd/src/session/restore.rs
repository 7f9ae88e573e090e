//! Bringing a session back from the store (on first use after a restart, or after it was
//! unloaded while idle), including crash recovery.
//!
//! **Invariants:** a restored session is `idle`; a turn that was running when the daemon
//! died ends with a durable `turn_completed{stopReason: "error", error.code: "interrupted"}`;
//! the context is cut back to its longest consistent prefix (never half a tool-call pair),
//! and the cut is written to the log as pops so the log keeps matching memory. Usage and
//! an empty title are taken from the log when it knows them (the metadata is saved after
//! a turn's events, so a crash can leave it one turn behind).

use std::sync::Arc;

use amber_proto::{ErrorInfo, EventKind, Message, SessionState, StopReason, Usage};

use super::build::{self, Parts};
use super::deps::Deps;
use super::hub::{EventHub, EventStore, MEMORY_TAIL, WireEvent};
use super::persist::Persistence;
use super::{SessionError, SessionHandle};
use crate::context::Context;
use crate::store::{Store, StoredEvent, consistent_context, interrupted_turn};

/// Loads session `id` from the store and starts it.
pub(super) fn load(
    deps: &Arc<Deps>,
    store: &Store,
    id: &str,
) -> Result<Arc<SessionHandle>, SessionError> {
    let store_err = |e: crate::store::StoreError| SessionError::Store(e.to_string());
    let loaded = store.load(id).map_err(store_err)?;
    if loaded.repaired_tail {
        tracing::warn!(
            session = id,
            "dropped a torn record at the end of the session log"
        );
    }
    let interrupted = interrupted_turn(&loaded);
    let mut log = store.open_log(id).map_err(store_err)?;
    let keep = consistent_context(&loaded.context);
    for _ in keep..loaded.context.len() {
        // Half a tool-call pair from a crash: drop it for good.
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

    let todos = last_todos(&loaded.events);
    let usage = last_usage_total(&loaded.events);
    let first_prompt = first_prompt(&loaded.events);
    let last_seq = loaded.events.last().map_or(0, |e| e.seq);
    let skip = loaded.events.len().saturating_sub(MEMORY_TAIL);
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
    .with_memory(deps.config.sessions.memory_events);
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
        handle.shared.hub.publish(
            Some(&turn_id),
            EventKind::TurnCompleted {
                stop_reason: StopReason::Error,
                error: Some(ErrorInfo {
                    code: "interrupted".into(),
                    message: "the daemon stopped while this turn was running".into(),
                }),
                usage: Usage::default(),
            },
        );
    }
    handle.shared.save_meta();
    Ok(handle)
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
