//! Background sub-agents as a session feature: `task {background: true}` makes each task a
//! child session of its own (listed, attachable, replayable), the parent gets a handle at
//! once, and the child's result reaches the parent's conversation once, as a `task_wait`
//! result (`agent::delivery`), whenever it finishes.
//!
//! **Durability.** A child's tie to its parent is its `SessionInfo.parent`, kept in its
//! metadata from creation. Its result is written there (state `done`) before its turn's
//! `turn_completed`; the parent's tool message that carries it is the record that it was
//! delivered (the parent reads those back when it loads, and refuses a result twice), and
//! the child is then marked `delivered`. When the daemon starts, every result not marked
//! delivered is offered again, and a child a crash cut short is told once to go on.
//!
//! **Caps.** A child runs under its own caps (`task {max_*}` within `[agents]
//! subagent_max_*`), kept by a `SubagentBudget` like a foreground sub-agent's, and at most
//! `[agents] max_running` children run in the daemon, `max_running_per_parent` per parent:
//! the others wait as `queued` and start in the order they were made. A child gets none of
//! the parent-only tools, so no child starts another.

use std::sync::{Arc, Mutex, Weak};

use amber_proto::sync::Locked;
use amber_proto::{
    ChildCaps, ChildResult, ChildState, LimitScope, ParentLink, SessionInfo, SessionNewParams,
    SessionState, StopReason, Usage,
};
use amber_tools::ToolRegistry;
use amber_tools::session::{BackgroundAgents, ChildStatus, PARENT_ONLY_TOOLS, SubTask};
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::agent::TurnOutcome;
use crate::agent::delivery::Delivery;
use crate::agent::ledger::{Amount, Caps, Spent, spent_cap};
use crate::agent::metered::{Refusal, RequestMeta};
use crate::config::SubagentCaps;
use crate::session::SessionError;
use crate::session::SessionShared;
use crate::session::directory::Directory;
use crate::session::feature::{AdvisedVerdict, ToolAdvice};
use crate::session::feature::{Attach, Feature, NewSession, SessionFeature, Turn};
use crate::session::inbox::Offer;
use crate::session::services::Services;
use crate::session::subagent_budget::SubagentBudget;
use crate::session::subagents::{FanoutEstimate, Profile};
use amber_tools::gate::GateCall;

/// The prompt that tells a child cut short by a daemon stop to go on.
fn continuation(task: &str) -> String {
    format!(
        "[amber] The daemon stopped while you worked on your task, and is back. Go on \
         where you were and finish it; then reply with your report. Your task was:\n\n{task}"
    )
}

/// The feature: daemon-wide, it keeps the slots children run in.
pub(crate) struct BackgroundAgentsFeature {
    slots: Arc<Mutex<()>>,
}

impl BackgroundAgentsFeature {
    pub(crate) fn new() -> Self {
        BackgroundAgentsFeature {
            slots: Arc::new(Mutex::new(())),
        }
    }
}

impl Feature for BackgroundAgentsFeature {
    /// A child's tie to its parent comes only from the daemon (`task`), never the wire.
    fn shape_info(&self, new: &NewSession<'_>, info: &mut SessionInfo) -> Result<(), SessionError> {
        info.parent.clone_from(&new.params.parent);
        Ok(())
    }

    fn attach(&self, session: &Attach<'_>) -> Option<Arc<dyn SessionFeature>> {
        let services = session.services.clone();
        // A foreground sub-agent's end frees a slot queued children may take (set once).
        let (weak, slots) = (Arc::downgrade(&services), self.slots.clone());
        services.subagent_slots.set_on_freed(Box::new(move || {
            let (Some(services), slots) = (weak.upgrade(), slots.clone()) else {
                return;
            };
            let Some(directory) = services.directory.get().cloned() else {
                return;
            };
            tokio::task::spawn_blocking(move || {
                start_queued(directory.as_ref(), &services, &slots);
            });
        }));
        Some(match &session.meta.info.parent {
            Some(link) => Arc::new(Child::new(link, &session.meta.info, services, &self.slots)),
            None => Arc::new(Parent {
                id: session.id.to_owned(),
                caps: caps_of(&session.meta.info),
                agents: Arc::new(ParentAgents {
                    shared: session.session.clone(),
                    services,
                    slots: self.slots.clone(),
                }),
            }),
        })
    }

