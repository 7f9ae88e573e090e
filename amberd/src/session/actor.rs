//! The session actor: the one task that owns and writes a session's `Context`.
//!
//! Commands arrive on an unbounded queue, so prompts sent while a turn runs wait their
//! turn in order. Each prompt is already durable when it arrives (`prompt_queued`, logged by
//! `SessionHandle::queue_prompt`); its `turn_started` here follows that event. Cancellation does not go through the queue: the running turn's token
//! lives in `SessionShared` so `session/cancel` reaches it at once.

use std::sync::Arc;

use amber_proto::SessionCompactResult;
use amber_proto::{CostUsd, EventKind, Mode, SessionChangeKind, SessionState, Usage};
use amber_store::context::Context;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::SessionShared;
use super::feature::{Blocked, Turn, TurnStart};
use super::gate::SessionGate;
use super::services::Services;
use crate::agent::compact::{CompactEnv, compact_context};
use crate::agent::metered::{Metered, Refusal, RequestMeta, Reservation};
use crate::agent::output_schema::OutputSchema;
use crate::agent::{self, TurnEnv, TurnHost};
use amber_tools::gate::Gate;
use futures::future::BoxFuture;

/// What a prompt asks of its turn besides its text (`session/prompt`'s extensions). Not
/// persisted: a prompt restored from the log after a restart runs without them.
#[derive(Debug, Clone, Default)]
pub(crate) struct PromptOptions {
    /// `outputSchema`, compiled when the prompt was accepted.
    pub output_schema: Option<Arc<OutputSchema>>,
    /// `maxIterations`: replaces the session's cap for this turn only.
    pub max_iterations: Option<u32>,
}

/// Work for the actor.
#[derive(Debug)]
pub(crate) enum Command {
    Prompt {
        turn_id: String,
        text: String,
        options: PromptOptions,
    },
    /// `session/compact`: compact now, between turns.
    Compact {
        reply: oneshot::Sender<Result<SessionCompactResult, String>>,
    },
    /// `/clear`: forget the conversation (the system prompt stays), between turns.
    Clear { reply: oneshot::Sender<usize> },
    /// A feature's own work on the context, between turns (a rewind).
    BetweenTurns(BetweenTurns),
}

/// Work the actor runs with the session's context, between turns.
pub(crate) struct BetweenTurns(pub(crate) Box<dyn ContextWork>);

/// A one-off job on a session's context, run by its actor.
pub(crate) trait ContextWork:
    for<'a> FnOnce(&'a Arc<SessionShared>, &'a mut Context) -> BoxFuture<'a, ()> + Send
{
}

impl<F> ContextWork for F where
    F: for<'a> FnOnce(&'a Arc<SessionShared>, &'a mut Context) -> BoxFuture<'a, ()> + Send
{
}

impl std::fmt::Debug for BetweenTurns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BetweenTurns")
    }
}

/// Runs until the command queue closes (session deleted or daemon shutting down).
pub(crate) async fn run(
    shared: Arc<SessionShared>,
    services: Arc<Services>,
    mut commands: mpsc::UnboundedReceiver<Command>,
    mut context: Context,
) {
    // Before any command: what a crash cut short (a rewind) is finished first.
    let features = &shared.features;
    features.recover(&shared, &mut context).await;
    loop {
        let command = tokio::select! {
            // Closing first: a stopping session starts no queued prompt. Those stay
            // waiting in the log (`prompt_queued` without `turn_started`) for the next load.
            biased;
            () = shared.closed.cancelled() => None,
            command = commands.recv() => command,
        };
        let Some(command) = command else { break };
        match command {
            Command::Prompt {
                turn_id,
                text,
                options,
            } => {
                run_prompt(&shared, &services, &mut context, &turn_id, &text, &options).await;
            }
            Command::Compact { reply } => {
                let result = compact_now(&shared, &services, &mut context).await;
                // The caller may have gone away; the compaction stands either way.
                let _ = reply.send(result);
            }
            Command::Clear { reply } => {
                let removed = clear_context(&shared, &mut context);
                let _ = reply.send(removed);
            }
            Command::BetweenTurns(BetweenTurns(work)) => work(&shared, &mut context).await,
        }
    }
    shared.finish();
    tracing::debug!(session = %shared.id, "session actor stopped");
}

