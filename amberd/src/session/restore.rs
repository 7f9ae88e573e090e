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

use std::path::PathBuf;
use std::sync::Arc;

use amber_proto::{
    ErrorInfo, EventKind, Message, Role, SessionInfo, SessionState, StopReason, Todo, Usage,
};
use amber_store::context::Context;
use amber_store::{
    Closing, Loaded, QueuedPrompt, SessionLog, Store, StoreError, StoredEvent, closing_events,
    consistent_context, first_prompt, interrupted_turn, last_todos, last_usage_total,
    queued_prompts, turn_prompt, turn_usage, turn_went_past_waiting,
};

use super::build::{self, Parts};
use super::hub::{EventHub, EventStore, WireEvent};
use super::persist::Persistence;
use super::services::Services;
use super::{SessionError, SessionHandle};
use crate::agent::prompt::CONFIRM_PROMPT;
use crate::elide::WireLimits;

/// Loads session `id` from the store and starts it.
pub(super) fn load(
    services: &Arc<Services>,
    store: &Store,
    id: &str,
) -> Result<Arc<SessionHandle>, SessionError> {
    let loaded = load_or_salvage(store, id)?;
    // Read now: the events go to the hub below.
    let recap = Recap::of(&loaded);
    let mut log = store.open_log(id).map_err(store_err)?;
    let keep = trim_context(&loaded, recap.interrupted_turn(), &mut log)?;
    let persistence = Persistence::new(store.clone(), id.to_owned(), log);
    let Loaded {
        meta,
        events,
        context,
        ..
    } = loaded;
    let context = rebuild_context(id, context, keep, &meta.system_prompt, &persistence);
    let delivered = delivered_ids(&events, &context);
    let hub = restored_hub(services, id, events, persistence.clone());
    let meta = amber_store::SessionMeta {
        info: restored_info(meta.info, &recap),
        ..meta
    };
    let handle = build::spawn(
        services,
        Parts {
            workspace: PathBuf::from(&meta.info.cwd),
            meta,
            context,
            hub,
            persistence: Some(persistence),
        },
        true,
    );
    handle.shared.seed_delivered(delivered);
    settle(services, &handle, recap);
    Ok(handle)
}

/// The results already delivered into the conversation (`agent::delivery`): the calls that
/// carried them, as the events record them (they outlive a `/clear` or a compaction) and
/// as the context has them (a crash may come between the push and the event).
fn delivered_ids(events: &[amber_store::StoredEvent], context: &Context) -> Vec<String> {
    let prefix = crate::agent::delivery::DELIVERY_CALL_PREFIX;
    let from_context = context
        .messages()
        .iter()
        .filter_map(|m| m.tool_call_id.as_deref())
        .filter(|id| id.starts_with(prefix))
        .map(str::to_owned);
    amber_store::completed_calls_with_prefix(events, prefix)
        .into_iter()
        .chain(from_context)
        .filter_map(|call| crate::agent::delivery::delivery_id(&call).map(str::to_owned))
        .collect()
}

fn store_err(err: StoreError) -> SessionError {
    SessionError::Store(err)
}