    /// Offers again every result not yet delivered, tells children a crash cut short to
    /// go on (once), and starts queued children.
    fn resumed(&self, services: &Services) {
        let Some(directory) = services.directory.get() else {
            return;
        };
        for info in directory.children(None) {
            let Some(link) = &info.parent else { continue };
            match (&link.state, &link.result) {
                (ChildState::Done, Some(result)) => {
                    deliver(directory, &info.session_id, link, result)
                }
                (ChildState::Running, None) if info.state == SessionState::Idle => {
                    resume_child(directory, &info, link);
                }
                _ => {}
            }
        }
        start_queued(directory.as_ref(), services, &self.slots);
    }
}

/// A child that stopped working with no result: told to go on, once; the second time its
/// result is that it was interrupted.
fn resume_child(directory: &Arc<dyn Directory>, info: &SessionInfo, link: &ParentLink) {
    let id = &info.session_id;
    if link.resumed {
        let result = ChildResult {
            stop_reason: StopReason::Error,
            text: "[sub-agent stopped: interrupted: the daemon stopped twice while it worked]"
                .to_owned(),
        };
        if record(directory.as_ref(), id, &result) {
            deliver(directory, id, link, &result);
        }
        return;
    }
    let marked = directory.edit_info(id, &mut |info| {
        if let Some(link) = &mut info.parent {
            link.resumed = true;
        }
    });
    if let Err(err) = marked.and_then(|_| directory.prompt(id, continuation(&link.prompt))) {
        tracing::warn!(session = %id, %err, "cannot resume the background sub-agent");
    }
}

/// Writes a child's result (state `done`) unless it has one; whether it wrote it.
fn record(directory: &dyn Directory, child: &str, result: &ChildResult) -> bool {
    let mut wrote = false;
    let edited = directory.edit_info(child, &mut |info| {
        if let Some(link) = &mut info.parent
            && link.result.is_none()
        {
            link.result = Some(result.clone());
            link.state = ChildState::Done;
            wrote = true;
        }
    });
    if let Err(err) = edited {
        tracing::warn!(session = %child, %err, "cannot record the background sub-agent's result");
    }
    wrote
}

/// Offers a child's result to its parent; marks it delivered once the parent has it.
fn deliver(directory: &Arc<dyn Directory>, child: &str, link: &ParentLink, result: &ChildResult) {
    let mark = {
        let directory = directory.clone();
        let child = child.to_owned();
        move || {
            // Off the parent's actor: marking may load the child.
            tokio::task::spawn_blocking(move || mark_delivered(directory.as_ref(), &child));
        }
    };
    let delivery = Delivery {
        id: link.agent_id.clone(),
        tool: "task_wait".to_owned(),
        arguments: serde_json::json!({ "agentIds": [link.agent_id] }),
        output: format!(
            "Background sub-agent {} ({}, session {child}) stopped: {}\n\n{}",
            link.agent_id,
            link.task,
            result.stop_reason.as_str(),
            result.text
        ),
        ok: result.stop_reason == StopReason::EndTurn,
        delivered: Some(Box::new(mark)),
    };
    match directory.offer(&link.session_id, delivery) {
        Ok(Offer::Duplicate) => mark_delivered(directory.as_ref(), child),
        Ok(_) => {}
        Err(err) => tracing::warn!(
            session = %child, parent = %link.session_id, %err,
            "cannot deliver the background sub-agent's result"
        ),
    }
}

fn mark_delivered(directory: &dyn Directory, child: &str) {
    let edited = directory.edit_info(child, &mut |info| {
        if let Some(link) = &mut info.parent {
            link.state = ChildState::Delivered;
        }
    });
    if let Err(err) = edited {
        tracing::warn!(session = %child, %err, "cannot mark the result delivered");
    }
}