async fn run_prompt(
    shared: &Arc<SessionShared>,
    services: &Services,
    context: &mut Context,
    turn_id: &str,
    text: &str,
    options: &PromptOptions,
) {
    let cancel = shared.closed.child_token();
    shared.begin_turn(turn_id, cancel.clone());
    let mut host = SessionTurnHost {
        shared,
        turn_id,
        price: services
            .llm
            .price(shared.provider().as_deref(), &shared.model()),
        extra_context: None,
        gate: SessionGate {
            shared,
            services,
            turn_id,
            cancel: &cancel,
            mode_ceiling: None,
        },
    };
    let started_seq = shared.hub.publish(
        Some(turn_id),
        EventKind::TurnStarted {
            prompt: text.to_owned(),
        },
    );
    // Before the features: new or changed workspace configuration is put to the user.
    shared
        .trust
        .trust_for_turn(shared, services, turn_id, &cancel)
        .await;
    ensure_system_prompt(shared, context);
    let start = TurnStart {
        turn: Turn {
            shared,
            services,
            turn_id,
            cancel: &cancel,
        },
        prompt: text,
        started_seq: started_seq.unwrap_or(0),
        context_len: context.len(),
        context_head: context.head(),
    };
    match shared.features.before_turn(&start).await {
        Ok(added) if !added.is_empty() => host.extra_context = Some(added.join("\n\n")),
        Ok(_) => {}
        Err(blocked) => {
            prompt_blocked(shared, services, &host, turn_id, blocked);
            return;
        }
    }
    // Stats the instruction files (reads them only if they changed): before the turn's
    // first request, so an edited AGENTS.md applies from this turn on.
    shared.head.refresh(&services.workspace_git()).await;
    let head = shared.head.head(&shared.system_prompt);

    shared.follow_configured_model(&services.live().endpoint.model);
    let model = shared.model();
    let provider = shared.provider();
    let llm = services.llm.client(provider.as_deref());
    let compaction = services.compaction_for(provider.as_deref());
    // One snapshot of the settings for the whole turn (a config edit applies to the next).
    let live = services.live();
    let offered = || {
        let mut tools = shared.offered_tools(services.tools());
        crate::agent::tool_search::arrange(
            &mut tools,
            &crate::agent::tool_search::Deferral {
                mode: live.config.mcp.tool_search,
                min_tokens: live.config.mcp.tool_search_min_tokens,
                lazy: services.mcp_lazy(),
            },
            &shared.tools.loaded_tools,
        );
        tools
    };
    let tools = offered();
    let env = TurnEnv {
        session_id: &shared.id,
        llm: llm.as_ref().map_err(String::as_str),
        model: &model,
        tools: &tools,
        refresh_tools: Some(&offered),
        session_tools: &shared.tools,
        head: &head,
        workspace: &shared.workspace,
        limits: &live.limits,
        max_iterations: options
            .max_iterations
            .unwrap_or_else(|| shared.max_iterations(live.config.agent.max_tool_iterations)),
        output_schema: options.output_schema.as_deref(),
        confirm_finish: live.config.agent.confirm_finish,
        confirm_max_tokens: live.config.agent.confirm_max_tokens,
        compaction: &compaction,
        skills_dir: Some(&shared.skills_dir),
        cancel: &cancel,
        host: &host,
    };
    let outcome = agent::run_turn(context, text, &env).await;
    shared
        .features
        .turn_ending(&turn(shared, services, turn_id, &cancel), &outcome)
        .await;
    shared.publish_messages(context);
    shared.end_turn();
    host.emit(EventKind::TurnCompleted {
        stop_reason: outcome.stop,
        error: outcome.error,
        usage: outcome.usage,
        output: outcome.output,
        cost_usd: None,
        session_cost_usd: None,
        confirm_usage: outcome.confirm_usage,
    });
    shared
        .features
        .turn_ended(&turn(shared, services, turn_id, &cancel), outcome.stop);
    shared.inbox_turn_ended();
    // After the event, not before: the log is the record of the turn (recovery reads it),
    // the metadata only its summary, and its atomic replace (two fsyncs) need not delay
    // what the client waits for.
    shared.save_meta();
}

