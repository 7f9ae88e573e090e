//! One session this ACP client follows: its amberd event stream turned into `session/update`
//! notifications (and approvals into permission requests), and the prompts waiting for
//! their turn to end. A turn may end before its prompt's waiter is registered (the prompt
//! call returns after the turn started), so the ends of unclaimed turns are kept for a while.
//!
//! `session/load` shows the history through the same mapping as live traffic: it subscribes
//! from the first durable event, as amber's TUI does (the events, not the model's compacted
//! messages, hold every tool call with its diff), and reads up to `synced` before the request
//! answers. Only what is live by nature differs in the history: the prompt of each turn is
//! shown (live, the editor sent it), approvals already answered are not asked, and a turn's
//! end sends no `usage_update` (one follows the load).

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use amber_client::{Client, EventStream};
use amber_proto::{Approval, CostUsd, Decision, Event, EventKind, Role, Usage};
use futures::StreamExt;
use serde_json::Value;
use tokio::sync::oneshot;

use super::Bridge;
use super::permissions;
use super::updates;
use super::usage;
use super::wire::RpcError;

/// How a turn ended, as `session/prompt` answers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Ended {
    /// ACP's stop reason.
    pub stop: &'static str,
    /// A last agent message saying why, for the ends ACP has no reason for.
    pub note: Option<String>,
    /// What the turn's requests used.
    pub usage: Usage,
}

pub(crate) type TurnEnd = Result<Ended, RpcError>;

/// Ends of turns nobody waited for yet, kept at most this many.
const KEPT_ENDS: usize = 64;

/// Where a follower's subscription starts, and what it shows of the past.
pub(crate) enum Start {
    /// Live traffic only (`session/new`, `session/fork`).
    Live,
    /// After the snapshot's `seq`, asking the approvals that were waiting then
    /// (`session/resume`: no history, and no question left unasked).
    After { seq: u64, waiting: Vec<Approval> },
    /// Every durable event, shown as history (`session/load`).
    History,
}

pub(crate) struct Followed {
    turns: Mutex<Turns>,
}

#[derive(Default)]
struct Turns {
    waiting: HashMap<String, oneshot::Sender<TurnEnd>>,
    ended: HashMap<String, TurnEnd>,
    ended_order: VecDeque<String>,
    /// The event stream ended: every later waiter gets this.
    closed: Option<RpcError>,
}

impl Followed {
    /// Subscribes to the session through `client` and follows it. Returns once the
    /// subscription is synced: the history (for [`Start::History`]) is then out.
    pub(crate) async fn start(
        bridge: Arc<Bridge>,
        client: Client,
        session_id: String,
        cwd: PathBuf,
        start: Start,
    ) -> Result<Arc<Followed>, RpcError> {
        let (after_seq, history, waiting) = match start {
            Start::Live => (None, false, Vec::new()),
            Start::After { seq, waiting } => (Some(seq), false, waiting),
            Start::History => (Some(0), true, Vec::new()),
        };
        let events = client.subscribe(&session_id, after_seq).await?;
        let followed = Arc::new(Followed {
            turns: Mutex::default(),
        });
        let mut follower = Follower {
            bridge: bridge.clone(),
            client,
            followed: followed.clone(),
            session_id: session_id.clone(),
            cwd,
            seen: Seen {
                history,
                ask: true,
                waiting,
                ..Seen::default()
            },
        };
        let events = follower.until_synced(events).await?;
        if let Ok(mut sessions) = bridge.sessions.lock() {
            sessions.insert(session_id, followed.clone());
        }
        tokio::spawn(follower.follow(events));
        Ok(followed)
    }

    /// Waits for turn `turn_id` to end.
    pub(crate) async fn wait_turn(&self, turn_id: &str) -> TurnEnd {
        let rx = {
            let Ok(mut turns) = self.turns.lock() else {
                return Err(RpcError::internal("session state poisoned"));
            };
            if let Some(end) = turns.ended.remove(turn_id) {
                return end;
            }
            if let Some(e) = &turns.closed {
                return Err(e.clone());
            }
            let (tx, rx) = oneshot::channel();
            turns.waiting.insert(turn_id.to_owned(), tx);
            rx
        };
        rx.await
            .unwrap_or_else(|_| Err(RpcError::internal("lost the session's events")))
    }