/// Starts queued children, oldest first, while the slots allow.
fn start_queued(directory: &dyn Directory, services: &Services, slots: &Mutex<()>) {
    let _slots = slots.locked();
    let agents = &services.live().config.agents;
    let (most, most_per_parent) = (agents.max_running(), agents.max_running_per_parent());
    let mut children = directory.children(None);
    by_order(&mut children);
    let running = |info: &SessionInfo| info.parent.as_ref().is_some_and(ParentLink::running);
    // Foreground sub-agents running take slots too.
    let mut total =
        children.iter().filter(|i| running(i)).count() + services.subagent_slots.foreground();
    let mut per_parent: std::collections::HashMap<String, usize> = Default::default();
    for info in children.iter().filter(|i| running(i)) {
        if let Some(link) = &info.parent {
            *per_parent.entry(link.session_id.clone()).or_default() += 1;
        }
    }
    for info in &children {
        let Some(link) = &info.parent else { continue };
        if link.state != ChildState::Queued || total >= most {
            continue;
        }
        let mine = per_parent.entry(link.session_id.clone()).or_default();
        if *mine >= most_per_parent {
            continue;
        }
        let started = directory
            .edit_info(&info.session_id, &mut |info| {
                if let Some(link) = &mut info.parent {
                    link.state = ChildState::Running;
                }
            })
            .and_then(|_| directory.prompt(&info.session_id, link.prompt.clone()));
        match started {
            Ok(_) => {
                *mine += 1;
                total += 1;
            }
            Err(err) => {
                tracing::warn!(session = %info.session_id, %err, "cannot start the background sub-agent");
            }
        }
    }
}

/// A session's budgets (`maxBudgetUsd`, `maxTokensTotal`), which its children spend too.
fn caps_of(info: &SessionInfo) -> Caps {
    Caps {
        usd: info.max_budget_usd,
        tokens: info.max_tokens_total,
        requests: None,
    }
}

/// Which of `parent`'s budgets its spend and its children's together reached, if one did.
fn family_spent(
    directory: &dyn Directory,
    parent: &str,
    caps: Caps,
    own: &Usage,
    scope: LimitScope,
) -> Option<Spent> {
    if !caps.any() {
        return None;
    }
    let children = directory.children_usage(parent);
    if children.total_tokens == 0 && children.cost_usd.is_none() {
        return None;
    }
    let mut total = *own;
    total.add(&children);
    spent_cap(scope, caps, Amount::spent(&total, 0)).map(|spent| Spent {
        message: format!(
            "{} (its background sub-agents' spend included)",
            spent.message
        ),
        ..spent
    })
}

/// A session that may start background children: its budgets bind them, and count what
/// they spent.
struct Parent {
    id: String,
    caps: Caps,
    agents: Arc<ParentAgents>,
}

impl Parent {
    fn spent(&self) -> Option<Spent> {
        let directory = self.agents.services.directory.get()?;
        let own = self.agents.shared.upgrade()?.info().usage;
        family_spent(
            directory.as_ref(),
            &self.id,
            self.caps,
            &own,
            LimitScope::Session,
        )
    }
}

impl SessionFeature for Parent {
    fn started(&self, shared: &Arc<SessionShared>, _restored: bool) {
        shared.tools.set_background(self.agents.clone());
    }

    /// Its children's spend counts against its budgets: a spent budget starts no spawn
    /// and no request of its own.
    fn refuses_requests(&self) -> Option<Spent> {
        self.spent()
    }

    fn reserve<'a>(
        &'a self,
        _request: RequestMeta<'a>,
        _cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<Option<Box<dyn Send + 'a>>, Refusal>> {
        let refused = self.spent().map(Refusal::BudgetExceeded);
        Box::pin(std::future::ready(refused.map_or(Ok(None), Err)))
    }

    /// Cost before fan-out: a `task` call that may spend more than `[agents]
    /// approve_fanout_usd`, or cannot say, asks a person first (headless: denied).
    fn before_tool<'a>(
        &'a self,
        turn: &'a Turn<'a>,
        call: &'a GateCall<'a>,
    ) -> BoxFuture<'a, ToolAdvice> {
        let advice = (|| {
            if call.tool.name() != "task" {
                return None;
            }
            let threshold = self
                .agents
                .services
                .live()
                .config
                .agents
                .approve_fanout_usd?;
            let tasks = amber_tools::task::tasks_of(call.args).ok()?;
            let estimate = FanoutEstimate::of(turn.shared, &self.agents.services, &tasks);
            (estimate.unbounded > 0 || estimate.most > threshold).then(|| ToolAdvice {
                verdict: AdvisedVerdict::Ask(format!(
                    "fan-out: {} (over [agents] approve_fanout_usd = ${:.2})",
                    estimate.describe(),
                    threshold.usd()
                )),
                arguments: None,
            })
        })();
        Box::pin(std::future::ready(advice.unwrap_or_default()))
    }
}