/// A feature blocked the prompt: the turn ends at once, `error` with the feature's code
/// and reason; the prompt never reaches the context or the model.
fn prompt_blocked(
    shared: &Arc<SessionShared>,
    services: &Services,
    host: &SessionTurnHost<'_>,
    turn_id: &str,
    blocked: Blocked,
) {
    let Blocked { code, reason } = blocked;
    host.emit(EventKind::Error {
        code: code.to_owned(),
        message: reason.clone(),
        retryable: false,
    });
    shared.end_turn();
    host.emit(EventKind::TurnCompleted {
        stop_reason: amber_proto::StopReason::Error,
        error: Some(amber_proto::ErrorInfo::new(code, reason)),
        usage: Usage::default(),
        output: None,
        cost_usd: None,
        session_cost_usd: None,
        confirm_usage: None,
    });
    let cancel = CancellationToken::new();
    shared.features.turn_ended(
        &turn(shared, services, turn_id, &cancel),
        amber_proto::StopReason::Error,
    );
    shared.inbox_turn_ended();
    shared.save_meta();
}

fn turn<'a>(
    shared: &'a SessionShared,
    services: &'a Services,
    turn_id: &'a str,
    cancel: &'a CancellationToken,
) -> Turn<'a> {
    Turn {
        shared,
        services,
        turn_id,
        cancel,
    }
}

/// One model request made for the session outside its turn loop (an MCP server's sampling
/// request, while one of its tools runs in turn `turn_id`): metered like a turn's — the
/// session's budgets reserve it first, its usage counts to the session.
pub(crate) async fn request_for_session(
    shared: &SessionShared,
    services: &Services,
    turn_id: &str,
    request: &amber_llm::ChatRequest,
    cancel: &CancellationToken,
) -> Result<amber_llm::ChatResponse, String> {
    let provider = shared.provider();
    let llm = services.llm.client(provider.as_deref())?;
    let host = SessionTurnHost {
        shared,
        turn_id,
        price: services.llm.price(provider.as_deref(), &shared.model()),
        extra_context: None,
        gate: SessionGate {
            shared,
            services,
            turn_id,
            cancel,
            mode_ceiling: None,
        },
    };
    Metered::new(&llm, &host)
        .request(request, None, cancel, &mut |_| {})
        .await
        .map_err(|e| match e {
            crate::agent::metered::RequestError::BudgetExceeded(spent) => spent.message,
            crate::agent::metered::RequestError::Api(err) => err.to_string(),
        })
}

/// A manual compaction (`session/compact`), run by the actor between turns.
async fn compact_now(
    shared: &Arc<SessionShared>,
    services: &Services,
    context: &mut Context,
) -> Result<SessionCompactResult, String> {
    // A spent budget compacts nothing: the classify request would be refused anyway.
    if let Some(spent) = shared.refuses_requests() {
        return Err(spent.message);
    }
    let provider = shared.provider();
    let llm = &services.llm.client(provider.as_deref())?;
    let settings = services.compaction_for(provider.as_deref());
    let cancel = shared.closed.child_token();
    shared.begin_turn("", cancel.clone());
    // No turn event tells the watchers: the session runs while it compacts.
    shared.hub.notify_watchers(SessionChangeKind::Updated);
    let host = SessionTurnHost {
        shared,
        turn_id: "",
        price: services.llm.price(provider.as_deref(), &shared.model()),
        extra_context: None,
        gate: SessionGate {
            shared,
            services,
            turn_id: "",
            cancel: &cancel,
            mode_ceiling: None,
        },
    };
    let specs = crate::agent::tool_specs(&shared.offered_tools(services.tools()));
    let model = shared.model();
    shared.head.refresh(&services.workspace_git()).await;
    let head = shared.head.head(&shared.system_prompt);
    // Its requests spend the session's budget like a turn's.
    let metered = Metered::new(llm, &host);
    let env = CompactEnv {
        llm: &metered,
        model: &model,
        tools: &specs,
        head: &head,
        settings: &settings,
        skills_dir: Some(&shared.skills_dir),
        cancel: &cancel,
        host: &host,
    };
    // Manual compaction runs outside a turn: its usage counts only in the session total.
    let result = compact_context(context, &env, &mut amber_proto::Usage::default()).await;
    shared.publish_messages(context);
    shared.end_turn();
    shared.hub.notify_watchers(SessionChangeKind::Updated);
    result
        .map(|(tokens_before, tokens_after)| SessionCompactResult {
            tokens_before,
            tokens_after,
        })
        .map_err(|e| e.to_string())
}

/// Rebuilds the context as just the system prompt (journaled like a compaction rebuild).
/// Returns how many messages were dropped.
fn clear_context(shared: &SessionShared, context: &mut Context) -> usize {
    let removed = context.len().saturating_sub(1);
    context.clear();
    context.push(amber_proto::Message::system(shared.system_prompt.clone()));
    shared.publish_messages(context);
    shared.save_meta();
    removed
}