/// The session as the store has it. Damage in the middle of the log is salvaged first:
/// keep what comes before it rather than lose the session.
fn load_or_salvage(store: &Store, id: &str) -> Result<Loaded, SessionError> {
    let loaded = match store.load(id) {
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
    Ok(loaded)
}

/// What the log's events tell restore to do.
struct Recap {
    interrupted: Option<Interrupted>,
    /// Prompts acknowledged before the restart whose turn never began, in queue order.
    waiting: Vec<QueuedPrompt>,
    todos: Option<Vec<Todo>>,
    /// The session's usage total, when the log reports one.
    usage: Option<Usage>,
    /// The prompt of the session's first turn.
    first_prompt: Option<String>,
}

/// The turn that was running when the daemon stopped.
struct Interrupted {
    turn_id: String,
    /// Ends of the calls, sub-agents and approvals it left open, innermost first.
    closing: Vec<Closing>,
    /// What its calls used: its `turn_completed.usage`.
    usage: Usage,
    /// Its prompt, when it never went past waiting (a fleet session's turn waiting for a
    /// runner): it runs again under its own turn id.
    rerun: Option<String>,
}

impl Recap {
    fn of(loaded: &Loaded) -> Recap {
        let events = &loaded.events;
        let interrupted = interrupted_turn(loaded).map(|turn_id| Interrupted {
            closing: closing_events(events, &turn_id),
            usage: turn_usage(events, &turn_id),
            rerun: waiting_only(loaded, &turn_id),
            turn_id,
        });
        Recap {
            interrupted,
            waiting: queued_prompts(events),
            todos: last_todos(events),
            usage: last_usage_total(events),
            first_prompt: first_prompt(events),
        }
    }

    fn interrupted_turn(&self) -> Option<&str> {
        self.interrupted.as_ref().map(|turn| turn.turn_id.as_str())
    }
}

/// How many messages of the loaded context stay: its longest consistent prefix, less the
/// confirm exchange an interrupted turn left. The rest is popped in the log too, so the
/// log keeps matching memory.
fn trim_context(
    loaded: &Loaded,
    interrupted: Option<&str>,
    log: &mut SessionLog,
) -> Result<usize, SessionError> {
    let keep = consistent_context(&loaded.context);
    let keep = without_confirm(loaded, keep, interrupted);
    for _ in keep..loaded.context.len() {
        // Half a tool-call pair or the confirm exchange from a crash: drop it for good.
        log.append_pop(false).map_err(store_err)?;
    }
    Ok(keep)
}

/// The first `keep` stored links as the session's context, journaled from now on, with
/// the system prompt first when nothing is left.
fn rebuild_context(
    id: &str,
    links: Vec<(Message, u64)>,
    keep: usize,
    system_prompt: &str,
    persistence: &Arc<Persistence>,
) -> Context {
    let links: Vec<(Message, u64)> = links.into_iter().take(keep).collect();
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
    if context.is_empty() {
        context.push(Message::system(system_prompt));
    }
    context
}

/// The session's hub, continuing after the log's last seq with the newest
/// `[sessions] memory_events` events in memory; replays reaching further back read the log.
fn restored_hub(
    services: &Services,
    id: &str,
    events: Vec<StoredEvent>,
    persistence: Arc<Persistence>,
) -> EventHub {
    let memory = services.live().config.sessions.memory_events;
    let last_seq = events.last().map_or(0, |e| e.seq);
    // Only the events the hub keeps are copied into wire events.
    let skip = events.len().saturating_sub(memory);
    let tail: Vec<WireEvent> = events
        .into_iter()
        .skip(skip)
        .map(|e| WireEvent {
            seq: Some(e.seq),
            json: Arc::from(e.json),
        })
        .collect();
    EventHub::restored(
        id.to_owned(),
        services.live().config.server.subscriber_buffer,
        memory,
        last_seq,
        tail,
        Some(persistence as Arc<dyn EventStore>),
    )
    .with_limits(WireLimits::from_config(&services.live().config.server))
}

/// The session's info as restored: idle, and with the usage and an empty title taken from
/// the log when it knows them (the metadata is saved after a turn's events: after a crash
/// the log may know more).
fn restored_info(mut info: SessionInfo, recap: &Recap) -> SessionInfo {
    info.state = SessionState::Idle;
    if let Some(total) = recap.usage {
        info.usage = total;
    }
    if info.title.is_empty()
        && let Some(prompt) = &recap.first_prompt
    {
        info.title = super::title_of(prompt);
    }
    info
}

/// The prompt of turn `turn_id`, when the turn never went past waiting and its prompt is
/// not in the conversation yet: it can run again as if it had not begun.
fn waiting_only(loaded: &Loaded, turn_id: &str) -> Option<String> {
    if turn_went_past_waiting(&loaded.events, turn_id) {
        return None;
    }
    let prompt = turn_prompt(&loaded.events, turn_id)?;
    let pushed = loaded
        .context
        .last()
        .is_some_and(|(message, _)| message.role == Role::User && message.content == prompt);
    (!pushed).then_some(prompt)
}

/// What the restart left to do once the session runs: its todo list back, the interrupted
/// turn ended, then the prompts waiting behind it, the busy marker and the metadata.
fn settle(services: &Services, handle: &SessionHandle, recap: Recap) {
    if let Some(todos) = recap.todos {
        handle.shared.tools.restore_todos(todos);
    }
    let resume = services.live().config.sessions.resume_queued;
    let info = handle.shared.info();
    let waits = services.features.iter().any(|f| f.turns_wait(&info));
    match recap.interrupted {
        // It only waited (for a runner): it runs again, first, under its own id.
        Some(Interrupted {
            turn_id,
            rerun: Some(prompt),
            ..
        }) if resume && waits => {
            tracing::info!(session = %handle.shared.id, turn = %turn_id, "running again a turn that was still waiting when the daemon stopped");
            handle.requeue_prompt(turn_id, prompt);
        }
        Some(turn) => end_interrupted(handle, turn),
        None => {}
    }
    // After the interrupted turn's end: prompts acknowledged behind it come next.
    settle_queued(services, handle, recap.waiting);
    // A crash's marker with nothing left to run (or the prompts ended as cancelled) goes.
    handle.shared.settle_marker();
    handle.shared.save_meta();
}

/// Ends the turn the daemon was running when it stopped: what it left open first, then its
/// durable `turn_completed{error: interrupted}`.
fn end_interrupted(handle: &SessionHandle, turn: Interrupted) {
    let Interrupted {
        turn_id,
        closing,
        usage,
        ..
    } = turn;
    tracing::warn!(session = %handle.shared.id, turn = %turn_id, "ending a turn the daemon was running when it stopped");
    let hub = &handle.shared.hub;
    let session_cost_usd = handle.shared.info().usage.cost_usd;
    for item in closing {
        hub.publish_as(Some(&turn_id), item.agent.as_deref(), item.kind);
    }
    hub.publish(
        Some(&turn_id),
        EventKind::TurnCompleted {
            stop_reason: StopReason::Error,
            error: Some(ErrorInfo::new(
                "interrupted",
                "the daemon stopped while this turn was running",
            )),
            usage,
            output: None,
            cost_usd: usage.cost_usd,
            session_cost_usd,
            confirm_usage: None,
        },
    );
}

/// Prompts acknowledged before the restart whose turn never began: run again in order with
/// their own turn ids, or (`[sessions] resume_queued = false`) each ended as cancelled.
/// Either way every acknowledged `turnId` gets its `turn_completed`.
fn settle_queued(services: &Services, handle: &SessionHandle, waiting: Vec<QueuedPrompt>) {
    if waiting.is_empty() {
        return;
    }
    let resume = services.live().config.sessions.resume_queued;
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
                    error: Some(ErrorInfo::new(
                        "not_resumed",
                        "the daemon restarted before this prompt's turn began \
                         ([sessions] resume_queued = false)",
                    )),
                    usage: Usage::default(),
                    output: None,
                    cost_usd: None,
                    session_cost_usd: None,
                    confirm_usage: None,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn info(id: &str) -> SessionInfo {
        serde_json::from_value(serde_json::json!({
            "sessionId": id, "cwd": "/", "mode": "write", "model": "m", "title": "",
            "state": "idle", "createdAt": "1", "updatedAt": "1",
            "usage": Usage::default(),
        }))
        .unwrap()
    }

    /// Durable event `seq` of turn `turn`, as the hub stores it.
    fn stored(seq: u64, turn: &str, kind: EventKind) -> StoredEvent {
        let event = amber_proto::Event {
            seq: Some(seq),
            session_id: "s".into(),
            turn_id: Some(turn.into()),
            agent_id: None,
            time: "2026-01-01T00:00:00.000Z".into(),
            kind,
        };
        StoredEvent {
            seq,
            json: serde_json::value::to_raw_value(&event).unwrap(),
        }
    }

    fn loaded(context: Vec<Message>, confirm_at: Option<usize>, prompt: &str) -> Loaded {
        let started = EventKind::TurnStarted {
            prompt: prompt.into(),
        };
        Loaded {
            meta: amber_store::SessionMeta {
                info: info("s"),
                system_prompt: "sys".into(),
                agent: None,
                sandbox: None,
                mcp_servers: Vec::new(),
                executor: None,
                model_follows_config: false,
            },
            events: vec![stored(1, "t", started)],
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

    #[tokio::test]
    async fn a_reloaded_session_keeps_the_configured_number_of_events_in_memory() {
        // (memory_events, the oldest seq still served)
        for (memory_events, oldest) in [(6000, 1), (100, 4901)] {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(dir.path()).unwrap();
            let mut config = crate::config::Config::default();
            config.sessions.memory_events = memory_events;
            let mut services = Services::new(config, &|_| None, dir.path().to_owned()).unwrap();
            services.store = Some(store.clone());
            let meta = amber_store::SessionMeta {
                info: info("s"),
                system_prompt: "sys".into(),
                agent: None,
                sandbox: None,
                model_follows_config: false,
                mcp_servers: Vec::new(),
                executor: None,
            };
            let mut log = store.create(&meta).unwrap();
            for seq in 1..=5000 {
                let kind = EventKind::MessageCompleted {
                    item_id: format!("item_{seq}"),
                    role: Role::Assistant,
                    text: "done".into(),
                };
                log.append_event(seq, &stored(seq, "t", kind).json, false)
                    .unwrap();
            }
            drop(log);
            let handle = load(&Arc::new(services), &store, "s").unwrap();
            // The log gone, a replay from the start serves only what memory holds.
            let log_path = store.sessions_dir().join("s").join("log");
            std::fs::rename(&log_path, dir.path().join("moved")).unwrap();
            let replay = handle.shared.hub.subscribe(Some(0)).replay;
            let seqs: Vec<u64> = replay.iter().map(|e| e.seq.unwrap()).collect();
            assert!(
                seqs.iter().copied().eq(oldest..=5000),
                "memory_events = {memory_events}: served {} events, from seq {:?}",
                seqs.len(),
                seqs.first()
            );
            handle.shared.hub.close();
        }
    }
}