    fn turn_ended(&self, turn_id: &str, end: TurnEnd) {
        let Ok(mut turns) = self.turns.lock() else {
            return;
        };
        match turns.waiting.remove(turn_id) {
            Some(tx) => {
                let _ = tx.send(end);
            }
            None => {
                turns.ended.insert(turn_id.to_owned(), end);
                turns.ended_order.push_back(turn_id.to_owned());
                while turns.ended_order.len() > KEPT_ENDS {
                    if let Some(old) = turns.ended_order.pop_front() {
                        turns.ended.remove(&old);
                    }
                }
            }
        }
    }

    fn close(&self, error: RpcError) {
        let Ok(mut turns) = self.turns.lock() else {
            return;
        };
        for (_, tx) in turns.waiting.drain() {
            let _ = tx.send(Err(error.clone()));
        }
        turns.closed = Some(error);
    }
}

/// Shows the history of a session this client already follows (loaded again): every
/// durable event up to `synced`, then the subscription ends — the follower already running
/// goes on with the live traffic and the questions.
pub(crate) async fn replay(
    bridge: Arc<Bridge>,
    client: Client,
    session_id: String,
    cwd: PathBuf,
) -> Result<(), RpcError> {
    let events = client.subscribe(&session_id, Some(0)).await?;
    let mut follower = Follower {
        bridge,
        client,
        followed: Arc::new(Followed {
            turns: Mutex::default(),
        }),
        session_id,
        cwd,
        seen: Seen {
            history: true,
            ask: false,
            ..Seen::default()
        },
    };
    let events = follower.until_synced(events).await?;
    if let Err(e) = events.unsubscribe().await {
        tracing::debug!("acp: session/unsubscribe: {e}");
    }
    Ok(())
}

/// An approval we asked the client about: its call, and our request's id.
struct Asking {
    call_id: String,
    rpc_id: u64,
}

/// A tool call seen starting: what its end needs to describe it.
struct Call {
    name: String,
    arguments: Value,
}

/// What the follower remembers of the stream so far.
#[derive(Default)]
struct Seen {
    /// Reading the history (before `synced`, from the first event).
    history: bool,
    /// Ask the approvals still waiting at `synced` (not when another follower does).
    ask: bool,
    /// Tool calls started and not completed, by call id.
    calls: HashMap<String, Call>,
    /// Approvals asked of the client, by amber's request id.
    approvals: HashMap<String, Asking>,
    /// Approvals requested before `synced` and not resolved since: asked at `synced`.
    waiting: Vec<Approval>,
    /// Bytes of each assistant message shown so far (its deltas, or the `synced` text), by
    /// item id: its `message_completed` shows whatever of the text was not (the deltas sent
    /// while the editor was loading the session are gone, the completed text is not).
    shown: HashMap<String, usize>,
}

/// The task that turns one subscription's events into the client's updates.
struct Follower {
    bridge: Arc<Bridge>,
    /// The connection subscribed on (approvals are answered on it).
    client: Client,
    followed: Arc<Followed>,
    session_id: String,
    cwd: PathBuf,
    seen: Seen,
}

impl Follower {
    /// Handles events up to and including `synced`; the stream, for what follows.
    async fn until_synced(&mut self, mut events: EventStream) -> Result<EventStream, RpcError> {
        loop {
            let event = match events.next().await {
                Some(Ok(event)) => event,
                Some(Err(e)) => {
                    return Err(RpcError::internal(format!(
                        "lost the session's events: {e}"
                    )));
                }
                None => return Err(RpcError::internal("the session's events ended")),
            };
            let synced = matches!(event.kind, EventKind::Synced { .. });
            self.on_event(event).await;
            if synced {
                return Ok(events);
            }
        }
    }

    async fn follow(mut self, mut events: EventStream) {
        let error = loop {
            let event = match events.next().await {
                Some(Ok(event)) => event,
                Some(Err(e)) => {
                    break RpcError::internal(format!("lost the session's events: {e}"));
                }
                None => break RpcError::internal("the session's events ended"),
            };
            self.on_event(event).await;
        };
        tracing::warn!("acp: session {}: {}", self.session_id, error.message);
        self.followed.close(error);
        // Unless a newer follower of the session took its place.
        if let Ok(mut sessions) = self.bridge.sessions.lock()
            && sessions
                .get(&self.session_id)
                .is_some_and(|f| Arc::ptr_eq(f, &self.followed))
        {
            sessions.remove(&self.session_id);
        }
    }