/// SEED.md: the history always starts with the system prompt.
fn ensure_system_prompt(shared: &SessionShared, context: &mut Context) {
    let has_system = context
        .links()
        .next()
        .is_some_and(|(m, _)| m.role == amber_proto::Role::System);
    if !has_system {
        // Only reachable after a rebuild lost it; restore by replaying behind a fresh head.
        let rest = context.snapshot();
        context.clear();
        context.push(amber_proto::Message::system(shared.system_prompt.clone()));
        for message in rest {
            context.push(message);
        }
    }
}

struct SessionTurnHost<'a> {
    shared: &'a SessionShared,
    turn_id: &'a str,
    /// The session model's price, read when the turn began.
    price: Option<amber_llm::Price>,
    /// What the `user_prompt` hooks added to this turn's model input.
    extra_context: Option<String>,
    gate: SessionGate<'a>,
}

impl TurnHost for SessionTurnHost<'_> {
    fn emit(&self, mut kind: EventKind) {
        // The loop counts its own calls; its sub-agents' run inside the `task` tool.
        if let EventKind::TurnCompleted {
            usage,
            cost_usd,
            session_cost_usd,
            ..
        } = &mut kind
        {
            usage.add(&self.shared.take_subagent_usage());
            // A priced turn that made no request cost nothing, which is worth saying.
            if self.price.is_some() {
                usage.cost_usd.get_or_insert(CostUsd::ZERO);
            }
            *cost_usd = usage.cost_usd;
            *session_cost_usd = self.shared.info().usage.cost_usd.or(*cost_usd);
        }
        // A manual compaction runs outside any turn.
        let turn = Some(self.turn_id).filter(|t| !t.is_empty());
        self.shared.hub.publish(turn, kind);
    }

    fn mode(&self) -> Mode {
        self.shared.mode()
    }

    fn add_usage(&self, usage: &Usage, model: &str) -> Usage {
        self.shared.add_usage(usage, model)
    }

    fn price(&self) -> Option<amber_llm::Price> {
        self.price
    }

    fn goal(&self) -> Option<String> {
        self.shared.features.turn_goal()
    }

    fn goal_checked(&self, met: bool, note: &str) {
        self.shared.features.goal_checked(self.turn_id, met, note);
    }

    fn deliveries(&self) -> Vec<crate::agent::delivery::Delivery> {
        self.shared.take_deliveries()
    }

    fn budget_exceeded(&self) -> Option<crate::agent::ledger::Spent> {
        self.shared.refuses_requests()
    }

    fn reserve<'a>(
        &'a self,
        request: RequestMeta<'a>,
        cancel: &'a CancellationToken,
    ) -> futures::future::BoxFuture<'a, Result<Reservation<'a>, Refusal>> {
        Box::pin(async move {
            let hold = self.shared.features.reserve(request, cancel).await?;
            Ok(Reservation::holding(hold))
        })
    }

    fn context_changed(&self, context: &Context) {
        self.shared.publish_messages(context);
    }

    fn gate(&self) -> &dyn Gate {
        &self.gate
    }

    fn extra_context(&self) -> Option<&str> {
        self.extra_context.as_deref()
    }

    fn before_changes(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.shared.features.before_changes())
    }

    fn after_changes(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.shared.features.after_changes())
    }
}

impl SessionShared {
    fn begin_turn(&self, turn_id: &str, cancel: CancellationToken) {
        let mut live = self.lock_live();
        live.touched = std::time::Instant::now();
        live.cancel = Some(cancel);
        live.turn_id = Some(turn_id.to_owned());
        live.queued = live.queued.saturating_sub(1);
        live.subagent_usage = Usage::default();
        live.inbox.turn_began();
        live.info.state = SessionState::Running;
        live.info.updated_at = crate::clock::now_rfc3339();
    }

    fn end_turn(&self) {
        let mut live = self.lock_live();
        live.touched = std::time::Instant::now();
        live.cancel = None;
        live.turn_id = None;
        // Still busy while prompts wait their turn.
        live.info.state = if live.queued > 0 {
            SessionState::Running
        } else {
            SessionState::Idle
        };
        live.info.updated_at = crate::clock::now_rfc3339();
        drop(live);
        self.settle_marker();
    }
}