/// The parent's side, as its tools reach it.
struct ParentAgents {
    shared: Weak<SessionShared>,
    services: Arc<Services>,
    slots: Arc<Mutex<()>>,
}

impl ParentAgents {
    fn directory(&self) -> Result<&Arc<dyn Directory>, String> {
        self.services
            .directory
            .get()
            .ok_or_else(|| "background sub-agents are not available yet".to_owned())
    }

    fn children(&self, shared: &SessionShared, directory: &dyn Directory) -> Vec<SessionInfo> {
        let mut children = directory.children(Some(&shared.id));
        by_order(&mut children);
        children
    }

    /// A child as the parent sees it: `done` only once its result reached the inbox.
    fn status_of(shared: &SessionShared, info: &SessionInfo) -> Option<ChildStatus> {
        let link = info.parent.as_ref()?;
        let arrived = shared.holds(&link.agent_id);
        let state = match link.state {
            _ if arrived && shared.delivered(&link.agent_id) => "delivered",
            _ if arrived => "done",
            ChildState::Queued => "queued",
            _ => "running",
        };
        Some(ChildStatus {
            agent_id: link.agent_id.clone(),
            session_id: info.session_id.clone(),
            task: link.task.clone(),
            state: state.to_owned(),
            stop_reason: link
                .result
                .as_ref()
                .map(|r| r.stop_reason.as_str().to_owned()),
            tokens: info.usage.total_tokens,
            cost_usd: info.usage.cost_usd.map(|c| c.usd()),
        })
    }

    async fn spawn_all(
        &self,
        tasks: Vec<SubTask>,
        cancel: &CancellationToken,
    ) -> Result<Vec<ChildStatus>, String> {
        let shared = self
            .shared
            .upgrade()
            .ok_or_else(|| "the session is closing".to_owned())?;
        let directory = self.directory()?;
        let parent = shared.info();
        if parent.environment.is_some() {
            return Err(
                "background sub-agents run only in a session whose workspace is on this \
                 machine; use a foreground task here"
                    .into(),
            );
        }
        if let Some(spent) = shared.refuses_requests() {
            return Err(format!("no sub-agent started: {}", spent.message));
        }
        let turn_id = shared.lock_live().turn_id.clone().unwrap_or_default();
        let profiles =
            Profile::resolve_all(&shared, &self.services, &turn_id, cancel, &tasks).await?;
        let mut made = Vec::new();
        for (task, profile) in tasks.into_iter().zip(profiles) {
            let agent_id = format!("agent_{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
            let label = task
                .description
                .clone()
                .unwrap_or_else(|| task.prompt.chars().take(80).collect());
            let mode = profile.mode_ceiling.map_or(parent.mode, |ceiling| {
                amber_policy::narrower_mode(parent.mode, ceiling)
            });
            let params = SessionNewParams {
                cwd: parent.cwd.clone(),
                mode: Some(mode),
                model: Some(profile.model),
                provider: profile.provider,
                title: Some(label.clone()),
                system_prompt: Some(profile.system_prompt),
                parent: Some(ParentLink {
                    session_id: shared.id.clone(),
                    agent_id,
                    task: label,
                    prompt: task.prompt,
                    order: order_now(),
                    state: ChildState::Queued,
                    caps: child_caps(profile.caps),
                    result: None,
                    resumed: false,
                }),
                ..SessionNewParams::default()
            };
            let info = directory.create(params).map_err(|e| e.to_string())?;
            made.push(info.session_id);
        }
        let (directory, services, slots) =
            (directory.clone(), self.services.clone(), self.slots.clone());
        tokio::task::spawn_blocking(move || start_queued(directory.as_ref(), &services, &slots))
            .await
            .map_err(|e| e.to_string())?;
        let directory = self.directory()?;
        Ok(made
            .iter()
            .filter_map(|id| directory.info(id).ok())
            .filter_map(|info| Self::status_of(&shared, &info))
            .collect())
    }
}

/// A child's place in the queue: the time it was made, in nanoseconds (children made one
/// after another get rising values).
fn order_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Children in the order they were made.
fn by_order(children: &mut [SessionInfo]) {
    children.sort_by_key(|info| {
        (
            info.parent.as_ref().map_or(0, |l| l.order),
            info.created_at.clone(),
        )
    });
}

fn child_caps(caps: SubagentCaps) -> ChildCaps {
    ChildCaps {
        max_tokens: caps.tokens,
        max_requests: caps.requests,
        max_seconds: caps.seconds,
        max_usd: caps.usd,
    }
}

impl BackgroundAgents for ParentAgents {
    fn spawn<'a>(
        &'a self,
        tasks: Vec<SubTask>,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<Vec<ChildStatus>, String>> {
        Box::pin(self.spawn_all(tasks, cancel))
    }