    fn update(&self, update: Value) {
        self.bridge.update(&self.session_id, update);
    }

    #[deny(clippy::wildcard_enum_match_arm)] // a new event kind is a decision here
    async fn on_event(&mut self, event: Event) {
        // A sub-agent's own stream stays inside its `task` call.
        if event.agent_id.is_some() {
            return;
        }
        let turn_id = event.turn_id;
        match event.kind {
            // Live, the editor sent the prompt and shows it already.
            EventKind::TurnStarted { prompt } if self.seen.history => {
                self.update(updates::chunk("user_message_chunk", &prompt));
            }
            EventKind::MessageDelta { item_id, delta } => {
                *self.seen.shown.entry(item_id).or_default() += delta.len();
                self.update(updates::chunk("agent_message_chunk", &delta));
            }
            EventKind::MessageCompleted {
                item_id,
                role: Role::Assistant,
                text,
            } => {
                let done = self.seen.shown.remove(&item_id).unwrap_or(0);
                if let Some(rest) = text.get(done..).filter(|rest| !rest.is_empty()) {
                    self.update(updates::chunk("agent_message_chunk", rest));
                }
            }
            EventKind::ReasoningDelta { delta, .. } => {
                self.update(updates::chunk("agent_thought_chunk", &delta));
            }
            EventKind::ToolCallStarted {
                call_id,
                name,
                arguments,
                ..
            } => {
                self.update(updates::tool_call(&call_id, &name, &arguments, &self.cwd));
                self.seen.calls.insert(call_id, Call { name, arguments });
            }
            // Asked once the history is read, if nobody answered it meanwhile.
            EventKind::ApprovalRequested(asked) if self.seen.history => {
                self.seen.waiting.push(asked);
            }
            EventKind::ApprovalRequested(asked) => self.ask(asked),
            EventKind::ApprovalResolved {
                request_id,
                decision,
                ..
            } => {
                let before = self.seen.waiting.len();
                let mut call_id = None;
                self.seen.waiting.retain(|a| {
                    let this = a.request_id == request_id;
                    if this {
                        call_id = Some(a.call_id.clone());
                    }
                    !this
                });
                if self.seen.waiting.len() == before
                    && let Some(asking) = self.seen.approvals.remove(&request_id)
                {
                    // Answered by another client (or by policy): the client's question is moot.
                    self.bridge.withdraw(asking.rpc_id);
                    call_id = Some(asking.call_id);
                }
                if let Some(call_id) = call_id
                    && decision != Decision::Deny
                {
                    self.update(updates::tool_running(&call_id));
                }
            }
            EventKind::ToolCallCompleted {
                call_id,
                status,
                output,
                diff,
                ..
            } => {
                let call = self.seen.calls.remove(&call_id);
                let (name, args) = match &call {
                    Some(c) => (c.name.as_str(), &c.arguments),
                    None => ("", &Value::Null),
                };
                self.update(updates::tool_done(
                    &call_id,
                    name,
                    args,
                    &self.cwd,
                    status,
                    &output,
                    diff.as_deref(),
                ));
            }
            EventKind::TodoUpdated { todos } => self.update(updates::plan(&todos)),
            // Loaded mid-reply: what streamed before the editor came, then the live deltas.
            EventKind::Synced { in_progress, .. } => {
                for item in in_progress.iter().filter(|i| !i.text.is_empty()) {
                    let kind = match item.kind {
                        amber_proto::StreamKind::Message => {
                            *self.seen.shown.entry(item.item_id.clone()).or_default() +=
                                item.text.len();
                            "agent_message_chunk"
                        }
                        amber_proto::StreamKind::Reasoning => "agent_thought_chunk",
                    };
                    self.update(updates::chunk(kind, &item.text));
                }
                self.seen.history = false;
                let waiting = std::mem::take(&mut self.seen.waiting);
                if self.seen.ask {
                    for asked in waiting {
                        self.ask(asked);
                    }
                }
            }
            // A past turn's end: nobody waits for it, and the load sends the usage once.
            EventKind::TurnCompleted { .. } if self.seen.history => {}
            EventKind::TurnCompleted {
                stop_reason,
                error,
                usage,
                session_cost_usd,
                ..
            } => {
                // Before the prompt answers: the editor shows the turn's cost with its end.
                self.send_usage(session_cost_usd).await;
                if let Some(turn_id) = turn_id {
                    let end = updates::stop_reason(stop_reason, error.as_ref())
                        .map(|(stop, note)| Ended { stop, note, usage });
                    self.followed.turn_ended(&turn_id, end);
                }
            }
            EventKind::PromptQueued { .. }
            | EventKind::TurnStarted { .. }
            | EventKind::MessageCompleted { .. }
            | EventKind::ToolOutputDelta { .. }
            | EventKind::Retrying { .. }
            | EventKind::Steer { .. }
            | EventKind::CompactionStarted { .. }
            | EventKind::CompactionCompleted { .. }
            | EventKind::CompactionFailed { .. }
            | EventKind::Usage { .. }
            | EventKind::SubagentStarted { .. }
            | EventKind::SubagentCompleted { .. }
            | EventKind::McpStatus(_)
            | EventKind::Error { .. }
            | EventKind::Rewound { .. }
            | EventKind::HookFailed { .. }
            | EventKind::EnvironmentConnected { .. }
            | EventKind::EnvironmentLost { .. }
            | EventKind::EnvironmentResumed { .. }
            | EventKind::FleetChanged { .. }
            | EventKind::FleetSetup { .. }
            | EventKind::FleetPushed { .. }
            | EventKind::MessageSent { .. }
            | EventKind::MessageReceived { .. }
            | EventKind::GoalSet { .. }
            | EventKind::GoalCheck { .. }
            | EventKind::GoalMet { .. }
            | EventKind::SubagentQueued { .. }
            | EventKind::BudgetWarning { .. }
            | EventKind::NetworkConnection(_)
            | EventKind::RoutineFinished { .. } => {}
        }
    }

