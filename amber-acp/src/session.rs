//! One session this ACP client follows: a task reading its amberd event stream and
//! turning each event into `session/update` notifications (and approvals into permission
//! requests), and the prompts waiting for their turn to end. A turn may end before its
//! prompt's waiter is registered (the prompt call returns after the turn started), so the
//! ends of unclaimed turns are kept for a while.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use amber_client::EventStream;
use amber_proto::{Decision, Event, EventKind, Message, Role};
use futures::StreamExt;
use serde_json::Value;
use tokio::sync::oneshot;

use super::Bridge;
use super::permissions;
use super::updates;
use super::wire::RpcError;

/// How a turn ended, as `session/prompt` answers: ACP's stop reason and a last note.
pub(crate) type TurnEnd = Result<(&'static str, Option<String>), RpcError>;

/// Ends of turns nobody waited for yet, kept at most this many.
const KEPT_ENDS: usize = 64;

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
    /// Subscribes to the session (from `after_seq`, else live) and follows it.
    pub(crate) async fn start(
        bridge: Arc<Bridge>,
        session_id: String,
        cwd: PathBuf,
        after_seq: Option<u64>,
    ) -> Result<Arc<Followed>, RpcError> {
        let events = bridge.client.subscribe(&session_id, after_seq).await?;
        let followed = Arc::new(Followed {
            turns: Mutex::default(),
        });
        if let Ok(mut sessions) = bridge.sessions.lock() {
            sessions.insert(session_id.clone(), followed.clone());
        }
        let f = followed.clone();
        tokio::spawn(async move { follow(bridge, f, session_id, cwd, events).await });
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
    /// Tool calls started and not completed, by call id.
    calls: HashMap<String, Call>,
    /// Approvals asked of the client, by amber's request id.
    approvals: HashMap<String, Asking>,
    /// Bytes of each assistant message shown so far (its deltas, or the `synced` text), by
    /// item id: its `message_completed` shows whatever of the text was not (the deltas sent
    /// while the editor was loading the session are gone, the completed text is not).
    shown: HashMap<String, usize>,
}

async fn follow(
    bridge: Arc<Bridge>,
    followed: Arc<Followed>,
    session_id: String,
    cwd: PathBuf,
    mut events: EventStream,
) {
    let mut seen = Seen::default();
    let error = loop {
        let event = match events.next().await {
            Some(Ok(event)) => event,
            Some(Err(e)) => break RpcError::internal(format!("lost the session's events: {e}")),
            None => break RpcError::internal("the session's events ended"),
        };
        on_event(&bridge, &followed, &session_id, &cwd, event, &mut seen);
    };
    tracing::warn!("acp: session {session_id}: {}", error.message);
    followed.close(error);
    if let Ok(mut sessions) = bridge.sessions.lock() {
        sessions.remove(&session_id);
    }
}

#[deny(clippy::wildcard_enum_match_arm)] // a new event kind is a decision here
fn on_event(
    bridge: &Arc<Bridge>,
    followed: &Followed,
    session_id: &str,
    cwd: &Path,
    event: Event,
    seen: &mut Seen,
) {
    let Seen {
        calls,
        approvals,
        shown,
    } = seen;
    // A sub-agent's own stream stays inside its `task` call.
    if event.agent_id.is_some() {
        return;
    }
    let turn_id = event.turn_id;
    match event.kind {
        EventKind::MessageDelta { item_id, delta } => {
            *shown.entry(item_id).or_default() += delta.len();
            bridge.update(session_id, updates::chunk("agent_message_chunk", &delta));
        }
        EventKind::MessageCompleted {
            item_id,
            role: Role::Assistant,
            text,
        } => {
            let done = shown.remove(&item_id).unwrap_or(0);
            if let Some(rest) = text.get(done..).filter(|rest| !rest.is_empty()) {
                bridge.update(session_id, updates::chunk("agent_message_chunk", rest));
            }
        }
        EventKind::ReasoningDelta { delta, .. } => {
            bridge.update(session_id, updates::chunk("agent_thought_chunk", &delta));
        }
        EventKind::ToolCallStarted {
            call_id,
            name,
            arguments,
            ..
        } => {
            bridge.update(
                session_id,
                updates::tool_call(&call_id, &name, &arguments, cwd),
            );
            calls.insert(call_id, Call { name, arguments });
        }
        EventKind::ApprovalRequested(asked) => {
            let params = permissions::request_params(session_id, &asked, cwd);
            let (rpc_id, answer) = bridge.ask("session/request_permission", params);
            let request_id = asked.request_id;
            let call_id = asked.call_id;
            approvals.insert(request_id.clone(), Asking { call_id, rpc_id });
            let bridge = bridge.clone();
            let session_id = session_id.to_owned();
            tokio::spawn(async move {
                // Withdrawn (answered elsewhere) or the bridge ended: nothing to say.
                let Some(answer) = answer.await else {
                    return;
                };
                let decision = permissions::decision(&answer);
                if let Err(e) = bridge
                    .client
                    .approval_respond(&session_id, &request_id, decision)
                    .await
                {
                    tracing::warn!("acp: approval/respond {request_id}: {e}");
                }
            });
        }
        EventKind::ApprovalResolved {
            request_id,
            decision,
            ..
        } => {
            if let Some(asking) = approvals.remove(&request_id) {
                // Answered by another client (or by policy): the client's question is moot.
                bridge.withdraw(asking.rpc_id);
                if decision != Decision::Deny {
                    bridge.update(session_id, updates::tool_running(&asking.call_id));
                }
            }
        }
        EventKind::ToolCallCompleted {
            call_id,
            status,
            output,
            diff,
            ..
        } => {
            let call = calls.remove(&call_id);
            let (name, args) = match &call {
                Some(c) => (c.name.as_str(), &c.arguments),
                None => ("", &Value::Null),
            };
            bridge.update(
                session_id,
                updates::tool_done(&call_id, name, args, cwd, status, &output, diff.as_deref()),
            );
        }
        EventKind::TodoUpdated { todos } => bridge.update(session_id, updates::plan(&todos)),
        // Loaded mid-reply: what streamed before the editor came, then the live deltas.
        EventKind::Synced { in_progress, .. } => {
            for item in in_progress.iter().filter(|i| !i.text.is_empty()) {
                let kind = match item.kind {
                    amber_proto::StreamKind::Message => {
                        *shown.entry(item.item_id.clone()).or_default() += item.text.len();
                        "agent_message_chunk"
                    }
                    amber_proto::StreamKind::Reasoning => "agent_thought_chunk",
                };
                bridge.update(session_id, updates::chunk(kind, &item.text));
            }
        }
        EventKind::TurnCompleted {
            stop_reason, error, ..
        } => {
            if let Some(turn_id) = turn_id {
                followed.turn_ended(&turn_id, updates::stop_reason(stop_reason, error.as_ref()));
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
        | EventKind::RoutineFinished { .. } => {}
    }
}

/// `session/load`: the history as `session/update` notifications — user and agent
/// messages as chunks, tool calls with their final status and output.
pub(crate) fn replay(bridge: &Bridge, session_id: &str, messages: &[Message], cwd: &Path) {
    let mut names: HashMap<&str, (&str, Value)> = HashMap::new();
    for m in messages {
        match m.role {
            Role::User if !m.content.is_empty() => {
                bridge.update(session_id, updates::chunk("user_message_chunk", &m.content));
            }
            Role::Assistant => {
                if !m.content.is_empty() {
                    bridge.update(
                        session_id,
                        updates::chunk("agent_message_chunk", &m.content),
                    );
                }
                for call in &m.tool_calls {
                    let args: Value = serde_json::from_str(&call.arguments).unwrap_or(Value::Null);
                    bridge.update(
                        session_id,
                        updates::tool_call(&call.id, &call.name, &args, cwd),
                    );
                    names.insert(&call.id, (&call.name, args));
                }
            }
            Role::Tool => {
                let Some(call_id) = m.tool_call_id.as_deref() else {
                    continue;
                };
                let envelope: Value = serde_json::from_str(&m.content).unwrap_or(Value::Null);
                let status = match envelope["status"].as_str() {
                    Some("ok") => amber_proto::ToolStatus::Ok,
                    Some("denied") => amber_proto::ToolStatus::Denied,
                    _ => amber_proto::ToolStatus::Error,
                };
                let output = envelope["output"].as_str().unwrap_or(&m.content);
                let (name, args) = names
                    .get(call_id)
                    .map(|(n, a)| (*n, a.clone()))
                    .unwrap_or(("", Value::Null));
                bridge.update(
                    session_id,
                    updates::tool_done(call_id, name, &args, cwd, status, output, None),
                );
            }
            _ => {}
        }
    }
}