    fn status(&self) -> Vec<ChildStatus> {
        let (Some(shared), Ok(directory)) = (self.shared.upgrade(), self.directory()) else {
            return Vec::new();
        };
        self.children(&shared, directory.as_ref())
            .iter()
            .filter_map(|info| Self::status_of(&shared, info))
            .collect()
    }

    fn cancel(&self, agent_id: &str) -> Result<ChildStatus, String> {
        let shared = self
            .shared
            .upgrade()
            .ok_or_else(|| "the session is closing".to_owned())?;
        let directory = self.directory()?;
        let child = self
            .children(&shared, directory.as_ref())
            .into_iter()
            .find(|info| info.parent.as_ref().is_some_and(|l| l.agent_id == agent_id))
            .ok_or_else(|| format!("no background sub-agent `{agent_id}`"))?;
        let link = child.parent.clone().ok_or("no link")?;
        match link.state {
            ChildState::Queued => {
                let result = ChildResult {
                    stop_reason: StopReason::Cancelled,
                    text: "[sub-agent stopped: cancelled before it started]".to_owned(),
                };
                if record(directory.as_ref(), &child.session_id, &result) {
                    deliver(directory, &child.session_id, &link, &result);
                }
            }
            ChildState::Running => {
                directory
                    .cancel(&child.session_id)
                    .map_err(|e| e.to_string())?;
            }
            ChildState::Done | ChildState::Delivered => {}
        }
        let info = directory
            .info(&child.session_id)
            .map_err(|e| e.to_string())?;
        Self::status_of(&shared, &info).ok_or_else(|| "no link".to_owned())
    }
}

/// A background sub-agent's side: its caps, its parent's budget, its tools, and its
/// result.
struct Child {
    session_id: String,
    parent: String,
    budget: SubagentBudget,
    services: Arc<Services>,
    slots: Arc<Mutex<()>>,
}

impl Child {
    fn new(
        link: &ParentLink,
        info: &SessionInfo,
        services: Arc<Services>,
        slots: &Arc<Mutex<()>>,
    ) -> Child {
        let caps = SubagentCaps {
            tokens: link.caps.max_tokens,
            requests: link.caps.max_requests,
            seconds: link.caps.max_seconds,
            usd: link.caps.max_usd,
        };
        // Its clock runs from its creation, across restarts.
        let age = humantime::parse_rfc3339_weak(&info.created_at)
            .ok()
            .and_then(|created| created.elapsed().ok())
            .unwrap_or_default();
        Child {
            session_id: info.session_id.clone(),
            parent: link.session_id.clone(),
            budget: SubagentBudget::resume(caps, info.usage, age),
            services,
            slots: slots.clone(),
        }
    }

    /// Its parent's budget, which it spends too, when that is reached: before each of its
    /// requests, so a spent parent halts it (overshoot: the requests already in flight,
    /// one per child session).
    fn parent_spent(&self) -> Option<Spent> {
        let directory = self.services.directory.get()?;
        let parent = directory.info(&self.parent).ok()?;
        family_spent(
            directory.as_ref(),
            &self.parent,
            caps_of(&parent),
            &parent.usage,
            LimitScope::Parent,
        )
    }