    /// Asks the client about an approval, and answers amberd with its choice: an MCP
    /// server's form as `elicitation/create` to a client that renders forms, anything else
    /// as `session/request_permission`.
    fn ask(&mut self, asked: Approval) {
        let forms = self
            .bridge
            .elicits_forms
            .load(std::sync::atomic::Ordering::Relaxed);
        match permissions::form_params(&self.session_id, &asked).filter(|_| forms) {
            Some(params) => self.ask_client(asked, "elicitation/create", params, |answer| {
                permissions::form_answer(answer)
            }),
            None => {
                let params = permissions::request_params(&self.session_id, &asked, &self.cwd);
                self.ask_client(asked, "session/request_permission", params, |answer| {
                    (permissions::decision(answer), None)
                });
            }
        }
    }

    /// Sends the client `method` for `asked` (withdrawn if another client answers first),
    /// and answers amberd with what `read` makes of the client's answer.
    fn ask_client(
        &mut self,
        asked: Approval,
        method: &str,
        params: Value,
        read: impl FnOnce(&Result<Value, Value>) -> (Decision, Option<Value>) + Send + 'static,
    ) {
        let (rpc_id, answer) = self.bridge.ask(method, params);
        let request_id = asked.request_id;
        let call_id = asked.call_id;
        self.seen
            .approvals
            .insert(request_id.clone(), Asking { call_id, rpc_id });
        let client = self.client.clone();
        let session_id = self.session_id.clone();
        tokio::spawn(async move {
            // Withdrawn (answered elsewhere) or the bridge ended: nothing to say.
            let Some(answer) = answer.await else {
                return;
            };
            let (decision, content) = read(&answer);
            let params = amber_proto::ApprovalRespondParams {
                session_id,
                request_id: request_id.clone(),
                decision,
                feedback: None,
                content,
            };
            if let Err(e) = client
                .request::<amber_proto::methods::ApprovalRespond>(&params)
                .await
            {
                tracing::warn!("acp: approval/respond {request_id}: {e}");
            }
        });
    }

    async fn send_usage(&self, cost: Option<CostUsd>) {
        if let Some(update) = usage::now(&self.client, &self.session_id, cost).await {
            self.update(update);
        }
    }
}