    /// The result of the turn that ended with `outcome`.
    fn result_of(&self, outcome: &TurnOutcome) -> ChildResult {
        let mut stop = outcome.stop;
        let mut limit = outcome.error.as_ref().and_then(|e| e.limit);
        let mut why = outcome.error.as_ref().map(|e| e.message.clone());
        // Cut by its own deadline, not by a person: the wall-clock cap stopped it.
        if stop == StopReason::Cancelled
            && let Some(Spent {
                message,
                limit: cap,
            }) = self.budget.out_of_time()
        {
            stop = StopReason::BudgetExceeded;
            limit = cap;
            why = Some(message);
        }
        let text = if stop == StopReason::EndTurn {
            outcome.text.clone()
        } else {
            let cap = limit.map(|l| format!(" ({l})")).unwrap_or_default();
            let why = why.map(|w| format!(": {w}")).unwrap_or_default();
            let partial = if outcome.text.is_empty() {
                String::new()
            } else {
                format!("\nLast reply: {}", outcome.text)
            };
            format!("[sub-agent stopped: {}{cap}{why}]{partial}", stop.as_str())
        };
        ChildResult {
            stop_reason: stop,
            text,
        }
    }
}

impl SessionFeature for Child {
    /// Its deadline cancels its running turn, so a hung tool call ends with it.
    fn started(&self, shared: &Arc<SessionShared>, _restored: bool) {
        if let Some(left) = self.budget.time_left() {
            let session = Arc::downgrade(shared);
            let closed = shared.closed.clone();
            tokio::spawn(async move {
                tokio::select! {
                    () = tokio::time::sleep(left) => {
                        if let Some(shared) = session.upgrade() {
                            shared.cancel();
                        }
                    }
                    () = closed.cancelled() => {}
                }
            });
        }
    }

    fn offer_tools(&self, tools: &mut ToolRegistry) {
        for name in PARENT_ONLY_TOOLS {
            tools.remove(name);
        }
    }

    fn allows_tool(&self, tool: &str) -> bool {
        !PARENT_ONLY_TOOLS.contains(&tool)
    }

    fn usage_added(&self, usage: &Usage, _model: &str) {
        self.budget.add(usage);
    }

    fn refuses_requests(&self) -> Option<Spent> {
        self.budget.exceeded().or_else(|| self.parent_spent())
    }

    fn reserve<'a>(
        &'a self,
        request: RequestMeta<'a>,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<Option<Box<dyn Send + 'a>>, Refusal>> {
        Box::pin(async move {
            if let Some(spent) = self.parent_spent() {
                return Err(Refusal::BudgetExceeded(spent));
            }
            let hold = self.budget.reserve(request.estimate, cancel).await?;
            Ok(hold.map(|hold| Box::new(hold) as Box<dyn Send + 'a>))
        })
    }

    /// Its first task's end is its result: written before `turn_completed`, then offered to
    /// the parent; a later turn (a person's prompt) changes nothing.
    fn turn_ending<'a>(
        &'a self,
        turn: &'a Turn<'a>,
        outcome: &'a TurnOutcome,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let result = self.result_of(outcome);
            let link = {
                let mut live = turn.shared.lock_live();
                let Some(link) = &mut live.info.parent else {
                    return;
                };
                if link.result.is_some() {
                    return;
                }
                link.result = Some(result.clone());
                link.state = ChildState::Done;
                link.clone()
            };
            turn.shared.save_meta();
            let Some(directory) = self.services.directory.get().cloned() else {
                return;
            };
            let (services, slots, child) = (
                self.services.clone(),
                self.slots.clone(),
                self.session_id.clone(),
            );
            // Off this actor: the parent may have to be loaded.
            tokio::task::spawn_blocking(move || {
                deliver(&directory, &child, &link, &result);
                start_queued(directory.as_ref(), &services, &slots);
                // A slot is free: a foreground sub-agent waiting for one may start.
                services.subagent_slots.freed();
            });
        })
    }
}
